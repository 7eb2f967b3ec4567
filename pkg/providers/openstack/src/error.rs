//! The crate's own errors: reading `cloud.conf`/`clouds.yaml` and reading instance metadata.
//! Everything a provider trait method returns is a [`hypercloud_cloudprovider::Error`]; these
//! convert into it where they cross that boundary.

use std::path::PathBuf;

/// Errors of configuration and metadata reading.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `cloud.conf` is not valid.
    #[error("invalid cloud config {origin}: {message}")]
    ParseCloudConfig {
        /// The file, or where the bytes came from.
        origin: String,
        /// What is wrong, naming the line and key.
        message: String,
    },

    /// `clouds.yaml` could not be read or does not hold the named cloud.
    #[error("clouds.yaml {}: {message}", path.display())]
    ReadCloudsYaml {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },

    /// Every metadata source in `search-order` failed; each attempt is named.
    #[error("could not read instance metadata from any source: {}", attempts.join("; "))]
    ReadMetadata {
        /// One line per source tried, saying what failed.
        attempts: Vec<String>,
    },

    /// Building the HTTP client failed (a CA file that is not PEM, for instance).
    #[error("building the HTTP client")]
    BuildHttpClient(#[source] hypercloud_cloudprovider::http_client::HttpClientError),

    /// A file the cloud config names (`ca-file`) is missing, not a regular file or over the
    /// 1 MiB limit.
    #[error(transparent)]
    ReadInput(#[from] hypercloud_cloudprovider::input::InputFileError),
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

impl hypercloud_cloudprovider::ProviderError for Error {
    const PROVIDER: &'static str = crate::OPENSTACK;

    /// Only reading instance metadata reaches a provider call with this crate's error.
    fn operation(&self) -> String {
        "read instance metadata".into()
    }

    fn startup(self) -> hypercloud_cloudprovider::Startup<Self> {
        match self {
            Error::ParseCloudConfig { origin, message } => {
                hypercloud_cloudprovider::Startup::InvalidConfig { origin, message }
            }
            Error::ReadCloudsYaml { path, message } => {
                hypercloud_cloudprovider::Startup::InvalidConfig {
                    origin: path.display().to_string(),
                    message,
                }
            }
            Error::ReadInput(e) => hypercloud_cloudprovider::Startup::UnreadableFile(e),
            other => hypercloud_cloudprovider::Startup::Other(other),
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
