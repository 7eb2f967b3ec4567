//! Failed long-running operations (the local cloud's `operation_failure_rate`): the error
//! names the call that failed, the failed change changes nothing, and a retry without faults
//! converges to one of each part.

use std::collections::BTreeMap;

use hypercloud_cloudprovider::{default_load_balancer_name, Chain, LoadBalancer as _};
use hypercloud_localcloud::faults::{Faults, PerService, Rate};
use serde_json::json;

use super::*;

fn operation_failures(rate: f64) -> Faults {
    Faults {
        operation_failure_rate: Rate(PerService {
            global: None,
            services: BTreeMap::from([(hypercloud_localcloud::Service::Azure, rate)]),
        }),
        ..Faults::default()
    }
}

#[tokio::test]
async fn failed_operations_name_the_call_and_a_retry_converges() {
    let mut site = site("127.7", "127.17.100.0/24").await;
    let (n1, n2) = (site.node("node-1", 10).await, site.node("node-2", 11).await);
    let _b1 = backend(&site.ip(10), 30082, "node-1\n").await;
    let _b2 = backend(&site.ip(11), 30082, "node-2\n").await;
    let svc = service(
        "c3d4e5f6-1111-4222-8333-944455556666",
        "shop",
        8082,
        30082,
        json!({FLOATING_OFF: "true"}),
    );
    let prefix = default_load_balancer_name(&svc);
    let pip_name = format!("{CLUSTER}-{prefix}");
    // Signed in before the faults start.
    assert_eq!(
        site.azure.get_load_balancer(CLUSTER, &svc).await.unwrap(),
        None
    );

    // Every long-running change fails: the first, the public IP's PUT, is named; nothing is made.
    site.cloud.restart_with(operation_failures(1.0)).await;
    let e = site
        .azure
        .ensure_load_balancer(CLUSTER, &svc, std::slice::from_ref(&n1))
        .await
        .unwrap_err();
    let chain = Chain(&e).to_string();
    assert!(
        chain.contains(&format!("PUT publicIPAddresses/{pip_name}")),
        "{chain}"
    );
    assert!(chain.contains("Failed"), "{chain}");
    assert!(site.pip(&pip_name).await.is_none());
    assert!(site.lb(CLUSTER).await.is_none());

    // Without faults: made for node-1.
    site.cloud.restart_with(Faults::default()).await;
    site.azure
        .ensure_load_balancer(CLUSTER, &svc, std::slice::from_ref(&n1))
        .await
        .unwrap();
    let etag = site.lb(CLUSTER).await.unwrap().etag;

    // Faults again: adding node-2 fails at its NIC's PUT, which changes nothing; deleting
    // fails at the security group's PUT, the first change, and the rule stays.
    site.cloud.restart_with(operation_failures(1.0)).await;
    let e = site
        .azure
        .ensure_load_balancer(CLUSTER, &svc, &[n1.clone(), n2.clone()])
        .await
        .unwrap_err();
    let chain = Chain(&e).to_string();
    assert!(
        chain.contains("PUT networkInterfaces/node-2-nic"),
        "{chain}"
    );
    assert!(site.pools_of("node-2").await.is_empty());
    assert_eq!(
        site.lb(CLUSTER).await.unwrap().etag,
        etag,
        "the load balancer untouched"
    );
    let e = site
        .azure
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap_err();
    let chain = Chain(&e).to_string();
    assert!(
        chain.contains(&format!("PUT networkSecurityGroups/{NSG}")),
        "{chain}"
    );
    assert_eq!(site.nsg().await.properties.security_rules.len(), 1);

    // The retry without faults converges: one of each part, both nodes, traffic.
    site.cloud.restart_with(Faults::default()).await;
    let status = site
        .azure
        .ensure_load_balancer(CLUSTER, &svc, &[n1.clone(), n2.clone()])
        .await
        .unwrap();
    let lb = site.lb(CLUSTER).await.unwrap();
    let p = &lb.properties;
    assert_eq!(
        (
            p.frontend_ip_configurations.len(),
            p.load_balancing_rules.len(),
            p.probes.len(),
            p.backend_address_pools.len()
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(
        p.backend_address_pools[0]
            .properties
            .backend_ip_configurations
            .len(),
        2
    );
    assert_eq!(site.pools_of("node-2").await.len(), 1);
    assert_eq!(site.nsg().await.properties.security_rules.len(), 1);
    let ip = ingress_ip(&status);
    wait_for("a node answering", &ip, 8082, 3, |g| {
        g.is_some_and(|g| g.starts_with("node-"))
    })
    .await;
    site.azure
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    assert!(site.lb(CLUSTER).await.is_none() && site.pip(&pip_name).await.is_none());
    assert!(site.nsg().await.properties.security_rules.is_empty());
    assert!(site.pools_of("node-1").await.is_empty() && site.pools_of("node-2").await.is_empty());
    site.cloud.shutdown().await;
}
