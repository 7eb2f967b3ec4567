//! PV labels for GCE persistent disks, as the legacy provider's `GetLabelsForVolume`: a
//! `gcePersistentDisk` PV, or a CSI PV of `pd.csi.storage.gke.io` whose volume handle names a
//! zonal disk (`projects/P/zones/Z/disks/N`), gets its disk's zone and region (`topology.kubernetes.io/zone`,
//! `.../region`). The disk is looked for in the zone the PV's labels already name, else in
//! every managed zone. Regional disks (a zone label `a__b`) are not served by the local cloud
//! and are refused by name.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{
    LABEL_FAILURE_DOMAIN_ZONE, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE,
};
use hypercloud_cloudprovider::PvLabeler;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};

use crate::client::last_segment;
use crate::error::Error;
use crate::instances::region_of_zone;
use crate::Gce;

/// The name dynamic provisioning gives a disk it has not made yet (upstream
/// `cloudvolume.ProvisionedVolumeName`): no labels.
const PROVISIONED_VOLUME_NAME: &str = "placeholder";

/// The CSI driver GCE persistent disks were migrated to.
const PD_CSI_DRIVER: &str = "pd.csi.storage.gke.io";

/// The disk a PV names: its name, and the zone its CSI volume handle names (`Ok(None)` for an
/// in-tree `gcePersistentDisk` source; `Err(handle)` for a regional handle). `None` when the
/// PV is no GCE disk, or its handle is not `projects/P/zones/Z/disks/N` or
/// `projects/P/regions/R/disks/N`.
fn disk_of(spec: &PersistentVolumeSpec) -> Option<(String, Result<Option<String>, String>)> {
    if let Some(pd) = &spec.gce_persistent_disk {
        return Some((pd.pd_name.clone(), Ok(None)));
    }
    let csi = spec.csi.as_ref().filter(|c| c.driver == PD_CSI_DRIVER)?;
    let parts: Vec<&str> = csi.volume_handle.split('/').collect();
    match parts.as_slice() {
        ["projects", _, "zones", zone, "disks", name] => {
            Some(((*name).to_owned(), Ok(Some((*zone).to_owned()))))
        }
        ["projects", _, "regions", _, "disks", name] => {
            Some(((*name).to_owned(), Err(csi.volume_handle.clone())))
        }
        _ => None,
    }
}

#[async_trait]
impl PvLabeler for Gce {
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> hypercloud_cloudprovider::Result<BTreeMap<String, String>> {
        let Some((pd_name, handle_zone)) = pv.spec.as_ref().and_then(disk_of) else {
            return Ok(BTreeMap::new());
        };
        if pd_name == PROVISIONED_VOLUME_NAME {
            return Ok(BTreeMap::new());
        }
        let handle_zone = handle_zone.map_err(|handle| {
            Error::Missing(format!(
                "PV {}: regional persistent disks (volume handle {handle}) are not implemented by hypercloud's gce provider",
                pv.metadata.name.as_deref().unwrap_or_default()
            ))
        })?;
        let labels = pv.metadata.labels.clone().unwrap_or_default();
        let known_zone = handle_zone
            .as_ref()
            .or_else(|| labels.get(LABEL_TOPOLOGY_ZONE))
            .or_else(|| labels.get(LABEL_FAILURE_DOMAIN_ZONE))
            .filter(|z| !z.is_empty());
        if let Some(z) = known_zone.filter(|z| z.contains("__")) {
            return Err(Error::Missing(format!(
                "PV {}: regional persistent disks (zones {z}) are not implemented by hypercloud's gce provider",
                pv.metadata.name.as_deref().unwrap_or_default()
            ))
            .into());
        }
        let r = self.resolved().await?;
        let c = &r.compute;
        let zones: Vec<String> = match known_zone {
            Some(z) => vec![z.clone()],
            None => r.managed_zones.clone(),
        };
        for zone in zones {
            match c
                .get(
                    &c.path(&format!("zones/{zone}/disks/{pd_name}")),
                    "disks.get",
                )
                .await
            {
                Ok(disk) => {
                    let zone = last_segment(disk["zone"].as_str().unwrap_or(&zone)).to_owned();
                    return Ok(BTreeMap::from([
                        (LABEL_TOPOLOGY_REGION.to_owned(), region_of_zone(&zone)?),
                        (LABEL_TOPOLOGY_ZONE.to_owned(), zone),
                    ]));
                }
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(hypercloud_cloudprovider::Error::DiskNotFound)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> PersistentVolumeSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn disks_of_in_tree_and_pd_csi_pvs() {
        assert_eq!(
            disk_of(&spec(
                serde_json::json!({"gcePersistentDisk": {"pdName": "d"}})
            )),
            Some(("d".into(), Ok(None)))
        );
        let csi = |driver: &str, handle: &str| {
            spec(serde_json::json!({"csi": {"driver": driver, "volumeHandle": handle}}))
        };
        assert_eq!(
            disk_of(&csi(PD_CSI_DRIVER, "projects/p/zones/z-a/disks/d")),
            Some(("d".into(), Ok(Some("z-a".into()))))
        );
        assert_eq!(
            disk_of(&csi(PD_CSI_DRIVER, "projects/p/regions/r/disks/d")),
            Some(("d".into(), Err("projects/p/regions/r/disks/d".into())))
        );
        assert_eq!(disk_of(&csi(PD_CSI_DRIVER, "d")), None);
        assert_eq!(
            disk_of(&csi("ebs.csi.aws.com", "projects/p/zones/z/disks/d")),
            None
        );
        assert_eq!(disk_of(&spec(serde_json::json!({}))), None);
    }
}
