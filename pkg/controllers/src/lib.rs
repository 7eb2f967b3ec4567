//! The cloud controllers of hypercloud, as run by the `cloud-controller-manager` and (in-tree)
//! the `controller-manager` personalities; upstream `k8s.io/cloud-provider/controllers` and
//! the cloud-dependent controllers of kube-controller-manager.
//!
//! [`names`] holds the stable controller names and their aliases and resolves a
//! `--controllers` list into the [`Controller`]s to run; [`plan()`] decides which of them can
//! run with the provider and flags (the one decision both the runner and the start-up report
//! read). [`run_plan`] is the one entry point the personalities call: it starts one shared
//! Node cache (and one Service cache) for all the controllers of the process, then each
//! controller:
//!
//! - [`cloud_node`]: initialises Nodes tainted `node.cloudprovider.kubernetes.io/uninitialized`
//!   in one metadata patch and at most one status patch, and refreshes addresses periodically;
//! - [`node_lifecycle`]: taints shut-down Nodes and deletes Nodes whose instance is gone;
//! - [`service`]: load balancers for `type: LoadBalancer` Services;
//! - [`node_ipam`]: pod CIDRs for Nodes from `--cluster-cidr` (with `--allocate-node-cidrs`);
//! - [`route`]: cloud routes for node pod CIDRs;
//! - [`pv_label`]: zone/region labels on PersistentVolumes of cloud volumes (off by default);
//! - [`pv_provisioner`] (kube-controller-manager only): provisions and deletes the cloud
//!   volumes of an in-tree volume plugin (`kubernetes.io/cinder`);
//! - [`pv_expander`] (kube-controller-manager only): grows them when their claim grows;
//! - [`attach_detach`] (kube-controller-manager only): attaches them to the instances of the
//!   Nodes whose pods use them and detaches them afterwards.
//!
//! Each controller follows kube-rs controller-rs: a long-lived state builds a [`Context`]
//! shared by its workers, `reconcile(Arc<K>, Arc<Context>) -> Result<Action>` does the work,
//! and `error_policy` counts the failure and requeues with a per-item exponential backoff.
//!
//! Start here: [`names`] and [`plan()`] (which controllers run), [`run_plan`] (how they start),
//! then one controller's `run` and `reconcile`, e.g. [`cloud_node`]; the mocked-apiserver tests at
//! the bottom of each module pin the exact requests a reconcile sends.
//!
//! Not here: flags (`hypercloud-options`), leader election (`hypercloud-leaderelection`), the
//! process and its start-up report (`cmd/hypercloud/src/runtime.rs`), or any cloud API: every
//! cloud call goes through the provider traits of `hypercloud-cloudprovider`.

// Errors carry the cloud's and the apiserver's errors whole; they are the slow path, so their
// size does not matter.
#![allow(clippy::result_large_err)]

pub mod attach_detach;
pub mod cidr;
pub mod cloud_node;
pub mod credentials;
mod error;
#[cfg(test)]
mod fixtures;
mod informer;
mod metrics;
pub mod names;
pub mod node_ipam;
pub mod node_lifecycle;
pub mod node_manager;
pub mod plan;
pub mod pv_expander;
pub mod pv_label;
pub mod pv_provisioner;
mod queue;
pub mod route;
pub mod service;

use std::sync::Arc;

use hypercloud_cloudprovider::Interface;
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, Service, Taint,
};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

pub use credentials::Credentials;
pub use error::{Error, Result};
pub use names::Controller;
pub use plan::{plan, Plan};
pub use queue::Action;

/// Everything the controllers need from the process that runs them.
pub struct ControllerConfig {
    /// Client for the apiserver: the caches' and, with [`Credentials::Shared`], the
    /// controllers'.
    pub client: kube::Client,
    /// Which identity each controller's writes carry (`--use-service-account-credentials`).
    pub credentials: Credentials,
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
/// Lease) passes the same value to every [`run_plan`] call, so every set's
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
    recorders: std::collections::HashMap<&'static str, Arc<SeriesRecorder>>,
    /// Where [`Context::event`] sends: inline (unit tests, which expect each request in
    /// order) or a bounded queue drained by a background task (running controllers).
    events: EventSink,
}

/// Upstream's event broadcaster queues at most this many events and drops the rest
/// (`maxQueuedEvents`, `watch.DropIfChannelFull`).
const MAX_QUEUED_EVENTS: usize = 1000;

enum EventSink {
    Inline,
    Queue(tokio::sync::mpsc::Sender<PendingEvent>),
}

struct PendingEvent {
    controller: &'static str,
    reference: ObjectReference,
    event: Event,
}

impl Context {
    /// The shared state of one process's controllers: one event recorder per controller,
    /// reporting as `component`.
    pub(crate) fn new(
        client: kube::Client,
        cloud: Arc<dyn Interface>,
        component: &str,
        options: hypercloud_options::ControllerOptions,
        metrics: metrics::Metrics,
    ) -> Self {
        // reportingController is the component (cloud- or kube-controller-manager); the
        // controller name, upstream's event source, goes in reportingInstance.
        let recorders = names::CLOUD_CONTROLLER_MANAGER
            .iter()
            .chain([names::PV_BINDER, names::PV_EXPANDER, names::ATTACH_DETACH].iter())
            .map(|c| {
                let reporter = Reporter {
                    controller: component.to_string(),
                    instance: Some(c.name.to_string()),
                };
                (
                    c.name,
                    Arc::new(SeriesRecorder::new(client.clone(), reporter)),
                )
            })
            .collect();
        Context {
            client,
            cloud,
            options,
            metrics,
            recorders,
            events: EventSink::Inline,
        }
    }

    /// From now on, [`Context::event`] only queues (at most [`MAX_QUEUED_EVENTS`], then drops
    /// with a log line, as upstream's broadcaster): the reconcile does not wait for the Event's
    /// POST. The returned future sends them, in order, until every clone of this context is
    /// gone; the caller runs it.
    pub(crate) fn queue_events(&mut self) -> impl std::future::Future<Output = ()> + Send {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<PendingEvent>(MAX_QUEUED_EVENTS);
        self.events = EventSink::Queue(tx);
        let recorders = self.recorders.clone();
        async move {
            while let Some(p) = rx.recv().await {
                if let Some(recorder) = recorders.get(p.controller) {
                    publish(recorder, &p.event, &p.reference).await;
                }
            }
        }
    }

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
        let Some((&controller, recorder)) = self.recorders.get_key_value(controller) else {
            tracing::warn!(controller, reason, "no event recorder for controller");
            return;
        };
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        match &self.events {
            EventSink::Inline => publish(recorder, &event, reference).await,
            EventSink::Queue(tx) => {
                let pending = PendingEvent {
                    controller,
                    reference: reference.clone(),
                    event,
                };
                if let Err(e) = tx.try_send(pending) {
                    tracing::warn!(controller, reason, error = %e, "event queue full or closed; dropping the event, as upstream's broadcaster does");
                }
            }
        }
    }
}

async fn publish(recorder: &SeriesRecorder, event: &Event, reference: &ObjectReference) {
    if let Err(e) = recorder.current().publish(event, reference).await {
        tracing::warn!(reason = %event.reason, error = %e, "could not record event");
    }
}

/// Where [`run_plan`] starts the informers beyond the Nodes', whose tasks it aborts at the end.
struct Background<'a> {
    tasks: &'a mut Vec<tokio::task::JoinHandle<()>>,
    resync: informer::Resync,
}

impl Background<'_> {
    /// An informer of every `K` that `api` lists (stripped by `strip`), when `wanted`.
    fn informer<K>(
        &mut self,
        wanted: bool,
        api: Api<K>,
        strip: fn(&mut K),
    ) -> Option<Arc<informer::Informer<K>>>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        if !wanted {
            return None;
        }
        let (informer, task) =
            informer::Informer::start(api, watcher::Config::default(), strip, self.resync);
        self.tasks.push(task);
        Some(informer)
    }
}

/// Counts a failed reconcile of `node` and requeues it after its backoff, logging `what`.
pub(crate) fn requeue_node(
    node: &Node,
    error: &Error,
    queue: &queue::Queue,
    what: &str,
) -> queue::Action {
    let delay = queue.backoff(&node.name_any());
    tracing::warn!(node = %node.name_any(), error = %hypercloud_cloudprovider::Chain(error), ?delay, "{what}");
    queue::Action::Requeue(delay)
}

/// A merge PATCH of the Node `name` (its answer is not read).
pub(crate) async fn patch_node(
    api: &Api<Node>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<()> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|source| Error::PatchNode {
            node: name.to_string(),
            source,
        })?;
    Ok(())
}

/// The Node's taints but those with `key`, as a patch of `spec.taints` sets them.
pub(crate) fn taints_without(node: &Node, key: &str) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != key)
        .collect()
}

/// A merge PATCH of `name` (of `K`, in `namespace` when namespaced; `subresource` such as
/// `status` when given) whose answer is decoded as `T`: a type with only the fields the caller
/// reads, or [`serde::de::IgnoredAny`]. Decoding the whole object would parse its
/// managedFields (JSON trees) and every other field only to drop them; at thousands of Nodes
/// and Services that was a good part of the controllers' CPU.
pub(crate) async fn merge_patch<K, T>(
    client: &kube::Client,
    namespace: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    patch: &serde_json::Value,
) -> std::result::Result<T, kube::Error>
where
    K: kube::Resource<DynamicType = ()>,
    T: serde::de::DeserializeOwned,
{
    let request = kube::core::Request::new(K::url_path(&(), namespace));
    let params = kube::api::PatchParams::default();
    let patch = kube::api::Patch::Merge(patch);
    let built = match subresource {
        Some(sub) => request.patch_subresource(sub, name, &params, &patch),
        None => request.patch(name, &params, &patch),
    }
    .map_err(kube::Error::BuildRequest)?;
    client.request::<T>(built).await
}

/// Upstream's event correlator remembers at most this many events to turn repeats into series
/// (`maxLruCacheEntries`).
const MAX_REMEMBERED_EVENTS: usize = 4096;

/// kube-runtime's [`Recorder`], with its memory bounded as upstream's correlator's.
///
/// The recorder remembers every event it sent for six minutes, to patch a repeat into a
/// series, and sweeps that whole cache on each publish: at 5000 Nodes and 5000 Services (15000
/// Events in a few minutes) that is megabytes held and a sweep of thousands per Event. Here a
/// fresh recorder takes over after [`MAX_REMEMBERED_EVENTS`] publishes, so at most that many
/// are remembered (a repeat just after the hand-over starts a new Event instead of a series,
/// as one evicted from upstream's LRU does).
struct SeriesRecorder {
    client: kube::Client,
    reporter: Reporter,
    /// Publishes per recorder.
    limit: usize,
    current: std::sync::Mutex<(Recorder, usize)>,
}

impl SeriesRecorder {
    fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self::with_limit(client, reporter, MAX_REMEMBERED_EVENTS)
    }

    fn with_limit(client: kube::Client, reporter: Reporter, limit: usize) -> Self {
        let recorder = Recorder::new(client.clone(), reporter.clone());
        Self {
            client,
            reporter,
            limit,
            current: std::sync::Mutex::new((recorder, 0)),
        }
    }

    /// The recorder for the next publish (a clone sharing its cache).
    fn current(&self) -> Recorder {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.1 >= self.limit {
            *current = (Recorder::new(self.client.clone(), self.reporter.clone()), 0);
        }
        current.1 += 1;
        current.0.clone()
    }
}

/// Drops what no controller reads from cached Nodes: the image list and volume lists are most
/// of a big Node's status; node info, capacity, handlers and endpoints are the rest of what a
/// kubelet reports (the informer already drops managedFields).
fn strip_node(node: &mut Node) {
    strip_node_keep_volumes(node);
    if let Some(status) = node.status.as_mut() {
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.node_info = None;
        status.capacity = None;
        status.allocatable = None;
        status.daemon_endpoints = None;
        status.config = None;
        status.runtime_handlers = None;
        status.features = None;
    }
}

/// [`strip_node`] for a process that runs the attach/detach controller, which reads the
/// volume lists.
fn strip_node_keep_volumes(node: &mut Node) {
    if let Some(status) = node.status.as_mut() {
        status.images = None;
    }
}

/// Runs the named controllers (canonical names or aliases from [`names`]) until `shutdown`
/// completes; returns an error naming the controller if one cannot start (e.g. cloud-node
/// without instances support, as upstream) or a name is unknown. Controllers a provider cannot
/// serve (service without load balancers, route without routes or with
/// allocate-node-cidrs=false) are skipped with a warning log, as upstream: see [`plan()`].
pub async fn run_controllers(
    config: ControllerConfig,
    enabled: &[&str],
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    run_controllers_scoped(config, enabled, Scope::default(), shutdown).await
}

/// Runs the controllers `plan` lets run until `shutdown` completes, with metrics registered
/// beforehand (`config.metrics` is not used): for processes that print the plan at start-up
/// and start their controllers in more than one set (leader migration).
pub async fn run_plan(
    config: ControllerConfig,
    metrics: ControllerMetrics,
    plan: &Plan,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    run(config, metrics, plan, Scope::default(), shutdown).await
}

/// [`run_controllers`] over only the Nodes and Services `scope` selects.
pub async fn run_controllers_scoped(
    config: ControllerConfig,
    enabled: &[&str],
    scope: Scope,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    let enabled = enabled
        .iter()
        .map(|n| {
            names::Controller::from_name(n).ok_or_else(|| Error::UnknownController {
                name: n.to_string(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = plan::plan(config.cloud.as_ref(), &config.options, &enabled);
    let metrics = ControllerMetrics::register(&config.metrics)?;
    run(config, metrics, &plan, scope, shutdown).await
}

async fn run(
    config: ControllerConfig,
    ControllerMetrics(metrics): ControllerMetrics,
    plan: &Plan,
    scope: Scope,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    if let Some(e) = plan.refusal() {
        return Err(e);
    }
    plan.log_skipped();
    let run = plan.running();
    let ControllerConfig {
        client,
        credentials,
        cloud,
        component,
        options,
        metrics: _,
    } = config;
    if !cloud.has_cluster_id() {
        tracing::warn!("cloud provider has no cluster ID; running anyway, as upstream's --allow-untagged-cloud");
    }
    if run.is_empty() {
        shutdown.await;
        return Ok(());
    }
    // Each controller's context: the process's client, or one acting as the controller's
    // ServiceAccount (whose token refresh lives as long as `_refreshers`).
    let mut contexts = std::collections::HashMap::new();
    let mut event_senders = Vec::new();
    let mut _refreshers = Vec::new();
    for &controller in &run {
        let controller_client = match &credentials {
            Credentials::Shared => client.clone(),
            Credentials::ServiceAccounts(accounts) => {
                let (c, guard) = accounts.client(controller.service_account()).await?;
                _refreshers.push(guard);
                c
            }
        };
        let mut ctx = Context::new(
            controller_client,
            cloud.clone(),
            &component,
            options.clone(),
            metrics.clone(),
        );
        event_senders.push(ctx.queue_events());
        contexts.insert(controller, Arc::new(ctx));
    }
    let resync = informer::Resync::new(options.generic.min_resync_period.get());

    let mut tasks = tokio::task::JoinSet::new();
    let mut node_cfg = watcher::Config::default();
    if let Some(sel) = &scope.node_label_selector {
        node_cfg = node_cfg.labels(sel);
    }
    let attach_detach = run.contains(&Controller::AttachDetach);
    let strip: fn(&mut Node) = if attach_detach {
        strip_node_keep_volumes
    } else {
        strip_node
    };
    let (nodes, node_task) =
        informer::Informer::<Node>::start(Api::all(client.clone()), node_cfg, strip, resync);
    let mut background = vec![node_task];
    background.extend(event_senders.into_iter().map(tokio::spawn));
    let service_api: Api<Service> = match &scope.service_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut start = Background {
        tasks: &mut background,
        resync,
    };
    let services = start.informer(run.contains(&Controller::ServiceLb), service_api, |_| {});

    let volumes = run.contains(&Controller::PvProvisioner)
        || run.contains(&Controller::PvExpander)
        || attach_detach;
    let pv_label = run.contains(&Controller::PvLabel);
    let pvs: Option<Arc<informer::Informer<PersistentVolume>>> =
        start.informer(pv_label || volumes, Api::all(client.clone()), |_| {});
    let claims: Option<Arc<informer::Informer<PersistentVolumeClaim>>> =
        start.informer(volumes, Api::all(client.clone()), |_| {});
    let pods: Option<Arc<informer::Informer<Pod>>> = start.informer(
        attach_detach,
        Api::all(client.clone()),
        attach_detach::strip_pod,
    );

    for controller in run {
        let Some(ctx) = contexts.get(&controller).cloned() else {
            continue;
        };
        let nodes = nodes.clone();
        let name = controller.name();
        match controller {
            Controller::CloudNode => {
                tasks.spawn(async move { (name, cloud_node::run(ctx, nodes).await) });
            }
            Controller::CloudNodeLifecycle => {
                tasks.spawn(async move { (name, node_lifecycle::run(ctx, nodes).await) });
            }
            Controller::ServiceLb => {
                if let Some(services) = services.clone() {
                    tasks.spawn(async move { (name, service::run(ctx, nodes, services).await) });
                }
            }
            Controller::NodeIpam => {
                tasks.spawn(async move { (name, node_ipam::run(ctx, nodes).await) });
            }
            Controller::NodeRoute => {
                tasks.spawn(async move { (name, route::run(ctx, nodes).await) });
            }
            Controller::PvLabel => {
                if let Some(pvs) = pvs.clone() {
                    tasks.spawn(async move { (name, pv_label::run(ctx, pvs).await) });
                }
            }
            Controller::PvProvisioner => {
                if let (Some(claims), Some(pvs)) = (claims.clone(), pvs.clone()) {
                    tasks.spawn(async move {
                        (name, pv_provisioner::run(ctx, claims, pvs, nodes).await)
                    });
                }
            }
            Controller::PvExpander => {
                if let (Some(claims), Some(pvs)) = (claims.clone(), pvs.clone()) {
                    tasks.spawn(async move { (name, pv_expander::run(ctx, claims, pvs).await) });
                }
            }
            Controller::AttachDetach => {
                if let (Some(pods), Some(claims), Some(pvs)) =
                    (pods.clone(), claims.clone(), pvs.clone())
                {
                    tasks.spawn(async move {
                        (
                            name,
                            attach_detach::run(ctx, nodes, pods, claims, pvs).await,
                        )
                    });
                }
            }
        }
    }

    let result = tokio::select! {
        () = shutdown => Ok(()),
        Some(joined) = tasks.join_next() => match joined {
            Ok((controller, Ok(()))) => Err(Error::ControllerStopped { controller, reason: "returned".into() }),
            Ok((controller, Err(e))) => Err(Error::ControllerStopped { controller, reason: hypercloud_cloudprovider::Chain(&e).to_string() }),
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

    #[tokio::test]
    async fn a_repeated_event_is_a_series_until_the_recorder_hands_over() {
        let (client, mut api) = fixtures::client();
        let reporter = Reporter {
            controller: "cloud-controller-manager".into(),
            instance: Some("cloud-node".into()),
        };
        let recorder = SeriesRecorder::with_limit(client, reporter, 2);
        let reference = ObjectReference {
            kind: Some("Node".into()),
            api_version: Some("v1".into()),
            name: Some("n1".into()),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Normal,
            reason: "Synced".into(),
            note: Some("Node synced successfully".into()),
            action: "Synced".into(),
            secondary: None,
        };
        let server = tokio::spawn(async move {
            let mut methods = Vec::new();
            for _ in 0..4 {
                methods.push(api.echo().await.method);
            }
            methods
        });
        for _ in 0..4 {
            publish(&recorder, &event, &reference).await;
        }
        let methods = tokio::time::timeout(std::time::Duration::from_secs(5), server)
            .await
            .expect("four requests")
            .expect("script");
        // New, repeat (a series), then a fresh recorder: new again, and its repeat a series.
        assert_eq!(methods, ["POST", "PATCH", "POST", "PATCH"]);
    }

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
            credentials: Credentials::Shared,
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
        // No load balancers, IPAM and routes off by flag, no volume labels: nothing runs, no
        // error.
        run_controllers(
            config(&["load-balancer", "pv-labeler"]),
            &[
                names::SERVICE_LB.name,
                names::NODE_IPAM.name,
                names::NODE_ROUTE.name,
                names::PV_LABEL.name,
            ],
            async {},
        )
        .await
        .expect("skipped, not failed");
    }
}
