//! VMDK volumes for the in-tree `kubernetes.io/vsphere-volume` plugin: creating and deleting
//! them on a datastore ([`VolumeProvisioner`], `VirtualDiskManager.CreateVirtualDisk_Task` and
//! `DeleteVirtualDisk_Task`) and adding them to VMs and removing them
//! ([`VolumeAttacher`], `ReconfigVM_Task`; a removed disk's file stays), each task waited for,
//! as the legacy provider's `CreateVolume`, `DeleteVolume`, `AttachDisk`, `DetachDisk`,
//! `DiskIsAttached` and `DisksAreAttached` (`legacy-cloud-providers/vsphere/vsphere.go`) with
//! the StorageClass parameters of `pkg/volume/vsphere_volume` ([`volume_parameters`]).
//!
//! A volume's ID is its VMDK path, `[datastore] kubevols/<name>.vmdk`, as upstream's
//! `volumePath`. Not here, and refused by name: storage policies and vSAN capabilities
//! (SPBM, which needs a dummy VM per volume upstream), and expansion, which the in-tree
//! plugin of Kubernetes v1.20 did not have (only the vSphere CSI driver grows disks).
//!
//! With several vCenters, as upstream's legacy provider: volumes are created and deleted on
//! the `[Workspace] server` vCenter ([`crate::Config::workspace_vcenter`]); attaching,
//! detaching and checking attachments go to the vCenter that has the node's VM.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use hypercloud_cloudprovider::{
    ClassParameters, CloudVolume, Error as CloudError, ProvisionedVolume, Result as CloudResult,
    VolumeAttacher, VolumeFilter, VolumeProvisioner, VolumeRequest,
};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeSpec, VsphereVirtualDiskVolumeSource,
};

use crate::error::{Error, Result};
use crate::inventory::{swapped_uuid, Inventory, Key};
use crate::soap::{
    self, DeviceSpec, FileBackedVirtualDiskSpec, Moref, ObjectContent, ScsiControllerSpec,
    VirtualDevice, VirtualDeviceConfigSpec, VirtualDiskSpec, VirtualMachineConfigSpec,
};
use crate::volumes::parse_volume_path;
use crate::VSphere;

/// The in-tree plugin (StorageClass `provisioner`) these disks serve.
pub const VSPHERE_VOLUME_PLUGIN: &str = "kubernetes.io/vsphere-volume";

/// The file system a PV names when its class gives none, as upstream's provisioner.
const DEFAULT_FS_TYPE: &str = "ext4";

/// The datastore directory volumes are created in, as upstream.
const VOLUME_DIR: &str = "kubevols";

/// `diskformat` values and the vim25 disk type each creates; the first is the default.
const DISK_FORMATS: &[(&str, &str)] = &[
    ("thin", "thin"),
    ("zeroedthick", "preallocated"),
    ("eagerzeroedthick", "eagerZeroedThick"),
];

/// Keys `pkg/volume/vsphere_volume` accepts (lower case) that need storage-policy based
/// management (a storage policy, vSAN capabilities): the provider makes no such volumes,
/// and vcsim could not honour them.
const POLICY_KEYS: &[&str] = &[
    "storagepolicyname",
    "hostfailurestotolerate",
    "forceprovisioning",
    "cachereservation",
    "diskstripes",
    "objectspacereservation",
    "iopslimit",
];

/// SCSI controller types (for the buses they take).
const SCSI_CONTROLLERS: &[&str] = &[
    "ParaVirtualSCSIController",
    "VirtualLsiLogicController",
    "VirtualLsiLogicSASController",
    "VirtualBusLogicController",
];

/// SCSI buses a VM has (so at most this many SCSI controllers).
const SCSI_BUSES: i32 = 4;

/// Units of a SCSI controller; unit 7 is the controller's own.
const SCSI_UNITS: i32 = 16;
const SCSI_CONTROLLER_UNIT: i32 = 7;

/// The StorageClass parameters of `kubernetes.io/vsphere-volume`, as `pkg/volume/vsphere_volume`
/// reads them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct VolumeParameters {
    /// `diskformat`: `thin`, `zeroedthick` or `eagerzeroedthick`; empty: `thin`.
    pub disk_format: String,
    /// `datastore`: empty: `[Workspace] default-datastore`.
    pub datastore: String,
    /// `fstype`.
    pub fs_type: Option<String>,
}

/// Parses a `kubernetes.io/vsphere-volume` StorageClass's parameters (keys case-insensitive,
/// as upstream): an unknown key, a disk format vSphere lacks, and the storage-policy and vSAN
/// keys upstream accepts are refused by name.
pub fn volume_parameters(parameters: &BTreeMap<String, String>) -> Result<VolumeParameters> {
    let mut p = VolumeParameters::default();
    for (k, v) in parameters {
        let key = k.to_ascii_lowercase();
        match key.as_str() {
            "diskformat" => {
                disk_type(v)?;
                p.disk_format = v.clone();
            }
            "datastore" => p.datastore = v.trim().to_owned(),
            "fstype" => p.fs_type = Some(v.clone()).filter(|f| !f.is_empty()),
            k if POLICY_KEYS.contains(&k) => {
                return Err(Error::VolumeParameters(format!(
                    "{key:?}: storage policies and vSAN capabilities (storage-policy based management) are not implemented by hypercloud's vsphere provider"
                )))
            }
            _ => {
                return Err(Error::VolumeParameters(format!(
                    "invalid option {k:?} for volume plugin {VSPHERE_VOLUME_PLUGIN}"
                )))
            }
        }
    }
    Ok(p)
}

/// The vim25 disk type of a `diskformat` (upstream `DiskFormatValidType`): `thin` when none
/// is asked for.
fn disk_type(format: &str) -> Result<&'static str> {
    if format.is_empty() {
        return Ok(DISK_FORMATS[0].1);
    }
    DISK_FORMATS
        .iter()
        .find(|(f, _)| *f == format)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            Error::VolumeParameters(format!(
                "diskformat {format:?} is not one of {}",
                DISK_FORMATS
                    .iter()
                    .map(|(f, _)| *f)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// Whether two volume paths name one file (`[ds] a.vmdk` and `[ds]a.vmdk` do).
fn same_path(a: &str, b: &str) -> bool {
    match (parse_volume_path(a), parse_volume_path(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// A VM's disk whose file is `path`.
fn disk_of<'a>(devices: &'a [VirtualDevice], path: &str) -> Option<&'a VirtualDevice> {
    devices.iter().find(|d| {
        d.kind == "VirtualDisk"
            && d.backing
                .as_ref()
                .and_then(|b| b.file_name.as_deref())
                .is_some_and(|f| same_path(f, path))
    })
}

/// A SCSI controller of type `kind` with a free unit (`(controller key, unit)`), the lowest
/// free unit; as upstream, controllers of other types are not used.
fn free_scsi_unit(devices: &[VirtualDevice], kind: &str) -> Option<(i32, i32)> {
    devices.iter().filter(|c| c.kind == kind).find_map(|c| {
        let used: BTreeSet<i32> = devices
            .iter()
            .filter(|d| d.controller_key == Some(c.key))
            .filter_map(|d| d.unit_number)
            .collect();
        (0..SCSI_UNITS)
            .find(|u| *u != SCSI_CONTROLLER_UNIT && !used.contains(u))
            .map(|u| (c.key, u))
    })
}

/// The bus for a new SCSI controller: the lowest no SCSI controller uses; `None` when all
/// four are taken.
fn free_scsi_bus(devices: &[VirtualDevice]) -> Option<i32> {
    let used: BTreeSet<i32> = devices
        .iter()
        .filter(|d| SCSI_CONTROLLERS.contains(&d.kind.as_str()))
        .filter_map(|d| d.bus_number)
        .collect();
    (0..SCSI_BUSES).find(|b| !used.contains(b))
}

/// The path the guest's udev gives a disk of this UUID (upstream's attacher:
/// `/dev/disk/by-id/wwn-0x` and the UUID without dashes, lower case).
fn device_path(uuid: &str) -> String {
    let hex: String = uuid
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .collect::<String>()
        .to_ascii_lowercase();
    format!("/dev/disk/by-id/wwn-0x{hex}")
}

/// A listed VM's devices.
fn devices(vm: &ObjectContent) -> &[VirtualDevice] {
    vm.get("config.hardware.device")
        .map(|v| v.devices.as_slice())
        .unwrap_or_default()
}

/// Whether a listed VM is the one of this instance ID (its BIOS UUID, either byte order).
fn is_vm(vm: &ObjectContent, instance_id: &str) -> bool {
    let want = instance_id.to_ascii_lowercase();
    let uuid = vm
        .text("config.uuid")
        .unwrap_or_default()
        .to_ascii_lowercase();
    !uuid.is_empty() && (uuid == want || swapped_uuid(&want).is_some_and(|s| s == uuid))
}

fn vm_name(vm: &ObjectContent) -> String {
    vm.text("name").unwrap_or(&vm.obj.value).to_owned()
}

/// A datastore as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Placement {
    name: String,
    /// `summary.freeSpace`, bytes.
    free: i64,
    /// IDs of the hosts that mount it.
    hosts: BTreeSet<String>,
}

impl Placement {
    fn of(ds: &ObjectContent) -> Self {
        Placement {
            name: ds.text("name").unwrap_or(&ds.obj.value).to_owned(),
            free: ds
                .text("summary.freeSpace")
                .and_then(|f| f.trim().parse().ok())
                .unwrap_or(0),
            hosts: ds
                .get("host")
                .map(|v| v.host_mounts.iter().map(|m| m.key.value.clone()).collect())
                .unwrap_or_default(),
        }
    }
}

/// As upstream `getDatastoresForZone` then `getMostFreeDatastore`: of the datastores mounted
/// on every host of the zone, the one with the most free space (ties: the first by name);
/// `None` when no datastore is shared by them all (or the zone has no hosts).
fn shared_datastore<'a>(
    datastores: &'a [Placement],
    zone_hosts: &BTreeSet<String>,
) -> Option<&'a Placement> {
    if zone_hosts.is_empty() {
        return None;
    }
    datastores
        .iter()
        .filter(|d| zone_hosts.is_subset(&d.hosts))
        .min_by(|a, b| b.free.cmp(&a.free).then_with(|| a.name.cmp(&b.name)))
}

impl VSphere {
    /// The datastore a volume of `zone` goes on when its class names none (upstream
    /// `CreateVolume` with a zone and no datastore): the hosts in the zone are those whose
    /// nearest tag of the `[Labels] zone` category (host, cluster, folders, datacenter) is it;
    /// of the datastores mounted on all of them, the most free. Upstream took the hosts of the
    /// registered Nodes' VMs in the zone; the provider sees no Nodes here, so every host in
    /// scope counts. One listing of the datastores, then each host's ancestry and tags
    /// (cached, as for Nodes' zones).
    async fn datastore_for_zone(&self, zone: &str) -> Result<String> {
        let no = |reason: String| Error::ZoneDatastore {
            zone: zone.to_owned(),
            reason,
        };
        let Some(category) = self.config.labels.zone.clone() else {
            return Err(no(
                "[Labels] zone names no tag category, so no host is in a zone; name a datastore in the StorageClass".into(),
            ));
        };
        let inv = self.workspace();
        let datastores: Vec<Placement> = inv
            .datastore_mounts()
            .await?
            .iter()
            .map(Placement::of)
            .collect();
        let hosts: BTreeSet<&String> = datastores.iter().flat_map(|d| &d.hosts).collect();
        let mut zone_hosts = BTreeSet::new();
        for host in hosts {
            let chain = inv.ancestry(host).await?;
            let tags = inv.tags_of(&chain).await?;
            let nearest = chain.iter().find_map(|o| {
                tags.get(&o.value)?
                    .iter()
                    .find(|t| t.category == category)
                    .map(|t| t.name.as_str())
            });
            if nearest == Some(zone) {
                zone_hosts.insert(host.clone());
            }
        }
        if zone_hosts.is_empty() {
            return Err(no(format!(
                "no host in scope has the tag {zone:?} of category {category:?} (on itself or an ancestor)"
            )));
        }
        let chosen = shared_datastore(&datastores, &zone_hosts).ok_or_else(|| {
            no(format!(
                "no datastore is mounted on all {} hosts of the zone",
                zone_hosts.len()
            ))
        })?;
        tracing::info!(zone, datastore = %chosen.name, free = chosen.free, "datastore chosen for the zone");
        Ok(chosen.name.clone())
    }

    /// The datacenter in scope of `inv`'s vCenter holding the datastore `name`:
    /// `(datacenter, datastore)`.
    async fn datastore_location(&self, inv: &Inventory, name: &str) -> Result<(Moref, Moref)> {
        let datacenters = &inv.client.vcenter().datacenters;
        let names = if datacenters.is_empty() {
            inv.all_datacenter_names().await?
        } else {
            datacenters.clone()
        };
        let resolved = inv.datacenters().await;
        for (i, dc_name) in names.iter().enumerate() {
            let Some(ds) = inv
                .find_by_path(&format!("{dc_name}/datastore/{name}"))
                .await?
                .filter(|m| m.kind == "Datastore")
            else {
                continue;
            };
            let dc = match resolved.get(i) {
                Some(dc) if names.len() == resolved.len() => dc.clone(),
                _ => inv
                    .find_by_path(dc_name)
                    .await?
                    .filter(|m| m.kind == "Datacenter")
                    .ok_or_else(|| Error::UnknownDatastore {
                        datastore: name.to_owned(),
                    })?,
            };
            return Ok((dc, ds));
        }
        Err(Error::UnknownDatastore {
            datastore: name.to_owned(),
        })
    }

    /// `FileManager.MakeDirectory` with parents; a directory already there is fine.
    async fn make_directory(&self, inv: &Inventory, dir: &str, dc: &Moref) -> Result<()> {
        let (dir, dc) = (dir.to_owned(), dc.clone());
        match inv
            .client
            .call(|sc| {
                Ok(soap::MakeDirectory::new(
                    sc.file_manager
                        .clone()
                        .ok_or_else(|| missing("fileManager"))?,
                    dir.clone(),
                    Some(dc.clone()),
                    true,
                ))
            })
            .await
        {
            Err(Error::Fault { fault, .. }) if fault == "FileAlreadyExists" => Ok(()),
            other => other,
        }
    }

    /// Starts a task on `inv`'s vCenter and waits for it.
    async fn run_task<M: soap::Method<Return = Moref>>(
        &self,
        inv: &Inventory,
        build: impl Fn(&soap::ServiceContent) -> Result<M>,
    ) -> Result<()> {
        let task = inv.client.call(build).await?;
        inv.wait_for_task(&task, M::NAME, self.config.task_timeout)
            .await
    }

    /// The VM of an instance ID (its BIOS UUID) with its devices, and the vCenter that has
    /// it; `None` when it is gone.
    async fn vm_with_devices(
        &self,
        instance_id: &str,
    ) -> CloudResult<Option<(&Inventory, ObjectContent)>> {
        let Some(vm) = self.locate(Key::Uuid(instance_id)).await? else {
            return Ok(None);
        };
        let inv = self.inventory_of(&vm);
        let devices = inv
            .vm_devices_of(&vm.moref)
            .await
            .map_err(|e| self.naming_vcenter(inv, e))?;
        Ok(devices.map(|d| (inv, d)))
    }

    /// Every VM's devices in the vCenter that has the VM of `instance_id`, found by one
    /// listing of each vCenter in config order; a vCenter that fails is skipped unless no
    /// other has the VM. [`CloudError::InstanceNotFound`] when none has it.
    async fn devices_listing_with(
        &self,
        instance_id: &str,
    ) -> CloudResult<(&Inventory, Vec<ObjectContent>)> {
        let mut first_error = None;
        for inv in &self.vcenters {
            match inv.vm_devices().await {
                Ok(vms) if vms.iter().any(|vm| is_vm(vm, instance_id)) => return Ok((inv, vms)),
                Ok(_) => {}
                Err(e) => {
                    first_error.get_or_insert(self.naming_vcenter(inv, e));
                }
            }
        }
        Err(first_error.map_or(CloudError::InstanceNotFound, Into::into))
    }

    /// The VMDKs under `kubevols/` on `datastore` (through its `browser`) whose names match
    /// `pattern`, as `(volume path, capacity in KiB when the server says)`: one
    /// `SearchDatastore_Task` and the reads of its state, the last with its result. A
    /// datastore without `kubevols/` has none.
    async fn search_volumes(
        &self,
        inv: &Inventory,
        datastore: &str,
        browser: &Moref,
        pattern: &str,
    ) -> Result<Vec<(String, Option<i64>)>> {
        let folder = format!("[{datastore}] {VOLUME_DIR}");
        let f = folder.clone();
        let task = inv
            .client
            .call(|_| {
                Ok(soap::SearchDatastore_Task::new(
                    browser.clone(),
                    f.clone(),
                    soap::DiskSearchSpec::new(pattern),
                ))
            })
            .await?;
        let result = match inv
            .wait_for_task_result(&task, "SearchDatastore_Task", self.config.task_timeout)
            .await
        {
            Ok(r) => r,
            Err(Error::Task { fault, .. }) if fault == "FileNotFound" => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(result
            .files
            .into_iter()
            .filter(|f| f.path.ends_with(".vmdk") && !f.path.ends_with("-flat.vmdk"))
            .map(|f| (format!("{folder}/{}", f.path), f.capacity_kb))
            .collect())
    }

    /// The disk a volume path names, on this VM.
    async fn attached_disk(
        &self,
        instance_id: &str,
        volume_path: &str,
    ) -> CloudResult<Option<VirtualDevice>> {
        Ok(self
            .vm_with_devices(instance_id)
            .await?
            .and_then(|(_, vm)| disk_of(devices(&vm), volume_path).cloned()))
    }
}

#[async_trait]
impl VolumeProvisioner for VSphere {
    fn plugin_name(&self) -> &str {
        VSPHERE_VOLUME_PLUGIN
    }

    /// Only the in-tree `vsphereVolume` source: CSI volumes are the vSphere CSI driver's.
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        pv.spec
            .as_ref()?
            .vsphere_volume
            .as_ref()
            .map(|v| v.volume_path.clone())
    }

    /// [`volume_parameters`]: the disk format as the volume type, the datastore as the pool.
    fn class_parameters(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> std::result::Result<ClassParameters, String> {
        let p = volume_parameters(parameters).map_err(|e| e.to_string())?;
        Ok(ClassParameters {
            volume_type: p.disk_format,
            pool: p.datastore,
            fs_type: p.fs_type,
            ..Default::default()
        })
    }

    /// `fsType` defaults to `ext4`, as upstream's provisioner writes it.
    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            vsphere_volume: Some(VsphereVirtualDiskVolumeSource {
                volume_path: volume_id.to_owned(),
                fs_type: Some(fs_type.unwrap_or(DEFAULT_FS_TYPE).to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// As upstream `CreateVolume` without storage policies: the class's datastore (used as
    /// named: upstream also checked it against the selected Node's zone, but the request's
    /// zone may be one the provisioner drew from the Nodes, which upstream ignored); else,
    /// when the request has a zone (the selected Node's, with WaitForFirstConsumer), the most
    /// free datastore shared by the zone's hosts (`VSphere::datastore_for_zone`); else
    /// `[Workspace] default-datastore`. Then `kubevols/` made on it, and
    /// `CreateVirtualDisk_Task` for `[datastore] kubevols/<name>.vmdk` and its task; a file
    /// of that name already there is reused, as upstream. The PV's zone labels are the
    /// datastore's.
    async fn create_volume(&self, request: &VolumeRequest) -> CloudResult<ProvisionedVolume> {
        let kind = disk_type(&request.volume_type)?;
        let inv = self.workspace();
        let datastore = if !request.pool.is_empty() {
            request.pool.clone()
        } else if !request.zone.is_empty() {
            self.datastore_for_zone(&request.zone).await?
        } else {
            self.config
                .workspace
                .default_datastore
                .clone()
                .ok_or_else(|| {
                    Error::VolumeParameters(
                        "no datastore: set the StorageClass parameter datastore or [Workspace] default-datastore".into(),
                    )
                })?
        };
        let kb = request.size_gib.checked_mul(1024 * 1024).ok_or_else(|| {
            crate::cloud_error(
                "CreateVirtualDisk_Task",
                format!("{} GiB is too large", request.size_gib),
            )
        })?;
        let (dc, ds) = self.datastore_location(inv, &datastore).await?;
        // The datastore decides the zone (its tags label the PV).
        let labels = self.labels_of_datastore(inv, &ds, &datastore).await?;
        self.make_directory(inv, &format!("[{datastore}] {VOLUME_DIR}"), &dc)
            .await?;
        let path = format!("[{datastore}] {VOLUME_DIR}/{}.vmdk", request.name);
        let p = path.clone();
        match self
            .run_task(inv, |sc| {
                Ok(soap::CreateVirtualDisk_Task::new(
                    sc.virtual_disk_manager
                        .clone()
                        .ok_or_else(|| missing("virtualDiskManager"))?,
                    p.clone(),
                    Some(dc.clone()),
                    FileBackedVirtualDiskSpec::new(kind, kb),
                ))
            })
            .await
        {
            Ok(()) => {}
            Err(Error::Task { fault, .. } | Error::Fault { fault, .. })
                if fault == "FileAlreadyExists" =>
            {
                tracing::warn!(%path, "vSphere volume already exists, reusing");
            }
            Err(e) => return Err(e.into()),
        }
        Ok(ProvisionedVolume {
            id: path,
            size_gib: request.size_gib,
            labels,
        })
    }

    /// As upstream `DeleteVolume`: a disk any VM in scope still has is refused (the caller
    /// retries once it is detached); else `DeleteVirtualDisk_Task` and its task. A file, or a
    /// datastore, that is not there is deleted already.
    async fn delete_volume(&self, volume_id: &str) -> CloudResult<()> {
        let (ds, _) = parse_volume_path(volume_id).ok_or_else(|| Error::VolumePath {
            path: volume_id.to_owned(),
        })?;
        let inv = self.workspace();
        let dc = match self.datastore_location(inv, ds).await {
            Ok((dc, _)) => dc,
            Err(Error::UnknownDatastore { .. }) => {
                tracing::warn!(volume_id, "datastore not found; assuming the disk is gone");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        for vm in inv.vm_devices().await? {
            if disk_of(devices(&vm), volume_id).is_some() {
                return Err(Error::DeleteDiskInUse {
                    disk: volume_id.to_owned(),
                    vm: vm_name(&vm),
                }
                .into());
            }
        }
        let path = volume_id.to_owned();
        match self
            .run_task(inv, |sc| {
                Ok(soap::DeleteVirtualDisk_Task::new(
                    sc.virtual_disk_manager
                        .clone()
                        .ok_or_else(|| missing("virtualDiskManager"))?,
                    path.clone(),
                    Some(dc.clone()),
                ))
            })
            .await
        {
            Err(Error::Task { fault, .. } | Error::Fault { fault, .. })
                if fault == "FileNotFound" =>
            {
                Ok(())
            }
            other => Ok(other?),
        }
    }

    /// Refused by name: the in-tree plugin of Kubernetes v1.20 had no expansion (the PVC
    /// resize admission refuses `vsphereVolume` claims before they get here).
    async fn expand_volume(&self, volume_id: &str, _new_size_gib: u64) -> CloudResult<u64> {
        Err(Error::ExpandVolume {
            disk: volume_id.to_owned(),
        }
        .into())
    }

    /// Volumes are the VMDKs under `kubevols/` (named `<name>.vmdk`): a datastore search
    /// (`SearchDatastore_Task` and its task: 2 requests, more while it runs) on the one
    /// datastore of an ID, on every datastore in scope for a name or for all, after one
    /// listing of the datastores and their browsers; then one listing of the VMs' devices
    /// for who has each disk (the VMs' UUIDs, the attacher's instance IDs). The size is
    /// `VmDiskFileInfo.capacityKb`, else an attached disk's `capacityInKB`; 0 when the server
    /// reports neither (vcsim reports no `capacityKb`).
    async fn find_volumes(&self, filter: VolumeFilter<'_>) -> CloudResult<Vec<CloudVolume>> {
        let (only_ds, pattern) = match filter {
            VolumeFilter::Id(path) => {
                let Some((ds, file)) = parse_volume_path(path) else {
                    return Ok(Vec::new());
                };
                let Some(name) = file.strip_prefix(&format!("{VOLUME_DIR}/")) else {
                    return Ok(Vec::new());
                };
                if name.contains(['/', '*', '?']) || !name.ends_with(".vmdk") {
                    return Ok(Vec::new());
                }
                (Some(ds), name.to_owned())
            }
            VolumeFilter::Name(name) => {
                if name.is_empty() || name.contains(['/', '*', '?', '[', ']']) {
                    return Ok(Vec::new());
                }
                (None, format!("{name}.vmdk"))
            }
            VolumeFilter::All => (None, "*.vmdk".to_owned()),
        };
        let mut out = Vec::new();
        for inv in &self.vcenters {
            out.extend(self.find_volumes_in(inv, only_ds, &pattern).await?);
        }
        Ok(out)
    }
}

impl VSphere {
    /// [`VolumeProvisioner::find_volumes`] in one vCenter: its datastores, its VMs.
    async fn find_volumes_in(
        &self,
        inv: &Inventory,
        only_ds: Option<&str>,
        pattern: &str,
    ) -> CloudResult<Vec<CloudVolume>> {
        let mut found = Vec::new();
        for ds in inv.datastore_browsers().await? {
            let name = ds.text("name").unwrap_or_default().to_owned();
            let Some(browser) = ds.text("browser").filter(|b| !b.is_empty()) else {
                continue;
            };
            if only_ds.is_some_and(|d| d != name) {
                continue;
            }
            let browser = Moref::new("HostDatastoreBrowser", browser);
            found.extend(self.search_volumes(inv, &name, &browser, pattern).await?);
        }
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let vms = inv.vm_devices().await?;
        let kib_to_gib = |kb: i64| u64::try_from(kb).unwrap_or_default().div_ceil(1024 * 1024);
        Ok(found
            .into_iter()
            .map(|(path, capacity_kb)| {
                let mut size = capacity_kb.map(kib_to_gib).unwrap_or_default();
                let mut attached_to = Vec::new();
                for vm in &vms {
                    if let Some(d) = disk_of(devices(vm), &path) {
                        attached_to.push(vm.text("config.uuid").unwrap_or_default().to_owned());
                        if size == 0 {
                            size = d.capacity_in_kb.map(kib_to_gib).unwrap_or_default();
                        }
                    }
                }
                let name = path
                    .rsplit('/')
                    .next()
                    .and_then(|f| f.strip_suffix(".vmdk"))
                    .unwrap_or_default()
                    .to_owned();
                CloudVolume {
                    id: path,
                    name,
                    size_gib: size,
                    zone: String::new(),
                    attached_to,
                }
            })
            .collect())
    }
}

#[async_trait]
impl VolumeAttacher for VSphere {
    fn plugin_name(&self) -> &str {
        VSPHERE_VOLUME_PLUGIN
    }

    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        spec.vsphere_volume.as_ref().map(|v| v.volume_path.clone())
    }

    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        volume
            .vsphere_volume
            .as_ref()
            .map(|v| v.volume_path.clone())
    }

    /// As upstream `AttachDisk`: one listing of every VM's devices finds the VM (by its BIOS
    /// UUID) and who has the disk. Nothing to do when the VM has it; a disk another VM has
    /// is refused before vCenter is asked; else `ReconfigVM_Task` adds it
    /// (`independent_persistent`) on the first free unit of a SCSI controller of
    /// `[Disk] scsicontrollertype` (pvscsi by default), and its task is waited for. A VM
    /// without a free unit there first gets such a controller on a free bus (its own task, as
    /// upstream); one whose four buses are taken is refused by name.
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        parse_volume_path(volume_id).ok_or_else(|| Error::VolumePath {
            path: volume_id.to_owned(),
        })?;
        let (inv, vms) = self.devices_listing_with(instance_id).await?;
        let vm = vms
            .iter()
            .find(|vm| is_vm(vm, instance_id))
            .ok_or(CloudError::InstanceNotFound)?;
        if disk_of(devices(vm), volume_id).is_some() {
            tracing::debug!(volume_id, instance_id, "disk is already attached");
            return Ok(());
        }
        if let Some(other) = vms
            .iter()
            .find(|o| o.obj != vm.obj && disk_of(devices(o), volume_id).is_some())
        {
            return Err(Error::AttachDisk {
                disk: volume_id.to_owned(),
                vm: vm_name(vm),
                other: vm_name(other),
            }
            .into());
        }
        let target = vm.obj.clone();
        let no_unit = || Error::NoFreeScsiUnit {
            disk: volume_id.to_owned(),
            vm: vm_name(vm),
        };
        let kind = self.config.scsi_controller_type;
        let (controller, unit) = match free_scsi_unit(devices(vm), kind) {
            Some(found) => found,
            None => {
                // As upstream: a controller of the configured type first, in a task of its own.
                let bus = free_scsi_bus(devices(vm)).ok_or_else(no_unit)?;
                let spec = VirtualMachineConfigSpec {
                    device_change: vec![VirtualDeviceConfigSpec {
                        operation: "add".into(),
                        device: DeviceSpec::Controller(ScsiControllerSpec::new(kind, -200, bus)),
                    }],
                };
                tracing::info!(vm = %vm_name(vm), bus, kind, "adding a SCSI controller for volumes");
                self.run_task(inv, |_| {
                    Ok(soap::ReconfigVM_Task::new(target.clone(), spec.clone()))
                })
                .await?;
                let again = inv
                    .vm_devices_of(&target)
                    .await?
                    .ok_or(CloudError::InstanceNotFound)?;
                free_scsi_unit(devices(&again), kind).ok_or_else(no_unit)?
            }
        };
        let spec = VirtualMachineConfigSpec {
            device_change: vec![VirtualDeviceConfigSpec {
                operation: "add".into(),
                device: DeviceSpec::Disk(VirtualDiskSpec::new(
                    -100, volume_id, controller, unit, 0,
                )),
            }],
        };
        self.run_task(inv, |_| {
            Ok(soap::ReconfigVM_Task::new(target.clone(), spec.clone()))
        })
        .await?;
        Ok(())
    }

    /// As upstream `DetachDisk`: a VM that is gone, or does not have the disk, has nothing
    /// to detach; else `ReconfigVM_Task` removes the device (the VMDK stays) and its task.
    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        let Some((inv, vm)) = self.vm_with_devices(instance_id).await? else {
            tracing::warn!(
                instance_id,
                volume_id,
                "VM does not exist; assuming the disk is not attached to it"
            );
            return Ok(());
        };
        let Some(disk) = disk_of(devices(&vm), volume_id) else {
            return Ok(());
        };
        let spec = VirtualMachineConfigSpec {
            device_change: vec![VirtualDeviceConfigSpec {
                operation: "remove".into(),
                device: DeviceSpec::Disk(VirtualDiskSpec::new(
                    disk.key,
                    volume_id,
                    disk.controller_key.unwrap_or_default(),
                    disk.unit_number.unwrap_or_default(),
                    disk.capacity_in_kb.unwrap_or_default(),
                )),
            }],
        };
        let target = vm.obj.clone();
        self.run_task(inv, |_| {
            Ok(soap::ReconfigVM_Task::new(target.clone(), spec.clone()))
        })
        .await?;
        Ok(())
    }

    /// As upstream `DiskIsAttached`: whether the VM has a disk of that file; a gone VM has
    /// none.
    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> CloudResult<bool> {
        Ok(self.attached_disk(instance_id, volume_id).await?.is_some())
    }

    /// As upstream `DisksAreAttached`, with one read of the VM; when that read fails every
    /// disk counts as attached (the trait's rule: an error never makes a caller forget one).
    async fn disks_are_attached(
        &self,
        instance_id: &str,
        volume_ids: &[String],
    ) -> CloudResult<BTreeMap<String, bool>> {
        let vm = match self.vm_with_devices(instance_id).await {
            Ok(vm) => Some(vm),
            Err(error) => {
                tracing::warn!(instance_id, %error, "reading the VM failed; assuming its disks are attached");
                None
            }
        };
        Ok(volume_ids
            .iter()
            .map(|v| {
                let attached = match &vm {
                    None => true,
                    Some(None) => false,
                    Some(Some((_, vm))) => disk_of(devices(vm), v).is_some(),
                };
                (v.clone(), attached)
            })
            .collect())
    }

    /// `/dev/disk/by-id/wwn-0x<disk UUID>`, as upstream's attacher finds the disk in the
    /// guest; an error when it is not attached there.
    async fn get_attachment_disk_path(
        &self,
        instance_id: &str,
        volume_id: &str,
    ) -> CloudResult<String> {
        let uuid = self
            .attached_disk(instance_id, volume_id)
            .await?
            .and_then(|d| d.backing.and_then(|b| b.uuid))
            .filter(|u| !u.is_empty())
            .ok_or_else(|| Error::DiskPath {
                disk: volume_id.to_owned(),
                vm: instance_id.to_owned(),
            })?;
        Ok(device_path(&uuid))
    }
}

fn missing(what: &str) -> Error {
    Error::Decode {
        operation: "RetrieveServiceContent".into(),
        status: 200,
        message: format!("vCenter offers no {what}"),
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
    fn parameters_as_the_vsphere_volume_plugin_reads_them() {
        let p = volume_parameters(&params(&[
            ("DiskFormat", "eagerzeroedthick"),
            ("datastore", " LocalDS_1 "),
            ("fsType", "xfs"),
        ]))
        .unwrap();
        assert_eq!(p.disk_format, "eagerzeroedthick");
        assert_eq!(p.datastore, "LocalDS_1");
        assert_eq!(p.fs_type.as_deref(), Some("xfs"));
        assert_eq!(
            volume_parameters(&BTreeMap::new()).unwrap(),
            VolumeParameters::default()
        );
        assert_eq!(disk_type("").unwrap(), "thin");
        assert_eq!(disk_type("zeroedthick").unwrap(), "preallocated");
        assert_eq!(disk_type("eagerzeroedthick").unwrap(), "eagerZeroedThick");
    }

    #[test]
    fn parameters_refused_by_name() {
        for (kv, words) in [
            (vec![("iopsPerGB", "5")], "invalid option \"iopsPerGB\""),
            (
                vec![("diskformat", "sparse")],
                "diskformat \"sparse\" is not one of thin",
            ),
            (
                vec![("storagePolicyName", "gold")],
                "\"storagepolicyname\": storage policies",
            ),
            (
                vec![("hostFailuresToTolerate", "1")],
                "\"hostfailurestotolerate\"",
            ),
            (vec![("iopsLimit", "100")], "\"iopslimit\""),
        ] {
            let e = volume_parameters(&params(&kv)).unwrap_err().to_string();
            assert!(e.contains(words), "{kv:?}: {e}");
        }
    }

    fn device(kind: &str, key: i32, controller: Option<i32>, unit: Option<i32>) -> VirtualDevice {
        VirtualDevice {
            kind: kind.into(),
            key,
            controller_key: controller,
            unit_number: unit,
            ..Default::default()
        }
    }

    #[test]
    fn disks_go_on_the_first_free_scsi_unit() {
        let mut devs = vec![
            device("VirtualIDEController", 200, None, None),
            device("ParaVirtualSCSIController", 202, Some(100), Some(3)),
            device("VirtualDisk", 204, Some(202), Some(0)),
        ];
        const PV: &str = "ParaVirtualSCSIController";
        assert_eq!(free_scsi_unit(&devs, PV), Some((202, 1)));
        // Only controllers of the configured type.
        assert_eq!(free_scsi_unit(&devs, "VirtualLsiLogicSASController"), None);
        for u in 1..7 {
            devs.push(device("VirtualDisk", 300 + u, Some(202), Some(u)));
        }
        // Unit 7 is the controller's.
        assert_eq!(free_scsi_unit(&devs, PV), Some((202, 8)));
        for u in 8..16 {
            devs.push(device("VirtualDisk", 300 + u, Some(202), Some(u)));
        }
        assert_eq!(free_scsi_unit(&devs, PV), None);
        assert_eq!(free_scsi_unit(&devs[..1], PV), None);
        // A new controller takes the lowest free bus.
        let mut c = device(PV, 202, Some(100), Some(3));
        c.bus_number = Some(0);
        let mut other = device("VirtualLsiLogicSASController", 1000, Some(100), Some(4));
        other.bus_number = Some(1);
        assert_eq!(free_scsi_bus(&[c.clone()]), Some(1));
        assert_eq!(free_scsi_bus(&[c.clone(), other.clone()]), Some(2));
        let full: Vec<VirtualDevice> = (0..4)
            .map(|b| {
                let mut d = device(PV, 202 + b, Some(100), Some(3));
                d.bus_number = Some(b);
                d
            })
            .collect();
        assert_eq!(free_scsi_bus(&full), None);
    }

    #[test]
    fn a_zone_gets_the_most_free_datastore_all_its_hosts_mount() {
        let ds = |name: &str, free: i64, hosts: &[&str]| Placement {
            name: name.into(),
            free,
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
        };
        let hosts = |h: &[&str]| h.iter().map(|h| (*h).to_owned()).collect::<BTreeSet<_>>();
        let all = [
            ds("LocalDS_0", 100, &["h0", "h1", "h2"]),
            ds("LocalDS_1", 200, &["h0"]),
            ds("shared-b", 150, &["h1", "h2"]),
            ds("shared-a", 150, &["h1", "h2"]),
        ];
        let pick = |h: &[&str]| shared_datastore(&all, &hosts(h)).map(|d| d.name.as_str());
        assert_eq!(pick(&["h0"]), Some("LocalDS_1"));
        // Ties go to the first name.
        assert_eq!(pick(&["h1", "h2"]), Some("shared-a"));
        assert_eq!(pick(&["h0", "h1"]), Some("LocalDS_0"));
        assert_eq!(pick(&["h3"]), None);
        assert_eq!(pick(&[]), None);
    }

    #[test]
    fn disks_are_found_by_file_and_named_by_uuid() {
        let mut d = device("VirtualDisk", 204, Some(202), Some(0));
        d.backing = Some(soap::DeviceBacking {
            file_name: Some("[LocalDS_0] kubevols/a.vmdk".into()),
            uuid: Some("6000C29a-1b2c-3d4e-5f60-718293a4b5c6".into()),
        });
        let devs = vec![d];
        assert!(disk_of(&devs, "[LocalDS_0]kubevols/a.vmdk").is_some());
        assert!(disk_of(&devs, "[LocalDS_1] kubevols/a.vmdk").is_none());
        assert_eq!(
            device_path("6000C29a-1b2c-3d4e-5f60-718293a4b5c6"),
            "/dev/disk/by-id/wwn-0x6000c29a1b2c3d4e5f60718293a4b5c6"
        );
    }

    #[test]
    fn device_changes_are_vim25_documents() {
        let xml = soap::ReconfigVM_Task::new(
            Moref::new("VirtualMachine", "vm-1"),
            VirtualMachineConfigSpec {
                device_change: vec![VirtualDeviceConfigSpec {
                    operation: "add".into(),
                    device: DeviceSpec::Disk(VirtualDiskSpec::new(
                        -100,
                        "[ds] kubevols/a.vmdk",
                        202,
                        1,
                        0,
                    )),
                }],
            },
        );
        let xml = soap::Method::to_xml(&xml).unwrap();
        assert!(
            xml.contains("<spec><deviceChange><operation>add</operation><device xsi:type=\"VirtualDisk\"><key>-100</key><backing xsi:type=\"VirtualDiskFlatVer2BackingInfo\"><fileName>[ds] kubevols/a.vmdk</fileName><diskMode>independent_persistent</diskMode></backing><controllerKey>202</controllerKey><unitNumber>1</unitNumber><capacityInKB>0</capacityInKB></device></deviceChange></spec>"),
            "{xml}"
        );
        let xml = soap::Method::to_xml(&soap::CreateVirtualDisk_Task::new(
            Moref::new("VirtualDiskManager", "vdm"),
            "[ds] kubevols/a.vmdk".into(),
            Some(Moref::new("Datacenter", "dc-1")),
            FileBackedVirtualDiskSpec::new("thin", 1024),
        ))
        .unwrap();
        assert!(xml.contains("<CreateVirtualDisk_Task xmlns=\"urn:vim25\"><_this type=\"VirtualDiskManager\">vdm</_this><name>[ds] kubevols/a.vmdk</name><datacenter type=\"Datacenter\">dc-1</datacenter><spec xsi:type=\"FileBackedVirtualDiskSpec\"><diskType>thin</diskType><adapterType>lsiLogic</adapterType><capacityKb>1024</capacityKb></spec>"), "{xml}");
    }

    #[test]
    fn devices_and_task_errors_decode() {
        let xml = r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="VirtualMachine">vm-1</obj><propSet><name>config.hardware.device</name><val xsi:type="ArrayOfVirtualDevice"><VirtualDevice xsi:type="ParaVirtualSCSIController"><key>202</key><deviceInfo><label>pvscsi-202</label></deviceInfo><controllerKey>100</controllerKey><unitNumber>3</unitNumber><busNumber>0</busNumber><device>204</device></VirtualDevice><VirtualDevice xsi:type="VirtualDisk"><key>204</key><backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>[LocalDS_0] vm/disk1.vmdk</fileName><diskMode>persistent</diskMode><uuid>6a99-71bf</uuid></backing><controllerKey>202</controllerKey><unitNumber>0</unitNumber><capacityInKB>10485760</capacityInKB></VirtualDevice></val></propSet></objects><objects><obj type="Task">task-1</obj><propSet><name>info.error</name><val xsi:type="LocalizedMethodFault"><fault xsi:type="FileAlreadyExists"><file>[ds] a.vmdk</file></fault><localizedMessage>Cannot complete the operation because the file or folder [ds] a.vmdk already exists</localizedMessage></val></propSet><propSet><name>info.state</name><val xsi:type="TaskInfoState">error</val></propSet></objects></returnval></RetrievePropertiesExResponse></soapenv:Body></soapenv:Envelope>"#;
        let r: soap::Response<Option<soap::RetrieveResult>> = quick_xml::de::from_str(xml).unwrap();
        let r = r.into_inner().unwrap();
        let devs = devices(&r.objects[0]);
        assert_eq!(devs.len(), 2);
        assert_eq!(devs[0].kind, "ParaVirtualSCSIController");
        assert_eq!(devs[1].capacity_in_kb, Some(10485760));
        assert_eq!(
            devs[1].backing.as_ref().unwrap().file_name.as_deref(),
            Some("[LocalDS_0] vm/disk1.vmdk")
        );
        let task = &r.objects[1];
        assert_eq!(task.text("info.state"), Some("error"));
        let err = task.get("info.error").unwrap();
        assert_eq!(
            err.fault.as_ref().unwrap().kind.as_deref(),
            Some("FileAlreadyExists")
        );
        assert!(err
            .localized_message
            .as_deref()
            .unwrap()
            .contains("already exists"));
    }
}
