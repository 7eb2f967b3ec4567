//! The Kubernetes side of the scenarios: what a Node initialised from the cloud
//! must look like (the same in both layouts), the load balancer round trip, labelled
//! PersistentVolumes, and the clean-up of cluster-scoped objects even when a test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use hypercloud_testenv::cluster::{self, Kubelets};
use hypercloud_testenv::net::{request, Backend};
use hypercloud_testenv::nodes::{self, has_taint, provider_id, TAINT_UNINITIALIZED};
use hypercloud_testenv::process::Proc;
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{json, Value};

use super::cloud::{Instance, LocalCloud, REGION};

/// The label that scopes this run's webhook configurations to its own objects.
pub const E2E_LABEL: &str = "hypercloud.io/e2e";
const FINALIZER_LB_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

/// What a Node of `instance` looks like once the cloud has had its say, in either layout:
/// provider ID, the instance's address plus the Hostname, the zone/region/instance-type
/// labels (GA and beta) and no uninitialized taint.
pub fn assert_node_from_cloud(node: &Node, instance: &Instance) {
    let name = node.name_any();
    assert_eq!(name, instance.name, "the Node is named after its instance");
    assert_eq!(
        provider_id(node),
        Some(format!("local:///{}", instance.id).as_str()),
        "providerID of {name}"
    );
    let labels = node.labels();
    for (keys, want) in [
        (
            [
                "topology.kubernetes.io/zone",
                "failure-domain.beta.kubernetes.io/zone",
            ],
            &instance.zone,
        ),
        (
            [
                "topology.kubernetes.io/region",
                "failure-domain.beta.kubernetes.io/region",
            ],
            &REGION.to_owned(),
        ),
        (
            [
                "node.kubernetes.io/instance-type",
                "beta.kubernetes.io/instance-type",
            ],
            &instance.flavor,
        ),
    ] {
        for key in keys {
            assert_eq!(
                labels.get(key),
                Some(want),
                "label {key} of {name}: {labels:?}"
            );
        }
    }
    let addresses: BTreeSet<(String, String)> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    let want: BTreeSet<(String, String)> = [
        ("InternalIP".to_owned(), instance.address.clone()),
        ("Hostname".to_owned(), instance.name.clone()),
    ]
    .into();
    assert_eq!(addresses, want, "addresses of {name}");
    assert!(
        !has_taint(node, TAINT_UNINITIALIZED),
        "{name} is still tainted"
    );
}

/// The rest of a real cluster around a scenario (`hypercloud_testenv::cluster`): the upstream
/// kube-controller-manager (its non-cloud controllers; no leader election, so it never meets
/// the Lease of hypercloud's controller-manager) and kwok playing the kubelet of every Node
/// whose instance runs in `cloud`. Stopped when dropped.
pub struct RealCluster {
    _upstream: Proc,
    _kubelets: Kubelets,
}

impl RealCluster {
    pub fn start(env: &TestEnv, dir: &Path, cloud: &LocalCloud) -> RealCluster {
        let kubeconfig = env.control_plane().kubeconfig();
        RealCluster {
            _upstream: cluster::kube_controller_manager(
                kubeconfig,
                dir,
                &["--leader-elect=false".into()],
            ),
            _kubelets: Kubelets::start(
                kubeconfig,
                dir,
                env.namespace(),
                &cloud.instances_command(),
            ),
        }
    }

    /// Waits until kwok reports Node `name` Ready.
    pub async fn wait_ready(nodes: &Api<Node>, name: &str) -> Node {
        nodes::wait_for(
            nodes,
            name,
            "kwok to report the Node Ready (its instance runs)",
            Duration::from_secs(60),
            |n| nodes::ready_status(n) == Some("True"),
        )
        .await
    }
}

/// A `type: LoadBalancer` Service with one TCP port 8080.
fn lb_service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer",
                 "ports": [{"name": "http", "protocol": "TCP", "port": 8080, "targetPort": 8080}]}
    }))
    .unwrap()
}

/// The load balancer of a Service, end to end: the controller gives it an ingress VIP from
/// `vip_prefix` and the cleanup finalizer, a request to VIP:port reaches the backend on
/// `node_ip`:nodePort through the local cloud's data plane, and deleting the Service
/// deletes the load balancer in the cloud and lets the Service go.
pub async fn load_balancer_round_trip(
    env: &TestEnv,
    cloud: &LocalCloud,
    node_ip: &str,
    vip_prefix: &str,
) {
    let services: Api<Service> = Api::namespaced(env.client(), env.namespace());
    let web = services
        .create(&PostParams::default(), &lb_service("web"))
        .await
        .unwrap();
    let node_port = web.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .expect("a nodePort");
    let reply = format!("HTTP/1.0 200 OK\r\n\r\nhello from {}\n", env.namespace());
    let backend_addr: SocketAddr = format!("{node_ip}:{node_port}").parse().unwrap();
    let _backend = Backend::start(backend_addr, reply.clone()).await;

    let vip = eventually("an ingress IP", Duration::from_secs(60), || {
        let services = services.clone();
        async move {
            let s = services.get("web").await.ok()?;
            s.status?.load_balancer?.ingress?.first()?.ip.clone()
        }
    })
    .await;
    assert!(
        vip.starts_with(vip_prefix),
        "VIP {vip} not in {vip_prefix}*"
    );
    let web = services.get("web").await.unwrap();
    assert!(
        web.finalizers().iter().any(|f| f == FINALIZER_LB_CLEANUP),
        "the cleanup finalizer is set: {:?}",
        web.finalizers()
    );
    // In-tree the load balancer is `a<uid>`, external `kube_service_<cluster>_<ns>_web`.
    let suffix = format!("_{}_web", env.namespace());
    let mut legacy: String = std::iter::once('a')
        .chain(
            web.metadata
                .uid
                .as_deref()
                .unwrap_or_default()
                .chars()
                .filter(|c| *c != '-'),
        )
        .collect();
    legacy.truncate(32);
    let ours = || [cloud.load_balancers(&suffix), cloud.load_balancers(&legacy)].concat();
    assert_eq!(ours().len(), 1, "one load balancer");

    let vip_addr: SocketAddr = format!("{vip}:8080").parse().unwrap();
    let answer = eventually(
        "an answer through the load balancer",
        Duration::from_secs(30),
        || async move { request(vip_addr).await.filter(|a| a.contains("hello from")) },
    )
    .await;
    assert_eq!(answer, reply, "the backend's answer, through {vip_addr}");

    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Service to be deleted (finalizer removed)",
        Duration::from_secs(60),
        || {
            let services = services.clone();
            async move { services.get_opt("web").await.ok()?.is_none().then_some(()) }
        },
    )
    .await;
    assert!(
        ours().is_empty(),
        "the load balancer is deleted in the cloud"
    );
    assert_eq!(request(vip_addr).await, None, "the VIP no longer answers");
}

/// A 1Gi PersistentVolume of a Cinder volume, in-tree (`cinder`) or CSI source.
pub fn cinder_pv(
    name: &str,
    labels: BTreeMap<String, String>,
    volume: &str,
    csi: bool,
) -> PersistentVolume {
    let source = if csi {
        json!({"csi": {"driver": "cinder.csi.openstack.org", "volumeHandle": volume}})
    } else {
        json!({"cinder": {"volumeID": volume}})
    };
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]});
    spec.as_object_mut()
        .unwrap()
        .extend(source.as_object().unwrap().clone());
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec}))
        .unwrap()
}

/// The volume's zone and region are on the PV as labels and as the node affinity that keeps
/// its pods in that zone.
pub fn assert_pv_labelled(pv: &PersistentVolume, zone: &str) {
    let name = pv.name_any();
    let labels = pv.labels();
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some(zone),
        "zone label of {name}: {labels:?}"
    );
    assert_eq!(
        labels
            .get("topology.kubernetes.io/region")
            .map(String::as_str),
        Some(REGION),
        "region label of {name}: {labels:?}"
    );
    let affinity = serde_json::to_value(
        pv.spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .expect("a node affinity"),
    )
    .unwrap();
    let terms = affinity["required"]["nodeSelectorTerms"]
        .as_array()
        .unwrap();
    assert_eq!(terms.len(), 1, "{affinity}");
    let zone_req = terms[0]["matchExpressions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "topology.kubernetes.io/zone")
        .unwrap_or_else(|| panic!("no zone requirement in {affinity}"));
    assert_eq!(zone_req["operator"], "In");
    assert_eq!(zone_req["values"], json!([zone]));
}

/// Cluster-scoped objects a scenario created: deleted by [`Leftovers::clean`] at the end,
/// or when dropped (a failing test), so no webhook configuration or Node outlives its run.
pub struct Leftovers {
    config: kube::Config,
    items: Mutex<Vec<Leftover>>,
}

#[derive(Clone, Debug)]
enum Leftover {
    WebhookConfigurations(String),
    Node(String),
    PersistentVolume(String),
}

impl Leftovers {
    pub fn new(env: &TestEnv) -> Leftovers {
        Leftovers {
            config: env.control_plane().config().clone(),
            items: Mutex::default(),
        }
    }

    fn push(&self, item: Leftover) {
        self.items.lock().unwrap().push(item);
    }

    /// The Mutating- and ValidatingWebhookConfiguration named `name`.
    pub fn webhook_configurations(&self, name: &str) {
        self.push(Leftover::WebhookConfigurations(name.into()));
    }

    pub fn node(&self, name: &str) {
        self.push(Leftover::Node(name.into()));
    }

    pub fn persistent_volume(&self, name: &str) {
        self.push(Leftover::PersistentVolume(name.into()));
    }

    /// Deletes everything now, asserting success.
    pub async fn clean(&self, client: Client) {
        let items = std::mem::take(&mut *self.items.lock().unwrap());
        let errors = delete_all(client, items).await;
        assert!(errors.is_empty(), "cleaning up: {errors:?}");
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let items = std::mem::take(&mut *self.items.lock().unwrap_or_else(|p| p.into_inner()));
        if items.is_empty() {
            return;
        }
        // Drop cannot await and the test's runtime may be gone: a thread with its own.
        let config = self.config.clone();
        let errors = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                match Client::try_from(config) {
                    Ok(client) => delete_all(client, items).await,
                    Err(e) => vec![e.to_string()],
                }
            })
        })
        .join();
        match errors {
            Ok(errors) if errors.is_empty() => {}
            Ok(errors) => eprintln!("e2e: cleaning up: {errors:?}"),
            Err(_) => eprintln!("e2e: cleaning up panicked"),
        }
    }
}

/// Deletes `items`, webhook configurations first so that nothing else is intercepted;
/// PersistentVolumes lose the protection finalizer no controller removes here. The errors.
async fn delete_all(client: Client, mut items: Vec<Leftover>) -> Vec<String> {
    items.sort_by_key(|i| !matches!(i, Leftover::WebhookConfigurations(_)));
    let mut errors = Vec::new();
    let dp = DeleteParams::default();
    let mut note = |what: &str, r: Result<(), kube::Error>| match r {
        Ok(()) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => errors.push(format!("{what}: {e}")),
    };
    for item in items {
        match &item {
            Leftover::WebhookConfigurations(name) => {
                let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
                note(name, m.delete(name, &dp).await.map(drop));
                let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
                note(name, v.delete(name, &dp).await.map(drop));
            }
            Leftover::Node(name) => {
                let nodes: Api<Node> = Api::all(client.clone());
                note(name, nodes.delete(name, &dp).await.map(drop));
            }
            Leftover::PersistentVolume(name) => {
                let pvs: Api<PersistentVolume> = Api::all(client.clone());
                note(name, pvs.delete(name, &dp).await.map(drop));
                let unprotect = json!({"metadata": {"finalizers": Value::Null}});
                note(
                    name,
                    pvs.patch(name, &PatchParams::default(), &Patch::Merge(&unprotect))
                        .await
                        .map(drop),
                );
            }
        }
    }
    errors
}
