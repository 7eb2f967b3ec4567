//! Upstream's attach/detach controller (`pkg/controller/volume/attachdetach`) for an in-tree
//! volume plugin (`kubernetes.io/cinder`), kube-controller-manager only: in the external
//! layout the CSI driver's external-attacher does this, not the cloud-controller-manager.
//!
//! The desired state of a Node is the plugin's volumes of the pods bound to it
//! (`spec.nodeName`) that have not terminated: a claim's bound PV with a `cinder` source, or an
//! inline `cinder` volume. The actual state is what this controller attached, as it records it
//! in `node.status.volumesAttached` (`{name: kubernetes.io/cinder/<volume ID>, devicePath}`),
//! read from the Nodes when it starts (upstream's actual state of the world). Reconciling a
//! Node:
//!
//! - a wanted volume not attached is attached to the Node's instance (its provider ID, else
//!   `InstanceID` by name), its device path asked for, and the Node's status patched; the
//!   pods get `SuccessfulAttachVolume`, or `FailedAttachVolume` with the cloud's error;
//! - a volume that may not be attached to several Nodes (a PV with `ReadWriteOnce` or
//!   `ReadWriteOncePod`, or an inline Cinder volume: upstream `IsMultiAttachAllowed`) and is
//!   attached to another Node is not attached: each pod gets a Warning `FailedAttachVolume`
//!   `Multi-Attach error for volume "<pv>" ...` as upstream's reconciler reports it, and the
//!   Node is looked at again;
//! - an attached volume no pod on the Node wants any more is detached once the kubelet no
//!   longer lists it in `node.status.volumesInUse` (it is still mounted there), or after
//!   [`MAX_WAIT_FOR_UNMOUNT`] (upstream's `reconcilerMaxWaitForUnmountDuration`), or at once on
//!   a Node tainted [`TAINT_OUT_OF_SERVICE`]; as upstream,
//!   it leaves `volumesAttached` first, so a kubelet never mounts a volume being detached.
//!
//! Volumes of other plugins in `volumesAttached` (CSI) are left alone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hypercloud_cloudprovider::volume::{pod_terminated, pod_volumes};
use hypercloud_cloudprovider::VolumeAttacher;
use k8s_openapi::api::core::v1::{
    AttachedVolume, Node, PersistentVolume, PersistentVolumeClaim, Pod,
};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::informer::{get_by_key, next_notice, Informer, Notice};
use crate::queue::{run_workers, Action, Backoff, Queue};
use crate::{names, Context, Error, Result};

const CONTROLLER: &str = names::ATTACH_DETACH.name;

/// How long a volume no pod wants stays attached while the kubelet still reports it in use
/// (upstream `reconcilerMaxWaitForUnmountDuration`).
pub const MAX_WAIT_FOR_UNMOUNT: Duration = Duration::from_secs(6 * 60);

/// The taint an administrator puts on a Node that is shut down for good: its volumes are
/// detached at once, mounted or not (upstream's non-graceful node shutdown).
pub const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// How soon a Node whose volume is held by another Node is looked at again.
const MULTI_ATTACH_RETRY: Duration = Duration::from_secs(5);

/// One volume a Node should have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// `kubernetes.io/cinder/<volume ID>`, the name in `volumesAttached`.
    pub unique_name: String,
    /// The cloud's volume ID.
    pub volume_id: String,
    /// The PV's name (or the pod volume's), as upstream names the volume in messages.
    pub spec_name: String,
    /// Whether it may be attached to several Nodes at once.
    pub multi_attach: bool,
    /// The pods that use it, `(namespace, name, uid)`.
    pub pods: Vec<(String, String, String)>,
}

/// The plugin's volumes the live pods bound to `node` use, by unique name.
pub fn desired(
    node: &str,
    pods: &[Arc<Pod>],
    claims: &Store<PersistentVolumeClaim>,
    pvs: &Store<PersistentVolume>,
    attacher: &dyn VolumeAttacher,
) -> BTreeMap<String, Wanted> {
    let mut out: BTreeMap<String, Wanted> = BTreeMap::new();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        if spec.node_name.as_deref() != Some(node) || pod_terminated(pod) {
            continue;
        }
        let who = (
            pod.namespace().unwrap_or_default(),
            pod.name_any(),
            pod.metadata.uid.clone().unwrap_or_default(),
        );
        let bound_pv = |ns: &str, claim: &str| {
            get_by_key(claims, &format!("{ns}/{claim}"))
                .and_then(|c| c.spec.as_ref()?.volume_name.clone())
                .filter(|n| !n.is_empty())
                .and_then(|n| get_by_key(pvs, &n))
        };
        for v in pod_volumes(pod, attacher, bound_pv) {
            let entry = out.entry(v.unique_name.clone()).or_insert_with(|| Wanted {
                unique_name: v.unique_name,
                volume_id: v.volume_id,
                spec_name: v.spec_name,
                multi_attach: v.multi_attach,
                pods: vec![],
            });
            if !entry.pods.contains(&who) {
                entry.pods.push(who.clone());
            }
        }
    }
    out
}

/// The controller's actual state of the world: which Nodes each volume is attached to (read
/// from the Nodes' `volumesAttached` at start, then kept by this controller, the only one
/// that attaches), and since when each unwanted volume waits for the kubelet's unmount.
#[derive(Default)]
pub struct State {
    attached: Mutex<HashMap<String, BTreeSet<String>>>,
    unmount_wait: Mutex<HashMap<(String, String), Instant>>,
}

impl State {
    /// Seeds the state from Nodes' `volumesAttached` (of `plugin`'s volumes only).
    pub fn from_nodes(nodes: &[Arc<Node>], plugin: &str) -> Self {
        let state = State::default();
        let prefix = format!("{plugin}/");
        for node in nodes {
            for v in attached_volumes(node) {
                if v.name.starts_with(&prefix) {
                    state.set(&v.name, &node.name_any(), true);
                }
            }
        }
        state
    }

    fn set(&self, volume: &str, node: &str, attached: bool) {
        let mut map = self.attached.lock().unwrap_or_else(|p| p.into_inner());
        let nodes = map.entry(volume.to_owned()).or_default();
        if attached {
            nodes.insert(node.to_owned());
        } else {
            nodes.remove(node);
            if nodes.is_empty() {
                map.remove(volume);
            }
        }
    }

    /// The other Nodes `volume` is attached to.
    pub fn attached_elsewhere(&self, volume: &str, node: &str) -> Vec<String> {
        let map = self.attached.lock().unwrap_or_else(|p| p.into_inner());
        map.get(volume)
            .map(|n| n.iter().filter(|n| *n != node).cloned().collect())
            .unwrap_or_default()
    }

    /// How long `volume` has waited for its unmount on `node` (the wait starts now if new).
    fn waited(&self, node: &str, volume: &str) -> Duration {
        let mut map = self.unmount_wait.lock().unwrap_or_else(|p| p.into_inner());
        map.entry((node.to_owned(), volume.to_owned()))
            .or_insert_with(Instant::now)
            .elapsed()
    }

    fn stop_waiting(&self, node: &str, volume: &str) {
        let mut map = self.unmount_wait.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&(node.to_owned(), volume.to_owned()));
    }
}

fn attached_volumes(node: &Node) -> Vec<AttachedVolume> {
    node.status
        .as_ref()
        .and_then(|s| s.volumes_attached.clone())
        .unwrap_or_default()
}

/// The Node's instance ID ([`hypercloud_cloudprovider::node::node_attach_instance`]).
async fn instance_id(node: &Node, ctx: &Context) -> Result<String> {
    hypercloud_cloudprovider::node::node_attach_instance(ctx.cloud.as_ref(), node)
        .await
        .map_err(|source| Error::Cloud {
            operation: format!("getting the instance ID of node {}", node.name_any()),
            source,
        })
}

/// Publishes an event on each pod using `wanted`.
async fn pod_events(ctx: &Context, wanted: &Wanted, type_: EventType, reason: &str, note: &str) {
    for (ns, name, uid) in &wanted.pods {
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(ns.clone()),
            name: Some(name.clone()),
            uid: Some(uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        ctx.event(CONTROLLER, &reference, type_, reason, note.to_owned())
            .await;
    }
}

/// Writes the Node's `volumesAttached` (the whole list: the field is atomic).
async fn patch_attached(ctx: &Context, node: &str, list: &[AttachedVolume]) -> Result<()> {
    let body = if list.is_empty() {
        json!({"status": {"volumesAttached": null}})
    } else {
        json!({"status": {"volumesAttached": list}})
    };
    Api::<Node>::all(ctx.client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(drop)
        .map_err(|source| Error::PatchNodeStatus {
            node: node.to_owned(),
            source,
        })
}

/// Attaches and detaches one Node's volumes (see the module docs).
#[tracing::instrument(skip_all, fields(node = %node.name_any()))]
pub(crate) async fn reconcile(
    node: Arc<Node>,
    pods: &[Arc<Pod>],
    claims: &Store<PersistentVolumeClaim>,
    pvs: &Store<PersistentVolume>,
    state: &State,
    ctx: Arc<Context>,
) -> Result<Action> {
    let Some(attacher) = ctx.cloud.volume_attacher() else {
        return Ok(Action::AwaitChange);
    };
    let name = node.name_any();
    let wanted = desired(&name, pods, claims, pvs, attacher);
    let mut attached = attached_volumes(&node);
    let in_use: BTreeSet<String> = node
        .status
        .as_ref()
        .and_then(|s| s.volumes_in_use.clone())
        .unwrap_or_default()
        .into_iter()
        .collect();
    let prefix = format!("{}/", attacher.plugin_name());
    let out_of_service = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_OUT_OF_SERVICE));
    let mut next = Action::AwaitChange;
    let sooner = |next: &mut Action, d: Duration| {
        *next = match *next {
            Action::Requeue(e) if e <= d => Action::Requeue(e),
            _ => Action::Requeue(d),
        };
    };
    let mut instance: Option<String> = None;

    // Detach first: a volume moving between Nodes of one instance frees its device.
    let unwanted: Vec<AttachedVolume> = attached
        .iter()
        .filter(|v| v.name.starts_with(&prefix) && !wanted.contains_key(&v.name))
        .cloned()
        .collect();
    for v in unwanted {
        if in_use.contains(&v.name) && !out_of_service {
            let waited = state.waited(&name, &v.name);
            if waited < MAX_WAIT_FOR_UNMOUNT {
                tracing::info!(node = %name, volume = %v.name, "no pod uses the volume, waiting for the kubelet to unmount it before detaching");
                sooner(&mut next, MAX_WAIT_FOR_UNMOUNT - waited);
                continue;
            }
            tracing::warn!(node = %name, volume = %v.name, ?waited, "the kubelet still reports the volume in use; detaching it anyway (maximum wait for unmount exceeded)");
        }
        let volume_id = v.name[prefix.len()..].to_owned();
        let id = match &instance {
            Some(id) => id.clone(),
            None => instance.insert(instance_id(&node, &ctx).await?).clone(),
        };
        // As upstream: off the Node's list first, then detached.
        attached.retain(|a| a.name != v.name);
        patch_attached(&ctx, &name, &attached).await?;
        if let Err(source) = attacher.detach_disk(&id, &volume_id).await {
            attached.push(v.clone());
            patch_attached(&ctx, &name, &attached).await?;
            return Err(Error::Cloud {
                operation: format!("DetachVolume.Detach failed for volume {:?}", v.name),
                source,
            });
        }
        state.set(&v.name, &name, false);
        state.stop_waiting(&name, &v.name);
        tracing::info!(node = %name, volume = %v.name, instance = %id, "DetachVolume.Detach succeeded");
    }

    for w in wanted.values() {
        state.stop_waiting(&name, &w.unique_name);
        if attached.iter().any(|a| a.name == w.unique_name) {
            state.set(&w.unique_name, &name, true);
            continue;
        }
        let elsewhere = state.attached_elsewhere(&w.unique_name, &name);
        if !w.multi_attach && !elsewhere.is_empty() {
            tracing::warn!(node = %name, volume = %w.unique_name, "Multi-Attach error: volume is already exclusively attached to node(s) {} and can't be attached to another", elsewhere.join(", "));
            let note = format!(
                "Multi-Attach error for volume {:?} Volume is already exclusively attached to one node and can't be attached to another",
                w.spec_name
            );
            pod_events(&ctx, w, EventType::Warning, "FailedAttachVolume", &note).await;
            sooner(&mut next, MULTI_ATTACH_RETRY);
            continue;
        }
        let id = match &instance {
            Some(id) => id.clone(),
            None => instance.insert(instance_id(&node, &ctx).await?).clone(),
        };
        let path = match attacher.attach_disk(&id, &w.volume_id).await {
            Ok(()) => attacher.get_attachment_disk_path(&id, &w.volume_id).await,
            Err(e) => Err(e),
        };
        let device_path = match path {
            Ok(p) => p,
            Err(source) => {
                let note = format!(
                    "AttachVolume.Attach failed for volume {:?} : {}",
                    w.spec_name,
                    hypercloud_cloudprovider::Chain(&source)
                );
                pod_events(&ctx, w, EventType::Warning, "FailedAttachVolume", &note).await;
                return Err(Error::Cloud {
                    operation: format!("AttachVolume.Attach failed for volume {:?}", w.spec_name),
                    source,
                });
            }
        };
        state.set(&w.unique_name, &name, true);
        attached.push(AttachedVolume {
            name: w.unique_name.clone(),
            device_path: device_path.clone(),
        });
        patch_attached(&ctx, &name, &attached).await?;
        tracing::info!(node = %name, volume = %w.unique_name, instance = %id, device_path, "AttachVolume.Attach succeeded");
        let note = format!(
            "AttachVolume.Attach succeeded for volume {:?} ",
            w.spec_name
        );
        pod_events(&ctx, w, EventType::Normal, "SuccessfulAttachVolume", &note).await;
    }
    Ok(next)
}

/// Counts the failure and requeues with the key's backoff.
fn error_policy(queue: &Queue, key: &str, e: &Error) -> Action {
    let delay = queue.backoff(key);
    tracing::warn!(node = key, error = %hypercloud_cloudprovider::Chain(e), ?delay, "attaching or detaching volumes, retrying");
    Action::Requeue(delay)
}

/// The Nodes of the pods that use the claim `ns/claim`.
fn nodes_of_claim(pods: &Store<Pod>, ns: &str, claim: &str) -> Vec<String> {
    pods.state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(ns))
        .filter(|p| {
            p.spec.as_ref().is_some_and(|s| {
                s.volumes.iter().flatten().any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == claim)
                })
            })
        })
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect()
}

/// Runs the controller until dropped: Nodes are the work items; a pod, claim or PV change
/// queues the Nodes it concerns.
pub(crate) async fn run(
    ctx: Arc<Context>,
    nodes: Arc<Informer<Node>>,
    pods: Arc<Informer<Pod>>,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    pvs: Arc<Informer<PersistentVolume>>,
) -> Result<()> {
    let queue = Queue::new("attach_detach", Backoff::VOLUME, ctx.metrics.clone());
    let mut node_feed = nodes.subscribe();
    let mut pod_feed = pods.subscribe();
    let mut claim_feed = claims.subscribe();
    let mut pv_feed = pvs.subscribe();
    nodes.ready().await;
    pods.ready().await;
    claims.ready().await;
    pvs.ready().await;
    let plugin = ctx
        .cloud
        .volume_attacher()
        .map(|a| a.plugin_name().to_owned())
        .unwrap_or_default();
    let state = Arc::new(State::from_nodes(&nodes.store.state(), &plugin));
    let all_nodes = {
        let (queue, nodes) = (queue.clone(), nodes.clone());
        move || {
            for n in nodes.store.state() {
                queue.add(n.name_any());
            }
        }
    };
    all_nodes();
    let node_events = {
        let (queue, all_nodes) = (queue.clone(), all_nodes.clone());
        async move {
            while let Some(n) = next_notice(&mut node_feed).await {
                match n {
                    Notice::Applied { new, .. } => queue.add(new.name_any()),
                    Notice::Deleted(_) => {}
                    Notice::Resync => all_nodes(),
                }
            }
        }
    };
    let pod_events = {
        let (queue, all_nodes) = (queue.clone(), all_nodes.clone());
        async move {
            while let Some(n) = next_notice(&mut pod_feed).await {
                match n {
                    Notice::Applied { new: p, .. } | Notice::Deleted(p) => {
                        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                            queue.add(node);
                        }
                    }
                    Notice::Resync => all_nodes(),
                }
            }
        }
    };
    let claim_events = {
        let (queue, pods) = (queue.clone(), pods.clone());
        async move {
            while let Some(n) = next_notice(&mut claim_feed).await {
                if let Notice::Applied { new: c, .. } = n {
                    let ns = c.namespace().unwrap_or_default();
                    for node in nodes_of_claim(&pods.store, &ns, &c.name_any()) {
                        queue.add(node);
                    }
                }
            }
        }
    };
    let pv_events = {
        let (queue, pods) = (queue.clone(), pods.clone());
        async move {
            while let Some(n) = next_notice(&mut pv_feed).await {
                if let Notice::Applied { new: pv, .. } = n {
                    let Some(c) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
                        continue;
                    };
                    let (ns, name) = (
                        c.namespace.clone().unwrap_or_default(),
                        c.name.clone().unwrap_or_default(),
                    );
                    for node in nodes_of_claim(&pods.store, &ns, &name) {
                        queue.add(node);
                    }
                }
            }
        }
    };
    // One worker: attach decisions for one volume on two Nodes must not interleave (the
    // multi-attach check reads what the other Node's reconcile did).
    let work = {
        let queue = queue.clone();
        run_workers(queue.clone(), 1, move |key: String| {
            let (ctx, queue, state) = (ctx.clone(), queue.clone(), state.clone());
            let node = get_by_key(&nodes.store, &key);
            let (pods, claims, pvs) = (pods.clone(), claims.clone(), pvs.clone());
            async move {
                let node = node?;
                let pods = pods.store.state();
                let result = reconcile(node, &pods, &claims.store, &pvs.store, &state, ctx).await;
                queue.settle(&key, result, |e| error_policy(&queue, &key, &e))
            }
        })
    };
    tokio::join!(node_events, pod_events, claim_events, pv_events, work);
    Ok(())
}

/// Drops what the controller does not read from cached pods: containers and most of the
/// status (it reads the node, the volumes, the phase and whether containers run).
pub(crate) fn strip_pod(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.clear();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
        spec.affinity = None;
        spec.tolerations = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.conditions = None;
        status.pod_ips = None;
    }
    pod.metadata.annotations = None;
    pod.metadata.labels = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{context_with, exchange};
    use async_trait::async_trait;
    use hypercloud_cloudprovider::Interface;
    use k8s_openapi::api::core::v1::PersistentVolumeSpec;
    use serde_json::Value;

    /// A provider with only an attacher, recording its calls; `vol-bad` fails to attach.
    #[derive(Default)]
    struct Attacher {
        calls: Mutex<Vec<String>>,
    }

    impl Attacher {
        fn record(&self, call: String) {
            self.calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(call);
        }
        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
    }

    impl Interface for Attacher {
        fn provider_name(&self) -> &str {
            "attacher"
        }
        fn volume_attacher(&self) -> Option<&dyn VolumeAttacher> {
            Some(self)
        }
    }

    #[async_trait]
    impl VolumeAttacher for Attacher {
        fn plugin_name(&self) -> &str {
            "kubernetes.io/cinder"
        }
        fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
            spec.cinder.as_ref().map(|c| c.volume_id.clone())
        }
        fn pod_volume_id(&self, v: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
            v.cinder.as_ref().map(|c| c.volume_id.clone())
        }
        async fn attach_disk(&self, i: &str, v: &str) -> hypercloud_cloudprovider::Result<()> {
            self.record(format!("attach {i} {v}"));
            if v == "vol-bad" {
                return Err(hypercloud_cloudprovider::Error::DiskNotFound);
            }
            Ok(())
        }
        async fn detach_disk(&self, i: &str, v: &str) -> hypercloud_cloudprovider::Result<()> {
            self.record(format!("detach {i} {v}"));
            Ok(())
        }
        async fn disk_is_attached(
            &self,
            _: &str,
            _: &str,
        ) -> hypercloud_cloudprovider::Result<bool> {
            Ok(true)
        }
        async fn disks_are_attached(
            &self,
            _: &str,
            ids: &[String],
        ) -> hypercloud_cloudprovider::Result<BTreeMap<String, bool>> {
            Ok(ids.iter().map(|i| (i.clone(), true)).collect())
        }
        async fn get_attachment_disk_path(
            &self,
            i: &str,
            v: &str,
        ) -> hypercloud_cloudprovider::Result<String> {
            self.record(format!("path {i} {v}"));
            Ok("/dev/vdb".into())
        }
    }

    fn node(name: &str, status: Value) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"providerID": format!("openstack:///i-{name}")},
                "status": status,
            }))
            .expect("node"),
        )
    }

    fn pod(name: &str, node: &str, extra: Value) -> Arc<Pod> {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": [],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]},
            "status": {"phase": "Running"},
        });
        if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                p.insert(k.clone(), v.clone());
            }
        }
        Arc::new(serde_json::from_value(p).expect("pod"))
    }

    fn caches(
        modes: &[&str],
    ) -> (
        Arc<Informer<PersistentVolumeClaim>>,
        Arc<Informer<PersistentVolume>>,
    ) {
        let claim = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ns"},
            "spec": {"volumeName": "pv-1"},
        }))
        .expect("claim");
        let pv = serde_json::from_value(json!({
            "metadata": {"name": "pv-1"},
            "spec": {"cinder": {"volumeID": "vol-1"}, "accessModes": modes},
        }))
        .expect("pv");
        (Informer::fixed(vec![claim]), Informer::fixed(vec![pv]))
    }

    const VOL: &str = "kubernetes.io/cinder/vol-1";

    #[test]
    fn terminated_pods_and_multi_attach_rules() {
        assert!(!pod_terminated(&pod("a", "n", json!({}))));
        assert!(pod_terminated(&pod(
            "a",
            "n",
            json!({"status": {"phase": "Succeeded"}})
        )));
        // Being deleted: terminated once nothing runs.
        let deleting = json!({"metadata": {"name": "a", "namespace": "ns",
                                           "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert!(pod_terminated(&pod("a", "n", deleting.clone())));
        let mut running = deleting;
        running["status"] = json!({"phase": "Running", "containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {}}}]});
        assert!(!pod_terminated(&pod("a", "n", running)));

        let (claims, pvs) = caches(&["ReadWriteOnce"]);
        let attacher = Attacher::default();
        let pods = vec![
            pod("a", "n1", json!({})),
            pod("b", "n1", json!({})),
            pod("c", "n2", json!({})),
            pod("d", "n1", json!({"status": {"phase": "Failed"}})),
        ];
        let want = desired("n1", &pods, &claims.store, &pvs.store, &attacher);
        let w = &want[VOL];
        assert_eq!(
            (w.volume_id.as_str(), w.spec_name.as_str()),
            ("vol-1", "pv-1")
        );
        assert!(!w.multi_attach);
        let names: Vec<&str> = w.pods.iter().map(|p| p.1.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let (_, rwx) = caches(&["ReadWriteMany"]);
        let want = desired("n1", &pods, &claims.store, &rwx.store, &attacher);
        assert!(want[VOL].multi_attach);
        // Inline Cinder volumes count too, never multi-attached.
        let inline = pod(
            "e",
            "n3",
            json!({"spec": {"nodeName": "n3", "containers": [],
            "volumes": [{"name": "raw", "cinder": {"volumeID": "vol-9"}}]}}),
        );
        let want = desired("n3", &[inline], &claims.store, &pvs.store, &attacher);
        assert!(!want["kubernetes.io/cinder/vol-9"].multi_attach);
        assert_eq!(want["kubernetes.io/cinder/vol-9"].spec_name, "raw");
    }

    #[tokio::test]
    async fn a_pods_volume_is_attached_and_recorded_in_node_status() {
        let cloud = Arc::new(Attacher::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let (claims, pvs) = caches(&["ReadWriteOnce"]);
        let n = node(
            "n1",
            json!({"volumesAttached": [{"name": "kubernetes.io/csi/x^y", "devicePath": ""}]}),
        );
        let state = State::default();
        let action = exchange(
            reconcile(
                n,
                &[pod("web", "n1", json!({}))],
                &claims.store,
                &pvs.store,
                &state,
                ctx,
            ),
            api,
            |mut api| {
                Box::pin(async move {
                    let p = api
                        .expect("PATCH", "/api/v1/nodes/n1/status?", json!({}))
                        .await;
                    assert_eq!(p.content_type, "application/merge-patch+json");
                    assert_eq!(
                        p.body,
                        json!({"status": {"volumesAttached": [
                            {"name": "kubernetes.io/csi/x^y", "devicePath": ""},
                            {"name": VOL, "devicePath": "/dev/vdb"},
                        ]}})
                    );
                    let e = api.expect_event("ns", "SuccessfulAttachVolume").await;
                    assert_eq!(e.body["regarding"]["name"], "web");
                    assert_eq!(e.body["type"], "Normal");
                    api
                })
            },
        )
        .await
        .expect("reconcile");
        assert_eq!(action, Action::AwaitChange);
        assert_eq!(cloud.calls(), ["attach i-n1 vol-1", "path i-n1 vol-1"]);
        assert_eq!(state.attached_elsewhere(VOL, "n2"), ["n1"]);
    }

    #[tokio::test]
    async fn an_rwo_volume_on_another_node_is_a_multi_attach_error() {
        let cloud = Arc::new(Attacher::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let (claims, pvs) = caches(&["ReadWriteOnce"]);
        let other = node(
            "n1",
            json!({"volumesAttached": [{"name": VOL, "devicePath": "/dev/vdb"}]}),
        );
        let state = State::from_nodes(&[other], "kubernetes.io/cinder");
        let action = exchange(
            reconcile(node("n2", json!({})), &[pod("web-2", "n2", json!({}))], &claims.store, &pvs.store, &state, ctx),
            api,
            |mut api| {
                Box::pin(async move {
                    let e = api.expect_event("ns", "FailedAttachVolume").await;
                    assert_eq!(e.body["type"], "Warning");
                    assert_eq!(e.body["regarding"]["name"], "web-2");
                    assert_eq!(
                        e.body["note"],
                        "Multi-Attach error for volume \"pv-1\" Volume is already exclusively attached to one node and can't be attached to another"
                    );
                    api
                })
            },
        )
        .await
        .expect("reconcile");
        assert_eq!(action, Action::Requeue(MULTI_ATTACH_RETRY));
        assert!(cloud.calls().is_empty(), "{:?}", cloud.calls());

        // ReadWriteMany may be on both.
        let cloud = Arc::new(Attacher::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let (claims, rwx) = caches(&["ReadWriteMany"]);
        exchange(
            reconcile(
                node("n2", json!({})),
                &[pod("web-2", "n2", json!({}))],
                &claims.store,
                &rwx.store,
                &state,
                ctx,
            ),
            api,
            |mut api| {
                Box::pin(async move {
                    api.expect("PATCH", "/api/v1/nodes/n2/status?", json!({}))
                        .await;
                    api.expect_event("ns", "SuccessfulAttachVolume").await;
                    api
                })
            },
        )
        .await
        .expect("reconcile");
        assert_eq!(cloud.calls(), ["attach i-n2 vol-1", "path i-n2 vol-1"]);
    }

    #[tokio::test]
    async fn a_failed_attach_is_an_event_and_an_error() {
        let cloud = Arc::new(Attacher::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let (claims, pvs) = caches(&[]);
        let bad = pod(
            "web",
            "n1",
            json!({"spec": {"nodeName": "n1", "containers": [],
            "volumes": [{"name": "raw", "cinder": {"volumeID": "vol-bad"}}]}}),
        );
        let state = State::default();
        let err = exchange(
            reconcile(
                node("n1", json!({})),
                &[bad],
                &claims.store,
                &pvs.store,
                &state,
                ctx,
            ),
            api,
            |mut api| {
                Box::pin(async move {
                    let e = api.expect_event("ns", "FailedAttachVolume").await;
                    let note = e.body["note"].as_str().unwrap_or_default().to_owned();
                    assert!(
                        note.starts_with("AttachVolume.Attach failed for volume \"raw\" : "),
                        "{note}"
                    );
                    api
                })
            },
        )
        .await
        .expect_err("attach failed");
        assert!(
            err.to_string().contains("AttachVolume.Attach failed"),
            "{err}"
        );
        assert!(state
            .attached_elsewhere("kubernetes.io/cinder/vol-bad", "x")
            .is_empty());
    }

    #[tokio::test]
    async fn an_unused_volume_waits_for_the_kubelet_then_leaves_status_before_detach() {
        let cloud = Arc::new(Attacher::default());
        let (claims, pvs) = caches(&["ReadWriteOnce"]);
        let csi = json!({"name": "kubernetes.io/csi/x^y", "devicePath": ""});
        let attached = json!([csi.clone(), {"name": VOL, "devicePath": "/dev/vdb"}]);
        let state = State::from_nodes(
            &[node("n1", json!({"volumesAttached": attached.clone()}))],
            "kubernetes.io/cinder",
        );
        // Still mounted by the kubelet: nothing is asked of anyone.
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let mounted = node(
            "n1",
            json!({"volumesAttached": attached.clone(), "volumesInUse": [VOL]}),
        );
        let action = exchange(
            reconcile(mounted, &[], &claims.store, &pvs.store, &state, ctx),
            api,
            |api| Box::pin(async move { api }),
        )
        .await
        .expect("reconcile");
        assert!(
            matches!(action, Action::Requeue(d) if d > Duration::from_secs(300) && d <= MAX_WAIT_FOR_UNMOUNT),
            "{action:?}"
        );
        assert!(cloud.calls().is_empty());

        // Unmounted: off the Node's list first, then detached.
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let unmounted = node("n1", json!({"volumesAttached": attached}));
        let action = exchange(
            reconcile(unmounted, &[], &claims.store, &pvs.store, &state, ctx),
            api,
            |mut api| {
                Box::pin(async move {
                    let p = api
                        .expect("PATCH", "/api/v1/nodes/n1/status?", json!({}))
                        .await;
                    assert_eq!(p.body, json!({"status": {"volumesAttached": [csi]}}));
                    api
                })
            },
        )
        .await
        .expect("reconcile");
        assert_eq!(action, Action::AwaitChange);
        assert_eq!(cloud.calls(), ["detach i-n1 vol-1"]);
        assert!(state.attached_elsewhere(VOL, "n2").is_empty());

        // Out of service: detached although the (dead) kubelet still lists it.
        let cloud = Arc::new(Attacher::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let mut dead = (*node(
            "n3",
            json!({"volumesAttached": [{"name": VOL, "devicePath": "/dev/vdb"}], "volumesInUse": [VOL]}),
        ))
        .clone();
        if let Some(spec) = dead.spec.as_mut() {
            spec.taints = Some(vec![k8s_openapi::api::core::v1::Taint {
                key: TAINT_OUT_OF_SERVICE.into(),
                value: Some("nodeshutdown".into()),
                effect: "NoExecute".into(),
                time_added: None,
            }]);
        }
        exchange(
            reconcile(Arc::new(dead), &[], &claims.store, &pvs.store, &state, ctx),
            api,
            |mut api| {
                Box::pin(async move {
                    let p = api
                        .expect("PATCH", "/api/v1/nodes/n3/status?", json!({}))
                        .await;
                    assert_eq!(p.body, json!({"status": {"volumesAttached": null}}));
                    api
                })
            },
        )
        .await
        .expect("reconcile");
        assert_eq!(cloud.calls(), ["detach i-n3 vol-1"]);
    }
}
