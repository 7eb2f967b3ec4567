//! The route controller against the real apiserver.

use super::*;

fn condition(n: &Node, type_: &str) -> Option<NodeCondition> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

#[tokio::test]
async fn routes_created_stale_deleted_and_network_condition_set() {
    let (env, label) = labelled_env("node-route", "rt").await;
    let with_cidr = env.unique_name("rt-a");
    let without = env.unique_name("rt-b");
    let cloud = FakeCloud::new(FakeConfig {
        routes: vec![hypercloud_cloudprovider::Route {
            name: "stale".into(),
            target_node: "departed".into(),
            destination_cidr: "10.244.250.0/24".into(),
            blackhole: false,
        }],
        ..Default::default()
    });
    let api: Api<Node> = Api::all(env.client());
    let mut a = node(&with_cidr, &label, vec![]);
    a.spec.get_or_insert_with(Default::default).pod_cidr = Some("10.244.7.0/24".into());
    a.spec.get_or_insert_with(Default::default).pod_cidrs = Some(vec!["10.244.7.0/24".into()]);
    create(&api, &a, "node a").await;
    create(&api, &node(&without, &label, vec![]), "node b").await;

    let running = start_for(
        &env,
        &label,
        &cloud,
        &[names::NODE_ROUTE.name],
        &[
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=500ms",
        ],
    );
    let cond = eventually("NetworkUnavailable=False", || async {
        let n = api.get(&with_cidr).await.ok()?;
        condition(&n, "NetworkUnavailable").filter(|c| c.status == "False")
    })
    .await;
    assert_eq!(cond.reason.as_deref(), Some("RouteCreated"));
    let routes = cloud
        .calls()
        .iter()
        .filter(|c| c.method == "create_route")
        .map(|c| c.args[2].clone())
        .collect::<Vec<_>>();
    assert_eq!(routes, vec!["10.244.7.0/24".to_string()]);
    assert!(cloud
        .calls()
        .iter()
        .any(|c| c.method == "delete_route" && c.args[1] == "10.244.250.0/24"));
    let b = eventually(
        "NetworkUnavailable=True on the node without CIDR",
        || async {
            let n = api.get(&without).await.ok()?;
            condition(&n, "NetworkUnavailable").filter(|c| c.status == "True")
        },
    )
    .await;
    assert_eq!(b.reason.as_deref(), Some("NoRouteCreated"));

    // Later passes find the route and write nothing more.
    let rv = api.get(&with_cidr).await.expect("node").resource_version();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        api.get(&with_cidr).await.expect("node").resource_version(),
        rv
    );
    assert_eq!(cloud.call_count("create_route"), 1);

    running.stop().await;
    delete_nodes(&api, &[with_cidr, without]).await;
    env.cleanup().await.expect("cleanup");
}
