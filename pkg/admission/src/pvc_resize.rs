//! PersistentVolumeClaim resize (validating; upstream `PersistentVolumeClaimResize`): a
//! claim's storage request may grow only when its StorageClass sets
//! `allowVolumeExpansion: true` and its volume is of a type that can be expanded (a CSI volume,
//! or an in-tree Cinder, GCE persistent disk or AWS EBS volume, which the cloud's provider
//! grows (upstream allowed the same in-tree types); a `vsphereVolume` is refused by name, as
//! upstream v1.20's vSphere plugin had no expansion).
//! Shrinking is the apiserver's own validation, not ours.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::DynamicObject;
use kube::Api;

use hypercloud_cloudprovider::Chain;

use crate::review::{self, Verdict};
use crate::{Error, Webhook};

const CHECK: &str = "PersistentVolumeClaimResize";
const NOT_RESIZABLE: &str =
    "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";

/// The webhook endpoint.
pub async fn handle(State(webhook): State<Arc<Webhook>>, body: Bytes) -> Response {
    review::answer(&body, CHECK, async |req| check(&webhook, req).await).await
}

/// Decides one request.
pub async fn check(webhook: &Webhook, req: &AdmissionRequest<DynamicObject>) -> Verdict {
    if let Some(verdict) = review::other_kind(CHECK, req, "PersistentVolumeClaim") {
        return verdict;
    }
    let (Operation::Update, Some(new), Some(old)) = (&req.operation, &req.object, &req.old_object)
    else {
        return Verdict::Allow;
    };
    let decoded =
        review::object::<PersistentVolumeClaim>("PersistentVolumeClaim", new).and_then(|n| {
            Ok((
                n,
                review::object::<PersistentVolumeClaim>("PersistentVolumeClaim", old)?,
            ))
        });
    let (new, old) = match decoded {
        Ok(pair) => pair,
        Err(e) => return Verdict::Deny(format!("{CHECK}: {}", Chain(&e))),
    };
    if !grows(&old, &new) {
        return Verdict::Allow;
    }
    match allowed(webhook, &new).await {
        Ok(None) => Verdict::Allow,
        Ok(Some(reason)) => Verdict::Deny(reason),
        Err(e) => Verdict::Deny(format!("{CHECK}: {}", Chain(&e))),
    }
}

/// `None` when the resize may go ahead, else why not.
async fn allowed(webhook: &Webhook, pvc: &PersistentVolumeClaim) -> crate::Result<Option<String>> {
    let spec = pvc.spec.clone().unwrap_or_default();
    let Some(sc_name) = spec.storage_class_name.filter(|s| !s.is_empty()) else {
        return Ok(Some(NOT_RESIZABLE.into()));
    };
    let classes: Api<StorageClass> = Api::all(webhook.client.clone());
    let sc = classes
        .get_opt(&sc_name)
        .await
        .map_err(|source| Error::Read {
            what: format!("StorageClass {sc_name}"),
            source: Box::new(source),
        })?;
    if !sc.and_then(|s| s.allow_volume_expansion).unwrap_or(false) {
        return Ok(Some(NOT_RESIZABLE.into()));
    }
    let Some(pv_name) = spec.volume_name.filter(|s| !s.is_empty()) else {
        return Ok(Some(NOT_RESIZABLE.into()));
    };
    let pvs: Api<PersistentVolume> = Api::all(webhook.client.clone());
    let pv = pvs.get_opt(&pv_name).await.map_err(|source| Error::Read {
        what: format!("PersistentVolume {pv_name}"),
        source: Box::new(source),
    })?;
    let spec = pv.and_then(|p| p.spec);
    if spec.as_ref().is_some_and(|s| s.vsphere_volume.is_some()) {
        return Ok(Some(format!(
            "the volume type of PersistentVolume {pv_name} does not support resizing: {VSPHERE_NO_EXPANSION}"
        )));
    }
    let expandable = spec.is_some_and(|s| expandable(&s));
    Ok((!expandable).then(|| {
        format!("the volume type of PersistentVolume {pv_name} does not support resizing")
    }))
}

/// Why `vsphereVolume` claims may not grow, named in the denial.
const VSPHERE_NO_EXPANSION: &str = "the in-tree kubernetes.io/vsphere-volume plugin had no volume expansion in Kubernetes v1.20 (only the vSphere CSI driver grows disks)";

/// Whether a PV's volume source is one whose growth is served: CSI, or the in-tree plugins
/// hypercloud's providers expand (`kubernetes.io/cinder`, `kubernetes.io/gce-pd`,
/// `kubernetes.io/aws-ebs`; not `kubernetes.io/vsphere-volume`, which upstream v1.20 could not
/// expand).
fn expandable(spec: &PersistentVolumeSpec) -> bool {
    spec.csi.is_some()
        || spec.cinder.is_some()
        || spec.gce_persistent_disk.is_some()
        || spec.aws_elastic_block_store.is_some()
}

fn storage(pvc: &PersistentVolumeClaim) -> Option<f64> {
    let q = pvc
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    parse_quantity(&q.0)
}

/// Whether the storage request grew.
fn grows(old: &PersistentVolumeClaim, new: &PersistentVolumeClaim) -> bool {
    matches!((storage(old), storage(new)), (Some(o), Some(n)) if n > o)
}

/// A Kubernetes quantity (`10Gi`, `500M`, `1.5e3`, `100m`) in base units.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(num * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cinder_gce_pd_aws_ebs_and_csi_volumes_are_expandable_others_not() {
        let spec = |source: serde_json::Value| -> PersistentVolumeSpec {
            serde_json::from_value(source).expect("spec")
        };
        for source in [
            serde_json::json!({"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": "v"}}),
            serde_json::json!({"cinder": {"volumeID": "v"}}),
            serde_json::json!({"gcePersistentDisk": {"pdName": "v"}}),
            serde_json::json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
        ] {
            assert!(expandable(&spec(source.clone())), "{source}");
        }
        for source in [
            serde_json::json!({"azureDisk": {"diskName": "d", "diskURI": "u"}}),
            serde_json::json!({"hostPath": {"path": "/v"}}),
            serde_json::json!({"vsphereVolume": {"volumePath": "[ds] kubevols/v.vmdk"}}),
            serde_json::json!({}),
        ] {
            assert!(!expandable(&spec(source.clone())), "{source}");
        }
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("10Gi"), Some(10.0 * 1024f64.powi(3)));
        assert_eq!(parse_quantity("500M"), Some(5e8));
        assert_eq!(parse_quantity("1.5e3"), Some(1500.0));
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("7"), Some(7.0));
        assert_eq!(parse_quantity("5Xi"), None);
        assert!(parse_quantity("1Gi") > parse_quantity("1G"));
    }
}
