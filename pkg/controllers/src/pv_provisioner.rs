//! The cloud part of upstream's `persistentvolume-binder` for an in-tree volume plugin
//! (`kubernetes.io/cinder`): provisioning and deletion, in the role sig-storage's
//! external-provisioner library plays beside the binder (kube-controller-manager v1.34 has no
//! in-tree Cinder plugin left, so its binder annotates such claims
//! `volume.kubernetes.io/storage-provisioner` with the plugin's migrated CSI driver,
//! `cinder.csi.openstack.org` (CSI migration), and waits for someone else to provision; the
//! binder still binds and releases).
//!
//! - A claim annotated for the provider's plugin or its migrated CSI driver, without a volume, of a StorageClass of that
//!   plugin (and, with `volumeBindingMode: WaitForFirstConsumer`, once the scheduler chose a
//!   Node: `volume.kubernetes.io/selected-node`) gets a cloud volume named
//!   `<cluster>-dynamic-pvc-<claim uid>` of its request rounded up to GiB, tagged with the
//!   claim and PV names, in the zone from the class's parameters (read by the provider's
//!   plugin: Cinder `availability`, GCE PD `zone`/`zones`), else the selected
//!   Node's zone, else the class's allowed topologies, else one of the Nodes' zones picked
//!   by the claim's name (upstream `SelectZoneForVolume`); then a PV `pvc-<claim uid>` that
//!   points back at the claim (`claimRef`, which the binder completes), with the cloud's zone
//!   labels and node affinity, the class's reclaim policy and mount options, and
//!   `pv.kubernetes.io/provisioned-by`.
//! - A PV this plugin provisioned with reclaim policy Delete whose claim is gone (phase
//!   Released, or the claim it names no longer exists: the binder's own test) has its cloud
//!   volume deleted, then the PV object. Retain keeps both.

use std::collections::BTreeMap;
use std::sync::Arc;

use hypercloud_cloudprovider::volume::{
    choose_zone_for_volume, node_selector_requirements, round_up_to_gib,
};
use hypercloud_cloudprovider::wellknown::{LABEL_FAILURE_DOMAIN_ZONE, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{ClassParameters, VolumeProvisioner, VolumeRequest};
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
    VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};

use crate::informer::{enqueue_changes, get_by_key, key_of, Informer};
use crate::queue::{run_workers, Action, Backoff, Queue};
use crate::{names, Context, Error, Result};

/// The binder's annotation naming who provisions a claim.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// Its deprecated form, still set by the binder.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The scheduler's choice of Node for a WaitForFirstConsumer claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Who provisioned a PV (the binder and the deleter read it).
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The in-tree Cinder plugin's own mark on its PVs.
const ANN_CREATED_BY: &str = "kubernetes.io/createdby";
/// Cloud volume tags naming what the volume was created for (upstream
/// `CloudVolumeCreatedFor*Tag`).
pub const TAG_PVC_NAMESPACE: &str = "kubernetes.io/created-for/pvc/namespace";
/// See [`TAG_PVC_NAMESPACE`].
pub const TAG_PVC_NAME: &str = "kubernetes.io/created-for/pvc/name";
/// See [`TAG_PVC_NAMESPACE`].
pub const TAG_PV_NAME: &str = "kubernetes.io/created-for/pv/name";

const CONTROLLER: &str = names::PV_BINDER.name;

/// Runs the provisioner and the deleter until dropped.
pub(crate) async fn run(
    ctx: Arc<Context>,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    pvs: Arc<Informer<PersistentVolume>>,
    nodes: Arc<Informer<Node>>,
) -> Result<()> {
    let claim_queue = Queue::new("volume_provisioning", Backoff::VOLUME, ctx.metrics.clone());
    let pv_queue = Queue::new("volume_deletion", Backoff::VOLUME, ctx.metrics.clone());
    let claim_feed = claims.subscribe();
    let pv_feed = pvs.subscribe();
    claims.ready().await;
    pvs.ready().await;
    nodes.ready().await;
    // A claim gone may release its PV.
    let enqueue_claims = enqueue_changes(&claims, claim_feed, &claim_queue, |old| {
        for pv in pvs.store.state() {
            if claim_ref_is(&pv, &old) {
                pv_queue.add(pv.name_any());
            }
        }
    });
    let enqueue_pvs = enqueue_changes(&pvs, pv_feed, &pv_queue, |_| {});
    let provision = {
        let queue = claim_queue.clone();
        let ctx = ctx.clone();
        let (claims, nodes) = (claims.clone(), nodes.clone());
        run_workers(queue.clone(), 1, move |key: String| {
            let (ctx, queue) = (ctx.clone(), queue.clone());
            let claim = get_by_key(&claims.store, &key);
            let nodes = nodes.store.state();
            async move {
                let claim = claim?;
                let result = provision(claim, &nodes, ctx.clone()).await;
                let result = result.map(|_| Action::AwaitChange);
                queue.settle(&key, result, |e| {
                    error_policy(&queue, &key, &e, "provisioning")
                })
            }
        })
    };
    let delete = {
        let queue = pv_queue.clone();
        let (claims, pvs) = (claims.clone(), pvs.clone());
        run_workers(queue.clone(), 1, move |key: String| {
            let (ctx, queue) = (ctx.clone(), queue.clone());
            let pv = get_by_key(&pvs.store, &key);
            let claims = claims.clone();
            async move {
                let pv = pv?;
                let result = delete(pv, &claims, ctx).await.map(|_| Action::AwaitChange);
                queue.settle(&key, result, |e| {
                    error_policy(&queue, &key, &e, "deleting volume")
                })
            }
        })
    };
    tokio::join!(enqueue_claims, enqueue_pvs, provision, delete);
    Ok(())
}

/// Counts the failure and requeues with the key's backoff.
fn error_policy(queue: &Queue, key: &str, e: &Error, what: &str) -> Action {
    let delay = queue.backoff(key);
    tracing::warn!(key, error = %hypercloud_cloudprovider::Chain(e), ?delay, "{what}, retrying");
    Action::Requeue(delay)
}

/// Whether `pv`'s claimRef names `claim` (by namespace, name and, when set, UID).
fn claim_ref_is(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.namespace == claim.namespace()
        && r.name.as_deref() == Some(claim.name_any().as_str())
        && (r.uid.is_none() || r.uid == claim.uid())
}

/// Why a claim is not provisioned now.
#[derive(Debug, PartialEq, Eq)]
pub enum Skip {
    /// Bound or being deleted.
    Done,
    /// Not annotated for this plugin.
    NotOurs,
    /// WaitForFirstConsumer without a selected Node yet.
    WaitingForNode,
}

/// The CSI driver an in-tree plugin was migrated to ([`hypercloud_cloudprovider::csi_drivers`]).
/// Since CSI migration the upstream binder annotates claims of a class naming the in-tree
/// plugin with this driver as their `volume.kubernetes.io/storage-provisioner`.
pub fn migrated_csi_driver(plugin: &str) -> Option<&'static str> {
    hypercloud_cloudprovider::csi_drivers::for_plugin(plugin).map(|d| d.driver)
}

/// The first checks of external-provisioner's `shouldProvision`: `None` when `claim` is ours
/// to provision as far as the claim alone tells (the class is checked next). The claim names
/// `plugin`, or `csi_driver` (the plugin's migrated CSI driver, which the upstream binder of a
/// CSI-migrated cluster writes for a class naming the in-tree plugin). A plugin that was never
/// migrated (`kubernetes.io/photon-pd`) is unknown to today's upstream binder, which names no
/// provisioner on its claims ("no volume plugin matched"): an unannotated claim is then a
/// candidate too, as the in-tree binder that knew the plugin provisioned it itself.
pub fn should_provision(
    claim: &PersistentVolumeClaim,
    plugin: &str,
    csi_driver: Option<&str>,
) -> Option<Skip> {
    if claim.metadata.deletion_timestamp.is_some()
        || claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .is_some_and(|v| !v.is_empty())
    {
        return Some(Skip::Done);
    }
    let ann = claim.annotations();
    let provisioner = ann
        .get(ANN_STORAGE_PROVISIONER)
        .or_else(|| ann.get(ANN_BETA_STORAGE_PROVISIONER));
    let ours = match provisioner {
        Some(p) => p == plugin || Some(p.as_str()) == csi_driver,
        None => csi_driver.is_none(),
    };
    (!ours).then_some(Skip::NotOurs)
}

/// The class's parameters as the provider's plugin reads them
/// ([`VolumeProvisioner::class_parameters`]); an unknown key is an error, as upstream.
pub type Parameters = ClassParameters;

/// Parses the class's parameters with the provider's plugin.
pub fn parameters(
    class: &StorageClass,
    cloud: &dyn VolumeProvisioner,
) -> Result<Parameters, String> {
    cloud.class_parameters(&class.parameters.clone().unwrap_or_default())
}

/// A Node's zone label (new, then deprecated).
fn node_zone(node: &Node) -> Option<String> {
    let l = node.labels();
    l.get(LABEL_TOPOLOGY_ZONE)
        .or_else(|| l.get(LABEL_FAILURE_DOMAIN_ZONE))
        .cloned()
}

/// The zone for the volume (upstream `CreateVolume` + `SelectZoneForVolume`): the class's one
/// zone (Cinder `availability`, GCE PD `zone`); else, with a zone list (GCE PD `zones`), the
/// selected Node's zone when it is listed, else one of the list chosen by the claim's name;
/// else the selected Node's zone; else one of the class's allowed topology zones; else one of
/// the Nodes' zones chosen by the claim's name; else none (the cloud's default).
pub fn select_zone(
    params: &Parameters,
    selected: Option<&Node>,
    class: &StorageClass,
    nodes: &[Arc<Node>],
    claim_name: &str,
) -> String {
    if !params.zone.is_empty() {
        return params.zone.clone();
    }
    if !params.zones.is_empty() {
        if let Some(z) = selected
            .and_then(node_zone)
            .filter(|z| params.zones.contains(z))
        {
            return z;
        }
        return choose_zone_for_volume(&params.zones, claim_name).unwrap_or_default();
    }
    if let Some(z) = selected.and_then(node_zone) {
        return z;
    }
    let allowed: Vec<String> = class
        .allowed_topologies
        .iter()
        .flatten()
        .flat_map(|t| t.match_label_expressions.iter().flatten())
        .filter(|e| e.key == LABEL_TOPOLOGY_ZONE || e.key == LABEL_FAILURE_DOMAIN_ZONE)
        .flat_map(|e| e.values.clone())
        .collect();
    if let Some(z) = choose_zone_for_volume(&allowed, claim_name) {
        return z;
    }
    let zones: Vec<String> = nodes.iter().filter_map(|n| node_zone(n)).collect();
    choose_zone_for_volume(&zones, claim_name).unwrap_or_default()
}

/// `<cluster>-dynamic-<pv name>`, the cluster's part cut so that the whole fits in `max`
/// characters (upstream `volumeutil.GenerateVolumeName`: the PV's name is never cut).
fn volume_name(cluster: &str, pv_name: &str, max: usize) -> String {
    let prefix = format!("{cluster}-dynamic");
    let keep = max.saturating_sub(pv_name.len() + 1);
    let cut = prefix
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|end| *end <= keep)
        .last()
        .unwrap_or(0);
    format!("{}-{pv_name}", &prefix[..cut])
}

/// Provisions one claim.
#[tracing::instrument(skip_all, fields(claim = %key_of(claim.as_ref())))]
pub async fn provision(
    claim: Arc<PersistentVolumeClaim>,
    nodes: &[Arc<Node>],
    ctx: Arc<Context>,
) -> Result<Action> {
    let Some(cloud) = ctx.cloud.volume_provisioner() else {
        return Ok(Action::AwaitChange);
    };
    let plugin = cloud.plugin_name().to_owned();
    if should_provision(&claim, &plugin, migrated_csi_driver(&plugin)).is_some() {
        return Ok(Action::AwaitChange);
    }
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let spec = claim.spec.clone().unwrap_or_default();
    let Some(class_name) = spec.storage_class_name.clone().filter(|s| !s.is_empty()) else {
        return Ok(Action::AwaitChange);
    };
    let class = Api::<StorageClass>::all(ctx.client.clone())
        .get_opt(&class_name)
        .await
        .map_err(|source| Error::Kube {
            operation: format!("getting StorageClass {class_name}"),
            source,
        })?;
    let Some(class) = class.filter(|c| c.provisioner == plugin) else {
        return Ok(Action::AwaitChange);
    };
    let selected_name = claim.annotations().get(ANN_SELECTED_NODE).cloned();
    if class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
        && selected_name.is_none()
    {
        return Ok(Action::AwaitChange);
    }
    let pv_name = format!("pvc-{}", claim.uid().unwrap_or_default());
    let pvs = Api::<PersistentVolume>::all(ctx.client.clone());
    if pvs
        .get_opt(&pv_name)
        .await
        .map_err(|source| Error::Kube {
            operation: format!("getting PersistentVolume {pv_name}"),
            source,
        })?
        .is_some()
    {
        // Provisioned already; the binder binds it.
        return Ok(Action::AwaitChange);
    }
    let reference = claim.object_ref(&());
    let params = match parameters(&class, cloud) {
        Ok(p) => p,
        Err(msg) => {
            ctx.event(
                CONTROLLER,
                &reference,
                EventType::Warning,
                "ProvisioningFailed",
                msg.clone(),
            )
            .await;
            return Err(Error::Provision {
                claim: format!("{ns}/{name}"),
                message: msg,
            });
        }
    };
    let request = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    let Some(size_gib) = round_up_to_gib(&request).filter(|s| *s > 0) else {
        return Err(Error::Provision {
            claim: format!("{ns}/{name}"),
            message: format!("invalid storage request {request:?}"),
        });
    };
    let selected = selected_name.as_deref().and_then(|n| {
        nodes
            .iter()
            .find(|node| node.name_any() == n)
            .map(|n| n.as_ref().clone())
    });
    if selected_name.is_some() && selected.is_none() {
        return Err(Error::Provision {
            claim: format!("{ns}/{name}"),
            message: format!("selected node {:?} not found", selected_name),
        });
    }
    let zone = select_zone(&params, selected.as_ref(), &class, nodes, &name);
    let volume_request = VolumeRequest {
        name: volume_name(
            &ctx.options.kube_cloud_shared.cluster_name,
            &pv_name,
            cloud.max_volume_name_len(),
        ),
        size_gib,
        zone,
        volume_type: params.volume_type.clone(),
        options: params.options.clone(),
        pool: params.pool.clone(),
        tags: [
            (TAG_PVC_NAMESPACE.to_owned(), ns.clone()),
            (TAG_PVC_NAME.to_owned(), name.clone()),
            (TAG_PV_NAME.to_owned(), pv_name.clone()),
        ]
        .into(),
    };
    let volume = match cloud.create_volume(&volume_request).await {
        Ok(v) => v,
        Err(source) => {
            let note = format!(
                "Failed to provision volume with StorageClass {class_name:?}: {}",
                hypercloud_cloudprovider::Chain(&source)
            );
            ctx.event(
                CONTROLLER,
                &reference,
                EventType::Warning,
                "ProvisioningFailed",
                note,
            )
            .await;
            return Err(Error::Cloud {
                operation: format!("creating a volume for claim {ns}/{name}"),
                source,
            });
        }
    };
    let pv = persistent_volume(
        cloud,
        &claim,
        &class,
        &pv_name,
        &volume.id,
        volume.size_gib,
        &params,
        &volume.labels,
    );
    match pvs.create(&PostParams::default(), &pv).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(source) => {
            // No PV points at the volume: delete it rather than leak it (external-provisioner
            // retries the PV first; one retry here is the next provisioning attempt).
            if let Err(e) = cloud.delete_volume(&volume.id).await {
                tracing::warn!(volume = %volume.id, error = %hypercloud_cloudprovider::Chain(&e), "deleting the volume of a failed provisioning");
            }
            return Err(Error::Kube {
                operation: format!("creating PersistentVolume {pv_name}"),
                source,
            });
        }
    }
    tracing::info!(pv = %pv_name, volume = %volume.id, size_gib = volume.size_gib, "provisioned volume");
    ctx.event(
        CONTROLLER,
        &reference,
        EventType::Normal,
        "ProvisioningSucceeded",
        format!("Successfully provisioned volume {pv_name} using {plugin}"),
    )
    .await;
    Ok(Action::AwaitChange)
}

/// The PV of a provisioned volume (upstream cinder `Provision` + the binder's additions).
#[allow(clippy::too_many_arguments)]
pub fn persistent_volume(
    cloud: &dyn VolumeProvisioner,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    pv_name: &str,
    volume_id: &str,
    size_gib: u64,
    params: &Parameters,
    labels: &BTreeMap<String, String>,
) -> PersistentVolume {
    let spec = claim.spec.clone().unwrap_or_default();
    let source = cloud.volume_source(volume_id, params.fs_type.as_deref());
    let requirements = node_selector_requirements(labels);
    let node_affinity = (!requirements.is_empty()).then(|| VolumeNodeAffinity {
        required: Some(k8s_openapi::api::core::v1::NodeSelector {
            node_selector_terms: vec![k8s_openapi::api::core::v1::NodeSelectorTerm {
                match_expressions: Some(requirements),
                match_fields: None,
            }],
        }),
    });
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(pv_name.to_owned()),
            labels: (!labels.is_empty()).then(|| labels.clone()),
            annotations: Some(
                [
                    (
                        ANN_PROVISIONED_BY.to_owned(),
                        cloud.plugin_name().to_owned(),
                    ),
                    (
                        ANN_CREATED_BY.to_owned(),
                        "cinder-dynamic-provisioner".to_owned(),
                    ),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes.clone(),
            capacity: Some([("storage".to_owned(), Quantity(format!("{size_gib}Gi")))].into()),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: claim.namespace(),
                name: Some(claim.name_any()),
                uid: claim.uid(),
                resource_version: claim.resource_version(),
                field_path: None,
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: Some(class.name_any()),
            mount_options: class.mount_options.clone(),
            volume_mode: spec.volume_mode.clone(),
            node_affinity,
            ..source
        }),
        status: None,
    }
}

/// Whether the deleter may delete `pv` now, given whether its claim still exists
/// (external-provisioner's `shouldDelete`, with the binder's release test).
pub fn should_delete(pv: &PersistentVolume, plugin: &str, claim_exists: bool) -> bool {
    if pv.metadata.deletion_timestamp.is_some()
        || pv.annotations().get(ANN_PROVISIONED_BY).map(String::as_str) != Some(plugin)
    {
        return false;
    }
    let Some(spec) = &pv.spec else {
        return false;
    };
    if spec.persistent_volume_reclaim_policy.as_deref() != Some("Delete") {
        return false;
    }
    let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    released || (spec.claim_ref.is_some() && !claim_exists)
}

/// Whether the claim `pv` names still exists (with the UID it names). The cache may lag a
/// claim just created, so a claim missing there is looked up in the apiserver.
async fn claim_exists(
    pv: &PersistentVolume,
    claims: &Informer<PersistentVolumeClaim>,
    ctx: &Context,
) -> Result<bool> {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Ok(false);
    };
    let ns = r.namespace.as_deref().unwrap_or_default();
    let name = r.name.as_deref().unwrap_or_default();
    let same = |c: &PersistentVolumeClaim| r.uid.is_none() || c.uid() == r.uid;
    if let Some(c) = get_by_key(&claims.store, &format!("{ns}/{name}")) {
        if same(&c) {
            return Ok(true);
        }
    }
    let found = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|source| Error::Kube {
            operation: format!("getting PersistentVolumeClaim {ns}/{name}"),
            source,
        })?;
    Ok(found.is_some_and(|c| same(&c)))
}

/// Deletes the volume of one released PV, then the PV.
#[tracing::instrument(skip_all, fields(pv = %pv.name_any()))]
pub(crate) async fn delete(
    pv: Arc<PersistentVolume>,
    claims: &Informer<PersistentVolumeClaim>,
    ctx: Arc<Context>,
) -> Result<Action> {
    let Some(cloud) = ctx.cloud.volume_provisioner() else {
        return Ok(Action::AwaitChange);
    };
    let plugin = cloud.plugin_name().to_owned();
    if !should_delete(&pv, &plugin, false) {
        // Not ours, Retain, or no claim ever: nothing to do whatever the claim.
        return Ok(Action::AwaitChange);
    }
    if !should_delete(&pv, &plugin, true) && claim_exists(&pv, claims, &ctx).await? {
        return Ok(Action::AwaitChange);
    }
    let name = pv.name_any();
    let Some(volume_id) = cloud.volume_id(&pv) else {
        return Ok(Action::AwaitChange);
    };
    if let Err(source) = cloud.delete_volume(&volume_id).await {
        let note = hypercloud_cloudprovider::Chain(&source).to_string();
        ctx.event(
            CONTROLLER,
            &pv.object_ref(&()),
            EventType::Warning,
            "VolumeFailedDelete",
            note,
        )
        .await;
        return Err(Error::Cloud {
            operation: format!("deleting volume {volume_id} of PersistentVolume {name}"),
            source,
        });
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pv.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match Api::<PersistentVolume>::all(ctx.client.clone())
        .delete(&name, &params)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
        Err(source) => {
            return Err(Error::Kube {
                operation: format!("deleting PersistentVolume {name}"),
                source,
            })
        }
    }
    tracing::info!(volume = %volume_id, "deleted volume of released persistent volume");
    Ok(Action::AwaitChange)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(v: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(v).expect("claim")
    }

    #[test]
    fn volume_names_cut_the_clusters_part_to_fit() {
        let pv = "pvc-0c820925-6ab1-403f-9acf-1b5179fb2c77";
        assert_eq!(
            volume_name("kubernetes", pv, 63),
            format!("kubernetes-dynamic-{pv}")
        );
        assert_eq!(
            volume_name("kubernetes", pv, 255),
            format!("kubernetes-dynamic-{pv}")
        );
        // GCE's 63: the PV's name is kept whole, the cluster's part cut.
        let long = "a-very-long-cluster-name-from-the-flags";
        let name = volume_name(long, pv, 63);
        assert_eq!(name.len(), 63, "{name}");
        assert_eq!(name, format!("a-very-long-cluster-na-{pv}"));
        // Nothing left for the cluster's part; a multi-byte name is cut on a boundary.
        assert_eq!(volume_name(long, pv, 10), format!("-{pv}"));
        assert_eq!(volume_name("zoné", "p", 8), "zoné--p");
        assert_eq!(volume_name("zoné", "p", 6), "zon-p");
    }

    #[test]
    fn only_unbound_claims_annotated_for_the_plugin() {
        let plugin = "kubernetes.io/cinder";
        let c = claim(
            json!({"metadata": {"name": "c", "annotations": {ANN_STORAGE_PROVISIONER: plugin}}}),
        );
        let csi = migrated_csi_driver(plugin);
        assert_eq!(csi, Some("cinder.csi.openstack.org"));
        assert_eq!(should_provision(&c, plugin, csi), None);
        let beta = claim(
            json!({"metadata": {"name": "c", "annotations": {ANN_BETA_STORAGE_PROVISIONER: plugin}}}),
        );
        assert_eq!(should_provision(&beta, plugin, csi), None);
        // What the v1.34 binder writes for a class naming kubernetes.io/cinder (CSI migration).
        let migrated = claim(
            json!({"metadata": {"name": "c", "annotations": {ANN_STORAGE_PROVISIONER: "cinder.csi.openstack.org"}}}),
        );
        assert_eq!(should_provision(&migrated, plugin, csi), None);
        assert_eq!(
            should_provision(&migrated, plugin, None),
            Some(Skip::NotOurs)
        );
        let other = claim(
            json!({"metadata": {"name": "c", "annotations": {ANN_STORAGE_PROVISIONER: "ebs.csi.aws.com"}}}),
        );
        assert_eq!(should_provision(&other, plugin, csi), Some(Skip::NotOurs));
        let bare = claim(json!({"metadata": {"name": "c"}}));
        assert_eq!(should_provision(&bare, plugin, csi), Some(Skip::NotOurs));
        let bound = claim(
            json!({"metadata": {"name": "c", "annotations": {ANN_STORAGE_PROVISIONER: plugin}}, "spec": {"volumeName": "pv"}}),
        );
        assert_eq!(should_provision(&bound, plugin, csi), Some(Skip::Done));
        // A plugin no upstream binder knows: its claims come unannotated.
        let photon = "kubernetes.io/photon-pd";
        assert_eq!(migrated_csi_driver(photon), None);
        assert_eq!(should_provision(&bare, photon, None), None);
        assert_eq!(should_provision(&other, photon, None), Some(Skip::NotOurs));
    }

    #[test]
    fn parameters_as_the_cinder_plugin_reads_them() {
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "sc"}, "provisioner": "kubernetes.io/cinder",
            "parameters": {"type": "fast", "Availability": "nova", "fsType": "xfs"},
        }))
        .expect("class");
        let cloud = super::api_tests::Volumes::default();
        let p = parameters(&class, &cloud).expect("valid");
        assert_eq!(p.volume_type, "fast");
        assert_eq!(p.zone, "nova");
        assert_eq!(p.fs_type.as_deref(), Some("xfs"));
        let bad: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "sc"}, "provisioner": "kubernetes.io/cinder",
            "parameters": {"iops": "5"},
        }))
        .expect("class");
        assert!(parameters(&bad, &cloud)
            .expect_err("unknown")
            .contains("iops"));
    }

    #[test]
    fn zone_from_parameter_then_selected_node_then_topologies_then_nodes() {
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "sc"}, "provisioner": "kubernetes.io/cinder",
        }))
        .expect("class");
        let node = |name: &str, zone: &str| -> Node {
            serde_json::from_value(
                json!({"metadata": {"name": name, "labels": {LABEL_TOPOLOGY_ZONE: zone}}}),
            )
            .expect("node")
        };
        let nodes = vec![Arc::new(node("n1", "z1")), Arc::new(node("n2", "z2"))];
        let mut p = Parameters::default();
        let n2 = node("n2", "z2");
        assert_eq!(select_zone(&p, Some(&n2), &class, &nodes, "c"), "z2");
        let z = select_zone(&p, None, &class, &nodes, "c");
        assert!(z == "z1" || z == "z2");
        assert_eq!(select_zone(&p, None, &class, &[], "c"), "");
        let topo: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "sc"}, "provisioner": "kubernetes.io/cinder",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": LABEL_TOPOLOGY_ZONE, "values": ["z9"]}]}],
        }))
        .expect("class");
        assert_eq!(select_zone(&p, None, &topo, &nodes, "c"), "z9");
        p.zones = vec!["za".into(), "z2".into()];
        assert_eq!(select_zone(&p, Some(&n2), &topo, &nodes, "c"), "z2");
        let z = select_zone(&p, Some(&node("n1", "z1")), &topo, &nodes, "c");
        assert!(z == "za" || z == "z2", "{z}");
        assert_eq!(select_zone(&p, None, &topo, &nodes, "c"), z);
        p.zone = "az".into();
        assert_eq!(select_zone(&p, Some(&n2), &topo, &nodes, "c"), "az");
    }

    #[test]
    fn released_delete_pvs_of_the_plugin_only() {
        let pv = |policy: &str, by: &str, phase: Option<&str>| -> PersistentVolume {
            serde_json::from_value(json!({
                "metadata": {"name": "pv", "annotations": {ANN_PROVISIONED_BY: by}},
                "spec": {"persistentVolumeReclaimPolicy": policy,
                         "claimRef": {"namespace": "ns", "name": "c", "uid": "u"}},
                "status": {"phase": phase},
            }))
            .expect("pv")
        };
        let plugin = "kubernetes.io/cinder";
        assert!(!should_delete(
            &pv("Delete", plugin, Some("Bound")),
            plugin,
            true
        ));
        assert!(should_delete(
            &pv("Delete", plugin, Some("Bound")),
            plugin,
            false
        ));
        assert!(should_delete(
            &pv("Delete", plugin, Some("Released")),
            plugin,
            true
        ));
        assert!(!should_delete(
            &pv("Retain", plugin, Some("Released")),
            plugin,
            false
        ));
        assert!(!should_delete(
            &pv("Delete", "other", Some("Released")),
            plugin,
            false
        ));
    }
}

/// What the deleter sends, checked against a mocked apiserver and a recording provider.
#[cfg(test)]
pub(crate) mod api_tests {
    use super::*;
    use crate::fixtures::{context_with, exchange};
    use async_trait::async_trait;
    use hypercloud_cloudprovider::{Interface, ProvisionedVolume};
    use serde_json::json;
    use std::sync::Mutex;

    /// A provider with only an in-tree volume plugin, recording its calls.
    #[derive(Default)]
    pub(crate) struct Volumes {
        pub calls: Mutex<Vec<String>>,
    }

    impl Interface for Volumes {
        fn provider_name(&self) -> &str {
            "volumes"
        }
        fn volume_provisioner(&self) -> Option<&dyn VolumeProvisioner> {
            Some(self)
        }
    }

    #[async_trait]
    impl VolumeProvisioner for Volumes {
        fn plugin_name(&self) -> &str {
            "kubernetes.io/cinder"
        }
        fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
            pv.spec
                .as_ref()?
                .cinder
                .as_ref()
                .map(|c| c.volume_id.clone())
        }
        fn volume_source(&self, _id: &str, _fs: Option<&str>) -> PersistentVolumeSpec {
            PersistentVolumeSpec::default()
        }
        async fn create_volume(
            &self,
            r: &VolumeRequest,
        ) -> hypercloud_cloudprovider::Result<ProvisionedVolume> {
            self.record(format!("create {}", r.name));
            Ok(ProvisionedVolume::default())
        }
        async fn delete_volume(&self, id: &str) -> hypercloud_cloudprovider::Result<()> {
            self.record(format!("delete {id}"));
            Ok(())
        }
        async fn expand_volume(&self, id: &str, gib: u64) -> hypercloud_cloudprovider::Result<u64> {
            self.record(format!("expand {id} {gib}"));
            Ok(gib)
        }
    }

    impl Volumes {
        fn record(&self, call: String) {
            self.calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(call);
        }
        pub(crate) fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
    }

    fn pv(policy: &str) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": "pvc-1", "uid": "pv-uid",
                         "annotations": {ANN_PROVISIONED_BY: "kubernetes.io/cinder"}},
            "spec": {"persistentVolumeReclaimPolicy": policy,
                     "cinder": {"volumeID": "vol-1"},
                     "claimRef": {"namespace": "ns", "name": "data", "uid": "c-uid"}},
            "status": {"phase": "Released"},
        }))
        .expect("pv")
    }

    #[tokio::test]
    async fn a_released_delete_pv_loses_its_volume_then_the_pv_guarded_by_uid() {
        let cloud = Arc::new(Volumes::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let claims = Informer::<PersistentVolumeClaim>::fixed(vec![]);
        exchange(
            delete(Arc::new(pv("Delete")), &claims, ctx),
            api,
            |mut api| {
                Box::pin(async move {
                    let d = api
                        .expect("DELETE", "/api/v1/persistentvolumes/pvc-1?", json!({}))
                        .await;
                    assert_eq!(d.body["preconditions"]["uid"], "pv-uid", "{d:?}");
                    api
                })
            },
        )
        .await
        .expect("reconcile");
        assert_eq!(cloud.calls(), ["delete vol-1"]);
    }

    #[tokio::test]
    async fn a_retained_pv_keeps_its_volume_without_a_request() {
        let cloud = Arc::new(Volumes::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let claims = Informer::<PersistentVolumeClaim>::fixed(vec![]);
        exchange(delete(Arc::new(pv("Retain")), &claims, ctx), api, |api| {
            Box::pin(async move { api })
        })
        .await
        .expect("reconcile");
        assert!(cloud.calls().is_empty());
    }
}
