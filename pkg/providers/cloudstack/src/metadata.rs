//! The virtual router's metadata service, which the legacy provider read when it ran in the
//! kubelet without API keys (`GET <router>/latest/meta-data/<key>`, plain text): the instance
//! ID, host name, zone, service offering and the local and public IPv4 addresses.

use std::time::Duration;

use hypercloud_cloudprovider::http_body;
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::{Chain, Error, Result};
use k8s_openapi::api::core::v1::NodeAddress;

use crate::config::Config;
use crate::PROVIDER_NAME;

const TIMEOUT: Duration = Duration::from_secs(10);
/// The longest metadata value read.
const LIMIT: u64 = 4096;

/// The metadata service at one base URL.
#[derive(Debug)]
pub struct Metadata {
    http: reqwest::Client,
    base: String,
}

impl Metadata {
    pub fn new(base: &str, config: &Config) -> Result<Metadata> {
        let http = HttpClientConfig::new(TIMEOUT, TIMEOUT)
            .user_agent("hypercloud-cloudstack")
            .insecure(config.ssl_no_verify)
            .build()
            .map_err(|e| {
                Error::cloud(
                    PROVIDER_NAME,
                    "build the metadata client",
                    Chain(&e).to_string(),
                )
            })?;
        Ok(Metadata {
            http,
            base: base.trim_end_matches('/').to_owned(),
        })
    }

    /// One value (`instance-id`, `local-hostname`, ...), trimmed; an answer other than 200 is
    /// an error naming the key.
    pub async fn get(&self, key: &str) -> Result<String> {
        Ok(self.get_opt(key).await?.unwrap_or_default())
    }

    /// One value, `None` when the router has none (404 or empty).
    pub async fn get_opt(&self, key: &str) -> Result<Option<String>> {
        let op = format!("read metadata {key}");
        let url = format!("{}/latest/meta-data/{key}", self.base);
        let r = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| Error::cloud(PROVIDER_NAME, &op, format!("{url}: {}", Chain(&e))))?;
        let status = r.status();
        let body =
            http_body::read_limited(reqwest::Body::from(r), LIMIT, "CloudStack metadata", &op)
                .await
                .map_err(|e| Error::cloud(PROVIDER_NAME, &op, Chain(&e).to_string()))?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(Error::cloud(
                PROVIDER_NAME,
                &op,
                format!("{url}: HTTP {status}: {}", http_body::excerpt(&body)),
            ));
        }
        let text = String::from_utf8_lossy(&body).trim().to_owned();
        Ok(Some(text).filter(|t| !t.is_empty()))
    }

    /// `local-ipv4` (InternalIP), `public-ipv4` (ExternalIP) and `local-hostname` (Hostname), as
    /// upstream's metadata instances.
    pub async fn node_addresses(&self) -> Result<Vec<NodeAddress>> {
        let mut out = Vec::new();
        for (key, kind) in [
            ("local-ipv4", "InternalIP"),
            ("public-ipv4", "ExternalIP"),
            ("local-hostname", "Hostname"),
        ] {
            if let Some(v) = self.get_opt(key).await? {
                out.push(NodeAddress {
                    type_: kind.into(),
                    address: v,
                });
            }
        }
        if out.is_empty() {
            return Err(Error::cloud(
                PROVIDER_NAME,
                "read metadata",
                format!("{}: the virtual router reported no address", self.base),
            ));
        }
        Ok(out)
    }
}
