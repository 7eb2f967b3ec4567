//! Integration tests of the cloud controllers against a real kube-apiserver (pkg/testenv) and
//! the recording fake cloud. The apiserver is shared with other test binaries, so every test
//! labels its Nodes with its own value and runs the controllers scoped to that label.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig, FakeInstance};
use hypercloud_cloudprovider::wellknown;
use hypercloud_controllers::{names, run_controllers_scoped, ControllerConfig, Scope};
use hypercloud_options::ControllerOptions;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service, ServicePort, ServiceSpec,
    Taint,
};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::oneshot;

const TEST_LABEL: &str = "hypercloud.io/controllers-test";
const EXCLUDE_LIFECYCLE: &str = "node.kubernetes.io/exclude-from-lifecycle-management";
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    c: ControllerOptions,
}

fn options(args: &[&str]) -> ControllerOptions {
    let mut argv = vec!["test"];
    argv.extend_from_slice(args);
    Flags::parse_from(argv).c
}

/// Controllers running in the background; stopped on drop.
struct Running {
    registry: prometheus::Registry,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), hypercloud_controllers::Error>>,
}

impl Running {
    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let r = (&mut self.task).await.expect("join");
        r.expect("controllers ran without error");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn start(
    client: Client,
    cloud: &FakeCloud,
    controllers: &[&'static str],
    args: &[&str],
    scope: Scope,
) -> Running {
    let (tx, rx) = oneshot::channel::<()>();
    let registry = prometheus::Registry::new();
    let config = ControllerConfig {
        client,
        cloud: Arc::new(cloud.clone()),
        component: "cloud-controller-manager".into(),
        options: options(args),
        metrics: registry.clone(),
    };
    let controllers = controllers.to_vec();
    let task = tokio::spawn(async move {
        run_controllers_scoped(config, &controllers, scope, async {
            let _ = rx.await;
        })
        .await
    });
    Running {
        registry,
        stop: Some(tx),
        task,
    }
}

async fn eventually<F, Fut, T>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn addr(t: &str, a: &str) -> NodeAddress {
    NodeAddress {
        type_: t.into(),
        address: a.into(),
    }
}

/// A test Node. It carries the lifecycle exclusion label, so that a cloud-node-lifecycle
/// controller of another test process (with its own fake cloud) does not delete it.
fn node(name: &str, label: &str, taints: Vec<Taint>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                [
                    (TEST_LABEL.to_string(), label.to_string()),
                    (EXCLUDE_LIFECYCLE.to_string(), String::new()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(taints),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn uninitialized() -> Taint {
    Taint {
        key: wellknown::TAINT_UNINITIALIZED.into(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

fn instance(name: &str, ip: &str) -> FakeInstance {
    FakeInstance {
        name: name.into(),
        instance_type: "m1.small".into(),
        addresses: vec![addr("InternalIP", ip)],
        labels: BTreeMap::from([("example.com/rack".to_string(), "r1".to_string())]),
        ..Default::default()
    }
}

fn has_taint(n: &Node, key: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

async fn delete_nodes(api: &Api<Node>, names: &[String]) {
    for n in names {
        let _ = api.delete(n, &DeleteParams::default()).await;
    }
}

#[tokio::test]
async fn cloud_node_initialises_tainted_nodes_with_one_metadata_patch() {
    let env = TestEnv::new("cloud-node-init").await.expect("testenv");
    let label = env.unique_name("cn");
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

    let running = start(
        env.client(),
        &cloud,
        &[names::CLOUD_NODE.name],
        &[],
        Scope {
            node_label_selector: Some(format!("{TEST_LABEL}={label}")),
            service_namespace: None,
        },
    );
    let mut n = node(&ready, &label, vec![uninitialized()]);
    n.status = Some(NodeStatus {
        addresses: Some(vec![addr("Hostname", "host-ready")]),
        ..Default::default()
    });
    api.create(&PostParams::default(), &n)
        .await
        .expect("create node");
    api.create(
        &PostParams::default(),
        &node(&missing, &label, vec![uninitialized()]),
    )
    .await
    .expect("create node");

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

fn lb_service(name: &str, class: Option<&str>) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            load_balancer_class: class.map(Into::into),
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn ingress_ip(s: &Service) -> Option<String> {
    s.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

#[tokio::test]
async fn service_lb_lifecycle_finalizer_status_nodes_and_foreign_class() {
    let env = TestEnv::new("service-lb").await.expect("testenv");
    let ns = env.namespace().to_string();
    let label = env.unique_name("svc");
    let node_a = env.unique_name("lb-a");
    let node_b = env.unique_name("lb-b");
    let cloud = FakeCloud::new(FakeConfig::default());
    let nodes: Api<Node> = Api::all(env.client());
    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    nodes
        .create(&PostParams::default(), &node(&node_a, &label, vec![]))
        .await
        .expect("node a");

    let running = start(
        env.client(),
        &cloud,
        &[names::SERVICE_LB.name],
        &[],
        Scope {
            node_label_selector: Some(format!("{TEST_LABEL}={label}")),
            service_namespace: Some(ns.clone()),
        },
    );
    services
        .create(&PostParams::default(), &lb_service("web", None))
        .await
        .expect("create service");
    services
        .create(
            &PostParams::default(),
            &lb_service("other", Some("example.com/other-lb")),
        )
        .await
        .expect("create foreign service");

    let web = eventually("ingress IP", || async {
        let s = services.get("web").await.ok()?;
        ingress_ip(&s).map(|_| s)
    })
    .await;
    assert!(web
        .finalizers()
        .iter()
        .any(|f| f == wellknown::FINALIZER_LB_CLEANUP));
    assert!(ingress_ip(&web).is_some_and(|ip| ip.starts_with("192.0.2.")));
    let lbs = cloud.load_balancers();
    let lb = lbs
        .values()
        .find(|lb| lb.service == format!("{ns}/web"))
        .expect("load balancer in the cloud");
    assert_eq!(lb.nodes, vec![node_a.clone()]);

    // A new node joins the backends of existing load balancers.
    nodes
        .create(&PostParams::default(), &node(&node_b, &label, vec![]))
        .await
        .expect("node b");
    eventually("backends updated", || async {
        let lbs = cloud.load_balancers();
        let lb = lbs.values().find(|lb| lb.service == format!("{ns}/web"))?;
        (lb.nodes == vec![node_a.clone(), node_b.clone()]).then_some(())
    })
    .await;
    assert!(cloud.call_count("update_load_balancer") >= 1);

    // Deleting the Service deletes the load balancer, then the finalizer lets it go.
    services
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete service");
    eventually("service gone", || async {
        match services.get_opt("web").await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(cloud
        .calls()
        .iter()
        .any(|c| c.method == "ensure_load_balancer_deleted" && c.args[1] == format!("{ns}/web")));
    assert!(cloud.load_balancers().is_empty());

    // Upstream's events, in the test's namespace (recorded asynchronously: wait for them).
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client(), &ns);
    let wanted = [
        "EnsuringLoadBalancer",
        "EnsuredLoadBalancer",
        "UpdatedLoadBalancer",
        "DeletingLoadBalancer",
        "DeletedLoadBalancer",
    ];
    let reasons: Vec<String> = eventually("all service events", || async {
        let reasons: Vec<String> = events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web"))
            .filter_map(|e| e.reason)
            .collect();
        wanted
            .iter()
            .all(|w| reasons.iter().any(|r| r == w))
            .then_some(reasons)
    })
    .await;
    for r in wanted {
        assert!(reasons.iter().any(|x| x == r), "event {r} in {reasons:?}");
    }

    // The foreign-class Service was never touched.
    let other = services.get("other").await.expect("other");
    assert!(other.finalizers().is_empty());
    assert!(ingress_ip(&other).is_none());
    assert!(!cloud
        .calls()
        .iter()
        .any(|c| c.args.iter().any(|a| a == &format!("{ns}/other"))));

    running.stop().await;
    let _ = services.delete("other", &DeleteParams::default()).await;
    delete_nodes(&nodes, &[node_a, node_b]).await;
    env.cleanup().await.expect("cleanup");
}

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
    let env = TestEnv::new("node-lifecycle").await.expect("testenv");
    let label = env.unique_name("lc");
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
        api.create(
            &PostParams::default(),
            &with_ready(node(name, &label, vec![]), name, "False"),
        )
        .await
        .expect("create node");
    }
    let running = start(
        env.client(),
        &cloud,
        &[names::CLOUD_NODE_LIFECYCLE.name],
        &["--node-monitor-period=500ms"],
        Scope {
            node_label_selector: Some(format!("{TEST_LABEL}={label}")),
            service_namespace: None,
        },
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
    let env = TestEnv::new("node-route").await.expect("testenv");
    let label = env.unique_name("rt");
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
    api.create(&PostParams::default(), &a)
        .await
        .expect("node a");
    api.create(&PostParams::default(), &node(&without, &label, vec![]))
        .await
        .expect("node b");

    let running = start(
        env.client(),
        &cloud,
        &[names::NODE_ROUTE.name],
        &[
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=500ms",
        ],
        Scope {
            node_label_selector: Some(format!("{TEST_LABEL}={label}")),
            service_namespace: None,
        },
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

/// Not a test of behaviour but a measurement (ignored by default; run with
/// `cargo test -p hypercloud-controllers --test controllers -- --ignored --nocapture`):
/// initialises `HYPERCLOUD_BENCH_NODES` (default 300) Nodes and prints the time, the API
/// writes per node and the cloud calls per node.
#[tokio::test]
#[ignore]
async fn measure_cloud_node_initialisation() {
    let count: usize = std::env::var("HYPERCLOUD_BENCH_NODES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let env = TestEnv::new("cloud-node-measure").await.expect("testenv");
    let label = env.unique_name("m");
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
    let running = start(
        env.client(),
        &cloud,
        &[names::CLOUD_NODE.name],
        &[],
        Scope {
            node_label_selector: Some(format!("{TEST_LABEL}={label}")),
            service_namespace: None,
        },
    );
    let t0 = Instant::now();
    futures::stream::iter(names.iter())
        .for_each_concurrent(16, |n| {
            let api = api.clone();
            let label = label.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &node(n, &label, vec![uninitialized()]),
                )
                .await
                .expect("create");
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
async fn pv_label_controller_labels_cloud_volumes() {
    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let env = TestEnv::new("pv-label").await.expect("testenv");
    let name = env.unique_name("pv");
    let volume = env.unique_name("vol");
    let cloud = FakeCloud::new(FakeConfig {
        region: "r1".into(),
        volumes: vec![hypercloud_cloudprovider::fake::FakeVolume {
            id: volume.clone(),
            zone: Some("z1".into()),
            region: None,
        }],
        ..Default::default()
    });
    let api: Api<PersistentVolume> = Api::all(env.client());
    let pv = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some([("storage".to_string(), Quantity("1Gi".into()))].into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            csi: Some(CSIPersistentVolumeSource {
                driver: "cinder.csi.openstack.org".into(),
                volume_handle: volume.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    api.create(&PostParams::default(), &pv)
        .await
        .expect("create pv");
    let running = start(
        env.client(),
        &cloud,
        &[names::PV_LABEL.name],
        &[],
        Scope::default(),
    );
    let labelled = eventually("pv labelled", || async {
        let pv = api.get(&name).await.ok()?;
        pv.labels()
            .contains_key(wellknown::LABEL_TOPOLOGY_ZONE)
            .then_some(pv)
    })
    .await;
    assert_eq!(labelled.labels()[wellknown::LABEL_TOPOLOGY_ZONE], "z1");
    assert_eq!(labelled.labels()[wellknown::LABEL_TOPOLOGY_REGION], "r1");
    let terms = labelled
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .expect("node affinity");
    let keys: Vec<String> = terms[0]
        .match_expressions
        .iter()
        .flatten()
        .map(|e| e.key.clone())
        .collect();
    assert_eq!(
        keys,
        vec![
            wellknown::LABEL_TOPOLOGY_REGION.to_string(),
            wellknown::LABEL_TOPOLOGY_ZONE.to_string()
        ]
    );
    running.stop().await;
    let _ = api.delete(&name, &DeleteParams::default()).await;
    env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn cloud_node_keeps_taint_and_warns_when_provided_node_ip_matches_nothing() {
    let env = TestEnv::new("cloud-node-ip").await.expect("testenv");
    let label = env.unique_name("ip");
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
    api.create(&PostParams::default(), &n)
        .await
        .expect("create node");
    let running = start(
        env.client(),
        &cloud,
        &[names::CLOUD_NODE.name],
        &[],
        Scope {
            node_label_selector: Some(format!("{TEST_LABEL}={label}")),
            service_namespace: None,
        },
    );
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

/// The controllers share one Node cache, as in the cloud-controller-manager: all of them
/// must wake up once it is listed (a regression: with `Store::wait_until_ready` only one
/// waiter woke, so cloud-node never initialised anything next to cloud-node-lifecycle).
#[tokio::test]
async fn node_controllers_together_share_the_node_cache() {
    let env = TestEnv::new("controllers-together").await.expect("testenv");
    let label = env.unique_name("tg");
    let name = env.unique_name("tg-node");
    let cloud = FakeCloud::new(FakeConfig {
        instances: vec![instance(&name, "10.0.7.1")],
        ..Default::default()
    });
    let running = start(
        env.client(),
        &cloud,
        &[
            names::CLOUD_NODE.name,
            names::CLOUD_NODE_LIFECYCLE.name,
            names::SERVICE_LB.name,
        ],
        &["--node-monitor-period=500ms"],
        Scope {
            node_label_selector: Some(format!("{TEST_LABEL}={label}")),
            service_namespace: Some(env.namespace().to_string()),
        },
    );
    let api: Api<Node> = Api::all(env.client());
    api.create(
        &PostParams::default(),
        &node(&name, &label, vec![uninitialized()]),
    )
    .await
    .expect("create node");
    let initialised = eventually("node initialised next to the other controllers", || async {
        let n = api.get(&name).await.ok()?;
        (!has_taint(&n, wellknown::TAINT_UNINITIALIZED)).then_some(n)
    })
    .await;
    assert_eq!(
        initialised.spec.and_then(|s| s.provider_id).as_deref(),
        Some(format!("fake:///{name}").as_str())
    );
    running.stop().await;
    delete_nodes(&api, &[name]).await;
    env.cleanup().await.expect("cleanup");
}
