//! The cloud-node-lifecycle controller against the real apiserver.

use super::*;

fn with_ready(mut n: Node, name: &str, ready: &str) -> Node {
    // This test is about lifecycle: no exclusion.
    if let Some(l) = n.metadata.labels.as_mut() {
        l.remove(EXCLUDE_LIFECYCLE);
    }
    n.spec.get_or_insert_with(Default::default).provider_id = Some(format!("fake:///{name}"));
    n.status = Some(NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: ready.into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    n
}

#[tokio::test]
async fn node_lifecycle_taints_shut_down_and_deletes_gone_nodes() {
    let (env, label) = labelled_env("node-lifecycle", "lc").await;
    let down = env.unique_name("lc-down");
    let gone = env.unique_name("lc-gone");
    let cloud = FakeCloud::new(FakeConfig {
        instances: vec![FakeInstance {
            name: down.clone(),
            shutdown: true,
            ..Default::default()
        }],
        ..Default::default()
    });
    let api: Api<Node> = Api::all(env.client());
    for name in [&down, &gone] {
        create(
            &api,
            &with_ready(node(name, &label, vec![]), name, "False"),
            "create node",
        )
        .await;
    }
    let running = start_for(
        &env,
        &label,
        &cloud,
        &[names::CLOUD_NODE_LIFECYCLE.name],
        &["--node-monitor-period=500ms"],
    );
    eventually("shutdown taint", || async {
        let n = api.get(&down).await.ok()?;
        has_taint(&n, wellknown::TAINT_SHUTDOWN).then_some(())
    })
    .await;
    eventually("gone node deleted", || async {
        matches!(api.get_opt(&gone).await, Ok(None)).then_some(())
    })
    .await;
    assert!(
        api.get_opt(&down).await.expect("get").is_some(),
        "shut-down node kept"
    );

    // Ready again: the taint comes off.
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status(&down, &PatchParams::default(), &Patch::Strategic(&ready))
        .await
        .expect("mark ready");
    eventually("shutdown taint removed", || async {
        let n = api.get(&down).await.ok()?;
        (!has_taint(&n, wellknown::TAINT_SHUTDOWN)).then_some(())
    })
    .await;

    running.stop().await;
    delete_nodes(&api, &[down, gone]).await;
    env.cleanup().await.expect("cleanup");
}
