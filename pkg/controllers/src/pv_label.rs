//! The PersistentVolume label controller (upstream kube-controller-manager's
//! `PersistentVolumeLabelController`, `pkg/controller/cloud/pvlcontroller.go`, the
//! cloud-controller-manager side of the PersistentVolumeLabel admission plugin): asks the
//! provider's [`PvLabeler`](hypercloud_cloudprovider::PvLabeler) for the zone/region labels of
//! each PersistentVolume backed by one of its volumes, adds those the PV lacks, and — when the
//! PV has no node affinity yet (it is immutable once set) — a required node affinity on them,
//! zone values split on `__` as upstream's multi-zone delimiter. One merge patch per PV,
//! guarded by its resourceVersion; PVs already labelled cost no cloud call.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use hypercloud_cloudprovider::volume::node_selector_requirements;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::informer::{enqueue_changes, get_by_key, Informer};
use crate::queue::{run_workers, Action, Backoff, Queue};
use crate::{Context, Error, Result};

/// Runs the controller until it is dropped.
pub(crate) async fn run(ctx: Arc<Context>, pvs: Arc<Informer<PersistentVolume>>) -> Result<()> {
    let queue = Queue::new("pvLabels", Backoff::DEFAULT_CONTROLLER, ctx.metrics.clone());
    // PV UIDs already labelled: later updates of them need no cloud call.
    let done: Arc<Mutex<HashSet<String>>> = Arc::default();
    let feed = pvs.subscribe();
    pvs.ready().await;
    let enqueue = enqueue_changes(&pvs, feed, &queue, |_| {});
    let work = {
        let queue = queue.clone();
        let pvs = pvs.clone();
        run_workers(queue.clone(), 1, move |key: String| {
            let ctx = ctx.clone();
            let queue = queue.clone();
            let done = done.clone();
            let pv = get_by_key(&pvs.store, &key);
            async move {
                let pv = pv?;
                let uid = pv.uid().unwrap_or_default();
                if done
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains(&uid)
                {
                    return None;
                }
                match reconcile(pv.clone(), ctx).await {
                    Ok(_) => {
                        queue.forget(&key);
                        done.lock().unwrap_or_else(|p| p.into_inner()).insert(uid);
                        None
                    }
                    Err(e) => {
                        let delay = queue.backoff(&key);
                        tracing::warn!(pv = %key, error = %hypercloud_cloudprovider::Chain(&e), ?delay, "labelling persistent volume, retrying");
                        Some(delay)
                    }
                }
            }
        })
    };
    tokio::join!(enqueue, work);
    Ok(())
}

/// Labels one PV.
#[tracing::instrument(skip_all, fields(pv = %pv.name_any()))]
pub async fn reconcile(pv: Arc<PersistentVolume>, ctx: Arc<Context>) -> Result<Action> {
    let Some(labeler) = ctx.cloud.pv_labeler() else {
        return Ok(Action::AwaitChange);
    };
    let name = pv.name_any();
    let labels =
        labeler
            .get_labels_for_volume(&pv)
            .await
            .map_err(|source| Error::GetVolumeLabels {
                pv: name.clone(),
                source,
            })?;
    if let Some(patch) = label_patch(&pv, &labels) {
        Api::<PersistentVolume>::all(ctx.client.clone())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::PatchPersistentVolume {
                pv: name.clone(),
                source,
            })?;
        tracing::info!(?labels, "labelled persistent volume");
    }
    Ok(Action::AwaitChange)
}

/// The merge patch adding the cloud's labels (and, when the PV has none, the node affinity
/// they imply), or `None` when nothing is missing.
pub fn label_patch(
    pv: &PersistentVolume,
    labels: &BTreeMap<String, String>,
) -> Option<serde_json::Value> {
    let current = pv.labels();
    let missing: BTreeMap<&String, &String> = labels
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(v))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let mut patch = json!({"metadata": {
        "labels": missing,
        "resourceVersion": pv.resource_version(),
    }});
    let has_affinity = pv.spec.as_ref().is_some_and(|s| s.node_affinity.is_some());
    if !has_affinity {
        let requirements = node_selector_requirements(labels);
        patch["spec"] = json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": requirements}
        ]}}});
    }
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::wellknown::LABEL_TOPOLOGY_REGION;
    use hypercloud_cloudprovider::wellknown::LABEL_TOPOLOGY_ZONE;
    use k8s_openapi::api::core::v1::{PersistentVolumeSpec, VolumeNodeAffinity};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pv(labels: &[(&str, &str)], affinity: bool) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pv".into()),
                resource_version: Some("7".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                node_affinity: affinity.then(VolumeNodeAffinity::default),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cloud_labels() -> BTreeMap<String, String> {
        [
            (LABEL_TOPOLOGY_ZONE.to_string(), "z1__z2".to_string()),
            (LABEL_TOPOLOGY_REGION.to_string(), "r1".to_string()),
        ]
        .into()
    }

    #[test]
    fn adds_labels_and_affinity_with_multi_zone_values() {
        let p = label_patch(&pv(&[], false), &cloud_labels()).expect("patch");
        assert_eq!(p["metadata"]["labels"][LABEL_TOPOLOGY_REGION], "r1");
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        let reqs =
            &p["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"];
        assert_eq!(
            reqs[1],
            json!({"key": LABEL_TOPOLOGY_ZONE, "operator": "In", "values": ["z1", "z2"]})
        );
    }

    #[test]
    fn existing_affinity_is_immutable_and_labelled_pvs_need_nothing() {
        let p = label_patch(&pv(&[], true), &cloud_labels()).expect("patch");
        assert!(p.get("spec").is_none());
        let done = pv(
            &[
                (LABEL_TOPOLOGY_ZONE, "z1__z2"),
                (LABEL_TOPOLOGY_REGION, "r1"),
            ],
            false,
        );
        assert!(label_patch(&done, &cloud_labels()).is_none());
        assert!(label_patch(&pv(&[], false), &BTreeMap::new()).is_none());
    }
}

/// What a reconcile sends, checked against a mocked apiserver.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::fixtures::{cloud, context, exchange};
    use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};

    #[tokio::test]
    async fn a_cloud_volume_gets_its_labels_and_affinity_in_one_guarded_patch() {
        let (ctx, api) = context(cloud("region: r1\nvolumes: [{id: vol-1, zone: z1}]\n"), &[]);
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "pv1", "resourceVersion": "9"},
            "spec": {"csi": {"driver": "cinder.csi.openstack.org", "volumeHandle": "vol-1"}},
        }))
        .expect("pv");
        let answer = serde_json::to_value(&pv).expect("json");
        exchange(reconcile(Arc::new(pv), ctx), api, |mut api| {
            Box::pin(async move {
                let p = api
                    .expect("PATCH", "/api/v1/persistentvolumes/pv1?", answer)
                    .await;
                assert_eq!(p.content_type, "application/merge-patch+json");
                assert_eq!(
                    p.body,
                    json!({
                        "metadata": {
                            "labels": {LABEL_TOPOLOGY_REGION: "r1", LABEL_TOPOLOGY_ZONE: "z1"},
                            "resourceVersion": "9",
                        },
                        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                            {"matchExpressions": [
                                {"key": LABEL_TOPOLOGY_REGION, "operator": "In", "values": ["r1"]},
                                {"key": LABEL_TOPOLOGY_ZONE, "operator": "In", "values": ["z1"]},
                            ]}
                        ]}}},
                    })
                );
                api
            })
        })
        .await
        .expect("reconcile");
    }
}
