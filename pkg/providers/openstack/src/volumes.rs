//! Cinder volumes: which zone and region a volume is in, for the PersistentVolumeLabel
//! admission webhook and PV labelling — the [`PvLabeler`] capability, and the lower-level
//! [`Volumes`] trait it is built on — and creating, deleting and extending them for the
//! in-tree `kubernetes.io/cinder` plugin ([`VolumeProvisioner`]), and attaching them to
//! servers through Nova's `os-volume_attachments` ([`VolumeAttacher`]). Upstream equivalent:
//! the legacy in-tree provider's `GetLabelsForVolume`, `CreateVolume`, `DeleteVolume`,
//! `ExpandVolume`, `AttachDisk`, `DetachDisk`, `DiskIsAttached`, `DisksAreAttached` and
//! `GetAttachmentDiskPath` (`openstack_volumes.go`).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use hypercloud_cloudprovider::wait::{poll_until, Backoff, Poll, WaitError};
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{
    CloudVolume, Error, ProvisionedVolume, PvLabeler, Result, VolumeAttacher, VolumeFilter,
    VolumeProvisioner, VolumeRequest, Zone,
};
use k8s_openapi::api::core::v1::{
    CinderPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
};
use reqwest::Method;
use serde_json::{json, Value};

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

/// The in-tree plugin whose volumes these are.
pub const CINDER_PLUGIN: &str = "kubernetes.io/cinder";
/// Cinder's statuses the provisioner waits on.
const AVAILABLE: &str = "available";
const IN_USE: &str = "in-use";
/// How a created, extended, attached or detached volume is waited for: polls from 50 ms backing
/// off to 2 s, for up to two minutes.
const SETTLE_WAIT: Backoff = Backoff::new(
    Duration::from_millis(50),
    Duration::from_secs(2),
    Duration::from_secs(120),
);

impl OpenStack {
    async fn get_volume(&self, volume_id: &str) -> Result<Option<Value>> {
        match self
            .client
            .request(
                Service::Volume,
                Method::GET,
                &format!("/volumes/{volume_id}"),
                None,
                "get volume",
            )
            .await
        {
            Ok(r) => Ok(Some(r.body["volume"].clone())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Polls the volume until it leaves the transitional statuses (`creating`, `extending`).
    async fn wait_settled(&self, volume_id: &str, operation: &str) -> Result<Value> {
        self.wait_volume(volume_id, operation, |v| {
            v["status"] == AVAILABLE || v["status"] == IN_USE
        })
        .await
    }

    /// The PV labels of a volume in `zone`, as [`PvLabeler`] gives them.
    fn zone_labels(&self, zone: &str) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        if self.config.block_storage.ignore_volume_az {
            return labels;
        }
        if !zone.is_empty() {
            labels.insert(LABEL_TOPOLOGY_ZONE.to_owned(), zone.to_owned());
        }
        let region = self.client.region();
        if !region.is_empty() {
            labels.insert(LABEL_TOPOLOGY_REGION.to_owned(), region.to_owned());
        }
        labels
    }
}

/// The Cinder v3 request body for `request`.
fn create_body(request: &VolumeRequest) -> Value {
    let mut volume = json!({
        "name": request.name,
        "size": request.size_gib,
        "metadata": request.tags,
    });
    if !request.zone.is_empty() {
        volume["availability_zone"] = json!(request.zone);
    }
    if !request.volume_type.is_empty() {
        volume["volume_type"] = json!(request.volume_type);
    }
    json!({ "volume": volume })
}

#[async_trait]
impl VolumeProvisioner for OpenStack {
    fn plugin_name(&self) -> &str {
        CINDER_PLUGIN
    }

    /// Only the in-tree `cinder` source: CSI volumes are the Cinder CSI driver's.
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        pv.spec
            .as_ref()?
            .cinder
            .as_ref()
            .map(|c| c.volume_id.clone())
    }

    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            cinder: Some(CinderPersistentVolumeSource {
                volume_id: volume_id.to_owned(),
                fs_type: fs_type.map(str::to_owned),
                read_only: Some(false),
                secret_ref: None,
            }),
            ..Default::default()
        }
    }

    /// `POST /volumes`, then waits until Cinder reports it `available`; the labels are the
    /// zone Cinder chose (not the one asked for) and the configured region.
    async fn create_volume(&self, request: &VolumeRequest) -> Result<ProvisionedVolume> {
        let reply = self
            .client
            .request(
                Service::Volume,
                Method::POST,
                "/volumes",
                Some(&create_body(request)),
                "create volume",
            )
            .await?;
        let id = reply.body["volume"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if id.is_empty() {
            return Err(self.client.error(
                "create volume",
                None,
                None,
                "the answer names no volume ID".into(),
            ));
        }
        let v = self.wait_settled(&id, "create volume").await?;
        let zone = v["availability_zone"].as_str().unwrap_or_default();
        Ok(ProvisionedVolume {
            labels: self.zone_labels(zone),
            size_gib: v["size"].as_u64().unwrap_or(request.size_gib),
            id,
        })
    }

    /// As upstream: a volume still attached is refused before Cinder is asked; one already
    /// gone counts as deleted.
    async fn delete_volume(&self, volume_id: &str) -> Result<()> {
        let Some(v) = self.get_volume(volume_id).await? else {
            return Ok(());
        };
        if v["attachments"].as_array().is_some_and(|a| !a.is_empty()) {
            return Err(self.client.error(
                "delete volume",
                None,
                None,
                format!("cannot delete the volume {volume_id}, it is still attached to a node"),
            ));
        }
        match self
            .client
            .request(
                Service::Volume,
                Method::DELETE,
                &format!("/volumes/{volume_id}"),
                None,
                "delete volume",
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// As upstream `ExpandVolume`: only an `available` volume is extended (an in-use one is
    /// refused, as the in-tree plugin did); then waits until it is `available` again.
    async fn expand_volume(&self, volume_id: &str, new_size_gib: u64) -> Result<u64> {
        let Some(v) = self.get_volume(volume_id).await? else {
            return Err(Error::DiskNotFound);
        };
        let size = v["size"].as_u64().unwrap_or_default();
        if size >= new_size_gib {
            return Ok(size);
        }
        let status = v["status"].as_str().unwrap_or_default();
        if status != AVAILABLE {
            let message = if status == IN_USE {
                "PVC used by a Pod can not be expanded, please ensure the PVC is not used by any Pod and is fully detached from a node".to_owned()
            } else {
                format!("volume {volume_id} status is {status}, not available")
            };
            return Err(self.client.error("extend volume", None, None, message));
        }
        self.client
            .request(
                Service::Volume,
                Method::POST,
                &format!("/volumes/{volume_id}/action"),
                Some(&json!({"os-extend": {"new_size": new_size_gib}})),
                "extend volume",
            )
            .await?;
        let v = self.wait_settled(volume_id, "extend volume").await?;
        Ok(v["size"].as_u64().unwrap_or(new_size_gib))
    }

    /// By ID: `GET /volumes/{id}`; by name: `GET /volumes/detail?name=` (Cinder filters by
    /// exact name); all: `GET /volumes/detail`, following `volumes_links`.
    async fn find_volumes(&self, filter: VolumeFilter<'_>) -> Result<Vec<CloudVolume>> {
        let list = match filter {
            VolumeFilter::Id(id) => self.get_volume(id).await?.into_iter().collect(),
            VolumeFilter::Name(name) => {
                let path = format!("/volumes/detail?name={}", query_escape(name));
                self.client
                    .list(Service::Volume, &path, "volumes", "list volumes")
                    .await?
                    .into_iter()
                    // Cinder's name filter is exact, but a cloud that ignored it must not
                    // make another volume this one.
                    .filter(|v| v["name"] == name)
                    .collect()
            }
            VolumeFilter::All => {
                self.client
                    .list(
                        Service::Volume,
                        "/volumes/detail",
                        "volumes",
                        "list volumes",
                    )
                    .await?
            }
        };
        Ok(list.iter().map(cloud_volume).collect())
    }
}

/// A Cinder volume as [`CloudVolume`].
fn cloud_volume(v: &Value) -> CloudVolume {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    CloudVolume {
        id: s("id"),
        name: s("name"),
        size_gib: v["size"].as_u64().unwrap_or_default(),
        zone: s("availability_zone"),
        attached_to: attachments(v)
            .into_iter()
            .map(|(server, _)| server)
            .collect(),
    }
}

/// `s` escaped for a URL query value (RFC 3986 unreserved characters kept).
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where a volume is attached: (server ID, device) of each attachment.
fn attachments(v: &Value) -> Vec<(String, String)> {
    v["attachments"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|a| {
                    let s = |k: &str| a[k].as_str().unwrap_or_default().to_owned();
                    (s("server_id"), s("device"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The device of the volume's attachment to `instance_id`, if any.
fn attached_device(v: &Value, instance_id: &str) -> Option<String> {
    attachments(v)
        .into_iter()
        .find(|(server, _)| server == instance_id)
        .map(|(_, device)| device)
}

/// Cinder's statuses of an attach or detach under way.
const ATTACHING: &[&str] = &["reserved", "attaching"];
const DETACHING: &str = "detaching";

impl OpenStack {
    /// Polls the volume until `done` says so, backing off from 50 ms to 2 s; `error*`
    /// statuses and the timeout are errors.
    async fn wait_volume(
        &self,
        volume_id: &str,
        operation: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Result<Value> {
        let done = &done;
        let settled = poll_until(SETTLE_WAIT, || async move {
            let Some(v) = self.get_volume(volume_id).await? else {
                return Err(Error::DiskNotFound);
            };
            if done(&v) {
                return Ok(Poll::Ready(v));
            }
            let status: String = v["status"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(32)
                .collect();
            if status.starts_with("error") {
                return Err(self.client.error(
                    operation,
                    None,
                    None,
                    format!("volume {volume_id} went to status {status}"),
                ));
            }
            Ok(Poll::Pending(status))
        })
        .await;
        match settled {
            Ok(v) => Ok(v),
            Err(WaitError::Failed(e)) => Err(e),
            Err(WaitError::TimedOut(t)) => {
                Err(self
                    .client
                    .error(operation, None, None, format!("volume {volume_id} {t}")))
            }
        }
    }
}

#[async_trait]
impl VolumeAttacher for OpenStack {
    fn plugin_name(&self) -> &str {
        CINDER_PLUGIN
    }

    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        spec.cinder.as_ref().map(|c| c.volume_id.clone())
    }

    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        volume.cinder.as_ref().map(|c| c.volume_id.clone())
    }

    /// As upstream `AttachDisk`: nothing to do when attached to this server already; a
    /// volume attached to another server (and not multiattach) is refused before Nova is
    /// asked; else `POST /servers/{id}/os-volume_attachments` and a wait until Cinder reports
    /// the attachment and `in-use`.
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let Some(v) = self.get_volume(volume_id).await? else {
            return Err(Error::DiskNotFound);
        };
        if attached_device(&v, instance_id).is_some() && v["status"] == IN_USE {
            tracing::debug!(volume_id, instance_id, "disk is already attached");
            return Ok(());
        }
        let multiattach = v["multiattach"].as_bool().unwrap_or(false);
        if let Some((server, device)) = attachments(&v)
            .into_iter()
            .find(|(server, _)| server != instance_id)
            .filter(|_| !multiattach)
        {
            return Err(self.client.error(
                "attach volume",
                None,
                None,
                format!(
                    "disk {volume_id} path {device} is attached to a different instance ({server})"
                ),
            ));
        }
        if attached_device(&v, instance_id).is_none() {
            self.client
                .request(
                    Service::Compute,
                    Method::POST,
                    &format!("/servers/{instance_id}/os-volume_attachments"),
                    Some(&json!({"volumeAttachment": {"volumeId": volume_id}})),
                    "attach volume",
                )
                .await?;
        }
        self.wait_volume(volume_id, "attach volume", |v| {
            v["status"] == IN_USE && attached_device(v, instance_id).is_some()
        })
        .await
        .map(drop)
    }

    /// As upstream `DetachDisk`, but a volume not attached to this server (already detached,
    /// or gone) counts as detached; `DELETE /servers/{id}/os-volume_attachments/{volume}`, then
    /// a wait until Cinder no longer lists the attachment.
    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let Some(v) = self.get_volume(volume_id).await? else {
            return Ok(());
        };
        if attached_device(&v, instance_id).is_none() {
            tracing::debug!(
                volume_id,
                instance_id,
                "disk is not attached to the instance"
            );
            return Ok(());
        }
        let status = v["status"].as_str().unwrap_or_default();
        if status != IN_USE && status != DETACHING {
            return Err(self.client.error(
                "detach volume",
                None,
                None,
                format!("can not detach volume {volume_id}, its status is {status}"),
            ));
        }
        if status == IN_USE {
            match self
                .client
                .request(
                    Service::Compute,
                    Method::DELETE,
                    &format!("/servers/{instance_id}/os-volume_attachments/{volume_id}"),
                    None,
                    "detach volume",
                )
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        match self
            .wait_volume(volume_id, "detach volume", |v| {
                v["status"] != DETACHING && attached_device(v, instance_id).is_none()
            })
            .await
        {
            Ok(_) | Err(Error::DiskNotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> Result<bool> {
        Ok(self.get_volume(volume_id).await?.is_some_and(|v| {
            attached_device(&v, instance_id).is_some()
                && !ATTACHING.contains(&v["status"].as_str().unwrap_or_default())
        }))
    }

    /// As upstream `GetAttachmentDiskPath`: the device Cinder records for the attachment to
    /// this server (the guest may name it otherwise; see the trait).
    async fn get_attachment_disk_path(&self, instance_id: &str, volume_id: &str) -> Result<String> {
        let Some(v) = self.get_volume(volume_id).await? else {
            return Err(Error::DiskNotFound);
        };
        let status = v["status"].as_str().unwrap_or_default();
        if status != IN_USE {
            return Err(self.client.error(
                "get attachment disk path",
                None,
                None,
                format!("can not get device path of volume {volume_id}, its status is {status}"),
            ));
        }
        match attached_device(&v, instance_id) {
            Some(device) if !device.is_empty() => Ok(device),
            Some(_) => Err(self.client.error(
                "get attachment disk path",
                None,
                None,
                format!("volume {volume_id} has no device path on {instance_id}"),
            )),
            None => Err(self.client.error(
                "get attachment disk path",
                None,
                None,
                format!("disk {volume_id} is attached to a different compute, should be detached before proceeding"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_body_leaves_out_empty_zone_and_type() {
        let mut r = VolumeRequest {
            name: "kubernetes-dynamic-pvc-u1".into(),
            size_gib: 3,
            tags: [(
                "kubernetes.io/created-for/pvc/name".to_owned(),
                "data".to_owned(),
            )]
            .into(),
            ..Default::default()
        };
        let b = create_body(&r);
        assert_eq!(b["volume"]["size"], 3);
        assert!(b["volume"].get("availability_zone").is_none());
        assert!(b["volume"].get("volume_type").is_none());
        assert_eq!(
            b["volume"]["metadata"]["kubernetes.io/created-for/pvc/name"],
            "data"
        );
        r.zone = "nova".into();
        r.volume_type = "lvmdriver-1".into();
        let b = create_body(&r);
        assert_eq!(b["volume"]["availability_zone"], "nova");
        assert_eq!(b["volume"]["volume_type"], "lvmdriver-1");
    }
}
