//! GCE persistent disks for the in-tree `kubernetes.io/gce-pd` plugin: creating, resizing and
//! deleting zonal disks ([`VolumeProvisioner`]) and attaching them to instances
//! ([`VolumeAttacher`]), each change waited for through its Operation, as the legacy provider's
//! `CreateDisk`, `ResizeDisk`, `DeleteDisk`, `AttachDisk`, `DetachDisk`, `DiskIsAttached` and
//! `DisksAreAttached` (`legacy-cloud-providers/gce/gce_disks.go`) with the StorageClass
//! parameters of `pkg/volume/gcepd` ([`pd_parameters`]). A disk's volume ID is its name, and
//! its device name on an instance is its name too, as upstream. Regional disks are refused by
//! name: the provider (and the local cloud's dialect) has none.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{
    ClassParameters, CloudVolume, ProvisionedVolume, Result as CloudResult, VolumeAttacher,
    VolumeFilter, VolumeProvisioner, VolumeRequest,
};
use k8s_openapi::api::core::v1::{
    GCEPersistentDiskVolumeSource, PersistentVolume, PersistentVolumeSpec,
};
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::last_segment;
use crate::error::{Error, Result};
use crate::instances::region_of_zone;
use crate::Gce;

/// The in-tree plugin (StorageClass `provisioner`) these disks serve.
pub const GCE_PD_PLUGIN: &str = "kubernetes.io/gce-pd";

/// Disk types a StorageClass may ask for; the first is the default.
const DISK_TYPES: &[&str] = &["pd-standard", "pd-ssd", "pd-balanced"];

/// The StorageClass parameters of `kubernetes.io/gce-pd`, as `pkg/volume/gcepd` reads them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PdParameters {
    /// `type`: `pd-standard`, `pd-ssd` or `pd-balanced`; empty: `pd-standard`.
    pub disk_type: String,
    /// `zone`: the one zone to create the disk in.
    pub zone: Option<String>,
    /// `zones`: the zones to choose from (by the claim's name).
    pub zones: BTreeSet<String>,
    /// `fsType`.
    pub fs_type: Option<String>,
}

/// Parses a `kubernetes.io/gce-pd` StorageClass's parameters (keys case-insensitive): an
/// unknown key, a disk type GCE lacks, `zone` with `zones`, an empty zone in `zones` and a
/// `replication-type` other than `none` are refused by name (`regional-pd` because the
/// provider makes no regional disks).
pub fn pd_parameters(parameters: &BTreeMap<String, String>) -> Result<PdParameters> {
    let mut p = PdParameters::default();
    for (k, v) in parameters {
        match k.to_ascii_lowercase().as_str() {
            "type" => {
                disk_type(v)?;
                p.disk_type = v.clone();
            }
            "zone" => p.zone = Some(v.trim().to_owned()),
            "zones" => {
                for z in v.split(',').map(str::trim) {
                    if z.is_empty() {
                        return Err(Error::PdParameters(format!(
                            "comma separated list of zones ({v:?}) must not contain an empty zone"
                        )));
                    }
                    p.zones.insert(z.to_owned());
                }
            }
            "replication-type" => match v.to_ascii_lowercase().as_str() {
                "none" => {}
                "regional-pd" => {
                    return Err(Error::PdParameters(
                        "replication-type regional-pd: regional persistent disks are not implemented by hypercloud's gce provider".into(),
                    ))
                }
                other => {
                    return Err(Error::PdParameters(format!(
                        "replication-type of {other:?} is not supported"
                    )))
                }
            },
            "fstype" => p.fs_type = Some(v.clone()).filter(|f| !f.is_empty()),
            _ => {
                return Err(Error::PdParameters(format!(
                    "invalid option {k:?} for volume plugin {GCE_PD_PLUGIN}"
                )))
            }
        }
    }
    if p.zone.is_some() && !p.zones.is_empty() {
        return Err(Error::PdParameters(
            "both zone and zones StorageClass parameters must not be used at the same time".into(),
        ));
    }
    Ok(p)
}

/// The disk type to create: `pd-standard` when none is asked for (upstream `getDiskType`).
fn disk_type(asked: &str) -> Result<&str> {
    if asked.is_empty() {
        return Ok(DISK_TYPES[0]);
    }
    DISK_TYPES
        .iter()
        .find(|t| **t == asked)
        .copied()
        .ok_or_else(|| Error::PdParameters(format!("invalid GCE disk type {asked:?}")))
}

/// The `disks.insert` body for `request` in `zone`: the tags as JSON in the description, as
/// upstream (GCE disks had no labels when the plugin was written).
fn insert_body(request: &VolumeRequest, zone_url: &str) -> Result<Value> {
    let description = if request.tags.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&request.tags).unwrap_or_default()
    };
    Ok(json!({
        "name": request.name,
        "sizeGb": request.size_gib.to_string(),
        "description": description,
        "type": format!("{zone_url}/diskTypes/{}", disk_type(&request.volume_type)?),
    }))
}

/// The longest GCE resource name.
const MAX_NAME_LEN: usize = 63;

/// Whether `name` is a GCE resource name: `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`.
fn is_resource_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_LEN
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// The disk name of a requested volume name. A GCE resource name is kept (the in-tree
/// provisioner's always are); any other (a CSI `CreateVolume` name may be 128 characters of
/// any case) is lower-cased, its other characters made `-`, prefixed `d-` unless it starts
/// with a letter, and cut to leave room for `-` and 16 hex digits of a hash (FNV-1a, 64 bits)
/// of the whole name as asked, so that the same name always gives the same disk and two
/// names that differ only where they were cut or in case do not meet.
pub fn disk_name(name: &str) -> String {
    if is_resource_name(name) {
        return name.to_owned();
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let mut base: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .collect();
    if !base.starts_with(|c: char| c.is_ascii_lowercase()) {
        base.insert_str(0, "d-");
    }
    base.truncate(MAX_NAME_LEN - 17);
    format!("{}-{hash:016x}", base.trim_end_matches('-'))
}

/// A disk's size in GiB (`sizeGb` is an int64 as a JSON string).
fn size_gb(disk: &Value) -> u64 {
    match &disk["sizeGb"] {
        Value::String(s) => s.parse().unwrap_or_default(),
        v => v.as_u64().unwrap_or_default(),
    }
}

/// The device names of an instance's disks.
fn device_names(instance: &Value) -> Vec<&str> {
    instance["disks"]
        .as_array()
        .map(|d| d.iter().filter_map(|x| x["deviceName"].as_str()).collect())
        .unwrap_or_default()
}

/// A disk as [`CloudVolume`]: its name is its ID; `users` (instance URLs) as the instance
/// names the attacher takes.
fn cloud_volume(disk: &Value) -> CloudVolume {
    let name = disk["name"].as_str().unwrap_or_default().to_owned();
    CloudVolume {
        id: name.clone(),
        name,
        size_gib: size_gb(disk),
        zone: last_segment(disk["zone"].as_str().unwrap_or_default()).to_owned(),
        attached_to: disk["users"]
            .as_array()
            .map(|u| {
                u.iter()
                    .filter_map(Value::as_str)
                    .map(|i| last_segment(i).to_owned())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

impl Gce {
    /// The disk `name` in `zone`; `None` when GCE says there is none.
    async fn find_disk(&self, name: &str, zone: &str) -> Result<Option<Value>> {
        let c = &self.resolved().await?.compute;
        match c
            .get(&c.path(&format!("zones/{zone}/disks/{name}")), "disks.get")
            .await
        {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The disk `name` in any managed zone (upstream `GetDiskByNameUnknownZone`): `None` when
    /// there is none; a name found in two zones is an error, as upstream.
    async fn disk_in_any_zone(&self, name: &str) -> Result<Option<Value>> {
        let zones = self.resolved().await?.managed_zones.clone();
        let mut found = None;
        for zone in zones {
            if let Some(d) = self.find_disk(name, &zone).await? {
                if found.is_some() {
                    return Err(Error::DiskInSeveralZones(name.to_owned()));
                }
                found = Some(d);
            }
        }
        Ok(found)
    }

    /// The PV labels of a disk in `zone`: zone and region.
    fn disk_labels(zone: &str) -> Result<BTreeMap<String, String>> {
        Ok(BTreeMap::from([
            (LABEL_TOPOLOGY_REGION.to_owned(), region_of_zone(zone)?),
            (LABEL_TOPOLOGY_ZONE.to_owned(), zone.to_owned()),
        ]))
    }
}

#[async_trait]
impl VolumeProvisioner for Gce {
    fn plugin_name(&self) -> &str {
        GCE_PD_PLUGIN
    }

    /// Only the in-tree `gcePersistentDisk` source: CSI volumes are the PD CSI driver's.
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        pv.spec
            .as_ref()?
            .gce_persistent_disk
            .as_ref()
            .map(|d| d.pd_name.clone())
    }

    /// GCE resource names: at most 63 characters (upstream `gce_util.go` cuts its names so).
    fn max_volume_name_len(&self) -> usize {
        63
    }

    /// [`pd_parameters`], as the claim's event shows it.
    fn class_parameters(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> std::result::Result<ClassParameters, String> {
        let p = pd_parameters(parameters).map_err(|e| e.to_string())?;
        Ok(ClassParameters {
            volume_type: p.disk_type,
            zone: p.zone.unwrap_or_default(),
            zones: p.zones.into_iter().collect(),
            fs_type: p.fs_type,
            ..Default::default()
        })
    }

    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
                pd_name: volume_id.to_owned(),
                fs_type: fs_type.map(str::to_owned),
                partition: None,
                read_only: Some(false),
            }),
            ..Default::default()
        }
    }

    /// As upstream `CreateDisk`: the zone must be a managed one (upstream: one with nodes);
    /// no zone asked for is the local zone. `disks.insert`, then its Operation is waited for;
    /// a disk of that name already there is reused, as upstream.
    async fn create_volume(&self, request: &VolumeRequest) -> CloudResult<ProvisionedVolume> {
        let r = self.resolved().await?;
        let zone = if request.zone.is_empty() {
            r.local_zone.clone()
        } else {
            request.zone.clone()
        };
        if !r.managed_zones.contains(&zone) {
            return Err(Error::CreateDisk {
                disk: request.name.clone(),
                reason: format!(
                    "zone {zone:?} is not one of the managed zones ({})",
                    r.managed_zones.join(",")
                ),
            }
            .into());
        }
        let c = &r.compute;
        let name = disk_name(&request.name);
        let request = &VolumeRequest {
            name,
            ..request.clone()
        };
        let body = insert_body(request, &c.url(&c.path(&format!("zones/{zone}"))))?;
        match c
            .mutate(
                Method::POST,
                &c.path(&format!("zones/{zone}/disks")),
                Some(&body),
                "disks.insert",
            )
            .await
        {
            Ok(()) => {}
            Err(e) if e.has_reason("alreadyExists") => {
                tracing::warn!(disk = %request.name, %zone, "GCE PD already exists, reusing");
            }
            Err(e) => return Err(e.into()),
        }
        let disk = self
            .find_disk(&request.name, &zone)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::DiskNotFound)?;
        let zone = last_segment(disk["zone"].as_str().unwrap_or(&zone)).to_owned();
        Ok(ProvisionedVolume {
            id: request.name.clone(),
            size_gib: size_gb(&disk),
            labels: Self::disk_labels(&zone)?,
        })
    }

    /// As upstream `DeleteDisk`: a disk in no managed zone is deleted already; GCE's
    /// `resourceInUseByAnotherResource` becomes [`Error::DeleteDiskInUse`].
    async fn delete_volume(&self, volume_id: &str) -> CloudResult<()> {
        let Some(disk) = self.disk_in_any_zone(volume_id).await? else {
            return Ok(());
        };
        let zone = last_segment(disk["zone"].as_str().unwrap_or_default()).to_owned();
        let c = &self.resolved().await?.compute;
        match c
            .mutate(
                Method::DELETE,
                &c.path(&format!("zones/{zone}/disks/{volume_id}")),
                None,
                "disks.delete",
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(Error::Api {
                reason, message, ..
            }) if reason == "resourceInUseByAnotherResource" => Err(Error::DeleteDiskInUse {
                disk: volume_id.to_owned(),
                message,
            }
            .into()),
            Err(e) => Err(e.into()),
        }
    }

    /// As upstream `ResizeDisk`: a disk already that large is left alone; else
    /// `disks.resize` (GCE grows attached disks too) and its Operation is waited for.
    async fn expand_volume(&self, volume_id: &str, new_size_gib: u64) -> CloudResult<u64> {
        let disk = self
            .disk_in_any_zone(volume_id)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::DiskNotFound)?;
        let size = size_gb(&disk);
        if size >= new_size_gib {
            return Ok(size);
        }
        let zone = last_segment(disk["zone"].as_str().unwrap_or_default()).to_owned();
        let c = &self.resolved().await?.compute;
        c.mutate(
            Method::POST,
            &c.path(&format!("zones/{zone}/disks/{volume_id}/resize")),
            Some(&json!({"sizeGb": new_size_gib.to_string()})),
            "disks.resize",
        )
        .await?;
        Ok(new_size_gib)
    }

    /// A disk's ID is its name (`disk_name` of the name asked for), so by ID and by name
    /// are one look-up: `disks.get` in each managed zone (one request per zone; a name in
    /// two zones gives both). Every disk:
    /// `disks.list` in each managed zone (one request per zone and page of 500; the local
    /// cloud's dialect has no `aggregated/disks`).
    async fn find_volumes(&self, filter: VolumeFilter<'_>) -> CloudResult<Vec<CloudVolume>> {
        let r = self.resolved().await?;
        let mut out = Vec::new();
        for zone in &r.managed_zones {
            match filter {
                VolumeFilter::Id(name) => {
                    // Not a GCE resource name: no disk has it (and it must not reach a path).
                    if !is_resource_name(name) {
                        return Ok(Vec::new());
                    }
                    if let Some(d) = self.find_disk(name, zone).await? {
                        out.push(cloud_volume(&d));
                    }
                }
                VolumeFilter::Name(name) => {
                    if let Some(d) = self.find_disk(&disk_name(name), zone).await? {
                        out.push(cloud_volume(&d));
                    }
                }
                VolumeFilter::All => {
                    let c = &r.compute;
                    out.extend(
                        c.list(&c.path(&format!("zones/{zone}/disks")), "", "disks.list")
                            .await?
                            .iter()
                            .map(cloud_volume),
                    );
                }
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl VolumeAttacher for Gce {
    fn plugin_name(&self) -> &str {
        GCE_PD_PLUGIN
    }

    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        spec.gce_persistent_disk.as_ref().map(|d| d.pd_name.clone())
    }

    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        volume
            .gce_persistent_disk
            .as_ref()
            .map(|d| d.pd_name.clone())
    }

    /// As upstream `AttachDisk`, read-write: the instance is looked for by name in the managed
    /// zones and the disk in the instance's zone; nothing to do when the instance already has
    /// a device of the disk's name; a disk another instance uses is refused before GCE is
    /// asked; else `instances.attachDisk` (device name = disk name) and its Operation.
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        let instance = self
            .instance_by_name(instance_id)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)?;
        if device_names(&instance).contains(&volume_id) {
            tracing::debug!(volume_id, instance_id, "disk is already attached");
            return Ok(());
        }
        let zone = last_segment(instance["zone"].as_str().unwrap_or_default()).to_owned();
        let name = instance["name"].as_str().unwrap_or(instance_id).to_owned();
        let disk = self
            .find_disk(volume_id, &zone)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::DiskNotFound)?;
        if let Some(other) = disk["users"]
            .as_array()
            .and_then(|u| u.iter().filter_map(Value::as_str).next())
        {
            return Err(Error::AttachDisk {
                disk: volume_id.to_owned(),
                instance: name,
                other: last_segment(other).to_owned(),
            }
            .into());
        }
        let c = &self.resolved().await?.compute;
        let body = json!({
            "kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE",
            "source": c.url(&c.path(&format!("zones/{zone}/disks/{volume_id}"))),
            "deviceName": volume_id,
        });
        c.mutate(
            Method::POST,
            &c.path(&format!("zones/{zone}/instances/{name}/attachDisk")),
            Some(&body),
            "instances.attachDisk",
        )
        .await?;
        Ok(())
    }

    /// As upstream `DetachDisk`: an instance that is gone, or has no device of the disk's
    /// name, has nothing to detach; else `instances.detachDisk` and its Operation.
    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        let Some(instance) = self.instance_by_name(instance_id).await? else {
            tracing::warn!(
                instance_id,
                volume_id,
                "instance does not exist; assuming the disk is not attached to it"
            );
            return Ok(());
        };
        if !device_names(&instance).contains(&volume_id) {
            return Ok(());
        }
        let zone = last_segment(instance["zone"].as_str().unwrap_or_default()).to_owned();
        let name = instance["name"].as_str().unwrap_or(instance_id).to_owned();
        let c = &self.resolved().await?.compute;
        c.mutate_query(
            Method::POST,
            &c.path(&format!("zones/{zone}/instances/{name}/detachDisk")),
            &[("deviceName", volume_id)],
            None,
            "instances.detachDisk",
        )
        .await?;
        Ok(())
    }

    /// As upstream `DiskIsAttached`: whether the instance has a device of the disk's name; a
    /// gone instance has none.
    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> CloudResult<bool> {
        Ok(self
            .instance_by_name(instance_id)
            .await?
            .is_some_and(|i| device_names(&i).contains(&volume_id)))
    }

    /// As upstream `DisksAreAttached`, with one instance read; when that read fails every disk
    /// counts as attached (the trait's rule: an error never makes a caller forget one).
    async fn disks_are_attached(
        &self,
        instance_id: &str,
        volume_ids: &[String],
    ) -> CloudResult<BTreeMap<String, bool>> {
        // `None`: the instance could not be read, and every disk counts as attached.
        let names: Option<BTreeSet<String>> = match self.instance_by_name(instance_id).await {
            Ok(Some(i)) => Some(device_names(&i).into_iter().map(str::to_owned).collect()),
            Ok(None) => Some(BTreeSet::new()),
            Err(error) => {
                tracing::warn!(instance_id, %error, "reading the instance failed; assuming its disks are attached");
                None
            }
        };
        Ok(volume_ids
            .iter()
            .map(|v| (v.clone(), names.as_ref().is_none_or(|n| n.contains(v))))
            .collect())
    }

    /// The path the guest's udev gives a GCE disk: `/dev/disk/by-id/google-<device name>`
    /// (upstream's gcepd attacher looks there); an error when it is not attached there.
    async fn get_attachment_disk_path(
        &self,
        instance_id: &str,
        volume_id: &str,
    ) -> CloudResult<String> {
        if self.disk_is_attached(instance_id, volume_id).await? {
            Ok(format!("/dev/disk/by-id/google-{volume_id}"))
        } else {
            Err(Error::DiskPath {
                disk: volume_id.to_owned(),
                instance: instance_id.to_owned(),
            }
            .into())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parameters_as_the_gcepd_plugin_reads_them() {
        let p = pd_parameters(&params(&[
            ("Type", "pd-ssd"),
            ("zones", "z-a, z-b"),
            ("replication-type", "None"),
            ("fsType", "xfs"),
        ]))
        .unwrap();
        assert_eq!(p.disk_type, "pd-ssd");
        assert_eq!(p.zones, BTreeSet::from(["z-a".into(), "z-b".into()]));
        assert_eq!(p.zone, None);
        assert_eq!(p.fs_type.as_deref(), Some("xfs"));
        assert_eq!(
            pd_parameters(&params(&[("zone", "z-a")])).unwrap().zone,
            Some("z-a".into())
        );
        assert_eq!(
            pd_parameters(&BTreeMap::new()).unwrap(),
            PdParameters::default()
        );
    }

    #[test]
    fn parameters_refused_by_name() {
        for (kv, words) in [
            (vec![("iopsPerGB", "5")], "invalid option \"iopsPerGB\""),
            (
                vec![("type", "pd-extreme")],
                "invalid GCE disk type \"pd-extreme\"",
            ),
            (vec![("replication-type", "regional-pd")], "regional-pd"),
            (
                vec![("replication-type", "mirror")],
                "\"mirror\" is not supported",
            ),
            (vec![("zone", "a"), ("zones", "b")], "at the same time"),
            (vec![("zones", "a,,b")], "must not contain an empty zone"),
        ] {
            let e = pd_parameters(&params(&kv)).unwrap_err().to_string();
            assert!(e.contains(words), "{kv:?}: {e}");
        }
    }

    #[test]
    fn insert_bodies_carry_type_size_and_tags() {
        let mut request = VolumeRequest {
            name: "pvc-1".into(),
            size_gib: 3,
            ..Default::default()
        };
        let b = insert_body(&request, "https://x/projects/p/zones/z").unwrap();
        assert_eq!(b["sizeGb"], "3");
        assert_eq!(
            b["type"],
            "https://x/projects/p/zones/z/diskTypes/pd-standard"
        );
        assert_eq!(b["description"], "");
        request.volume_type = "pd-balanced".into();
        request
            .tags
            .insert("kubernetes.io/created-for/pvc/name".into(), "c".into());
        let b = insert_body(&request, "https://x/projects/p/zones/z").unwrap();
        assert_eq!(
            b["type"],
            "https://x/projects/p/zones/z/diskTypes/pd-balanced"
        );
        assert_eq!(
            b["description"],
            r#"{"kubernetes.io/created-for/pvc/name":"c"}"#
        );
        request.volume_type = "fast".into();
        assert!(insert_body(&request, "z").is_err());
    }

    #[test]
    fn disk_names_are_gce_resource_names() {
        assert_eq!(
            disk_name("kubernetes-dynamic-pvc-1"),
            "kubernetes-dynamic-pvc-1"
        );
        let a = disk_name("sanity-Node-Stage-F9B52D84");
        assert!(is_resource_name(&a), "{a}");
        assert!(a.starts_with("sanity-node-stage-f9b52d84-"), "{a}");
        assert_ne!(a, disk_name("sanity-node-stage-f9b52d84"));
        assert_eq!(a, disk_name("sanity-Node-Stage-F9B52D84"));
        let long = "X".repeat(128);
        let b = disk_name(&long);
        assert!(is_resource_name(&b) && b.starts_with("xxx"), "{b}");
        assert!(disk_name("1-Vol").starts_with("d-1-vol-"));
        assert_ne!(b, disk_name(&"X".repeat(127)));
        for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(64)] {
            assert!(!is_resource_name(bad), "{bad}");
        }
    }

    #[test]
    fn sizes_and_device_names_are_read() {
        assert_eq!(size_gb(&json!({"sizeGb": "12"})), 12);
        assert_eq!(size_gb(&json!({"sizeGb": 7})), 7);
        assert_eq!(size_gb(&json!({})), 0);
        let i = json!({"disks": [{"deviceName": "a"}, {"deviceName": "b"}]});
        assert_eq!(device_names(&i), ["a", "b"]);
        assert!(device_names(&json!({"disks": []})).is_empty());
    }
}
