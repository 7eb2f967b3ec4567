//! [`ArmOptions`]: what the client needs besides `azure.json` (the extra CA, IMDS, timeouts),
//! and the credential and token scope an environment gives.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use hypercloud_cloudprovider::http_body::OBJECT_LIMIT;
use hypercloud_cloudprovider::http_client::HttpClientConfig;

use super::transport::Transport;
use super::{credential, CONNECT_TIMEOUT};
use crate::config::{Config, Environment};
use crate::error::Result;

/// What the client needs besides `azure.json`: where to find the extra CA, IMDS, and its
/// timeouts.
#[derive(Clone, Debug)]
pub struct ArmOptions {
    /// An extra PEM bundle of trusted CAs, and the variable that named it (for messages).
    pub ca_file: Option<(String, PathBuf)>,
    /// The instance metadata service for managed identities (`http://169.254.169.254`).
    pub imds_endpoint: String,
    /// One request, connection to answer.
    pub request_timeout: Duration,
    /// The whole of a long-running operation, polls included.
    pub operation_timeout: Duration,
}

impl Default for ArmOptions {
    fn default() -> Self {
        ArmOptions {
            ca_file: None,
            imds_endpoint: "http://169.254.169.254".into(),
            request_timeout: Duration::from_secs(60),
            operation_timeout: Duration::from_secs(20 * 60),
        }
    }
}

impl ArmOptions {
    /// The defaults, with the CA bundle of `REQUESTS_CA_BUNDLE` (else `SSL_CERT_FILE`) and
    /// the IMDS endpoint of `AZURE_POD_IDENTITY_AUTHORITY_HOST` from the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// [`ArmOptions::from_env`] with another environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let set = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let ca_file = ["REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"]
            .into_iter()
            .find_map(|k| set(k).map(|v| (k.to_owned(), PathBuf::from(v))));
        let mut options = ArmOptions {
            ca_file,
            ..ArmOptions::default()
        };
        if let Some(host) = set("AZURE_POD_IDENTITY_AUTHORITY_HOST") {
            options.imds_endpoint = host;
        }
        options
    }

    pub(super) fn http(&self) -> Result<reqwest::Client> {
        let (key, path) = match &self.ca_file {
            Some((k, p)) => (k.as_str(), Some(p.as_path())),
            None => ("", None),
        };
        Ok(HttpClientConfig::new(self.request_timeout, CONNECT_TIMEOUT)
            .ca_file(key, path)
            .refuse_redirects()
            .build()?)
    }
}

/// The token credential of `config.credential`, asking Entra at the environment's
/// `activeDirectoryEndpoint` (or IMDS), with the TLS trust of `options`.
pub fn new_credential(
    config: &Config,
    environment: &Environment,
    options: &ArmOptions,
) -> Result<Arc<dyn TokenCredential>> {
    let http = options.http()?;
    let imds_http = HttpClientConfig::new(options.request_timeout, CONNECT_TIMEOUT)
        .metadata_server(None)
        .build()?;
    credential::new_credential(
        &config.credential,
        credential::Setup {
            tenant_id: config.tenant_id.as_deref(),
            authority: &environment.active_directory_endpoint,
            backoff: config.backoff,
            transport: Transport::new(http, OBJECT_LIMIT, "Microsoft Entra ID").into_sdk(),
            imds_http,
            imds_endpoint: &options.imds_endpoint,
        },
    )
}

/// The scope of access tokens for ARM: the environment's token resource + `/.default`
/// (`https://management.core.windows.net//.default`, as `az` asks for it).
pub fn token_scope(environment: &Environment) -> String {
    format!("{}/.default", environment.token_resource())
}
