//! The `ovirt` cloud provider: Kubernetes on oVirt / Red Hat Virtualization, as the in-tree
//! provider of Kubernetes v1.1 to v1.13 served it (`pkg/cloudprovider/providers/ovirt`,
//! removed for v1.14 by kubernetes/kubernetes#72178 without a successor).
//!
//! It finds the Nodes' VMs with one search of the engine's API, `GET <uri>/vms?search=<[filters]
//! vms>` with HTTP basic authentication (the v3 API's XML), and knows each VM by the fully
//! qualified domain name its guest agent reports: that is the Node's name.
//! - `NodeAddresses`: the first IP the guest agent reports, else the name resolved, as
//!   `InternalIP` and `ExternalIP` (the legacy provider also gave the since-removed
//!   `LegacyHostIP`).
//! - `InstanceID`: `/<vm id>` (provider ID `ovirt:///<vm id>`), as upstream.
//! - Only VMs that are `up` and report an FQDN are Nodes' VMs by name, as upstream; by provider
//!   ID (what the lifecycle controllers ask, which the legacy provider did not answer) every
//!   VM the search returns counts: a `down` one is shut down, a missing one does not exist.
//! - No instance types, zones, load balancers, routes or volumes, as upstream.

pub mod config;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hypercloud_cloudprovider::http_body::{self, LIST_LIMIT};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::{Chain, Error, Instances, Interface, Registry, Result};
use k8s_openapi::api::core::v1::NodeAddress;
use serde::Deserialize;

pub use config::Config;

/// The name given to `--cloud-provider`.
pub const PROVIDER_NAME: &str = "ovirt";
/// Provider IDs are `ovirt:///<vm id>`.
pub const PROVIDER_ID_PREFIX: &str = "ovirt:///";
/// Timeout of one request to the engine.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Registers the provider under [`PROVIDER_NAME`].
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "oVirt / Red Hat Virtualization (the engine's REST API: VMs found by a search, named by their guest FQDN); configured by the legacy [connection]/[filters] --cloud-config",
        |config| Ok(Arc::new(Ovirt::new(Config::from_cloud_config(config)?)?) as Arc<dyn Interface>),
    );
}

/// One VM of the search's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vm {
    /// The engine's VM ID.
    pub id: String,
    /// The VM's name.
    pub name: String,
    /// `status/state`, lower-cased (`up`, `down`, ...).
    pub state: String,
    /// The FQDN the guest agent reports (empty when it reports none).
    pub fqdn: String,
    /// The first IP the guest agent reports.
    pub address: Option<String>,
}

#[derive(Deserialize)]
struct VmsXml {
    #[serde(rename = "vm", default)]
    vm: Vec<VmXml>,
}

#[derive(Deserialize)]
struct VmXml {
    #[serde(rename = "@id")]
    id: String,
    #[serde(default)]
    name: String,
    status: Option<StatusXml>,
    guest_info: Option<GuestInfoXml>,
}

#[derive(Deserialize)]
struct StatusXml {
    #[serde(default)]
    state: String,
}

#[derive(Deserialize)]
struct GuestInfoXml {
    #[serde(default)]
    fqdn: String,
    ips: Option<IpsXml>,
}

#[derive(Deserialize)]
struct IpsXml {
    #[serde(rename = "ip", default)]
    ip: Vec<IpXml>,
}

#[derive(Deserialize)]
struct IpXml {
    #[serde(rename = "@address")]
    address: String,
}

/// Parses the v3 API's `<vms>`; the error says what is wrong.
pub fn parse_vms(body: &[u8]) -> std::result::Result<Vec<Vm>, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
    // serde does not look at the root's name: an answer of another kind (an HTML page, a
    // `<fault>`) must not read as "no VMs", which would make every Node's VM gone.
    if root_element(text) != Some("vms") {
        return Err(format!(
            "not an oVirt <vms> document (answer begins {})",
            http_body::excerpt(body)
        ));
    }
    let vms: VmsXml = quick_xml::de::from_str(text).map_err(|e| {
        format!(
            "not an oVirt <vms> document: {e} (answer begins {})",
            http_body::excerpt(body)
        )
    })?;
    Ok(vms
        .vm
        .into_iter()
        .map(|v| {
            let (fqdn, address) = match v.guest_info {
                Some(g) => (
                    g.fqdn,
                    g.ips
                        .and_then(|ips| ips.ip.into_iter().next().map(|i| i.address)),
                ),
                None => (String::new(), None),
            };
            Vm {
                id: v.id,
                name: v.name,
                state: v
                    .status
                    .map(|s| s.state.to_ascii_lowercase())
                    .unwrap_or_default(),
                fqdn,
                address,
            }
        })
        .collect())
}

/// The name of the document's root element (after the XML declaration and comments).
fn root_element(text: &str) -> Option<&str> {
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("<?") {
            rest = r.split_once("?>")?.1.trim_start();
        } else if let Some(r) = rest.strip_prefix("<!--") {
            rest = r.split_once("-->")?.1.trim_start();
        } else {
            break;
        }
    }
    let r = rest.strip_prefix('<')?;
    let end = r.find(|c: char| c.is_whitespace() || c == '>' || c == '/')?;
    Some(&r[..end])
}

/// The ovirt cloud provider.
pub struct Ovirt {
    config: Config,
    http: reqwest::Client,
}

impl std::fmt::Debug for Ovirt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ovirt")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Ovirt {
    /// A provider of the engine in `config` (nothing is asked until the first call).
    pub fn new(config: Config) -> Result<Ovirt> {
        let http = HttpClientConfig::new(REQUEST_TIMEOUT, REQUEST_TIMEOUT)
            .user_agent("hypercloud-ovirt")
            .ca_file("[Hypercloud] ca-file", config.ca_file.as_deref())
            .insecure(config.insecure)
            .build()
            .map_err(|e| {
                Error::cloud(
                    PROVIDER_NAME,
                    "build the HTTP client",
                    Chain(&e).to_string(),
                )
            })?;
        Ok(Ovirt { config, http })
    }

    /// The VMs the configured search returns.
    pub async fn vms(&self) -> Result<Vec<Vm>> {
        let call = "GET /vms";
        let url = format!("{}/vms", self.config.uri);
        let response = self
            .http
            .get(&url)
            .query(&[("search", self.config.vms_query.as_str())])
            .basic_auth(&self.config.username, Some(&self.config.password))
            .header("Accept", "application/xml")
            .send()
            .await
            .map_err(|e| Error::cloud(PROVIDER_NAME, call, format!("{url}: {}", Chain(&e))))?;
        let status = response.status();
        if !status.is_success() {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(response)).await;
            let why = if status == reqwest::StatusCode::UNAUTHORIZED {
                format!(
                    "the engine refused the credentials of {:?} ([connection] username, password)",
                    self.config.username
                )
            } else {
                http_body::excerpt(&prefix)
            };
            return Err(Error::Cloud {
                provider: PROVIDER_NAME.into(),
                operation: call.into(),
                status: Some(status.as_u16()),
                request_id: None,
                source: Box::new(hypercloud_cloudprovider::Message(format!("{url}: {why}"))),
            });
        }
        let body = http_body::read_limited(
            reqwest::Body::from(response),
            LIST_LIMIT,
            "oVirt engine",
            call,
        )
        .await
        .map_err(|e| Error::cloud(PROVIDER_NAME, call, Chain(&e).to_string()))?;
        parse_vms(&body).map_err(|m| Error::cloud(PROVIDER_NAME, call, format!("{url}: {m}")))
    }

    /// The Nodes' VMs by name, as upstream: those `up` with an FQDN.
    async fn by_name(&self) -> Result<BTreeMap<String, Vm>> {
        Ok(self
            .vms()
            .await?
            .into_iter()
            .filter(|v| !v.fqdn.is_empty() && v.state == "up")
            .map(|v| (v.fqdn.clone(), v))
            .collect())
    }

    async fn named(&self, name: &str) -> Result<Vm> {
        self.by_name()
            .await?
            .remove(name)
            .ok_or(Error::InstanceNotFound)
    }

    async fn by_provider_id(&self, provider_id: &str) -> Result<Option<Vm>> {
        let id = vm_id(provider_id)?;
        Ok(self.vms().await?.into_iter().find(|v| v.id == id))
    }
}

/// The VM ID of `ovirt:///<id>`; another cloud's ID is an error, never "not found".
fn vm_id(provider_id: &str) -> Result<&str> {
    provider_id
        .strip_prefix("ovirt://")
        .map(|rest| rest.trim_start_matches('/'))
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "parse provider ID",
                format!("{provider_id:?} is not an {PROVIDER_ID_PREFIX}<vm id> provider ID"),
            )
        })
}

/// The VM's address: the guest's first IP, else its name resolved (upstream's fallback).
async fn address_of(vm: &Vm) -> Result<IpAddr> {
    if let Some(a) = &vm.address {
        return a.parse().map_err(|_| {
            Error::cloud(
                PROVIDER_NAME,
                "read the guest's address",
                format!("couldn't parse address: {a:?}"),
            )
        });
    }
    let lookup = tokio::time::timeout(
        REQUEST_TIMEOUT,
        tokio::net::lookup_host((vm.fqdn.as_str(), 0)),
    )
    .await
    .map_err(|_| {
        Error::cloud(
            PROVIDER_NAME,
            "resolve the VM's name",
            format!("{:?}: no answer", vm.fqdn),
        )
    })?;
    lookup
        .map_err(|e| {
            Error::cloud(
                PROVIDER_NAME,
                "resolve the VM's name",
                format!("couldn't lookup address: {:?}: {e}", vm.fqdn),
            )
        })?
        .map(|a| a.ip())
        .next()
        .ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "resolve the VM's name",
                format!("couldn't lookup address: {:?}", vm.fqdn),
            )
        })
}

fn addresses(ip: IpAddr) -> Vec<NodeAddress> {
    ["InternalIP", "ExternalIP"]
        .iter()
        .map(|t| NodeAddress {
            type_: (*t).into(),
            address: ip.to_string(),
        })
        .collect()
}

impl Interface for Ovirt {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }
}

#[async_trait]
impl Instances for Ovirt {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        let vm = self.named(name).await?;
        Ok(addresses(address_of(&vm).await?))
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        let vm = self
            .by_provider_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(addresses(address_of(&vm).await?))
    }

    /// `/<vm id>`, as upstream (provider ID `ovirt:///<vm id>`).
    async fn instance_id(&self, name: &str) -> Result<String> {
        Ok(format!("/{}", self.named(name).await?.id))
    }

    /// oVirt VMs have no instance type here: empty, as upstream.
    async fn instance_type(&self, _name: &str) -> Result<String> {
        Ok(String::new())
    }

    async fn instance_type_by_provider_id(&self, _provider_id: &str) -> Result<String> {
        Ok(String::new())
    }

    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> Result<()> {
        Err(Error::NotImplemented)
    }

    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Ok(self.by_provider_id(provider_id).await?.is_some())
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let vm = self
            .by_provider_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(vm.state == "down")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_v3_vms_document_as_the_legacy_provider_read_it() {
        let vms = parse_vms(
            br#"<?xml version="1.0"?><vms>
              <vm href="/api/vms/a" id="a"><name>node-a</name><status><state>up</state></status>
                <guest_info><ips><ip address="10.0.0.5"/><ip address="10.0.0.6"/></ips><fqdn>a.example.com</fqdn></guest_info></vm>
              <vm id="b"><name>node-b</name><status><state>DOWN</state></status></vm>
            </vms>"#,
        )
        .unwrap();
        assert_eq!(vms.len(), 2);
        assert_eq!(vms[0].fqdn, "a.example.com");
        assert_eq!(vms[0].address.as_deref(), Some("10.0.0.5"));
        assert_eq!(vms[1].state, "down");
        assert_eq!(vms[1].fqdn, "");
        for other in [
            &b"<html>no</html>"[..],
            b"<fault><reason>x</reason></fault>",
            b"",
        ] {
            assert!(parse_vms(other)
                .unwrap_err()
                .contains("not an oVirt <vms> document"));
        }
        assert!(parse_vms(b"<?xml version=\"1.0\"?>\n<!-- c --><vms/>")
            .unwrap()
            .is_empty());
        assert!(parse_vms(b"{\"vm\": []}")
            .unwrap_err()
            .contains("not an oVirt <vms> document"));
        assert!(
            parse_vms(br#"<vms><vm><name>x</name></vm></vms>"#).is_err(),
            "a VM without an id"
        );
    }

    #[test]
    fn provider_ids_name_a_vm_of_this_cloud() {
        assert_eq!(vm_id("ovirt:///abc").unwrap(), "abc");
        for bad in ["aws:///i-1", "ovirt:///", "ovirt:///a/b"] {
            assert!(vm_id(bad).is_err(), "{bad}");
        }
    }
}
