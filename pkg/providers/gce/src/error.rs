//! The crate's own errors. Provider trait methods return [`hypercloud_cloudprovider::Error`];
//! these convert into it where they cross that boundary ([`Error::into_provider_error`]).

/// Errors of configuration, of the Compute Engine API and of the metadata server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `gce.conf` is not valid.
    #[error("invalid cloud config {origin}: {message}")]
    ParseCloudConfig {
        /// The file, or where the bytes came from.
        origin: String,
        /// What is wrong, naming the line and key.
        message: String,
    },

    /// Building the HTTP client failed.
    #[error("building the HTTP client")]
    BuildHttpClient(#[from] hypercloud_cloudprovider::http_client::HttpClientError),

    /// The request did not reach the API or no answer came back.
    #[error("{operation}: {message}")]
    Transport {
        /// The API call (`instances.get`).
        operation: String,
        /// Why.
        message: String,
    },

    /// Compute Engine answered with an error.
    #[error("{operation}: HTTP {status} {reason}: {message}")]
    Api {
        /// The API call.
        operation: String,
        /// HTTP status.
        status: u16,
        /// GCE's reason (`notFound`, `conditionNotMet`, ...).
        reason: String,
        /// GCE's message.
        message: String,
    },

    /// An operation finished with an error.
    #[error("{operation}: operation {name} failed: {message}")]
    Operation {
        /// The API call that started it.
        operation: String,
        /// The operation's name.
        name: String,
        /// Its errors.
        message: String,
    },

    /// The answer could not be read.
    #[error("{operation}: unexpected answer: {message}")]
    Decode {
        /// The API call.
        operation: String,
        /// What could not be read.
        message: String,
    },

    /// A listing's pages did not end (a repeated `nextPageToken`, or too many pages).
    #[error(transparent)]
    Paginate(#[from] hypercloud_cloudprovider::pager::PagerError),

    /// A credentials file (service-account key) could not be read.
    #[error("reading credentials")]
    ReadCredentials(#[source] hypercloud_cloudprovider::input::InputFileError),

    /// Credentials that cannot be used: where they came from (the variable or key and the
    /// file) and what is wrong, never the key itself.
    #[error("credentials {origin}: {message}")]
    Credentials {
        /// Where the credentials came from (`GOOGLE_APPLICATION_CREDENTIALS /path/key.json`).
        origin: String,
        /// What is wrong.
        message: String,
    },

    /// No access token could be got.
    #[error("getting an access token with {origin}: {message}")]
    Token {
        /// The credentials used (`service-account key /path (sa@p.iam.gserviceaccount.com)`).
        origin: String,
        /// Why not: the token endpoint's error (an excerpt), or the transport's.
        message: String,
    },

    /// The metadata server did not answer as expected.
    #[error("metadata server {path}: {message}")]
    Metadata {
        /// The metadata path.
        path: String,
        /// Why.
        message: String,
    },

    /// A Service annotation this provider implements has a value it cannot take.
    #[error("service {service}: annotation {annotation}: {message}")]
    ServiceAnnotation {
        /// `namespace/name`.
        service: String,
        /// The annotation's name.
        annotation: &'static str,
        /// What is wrong with its value.
        message: String,
    },

    /// Something the configuration needs is missing (no project ID, no zone).
    #[error("{0}")]
    Missing(String),

    /// A StorageClass parameter of `kubernetes.io/gce-pd` that is unknown or names what the
    /// provider cannot make (a regional disk, a disk type GCE does not have).
    #[error("StorageClass parameters of kubernetes.io/gce-pd: {0}")]
    PdParameters(String),

    /// A disk that cannot be created as asked (its zone is not one of the managed zones).
    #[error("creating disk {disk}: {reason}")]
    CreateDisk {
        /// The disk's name.
        disk: String,
        /// Why not.
        reason: String,
    },

    /// Deleting a disk that an instance still uses (upstream's `DeletedVolumeInUseError`;
    /// the caller retries once it is detached).
    #[error("deleting disk {disk}: the disk is in use: {message}")]
    DeleteDiskInUse {
        /// The disk's name.
        disk: String,
        /// GCE's words.
        message: String,
    },

    /// Attaching a disk that another instance uses read-write (or that would be shared
    /// read-write): refused before GCE is asked.
    #[error(
        "attaching disk {disk} to {instance}: it is attached to a different instance ({other})"
    )]
    AttachDisk {
        /// The disk's name.
        disk: String,
        /// The instance it was to be attached to.
        instance: String,
        /// The instance that has it.
        other: String,
    },

    /// A disk name found in more than one managed zone (upstream refuses to guess which).
    #[error("GCE PD name was found in multiple zones: {0:?}")]
    DiskInSeveralZones(String),

    /// The device path of a disk that is not attached to the instance.
    #[error("device path of disk {disk}: it is not attached to {instance}")]
    DiskPath {
        /// The disk's name.
        disk: String,
        /// The instance.
        instance: String,
    },

    /// A provider ID that is not `gce://<project>/<zone>/<name>`.
    #[error("invalid GCE provider ID {0:?}: want gce://<project>/<zone>/<instance>")]
    ProviderId(String),
}

impl Error {
    /// Whether GCE says the resource does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { status: 404, .. })
    }

    /// Whether GCE answered with this error reason (`alreadyExists`,
    /// `resourceInUseByAnotherResource`).
    pub fn has_reason(&self, wanted: &str) -> bool {
        matches!(self, Error::Api { reason, .. } if reason == wanted)
    }
}

impl hypercloud_cloudprovider::ProviderError for Error {
    const PROVIDER: &'static str = crate::PROVIDER_NAME;

    fn operation(&self) -> String {
        match self {
            Error::Transport { operation, .. }
            | Error::Api { operation, .. }
            | Error::Operation { operation, .. }
            | Error::Decode { operation, .. } => operation.clone(),
            Error::Metadata { .. } => "metadata".into(),
            Error::Token { .. } => "token".into(),
            Error::PdParameters(_) => "storage class parameters".into(),
            Error::CreateDisk { .. } => "disks.insert".into(),
            Error::DeleteDiskInUse { .. } => "disks.delete".into(),
            Error::AttachDisk { .. } => "instances.attachDisk".into(),
            Error::DiskPath { .. } => "instances.get".into(),
            Error::DiskInSeveralZones(_) => "disks.get".into(),
            Error::Paginate(p) => p.call().into(),
            Error::ServiceAnnotation { .. } => "ensure load balancer".into(),
            _ => "configure".into(),
        }
    }

    fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            Error::DeleteDiskInUse { .. } => Some(400),
            _ => None,
        }
    }

    fn startup(self) -> hypercloud_cloudprovider::Startup<Self> {
        match self {
            Error::ParseCloudConfig { origin, message } => {
                hypercloud_cloudprovider::Startup::InvalidConfig { origin, message }
            }
            Error::ReadCredentials(e) => hypercloud_cloudprovider::Startup::UnreadableFile(e),
            other => hypercloud_cloudprovider::Startup::Other(other),
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
