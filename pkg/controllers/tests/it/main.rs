//! Integration tests of the cloud controllers against a real kube-apiserver (pkg/testenv) and
//! the recording fake cloud. The apiserver is shared with other test binaries, so every test
//! labels its Nodes with its own value and runs the controllers scoped to that label.

//!
//! One test binary (`tests/it/`), one module per controller: one link instead of one per file.

mod cloud_node;
mod credentials;
mod node_ipam;
mod node_lifecycle;
mod pv_label;
mod route;
mod service;
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
    start_as(client, Default::default(), cloud, controllers, args, scope)
}

/// [`start`] on the Nodes labelled with this test's `label` (no Services).
fn start_for(
    env: &TestEnv,
    label: &str,
    cloud: &FakeCloud,
    controllers: &[&'static str],
    args: &[&str],
) -> Running {
    start(env.client(), cloud, controllers, args, scope(label, None))
}

/// [`start`] with the controllers acting as `credentials` say.
fn start_as(
    client: Client,
    credentials: hypercloud_controllers::Credentials,
    cloud: &FakeCloud,
    controllers: &[&'static str],
    args: &[&str],
    scope: Scope,
) -> Running {
    let (tx, rx) = oneshot::channel::<()>();
    let registry = prometheus::Registry::new();
    let config = ControllerConfig {
        client,
        credentials,
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

/// A test's environment named `test`, and the unique value of [`TEST_LABEL`] its Nodes carry
/// (starting with `label`).
async fn labelled_env(test: &str, label: &str) -> (TestEnv, String) {
    let env = TestEnv::new(test).await.expect("testenv");
    let label = env.unique_name(label);
    (env, label)
}

/// Scopes the controllers to the Nodes labelled with this test's `label` and, when given, the
/// Services of `service_namespace`.
fn scope(label: &str, service_namespace: Option<&str>) -> Scope {
    Scope {
        node_label_selector: Some(format!("{TEST_LABEL}={label}")),
        service_namespace: service_namespace.map(str::to_string),
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

/// Creates `object`; the test fails with `what` when the apiserver refuses.
async fn create<K>(api: &Api<K>, object: &K, what: &str)
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), object)
        .await
        .expect(what);
}

async fn delete_nodes(api: &Api<Node>, names: &[String]) {
    for n in names {
        let _ = api.delete(n, &DeleteParams::default()).await;
    }
}

/// The controllers share one Node cache, as in the cloud-controller-manager: all of them
/// must wake up once it is listed (a regression: with `Store::wait_until_ready` only one
/// waiter woke, so cloud-node never initialised anything next to cloud-node-lifecycle).
#[tokio::test]
async fn node_controllers_together_share_the_node_cache() {
    let (env, label) = labelled_env("controllers-together", "tg").await;
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
        scope(&label, Some(env.namespace())),
    );
    let api: Api<Node> = Api::all(env.client());
    create(
        &api,
        &node(&name, &label, vec![uninitialized()]),
        "create node",
    )
    .await;
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
