//! The one error type of the provider contract.
//!
//! The first variants are the sentinel errors callers branch on, as upstream
//! (`cloudprovider.InstanceNotFound`, `NotImplemented`, `ImplementedElsewhere`); `Cloud` carries
//! a provider's own failure with the cloud's status code and request ID; the rest are the
//! registry's start-up errors, which name the flag or file at fault.

use std::path::PathBuf;

/// Errors of providers and of the provider registry.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The instance does not exist in the cloud.
    #[error("instance not found")]
    InstanceNotFound,

    /// The disk (volume) does not exist in the cloud.
    #[error("disk not found")]
    DiskNotFound,

    /// The provider does not implement this method.
    #[error("unimplemented")]
    NotImplemented,

    /// Another component owns this object (e.g. a load balancer managed by another
    /// controller); callers skip it without reporting an error.
    #[error("implemented elsewhere")]
    ImplementedElsewhere,

    /// The cloud API answered with an error, or a call to it failed. The provider's own
    /// error is the `source`; [`Chain`] shows it after this one's words.
    #[error("{provider}: {operation} failed{}{}",
        status.map(|s| format!(" (HTTP {s})")).unwrap_or_default(),
        request_id.as_ref().map(|r| format!(" [request {r}]")).unwrap_or_default())]
    Cloud {
        /// Provider name.
        provider: String,
        /// What was attempted, e.g. `list servers`.
        operation: String,
        /// HTTP status from the cloud, when there was a response.
        status: Option<u16>,
        /// The cloud's request ID, for its operators.
        request_id: Option<String>,
        /// The provider's error (or the cloud's own words, as a [`Message`]).
        source: BoxError,
    },

    /// `--cloud-provider` names no compiled-in provider.
    #[error("--cloud-provider: unknown cloud provider {name:?}; compiled-in providers: {known} (or \"external\")")]
    UnknownProvider {
        /// The name given.
        name: String,
        /// Comma-separated compiled-in names.
        known: String,
    },

    /// The `--cloud-config` file could not be read.
    #[error("--cloud-config: cannot read {}", path.display())]
    ReadCloudConfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// The cloud config was read but is not valid for the provider.
    #[error("--cloud-config: invalid {provider} cloud config {origin}: {message}")]
    InvalidCloudConfig {
        /// Provider name.
        provider: String,
        /// The file path, or where the bytes came from.
        origin: String,
        /// What is wrong, naming the line or field.
        message: String,
    },

    /// The provider needs a cloud config and none was given.
    #[error("--cloud-config: cloud provider {provider:?} needs a cloud config file")]
    MissingCloudConfig {
        /// Provider name.
        provider: String,
    },

    /// A setting the provider (or its SDK) takes from the environment or from a file of its
    /// own (an AWS credential variable, the shared config file) is unusable. Named, never
    /// quoted: it may be a secret.
    #[error("{provider}: {setting}: {message}")]
    InvalidSetting {
        /// Provider name.
        provider: String,
        /// The variable, file or key (`AWS_SECRET_ACCESS_KEY`, `~/.aws/config`).
        setting: String,
        /// What is wrong.
        message: String,
        /// The file that could not be read, if that is the problem.
        source: Option<Box<crate::input::InputFileError>>,
    },

    /// `initialize` failed.
    #[error("initializing cloud provider {provider}")]
    Initialize {
        /// Provider name.
        provider: String,
        /// Why: the provider's error.
        source: BoxError,
    },

    /// Writing a `--trace-cloud-calls` record failed.
    #[error("--trace-cloud-calls: cannot open {}", path.display())]
    OpenTraceFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// A Service asks its load balancer for something the provider's table
    /// ([`crate::lb_settings`]) refuses: an upstream annotation or a Service field it does not
    /// implement.
    #[error("{setting} is not supported by hypercloud's {provider} provider: {why}")]
    UnsupportedServiceSetting {
        /// Provider name.
        provider: String,
        /// `annotation <name>`, or the field and value.
        setting: String,
        /// Why the provider cannot do it.
        why: &'static str,
    },

    /// A provider webhook could not answer an AdmissionReview (the webhook server answers
    /// HTTP 500 with this message).
    #[error("webhook {webhook}: {message}")]
    Admission {
        /// The webhook's name.
        webhook: String,
        /// Why.
        message: String,
    },

    /// An SSH key or user name that would not make exactly one entry of the cloud's key list
    /// (`AddSSHKeyToAllInstances`).
    #[error("refusing the SSH key")]
    RefusedSshKey(#[source] crate::ssh::SshError),

    /// Registering the call metrics failed (a name clash in the Prometheus registry).
    #[error("registering cloud provider metrics")]
    RegisterMetrics(#[from] prometheus::Error),
}

/// A provider's own error, kept whole as the `source` of the contract's errors.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Words that are the whole cause: what the cloud said (a shortened body), or a condition the
/// provider found (two servers of one name). The `source` of an [`Error::Cloud`] that has no
/// typed error below it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Message(pub String);

/// A provider crate's own error, as the contract sees it: which call failed, with the cloud's
/// status and request ID where there was an answer. The one mapping into [`Error::Cloud`] and
/// the start-up errors, so that each provider says only what is its own.
pub trait ProviderError: std::error::Error + Send + Sync + Sized + 'static {
    /// The provider's registered name.
    const PROVIDER: &'static str;

    /// What was attempted (`instances.get`, `Login`), for [`Error::Cloud`].
    fn operation(&self) -> String;

    /// The cloud's HTTP status, when there was an answer.
    fn status(&self) -> Option<u16> {
        None
    }

    /// The cloud's request ID, when it sent one.
    fn request_id(&self) -> Option<String> {
        None
    }

    /// Which start-up error this is: the parts of a config error, an unreadable file, or
    /// anything else (which becomes [`Error::Initialize`]).
    fn startup(self) -> Startup<Self> {
        Startup::Other(self)
    }

    /// As the provider contract's error of a call: [`Error::Cloud`] keeping `self` as source.
    fn into_provider_error(self) -> Error {
        self.into_provider_error_as(Self::PROVIDER)
    }

    /// [`ProviderError::into_provider_error`] for a provider registered under another name
    /// too (openstack's `local` preset).
    fn into_provider_error_as(self, provider: &str) -> Error {
        Error::Cloud {
            provider: provider.into(),
            operation: self.operation(),
            status: self.status(),
            request_id: self.request_id(),
            source: Box::new(self),
        }
    }

    /// As the provider contract's start-up error.
    fn into_cloud_config_error(self) -> Error {
        self.into_cloud_config_error_as(Self::PROVIDER)
    }

    /// [`ProviderError::into_cloud_config_error`] for a provider registered under another name
    /// too.
    fn into_cloud_config_error_as(self, provider: &str) -> Error {
        match self.startup() {
            Startup::InvalidConfig { origin, message } => Error::InvalidCloudConfig {
                provider: provider.into(),
                origin,
                message,
            },
            Startup::UnreadableFile(e) => Error::unreadable_file(provider, e),
            Startup::Other(e) => Error::Initialize {
                provider: provider.into(),
                source: Box::new(e),
            },
        }
    }
}

/// `?` on a provider's own error in a provider trait method: [`ProviderError::into_provider_error`].
impl<E: ProviderError> From<E> for Error {
    fn from(e: E) -> Self {
        e.into_provider_error()
    }
}

/// What a provider's start-up failure is, for [`ProviderError::into_cloud_config_error`].
pub enum Startup<E> {
    /// The cloud config is not valid: where, and what is wrong.
    InvalidConfig {
        /// The file, or where the bytes came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A file the config or environment names could not be read.
    UnreadableFile(crate::input::InputFileError),
    /// Any other failure: [`Error::Initialize`] with it as source.
    Other(E),
}

impl Error {
    /// [`Error::Cloud`] whose whole cause is `message` (no status, no request ID).
    pub fn cloud(
        provider: impl Into<String>,
        operation: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Cloud {
            provider: provider.into(),
            operation: operation.into(),
            status: None,
            request_id: None,
            source: Box::new(Message(message.into())),
        }
    }

    /// [`Error::Initialize`] whose whole cause is `message`.
    pub fn initialize(provider: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Initialize {
            provider: provider.into(),
            source: Box::new(Message(message.into())),
        }
    }

    /// A file named by the provider's config or environment (a CA bundle, the AWS shared
    /// config) that could not be read: [`Error::InvalidSetting`] naming where it was named.
    pub fn unreadable_file(provider: &str, e: crate::input::InputFileError) -> Self {
        Error::InvalidSetting {
            provider: provider.into(),
            setting: e.what.clone(),
            message: format!("cannot read {}", e.path.display()),
            source: Some(Box::new(e)),
        }
    }

    /// A short, stable label for metrics and traces (`instance_not_found`, `cloud_503`, ...).
    pub fn kind(&self) -> String {
        match self {
            Error::InstanceNotFound => "instance_not_found".into(),
            Error::DiskNotFound => "disk_not_found".into(),
            Error::NotImplemented => "not_implemented".into(),
            Error::ImplementedElsewhere => "implemented_elsewhere".into(),
            Error::Cloud {
                status: Some(s), ..
            } => format!("cloud_{s}"),
            Error::Cloud { status: None, .. } => "cloud".into(),
            Error::Admission { .. } => "admission".into(),
            _ => "config".into(),
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_error_names_status_and_request_id() {
        let e = Error::Cloud {
            provider: "openstack".into(),
            operation: "list servers".into(),
            status: Some(503),
            request_id: Some("req-123".into()),
            source: Box::new(Message("service unavailable".into())),
        };
        assert_eq!(
            Chain(&e).to_string(),
            "openstack: list servers failed (HTTP 503) [request req-123]: service unavailable"
        );
        assert_eq!(e.kind(), "cloud_503");
    }

    #[test]
    fn sentinel_kinds_are_distinct() {
        let kinds = [
            Error::InstanceNotFound.kind(),
            Error::NotImplemented.kind(),
            Error::ImplementedElsewhere.kind(),
            Error::DiskNotFound.kind(),
        ];
        let mut dedup = kinds.to_vec();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), kinds.len());
    }
}

/// An error and its causes on one line, `outer: cause: root` (anyhow's `{:#}`): how the
/// project prints an error for a person (logs, events, admission answers, the CLI). Error
/// messages of this workspace name the failed operation and leave the cause to `source()`, so
/// this is where causes are joined. A cause whose text its parent's message already holds is
/// left out: some foreign errors (kube-client's `HyperError: {0}`) print their source too.
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown = self.0.to_string();
        f.write_str(&shown)?;
        let mut next = self.0.source();
        while let Some(cause) = next {
            let text = cause.to_string();
            if !shown.contains(&text) {
                write!(f, ": {text}")?;
            }
            shown = text;
            next = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("foreign: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("reading the thing")]
    struct Ours(#[source] Repeats);

    #[test]
    fn causes_follow_once_each() {
        let io = std::io::Error::other("disk on fire");
        let err = Ours(Repeats(io));
        assert_eq!(
            Chain(&err).to_string(),
            "reading the thing: foreign: disk on fire"
        );
        assert_eq!(
            Chain(&Error::InstanceNotFound).to_string(),
            "instance not found"
        );
    }
}
