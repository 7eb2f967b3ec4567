//! Errors of starting and serving the driver (a call's own failure is a gRPC status, not
//! one of these).

/// What went wrong starting or serving the CSI driver.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--endpoint` is not a unix socket the driver can serve on.
    #[error("--endpoint {endpoint}: {why}")]
    Endpoint { endpoint: String, why: String },
    /// The provider has no volume capability this driver could serve.
    #[error("--cloud-provider={provider}: {why}")]
    Provider { provider: String, why: String },
    /// The gRPC server stopped with an error.
    #[error("serving CSI: {0}")]
    Serve(String),
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
