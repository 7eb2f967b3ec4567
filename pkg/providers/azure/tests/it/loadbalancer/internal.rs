//! Internal Services: a private frontend on config `subnetName` (a VIP of the local cloud's
//! pool), a static one from `spec.loadBalancerIP`, two Services sharing `<cluster>-internal`,
//! and a switch to public that deletes the emptied internal load balancer.

use hypercloud_cloudprovider::{default_load_balancer_name, LoadBalancer as _};
use serde_json::json;

use super::*;

#[tokio::test]
async fn internal_services_get_private_frontends_and_switch_to_public() {
    let site = site("127.6", "127.16.100.0/24").await;
    let n1 = site.node("node-1", 10).await;
    let _b1 = backend(&site.ip(10), 30081, "internal node-1\n").await;
    let azure = &site.azure;
    let mut svc = service(
        "6fa459ea-ee8a-3ca4-894e-db77e160355e",
        "api",
        8081,
        30081,
        json!({INTERNAL: "true", FLOATING_OFF: "true"}),
    );
    svc.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec!["127.0.0.0/8".into()]);
    let prefix = default_load_balancer_name(&svc);
    let before = azure.api_calls();
    let status = azure
        .ensure_load_balancer(CLUSTER, &svc, std::slice::from_ref(&n1))
        .await
        .unwrap();
    let created = azure.api_calls() - before;
    let ip = ingress_ip(&status);
    assert!(ip.starts_with("127.16.100."), "a VIP of the pool: {ip}");
    let lb = site
        .lb("kubernetes-internal")
        .await
        .expect("the internal load balancer");
    let f = &lb.properties.frontend_ip_configurations[0];
    assert_eq!(f.name.as_deref(), Some(prefix.as_str()));
    assert_eq!(
        f.properties.private_ip_address.as_deref(),
        Some(ip.as_str())
    );
    assert!(id_ends(
        f.properties.subnet.as_ref(),
        "/virtualNetworks/vnet/subnets/nodes"
    ));
    assert!(site.lb(CLUSTER).await.is_none(), "no public load balancer");
    assert!(
        site.pip(&format!("{CLUSTER}-{prefix}")).await.is_none(),
        "no public IP"
    );
    let nsg = site.nsg().await;
    assert_eq!(
        nsg.properties.security_rules[0].name.as_deref(),
        Some(&*format!("{prefix}-TCP-8081-127.0.0.0_8"))
    );
    wait_for("the internal frontend", &ip, 8081, 3, |g| {
        g == Some("internal node-1\n")
    })
    .await;

    // A second internal Service at a static address of the pool shares the load balancer.
    let mut fixed = service(
        "0b5d8e8c-5c6f-4c1e-9d59-3f3b7c1b2a10",
        "fixed",
        8083,
        30081,
        json!({INTERNAL: "true", FLOATING_OFF: "true"}),
    );
    fixed.spec.as_mut().unwrap().load_balancer_ip = Some("127.16.100.50".into());
    let s = azure
        .ensure_load_balancer(CLUSTER, &fixed, std::slice::from_ref(&n1))
        .await
        .unwrap();
    assert_eq!(ingress_ip(&s), "127.16.100.50");
    let lb = site.lb("kubernetes-internal").await.unwrap();
    assert_eq!(lb.properties.frontend_ip_configurations.len(), 2);
    assert!(!site.nsg().await.properties.security_rules.is_empty());
    azure
        .ensure_load_balancer_deleted(CLUSTER, &fixed)
        .await
        .unwrap();
    let lb = site
        .lb("kubernetes-internal")
        .await
        .expect("kept for the first Service");
    assert_eq!(lb.properties.frontend_ip_configurations.len(), 1);
    assert_eq!(
        site.pools_of("node-1").await.len(),
        1,
        "still in the internal pool"
    );

    // Public now: the Service moves to `kubernetes` with a public IP; the internal load
    // balancer, left without frontends, is deleted after its NICs leave its pool.
    svc.metadata.annotations.as_mut().unwrap().remove(INTERNAL);
    let status = azure
        .ensure_load_balancer(CLUSTER, &svc, std::slice::from_ref(&n1))
        .await
        .unwrap();
    let public_ip = ingress_ip(&status);
    assert!(public_ip.starts_with("127.24.4."), "{public_ip}");
    assert!(site.lb("kubernetes-internal").await.is_none());
    let pools = site.pools_of("node-1").await;
    assert!(
        pools.len() == 1
            && pools[0]
                .to_lowercase()
                .contains("/loadbalancers/kubernetes/"),
        "{pools:?}"
    );
    wait_for("the public frontend", &public_ip, 8081, 3, |g| {
        g == Some("internal node-1\n")
    })
    .await;
    let before = azure.api_calls();
    azure
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    let deleted = azure.api_calls() - before;
    assert!(site.lb(CLUSTER).await.is_none());
    assert!(site.pip(&format!("{CLUSTER}-{prefix}")).await.is_none());
    assert!(site.nsg().await.properties.security_rules.is_empty());
    eprintln!("azure internal load balancer ARM requests (1 node, 1 port): create {created}, delete (after switching to public) {deleted}");
    site.cloud.shutdown().await;
}
