//! Attaching managed disks to VMs, as upstream's `controllerCommon.AttachDisk`/`DetachDisk`
//! and `availabilitySet.AttachDisk`/`DetachDisk`/`GetDataDisks`: a disk goes on the lowest free
//! LUN (0 to 63) of the VM's `storageProfile.dataDisks`, written back whole by one `PATCH` of
//! the VM (upstream's `VirtualMachines.Update`), one change at a time per VM; detaching writes
//! the list without it. The instance ID is the node's VM: its name (in the config's resource
//! group), as the attach/detach controller cuts it from the provider ID, or its resource ID
//! (with or without `azure://`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use async_trait::async_trait;
use hypercloud_cloudprovider::{ProviderError as _, Result as CloudResult, VolumeAttacher};
use k8s_openapi::api::core::v1::PersistentVolumeSpec;
use serde_json::json;

use super::{parse_disk_uri, Cloud as _, AZURE_DISK_PLUGIN, DEFAULT_CACHING};
use crate::error::{Error, Result};
use crate::instances::{parse_provider_id, PROVIDER_ID_PREFIX};
use crate::models::{name_of, DataDisk, ManagedDisk, VirtualMachine};
use crate::Azure;

/// The resource type of VMs.
const VMS: &str = "Microsoft.Compute/virtualMachines";

/// The LUNs of a VM's data disks.
const LUNS: std::ops::RangeInclusive<i32> = 0..=63;

/// Disks this large (GiB) are attached without caching, as upstream (Azure refuses host
/// caching on them).
const NO_CACHING_FROM_GIB: i64 = 4096;

/// Where the guest finds the disk on LUN n: the symlink Azure's udev rules (WALinuxAgent's
/// `66-azure-storage.rules`) make for data disks, which the Azure disk CSI driver looks for.
/// Upstream's in-tree attacher answered the bare LUN and its kubelet scanned
/// `/sys/bus/scsi/devices` for it; this is the same disk, named.
pub const DISK_BY_LUN_PREFIX: &str = "/dev/disk/azure/scsi1/lun";

/// One lock per VM (its resource ID, lower-cased): a VM's data disks are read, changed and
/// written back whole, so two changes at once would lose one (upstream: a lock per node).
fn vm_lock(vm_id: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Mutex::default);
    LOCKS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(vm_id.to_lowercase())
        .or_default()
        .clone()
}

/// Whether `d` is the disk `uri` names: by its managed disk ID, else (a disk shown without
/// one) by name, as upstream matches (case-insensitive).
fn is_disk(d: &DataDisk, uri: &str) -> bool {
    match d.managed_disk.as_ref().and_then(|m| m.id.as_deref()) {
        Some(id) => id.eq_ignore_ascii_case(uri),
        None => d
            .name
            .as_deref()
            .is_some_and(|n| n.eq_ignore_ascii_case(name_of(uri))),
    }
}

/// Whether Azure is detaching it (`toBeDetached`): no longer counted as attached.
fn to_be_detached(d: &DataDisk) -> bool {
    d.extra
        .get("toBeDetached")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// The LUN the disk `uri` is attached on.
fn lun_of(disks: &[DataDisk], uri: &str) -> Option<i32> {
    disks
        .iter()
        .find(|d| is_disk(d, uri) && !to_be_detached(d))
        .and_then(|d| d.lun)
}

/// The lowest LUN no data disk uses (upstream `GetNextDiskLun`).
fn next_lun(disks: &[DataDisk]) -> Option<i32> {
    LUNS.into_iter()
        .find(|l| !disks.iter().any(|d| d.lun == Some(*l)))
}

fn data_disks(vm: &VirtualMachine) -> Vec<DataDisk> {
    vm.properties
        .storage_profile
        .as_ref()
        .map(|s| s.data_disks.clone())
        .unwrap_or_default()
}

impl Azure {
    /// `(resource group, VM name)` of an instance ID: a VM name (in the config's group) or a
    /// VM's resource ID, with or without `azure://`.
    fn vm_of_instance(&self, instance_id: &str) -> Result<(String, String)> {
        let id = instance_id
            .strip_prefix(PROVIDER_ID_PREFIX)
            .unwrap_or(instance_id);
        if id.starts_with('/') {
            parse_provider_id(&format!("{PROVIDER_ID_PREFIX}{id}"))
        } else if id.is_empty() || id.contains('/') {
            Err(Error::ProviderId(instance_id.to_owned()))
        } else {
            Ok((self.config.resource_group.clone(), id.to_owned()))
        }
    }

    /// The resource ID of the VM an instance ID names.
    async fn vm_id(&self, instance_id: &str) -> Result<String> {
        let (group, name) = self.vm_of_instance(instance_id)?;
        Ok(self.arm().await?.resource_id(&group, VMS, &name))
    }

    /// The VM; `None` when it does not exist.
    async fn attach_vm(&self, vm_id: &str) -> Result<Option<VirtualMachine>> {
        match self.arm().await?.get::<VirtualMachine>(vm_id).await {
            Ok(vm) => Ok(Some(vm)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The data disks of the VM an instance ID names; `None` when it does not exist.
    async fn vm_disks(&self, instance_id: &str) -> Result<Option<Vec<DataDisk>>> {
        let vm = self.attach_vm(&self.vm_id(instance_id).await?).await?;
        Ok(vm.map(|vm| data_disks(&vm)))
    }

    /// Writes the VM's data disks: `PATCH {properties: {storageProfile: {dataDisks}}}`, its
    /// operation waited for.
    async fn set_data_disks(&self, vm_id: &str, disks: &[DataDisk]) -> Result<()> {
        let body = json!({"properties": {"storageProfile": {"dataDisks": disks}}});
        let _: VirtualMachine = self.arm().await?.patch(vm_id, &body).await?;
        Ok(())
    }

    async fn attach(&self, instance_id: &str, uri: &str) -> CloudResult<()> {
        let disk_name = parse_disk_uri(uri).cloud()?.name;
        let vm_id = self.vm_id(instance_id).await.cloud()?;
        let vm_name = name_of(&vm_id).to_owned();
        let lock = vm_lock(&vm_id);
        let _held = lock.lock().await;
        let vm = self
            .attach_vm(&vm_id)
            .await
            .cloud()?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)?;
        let mut disks = data_disks(&vm);
        if let Some(lun) = lun_of(&disks, uri) {
            tracing::debug!(disk = %uri, vm = %vm_name, lun, "disk is already attached");
            return Ok(());
        }
        let disk = self
            .disk(uri)
            .await
            .cloud()?
            .ok_or(hypercloud_cloudprovider::Error::DiskNotFound)?;
        if let Some(other) = disk.managed_by.as_deref().filter(|m| !m.is_empty()) {
            return Err(Error::AttachDiskElsewhere {
                disk: disk_name,
                vm: vm_name,
                other: name_of(other).to_owned(),
            }
            .into_provider_error());
        }
        let lun = next_lun(&disks).ok_or_else(|| {
            Error::NoFreeLun {
                disk: disk_name.clone(),
                vm: vm_name.clone(),
            }
            .into_provider_error()
        })?;
        let caching = if disk.properties.disk_size_gb.unwrap_or_default() >= NO_CACHING_FROM_GIB {
            "None"
        } else {
            DEFAULT_CACHING
        };
        disks.push(DataDisk {
            lun: Some(lun),
            name: Some(disk.name.clone().unwrap_or(disk_name)),
            managed_disk: Some(ManagedDisk {
                id: Some(disk.id.clone().unwrap_or_else(|| uri.to_owned())),
                ..Default::default()
            }),
            create_option: Some("Attach".into()),
            caching: Some(caching.into()),
            ..Default::default()
        });
        self.set_data_disks(&vm_id, &disks).await.cloud()?;
        tracing::info!(disk = %uri, vm = %vm_name, lun, caching, "azure disk attached");
        Ok(())
    }

    async fn detach(&self, instance_id: &str, uri: &str) -> CloudResult<()> {
        let vm_id = self.vm_id(instance_id).await.cloud()?;
        let vm_name = name_of(&vm_id).to_owned();
        let lock = vm_lock(&vm_id);
        let _held = lock.lock().await;
        let Some(vm) = self.attach_vm(&vm_id).await.cloud()? else {
            tracing::warn!(vm = %vm_name, disk = %uri, "VM does not exist; assuming the disk is not attached to it");
            return Ok(());
        };
        let (gone, kept): (Vec<DataDisk>, Vec<DataDisk>) =
            data_disks(&vm).into_iter().partition(|d| is_disk(d, uri));
        if gone.is_empty() {
            tracing::debug!(disk = %uri, vm = %vm_name, "disk is not attached");
            return Ok(());
        }
        match self.set_data_disks(&vm_id, &kept).await {
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into_provider_error()),
            Ok(()) => {
                tracing::info!(disk = %uri, vm = %vm_name, lun = ?gone[0].lun, "azure disk detached");
                Ok(())
            }
        }
    }
}

#[async_trait]
impl VolumeAttacher for Azure {
    fn plugin_name(&self) -> &str {
        AZURE_DISK_PLUGIN
    }

    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        spec.azure_disk.as_ref().map(|d| d.disk_uri.clone())
    }

    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        volume.azure_disk.as_ref().map(|d| d.disk_uri.clone())
    }

    /// As upstream `AttachDisk`: nothing to do when the VM already has the disk; a disk
    /// another VM has (`managedBy`) is refused before the VM is changed, naming that VM; else
    /// the disk on the lowest free LUN, caching ReadOnly (None from 4096 GiB). More disks than
    /// the VM size takes is ARM's refusal.
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        self.attach(instance_id, volume_id).await
    }

    /// As upstream `DetachDisk`: a VM gone, or without the disk, has nothing to detach.
    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        self.detach(instance_id, volume_id).await
    }

    /// Whether the VM's data disks have it; a VM gone has none.
    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> CloudResult<bool> {
        let disks = self.vm_disks(instance_id).await.cloud()?;
        Ok(disks.is_some_and(|d| lun_of(&d, volume_id).is_some()))
    }

    /// As upstream `DisksAreAttached`, with one VM read: a VM gone has none; when the read
    /// fails every disk counts as attached (an error never makes a caller forget one).
    async fn disks_are_attached(
        &self,
        instance_id: &str,
        volume_ids: &[String],
    ) -> CloudResult<BTreeMap<String, bool>> {
        let disks = match self.vm_disks(instance_id).await {
            Ok(disks) => Some(disks.unwrap_or_default()),
            Err(error) => {
                tracing::warn!(instance_id, error = %hypercloud_cloudprovider::Chain(&error), "reading the VM failed; assuming its disks are attached");
                None
            }
        };
        Ok(volume_ids
            .iter()
            .map(|v| {
                let attached = disks.as_ref().is_none_or(|d| lun_of(d, v).is_some());
                (v.clone(), attached)
            })
            .collect())
    }

    /// `/dev/disk/azure/scsi1/lun<N>` ([`DISK_BY_LUN_PREFIX`]) of the disk's LUN on the VM;
    /// an error when it is not attached there.
    async fn get_attachment_disk_path(
        &self,
        instance_id: &str,
        volume_id: &str,
    ) -> CloudResult<String> {
        let disks = self
            .vm_disks(instance_id)
            .await
            .cloud()?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)?;
        match lun_of(&disks, volume_id) {
            Some(lun) => Ok(format!("{DISK_BY_LUN_PREFIX}{lun}")),
            None => Err(Error::DiskNotAttached {
                disk: name_of(volume_id).to_owned(),
                vm: name_of(instance_id).to_owned(),
            }
            .into_provider_error()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn disks(v: serde_json::Value) -> Vec<DataDisk> {
        serde_json::from_value(v).unwrap()
    }

    const URI: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d";

    #[test]
    fn luns_are_the_lowest_free_and_disks_match_by_id_or_name() {
        assert_eq!(next_lun(&[]), Some(0));
        let d = disks(json!([
            {"lun": 0, "name": "a", "managedDisk": {"id": "/x/a"}},
            {"lun": 2, "name": "D", "toBeDetached": false},
            {"lun": 3, "name": "d2", "managedDisk": {"id": URI.to_uppercase()}, "toBeDetached": true},
        ]));
        assert_eq!(next_lun(&d), Some(1));
        assert_eq!(lun_of(&d, URI), Some(2), "by name when no ID is shown");
        assert_eq!(lun_of(&d, "/x/a"), Some(0));
        assert_eq!(lun_of(&d, "/x/b"), None);
        let full: Vec<DataDisk> = (0..64)
            .map(|l| DataDisk {
                lun: Some(l),
                ..Default::default()
            })
            .collect();
        assert_eq!(next_lun(&full), None);
        // A disk being detached is matched, but not counted as attached.
        assert!(is_disk(&d[2], URI) && to_be_detached(&d[2]));
    }

    #[test]
    fn vm_locks_are_per_vm_whatever_the_case() {
        assert!(Arc::ptr_eq(&vm_lock("/A/vm"), &vm_lock("/a/VM")));
        assert!(!Arc::ptr_eq(&vm_lock("/a/vm1"), &vm_lock("/a/vm2")));
    }
}
