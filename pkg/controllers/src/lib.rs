//! The cloud controllers of hypercloud, as run by the `cloud-controller-manager` and (in-tree)
//! the `controller-manager` personalities; upstream `k8s.io/cloud-provider/controllers` and
//! the cloud-dependent controllers of kube-controller-manager.
//!
//! [`names`] holds the stable controller names and their aliases and resolves a
//! `--controllers` list into the set to run. [`run_controllers`] is the one entry point the
//! personalities call: it starts one shared Node cache (and one Service cache) for all the
//! controllers of the process, then each controller:
//!
//! - [`cloud_node`]: initialises Nodes tainted `node.cloudprovider.kubernetes.io/uninitialized`
//!   in one metadata patch and at most one status patch, and refreshes addresses periodically;
//! - [`node_lifecycle`]: taints shut-down Nodes and deletes Nodes whose instance is gone;
//! - [`service`]: load balancers for `type: LoadBalancer` Services;
//! - [`route`]: cloud routes for node pod CIDRs;
//! - [`pv_label`]: zone/region labels on PersistentVolumes of cloud volumes (off by default).
//!
//! Each controller follows kube-rs controller-rs: a long-lived state builds a [`Context`]
//! shared by its workers, `reconcile(Arc<K>, Arc<Context>) -> Result<Action>` does the work,
//! and `error_policy` counts the failure and requeues with a per-item exponential backoff.

// Errors carry the cloud's and the apiserver's errors whole; they are the slow path, so their
// size does not matter.
#![allow(clippy::result_large_err)]

pub mod cloud_node;
mod informer;
mod metrics;
pub mod names;
pub mod node_lifecycle;
pub mod pv_label;
mod queue;
pub mod route;
pub mod service;

use std::sync::Arc;

use hypercloud_cloudprovider::Interface;
use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolume, Service};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::Api;

pub use queue::Action;

/// Everything the controllers need from the process that runs them.
pub struct ControllerConfig {
    /// Client for the apiserver.
    pub client: kube::Client,
    /// The cloud provider.
    pub cloud: Arc<dyn hypercloud_cloudprovider::Interface>,
    /// `cloud-controller-manager` or `kube-controller-manager`; events' reportingController.
    pub component: String,
    /// The controller flags.
    pub options: hypercloud_options::ControllerOptions,
    /// Where the controllers register their metrics.
    pub metrics: prometheus::Registry,
}

/// The controllers' metrics, registered once in a registry. A process that starts its
/// controllers in more than one set (leader migration runs the migrated ones under a second
/// Lease) passes the same value to every [`run_controllers_with`] call, so every set's
/// workqueue and controller metrics are served.
#[derive(Clone)]
pub struct ControllerMetrics(metrics::Metrics);

impl ControllerMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &prometheus::Registry) -> Result<Self, Error> {
        Ok(Self(metrics::Metrics::new(registry)?))
    }
}

/// Restricts what the controllers see. The default (everything) is what a real
/// controller-manager runs with; tests sharing one apiserver use it to see only their own
/// Nodes and Services.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Label selector for the Node cache (`hypercloud.io/test=abc`).
    pub node_label_selector: Option<String>,
    /// Only Services of this namespace.
    pub service_namespace: Option<String>,
}

/// Errors of the controllers; each variant names the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A controller cannot start with this provider or these options.
    #[error("cannot start {controller}: {reason}")]
    StartController {
        /// Canonical controller name.
        controller: &'static str,
        /// Why.
        reason: String,
    },
    /// The controllers' metrics could not be registered.
    #[error("registering controller metrics: {0}")]
    RegisterMetrics(#[from] prometheus::Error),
    /// A controller task ended unexpectedly.
    #[error("{controller} stopped unexpectedly: {reason}")]
    ControllerStopped {
        /// Canonical controller name.
        controller: &'static str,
        /// Why.
        reason: String,
    },
    /// Asking the cloud about a Node's instance failed.
    #[error("getting instance metadata of node {node}: {source}")]
    InstanceMetadata {
        /// Node name.
        node: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// The cloud gave no provider ID for a Node that has none.
    #[error("cloud provider does not set node provider ID for node {node}")]
    MissingProviderId {
        /// Node name.
        node: String,
    },
    /// The kubelet's `alpha.kubernetes.io/provided-node-ip` matches no cloud address.
    #[error("provided node ip for node {node:?} is not valid: {message}")]
    ProvidedNodeIp {
        /// Node name.
        node: String,
        /// What is wrong.
        message: String,
    },
    /// Patching a Node's metadata or spec failed.
    #[error("patching node {node}: {source}")]
    PatchNode {
        /// Node name.
        node: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Patching a Node's status failed.
    #[error("patching status of node {node}: {source}")]
    PatchNodeStatus {
        /// Node name.
        node: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Deleting a Node failed.
    #[error("deleting node {node}: {source}")]
    DeleteNode {
        /// Node name.
        node: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Asking the cloud whether an instance exists or is shut down failed.
    #[error("checking instance of node {node}: {source}")]
    CheckInstance {
        /// Node name.
        node: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// A load balancer call failed.
    #[error("{operation} for service {service}: {source}")]
    LoadBalancer {
        /// `ensure load balancer`, `delete load balancer`, ...
        operation: &'static str,
        /// `namespace/name`.
        service: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// The cloud returned no status for a load balancer.
    #[error("service status returned by EnsureLoadBalancer is nil for service {service}")]
    NilLoadBalancerStatus {
        /// `namespace/name`.
        service: String,
    },
    /// Patching a Service's finalizers failed.
    #[error("patching finalizers of service {service}: {source}")]
    PatchServiceFinalizers {
        /// `namespace/name`.
        service: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// Patching a Service's status failed.
    #[error("patching status of service {service}: {source}")]
    PatchServiceStatus {
        /// `namespace/name`.
        service: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// A route call failed.
    #[error("{operation}: {source}")]
    Route {
        /// `list routes`, `create route 10.244.1.0/24 for node-1`, ...
        operation: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// Asking the cloud for a volume's labels failed.
    #[error("getting labels of the volume of persistent volume {pv}: {source}")]
    GetVolumeLabels {
        /// PV name.
        pv: String,
        /// The cloud's error.
        source: hypercloud_cloudprovider::Error,
    },
    /// Patching a PersistentVolume failed.
    #[error("patching persistent volume {pv}: {source}")]
    PatchPersistentVolume {
        /// PV name.
        pv: String,
        /// The apiserver's error.
        source: kube::Error,
    },
    /// `--cluster-cidr` or a node podCIDR is not a CIDR.
    #[error("invalid CIDR {cidr:?}")]
    ParseCidr {
        /// The text.
        cidr: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What every controller of one process shares (the long-lived state controller-rs keeps).
pub struct Context {
    /// Client for the apiserver.
    pub(crate) client: kube::Client,
    /// The cloud provider.
    pub(crate) cloud: Arc<dyn Interface>,
    /// The controller flags.
    pub(crate) options: hypercloud_options::ControllerOptions,
    pub(crate) metrics: metrics::Metrics,
    /// One event recorder per controller, so repeated events become series as upstream.
    recorders: std::collections::HashMap<&'static str, Recorder>,
}

impl Context {
    /// Publishes an event about `reference` as `controller`; a failure is only logged, as
    /// upstream's event broadcaster does.
    pub(crate) async fn event(
        &self,
        controller: &str,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let Some(recorder) = self.recorders.get(controller) else {
            tracing::warn!(controller, reason, "no event recorder for controller");
            return;
        };
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, reference).await {
            tracing::warn!(reason, error = %e, "could not record event");
        }
    }
}

/// Drops what no controller reads from cached Nodes: the image list and volume lists are most
/// of a big Node's status.
fn strip_node(node: &mut Node) {
    if let Some(status) = node.status.as_mut() {
        status.images = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
    }
}

/// Runs the named controllers (canonical names from [`names`]) until `shutdown` completes;
/// returns an error naming the controller if one cannot start (e.g. cloud-node without
/// instances support, as upstream). Controllers a provider cannot serve (service without load
/// balancers, route without routes or with allocate-node-cidrs=false) are skipped with a
/// warning log, as upstream.
pub async fn run_controllers(
    config: ControllerConfig,
    enabled: &[&'static str],
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    run_controllers_scoped(config, enabled, Scope::default(), shutdown).await
}

/// [`run_controllers`] with metrics registered beforehand (`config.metrics` is not used):
/// for processes that start more than one set of controllers.
pub async fn run_controllers_with(
    config: ControllerConfig,
    metrics: ControllerMetrics,
    enabled: &[&'static str],
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    run(config, metrics, enabled, Scope::default(), shutdown).await
}

/// [`run_controllers`] over only the Nodes and Services `scope` selects.
pub async fn run_controllers_scoped(
    config: ControllerConfig,
    enabled: &[&'static str],
    scope: Scope,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    let metrics = ControllerMetrics::register(&config.metrics)?;
    run(config, metrics, enabled, scope, shutdown).await
}

async fn run(
    config: ControllerConfig,
    ControllerMetrics(metrics): ControllerMetrics,
    enabled: &[&'static str],
    scope: Scope,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    let ControllerConfig {
        client,
        cloud,
        component,
        options,
        metrics: _,
    } = config;
    let has_instances = cloud.instances().is_some() || cloud.instances_v2().is_some();
    let mut run = Vec::new();
    for &name in enabled {
        match name {
            n if n == names::CLOUD_NODE.name || n == names::CLOUD_NODE_LIFECYCLE.name => {
                if !has_instances {
                    return Err(Error::StartController {
                        controller: n,
                        reason: "cloud provider does not support instances".into(),
                    });
                }
                run.push(n);
            }
            n if n == names::SERVICE_LB.name => {
                if cloud.load_balancer().is_none() {
                    tracing::warn!(
                        controller = n,
                        "cloud provider does not support load balancers; not starting it"
                    );
                    continue;
                }
                run.push(n);
            }
            n if n == names::NODE_ROUTE.name => {
                let shared = &options.kube_cloud_shared;
                if !shared.allocate_node_cidrs || !shared.configure_cloud_routes {
                    tracing::info!(
                        controller = n,
                        allocate_node_cidrs = shared.allocate_node_cidrs,
                        configure_cloud_routes = shared.configure_cloud_routes,
                        "will not configure cloud provider routes"
                    );
                    continue;
                }
                if cloud.routes().is_none() {
                    tracing::warn!(
                        controller = n,
                        "cloud provider does not support routes; not starting it"
                    );
                    continue;
                }
                route::cluster_cidrs(shared.cluster_cidr.as_deref().unwrap_or(""))?;
                run.push(n);
            }
            n if n == names::PV_LABEL.name => {
                if cloud.pv_labeler().is_none() {
                    tracing::warn!(
                        controller = n,
                        "cloud provider does not label volumes; not starting it"
                    );
                    continue;
                }
                run.push(n);
            }
            n => {
                tracing::warn!(
                    controller = n,
                    "not a cloud controller of this crate; skipping"
                );
            }
        }
    }
    if !cloud.has_cluster_id() {
        tracing::warn!("cloud provider has no cluster ID; running anyway, as upstream's --allow-untagged-cloud");
    }
    let ctx = Arc::new(Context {
        client: client.clone(),
        cloud,
        options,
        metrics,
        // reportingController is the component (cloud- or kube-controller-manager); the
        // controller name, upstream's event source, goes in reportingInstance.
        recorders: names::CLOUD_CONTROLLER_MANAGER
            .iter()
            .map(|c| {
                let reporter = Reporter {
                    controller: component.clone(),
                    instance: Some(c.name.to_string()),
                };
                (c.name, Recorder::new(client.clone(), reporter))
            })
            .collect(),
    });
    if run.is_empty() {
        shutdown.await;
        return Ok(());
    }

    let mut tasks = tokio::task::JoinSet::new();
    let mut node_cfg = watcher::Config::default();
    if let Some(sel) = &scope.node_label_selector {
        node_cfg = node_cfg.labels(sel);
    }
    let (nodes, node_task) =
        informer::Informer::<Node>::start(Api::all(client.clone()), node_cfg, strip_node);
    let mut background = vec![node_task];
    let services = if run.contains(&names::SERVICE_LB.name) {
        let api: Api<Service> = match &scope.service_namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (services, task) =
            informer::Informer::<Service>::start(api, watcher::Config::default(), |_| {});
        background.push(task);
        Some(services)
    } else {
        None
    };

    let pvs = if run.contains(&names::PV_LABEL.name) {
        let (pvs, task) = informer::Informer::<PersistentVolume>::start(
            Api::all(client.clone()),
            watcher::Config::default(),
            |_| {},
        );
        background.push(task);
        Some(pvs)
    } else {
        None
    };

    for name in run {
        let ctx = ctx.clone();
        let nodes = nodes.clone();
        match name {
            n if n == names::CLOUD_NODE.name => {
                tasks.spawn(async move { (n, cloud_node::run(ctx, nodes).await) });
            }
            n if n == names::CLOUD_NODE_LIFECYCLE.name => {
                tasks.spawn(async move { (n, node_lifecycle::run(ctx, nodes).await) });
            }
            n if n == names::SERVICE_LB.name => {
                if let Some(services) = services.clone() {
                    tasks.spawn(async move { (n, service::run(ctx, nodes, services).await) });
                }
            }
            n if n == names::PV_LABEL.name => {
                if let Some(pvs) = pvs.clone() {
                    tasks.spawn(async move { (n, pv_label::run(ctx, pvs).await) });
                }
            }
            n => {
                tasks.spawn(async move { (n, route::run(ctx, nodes).await) });
            }
        }
    }

    let result = tokio::select! {
        () = shutdown => Ok(()),
        Some(joined) = tasks.join_next() => match joined {
            Ok((controller, Ok(()))) => Err(Error::ControllerStopped { controller, reason: "returned".into() }),
            Ok((controller, Err(e))) => Err(Error::ControllerStopped { controller, reason: e.to_string() }),
            Err(e) => Err(Error::ControllerStopped { controller: "controller", reason: e.to_string() }),
        },
    };
    tasks.abort_all();
    for t in background {
        t.abort();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig};

    fn config(disabled: &[&str]) -> ControllerConfig {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            c: hypercloud_options::ControllerOptions,
        }
        // Never contacted: these runs stop before any watch starts.
        let kube_config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        ControllerConfig {
            client: kube::Client::try_from(kube_config).expect("client"),
            cloud: Arc::new(FakeCloud::new(FakeConfig {
                disabled: disabled.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            })),
            component: "cloud-controller-manager".into(),
            options: Flags::parse_from(["t"]).c,
            metrics: prometheus::Registry::new(),
        }
    }

    #[tokio::test]
    async fn cloud_node_without_instances_is_a_start_error_naming_it() {
        let err = run_controllers(
            config(&["instances", "instances-v2"]),
            &[names::CLOUD_NODE.name],
            async {},
        )
        .await
        .expect_err("no instances");
        assert!(err.to_string().contains("cloud-node-controller"), "{err}");
    }

    #[tokio::test]
    async fn unservable_controllers_are_skipped() {
        // No load balancers, routes off by flag, no volume labels: nothing runs, no error.
        run_controllers(
            config(&["load-balancer", "pv-labeler"]),
            &[
                names::SERVICE_LB.name,
                names::NODE_ROUTE.name,
                names::PV_LABEL.name,
            ],
            async {},
        )
        .await
        .expect("skipped, not failed");
    }
}
