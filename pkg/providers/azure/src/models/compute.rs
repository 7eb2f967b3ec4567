//! Microsoft.Compute: virtual machines (with their instance view) and managed disks.

use serde::{Deserialize, Serialize};

use super::{nullable, Extra, Reference, Resource};

/// A virtual machine.
pub type VirtualMachine = Resource<VirtualMachineProperties>;

/// A virtual machine's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualMachineProperties {
    /// The size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_profile: Option<HardwareProfile>,
    /// The OS profile (computer name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os_profile: Option<OsProfile>,
    /// The NICs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_profile: Option<NetworkProfile>,
    /// The disks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_profile: Option<StorageProfile>,
    /// The availability set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub availability_set: Option<Reference>,
    /// The instance view (with `$expand=instanceView`); read-only.
    #[serde(skip_serializing)]
    pub instance_view: Option<InstanceView>,
    /// The VM's unique ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_id: Option<String>,
    /// `Succeeded`, `Creating`, `Failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `hardwareProfile`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HardwareProfile {
    /// `Standard_B1s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_size: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `osProfile`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OsProfile {
    /// The computer (host) name: the node name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub computer_name: Option<String>,
    /// Fields not modelled (admin user, secrets: ARM never shows the password).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `networkProfile`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkProfile {
    /// The NICs.
    #[serde(deserialize_with = "nullable")]
    pub network_interfaces: Vec<NetworkInterfaceReference>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A VM's reference to one of its NICs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkInterfaceReference {
    /// The NIC's ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Whether it is the primary NIC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkInterfaceReferenceProperties>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a VM's NIC reference.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkInterfaceReferenceProperties {
    /// The primary NIC (there must be one when there are several).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `storageProfile`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StorageProfile {
    /// The data disks, by LUN. Always sent, so that detaching the last one sends `[]`.
    #[serde(deserialize_with = "nullable")]
    pub data_disks: Vec<DataDisk>,
    /// Fields not modelled (`osDisk`, `imageReference`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A data disk of a VM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataDisk {
    /// The LUN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lun: Option<i32>,
    /// The disk's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The managed disk (`id`, `storageAccountType`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_disk: Option<ManagedDisk>,
    /// `Attach`, `Empty`, `FromImage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_option: Option<String>,
    /// `None`, `ReadOnly`, `ReadWrite`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caching: Option<String>,
    /// The size, for `Empty`.
    #[serde(rename = "diskSizeGB", skip_serializing_if = "Option::is_none")]
    pub disk_size_gb: Option<i64>,
    /// Fields not modelled (`toBeDetached`, `deleteOption`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A managed disk reference of a VM's disk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ManagedDisk {
    /// The disk's ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `Standard_LRS`, `Premium_LRS`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_account_type: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A VM's instance view.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceView {
    /// The computer name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub computer_name: Option<String>,
    /// `ProvisioningState/succeeded`, `PowerState/running`, ...
    #[serde(deserialize_with = "nullable")]
    pub statuses: Vec<InstanceViewStatus>,
    /// The fault domain in an availability set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform_fault_domain: Option<i32>,
    /// The update domain in an availability set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform_update_domain: Option<i32>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One status of an instance view.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceViewStatus {
    /// `PowerState/running`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// `Info`, `Warning`, `Error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// `VM running`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_status: Option<String>,
    /// Details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Fields not modelled (`time`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl VirtualMachine {
    /// The power state of the instance view (`running`, `stopped`, `deallocated`), if it
    /// was expanded and has one.
    pub fn power_state(&self) -> Option<&str> {
        self.properties
            .instance_view
            .as_ref()?
            .statuses
            .iter()
            .filter_map(|s| s.code.as_deref())
            .find_map(|c| c.strip_prefix("PowerState/"))
    }

    /// The ID of the primary NIC: the one marked primary, else the only one.
    pub fn primary_nic_id(&self) -> Option<&str> {
        let nics = &self.properties.network_profile.as_ref()?.network_interfaces;
        nics.iter()
            .find(|n| n.properties.as_ref().and_then(|p| p.primary) == Some(true))
            .or(if nics.len() == 1 { nics.first() } else { None })
            .and_then(|n| n.id.as_deref())
    }
}

/// A managed disk.
pub type Disk = Resource<DiskProperties>;

/// A managed disk's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiskProperties {
    /// The size in GiB.
    #[serde(rename = "diskSizeGB", skip_serializing_if = "Option::is_none")]
    pub disk_size_gb: Option<i64>,
    /// `Unattached`, `Attached`, `Reserved`; read-only.
    #[serde(skip_serializing)]
    pub disk_state: Option<String>,
    /// How it was made (`{"createOption": "Empty"}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_data: Option<CreationData>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `creationData` of a disk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CreationData {
    /// `Empty`, `Copy`, `FromImage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_option: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}
