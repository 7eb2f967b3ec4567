//! The crate's own errors.

/// Errors of configuration: `azure.json` and the Azure Stack environment file.
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
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
