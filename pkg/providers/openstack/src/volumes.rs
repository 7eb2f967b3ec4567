//! Cinder volumes: which zone and region a volume is in, for the PersistentVolumeLabel
//! admission webhook and PV labelling — the [`PvLabeler`] capability, and the lower-level
//! [`Volumes`] trait it is built on. Upstream equivalent: the legacy in-tree provider's
//! `GetLabelsForVolume` (`openstack_volumes.go`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{Error, PvLabeler, Result, Zone};
use k8s_openapi::api::core::v1::PersistentVolume;
use reqwest::Method;

use crate::client::{is_not_found, Service};
use crate::OpenStack;

/// Volume look-ups a provider may offer besides the upstream interface.
#[async_trait]
pub trait Volumes: Send + Sync {
    /// The availability zone and region of a volume; [`Error::DiskNotFound`] when it does not
    /// exist.
    async fn volume_zone(&self, volume_id: &str) -> Result<Zone>;
}

#[async_trait]
impl Volumes for OpenStack {
    async fn volume_zone(&self, volume_id: &str) -> Result<Zone> {
        let reply = self
            .client
            .request(
                Service::Volume,
                Method::GET,
                &format!("/volumes/{volume_id}"),
                None,
                "get volume",
            )
            .await;
        let body = match reply {
            Ok(r) => r.body,
            Err(e) if is_not_found(&e) => return Err(Error::DiskNotFound),
            Err(e) => return Err(e),
        };
        let zone = body["volume"]["availability_zone"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(Zone {
            failure_domain: zone,
            region: self.client.region().to_owned(),
        })
    }
}

/// A PV's Cinder volume ID: in-tree `cinder` source or the Cinder CSI driver's handle.
fn cinder_volume_id(pv: &PersistentVolume) -> Option<&str> {
    let spec = pv.spec.as_ref()?;
    if let Some(c) = &spec.cinder {
        return Some(c.volume_id.as_str());
    }
    spec.csi
        .as_ref()
        .filter(|c| c.driver == CINDER_CSI_DRIVER)
        .map(|c| c.volume_handle.as_str())
}

/// The Cinder CSI driver's name.
pub const CINDER_CSI_DRIVER: &str = "cinder.csi.openstack.org";
/// The volume ID of PVs still being provisioned (upstream `ProvisionedVolumeName`).
const PROVISIONING_PLACEHOLDER: &str = "placeholder-for-provisioning";

#[async_trait]
impl PvLabeler for OpenStack {
    /// As upstream `GetLabelsForVolume`: nothing for PVs that are not Cinder volumes, are
    /// still provisioning, or with `[BlockStorage] ignore-volume-az`; else the volume's zone
    /// and the configured region.
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<BTreeMap<String, String>> {
        let mut labels = BTreeMap::new();
        let Some(id) = cinder_volume_id(pv) else {
            return Ok(labels);
        };
        if id == PROVISIONING_PLACEHOLDER || self.config.block_storage.ignore_volume_az {
            return Ok(labels);
        }
        let zone = self.volume_zone(id).await?;
        if !zone.failure_domain.is_empty() {
            labels.insert(LABEL_TOPOLOGY_ZONE.to_owned(), zone.failure_domain);
        }
        if !zone.region.is_empty() {
            labels.insert(LABEL_TOPOLOGY_REGION.to_owned(), zone.region);
        }
        Ok(labels)
    }
}
