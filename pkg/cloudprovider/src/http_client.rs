//! The one HTTP client configuration every provider builds its `reqwest` client from: the
//! cloud API clients (OpenStack, Compute Engine, vCenter) and the metadata clients. A provider
//! states what it wants (timeouts, user agent, a CA file named by its config key, whether TLS
//! verification is off, whether redirects are refused, whether a proxy may be used) and gets
//! a client or an error naming the failed step, the cause kept as `source`. Upstream
//! equivalent: the `http.Transport`/`tls.Config` set-up each Go provider writes by hand
//! (gophercloud's `openstack.NewClient` with `ca-file`/`tls-insecure`, govmomi's
//! `soap.NewClient` with `insecure-flag` and `ca-file`); stackable's `tls_verification.rs`
//! is the model of one typed client config.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::input::{self, InputFileError, MAX_INPUT_FILE_BYTES};

/// What a provider's HTTP client must do.
#[derive(Clone, Debug)]
pub struct HttpClientConfig {
    /// The whole of one request (connect, send, answer).
    pub request_timeout: Duration,
    /// Connecting alone; never longer than the request timeout.
    pub connect_timeout: Duration,
    /// Sent as `User-Agent` (reqwest sends none by default).
    pub user_agent: Option<&'static str>,
    /// Extra trusted roots: a PEM bundle, and the config key that named it (`[Global]
    /// ca-file`) for messages.
    pub ca_file: Option<(String, PathBuf)>,
    /// TLS certificates are not verified (`tls-insecure`, `insecure-flag`). Both upstream
    /// providers accept it without a refusal or warning; so does this.
    pub insecure: bool,
    /// Redirects are not followed (metadata servers never redirect; the caller refuses the
    /// 3xx with [`crate::http_body::refuse_redirect`]).
    pub refuse_redirects: bool,
    /// No proxy from the environment (link-local metadata servers).
    pub no_proxy: bool,
    /// The local address to connect from.
    pub local_address: Option<IpAddr>,
}

impl HttpClientConfig {
    /// A client with these timeouts (the connect timeout capped by the request timeout) that
    /// verifies TLS, follows redirects and uses the environment's proxy.
    pub fn new(request_timeout: Duration, connect_timeout: Duration) -> Self {
        HttpClientConfig {
            request_timeout,
            connect_timeout: connect_timeout.min(request_timeout),
            user_agent: None,
            ca_file: None,
            insecure: false,
            refuse_redirects: false,
            no_proxy: false,
            local_address: None,
        }
    }

    /// Sends `agent` as `User-Agent`.
    pub fn user_agent(mut self, agent: &'static str) -> Self {
        self.user_agent = Some(agent);
        self
    }

    /// Trusts the certificates of the PEM bundle `path`, named `key` in messages.
    pub fn ca_file(mut self, key: &str, path: Option<&Path>) -> Self {
        self.ca_file = path.map(|p| (key.to_owned(), p.to_owned()));
        self
    }

    /// Does not verify TLS certificates when `insecure`.
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }

    /// For a metadata server: no redirects followed, no proxy, connecting from `local`.
    pub fn metadata_server(mut self, local: Option<IpAddr>) -> Self {
        self.refuse_redirects = true;
        self.no_proxy = true;
        self.local_address = local;
        self
    }

    /// Redirects are not followed.
    pub fn refuse_redirects(mut self) -> Self {
        self.refuse_redirects = true;
        self
    }

    /// The client.
    pub fn build(&self) -> Result<reqwest::Client, HttpClientError> {
        let mut b = reqwest::Client::builder()
            .timeout(self.request_timeout)
            .connect_timeout(self.connect_timeout.min(self.request_timeout));
        if let Some(agent) = self.user_agent {
            b = b.user_agent(agent);
        }
        if self.insecure {
            b = b.danger_accept_invalid_certs(true);
        }
        if self.refuse_redirects {
            b = b.redirect(reqwest::redirect::Policy::none());
        }
        if self.no_proxy {
            b = b.no_proxy();
        }
        if let Some(addr) = self.local_address {
            b = b.local_address(addr);
        }
        if let Some((key, path)) = &self.ca_file {
            let pem = input::read_named(key, path, MAX_INPUT_FILE_BYTES)?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                HttpClientError::ParseCaFile {
                    key: key.clone(),
                    path: path.clone(),
                    source,
                }
            })?;
            for cert in certs {
                b = b.add_root_certificate(cert);
            }
        }
        b.build().map_err(HttpClientError::Build)
    }
}

/// Building a provider's HTTP client failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// The CA file is missing, not a regular file or over the input limit.
    #[error(transparent)]
    ReadCaFile(#[from] InputFileError),
    /// The CA file is not a PEM bundle.
    #[error("{key} {}", path.display())]
    ParseCaFile {
        /// The config key that named it.
        key: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: reqwest::Error,
    },
    /// reqwest refused the configuration (no TLS backend, for instance).
    #[error("building the client")]
    Build(#[source] reqwest::Error),
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Chain;

    #[test]
    fn connect_timeout_never_exceeds_the_request_timeout() {
        let c = HttpClientConfig::new(Duration::from_secs(2), Duration::from_secs(10));
        assert_eq!(c.connect_timeout, Duration::from_secs(2));
        assert!(c.build().is_ok());
    }

    #[test]
    fn ca_file_errors_name_the_key_and_keep_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = HttpClientConfig::new(Duration::from_secs(1), Duration::from_secs(1))
            .ca_file("[Global] ca-file", Some(&missing))
            .build()
            .unwrap_err();
        assert!(matches!(e, HttpClientError::ReadCaFile(_)), "{e:?}");
        assert!(
            e.to_string().starts_with("[Global] ca-file: cannot read"),
            "{e}"
        );

        let bad = dir.path().join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = HttpClientConfig::new(Duration::from_secs(1), Duration::from_secs(1))
            .ca_file("ca-file", Some(&bad))
            .build()
            .unwrap_err();
        assert_eq!(e.to_string(), format!("ca-file {}", bad.display()));
        assert!(std::error::Error::source(&e).is_some());
        assert!(Chain(&e).to_string().len() > e.to_string().len());
    }
}
