//! Node IPAM against the real apiserver: the apiserver takes the podCIDR patch (dual-stack
//! too), the route controller routes what IPAM gave, and an exhausted range waits for a
//! deleted Node's CIDR.

use super::*;
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;

fn pod_cidrs(n: &Node) -> Vec<String> {
    n.spec
        .as_ref()
        .and_then(|s| s.pod_cidrs.clone())
        .unwrap_or_default()
}

async fn wait_cidrs(api: &Api<Node>, name: &str) -> Vec<String> {
    eventually(&format!("pod CIDRs on {name}"), || async {
        let n = api.get(name).await.ok()?;
        let cidrs = pod_cidrs(&n);
        (!cidrs.is_empty()).then_some(cidrs)
    })
    .await
}

#[tokio::test]
async fn dual_stack_cidrs_are_given_and_routed() {
    let (env, label) = labelled_env("node-ipam", "ipam").await;
    let had = env.unique_name("ipam-had");
    let fresh = [env.unique_name("ipam-a"), env.unique_name("ipam-b")];
    let cloud = FakeCloud::new(FakeConfig::default());
    let api: Api<Node> = Api::all(env.client());
    let mut n = node(&had, &label, vec![]);
    let spec = n.spec.get_or_insert_with(Default::default);
    spec.pod_cidr = Some("10.244.0.0/24".into());
    spec.pod_cidrs = Some(vec!["10.244.0.0/24".into(), "fd00:10::/64".into()]);
    create(&api, &n, "node").await;
    for name in &fresh {
        create(&api, &node(name, &label, vec![]), "node").await;
    }
    let running = start_for(
        &env,
        &label,
        &cloud,
        &[names::NODE_IPAM.name, names::NODE_ROUTE.name],
        &[
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16,fd00:10::/56",
            "--route-reconciliation-period=500ms",
        ],
    );
    let mut given = Vec::new();
    for name in &fresh {
        let cidrs = wait_cidrs(&api, name).await;
        assert_eq!(cidrs.len(), 2, "{name}: {cidrs:?}");
        assert!(cidrs[0].starts_with("10.244.") && cidrs[0].ends_with(".0/24"));
        assert!(cidrs[1].starts_with("fd00:10:") && cidrs[1].ends_with("::/64"));
        assert_ne!(cidrs[0], "10.244.0.0/24");
        assert_ne!(cidrs[1], "fd00:10::/64");
        let n = api.get(name).await.expect("node");
        assert_eq!(
            n.spec.as_ref().and_then(|s| s.pod_cidr.clone()),
            Some(cidrs[0].clone())
        );
        given.push(cidrs);
    }
    assert_ne!(given[0], given[1]);
    // Routed: one route per CIDR, for all three Nodes.
    eventually("six routes", || async {
        (cloud.call_count("create_route") >= 6).then_some(())
    })
    .await;
    let mut routed: Vec<String> = cloud
        .calls()
        .iter()
        .filter(|c| c.method == "create_route")
        .map(|c| c.args[2].clone())
        .collect();
    routed.sort();
    let mut want: Vec<String> = given.concat();
    want.extend(["10.244.0.0/24".to_string(), "fd00:10::/64".to_string()]);
    want.sort();
    assert_eq!(routed, want);
    running.stop().await;
    let mut all = fresh.to_vec();
    all.push(had);
    delete_nodes(&api, &all).await;
    env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn an_exhausted_range_waits_for_a_deleted_nodes_cidr() {
    let (env, label) = labelled_env("node-ipam-full", "ipamf").await;
    let [x, y, z] = [
        env.unique_name("ipamf-x"),
        env.unique_name("ipamf-y"),
        env.unique_name("ipamf-z"),
    ];
    let cloud = FakeCloud::new(FakeConfig::default());
    let api: Api<Node> = Api::all(env.client());
    let running = start(
        env.client(),
        &cloud,
        &[names::NODE_IPAM.name],
        // Two node CIDRs in all.
        &["--allocate-node-cidrs=true", "--cluster-cidr=10.250.0.0/23"],
        scope(&label, None),
    );
    for name in [&x, &y] {
        create(&api, &node(name, &label, vec![]), "node").await;
        wait_cidrs(&api, name).await;
    }
    create(&api, &node(&z, &label, vec![]), "node").await;
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let event = eventually("CIDRNotAvailable on the third Node", || async {
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={z}")))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("CIDRNotAvailable"))
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(
        event.message.as_deref(),
        Some(format!("Node {z} status is now: CIDRNotAvailable").as_str())
    );
    assert!(pod_cidrs(&api.get(&z).await.expect("node")).is_empty());
    // x goes: z gets its CIDR on a retry.
    let x_cidrs = pod_cidrs(&api.get(&x).await.expect("node"));
    api.delete(&x, &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(wait_cidrs(&api, &z).await, x_cidrs);
    running.stop().await;
    delete_nodes(&api, &[y, z]).await;
    env.cleanup().await.expect("cleanup");
}
