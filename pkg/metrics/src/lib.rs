//! The admin server of the controller managers: `/healthz`, `/livez`, `/readyz` and
//! `/metrics` over HTTPS on `--secure-port`/`--bind-address` (upstream equivalent:
//! `k8s.io/apiserver/pkg/server` secure serving with `DelegatingAuthenticationOptions` and
//! `DelegatingAuthorizationOptions`, as the cloud-controller-manager and
//! kube-controller-manager run it, plus component-base's `/metrics` handler).
//!
//! - TLS from `--tls-cert-file`/`--tls-private-key-file`, or a self-signed certificate
//!   ([`tls`]), written to `--cert-dir` as `<component>.crt`/`.key` when that is given and
//!   reused on the next start;
//! - paths in `--authorization-always-allow-paths` are served to anyone; every other path
//!   needs a user (401 otherwise): named by a front proxy's certificate in request headers
//!   (`--requestheader-*`), by a client certificate (`--client-ca-file`), both also read from
//!   the `extension-apiserver-authentication` ConfigMap ([`authn`]), or by a bearer token
//!   that a TokenReview accepts; then a SubjectAccessReview must allow the verb on the
//!   non-resource path (403 otherwise); reviews are asked of the apiserver and cached for
//!   the `--authentication-token-webhook-cache-ttl` / `--authorization-webhook-cache-*`
//!   durations ([`auth`]);
//! - `/healthz` and `/livez` run the liveness checks, `/readyz` those plus the readiness
//!   checks ([`health`]), with upstream's `?verbose` output;
//! - `/configz` (when the component gives one) is its configuration as upstream's
//!   component-base `configz` serves it, behind the same authentication and authorization;
//! - `/metrics` is the Prometheus text format of the component's registry plus `process_*`
//!   metrics read from `/proc/self` ([`process`]).
//!
//! Start here: [`serve`] and [`router`], then [`auth`] (who may read which path) and [`health`]
//! (the checks behind `/healthz` and `/readyz`).
//!
//! Not here: the metrics themselves: each crate registers its own (provider calls in
//! `hypercloud-cloudprovider`, the controllers' in `hypercloud-controllers`) on the registry the
//! server is given.

pub mod auth;
pub mod authn;
pub mod health;
pub mod process;
pub mod server;
pub mod tls;

pub use auth::{AuthConfig, Authorizer};
pub use health::{mark_panicked, Checks, HealthCheck};
pub use server::{router, serve, AdminServer, Configz, ServeConfig};

use std::path::PathBuf;

/// Errors of the admin server; each variant names the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A TLS certificate, key or CA file could not be read (missing, not a regular file,
    /// over the limit); the error names the flag.
    #[error(transparent)]
    ReadTlsFile(hypercloud_cloudprovider::input::InputFileError),
    /// The TLS certificate or key file holds no usable PEM data.
    #[error("parsing {}: {message}", path.display())]
    ParseTlsFile {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Writing the self-signed certificate into `--cert-dir` failed.
    #[error("writing self-signed certificate to {}", path.display())]
    WriteCertificate {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Generating the self-signed certificate failed.
    #[error("generating self-signed certificate")]
    GenerateCertificate(#[from] rcgen::Error),
    /// The certificate and key do not make a TLS configuration.
    #[error("building TLS configuration")]
    BuildTlsConfig(#[from] rustls::Error),
    /// The secure port could not be bound.
    #[error("binding {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A client CA bundle (`--client-ca-file`, `--requestheader-client-ca-file`, or the
    /// ConfigMap's keys) is not usable.
    #[error("{source_name}: {message}")]
    ParseClientCa {
        /// The flag and file, or the ConfigMap key.
        source_name: String,
        /// Why.
        message: String,
    },
    /// The `extension-apiserver-authentication` ConfigMap could not be read (and
    /// `--authentication-tolerate-lookup-failure` is false).
    #[error("unable to load configmap based request-header-client-ca-file (set --authentication-skip-lookup, or --authentication-tolerate-lookup-failure to continue without it)")]
    LookupAuthentication(#[source] kube::Error),
    /// A metric could not be registered.
    #[error("registering metrics")]
    RegisterMetrics(#[from] prometheus::Error),
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
