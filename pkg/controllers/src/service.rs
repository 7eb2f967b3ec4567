//! The service load-balancer controller (upstream `k8s.io/cloud-provider/controllers/service`):
//! Services of `type: LoadBalancer` without a `spec.loadBalancerClass` get a cloud load
//! balancer. The finalizer `service.kubernetes.io/load-balancer-cleanup` goes on before the
//! load balancer is created and comes off after it is deleted (Service deleted, or its type
//! changed away from LoadBalancer); `status.loadBalancer` is patched with what the cloud
//! returned. Node-set changes update the backends of every load balancer (upstream
//! `nodeSyncLoop`), with the current upstream node predicates (KEP-3458): a node is a backend
//! unless it is being deleted, carries `node.kubernetes.io/exclude-from-external-load-balancers`,
//! or is tainted `ToBeDeletedByClusterAutoscaler`; readiness and `externalTrafficPolicy` do not
//! change the set.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hypercloud_cloudprovider::wellknown::{
    parse_go_bool, FINALIZER_LB_CLEANUP, LABEL_EXCLUDE_FROM_EXTERNAL_LB,
};
use hypercloud_cloudprovider::{Chain, Error as CloudError};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, ObjectReference, Service};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde::de::IgnoredAny;
use serde_json::json;
use tokio::sync::Notify;

use crate::informer::{get_by_key, key_of, next_notice, Informer, Notice};
use crate::queue::{run_workers, Action, Backoff, Queue};
use crate::{merge_patch, names, Context, Error, Result};

const CONTROLLER: &str = names::SERVICE_LB.name;
/// Cluster autoscaler's taint for nodes it is about to delete.
const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// The controller's own state next to the shared [`Context`].
pub(crate) struct ServiceState {
    ctx: Arc<Context>,
    nodes: Arc<Informer<Node>>,
    queue: Arc<Queue>,
    /// Backend nodes each Service's load balancer was last given (upstream
    /// `lastSyncedNodes`); only these Services take part in node syncs.
    last_synced: Mutex<HashMap<String, NodeSet>>,
    /// The node set last recorded: Services synced with the same nodes share it, so 5000
    /// Services over 5000 Nodes hold one list, not 5000 copies (gigabytes).
    interned: Mutex<NodeSet>,
    /// The backend Nodes as of the node cache's change count: every Service synced until
    /// the next Node change shares one list (upstream lists pointers from its lister; a copy
    /// of 5000 Nodes per Service was most of the CPU of syncing 5000 Services).
    backends: Mutex<Option<(u64, Backends)>>,
}

/// The backend Nodes of one state of the node cache, and their [`NodeSet`] (derived once
/// per change, not compared again by every Service sync).
#[derive(Clone)]
struct Backends {
    nodes: Arc<Vec<Node>>,
    names: NodeSet,
}

/// The backend nodes a load balancer was given: name and provider ID (upstream
/// `nodesSufficientlyEqual` compares both).
type NodeSet = Arc<[(String, String)]>;

fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}

impl ServiceState {
    fn last_synced(&self) -> std::sync::MutexGuard<'_, HashMap<String, NodeSet>> {
        self.last_synced.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The backends: cached Nodes that pass [`include_node`], sorted by name, with their
    /// node set.
    fn backends(&self) -> Backends {
        // Read before listing: a change while listing makes the next call list again.
        let changes = self.nodes.changes();
        let mut cached = self.backends.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, backends)) = cached.as_ref() {
            if *at == changes {
                return backends.clone();
            }
        }
        let mut out: Vec<Node> = self
            .nodes
            .store
            .state()
            .iter()
            .filter(|n| include_node(n))
            .map(|n| (**n).clone())
            .collect();
        out.sort_by_key(|n| n.name_any());
        let backends = Backends {
            names: self.node_set(&out),
            nodes: Arc::new(out),
        };
        *cached = Some((changes, backends.clone()));
        backends
    }

    /// `nodes`' names and provider IDs, shared with the set recorded last when they are the
    /// same.
    fn node_set(&self, nodes: &[Node]) -> NodeSet {
        let mut last = self.interned.lock().unwrap_or_else(|p| p.into_inner());
        let same = last.len() == nodes.len()
            && last.iter().zip(nodes).all(|((name, id), n)| {
                n.metadata.name.as_deref() == Some(name.as_str()) && provider_id(n) == id
            });
        if !same {
            *last = nodes
                .iter()
                .map(|n| (n.name_any(), provider_id(n).to_owned()))
                .collect();
        }
        last.clone()
    }
}

/// Runs the controller until it is dropped.
pub(crate) async fn run(
    ctx: Arc<Context>,
    nodes: Arc<Informer<Node>>,
    services: Arc<Informer<Service>>,
) -> Result<()> {
    let queue = Queue::new("service", Backoff::SERVICE, ctx.metrics.clone());
    let state = Arc::new(ServiceState {
        ctx: ctx.clone(),
        nodes: nodes.clone(),
        queue: queue.clone(),
        last_synced: Mutex::new(HashMap::new()),
        interned: Mutex::new(Arc::from(Vec::new())),
        backends: Mutex::new(None),
    });
    let mut service_feed = services.subscribe();
    let mut node_feed = nodes.subscribe();
    services.ready().await;
    nodes.ready().await;

    let enqueue_services = {
        let queue = queue.clone();
        let services = services.clone();
        let state = state.clone();
        async move {
            let all = |queue: &Queue| {
                for s in services.store.state() {
                    if wants_load_balancer(&s) || needs_cleanup(&s) {
                        queue.add(key_of(s.as_ref()));
                    }
                }
            };
            all(&queue);
            while let Some(notice) = next_notice(&mut service_feed).await {
                match notice {
                    Notice::Applied { old, new } => {
                        let changed = match &old {
                            None => true,
                            Some(old) => needs_update(old, &new),
                        };
                        if (wants_load_balancer(&new) && changed) || needs_cleanup(&new) {
                            queue.add(key_of(new.as_ref()));
                        }
                    }
                    // The finalizer makes us see deletions as updates first; a Service that
                    // went without it (finalizer removed by hand) but had a load balancer
                    // from us still gets it deleted, as upstream `processServiceDeletion`.
                    Notice::Deleted(svc) => {
                        let had_lb = state.last_synced().remove(&key_of(svc.as_ref())).is_some();
                        if had_lb && wants_load_balancer(&svc) {
                            delete_orphaned(&state, &svc).await;
                        }
                    }
                    Notice::Resync => all(&queue),
                }
            }
        }
    };

    let node_changed = Arc::new(Notify::new());
    let watch_nodes = {
        let node_changed = node_changed.clone();
        async move {
            while let Some(notice) = next_notice(&mut node_feed).await {
                let trigger = match &notice {
                    Notice::Applied { old: None, .. } | Notice::Deleted(_) | Notice::Resync => true,
                    Notice::Applied {
                        old: Some(old),
                        new,
                    } => should_sync_updated_node(old, new),
                };
                if trigger {
                    node_changed.notify_one();
                }
            }
        }
    };
    let node_sync = {
        let state = state.clone();
        let services = services.clone();
        async move {
            loop {
                // Upstream also resyncs every 100s, catching missed failures.
                let _ =
                    tokio::time::timeout(Duration::from_secs(100), node_changed.notified()).await;
                if !sync_nodes(&state, &services).await {
                    // Retry the failed ones soon.
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    node_changed.notify_one();
                }
            }
        }
    };

    let work = {
        let state = state.clone();
        let services = services.clone();
        let workers = ctx.options.service_controller.concurrent_service_syncs;
        run_workers(queue.clone(), workers, move |key: String| {
            let state = state.clone();
            let svc = get_by_key(&services.store, &key);
            async move {
                let svc = svc?;
                let result = reconcile(svc.clone(), state.clone()).await;
                state
                    .queue
                    .settle(&key, result, |e| error_policy(svc, &e, &state))
            }
        })
    };
    tokio::join!(enqueue_services, watch_nodes, node_sync, work);
    Ok(())
}

/// Counts the failure and requeues the Service after its backoff.
pub(crate) fn error_policy(svc: Arc<Service>, error: &Error, state: &ServiceState) -> Action {
    let delay = state.queue.backoff(&key_of(svc.as_ref()));
    tracing::warn!(service = %key_of(svc.as_ref()), error = %Chain(error), ?delay, "error processing service, retrying");
    Action::Requeue(delay)
}

/// Tells on the Service that its load balancer is gone.
async fn deleted_load_balancer(ctx: &Context, reference: &ObjectReference) {
    ctx.event(
        CONTROLLER,
        reference,
        EventType::Normal,
        "DeletedLoadBalancer",
        "Deleted load balancer".into(),
    )
    .await;
}

/// Warns on the Service that its load balancer has no Node to send traffic to.
async fn no_available_nodes(ctx: &Context, reference: &ObjectReference) {
    ctx.event(
        CONTROLLER,
        reference,
        EventType::Warning,
        "UnAvailableLoadBalancer",
        "There are no available nodes for LoadBalancer".into(),
    )
    .await;
}

/// Creates, updates or deletes one Service's load balancer (upstream
/// `syncLoadBalancerIfNeeded`).
#[tracing::instrument(skip_all, fields(service = %key_of(svc.as_ref())))]
pub(crate) async fn reconcile(svc: Arc<Service>, state: Arc<ServiceState>) -> Result<Action> {
    let ctx = &state.ctx;
    let key = key_of(svc.as_ref());
    let result = sync(&svc, &state, &key).await;
    if let Err(e) = &result {
        ctx.event(
            CONTROLLER,
            &svc.object_ref(&()),
            EventType::Warning,
            "SyncLoadBalancerFailed",
            format!("Error syncing load balancer: {}", Chain(e)),
        )
        .await;
    }
    result
}

/// One pass of the finalizer protocol: [`ensure`] or [`cleanup`], wrapped by [`finalizer`],
/// then the status patch.
async fn sync(svc: &Service, state: &ServiceState, key: &str) -> Result<Action> {
    let ctx = &state.ctx;
    let Some(event) = FinalizerEvent::of(svc).filter(|_| ctx.cloud.load_balancer().is_some())
    else {
        return Ok(Action::AwaitChange);
    };
    let reference = svc.object_ref(&());
    let previous = current_status(svc);
    let new_status = match event {
        FinalizerEvent::Cleanup => {
            finalizer(ctx, svc, event, cleanup(svc, state, key)).await?;
            deleted_load_balancer(ctx, &reference).await;
            if deleted_with_our_finalizer(svc) {
                // Upstream patches the status here too and gets a 404 (its comment: "Service
                // disappears right after we remove the finalizer"): the patch above removed
                // the last finalizer of a Service being deleted, guarded by its
                // resourceVersion, so the apiserver has deleted it. Nothing to clear.
                return Ok(Action::AwaitChange);
            }
            LoadBalancerStatus::default()
        }
        FinalizerEvent::Apply => {
            tracing::info!("ensuring load balancer");
            ctx.event(
                CONTROLLER,
                &reference,
                EventType::Normal,
                "EnsuringLoadBalancer",
                "Ensuring load balancer".into(),
            )
            .await;
            match finalizer(ctx, svc, event, ensure(svc, state, key)).await? {
                Some(status) => status,
                // Another controller owns this load balancer: nothing to report.
                None => return Ok(Action::AwaitChange),
            }
        }
    };
    if !status_equal(&previous, &new_status) {
        patch_status(ctx, svc, key, &new_status).await?;
    }
    Ok(Action::AwaitChange)
}

/// Upstream `LoadBalancerStatusEqual` (the ingress lists, semantically) as the apiserver
/// stores them: since `LoadBalancerIPMode` (GA in 1.32) it defaults the `ipMode` of an ingress
/// with an IP to `VIP`, and Go's semantic equality takes an empty list for an absent one. A
/// provider that leaves `ipMode` unset (OCCM sets `VIP`; ours leave it to the apiserver)
/// would otherwise differ from the stored status on every later sync, and the same status
/// would be written again each time (200 Services: 200 writes more than OCCM).
fn status_equal(stored: &LoadBalancerStatus, new: &LoadBalancerStatus) -> bool {
    let defaulted = |s: &LoadBalancerStatus| {
        let mut ingress = s.ingress.clone().unwrap_or_default();
        for i in &mut ingress {
            if i.ip.as_deref().is_some_and(|ip| !ip.is_empty()) && i.ip_mode.is_none() {
                i.ip_mode = Some("VIP".to_owned());
            }
            if i.ports.as_ref().is_some_and(Vec::is_empty) {
                i.ports = None;
            }
        }
        ingress
    };
    defaulted(stored) == defaulted(new)
}

/// Which side of the finalizer protocol a Service is on (kube-runtime `finalizer::Event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FinalizerEvent {
    /// It wants a load balancer: [`ensure`].
    Apply,
    /// Our finalizer is on and it is being deleted or no longer wants one: [`cleanup`].
    Cleanup,
}

impl FinalizerEvent {
    fn of(svc: &Service) -> Option<Self> {
        if needs_cleanup(svc) {
            Some(FinalizerEvent::Cleanup)
        } else if wants_load_balancer(svc) {
            Some(FinalizerEvent::Apply)
        } else {
            None
        }
    }
}

/// The one owner of the finalizer `service.kubernetes.io/load-balancer-cleanup` (kube-runtime's
/// `finalizer()`): before `work` applies, the finalizer goes on, so the Service cannot
/// disappear with its load balancer left behind; after `work` cleaned up, it always comes off,
/// so the Service can go.
async fn finalizer<T>(
    ctx: &Context,
    svc: &Service,
    event: FinalizerEvent,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match event {
        FinalizerEvent::Apply => {
            if !has_finalizer(svc) {
                patch_finalizers(ctx, svc, true).await?;
            }
            work.await
        }
        FinalizerEvent::Cleanup => {
            let done = work.await?;
            patch_finalizers(ctx, svc, false).await?;
            Ok(done)
        }
    }
}

/// Creates or updates the load balancer (upstream `ensureLoadBalancer`); `None` when another
/// controller implements it.
async fn ensure(
    svc: &Service,
    state: &ServiceState,
    key: &str,
) -> Result<Option<LoadBalancerStatus>> {
    let ctx = &state.ctx;
    let Some(lb) = ctx.cloud.load_balancer() else {
        return Ok(None);
    };
    let cluster = &ctx.options.kube_cloud_shared.cluster_name;
    let reference = svc.object_ref(&());
    let Backends { nodes, names } = state.backends();
    if nodes.is_empty() {
        no_available_nodes(ctx, &reference).await;
    }
    ctx.metrics.lb_sync.inc();
    let status = match lb.ensure_load_balancer(cluster, svc, &nodes).await {
        Ok(s) => s,
        Err(CloudError::ImplementedElsewhere) => return Ok(None),
        Err(source) => {
            return Err(Error::LoadBalancer {
                operation: "ensure load balancer",
                service: key.to_string(),
                source,
            })
        }
    };
    state.last_synced().insert(key.to_string(), names);
    ctx.event(
        CONTROLLER,
        &reference,
        EventType::Normal,
        "EnsuredLoadBalancer",
        "Ensured load balancer".into(),
    )
    .await;
    Ok(Some(status))
}

/// Deletes the load balancer if the cloud still has one (upstream `processLoadBalancerDelete`
/// as called from `syncLoadBalancerIfNeeded`).
async fn cleanup(svc: &Service, state: &ServiceState, key: &str) -> Result<()> {
    let ctx = &state.ctx;
    let Some(lb) = ctx.cloud.load_balancer() else {
        return Ok(());
    };
    let cluster = &ctx.options.kube_cloud_shared.cluster_name;
    let lb_err = |operation, source| Error::LoadBalancer {
        operation,
        service: key.to_string(),
        source,
    };
    let exists = lb
        .get_load_balancer(cluster, svc)
        .await
        .map_err(|e| lb_err("check if load balancer exists before cleanup", e))?
        .is_some();
    if exists {
        tracing::info!("deleting existing load balancer");
        ctx.event(
            CONTROLLER,
            &svc.object_ref(&()),
            EventType::Normal,
            "DeletingLoadBalancer",
            "Deleting load balancer".into(),
        )
        .await;
        match lb.ensure_load_balancer_deleted(cluster, svc).await {
            Ok(()) | Err(CloudError::ImplementedElsewhere) => {}
            Err(e) => return Err(lb_err("delete load balancer", e)),
        }
    }
    state.last_synced().remove(key);
    Ok(())
}

/// Writes `status.loadBalancer` with one merge patch.
async fn patch_status(
    ctx: &Context,
    svc: &Service,
    key: &str,
    status: &LoadBalancerStatus,
) -> Result<()> {
    let namespace = svc.namespace();
    let mut lb_json = serde_json::to_value(status).unwrap_or_else(|_| json!({}));
    // A merge patch only clears what it names.
    if status.ingress.is_none() {
        lb_json["ingress"] = serde_json::Value::Null;
    }
    let patch = json!({"status": {"loadBalancer": lb_json}});
    match merge_patch::<Service, IgnoredAny>(
        &ctx.client,
        Some(namespace.as_deref().unwrap_or("default")),
        &svc.name_any(),
        Some("status"),
        &patch,
    )
    .await
    {
        Ok(_) => Ok(()),
        // The Service went away right after its finalizer did.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(Error::PatchServiceStatus {
            service: key.to_string(),
            source,
        }),
    }
}

/// Deletes the load balancer of a Service that is already gone (one attempt: the object,
/// and so any retry key, no longer exists).
async fn delete_orphaned(state: &ServiceState, svc: &Service) {
    let ctx = &state.ctx;
    let Some(lb) = ctx.cloud.load_balancer() else {
        return;
    };
    let reference = svc.object_ref(&());
    ctx.event(
        CONTROLLER,
        &reference,
        EventType::Normal,
        "DeletingLoadBalancer",
        "Deleting load balancer".into(),
    )
    .await;
    let cluster = &ctx.options.kube_cloud_shared.cluster_name;
    match lb.ensure_load_balancer_deleted(cluster, svc).await {
        Ok(()) | Err(CloudError::ImplementedElsewhere) => {
            deleted_load_balancer(ctx, &reference).await;
        }
        Err(e) => {
            tracing::error!(service = %key_of(svc), error = %Chain(&e), "deleting load balancer of deleted service");
            ctx.event(
                CONTROLLER,
                &reference,
                EventType::Warning,
                "DeleteLoadBalancerFailed",
                format!("Error deleting load balancer: {}", Chain(&e)),
            )
            .await;
        }
    }
}

fn current_status(svc: &Service) -> LoadBalancerStatus {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.clone())
        .unwrap_or_default()
}

/// Adds or removes our finalizer with a merge patch guarded by the resourceVersion.
async fn patch_finalizers(ctx: &Context, svc: &Service, add: bool) -> Result<()> {
    let mut finalizers: Vec<String> = svc
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER_LB_CLEANUP)
        .cloned()
        .collect();
    if add {
        finalizers.push(FINALIZER_LB_CLEANUP.into());
    } else if finalizers.len() == svc.finalizers().len() {
        return Ok(());
    }
    let namespace = svc.namespace();
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": svc.resource_version(),
    }});
    match merge_patch::<Service, IgnoredAny>(
        &ctx.client,
        Some(namespace.as_deref().unwrap_or("default")),
        &svc.name_any(),
        None,
        &patch,
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 && !add => Ok(()),
        Err(source) => Err(Error::PatchServiceFinalizers {
            service: key_of(svc),
            source,
        }),
    }
}

/// Updates the backends of every synced load balancer whose node set changed (upstream
/// `syncNodes`); returns whether all succeeded.
async fn sync_nodes(state: &ServiceState, services: &Informer<Service>) -> bool {
    let ctx = &state.ctx;
    let Some(lb) = ctx.cloud.load_balancer() else {
        return true;
    };
    // No load balancer synced yet (a cluster starting: thousands of Node changes, no
    // Service): nothing to compare, so do not list the Nodes at all.
    if state.last_synced().is_empty() {
        return true;
    }
    let start = Instant::now();
    let cluster = &ctx.options.kube_cloud_shared.cluster_name;
    let Backends { nodes, names } = state.backends();
    let stale: Vec<String> = state
        .last_synced()
        .iter()
        .filter(|(_, synced)| !Arc::ptr_eq(synced, &names) && synced[..] != names[..])
        .map(|(k, _)| k.clone())
        .collect();
    let mut ok = true;
    for key in stale {
        let Some(svc) = get_by_key(&services.store, &key) else {
            state.last_synced().remove(&key);
            continue;
        };
        if !wants_load_balancer(&svc) || needs_cleanup(&svc) {
            continue;
        }
        let reference = svc.object_ref(&());
        let t = Instant::now();
        let result = lb.update_load_balancer(cluster, &svc, &nodes).await;
        ctx.metrics
            .update_lb_host_latency
            .observe(t.elapsed().as_secs_f64());
        match result {
            Ok(()) => {
                state.last_synced().insert(key.clone(), names.clone());
                if nodes.is_empty() {
                    no_available_nodes(ctx, &reference).await;
                } else {
                    ctx.event(
                        CONTROLLER,
                        &reference,
                        EventType::Normal,
                        "UpdatedLoadBalancer",
                        "Updated load balancer with new hosts".into(),
                    )
                    .await;
                }
            }
            Err(CloudError::ImplementedElsewhere) => {
                state.last_synced().insert(key.clone(), names.clone());
            }
            Err(e) => {
                // Only an error if the load balancer still exists.
                if let Ok(None) = lb.get_load_balancer(cluster, &svc).await {
                    state.last_synced().insert(key.clone(), names.clone());
                    continue;
                }
                ok = false;
                ctx.metrics.nodesync_errors.inc();
                tracing::warn!(service = %key, error = %Chain(&e), "updating load balancer hosts");
                ctx.event(
                    CONTROLLER,
                    &reference,
                    EventType::Warning,
                    "UpdateLoadBalancerFailed",
                    format!(
                        "Error updating load balancer with new hosts {:?} [node names limited, total number of nodes: {}], error: {}",
                        names.iter().take(5).collect::<Vec<_>>(),
                        names.len(),
                        Chain(&e)
                    ),
                )
                .await;
            }
        }
    }
    ctx.metrics
        .nodesync_latency
        .observe(start.elapsed().as_secs_f64());
    ok
}

/// Upstream `stableNodeSetPredicates`: not being deleted, not labelled for exclusion, not
/// tainted for deletion by the cluster autoscaler.
pub fn include_node(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none() && included(node) && !autoscaler_tainted(node)
}

fn included(node: &Node) -> bool {
    // Upstream v1.34: `=false` (as Go's ParseBool reads it) keeps the node; any other value,
    // unparsable ones included, excludes it.
    match node.labels().get(LABEL_EXCLUDE_FROM_EXTERNAL_LB) {
        None => true,
        Some(v) => parse_go_bool(v) == Some(false),
    }
}

fn autoscaler_tainted(node: &Node) -> bool {
    crate::cloud_node::has_taint(node, TO_BE_DELETED_TAINT)
}

/// Upstream `shouldSyncUpdatedNode`, widened to the whole predicate set so adding or removing
/// the autoscaler taint also moves backends.
fn should_sync_updated_node(old: &Node, new: &Node) -> bool {
    include_node(old) != include_node(new)
        || old.spec.as_ref().and_then(|s| s.provider_id.as_ref())
            != new.spec.as_ref().and_then(|s| s.provider_id.as_ref())
}

/// Type LoadBalancer without a class: ours (upstream `wantsLoadBalancer`; a class means
/// another implementation serves it).
pub fn wants_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|s| {
        s.type_.as_deref() == Some("LoadBalancer") && s.load_balancer_class.is_none()
    })
}

/// Being deleted with no finalizer but ours: once ours is off, the Service is gone.
fn deleted_with_our_finalizer(svc: &Service) -> bool {
    svc.metadata.deletion_timestamp.is_some()
        && svc.finalizers().iter().all(|f| f == FINALIZER_LB_CLEANUP)
}

fn has_finalizer(svc: &Service) -> bool {
    svc.finalizers().iter().any(|f| f == FINALIZER_LB_CLEANUP)
}

/// Our finalizer is on and the Service is being deleted or no longer wants a load balancer.
pub fn needs_cleanup(svc: &Service) -> bool {
    has_finalizer(svc)
        && (svc.metadata.deletion_timestamp.is_some()
            || svc.spec.as_ref().and_then(|s| s.type_.as_deref()) != Some("LoadBalancer"))
}

/// Whether a change of a Service needs a sync: upstream `needsUpdate`, field by field (v1.34):
/// wanting a load balancer, source ranges, ports (name, protocol, port, node port, target
/// port, app protocol), session affinity and its config, `loadBalancerIP`, external IPs,
/// annotations, UID, external traffic policy, health-check node port, the number of IP
/// families. Anything else (the selector, our own status and finalizer writes, ...) does not.
/// Deletion is `needs_cleanup`'s business, as upstream's.
pub fn needs_update(old: &Service, new: &Service) -> bool {
    let (wants_old, wants_new) = (wants_load_balancer(old), wants_load_balancer(new));
    if !wants_old && !wants_new {
        return false;
    }
    if wants_old != wants_new {
        return true;
    }
    let none = Default::default();
    let o = old.spec.as_ref().unwrap_or(&none);
    let n = new.spec.as_ref().unwrap_or(&none);
    let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
    let ports_equal = {
        let (a, b) = (
            o.ports.as_deref().unwrap_or_default(),
            n.ports.as_deref().unwrap_or_default(),
        );
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.name == y.name
                    && x.protocol == y.protocol
                    && x.port == y.port
                    && x.node_port == y.node_port
                    && x.target_port == y.target_port
                    && x.app_protocol == y.app_protocol
            })
    };
    list(&o.load_balancer_source_ranges) != list(&n.load_balancer_source_ranges)
        || !ports_equal
        || o.session_affinity != n.session_affinity
        || o.session_affinity_config != n.session_affinity_config
        || o.load_balancer_ip != n.load_balancer_ip
        || list(&o.external_ips) != list(&n.external_ips)
        || old.metadata.annotations != new.metadata.annotations
        || old.metadata.uid != new.metadata.uid
        || o.external_traffic_policy != n.external_traffic_policy
        || o.health_check_node_port != n.health_check_node_port
        || o.ip_families.as_ref().map_or(0, Vec::len) != n.ip_families.as_ref().map_or(0, Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, ServiceSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn svc(type_: &str, class: Option<&str>, finalizer: bool) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("s".into()),
                namespace: Some("ns".into()),
                finalizers: finalizer.then(|| vec![FINALIZER_LB_CLEANUP.to_string()]),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(type_.into()),
                load_balancer_class: class.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn deleting(mut s: Service) -> Service {
        s.metadata.deletion_timestamp = Some(Time(Default::default()));
        s
    }

    #[test]
    fn wants_and_cleanup_follow_type_class_finalizer_and_deletion() {
        assert!(wants_load_balancer(&svc("LoadBalancer", None, false)));
        assert!(!wants_load_balancer(&svc(
            "LoadBalancer",
            Some("example.com/lb"),
            false
        )));
        assert!(!wants_load_balancer(&svc("ClusterIP", None, false)));
        assert!(!needs_cleanup(&svc("LoadBalancer", None, true)));
        assert!(needs_cleanup(&svc("ClusterIP", None, true)));
        assert!(!needs_cleanup(&svc("ClusterIP", None, false)));
        assert!(needs_cleanup(&deleting(svc("LoadBalancer", None, true))));
        assert!(!needs_cleanup(&deleting(svc("LoadBalancer", None, false))));
    }

    #[test]
    fn own_status_and_finalizer_writes_need_no_update() {
        let old = svc("LoadBalancer", None, false);
        let mut new = svc("LoadBalancer", None, true);
        new.status = Some(Default::default());
        assert!(!needs_update(&old, &new));
        let mut changed = new.clone();
        changed.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        assert!(needs_update(&new, &changed));
    }

    #[test]
    fn only_the_fields_upstream_compares_trigger_an_update() {
        use k8s_openapi::api::core::v1::ServicePort;
        let base = svc("LoadBalancer", None, true);
        let with = |f: &dyn Fn(&mut ServiceSpec)| {
            let mut s = base.clone();
            f(s.spec.as_mut().expect("spec"));
            s
        };
        // Not compared upstream: the selector, traffic distribution, cluster IPs.
        let ignored = with(&|s| {
            s.selector = Some([("app".to_string(), "x".to_string())].into());
            s.internal_traffic_policy = Some("Local".into());
        });
        assert!(!needs_update(&base, &ignored));
        // Absent and empty lists are the same, as Go's nil and empty slices are.
        assert!(!needs_update(
            &base,
            &with(&|s| s.external_ips = Some(vec![]))
        ));
        for changed in [
            with(&|s| s.load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()])),
            with(&|s| {
                s.ports = Some(vec![ServicePort {
                    port: 80,
                    ..Default::default()
                }])
            }),
            with(&|s| s.session_affinity = Some("ClientIP".into())),
            with(&|s| s.load_balancer_ip = Some("192.0.2.9".into())),
            with(&|s| s.external_ips = Some(vec!["192.0.2.8".into()])),
            with(&|s| s.external_traffic_policy = Some("Local".into())),
            with(&|s| s.health_check_node_port = Some(30001)),
            with(&|s| s.ip_families = Some(vec!["IPv4".into(), "IPv6".into()])),
            with(&|s| s.type_ = Some("ClusterIP".into())),
        ] {
            assert!(needs_update(&base, &changed), "{:?}", changed.spec);
        }
        // Neither wants a load balancer: nothing to do, whatever changed.
        let cluster_ip = with(&|s| s.type_ = Some("ClusterIP".into()));
        let mut annotated = cluster_ip.clone();
        annotated.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        assert!(!needs_update(&cluster_ip, &annotated));
    }

    fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            ..Default::default()
        }
    }

    #[test]
    fn node_predicates_are_upstreams_stable_set() {
        assert!(include_node(&node("a")));
        let mut excluded = node("a");
        excluded.metadata.labels =
            Some([(LABEL_EXCLUDE_FROM_EXTERNAL_LB.to_string(), String::new())].into());
        assert!(!include_node(&excluded));
        for (value, included) in [
            ("true", false),
            ("1", false),
            ("yes", false),
            ("false", true),
            ("F", true),
            ("0", true),
        ] {
            let mut labelled = node("a");
            labelled.metadata.labels = Some(
                [(
                    LABEL_EXCLUDE_FROM_EXTERNAL_LB.to_string(),
                    value.to_string(),
                )]
                .into(),
            );
            assert_eq!(include_node(&labelled), included, "label value {value:?}");
        }
        let mut scaled = node("a");
        scaled.spec.as_mut().expect("spec").taints = Some(vec![Taint {
            key: TO_BE_DELETED_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        assert!(!include_node(&scaled));
        let mut gone = node("a");
        gone.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert!(!include_node(&gone));
        // Readiness does not matter.
        assert!(should_sync_updated_node(&node("a"), &excluded));
        assert!(!should_sync_updated_node(&node("a"), &node("a")));
    }
}

/// What a reconcile sends, checked against a mocked apiserver.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::fixtures::{cloud, context, exchange};
    use hypercloud_cloudprovider::fake::FakeCloud;
    use hypercloud_cloudprovider::Interface as _;

    fn state(cloud: FakeCloud) -> (Arc<ServiceState>, crate::fixtures::ApiServerVerifier) {
        let (ctx, api) = context(cloud, &[]);
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {}})).expect("node");
        let queue = Queue::new("service", Backoff::SERVICE, ctx.metrics.clone());
        let state = ServiceState {
            ctx,
            nodes: Informer::fixed(vec![node]),
            queue,
            last_synced: Mutex::new(HashMap::new()),
            interned: Mutex::new(Arc::from(Vec::new())),
            backends: Mutex::new(None),
        };
        (Arc::new(state), api)
    }

    #[tokio::test]
    async fn backends_are_listed_once_per_node_cache_change() {
        let (state, _api) = state(cloud("{}"));
        let first = state.backends();
        assert_eq!(first.nodes.len(), 1);
        let again = state.backends();
        assert!(
            Arc::ptr_eq(&first.nodes, &again.nodes),
            "no change: the same list"
        );
        assert!(Arc::ptr_eq(&first.names, &again.names));
        state.nodes.touch();
        let after = state.backends();
        assert!(
            !Arc::ptr_eq(&first.nodes, &after.nodes),
            "a change lists again"
        );
        assert_eq!(after.nodes[0].name_any(), "n1");
        // Same names and provider IDs after the change: the node set is still shared.
        assert!(Arc::ptr_eq(&first.names, &after.names));
    }

    #[tokio::test]
    async fn services_synced_with_the_same_nodes_share_one_set_and_provider_ids_count() {
        let (state, _api) = state(cloud("{}"));
        let with_id = |name: &str, id: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"providerID": id}}))
                .expect("node")
        };
        let nodes = vec![with_id("a", "fake://a"), with_id("b", "fake://b")];
        let first = state.node_set(&nodes);
        let again = state.node_set(&nodes.clone());
        assert!(Arc::ptr_eq(&first, &again), "the same nodes share one set");
        // Same names, another provider ID (a replaced instance): a different set, as
        // upstream's nodesSufficientlyEqual.
        let replaced = state.node_set(&[with_id("a", "fake://a"), with_id("b", "fake://b2")]);
        assert!(!Arc::ptr_eq(&first, &replaced));
        assert_ne!(first[..], replaced[..]);
        assert_eq!(replaced[1], ("b".to_string(), "fake://b2".to_string()));
    }

    fn service(finalizer: bool, deleting: bool, ingress: Option<&str>) -> Service {
        let mut svc = json!({
            "metadata": {"name": "s", "namespace": "ns", "resourceVersion": "5", "uid": "u1"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080}]},
        });
        if finalizer {
            svc["metadata"]["finalizers"] = json!(["example.com/other", FINALIZER_LB_CLEANUP]);
        }
        if deleting {
            svc["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        if let Some(ip) = ingress {
            svc["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        }
        serde_json::from_value(svc).expect("service")
    }

    #[tokio::test]
    async fn ensure_adds_the_finalizer_first_then_patches_the_status() {
        let fake = cloud("{}");
        let (state, api) = state(fake.clone());
        let svc = service(false, false, None);
        let answer = serde_json::to_value(&svc).expect("json");
        exchange(reconcile(Arc::new(svc), state.clone()), api, |mut api| {
            Box::pin(async move {
                api.expect_event("ns", "EnsuringLoadBalancer").await;
                let f = api
                    .expect("PATCH", "/api/v1/namespaces/ns/services/s?", answer.clone())
                    .await;
                assert_eq!(f.content_type, "application/merge-patch+json");
                assert_eq!(
                    f.body,
                    json!({"metadata": {
                        "finalizers": [FINALIZER_LB_CLEANUP],
                        "resourceVersion": "5",
                    }})
                );
                api.expect_event("ns", "EnsuredLoadBalancer").await;
                let s = api
                    .expect("PATCH", "/api/v1/namespaces/ns/services/s/status?", answer)
                    .await;
                assert_eq!(s.content_type, "application/merge-patch+json");
                assert_eq!(
                    s.body,
                    json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}})
                );
                api
            })
        })
        .await
        .expect("reconcile");
        assert_eq!(fake.call_count("ensure_load_balancer"), 1);
        assert_eq!(
            state
                .last_synced()
                .get("ns/s")
                .map(|s| s.iter().map(|(name, _)| name.clone()).collect::<Vec<_>>()),
            Some(vec!["n1".to_string()])
        );
    }

    #[tokio::test]
    async fn cleanup_deletes_then_removes_only_our_finalizer_and_clears_the_status() {
        let fake = cloud("{}");
        let svc = service(true, true, Some("192.0.2.1"));
        fake.load_balancer()
            .expect("lb")
            .ensure_load_balancer("kubernetes", &svc, &[])
            .await
            .expect("existing load balancer");
        let (state, api) = state(fake.clone());
        let answer = serde_json::to_value(&svc).expect("json");
        exchange(reconcile(Arc::new(svc), state), api, |mut api| {
            Box::pin(async move {
                api.expect_event("ns", "DeletingLoadBalancer").await;
                let f = api
                    .expect("PATCH", "/api/v1/namespaces/ns/services/s?", answer.clone())
                    .await;
                assert_eq!(
                    f.body,
                    json!({"metadata": {
                        "finalizers": ["example.com/other"],
                        "resourceVersion": "5",
                    }})
                );
                api.expect_event("ns", "DeletedLoadBalancer").await;
                let s = api
                    .expect("PATCH", "/api/v1/namespaces/ns/services/s/status?", answer)
                    .await;
                assert_eq!(
                    s.body,
                    json!({"status": {"loadBalancer": {"ingress": null}}})
                );
                api
            })
        })
        .await
        .expect("reconcile");
        assert_eq!(fake.call_count("ensure_load_balancer_deleted"), 1);
    }

    #[tokio::test]
    async fn removing_the_last_finalizer_of_a_deleted_service_sends_no_status_patch() {
        let fake = cloud("{}");
        let mut svc = service(false, true, Some("192.0.2.1"));
        svc.metadata.finalizers = Some(vec![FINALIZER_LB_CLEANUP.to_string()]);
        fake.load_balancer()
            .expect("lb")
            .ensure_load_balancer("kubernetes", &svc, &[])
            .await
            .expect("existing load balancer");
        let (state, api) = state(fake.clone());
        let answer = serde_json::to_value(&svc).expect("json");
        // Exactly: the Deleting Event, the finalizer patch, the Deleted Event; `exchange`
        // fails on any request after them (upstream's status patch here answers 404).
        exchange(reconcile(Arc::new(svc), state), api, |mut api| {
            Box::pin(async move {
                api.expect_event("ns", "DeletingLoadBalancer").await;
                let f = api
                    .expect("PATCH", "/api/v1/namespaces/ns/services/s?", answer)
                    .await;
                assert_eq!(
                    f.body,
                    json!({"metadata": {"finalizers": [], "resourceVersion": "5"}})
                );
                api.expect_event("ns", "DeletedLoadBalancer").await;
                api
            })
        })
        .await
        .expect("reconcile");
        assert_eq!(fake.call_count("ensure_load_balancer_deleted"), 1);
    }

    #[tokio::test]
    async fn a_second_sync_does_not_write_the_status_the_apiserver_defaulted() {
        let fake = cloud("{}");
        let (state, api) = state(fake.clone());
        // As stored after the first sync: the apiserver added `ipMode: VIP` to the fake
        // cloud's `{"ip": "192.0.2.1"}`.
        let mut svc = service(true, false, None);
        svc.status = serde_json::from_value(json!({"loadBalancer": {"ingress": [
            {"ip": "192.0.2.1", "ipMode": "VIP", "ports": []}
        ]}}))
        .expect("status");
        // The two Events only: no finalizer patch, no status patch.
        exchange(reconcile(Arc::new(svc), state), api, |mut api| {
            Box::pin(async move {
                api.expect_event("ns", "EnsuringLoadBalancer").await;
                api.expect_event("ns", "EnsuredLoadBalancer").await;
                api
            })
        })
        .await
        .expect("reconcile");
        assert_eq!(fake.call_count("ensure_load_balancer"), 1);
    }

    #[test]
    fn status_equality_is_upstreams_after_the_apiservers_defaults() {
        let status = |v: serde_json::Value| -> LoadBalancerStatus {
            serde_json::from_value(v).expect("status")
        };
        let bare = status(json!({"ingress": [{"ip": "192.0.2.1"}]}));
        let stored = status(json!({"ingress": [{"ip": "192.0.2.1", "ipMode": "VIP"}]}));
        assert!(status_equal(&stored, &bare));
        assert!(status_equal(
            &LoadBalancerStatus::default(),
            &status(json!({"ingress": []}))
        ));
        for other in [
            json!({"ingress": [{"ip": "192.0.2.1", "ipMode": "Proxy"}]}),
            json!({"ingress": [{"ip": "192.0.2.2"}]}),
            json!({"ingress": [{"hostname": "lb.example"}]}),
            json!({"ingress": [{"ip": "192.0.2.1"}, {"ip": "192.0.2.2"}]}),
            json!({"ingress": [{"ip": "192.0.2.1", "ports": [{"port": 80, "protocol": "TCP"}]}]}),
            json!({}),
        ] {
            assert!(!status_equal(&stored, &status(other.clone())), "{other}");
        }
    }

    #[tokio::test]
    async fn a_cloud_failure_keeps_the_finalizer_and_is_reported() {
        let fake = cloud("{}");
        fake.set_failure("get_load_balancer", Some(503));
        let (state, api) = state(fake);
        let svc = service(true, true, None);
        let err = exchange(reconcile(Arc::new(svc), state), api, |mut api| {
            Box::pin(async move {
                let e = api.expect_event("ns", "SyncLoadBalancerFailed").await;
                assert!(
                    e.body["note"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("Error syncing load balancer: ")),
                    "{e:?}"
                );
                api
            })
        })
        .await
        .expect_err("cloud failure");
        assert!(matches!(err, Error::LoadBalancer { .. }), "{err}");
    }
}
