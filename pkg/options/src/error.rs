//! Errors of flag validation and of what the flags build (clients, logging).

use std::path::PathBuf;

/// What went wrong turning flags into a working configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag value is out of range or inconsistent with another flag.
    #[error("{flag}: {message}")]
    InvalidFlag {
        /// The flag, with its dashes.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },

    /// The kubeconfig file could not be parsed or used.
    #[error("{flag}: cannot load {}", path.display())]
    LoadKubeconfig {
        /// The flag or variable naming the file (`--kubeconfig`, `KUBECONFIG`).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },

    /// A kubeconfig, or a file it names (CA, client certificate or key, token file), or an
    /// in-cluster service-account file, is missing, not a regular file or over the 1 MiB limit.
    #[error("{what}: cannot load {}", path.display())]
    ReadKubeconfig {
        /// The flag or variable that named the file (`--kubeconfig`, `KUBECONFIG`).
        what: String,
        /// The file.
        path: PathBuf,
        /// Why: an I/O error, or a refusal ([`hypercloud_cloudprovider::input::Refused`]).
        source: std::io::Error,
    },

    /// No kubeconfig was given and none could be inferred (in-cluster or `~/.kube/config`).
    #[error("--kubeconfig not set and no in-cluster or default kubeconfig found")]
    InferKubeconfig(#[source] kube::config::InferConfigError),

    /// `--master` is not a URL.
    #[error("--master: {master:?} is not a valid URL: {message}")]
    ParseMaster {
        /// The value given.
        master: String,
        /// Why.
        message: String,
    },

    /// Building the Kubernetes client failed.
    #[error("building Kubernetes client")]
    BuildClient(#[source] kube::Error),

    /// The tracing subscriber could not be installed (already installed).
    #[error("initialising logging: {0}")]
    InitLogging(String),
}

impl From<hypercloud_cloudprovider::input::InputFileError> for Error {
    fn from(e: hypercloud_cloudprovider::input::InputFileError) -> Self {
        Error::ReadKubeconfig {
            what: e.what,
            path: e.path,
            source: e.source,
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
