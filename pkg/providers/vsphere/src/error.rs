//! The crate's own errors. Provider trait methods return [`hypercloud_cloudprovider::Error`];
//! these convert into it where they cross that boundary ([`Error::into_provider_error`]).

/// Errors of configuration and of the vSphere APIs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `vsphere.conf` (INI or YAML) is not valid.
    #[error("invalid cloud config {origin}: {message}")]
    ParseCloudConfig {
        /// The file, or where the bytes came from.
        origin: String,
        /// What is wrong, naming the section and key.
        message: String,
    },

    /// Building the HTTP client failed (a CA file that is not PEM, for instance).
    #[error("building the HTTP client")]
    BuildHttpClient(#[source] hypercloud_cloudprovider::http_client::HttpClientError),

    /// A file the cloud config names (`ca-file`) is missing, not a regular file or over the
    /// 1 MiB limit.
    #[error(transparent)]
    ReadInput(#[from] hypercloud_cloudprovider::input::InputFileError),

    /// The request did not reach vCenter or no answer came back.
    #[error("{operation}: {message}")]
    Transport {
        /// The SOAP method or REST call.
        operation: String,
        /// Why.
        message: String,
    },

    /// A `RetrievePropertiesEx` listing's continuation tokens did not end.
    #[error(transparent)]
    Paginate(#[from] hypercloud_cloudprovider::pager::PagerError),

    /// vCenter answered a SOAP call with a fault.
    #[error("{operation}: vCenter fault {fault}: {message}")]
    Fault {
        /// The SOAP method.
        operation: String,
        /// The fault type (`InvalidLogin`, `NotAuthenticated`, `ManagedObjectNotFound`, ...).
        fault: String,
        /// The fault string.
        message: String,
    },

    /// vCenter answered with something this client cannot read.
    #[error("{operation}: unexpected answer (HTTP {status}): {message}")]
    Decode {
        /// The SOAP method or REST call.
        operation: String,
        /// HTTP status.
        status: u16,
        /// What could not be read.
        message: String,
    },

    /// A vAPI (REST) call failed.
    #[error("{operation}: vAPI answered HTTP {status}: {message}")]
    Rest {
        /// The REST call.
        operation: String,
        /// HTTP status.
        status: u16,
        /// The body, shortened.
        message: String,
    },

    /// The user name or password was refused.
    #[error("logging in to vCenter {server} as {user:?}: the user name or password is not valid ({fault})")]
    InvalidLogin {
        /// `host:port`.
        server: String,
        /// The configured user.
        user: String,
        /// vCenter's fault string.
        fault: String,
    },

    /// A call to one of several vCenters failed: which one (errors that name their vCenter
    /// already, and every error with one vCenter, are not wrapped).
    #[error("vCenter {server}")]
    AtVCenter {
        /// `host:port`.
        server: String,
        /// What failed there.
        source: Box<Error>,
    },

    /// A configured datacenter is not in the inventory.
    #[error("datacenter {name:?} (configured in datacenters) does not exist in vCenter {server}; it has: {known}")]
    UnknownDatacenter {
        /// The configured name.
        name: String,
        /// `host:port`.
        server: String,
        /// Comma-separated datacenters vCenter has.
        known: String,
    },

    /// A StorageClass parameter of `kubernetes.io/vsphere-volume` that is unknown, or that
    /// names what the provider cannot do (storage policies, vSAN capabilities).
    #[error("StorageClass parameters of kubernetes.io/vsphere-volume: {0}")]
    VolumeParameters(String),

    /// A volume path that is not `[datastore] path/disk.vmdk`.
    #[error("{path:?} is not a vSphere volume path ([datastore] path/disk.vmdk)")]
    VolumePath {
        /// The path as given.
        path: String,
    },

    /// A datastore that no datacenter in scope has.
    #[error("datastore {datastore:?} is not in any datacenter in scope")]
    UnknownDatastore {
        /// The datastore's name.
        datastore: String,
    },

    /// No datastore for a volume in a zone (upstream `getDatastoresForZone`): no host is in
    /// the zone, no datastore is mounted on all of its hosts, or no zone category is set.
    #[error("choosing a datastore in zone {zone:?}: {reason}")]
    ZoneDatastore {
        /// The zone asked for.
        zone: String,
        /// Why none fits.
        reason: String,
    },

    /// A vCenter task that failed (`info.state` = `error`).
    #[error("{operation}: task {task} failed: {fault}: {message}")]
    Task {
        /// The method that started the task.
        operation: String,
        /// The task's ID.
        task: String,
        /// The fault type (`FileAlreadyExists`, `FileNotFound`, ...).
        fault: String,
        /// The fault's localized message.
        message: String,
    },

    /// A vCenter task that did not finish in time.
    #[error("{operation}: task {task} still {state} after {waited:?} (task-timeout)")]
    TaskTimeout {
        /// The method that started the task.
        operation: String,
        /// The task's ID.
        task: String,
        /// Its last state (`queued`, `running`).
        state: String,
        /// How long it was waited for (`[Hypercloud] task-timeout`).
        waited: std::time::Duration,
    },

    /// Attaching a disk that another VM has: refused before vCenter is asked (vSphere locks
    /// a VMDK to one powered-on VM).
    #[error("attaching disk {disk} to VM {vm}: it is attached to a different VM ({other})")]
    AttachDisk {
        /// The volume path.
        disk: String,
        /// The VM it was to be attached to.
        vm: String,
        /// The VM that has it.
        other: String,
    },

    /// A VM whose SCSI controllers are full and whose four SCSI buses are taken.
    #[error("attaching disk {disk} to VM {vm}: every unit of its SCSI controllers and every SCSI bus is taken")]
    NoFreeScsiUnit {
        /// The volume path.
        disk: String,
        /// The VM.
        vm: String,
    },

    /// Deleting a disk a VM still has (upstream's `DeletedVolumeInUseError`; the caller
    /// retries once it is detached).
    #[error("deleting disk {disk}: the disk is attached to VM {vm}")]
    DeleteDiskInUse {
        /// The volume path.
        disk: String,
        /// The VM that has it.
        vm: String,
    },

    /// Growing a `kubernetes.io/vsphere-volume` disk: the in-tree plugin of Kubernetes v1.20
    /// cannot (only the vSphere CSI driver can).
    #[error("expanding disk {disk}: the in-tree kubernetes.io/vsphere-volume plugin does not support volume expansion (as upstream v1.20); use the vSphere CSI driver (csi.vsphere.vmware.com)")]
    ExpandVolume {
        /// The volume path.
        disk: String,
    },

    /// The device path of a disk that is not attached to the VM.
    #[error("device path of disk {disk}: it is not attached to VM {vm}")]
    DiskPath {
        /// The volume path.
        disk: String,
        /// The VM.
        vm: String,
    },

    /// The local SMBIOS UUID could not be read.
    #[error("reading this machine's VM UUID from {path}: {message}")]
    ReadProductUuid {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

impl From<hypercloud_cloudprovider::http_client::HttpClientError> for Error {
    fn from(e: hypercloud_cloudprovider::http_client::HttpClientError) -> Self {
        match e {
            // The unreadable file keeps its own error (naming the key), as every input file.
            hypercloud_cloudprovider::http_client::HttpClientError::ReadCaFile(e) => {
                Error::ReadInput(e)
            }
            other => Error::BuildHttpClient(other),
        }
    }
}

impl Error {
    /// Whether vCenter says the session is gone (expired or logged out): log in again.
    pub fn is_not_authenticated(&self) -> bool {
        matches!(self, Error::Fault { fault, .. } if fault == "NotAuthenticated")
            || matches!(self, Error::Rest { status: 401, .. })
    }
}

impl hypercloud_cloudprovider::ProviderError for Error {
    const PROVIDER: &'static str = crate::PROVIDER_NAME;

    fn operation(&self) -> String {
        match self {
            Error::AtVCenter { source, .. } => source.operation(),
            Error::Transport { operation, .. }
            | Error::Fault { operation, .. }
            | Error::Decode { operation, .. }
            | Error::Rest { operation, .. } => operation.clone(),
            Error::InvalidLogin { .. } => "Login".into(),
            Error::UnknownDatacenter { .. } | Error::UnknownDatastore { .. } => {
                "FindByInventoryPath".into()
            }
            Error::VolumeParameters(_) => "storage class parameters".into(),
            Error::ZoneDatastore { .. } => "choose datastore".into(),
            Error::VolumePath { .. } => "parse volume path".into(),
            Error::Task { operation, .. } | Error::TaskTimeout { operation, .. } => {
                operation.clone()
            }
            Error::AttachDisk { .. } | Error::NoFreeScsiUnit { .. } => "ReconfigVM_Task".into(),
            Error::DeleteDiskInUse { .. } => "DeleteVirtualDisk_Task".into(),
            Error::ExpandVolume { .. } => "ExtendVirtualDisk_Task".into(),
            Error::DiskPath { .. } => "RetrievePropertiesEx".into(),
            _ => "configure".into(),
        }
    }

    fn status(&self) -> Option<u16> {
        match self {
            Error::AtVCenter { source, .. } => source.status(),
            Error::Decode { status, .. } | Error::Rest { status, .. } => Some(*status),
            Error::Fault { .. } | Error::Task { .. } => Some(500),
            _ => None,
        }
    }

    fn startup(self) -> hypercloud_cloudprovider::Startup<Self> {
        match self {
            Error::ParseCloudConfig { origin, message } => {
                hypercloud_cloudprovider::Startup::InvalidConfig { origin, message }
            }
            Error::ReadInput(e) => hypercloud_cloudprovider::Startup::UnreadableFile(e),
            other => hypercloud_cloudprovider::Startup::Other(other),
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
