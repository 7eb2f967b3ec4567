//! The instance metadata service, for the VM this process runs on (`useInstanceMetadata`), as
//! upstream's `azure_instance_metadata.go`: `GET /metadata/instance?format=json` with
//! `Metadata: true`, kept for a minute. Its compute document names the VM (`name`, lower-cased
//! to compare with the node name), `location`, `zone`, `vmSize`, `platformFaultDomain`,
//! `subscriptionId` and `resourceGroupName`; its first network interface's first IPv4 address
//! gives the private and public addresses. Where it answers: azure.json's
//! `hypercloudInstanceMetadataEndpoint`, else `$AZURE_POD_IDENTITY_AUTHORITY_HOST`, else
//! `http://169.254.169.254/`; requests come from `hypercloudInstanceMetadataSourceAddress` when
//! given (the local cloud, like Azure, knows the VM by the address that asks).

use std::time::{Duration, Instant};

use hypercloud_cloudprovider::http_body::{self, excerpt, METADATA_LIMIT};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::config::Config;
use crate::error::{Error, Result};

/// The api-version upstream's current provider asks with.
const API_VERSION: &str = "2021-10-01";
/// How long an answer is kept (upstream's cache).
const TTL: Duration = Duration::from_secs(60);

/// The instance document's compute part (what the provider reads of it).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Compute {
    pub name: String,
    pub location: String,
    pub zone: String,
    pub vm_size: String,
    pub platform_fault_domain: String,
    pub subscription_id: String,
    pub resource_group_name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Address {
    private_ip_address: String,
    public_ip_address: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct Ipv4 {
    #[serde(rename = "ipAddress")]
    ip_address: Vec<Address>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct Interface {
    ipv4: Ipv4,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct Network {
    interface: Vec<Interface>,
}

/// The instance document.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Instance {
    pub compute: Compute,
    network: Network,
}

impl Instance {
    /// The first interface's first IPv4 private and public addresses (public empty when none).
    pub fn addresses(&self) -> (Option<String>, Option<String>) {
        let first = self
            .network
            .interface
            .first()
            .and_then(|i| i.ipv4.ip_address.first());
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        (
            first.and_then(|a| some(&a.private_ip_address)),
            first.and_then(|a| some(&a.public_ip_address)),
        )
    }
}

/// A client of the instance metadata service.
pub(crate) struct Imds {
    http: reqwest::Client,
    url: String,
    cached: Mutex<Option<(Instant, Instance)>>,
}

impl Imds {
    pub fn new(config: &Config) -> Result<Self> {
        let endpoint = config
            .instance_metadata_endpoint
            .clone()
            .or_else(|| {
                std::env::var("AZURE_POD_IDENTITY_AUTHORITY_HOST")
                    .ok()
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "http://169.254.169.254/".into());
        let http = HttpClientConfig::new(Duration::from_secs(5), Duration::from_secs(2))
            .metadata_server(config.instance_metadata_source_address)
            .refuse_redirects()
            .build()?;
        Ok(Imds {
            http,
            url: format!(
                "{}/metadata/instance?api-version={API_VERSION}&format=json",
                endpoint.trim_end_matches('/')
            ),
            cached: Mutex::new(None),
        })
    }

    /// The instance document (kept for a minute).
    pub async fn instance(&self) -> Result<Instance> {
        let mut cached = self.cached.lock().await;
        if let Some((at, i)) = cached.as_ref() {
            if at.elapsed() < TTL {
                return Ok(i.clone());
            }
        }
        let err = |message: String| Error::Imds {
            path: self.url.clone(),
            message,
        };
        let resp = self
            .http
            .get(&self.url)
            .header("Metadata", "true")
            .send()
            .await
            .map_err(|e| err(format!("no answer: {e}")))?;
        let status = resp.status();
        let bytes = http_body::read_limited(
            reqwest::Body::from(resp),
            METADATA_LIMIT,
            "instance metadata",
            "GET /metadata/instance",
        )
        .await
        .map_err(|e| err(e.to_string()))?;
        if !status.is_success() {
            return Err(err(format!("HTTP {status}: {}", excerpt(&bytes))));
        }
        let instance: Instance = serde_json::from_slice(&bytes).map_err(|e| {
            err(format!(
                "not the instance document ({e}): {}",
                excerpt(&bytes)
            ))
        })?;
        if instance.compute.name.is_empty() {
            return Err(err(
                "the instance document names no VM (compute.name)".into()
            ));
        }
        *cached = Some((Instant::now(), instance.clone()));
        Ok(instance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_gives_names_and_addresses_as_imds_writes_them() {
        let i: Instance = serde_json::from_value(serde_json::json!({
            "compute": {"name": "Node-1", "location": "regionone", "zone": "", "vmSize": "Standard_B2s",
                        "platformFaultDomain": "1", "subscriptionId": "s", "resourceGroupName": "rg", "other": 1},
            "network": {"interface": [{"ipv4": {"ipAddress": [{"privateIpAddress": "10.0.0.4", "publicIpAddress": ""}]}}]}
        }))
        .expect("a document");
        assert_eq!(i.compute.vm_size, "Standard_B2s");
        assert_eq!(i.addresses(), (Some("10.0.0.4".into()), None));
        assert_eq!(Instance::default().addresses(), (None, None));
    }
}
