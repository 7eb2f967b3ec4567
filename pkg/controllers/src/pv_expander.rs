//! The cloud part of upstream's `persistentvolume-expander` (`pkg/controller/volume/expand`)
//! for an in-tree volume plugin (`kubernetes.io/cinder`): a bound claim whose storage request
//! grew above its status capacity (the apiserver's PersistentVolumeClaimResize check already
//! allowed it) gets its cloud volume extended (`os-extend` on Cinder), then the PV's capacity
//! updated. As upstream's operation generator: the claim is marked `Resizing` (and annotated
//! `volume.kubernetes.io/storage-resizer`) first; afterwards a block-mode claim, which needs no
//! file-system resize, gets its status capacity and the condition cleared, while a
//! file-system claim is marked `FileSystemResizePending` for the kubelet, which grows the file
//! system when a pod mounts the volume and then records the capacity.

use std::sync::Arc;

use hypercloud_cloudprovider::volume::{quantity_bytes, round_up_to_gib};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::{json, Value};

use crate::informer::{enqueue_changes, get_by_key, key_of, Informer};
use crate::queue::{run_workers, Action, Backoff, Queue};
use crate::{names, Context, Error, Result};

/// Which controller resizes a claim's volume.
pub const ANN_STORAGE_RESIZER: &str = "volume.kubernetes.io/storage-resizer";

const CONTROLLER: &str = names::PV_EXPANDER.name;

/// Runs the expander until dropped.
pub(crate) async fn run(
    ctx: Arc<Context>,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    pvs: Arc<Informer<PersistentVolume>>,
) -> Result<()> {
    let queue = Queue::new("volume_expand", Backoff::VOLUME, ctx.metrics.clone());
    let feed = claims.subscribe();
    claims.ready().await;
    pvs.ready().await;
    let enqueue = enqueue_changes(&claims, feed, &queue, |_| {});
    let work = {
        let (queue, claims) = (queue.clone(), claims.clone());
        run_workers(queue.clone(), 1, move |key: String| {
            let (ctx, queue, pvs) = (ctx.clone(), queue.clone(), pvs.clone());
            let claim = get_by_key(&claims.store, &key);
            async move {
                let claim = claim?;
                // Done until the claim changes, whatever the reconcile asked.
                let result = reconcile(claim, &pvs, ctx)
                    .await
                    .map(|_| Action::AwaitChange);
                queue.settle(&key, result, |e| {
                    let delay = queue.backoff(&key);
                    tracing::warn!(claim = %key, error = %hypercloud_cloudprovider::Chain(&e), ?delay, "expanding volume, retrying");
                    Action::Requeue(delay)
                })
            }
        })
    };
    tokio::join!(enqueue, work);
    Ok(())
}

/// The size a bound claim asks for, in GiB, when it is more than its status capacity; `None`
/// when there is nothing to expand.
pub fn wanted_gib(claim: &PersistentVolumeClaim) -> Option<u64> {
    let spec = claim.spec.as_ref()?;
    spec.volume_name.as_deref().filter(|v| !v.is_empty())?;
    let status = claim.status.as_ref()?;
    if status.phase.as_deref() != Some("Bound") {
        return None;
    }
    let requested = spec.resources.as_ref()?.requests.as_ref()?.get("storage")?;
    let current = status.capacity.as_ref()?.get("storage")?;
    if quantity_bytes(&requested.0)? <= quantity_bytes(&current.0)? {
        return None;
    }
    round_up_to_gib(&requested.0)
}

/// The claim's status once the cloud volume has `size_gib`: a block volume is done; a file
/// system waits for the kubelet.
pub fn finished_status(claim: &PersistentVolumeClaim, size_gib: u64) -> Value {
    let block = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some("Block");
    if block {
        json!({"status": {"capacity": {"storage": format!("{size_gib}Gi")}, "conditions": null}})
    } else {
        json!({"status": {"conditions": [condition(
            "FileSystemResizePending",
            "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
        )]}})
    }
}

/// Whether the cloud side of this resize is done and only the kubelet's file-system resize is
/// left (the claim stays below its request until then; without this its every update would
/// start the resize over).
pub fn waiting_for_kubelet(
    claim: &PersistentVolumeClaim,
    pv_capacity_gib: Option<u64>,
    wanted_gib: u64,
) -> bool {
    let pending = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "FileSystemResizePending" && c.status == "True")
        });
    pending && pv_capacity_gib.is_some_and(|c| c >= wanted_gib)
}

fn condition(type_: &str, message: &str) -> Value {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    json!({"type": type_, "status": "True", "lastProbeTime": null,
           "lastTransitionTime": now, "message": message})
}

/// Expands one claim's volume.
#[tracing::instrument(skip_all, fields(claim = %key_of(claim.as_ref())))]
pub(crate) async fn reconcile(
    claim: Arc<PersistentVolumeClaim>,
    pvs: &Informer<PersistentVolume>,
    ctx: Arc<Context>,
) -> Result<Action> {
    let Some(cloud) = ctx.cloud.volume_provisioner() else {
        return Ok(Action::AwaitChange);
    };
    let Some(new_gib) = wanted_gib(&claim) else {
        return Ok(Action::AwaitChange);
    };
    let pv_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    let Some(pv) = get_by_key(&pvs.store, &pv_name) else {
        // The cache will bring it; its claim is requeued on the next change.
        return Ok(Action::AwaitChange);
    };
    let Some(volume_id) = cloud.volume_id(&pv) else {
        // Not this plugin's volume: a CSI driver's resizer expands it.
        return Ok(Action::AwaitChange);
    };
    let pv_capacity = pv
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| round_up_to_gib(&q.0));
    if waiting_for_kubelet(&claim, pv_capacity, new_gib) {
        return Ok(Action::AwaitChange);
    }
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let claims = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &ns);
    let patch_claim = |body: Value, status: bool| {
        let claims = claims.clone();
        let name = name.clone();
        let ns = ns.clone();
        async move {
            let pp = PatchParams::default();
            let r = if status {
                claims.patch_status(&name, &pp, &Patch::Merge(&body)).await
            } else {
                claims.patch(&name, &pp, &Patch::Merge(&body)).await
            };
            r.map(drop).map_err(|source| Error::Kube {
                operation: format!("patching PersistentVolumeClaim {ns}/{name}"),
                source,
            })
        }
    };
    if claim
        .annotations()
        .get(ANN_STORAGE_RESIZER)
        .map(String::as_str)
        != Some(cloud.plugin_name())
    {
        patch_claim(
            json!({"metadata": {"annotations": {ANN_STORAGE_RESIZER: cloud.plugin_name()}}}),
            false,
        )
        .await?;
    }
    patch_claim(
        json!({"status": {"conditions": [condition("Resizing", "")]}}),
        true,
    )
    .await?;
    let reference = claim.object_ref(&());
    let size = match cloud.expand_volume(&volume_id, new_gib).await {
        Ok(size) => size,
        Err(source) => {
            let note = format!(
                "error expanding volume {:?} of plugin {:?}: {}",
                key_of(claim.as_ref()),
                cloud.plugin_name(),
                hypercloud_cloudprovider::Chain(&source)
            );
            ctx.event(
                CONTROLLER,
                &reference,
                EventType::Warning,
                "VolumeResizeFailed",
                note,
            )
            .await;
            return Err(Error::Cloud {
                operation: format!(
                    "expanding volume {volume_id} of claim {}",
                    key_of(claim.as_ref())
                ),
                source,
            });
        }
    };
    if pv_capacity.is_none_or(|c| c < size) {
        Api::<PersistentVolume>::all(ctx.client.clone())
            .patch(
                &pv_name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"capacity": {"storage": format!("{size}Gi")}}})),
            )
            .await
            .map_err(|source| Error::PatchPersistentVolume {
                pv: pv_name.clone(),
                source,
            })?;
    }
    patch_claim(finished_status(&claim, size), true).await?;
    ctx.event(
        CONTROLLER,
        &reference,
        EventType::Normal,
        "VolumeResizeSuccessful",
        format!(
            "ExpandVolume succeeded for volume {}",
            key_of(claim.as_ref())
        ),
    )
    .await;
    tracing::info!(volume = %volume_id, size_gib = size, "expanded volume");
    Ok(Action::AwaitChange)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(request: &str, capacity: &str, mode: &str, phase: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"volumeName": "pv", "volumeMode": mode,
                     "resources": {"requests": {"storage": request}}},
            "status": {"phase": phase, "capacity": {"storage": capacity}},
        }))
        .expect("claim")
    }

    #[test]
    fn only_bound_claims_that_grew() {
        assert_eq!(
            wanted_gib(&claim("3Gi", "1Gi", "Filesystem", "Bound")),
            Some(3)
        );
        assert_eq!(
            wanted_gib(&claim("1500Mi", "1Gi", "Block", "Bound")),
            Some(2)
        );
        assert_eq!(wanted_gib(&claim("1Gi", "1Gi", "Block", "Bound")), None);
        assert_eq!(wanted_gib(&claim("3Gi", "1Gi", "Block", "Pending")), None);
    }

    #[test]
    fn a_file_system_resize_left_to_the_kubelet_is_not_started_again() {
        let mut c = claim("3Gi", "1Gi", "Filesystem", "Bound");
        assert!(!waiting_for_kubelet(&c, Some(3), 3));
        let status = finished_status(&c, 3)["status"].clone();
        let conditions = serde_json::from_value(status["conditions"].clone()).expect("conditions");
        if let Some(s) = c.status.as_mut() {
            s.conditions = Some(conditions);
        }
        assert!(waiting_for_kubelet(&c, Some(3), 3));
        // Asked for more again: the cloud has work to do.
        assert!(!waiting_for_kubelet(&c, Some(3), 4));
    }

    #[test]
    fn block_claims_finish_file_systems_wait_for_the_kubelet() {
        let b = finished_status(&claim("3Gi", "1Gi", "Block", "Bound"), 3);
        assert_eq!(b["status"]["capacity"]["storage"], "3Gi");
        assert!(b["status"]["conditions"].is_null());
        let f = finished_status(&claim("3Gi", "1Gi", "Filesystem", "Bound"), 3);
        assert!(f["status"].get("capacity").is_none());
        assert_eq!(
            f["status"]["conditions"][0]["type"],
            "FileSystemResizePending"
        );
    }
}

/// What the expander sends, checked against a mocked apiserver and a recording provider.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::fixtures::{context_with, exchange};
    use crate::pv_provisioner::api_tests::Volumes;

    #[tokio::test]
    async fn a_block_claim_is_marked_resizing_grown_in_the_cloud_then_finished() {
        let cloud = Arc::new(Volumes::default());
        let (ctx, api) = context_with(cloud.clone(), &[], "kube-controller-manager");
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ns", "uid": "c-uid"},
            "spec": {"volumeName": "pvc-1", "volumeMode": "Block",
                     "resources": {"requests": {"storage": "3Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}},
        }))
        .expect("claim");
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "pvc-1"},
            "spec": {"capacity": {"storage": "2Gi"}, "cinder": {"volumeID": "vol-1"}},
        }))
        .expect("pv");
        let pvs = Informer::fixed(vec![pv.clone()]);
        let (claim_json, pv_json) = (
            serde_json::to_value(&claim).expect("json"),
            serde_json::to_value(&pv).expect("json"),
        );
        exchange(reconcile(Arc::new(claim), &pvs, ctx), api, |mut api| {
            Box::pin(async move {
                let c = "/api/v1/namespaces/ns/persistentvolumeclaims/data";
                let p = api
                    .expect("PATCH", &format!("{c}?"), claim_json.clone())
                    .await;
                assert_eq!(
                    p.body["metadata"]["annotations"][ANN_STORAGE_RESIZER],
                    "kubernetes.io/cinder"
                );
                let p = api
                    .expect("PATCH", &format!("{c}/status?"), claim_json.clone())
                    .await;
                assert_eq!(p.body["status"]["conditions"][0]["type"], "Resizing");
                let p = api
                    .expect("PATCH", "/api/v1/persistentvolumes/pvc-1?", pv_json)
                    .await;
                assert_eq!(p.body, json!({"spec": {"capacity": {"storage": "3Gi"}}}));
                let p = api
                    .expect("PATCH", &format!("{c}/status?"), claim_json)
                    .await;
                assert_eq!(
                    p.body,
                    json!({"status": {"capacity": {"storage": "3Gi"}, "conditions": null}})
                );
                api.expect_event("ns", "VolumeResizeSuccessful").await;
                api
            })
        })
        .await
        .expect("reconcile");
        assert_eq!(cloud.calls(), ["expand vol-1 3"]);
    }
}
