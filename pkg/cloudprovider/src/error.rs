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

    /// The cloud API answered with an error.
    #[error("{provider}: {operation} failed{}{}: {message}",
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
        /// The cloud's message.
        message: String,
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
    #[error("initializing cloud provider {provider}: {message}")]
    Initialize {
        /// Provider name.
        provider: String,
        /// Why.
        message: String,
    },

    /// Writing a `--trace-cloud-calls` record failed.
    #[error("--trace-cloud-calls: cannot open {}", path.display())]
    OpenTraceFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
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

impl Error {
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
            message: "service unavailable".into(),
        };
        assert_eq!(
            e.to_string(),
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
