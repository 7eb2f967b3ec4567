//! Azure managed disks for the in-tree `kubernetes.io/azure-disk` plugin (`vmType: standard`):
//! creating, growing and deleting them ([`VolumeProvisioner`], upstream
//! `azure_managedDiskController.go` with the StorageClass parameters of `pkg/volume/azure_dd`,
//! read by [`disk_parameters`]), their PVs' zone and region labels ([`PvLabeler`],
//! `GetLabelsForVolume`), and attaching them to VMs by LUN (`attach`: upstream
//! `azure_controller_common.go` and `azure_controller_standard.go`). A disk's volume ID is its
//! resource ID (the PV's `diskURI`, [`DiskUri`]); a disk is made in the config's
//! `resourceGroup` (or the class's `resourceGroup`), `Empty`, in zone `n` when the volume's zone
//! is `<location>-<n>`, else in no zone. Unmanaged (blob) disks, shared disks, disk encryption
//! sets and the write accelerator are refused by name.

mod attach;
mod parameters;

pub use attach::DISK_BY_LUN_PREFIX;
pub use parameters::{disk_parameters, DiskParameters};
use parameters::{request_options, sku};

use std::collections::BTreeMap;

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{
    ClassParameters, CloudVolume, ProviderError as _, ProvisionedVolume, PvLabeler,
    Result as CloudResult, VolumeFilter, VolumeProvisioner, VolumeRequest,
};
use k8s_openapi::api::core::v1::{AzureDiskVolumeSource, PersistentVolume, PersistentVolumeSpec};
use serde_json::json;

use crate::error::{Error, Result};
use crate::models::{name_of, Disk};
use crate::Azure;

/// The in-tree plugin (StorageClass `provisioner`) these disks serve.
pub const AZURE_DISK_PLUGIN: &str = "kubernetes.io/azure-disk";

/// The CSI driver azure disks were migrated to: its PVs' `volumeHandle` is the disk URI.
const AZURE_DISK_CSI_DRIVER: &str = "disk.csi.azure.com";

/// The resource type of managed disks.
const DISKS: &str = "Microsoft.Compute/disks";

/// The caching mode every disk is attached with (upstream's default; see
/// [`disk_parameters`]).
const DEFAULT_CACHING: &str = "ReadOnly";

/// The disk kind of every volume here.
const MANAGED: &str = "Managed";

/// The name dynamic provisioning gives a PV whose disk is not made yet (upstream
/// `cloudvolume.ProvisionedVolumeName`): no labels.
const PROVISIONED_VOLUME_NAME: &str = "placeholder";

/// The tag every disk made here carries, as upstream's.
const CREATED_BY: (&str, &str) = ("created-by", "kubernetes-azure-dd");

/// An UltraSSD_LRS disk's default IOPS and MBps, as upstream's.
const ULTRA_DEFAULT_IOPS: &str = "500";
const ULTRA_DEFAULT_MBPS: &str = "100";

/// A managed disk's resource ID (`/subscriptions/<s>/resourceGroups/<g>/providers/Microsoft.Compute/disks/<name>`),
/// the volume ID and a PV's `diskURI`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskUri {
    /// The subscription.
    pub subscription: String,
    /// The resource group.
    pub resource_group: String,
    /// The disk's name.
    pub name: String,
}

/// Parses a disk URI as upstream does (exactly nine `/`-segments, `resourceGroups` fourth;
/// the fixed words in any case); anything else is [`Error::DiskUri`].
pub fn parse_disk_uri(uri: &str) -> Result<DiskUri> {
    let parts: Vec<&str> = uri.split('/').collect();
    match parts.as_slice() {
        ["", subs, sub, groups, group, providers, ns, disks, name]
            if subs.eq_ignore_ascii_case("subscriptions")
                && groups.eq_ignore_ascii_case("resourceGroups")
                && providers.eq_ignore_ascii_case("providers")
                && ns.eq_ignore_ascii_case("Microsoft.Compute")
                && disks.eq_ignore_ascii_case("disks")
                && !sub.is_empty()
                && !group.is_empty()
                && !name.is_empty() =>
        {
            Ok(DiskUri {
                subscription: (*sub).to_owned(),
                resource_group: (*group).to_owned(),
                name: (*name).to_owned(),
            })
        }
        _ => Err(Error::DiskUri(uri.to_owned())),
    }
}

/// The zone number of `<location>-<n>` (upstream `GetZoneID`); `None` for anything else (a
/// fault domain such as `0`, another location's zone).
fn zone_number<'a>(zone: &'a str, location: &str) -> Option<&'a str> {
    let (head, n) = zone.split_at_checked(location.len())?;
    let n = n.strip_prefix('-')?;
    (head.eq_ignore_ascii_case(location) && !n.is_empty()).then_some(n)
}

/// The labels of a disk: its region (the cloud's location, lower-cased as the nodes' region
/// labels are), and for a zoned disk its zone `<location>-<n>`. The GA keys, as every labeler
/// here gives them (upstream v1.20 gave the beta `failure-domain` keys; nodes carry both).
fn disk_labels(disk: &Disk, location: &str) -> BTreeMap<String, String> {
    let region = location.to_lowercase();
    let mut labels = BTreeMap::new();
    if let Some(z) = disk.zones.first() {
        labels.insert(LABEL_TOPOLOGY_ZONE.to_owned(), format!("{region}-{z}"));
    }
    labels.insert(LABEL_TOPOLOGY_REGION.to_owned(), region);
    labels
}

fn disk_size(disk: &Disk) -> u64 {
    disk.properties
        .disk_size_gb
        .and_then(|s| u64::try_from(s).ok())
        .unwrap_or_default()
}

/// The disk's tags: `created-by`, the class's `tags`, then the provisioner's (`/` made `-`,
/// as Azure refuses `/` in tag names: `kubernetes.io-created-for-pvc-name`).
fn disk_tags(
    request: &BTreeMap<String, String>,
    custom: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::from([(CREATED_BY.0.to_owned(), CREATED_BY.1.to_owned())]);
    tags.extend(custom.iter().map(|(k, v)| (k.clone(), v.clone())));
    tags.extend(
        request
            .iter()
            .map(|(k, v)| (k.replace('/', "-"), v.clone())),
    );
    tags
}

/// The disk URI and name a PV names: an `azureDisk` source, or a CSI PV of
/// `disk.csi.azure.com` (its volume handle). `None` when it is neither.
fn disk_of(spec: &PersistentVolumeSpec) -> Option<(String, String)> {
    if let Some(d) = &spec.azure_disk {
        return Some((d.disk_uri.clone(), d.disk_name.clone()));
    }
    let csi = spec
        .csi
        .as_ref()
        .filter(|c| c.driver == AZURE_DISK_CSI_DRIVER)?;
    Some((
        csi.volume_handle.clone(),
        name_of(&csi.volume_handle).to_owned(),
    ))
}

/// A disk as [`CloudVolume`]: attached to the VM (name) `managedBy` names.
fn cloud_volume(disk: &Disk, location: &str) -> CloudVolume {
    CloudVolume {
        id: disk.id.clone().unwrap_or_default(),
        name: disk.name.clone().unwrap_or_default(),
        size_gib: disk_size(disk),
        zone: disk_labels(disk, location)
            .remove(LABEL_TOPOLOGY_ZONE)
            .unwrap_or_default(),
        attached_to: disk
            .managed_by
            .iter()
            .filter(|m| !m.is_empty())
            .map(|m| name_of(m).to_owned())
            .collect(),
    }
}

/// Errors as the provider contract's.
trait Cloud<T> {
    fn cloud(self) -> CloudResult<T>;
}

impl<T> Cloud<T> for Result<T> {
    fn cloud(self) -> CloudResult<T> {
        self.map_err(Error::into_provider_error)
    }
}

impl Azure {
    /// The disk a URI names; `None` when ARM says there is none.
    async fn disk(&self, uri: &str) -> Result<Option<Disk>> {
        parse_disk_uri(uri)?;
        match self.arm().await?.get::<Disk>(uri).await {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// As upstream `CreateManagedDisk`: `PUT disks/<name>` (an `Empty` disk of the SKU, size,
    /// tags, and zone `n` for a volume zone `<location>-<n>` unless the class says `zoned:
    /// false`), its operation waited for. A disk of that name already there is replaced with
    /// the same (ARM's PUT), so a repeated request gives the same disk.
    async fn create_disk(&self, request: &VolumeRequest) -> Result<ProvisionedVolume> {
        let location = &self.config.location;
        let p = disk_parameters(&request.options, location)?;
        let sku = sku(&request.volume_type)?;
        let group = p
            .resource_group
            .clone()
            .unwrap_or_else(|| self.config.resource_group.clone());
        let zones: Vec<&str> = if p.zoned {
            zone_number(&request.zone, location).into_iter().collect()
        } else {
            Vec::new()
        };
        if zones.is_empty() && !request.zone.is_empty() {
            tracing::info!(disk = %request.name, zone = %request.zone, zoned = p.zoned, "the volume's zone is no availability zone of the location; the disk is made in none");
        }
        let mut properties = json!({
            "creationData": {"createOption": "Empty"},
            "diskSizeGB": request.size_gib,
        });
        if sku == "UltraSSD_LRS" {
            let iops = p
                .disk_iops_read_write
                .as_deref()
                .unwrap_or(ULTRA_DEFAULT_IOPS);
            let mbps = p
                .disk_mbps_read_write
                .as_deref()
                .unwrap_or(ULTRA_DEFAULT_MBPS);
            properties["diskIOPSReadWrite"] = json!(iops.parse::<u64>().unwrap_or_default());
            properties["diskMBpsReadWrite"] = json!(mbps.parse::<u64>().unwrap_or_default());
        }
        let mut body = json!({
            "location": location,
            "sku": {"name": sku},
            "tags": disk_tags(&request.tags, &p.tags),
            "properties": properties,
        });
        if !zones.is_empty() {
            body["zones"] = json!(zones);
        }
        let arm = self.arm().await?;
        let id = arm.resource_id(&group, DISKS, &request.name);
        let disk: Disk = arm.put(&id, &body).await?;
        tracing::info!(disk = %id, size_gib = request.size_gib, sku, zones = ?disk.zones, "azure disk created");
        Ok(ProvisionedVolume {
            id: disk.id.clone().unwrap_or(id),
            size_gib: disk_size(&disk),
            labels: disk_labels(&disk, location),
        })
    }

    /// As upstream `DeleteManagedDisk`: a disk gone is deleted already; one attached
    /// (`managedBy`) is refused, naming its VM.
    async fn delete_disk(&self, uri: &str) -> Result<()> {
        let Some(disk) = self.disk(uri).await? else {
            return Ok(());
        };
        if let Some(vm) = disk.managed_by.as_deref().filter(|m| !m.is_empty()) {
            return Err(Error::DeleteAttachedDisk {
                disk: name_of(uri).to_owned(),
                vm: name_of(vm).to_owned(),
            });
        }
        match self.arm().await?.delete(uri).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => {
                tracing::info!(disk = %uri, "azure disk deleted");
                Ok(())
            }
        }
    }

    /// As upstream `ResizeDisk`: a disk already that large is left alone; only an
    /// `Unattached` disk is grown (upstream v1.20), by `PATCH {properties: {diskSizeGB}}`.
    async fn resize_disk(&self, uri: &str, new_size_gib: u64) -> CloudResult<u64> {
        let disk = self
            .disk(uri)
            .await
            .cloud()?
            .ok_or(hypercloud_cloudprovider::Error::DiskNotFound)?;
        let size = disk_size(&disk);
        if size >= new_size_gib {
            return Ok(size);
        }
        let vm = disk.managed_by.as_deref().filter(|m| !m.is_empty());
        let state = disk.properties.disk_state.as_deref();
        if vm.is_some() || state.is_some_and(|s| s != "Unattached") {
            return Err(Error::ResizeAttachedDisk {
                disk: name_of(uri).to_owned(),
                state: state.unwrap_or("Attached").to_owned(),
                vm: vm.map(|m| name_of(m).to_owned()).unwrap_or_default(),
            }
            .into_provider_error());
        }
        let arm = self.arm().await.cloud()?;
        let grown: Disk = arm
            .patch(uri, &json!({"properties": {"diskSizeGB": new_size_gib}}))
            .await
            .cloud()?;
        tracing::info!(disk = %uri, from = size, to = new_size_gib, "azure disk grown");
        Ok(disk_size(&grown).max(new_size_gib))
    }
}

#[async_trait]
impl VolumeProvisioner for Azure {
    fn plugin_name(&self) -> &str {
        AZURE_DISK_PLUGIN
    }

    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        pv.spec
            .as_ref()?
            .azure_disk
            .as_ref()
            .map(|d| d.disk_uri.clone())
    }

    /// `azureDisk` with the disk's name and URI, kind Managed, caching ReadOnly (the in-tree
    /// default, the one the attacher uses), the class's `fsType`.
    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            azure_disk: Some(AzureDiskVolumeSource {
                disk_name: name_of(volume_id).to_owned(),
                disk_uri: volume_id.to_owned(),
                caching_mode: Some(DEFAULT_CACHING.into()),
                kind: Some(MANAGED.into()),
                fs_type: fs_type.map(str::to_owned),
                read_only: Some(false),
            }),
            ..Default::default()
        }
    }

    /// [`disk_parameters`], as the claim's event shows it; what `create_volume` needs beyond
    /// the SKU and zones travels in the options.
    fn class_parameters(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> std::result::Result<ClassParameters, String> {
        let p = disk_parameters(parameters, &self.config.location).map_err(|e| e.to_string())?;
        Ok(ClassParameters {
            options: request_options(parameters, &p),
            volume_type: p.sku,
            zone: p.zone.unwrap_or_default(),
            zones: p.zones.into_iter().collect(),
            fs_type: p.fs_type,
            pool: String::new(),
        })
    }

    /// Upstream's `GenerateVolumeName(cluster, pv, 75)`: a managed disk name is at most 80
    /// characters, and upstream kept room for `.vhd`.
    fn max_volume_name_len(&self) -> usize {
        75
    }

    async fn create_volume(&self, request: &VolumeRequest) -> CloudResult<ProvisionedVolume> {
        self.create_disk(request).await.cloud()
    }

    async fn delete_volume(&self, volume_id: &str) -> CloudResult<()> {
        self.delete_disk(volume_id).await.cloud()
    }

    async fn expand_volume(&self, volume_id: &str, new_size_gib: u64) -> CloudResult<u64> {
        self.resize_disk(volume_id, new_size_gib).await
    }

    /// By ID: `GET` the URI (one request; not a disk URI: none). By name: `GET` in the
    /// config's resource group. Every disk: the config's resource group's list.
    async fn find_volumes(&self, filter: VolumeFilter<'_>) -> CloudResult<Vec<CloudVolume>> {
        let location = &self.config.location;
        let disks = match filter {
            VolumeFilter::Id(uri) => {
                if parse_disk_uri(uri).is_err() {
                    return Ok(Vec::new());
                }
                self.disk(uri).await.cloud()?.into_iter().collect()
            }
            VolumeFilter::Name(name) => {
                let arm = self.arm().await.cloud()?;
                let id = arm.resource_id(&self.config.resource_group, DISKS, name);
                self.disk(&id).await.cloud()?.into_iter().collect()
            }
            VolumeFilter::All => {
                let arm = self.arm().await.cloud()?;
                arm.list::<Disk>(&arm.resource_id(&self.config.resource_group, DISKS, ""))
                    .await
                    .cloud()?
            }
        };
        Ok(disks.iter().map(|d| cloud_volume(d, location)).collect())
    }
}

#[async_trait]
impl PvLabeler for Azure {
    /// As upstream `GetLabelsForVolume`: an `azureDisk` PV (or a `disk.csi.azure.com` one)
    /// gets its disk's region, and its zone when the disk is zoned; a PV still being
    /// provisioned, or of another plugin, gets none.
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> CloudResult<BTreeMap<String, String>> {
        let Some((uri, name)) = pv.spec.as_ref().and_then(disk_of) else {
            return Ok(BTreeMap::new());
        };
        if name == PROVISIONED_VOLUME_NAME {
            return Ok(BTreeMap::new());
        }
        let disk = self
            .disk(&uri)
            .await
            .cloud()?
            .ok_or(hypercloud_cloudprovider::Error::DiskNotFound)?;
        Ok(disk_labels(&disk, &self.config.location))
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
    fn disk_uris_as_upstream_parses_them() {
        let uri = "/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/disks/d-1";
        assert_eq!(
            parse_disk_uri(uri).unwrap(),
            DiskUri {
                subscription: "s".into(),
                resource_group: "RG".into(),
                name: "d-1".into()
            }
        );
        assert!(parse_disk_uri(
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/Disks/d"
        )
        .is_ok());
        for bad in [
            "d-1",
            "subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/snapshots/d",
            "/subscriptions/s/resourceGroups//providers/Microsoft.Compute/disks/d",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d/x",
            "https://account.blob.core.windows.net/vhds/d.vhd",
        ] {
            let e = parse_disk_uri(bad).unwrap_err().to_string();
            assert!(
                e.contains("is not a managed disk's resource ID"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn zones_tags_and_labels() {
        assert_eq!(zone_number("regionone-1", "regionone"), Some("1"));
        assert_eq!(zone_number("RegionOne-2", "regionone"), Some("2"));
        assert_eq!(zone_number("0", "regionone"), None);
        assert_eq!(zone_number("eastus-1", "regionone"), None);
        assert_eq!(zone_number("regionone-", "regionone"), None);
        assert_eq!(zone_number("", "regionone"), None);
        let tags = disk_tags(
            &params(&[("kubernetes.io/created-for/pvc/name", "c")]),
            &params(&[("team", "a")]),
        );
        assert_eq!(
            tags,
            params(&[
                ("created-by", "kubernetes-azure-dd"),
                ("kubernetes.io-created-for-pvc-name", "c"),
                ("team", "a")
            ])
        );
        let zoned: Disk =
            serde_json::from_value(json!({"zones": ["1"], "properties": {}})).unwrap();
        assert_eq!(
            disk_labels(&zoned, "RegionOne"),
            params(&[
                (LABEL_TOPOLOGY_REGION, "regionone"),
                (LABEL_TOPOLOGY_ZONE, "regionone-1")
            ])
        );
        let flat: Disk = serde_json::from_value(json!({"properties": {}})).unwrap();
        assert_eq!(
            disk_labels(&flat, "regionone"),
            params(&[(LABEL_TOPOLOGY_REGION, "regionone")])
        );
    }

    #[test]
    fn pvs_name_their_disk_by_source_or_csi_handle() {
        let uri = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d";
        let spec =
            |v: serde_json::Value| -> PersistentVolumeSpec { serde_json::from_value(v).unwrap() };
        assert_eq!(
            disk_of(&spec(
                json!({"azureDisk": {"diskName": "d", "diskURI": uri}})
            )),
            Some((uri.into(), "d".into()))
        );
        assert_eq!(
            disk_of(&spec(
                json!({"csi": {"driver": "disk.csi.azure.com", "volumeHandle": uri}})
            )),
            Some((uri.into(), "d".into()))
        );
        assert_eq!(
            disk_of(&spec(
                json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": uri}})
            )),
            None
        );
        assert_eq!(disk_of(&spec(json!({}))), None);
    }
}
