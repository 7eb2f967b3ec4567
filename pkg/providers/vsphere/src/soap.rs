//! The vim25 SOAP calls the provider makes, as typed requests and responses (quick-xml with
//! serde): no XML is written by hand anywhere else. Each request struct is one SOAP method,
//! named as the method; [`Envelope`] wraps it; responses are read as [`Response<T>`], faults as
//! [`FaultEnvelope`].
//!
//! Field order follows the vim25 WSDL sequences, which real vCenters enforce.
//! Upstream equivalent: govmomi's `vim25/methods` and `vim25/types` (generated).

use serde::{Deserialize, Serialize};

const VIM25: &str = "urn:vim25";
const SOAPENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// A managed object reference: `<_this type="SessionManager">SessionManager</_this>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Moref {
    /// The managed object type (`VirtualMachine`, `HostSystem`, ...).
    #[serde(rename = "@type")]
    pub kind: String,
    /// Its ID (`vm-42`, `host-21`, ...).
    #[serde(rename = "$text")]
    pub value: String,
}

impl Moref {
    /// A reference of `kind` with ID `value`.
    pub fn new(kind: &str, value: &str) -> Self {
        Moref {
            kind: kind.into(),
            value: value.into(),
        }
    }
}

/// The SOAP envelope around one request.
#[derive(Serialize)]
#[serde(rename = "soapenv:Envelope")]
pub struct Envelope<'a, B: Serialize> {
    #[serde(rename = "@xmlns:soapenv")]
    soapenv: &'static str,
    #[serde(rename = "@xmlns:xsi")]
    xsi: &'static str,
    #[serde(rename = "soapenv:Body")]
    body: BodyOut<'a, B>,
}

#[derive(Serialize)]
struct BodyOut<'a, B: Serialize> {
    #[serde(rename = "$value")]
    call: &'a B,
}

/// One SOAP method: its name (for messages and metrics) and its XML.
pub trait Method: Serialize + Sized {
    /// The method name.
    const NAME: &'static str;
    /// What `returnval` holds.
    type Return: for<'de> Deserialize<'de> + Default;

    /// The request document.
    fn to_xml(&self) -> Result<String, quick_xml::SeError> {
        quick_xml::se::to_string(&Envelope {
            soapenv: SOAPENV,
            xsi: XSI,
            body: BodyOut { call: self },
        })
    }
}

macro_rules! method {
    ($name:ident -> $ret:ty { $($(#[$m:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        #[doc = concat!("The vim25 `", stringify!($name), "` method.")]
        #[derive(Serialize, Debug, Clone)]
        #[allow(non_camel_case_types)]
        pub struct $name {
            #[serde(rename = "@xmlns")]
            xmlns: &'static str,
            #[serde(rename = "_this")]
            this: Moref,
            $($(#[$m])* pub $field: $ty,)*
        }
        impl $name {
            /// The call on `this` with these arguments.
            pub fn new(this: Moref, $($field: $ty),*) -> Self {
                $name { xmlns: VIM25, this, $($field),* }
            }
        }
        impl Method for $name {
            const NAME: &'static str = stringify!($name);
            type Return = $ret;
        }
    };
}

method!(RetrieveServiceContent -> ServiceContent {});
method!(Login -> UserSession {
    #[serde(rename = "userName")] user_name: String,
    password: String,
});
method!(Logout -> () {});
method!(FindByUuid -> Option<Moref> {
    #[serde(skip_serializing_if = "Option::is_none")] datacenter: Option<Moref>,
    uuid: String,
    #[serde(rename = "vmSearch")] vm_search: bool,
});
method!(FindAllByUuid -> Vec<Moref> {
    #[serde(skip_serializing_if = "Option::is_none")] datacenter: Option<Moref>,
    uuid: String,
    #[serde(rename = "vmSearch")] vm_search: bool,
});
method!(FindByDnsName -> Option<Moref> {
    #[serde(skip_serializing_if = "Option::is_none")] datacenter: Option<Moref>,
    #[serde(rename = "dnsName")] dns_name: String,
    #[serde(rename = "vmSearch")] vm_search: bool,
});
method!(FindByIp -> Option<Moref> {
    #[serde(skip_serializing_if = "Option::is_none")] datacenter: Option<Moref>,
    ip: String,
    #[serde(rename = "vmSearch")] vm_search: bool,
});
method!(FindByInventoryPath -> Option<Moref> {
    #[serde(rename = "inventoryPath")] inventory_path: String,
});
method!(CreateContainerView -> Moref {
    container: Moref,
    #[serde(rename = "type")] types: Vec<String>,
    recursive: bool,
});
method!(RetrievePropertiesEx -> Option<RetrieveResult> {
    #[serde(rename = "specSet")] spec_set: PropertyFilterSpec,
    options: RetrieveOptions,
});
method!(ContinueRetrievePropertiesEx -> Option<RetrieveResult> {
    token: String,
});
method!(MakeDirectory -> () {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")] datacenter: Option<Moref>,
    #[serde(rename = "createParentDirectories")] create_parent_directories: bool,
});
method!(CreateVirtualDisk_Task -> Moref {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")] datacenter: Option<Moref>,
    spec: FileBackedVirtualDiskSpec,
});
method!(DeleteVirtualDisk_Task -> Moref {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")] datacenter: Option<Moref>,
});
method!(RetrieveVStorageObject -> Ignored {
    id: VStorageObjectId,
    datastore: Moref,
});
method!(ReconfigVM_Task -> Moref {
    spec: VirtualMachineConfigSpec,
});
method!(SearchDatastore_Task -> Moref {
    #[serde(rename = "datastorePath")] datastore_path: String,
    #[serde(rename = "searchSpec")] search_spec: DiskSearchSpec,
});

/// `HostDatastoreBrowserSearchSpec` for VMDKs (`VmDiskFileQuery` with their capacity),
/// their file names matching `pattern`.
#[derive(Clone, Debug, Serialize)]
pub struct DiskSearchSpec {
    query: DiskQuery,
    details: FileQueryFlags,
    #[serde(rename = "matchPattern")]
    match_pattern: String,
}

#[derive(Clone, Debug, Serialize)]
struct DiskQuery {
    #[serde(rename = "@xsi:type")]
    xsi_type: &'static str,
    details: DiskQueryFlags,
}

#[derive(Clone, Debug, Serialize)]
struct DiskQueryFlags {
    #[serde(rename = "diskType")]
    disk_type: bool,
    #[serde(rename = "capacityKb")]
    capacity_kb: bool,
    #[serde(rename = "hardwareVersion")]
    hardware_version: bool,
}

#[derive(Clone, Debug, Serialize)]
struct FileQueryFlags {
    #[serde(rename = "fileType")]
    file_type: bool,
    #[serde(rename = "fileSize")]
    file_size: bool,
    modification: bool,
    #[serde(rename = "fileOwner")]
    file_owner: bool,
}

impl DiskSearchSpec {
    /// VMDKs whose names match `pattern` (`*.vmdk`, `pvc-1.vmdk`), with their capacity.
    pub fn new(pattern: &str) -> Self {
        DiskSearchSpec {
            query: DiskQuery {
                xsi_type: "VmDiskFileQuery",
                details: DiskQueryFlags {
                    disk_type: false,
                    capacity_kb: true,
                    hardware_version: false,
                },
            },
            details: FileQueryFlags {
                file_type: true,
                file_size: true,
                modification: false,
                file_owner: false,
            },
            match_pattern: pattern.into(),
        }
    }
}

/// A First Class Disk's ID (`ID`).
#[derive(Clone, Debug, Serialize)]
pub struct VStorageObjectId {
    /// The ID (the vSphere CSI driver's volume handle).
    pub id: String,
}

/// A return value only checked for being there.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Ignored {}

/// `FileBackedVirtualDiskSpec`: a new VMDK of a size (`VirtualDiskManager.CreateVirtualDisk_Task`).
#[derive(Clone, Debug, Serialize)]
pub struct FileBackedVirtualDiskSpec {
    #[serde(rename = "@xsi:type")]
    xsi_type: &'static str,
    /// `thin`, `preallocated` or `eagerZeroedThick`.
    #[serde(rename = "diskType")]
    pub disk_type: String,
    /// `lsiLogic`, as upstream's volumes.
    #[serde(rename = "adapterType")]
    pub adapter_type: String,
    /// The size in KiB.
    #[serde(rename = "capacityKb")]
    pub capacity_kb: u64,
}

impl FileBackedVirtualDiskSpec {
    /// A disk of `disk_type` and `capacity_kb` for an LSI Logic adapter.
    pub fn new(disk_type: &str, capacity_kb: u64) -> Self {
        FileBackedVirtualDiskSpec {
            xsi_type: "FileBackedVirtualDiskSpec",
            disk_type: disk_type.into(),
            adapter_type: "lsiLogic".into(),
            capacity_kb,
        }
    }
}

/// `VirtualMachineConfigSpec`, only its device changes.
#[derive(Clone, Debug, Serialize)]
pub struct VirtualMachineConfigSpec {
    /// Devices to add or remove.
    #[serde(rename = "deviceChange")]
    pub device_change: Vec<VirtualDeviceConfigSpec>,
}

/// `VirtualDeviceConfigSpec` of a disk or a SCSI controller, without `fileOperation`: an
/// existing VMDK is added, and a removed one stays on its datastore.
#[derive(Clone, Debug, Serialize)]
pub struct VirtualDeviceConfigSpec {
    /// `add` or `remove`.
    pub operation: String,
    /// The device.
    pub device: DeviceSpec,
}

/// A device to add or remove: a disk, or a SCSI controller for disks.
#[derive(Clone, Debug)]
pub enum DeviceSpec {
    /// A `VirtualDisk`.
    Disk(VirtualDiskSpec),
    /// A SCSI controller.
    Controller(ScsiControllerSpec),
}

impl Serialize for DeviceSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DeviceSpec::Disk(d) => d.serialize(s),
            DeviceSpec::Controller(c) => c.serialize(s),
        }
    }
}

/// A new SCSI controller (`ParaVirtualSCSIController`, `VirtualLsiLogicSASController`).
#[derive(Clone, Debug, Serialize)]
pub struct ScsiControllerSpec {
    /// The controller type.
    #[serde(rename = "@xsi:type")]
    pub kind: &'static str,
    /// A negative key: a new device.
    pub key: i32,
    /// The SCSI bus (0-3).
    #[serde(rename = "busNumber")]
    pub bus_number: i32,
    /// `noSharing`.
    #[serde(rename = "sharedBus")]
    pub shared_bus: String,
}

impl ScsiControllerSpec {
    /// A controller of type `kind` on `bus_number`, not shared.
    pub fn new(kind: &'static str, key: i32, bus_number: i32) -> Self {
        ScsiControllerSpec {
            kind,
            key,
            bus_number,
            shared_bus: "noSharing".into(),
        }
    }
}

/// A `VirtualDisk` backed by a VMDK file (`VirtualDiskFlatVer2BackingInfo`).
#[derive(Clone, Debug, Serialize)]
pub struct VirtualDiskSpec {
    #[serde(rename = "@xsi:type")]
    xsi_type: &'static str,
    /// The device key: negative for a new device, the existing key to remove one.
    pub key: i32,
    /// The file.
    pub backing: DiskBackingSpec,
    /// The SCSI controller's key.
    #[serde(rename = "controllerKey")]
    pub controller_key: i32,
    /// The unit on that controller.
    #[serde(rename = "unitNumber")]
    pub unit_number: i32,
    /// Required by the WSDL; 0 for an existing file.
    #[serde(rename = "capacityInKB")]
    pub capacity_in_kb: i64,
}

/// `VirtualDiskFlatVer2BackingInfo`: the file and its mode.
#[derive(Clone, Debug, Serialize)]
pub struct DiskBackingSpec {
    #[serde(rename = "@xsi:type")]
    xsi_type: &'static str,
    /// `[datastore] path.vmdk`.
    #[serde(rename = "fileName")]
    pub file_name: String,
    /// `independent_persistent`, as upstream: not part of VM snapshots.
    #[serde(rename = "diskMode")]
    pub disk_mode: String,
}

impl VirtualDiskSpec {
    /// The disk of VMDK `file` at `controller_key`:`unit_number` with device `key`.
    pub fn new(key: i32, file: &str, controller_key: i32, unit_number: i32, kb: i64) -> Self {
        VirtualDiskSpec {
            xsi_type: "VirtualDisk",
            key,
            backing: DiskBackingSpec {
                xsi_type: "VirtualDiskFlatVer2BackingInfo",
                file_name: file.into(),
                disk_mode: "independent_persistent".into(),
            },
            controller_key,
            unit_number,
            capacity_in_kb: kb,
        }
    }
}

/// `ServiceContent`: the managers the provider uses.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ServiceContent {
    /// The inventory root folder.
    #[serde(rename = "rootFolder")]
    pub root_folder: Moref,
    /// The property collector.
    #[serde(rename = "propertyCollector")]
    pub property_collector: Moref,
    /// The view manager (container views).
    #[serde(rename = "viewManager", default)]
    pub view_manager: Option<Moref>,
    /// The session manager.
    #[serde(rename = "sessionManager", default)]
    pub session_manager: Option<Moref>,
    /// The search index.
    #[serde(rename = "searchIndex", default)]
    pub search_index: Option<Moref>,
    /// The file manager (datastore directories).
    #[serde(rename = "fileManager", default)]
    pub file_manager: Option<Moref>,
    /// The virtual disk manager (VMDK files).
    #[serde(rename = "virtualDiskManager", default)]
    pub virtual_disk_manager: Option<Moref>,
    /// The First Class Disk manager.
    #[serde(rename = "vStorageObjectManager", default)]
    pub vstorage_object_manager: Option<Moref>,
    /// Product information.
    #[serde(default)]
    pub about: About,
}

/// `AboutInfo`, the parts shown in logs.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct About {
    /// `VMware vCenter Server 8.0.2 build-...`.
    #[serde(rename = "fullName", default)]
    pub full_name: String,
    /// API version.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
}

/// `UserSession`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct UserSession {
    /// Who logged in.
    #[serde(rename = "userName", default)]
    pub user_name: String,
}

/// `PropertyFilterSpec`: which properties of which objects.
#[derive(Clone, Debug, Serialize)]
pub struct PropertyFilterSpec {
    /// Properties per object type.
    #[serde(rename = "propSet")]
    pub prop_set: Vec<PropertySpec>,
    /// Objects to start from, and how to traverse from them.
    #[serde(rename = "objectSet")]
    pub object_set: Vec<ObjectSpec>,
}

/// `PropertySpec`.
#[derive(Clone, Debug, Serialize)]
pub struct PropertySpec {
    /// The object type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Property paths, only those needed.
    #[serde(rename = "pathSet")]
    pub path_set: Vec<String>,
}

/// `ObjectSpec`.
#[derive(Clone, Debug, Serialize)]
pub struct ObjectSpec {
    /// The starting object.
    pub obj: Moref,
    /// Leave the starting object itself out of the result.
    pub skip: bool,
    /// Traversals from it.
    #[serde(rename = "selectSet", skip_serializing_if = "Vec::is_empty")]
    pub select_set: Vec<Selection>,
}

/// A `TraversalSpec` (with `kind` and `path`) or a bare `SelectionSpec` reference by name.
#[derive(Clone, Debug, Serialize)]
pub struct Selection {
    #[serde(rename = "@xsi:type", skip_serializing_if = "Option::is_none")]
    xsi_type: Option<&'static str>,
    /// The spec's name, for references.
    pub name: String,
    /// Object type the traversal starts from.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The property to follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Leave the objects reached out of the result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<bool>,
    /// Further traversals from the objects reached.
    #[serde(rename = "selectSet", skip_serializing_if = "Vec::is_empty")]
    pub select_set: Vec<Selection>,
}

impl Selection {
    /// Follow `path` of objects of type `kind`, then `next` (by name).
    pub fn traversal(name: &str, kind: &str, path: &str, skip: bool, next: &[&str]) -> Self {
        Selection {
            xsi_type: Some("TraversalSpec"),
            name: name.into(),
            kind: Some(kind.into()),
            path: Some(path.into()),
            skip: Some(skip),
            select_set: next.iter().map(|n| Selection::reference(n)).collect(),
        }
    }

    /// A reference to the traversal named `name`.
    pub fn reference(name: &str) -> Self {
        Selection {
            xsi_type: None,
            name: name.into(),
            kind: None,
            path: None,
            skip: None,
            select_set: Vec::new(),
        }
    }
}

/// `RetrieveOptions`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RetrieveOptions {
    /// Page size; vCenter may return fewer and a token for the rest.
    #[serde(rename = "maxObjects", skip_serializing_if = "Option::is_none")]
    pub max_objects: Option<u32>,
}

/// `RetrieveResult`: one page of objects.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RetrieveResult {
    /// The objects and their properties.
    #[serde(default)]
    pub objects: Vec<ObjectContent>,
    /// Set when more pages follow (`ContinueRetrievePropertiesEx`).
    #[serde(default)]
    pub token: Option<String>,
}

/// `ObjectContent`: one object and the requested properties it has.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ObjectContent {
    /// The object.
    pub obj: Moref,
    /// Its properties (unset ones are absent).
    #[serde(rename = "propSet", default)]
    pub prop_set: Vec<DynamicProperty>,
}

impl ObjectContent {
    /// The value of property `name`, when set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.prop_set
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.val)
    }

    /// The text value of property `name` (strings, numbers, enums, reference IDs).
    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.text.as_deref())
    }
}

/// `DynamicProperty`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct DynamicProperty {
    /// The property path.
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub val: Value,
}

/// A property value of one of the shapes the provider asks for: text (strings, numbers,
/// enums and managed object references, whose type the path implies), an array of
/// `GuestNicInfo` (`guest.net`), of `DatastoreHostMount` (`Datastore.host`) or of
/// `VirtualDevice` (`config.hardware.device`), or a `LocalizedMethodFault` (`Task.info.error`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Value {
    /// Text content.
    #[serde(rename = "$text", default)]
    pub text: Option<String>,
    /// `ArrayOfGuestNicInfo` items.
    #[serde(rename = "GuestNicInfo", default)]
    pub nics: Vec<GuestNicInfo>,
    /// `ArrayOfDatastoreHostMount` items (`Datastore.host`).
    #[serde(rename = "DatastoreHostMount", default)]
    pub host_mounts: Vec<DatastoreHostMount>,
    /// `ArrayOfVirtualDevice` items (`config.hardware.device`).
    #[serde(rename = "VirtualDevice", default)]
    pub devices: Vec<VirtualDevice>,
    /// A `LocalizedMethodFault`'s fault (`Task.info.error`).
    #[serde(default)]
    pub fault: Option<FaultType>,
    /// A `LocalizedMethodFault`'s message.
    #[serde(rename = "localizedMessage", default)]
    pub localized_message: Option<String>,
    /// `HostDatastoreBrowserSearchResults.file` (a datastore search task's `info.result`).
    #[serde(rename = "file", default)]
    pub files: Vec<FileInfo>,
}

/// A file a datastore search found (`FileInfo`, `VmDiskFileInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct FileInfo {
    /// Its name within the folder searched.
    #[serde(default)]
    pub path: String,
    /// A disk's capacity (`VmDiskFileInfo.capacityKb`), when the server reports it.
    #[serde(rename = "capacityKb", default)]
    pub capacity_kb: Option<i64>,
}

/// The type of a fault inside a `LocalizedMethodFault`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct FaultType {
    /// `FileAlreadyExists`, `FileNotFound`, ...
    #[serde(rename = "@type", default)]
    pub kind: Option<String>,
}

/// A VM's virtual device, the parts disks and their controllers need.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct VirtualDevice {
    /// Its type (`VirtualDisk`, `ParaVirtualSCSIController`, ...).
    #[serde(rename = "@type", default)]
    pub kind: String,
    /// The device key.
    #[serde(default)]
    pub key: i32,
    /// A disk's file.
    #[serde(default)]
    pub backing: Option<DeviceBacking>,
    /// The controller it hangs on.
    #[serde(rename = "controllerKey", default)]
    pub controller_key: Option<i32>,
    /// Its unit on that controller.
    #[serde(rename = "unitNumber", default)]
    pub unit_number: Option<i32>,
    /// A disk's size.
    #[serde(rename = "capacityInKB", default)]
    pub capacity_in_kb: Option<i64>,
    /// A controller's bus.
    #[serde(rename = "busNumber", default)]
    pub bus_number: Option<i32>,
}

/// A device's backing: of a disk, its VMDK and the UUID the guest sees.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct DeviceBacking {
    /// `[datastore] path.vmdk`.
    #[serde(rename = "fileName", default)]
    pub file_name: Option<String>,
    /// The disk UUID (the guest's `wwn-0x...` name).
    #[serde(default)]
    pub uuid: Option<String>,
}

/// `DatastoreHostMount`: a host that mounts a datastore.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct DatastoreHostMount {
    /// The host.
    pub key: Moref,
}

/// `GuestNicInfo`: one guest NIC as VMware Tools reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct GuestNicInfo {
    /// Port group name.
    #[serde(default)]
    pub network: Option<String>,
    /// IP addresses (v4 and v6).
    #[serde(rename = "ipAddress", default)]
    pub ip_address: Vec<String>,
    /// MAC address.
    #[serde(rename = "macAddress", default)]
    pub mac_address: Option<String>,
    /// The virtual device key; -1 for NICs that are not a VM's virtual NIC.
    #[serde(rename = "deviceConfigId", default)]
    pub device_config_id: Option<i32>,
}

/// A method's response envelope.
#[derive(Debug, Deserialize)]
#[serde(bound = "T: Deserialize<'de> + Default")]
pub struct Response<T> {
    #[serde(rename = "Body")]
    body: ResponseBody<T>,
}

#[derive(Debug, Deserialize)]
#[serde(bound = "T: Deserialize<'de> + Default")]
struct ResponseBody<T> {
    #[serde(rename = "$value")]
    response: Returnval<T>,
}

#[derive(Debug, Deserialize)]
#[serde(bound = "T: Deserialize<'de> + Default")]
struct Returnval<T> {
    #[serde(default)]
    returnval: T,
}

impl<T> Response<T> {
    /// The method's `returnval`.
    pub fn into_inner(self) -> T {
        self.body.response.returnval
    }
}

/// A SOAP fault envelope.
#[derive(Debug, Deserialize)]
pub struct FaultEnvelope {
    #[serde(rename = "Body")]
    body: FaultBody,
}

#[derive(Debug, Deserialize)]
struct FaultBody {
    #[serde(rename = "Fault")]
    fault: Fault,
}

#[derive(Debug, Deserialize)]
struct Fault {
    #[serde(default)]
    faultstring: String,
    #[serde(default)]
    detail: Option<FaultDetail>,
}

#[derive(Debug, Deserialize)]
struct FaultDetail {
    #[serde(rename = "$value", default)]
    inner: Option<FaultKind>,
}

/// The fault element's `xsi:type` (quick-xml matches attributes by local name).
#[derive(Debug, Deserialize)]
struct FaultKind {
    #[serde(rename = "@type", default)]
    kind: Option<String>,
}

impl FaultEnvelope {
    /// (fault type, fault string): `("NotAuthenticated", "The session is not authenticated.")`.
    pub fn fault(&self) -> (String, String) {
        let f = &self.body.fault;
        let kind = f
            .detail
            .as_ref()
            .and_then(|d| d.inner.as_ref())
            .and_then(|k| k.kind.clone())
            .unwrap_or_else(|| "Unknown".into());
        (kind, f.faultstring.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_vim25_documents() {
        let xml = FindByUuid::new(
            Moref::new("SearchIndex", "SearchIndex"),
            None,
            "4223-ab".into(),
            true,
        )
        .to_xml()
        .expect("xml");
        assert_eq!(
            xml,
            "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body><FindByUuid xmlns=\"urn:vim25\"><_this type=\"SearchIndex\">SearchIndex</_this><uuid>4223-ab</uuid><vmSearch>true</vmSearch></FindByUuid></soapenv:Body></soapenv:Envelope>"
        );
        let login = Login::new(
            Moref::new("SessionManager", "SM"),
            "u<&>".into(),
            "p".into(),
        )
        .to_xml()
        .expect("xml");
        assert!(
            login.contains("<userName>u&lt;&amp;&gt;</userName><password>p</password>"),
            "{login}"
        );
    }

    #[test]
    fn traversal_specs_carry_xsi_type() {
        let spec = PropertyFilterSpec {
            prop_set: vec![PropertySpec {
                kind: "VirtualMachine".into(),
                path_set: vec!["name".into(), "config.uuid".into()],
            }],
            object_set: vec![ObjectSpec {
                obj: Moref::new("ContainerView", "session[1]"),
                skip: true,
                select_set: vec![Selection::traversal(
                    "v",
                    "ContainerView",
                    "view",
                    false,
                    &[],
                )],
            }],
        };
        let xml = RetrievePropertiesEx::new(
            Moref::new("PropertyCollector", "pc"),
            spec,
            RetrieveOptions::default(),
        )
        .to_xml()
        .expect("xml");
        assert!(xml.contains("<propSet><type>VirtualMachine</type><pathSet>name</pathSet><pathSet>config.uuid</pathSet></propSet>"), "{xml}");
        assert!(xml.contains("<selectSet xsi:type=\"TraversalSpec\"><name>v</name><type>ContainerView</type><path>view</path><skip>false</skip></selectSet>"), "{xml}");
        assert!(
            xml.contains("<options/>") || xml.contains("<options></options>"),
            "{xml}"
        );
    }

    #[test]
    fn property_values_of_every_shape_decode() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><token>t1</token><objects><obj type="VirtualMachine">vm-1</obj><propSet><name>name</name><val xsi:type="xsd:string">DC0_H0_VM0</val></propSet><propSet><name>runtime.host</name><val type="HostSystem" xsi:type="ManagedObjectReference">host-21</val></propSet><propSet><name>guest.net</name><val xsi:type="ArrayOfGuestNicInfo"><GuestNicInfo><network>VM Network</network><ipAddress>10.0.0.1</ipAddress><ipAddress>fe80::1</ipAddress><macAddress>00:50:56:aa</macAddress><connected>true</connected><deviceConfigId>4000</deviceConfigId></GuestNicInfo></val></propSet></objects></returnval></RetrievePropertiesExResponse></soapenv:Body></soapenv:Envelope>"#;
        let r: Response<Option<RetrieveResult>> = quick_xml::de::from_str(xml).expect("decode");
        let r = r.into_inner().expect("result");
        assert_eq!(r.token.as_deref(), Some("t1"));
        let o = &r.objects[0];
        assert_eq!(o.obj, Moref::new("VirtualMachine", "vm-1"));
        assert_eq!(o.text("name"), Some("DC0_H0_VM0"));
        assert_eq!(o.text("runtime.host"), Some("host-21"));
        let nics = &o.get("guest.net").expect("net").nics;
        assert_eq!(nics[0].ip_address, vec!["10.0.0.1", "fe80::1"]);
        assert_eq!(nics[0].device_config_id, Some(4000));
        assert!(o.get("missing").is_none());
    }

    #[test]
    fn empty_and_absent_returnvals_decode() {
        let none = r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><FindByUuidResponse xmlns="urn:vim25"></FindByUuidResponse></soapenv:Body></soapenv:Envelope>"#;
        let r: Response<Option<Moref>> = quick_xml::de::from_str(none).expect("decode");
        assert_eq!(r.into_inner(), None);
        let all = r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><FindAllByUuidResponse xmlns="urn:vim25"><returnval type="VirtualMachine">vm-1</returnval><returnval type="VirtualMachine">vm-2</returnval></FindAllByUuidResponse></soapenv:Body></soapenv:Envelope>"#;
        let r: Response<Vec<Moref>> = quick_xml::de::from_str(all).expect("decode");
        assert_eq!(r.into_inner().len(), 2);
        let logout = r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><LogoutResponse xmlns="urn:vim25"></LogoutResponse></soapenv:Body></soapenv:Envelope>"#;
        let _: Response<()> = quick_xml::de::from_str(logout).expect("decode");
    }

    #[test]
    fn faults_name_their_type() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Login failure</faultstring><detail><InvalidLoginFault xmlns="urn:vim25" xsi:type="InvalidLogin"></InvalidLoginFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#;
        let f: FaultEnvelope = quick_xml::de::from_str(xml).expect("decode");
        assert_eq!(f.fault(), ("InvalidLogin".into(), "Login failure".into()));
        let na = r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>session not authenticated</faultstring><detail><NotAuthenticatedFault xmlns="urn:vim25" xsi:type="NotAuthenticated"><object type="Folder">group-d1</object><privilegeId>System.View</privilegeId></NotAuthenticatedFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#;
        let f: FaultEnvelope = quick_xml::de::from_str(na).expect("decode");
        assert_eq!(f.fault().0, "NotAuthenticated");
    }
}
