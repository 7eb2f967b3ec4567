//! PV labels for GCE persistent disks, as the legacy provider's `GetLabelsForVolume`: a
//! `gcePersistentDisk` PV gets its disk's zone and region (`topology.kubernetes.io/zone`,
//! `.../region`). The disk is looked for in the zone the PV's labels already name, else in
//! every managed zone. Regional disks (a zone label `a__b`) are not served by the local cloud
//! and are refused by name.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{
    LABEL_FAILURE_DOMAIN_ZONE, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE,
};
use hypercloud_cloudprovider::PvLabeler;
use k8s_openapi::api::core::v1::PersistentVolume;

use crate::client::last_segment;
use crate::error::Error;
use crate::instances::region_of_zone;
use crate::Gce;

/// The name dynamic provisioning gives a disk it has not made yet (upstream
/// `cloudvolume.ProvisionedVolumeName`): no labels.
const PROVISIONED_VOLUME_NAME: &str = "placeholder";

#[async_trait]
impl PvLabeler for Gce {
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> hypercloud_cloudprovider::Result<BTreeMap<String, String>> {
        let Some(pd) = pv
            .spec
            .as_ref()
            .and_then(|s| s.gce_persistent_disk.as_ref())
        else {
            return Ok(BTreeMap::new());
        };
        if pd.pd_name == PROVISIONED_VOLUME_NAME {
            return Ok(BTreeMap::new());
        }
        let labels = pv.metadata.labels.clone().unwrap_or_default();
        let known_zone = labels
            .get(LABEL_TOPOLOGY_ZONE)
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
                    &c.path(&format!("zones/{zone}/disks/{}", pd.pd_name)),
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
