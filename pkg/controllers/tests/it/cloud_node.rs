//! The cloud-node controller against the real apiserver.

use super::*;

#[tokio::test]
async fn cloud_node_initialises_tainted_nodes_with_one_metadata_patch() {
    let (env, label) = labelled_env("cloud-node-init", "cn").await;
    let ready = env.unique_name("n-ready");
    let missing = env.unique_name("n-missing");
    let cloud = FakeCloud::new(FakeConfig {
        region: "region-1".into(),
        zone: "zone-a".into(),
        instances: vec![instance(&ready, "10.0.0.7")],
        ..Default::default()
    });
    let api: Api<Node> = Api::all(env.client());

    // Count every write to the node through a watch opened before it exists.
    let wp = watcher::Config::default().fields(&format!("metadata.name={ready}"));
    let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watch_task = {
        let writes = writes.clone();
        let mut stream = watcher(api.clone(), wp).boxed();
        tokio::spawn(async move {
            let mut last_rv = None;
            while let Some(Ok(ev)) = stream.next().await {
                if let watcher::Event::Apply(n) | watcher::Event::InitApply(n) = ev {
                    let rv = n.resource_version();
                    if last_rv.is_some() && rv != last_rv {
                        writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    last_rv = rv;
                }
            }
        })
    };
    // Let the watch establish before creating.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let running = start_for(&env, &label, &cloud, &[names::CLOUD_NODE.name], &[]);
    let mut n = node(&ready, &label, vec![uninitialized()]);
    n.status = Some(NodeStatus {
        addresses: Some(vec![addr("Hostname", "host-ready")]),
        ..Default::default()
    });
    create(&api, &n, "create node").await;
    create(
        &api,
        &node(&missing, &label, vec![uninitialized()]),
        "create node",
    )
    .await;

    let done = eventually("node initialised", || async {
        let n = api.get(&ready).await.ok()?;
        let has_addrs = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| a.iter().any(|a| a.address == "10.0.0.7"));
        (!has_taint(&n, wellknown::TAINT_UNINITIALIZED) && has_addrs).then_some(n)
    })
    .await;
    let labels = done.labels();
    assert_eq!(labels[wellknown::LABEL_TOPOLOGY_ZONE], "zone-a");
    assert_eq!(labels[wellknown::LABEL_FAILURE_DOMAIN_ZONE], "zone-a");
    assert_eq!(labels[wellknown::LABEL_TOPOLOGY_REGION], "region-1");
    assert_eq!(labels[wellknown::LABEL_FAILURE_DOMAIN_REGION], "region-1");
    assert_eq!(labels[wellknown::LABEL_INSTANCE_TYPE], "m1.small");
    assert_eq!(labels[wellknown::LABEL_INSTANCE_TYPE_BETA], "m1.small");
    assert_eq!(labels["example.com/rack"], "r1");
    assert_eq!(
        done.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some(format!("fake:///{ready}").as_str())
    );
    let addresses = done
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    assert_eq!(
        addresses,
        vec![
            addr("InternalIP", "10.0.0.7"),
            addr("Hostname", "host-ready")
        ]
    );

    // Give stragglers a moment, then: one metadata patch + one status patch, nothing more.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        writes.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "writes to the node during initialisation"
    );
    assert_eq!(
        cloud
            .calls()
            .iter()
            .filter(|c| c.method == "instance_metadata" && c.args == [ready.clone()])
            .count(),
        1,
        "one cloud call for the node"
    );

    // The node without an instance is left alone, still tainted.
    let m = api.get(&missing).await.expect("missing node");
    assert!(has_taint(&m, wellknown::TAINT_UNINITIALIZED));
    assert!(m
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_ref())
        .is_none());
    assert!(cloud
        .calls()
        .iter()
        .any(|c| c.method == "instance_metadata" && c.args == [missing.clone()]));

    // The work queue reports under upstream's names.
    let families = running.registry.gather();
    let adds = families
        .iter()
        .find(|f| f.name() == "workqueue_adds_total")
        .expect("workqueue_adds_total");
    assert!(adds.get_metric().iter().any(|m| {
        m.get_label()
            .iter()
            .any(|l| l.name() == "name" && l.value() == "Nodes")
            && m.get_counter().get_value() >= 2.0
    }));
    for name in [
        "workqueue_depth",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
    ] {
        assert!(families.iter().any(|f| f.name() == name), "{name}");
    }

    running.stop().await;
    watch_task.abort();
    delete_nodes(&api, &[ready, missing]).await;
    env.cleanup().await.expect("cleanup");
}
/// Not a test of behaviour but a measurement (ignored by default; run with
/// `cargo test -p hypercloud-controllers --test it -- --ignored --nocapture`):
/// initialises `HYPERCLOUD_BENCH_NODES` (default 300) Nodes and prints the time, the API
/// writes per node and the cloud calls per node.
#[tokio::test]
#[ignore]
async fn measure_cloud_node_initialisation() {
    let count: usize = std::env::var("HYPERCLOUD_BENCH_NODES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let (env, label) = labelled_env("cloud-node-measure", "m").await;
    let names: Vec<String> = (0..count)
        .map(|i| env.unique_name(&format!("m{i}")))
        .collect();
    let cloud = FakeCloud::new(FakeConfig {
        zone: "z".into(),
        region: "r".into(),
        instances: names
            .iter()
            .enumerate()
            .map(|(i, n)| instance(n, &format!("10.1.{}.{}", i / 250, i % 250 + 1)))
            .collect(),
        ..Default::default()
    });
    let api: Api<Node> = Api::all(env.client());
    let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watch_task = {
        let writes = writes.clone();
        let cfg = watcher::Config::default().labels(&format!("{TEST_LABEL}={label}"));
        let mut stream = watcher(api.clone(), cfg).boxed();
        tokio::spawn(async move {
            let mut seen = std::collections::HashMap::new();
            while let Some(Ok(ev)) = stream.next().await {
                if let watcher::Event::Apply(n) = ev {
                    if seen.insert(n.name_any(), ()).is_some() {
                        writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let running = start_for(&env, &label, &cloud, &[names::CLOUD_NODE.name], &[]);
    let t0 = Instant::now();
    futures::stream::iter(names.iter())
        .for_each_concurrent(16, |n| {
            let api = api.clone();
            let label = label.clone();
            async move {
                create(&api, &node(n, &label, vec![uninitialized()]), "create").await;
            }
        })
        .await;
    let created = t0.elapsed();
    let lp = kube::api::ListParams::default().labels(&format!("{TEST_LABEL}={label}"));
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let list = api.list(&lp).await.expect("list");
        let done = list
            .items
            .iter()
            .filter(|n| !has_taint(n, wellknown::TAINT_UNINITIALIZED))
            .count();
        if done == count {
            break;
        }
        assert!(Instant::now() < deadline, "only {done}/{count} initialised");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let all = t0.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "nodes={count} created_in={created:?} all_initialised_in={all:?} api_writes_per_node={:.2} cloud_calls_per_node={:.2}",
        writes.load(std::sync::atomic::Ordering::SeqCst) as f64 / count as f64,
        cloud.calls().len() as f64 / count as f64
    );
    running.stop().await;
    watch_task.abort();
    delete_nodes(&api, &names).await;
    env.cleanup().await.expect("cleanup");
}
#[tokio::test]
async fn cloud_node_keeps_taint_and_warns_when_provided_node_ip_matches_nothing() {
    let (env, label) = labelled_env("cloud-node-ip", "ip").await;
    let name = env.unique_name("n-ip");
    let cloud = FakeCloud::new(FakeConfig {
        instances: vec![instance(&name, "10.0.0.8")],
        ..Default::default()
    });
    let api: Api<Node> = Api::all(env.client());
    let mut n = node(&name, &label, vec![uninitialized()]);
    n.metadata.annotations = Some(
        [(
            wellknown::ANNOTATION_PROVIDED_NODE_IP.to_string(),
            "10.99.99.99".to_string(),
        )]
        .into(),
    );
    create(&api, &n, "create node").await;
    let running = start_for(&env, &label, &cloud, &[names::CLOUD_NODE.name], &[]);
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client(), "default");
    let ev = eventually("warning event", || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                    && e.reason.as_deref() == Some("ProvidedNodeIPInvalid")
            })
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(ev.note.unwrap_or_default().contains("10.99.99.99"));
    let n = api.get(&name).await.expect("node");
    assert!(has_taint(&n, wellknown::TAINT_UNINITIALIZED));
    assert!(!n.labels().contains_key(wellknown::LABEL_INSTANCE_TYPE));
    running.stop().await;
    delete_nodes(&api, &[name]).await;
    env.cleanup().await.expect("cleanup");
}
