//! The crate's own errors: of configuration, and of the Resource Manager client ([`crate::client`]).
//! A failed ARM call names the operation (`PUT virtualMachines/vm1 (resource group rg)`) and
//! carries what ARM said (`error.code`, `error.message`, the HTTP status) as short excerpts;
//! causes stay `source`s.

use hypercloud_cloudprovider::http_body::BodyError;
use hypercloud_cloudprovider::http_client::HttpClientError;
use hypercloud_cloudprovider::input::InputFileError;
use hypercloud_cloudprovider::pager::PagerError;
use hypercloud_cloudprovider::wait::TimedOut;

/// Errors of configuration (`azure.json`, the Azure Stack environment file) and of Azure
/// Resource Manager calls.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `azure.json` is not valid.
    #[error("invalid cloud config {origin}: {message}")]
    ParseCloudConfig {
        /// The file, or where the bytes came from.
        origin: String,
        /// What is wrong, naming the key.
        message: String,
    },

    /// `cloud` is `AzureStackCloud` but the environment variable naming its environment file
    /// is not set.
    #[error("cloud {cloud}: its endpoints are read from the file named by ${variable}, which is not set")]
    EnvironmentFileUnset {
        /// The cloud's name.
        cloud: &'static str,
        /// `AZURE_ENVIRONMENT_FILEPATH`.
        variable: &'static str,
    },

    /// The environment file could not be read.
    #[error("reading the Azure environment file {path}")]
    ReadEnvironmentFile {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },

    /// The environment file is not valid.
    #[error("invalid Azure environment file {origin}: {message}")]
    ParseEnvironment {
        /// The file, or where the bytes came from.
        origin: String,
        /// What is wrong, naming the key.
        message: String,
    },

    /// Building the HTTP client (its trusted CAs, timeouts) failed.
    #[error("building the HTTP client of Azure Resource Manager")]
    BuildHttpClient(#[from] HttpClientError),

    /// An endpoint of the environment is not a URL the client can use.
    #[error("{what} {url:?} is not a usable URL: {message}")]
    Endpoint {
        /// Which endpoint (`resourceManagerEndpoint`).
        what: &'static str,
        /// The value.
        url: String,
        /// Why not.
        message: String,
    },

    /// The credential of `azure.json` could not be set up.
    #[error("setting up the {credential} credential")]
    NewCredential {
        /// `client secret`, `client certificate`, `managed identity`.
        credential: &'static str,
        /// The SDK's reason.
        source: azure_core::Error,
    },

    /// The client certificate (`aadClientCertPath`) could not be read.
    #[error("reading the client certificate")]
    ReadClientCertificate(#[source] InputFileError),

    /// The client certificate file is not one hypercloud can use.
    #[error("client certificate {path}: {message}")]
    ParseClientCertificate {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },

    /// No access token could be had for a call (the credential's error is the source).
    #[error("{operation}: getting an access token")]
    Authenticate {
        /// The call, or `authenticate` when a token was asked for on its own.
        operation: String,
        /// The credential's error.
        source: azure_core::Error,
    },

    /// The instance metadata service did not give a token.
    #[error("managed identity token from {endpoint}: {message}")]
    ImdsToken {
        /// The IMDS endpoint.
        endpoint: String,
        /// What went wrong, with an excerpt of the answer.
        message: String,
    },

    /// The request did not reach Resource Manager, or no answer came back.
    #[error("{operation}: sending the request")]
    Send {
        /// The call.
        operation: String,
        /// The transport's error.
        source: azure_core::Error,
    },

    /// The resource does not exist (HTTP 404): the one error a provider matches on.
    #[error("{operation}: not found (HTTP 404 {code}): {message}")]
    NotFound {
        /// The call.
        operation: String,
        /// ARM's `error.code` (`ResourceNotFound`, `ResourceGroupNotFound`).
        code: String,
        /// ARM's `error.message`, as an excerpt.
        message: String,
    },

    /// Resource Manager answered with an error (after `attempts` tries when it was worth
    /// repeating: 429 and 5xx).
    #[error("{operation}: HTTP {status} {code}: {message}{}", gave_up(*attempts))]
    Arm {
        /// The call.
        operation: String,
        /// The HTTP status.
        status: u16,
        /// ARM's `error.code` (empty when the body had none).
        code: String,
        /// ARM's `error.message`, or an excerpt of the body.
        message: String,
        /// Attempts made.
        attempts: u32,
    },

    /// A long-running operation ended `Failed` or `Canceled`.
    #[error("{operation}: the operation ended {status}: {code}: {message}")]
    OperationFailed {
        /// The call that started it.
        operation: String,
        /// `Failed`, `Canceled` (as ARM spelled it, an excerpt).
        status: String,
        /// The operation's `error.code`.
        code: String,
        /// The operation's `error.message`.
        message: String,
    },

    /// A long-running operation did not end within the client's operation timeout.
    #[error("{operation}: waiting for the long-running operation")]
    OperationTimedOut {
        /// The call that started it.
        operation: String,
        /// The last state seen and how long it waited.
        source: TimedOut,
    },

    /// An answer that breaks ARM's protocol (an operation status without `status`, a poll
    /// URL that is not https).
    #[error("{operation}: {message}")]
    Protocol {
        /// The call.
        operation: String,
        /// What was wrong, quoting excerpts.
        message: String,
    },

    /// The answer could not be read (too large, or the connection broke).
    #[error("{operation}: reading the answer")]
    ReadBody {
        /// The call.
        operation: String,
        /// Why.
        source: BodyError,
    },

    /// The answer is not the JSON expected.
    #[error("{operation}: the answer is not the JSON expected (at {path}): {excerpt}")]
    Decode {
        /// The call.
        operation: String,
        /// Where in the document (`properties.storageProfile.dataDisks[0].lun`, `.` for the top).
        path: String,
        /// The start of the answer.
        excerpt: String,
        /// serde's error.
        source: serde_json::Error,
    },

    /// A listing's `nextLink`s did not end.
    #[error(transparent)]
    Paginate(#[from] PagerError),

    /// A provider ID is not one of this provider's
    /// (`azure:///subscriptions/<s>/resourceGroups/<g>/providers/Microsoft.Compute/virtualMachines/<name>`).
    #[error("provider ID {0:?} is not an Azure VM's (azure:///subscriptions/<s>/resourceGroups/<g>/providers/Microsoft.Compute/virtualMachines/<name>)")]
    ProviderId(String),

    /// The instance metadata service did not answer what the local VM is.
    #[error("instance metadata {path}: {message}")]
    Imds {
        /// What was asked.
        path: String,
        /// What went wrong.
        message: String,
    },

    /// What ARM answered lacks something the provider needs.
    #[error("{what}: {message}")]
    Missing {
        /// Whose.
        what: String,
        /// What is missing.
        message: String,
    },

    /// A volume ID (a PV's `diskURI`) is not a managed disk's resource ID.
    #[error("{0:?} is not a managed disk's resource ID (/subscriptions/<s>/resourceGroups/<g>/providers/Microsoft.Compute/disks/<name>)")]
    DiskUri(String),

    /// A `kubernetes.io/azure-disk` StorageClass parameter is refused (the message names it).
    #[error("{0}")]
    DiskParameters(String),

    /// A disk still attached to a VM is not deleted.
    #[error("disk {disk} is attached to VM {vm}; it can be deleted once detached")]
    DeleteAttachedDisk {
        /// The disk's name.
        disk: String,
        /// The VM it is attached to.
        vm: String,
    },

    /// Only an unattached disk is grown (upstream v1.20).
    #[error("disk {disk} is {state} (VM {vm:?}); only an Unattached disk can be resized")]
    ResizeAttachedDisk {
        /// The disk's name.
        disk: String,
        /// Its `diskState`.
        state: String,
        /// The VM it is attached to, if ARM says.
        vm: String,
    },

    /// The disk is attached to another VM (upstream's dangling-attach error).
    #[error(
        "disk {disk} is attached to VM {other}, not {vm}; a disk is attached to one VM at a time"
    )]
    AttachDiskElsewhere {
        /// The disk's name.
        disk: String,
        /// The VM it was to be attached to.
        vm: String,
        /// The VM it is attached to.
        other: String,
    },

    /// Every LUN of the VM (0 to 63) is in use.
    #[error("VM {vm} has a data disk on every LUN (0 to 63); disk {disk} has none left")]
    NoFreeLun {
        /// The disk's name.
        disk: String,
        /// The VM.
        vm: String,
    },

    /// The disk is not among the VM's data disks.
    #[error("disk {disk} is not attached to VM {vm}")]
    DiskNotAttached {
        /// The disk's name.
        disk: String,
        /// The VM.
        vm: String,
    },

    /// A Service asks its load balancer for something this provider cannot do with the value
    /// given (an annotation's value, a spec field), found before any cloud call.
    #[error("service {service}: {setting}: {message}")]
    ServiceSetting {
        /// `namespace/name`.
        service: String,
        /// `annotation <name>` or the spec field.
        setting: String,
        /// What is wrong.
        message: String,
    },

    /// The cloud's resources do not allow the Service's load balancer (a public IP named by
    /// the Service that does not exist, no free security rule priority, too many rules).
    #[error("service {service}: {message}")]
    LoadBalancer {
        /// `namespace/name`.
        service: String,
        /// What stands in the way.
        message: String,
    },
}

fn gave_up(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (gave up after {attempts} attempts)")
    } else {
        String::new()
    }
}

impl Error {
    /// Whether ARM said the resource (or its group) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// ARM's HTTP status, for errors that have one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::NotFound { .. } => Some(404),
            Error::Arm { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// ARM's `error.code` (or an operation's), for errors that have one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::NotFound { code, .. }
            | Error::Arm { code, .. }
            | Error::OperationFailed { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl hypercloud_cloudprovider::ProviderError for Error {
    const PROVIDER: &'static str = crate::PROVIDER_NAME;

    fn operation(&self) -> String {
        match self {
            Error::Authenticate { operation, .. }
            | Error::Send { operation, .. }
            | Error::NotFound { operation, .. }
            | Error::Arm { operation, .. }
            | Error::OperationFailed { operation, .. }
            | Error::OperationTimedOut { operation, .. }
            | Error::Protocol { operation, .. }
            | Error::ReadBody { operation, .. }
            | Error::Decode { operation, .. } => operation.clone(),
            Error::ImdsToken { .. } | Error::Imds { .. } => "instance metadata".into(),
            Error::Paginate(p) => p.call().into(),
            Error::ProviderId(_) => "parse provider ID".into(),
            Error::Missing { what, .. } => what.clone(),
            Error::DiskUri(_) => "parse disk URI".into(),
            Error::DiskParameters(_) => "read StorageClass parameters".into(),
            Error::DeleteAttachedDisk { disk, .. } => format!("delete disk {disk}"),
            Error::ResizeAttachedDisk { disk, .. } => format!("resize disk {disk}"),
            Error::AttachDiskElsewhere { disk, vm, .. } | Error::NoFreeLun { disk, vm } => {
                format!("attach disk {disk} to VM {vm}")
            }
            Error::DiskNotAttached { disk, .. } => format!("find the LUN of disk {disk}"),
            Error::ServiceSetting { .. } => "check service".into(),
            Error::LoadBalancer { .. } => "ensure load balancer".into(),
            _ => "configure".into(),
        }
    }

    fn status(&self) -> Option<u16> {
        Error::status(self)
    }

    fn startup(self) -> hypercloud_cloudprovider::Startup<Self> {
        match self {
            Error::ParseCloudConfig { origin, message } => {
                hypercloud_cloudprovider::Startup::InvalidConfig { origin, message }
            }
            other => hypercloud_cloudprovider::Startup::Other(other),
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
