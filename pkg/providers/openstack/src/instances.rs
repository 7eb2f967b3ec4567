//! Nova servers as Kubernetes nodes: Instances (v1), InstancesV2 and Zones.
//!
//! Look-ups are answered from one `GET /servers/detail` of the whole project, kept for
//! `[Hypercloud] server-cache-ttl` (default 5s), so initialising many nodes costs one cloud call
//! per TTL instead of one per node. Concurrent callers share one in-flight listing. A name that
//! is not in a cached listing is asked for once more by name (it may be newer than the
//! listing), an ID by `GET /servers/{id}`; absence from a listing made for this very call is
//! final.
//! Upstream equivalent: cloud-provider-openstack `pkg/openstack/instances.go` and
//! `instancesv2.go`, which instead make one or more calls per node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use hypercloud_cloudprovider::{
    Error, InstanceMetadata, Instances, InstancesV2, Result, Zone, Zones,
};
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use reqwest::Method;
use serde::Deserialize;

use crate::client::{is_not_found, Service};
use crate::OpenStack;

/// The provider ID scheme upstream uses.
pub const PROVIDER_ID_PREFIX: &str = "openstack://";
/// Also accepted, for IDs built from the `local` provider's name.
pub const LOCAL_PROVIDER_ID_PREFIX: &str = "local://";

/// `openstack:///<uuid>` (and, as upstream, `openstack://<region>/<uuid>`; also `local://...`)
/// → (region, uuid).
pub fn parse_provider_id(provider_id: &str) -> Result<(Option<&str>, &str)> {
    let bad = || {
        Error::cloud("openstack", "parse provider ID", format!(
            "{provider_id:?} is not an OpenStack provider ID (openstack:///<uuid> or openstack://<region>/<uuid>)"
        ))
    };
    // `local://` too: upstream's Instances (v1) path builds provider IDs from the provider
    // name (`GetInstanceProviderID`), and the `local` preset is this provider under that name.
    let rest = provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .or_else(|| provider_id.strip_prefix(LOCAL_PROVIDER_ID_PREFIX))
        .ok_or_else(bad)?;
    let (region, id) = rest.split_once('/').ok_or_else(bad)?;
    if id.is_empty() || id.contains('/') {
        return Err(bad());
    }
    Ok(((!region.is_empty()).then_some(region), id))
}

/// A server as the provider needs it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServerInfo {
    pub id: String,
    pub name: String,
    pub status: String,
    pub flavor: String,
    pub availability_zone: String,
    pub addresses: Vec<NodeAddress>,
}

#[derive(Deserialize)]
struct ServerJson {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    flavor: FlavorJson,
    #[serde(rename = "OS-EXT-AZ:availability_zone", default)]
    availability_zone: String,
    #[serde(default)]
    addresses: BTreeMap<String, Vec<AddressJson>>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(rename = "accessIPv4", default)]
    access_ipv4: String,
    #[serde(rename = "accessIPv6", default)]
    access_ipv6: String,
}

/// A server's `flavor`: its names from Nova 2.47 on, only its ID before.
#[derive(Deserialize, Default)]
struct FlavorJson {
    original_name: Option<String>,
    name: Option<String>,
    id: Option<String>,
}

/// `GET /servers/{id}`.
#[derive(Deserialize)]
struct OneServerJson {
    server: ServerJson,
}

#[derive(Deserialize)]
struct AddressJson {
    addr: String,
    #[serde(default)]
    version: u8,
    #[serde(rename = "OS-EXT-IPS:type")]
    kind: Option<String>,
}

/// One listing of every server, shared until it is older than the TTL.
#[derive(Default)]
pub(crate) struct ServerCache {
    snapshot: tokio::sync::Mutex<Option<(Instant, Arc<Servers>)>>,
}

/// One listing of the project's servers, indexed by name and ID.
pub(crate) type Servers = hypercloud_cloudprovider::listing::Listing<ServerInfo>;

impl ServerCache {
    pub async fn invalidate(&self) {
        *self.snapshot.lock().await = None;
    }
}

fn push(out: &mut Vec<NodeAddress>, kind: &str, addr: &str) {
    if addr.is_empty() || out.iter().any(|a| a.type_ == kind && a.address == addr) {
        return;
    }
    out.push(NodeAddress {
        type_: kind.into(),
        address: addr.into(),
    });
}

impl OpenStack {
    /// Upstream `nodeAddresses`: per network (sorted by name) fixed addresses are InternalIP
    /// (ExternalIP on `[Networking] public-network-name`), floating ones ExternalIP; then the
    /// access IPs as ExternalIP and the `hostname` server metadata as Hostname.
    fn to_info(&self, s: ServerJson) -> ServerInfo {
        let net = &self.config.networking;
        let mut addresses = Vec::new();
        for (network, addrs) in &s.addresses {
            for a in addrs {
                if net.ipv6_support_disabled && a.version == 6 {
                    continue;
                }
                match a.kind.as_deref() {
                    Some("floating") => push(&mut addresses, "ExternalIP", &a.addr),
                    _ if net.public_network_name.iter().any(|n| n == network) => {
                        push(&mut addresses, "ExternalIP", &a.addr)
                    }
                    _ if !net.internal_network_name.is_empty()
                        && !net.internal_network_name.iter().any(|n| n == network) => {}
                    _ => push(&mut addresses, "InternalIP", &a.addr),
                }
            }
        }
        push(&mut addresses, "ExternalIP", &s.access_ipv4);
        if !net.ipv6_support_disabled {
            push(&mut addresses, "ExternalIP", &s.access_ipv6);
        }
        if let Some(h) = s.metadata.get("hostname") {
            push(&mut addresses, "Hostname", h);
        }
        let flavor = s
            .flavor
            .original_name
            .or(s.flavor.name)
            .or_else(|| s.flavor.id.map(|id| format!("id:{id}")))
            .unwrap_or_default();
        ServerInfo {
            id: s.id,
            name: s.name,
            status: s.status,
            flavor,
            availability_zone: s.availability_zone,
            addresses,
        }
    }

    /// Older Nova (< 2.47) gives only the flavor ID; look its name up once.
    async fn resolve_flavor(&self, mut info: ServerInfo) -> Result<ServerInfo> {
        if let Some(id) = info.flavor.strip_prefix("id:").map(str::to_owned) {
            if let Some(name) = self.flavors.lock().await.get(&id) {
                info.flavor = name.clone();
                return Ok(info);
            }
            let reply = self
                .client
                .request(
                    Service::Compute,
                    Method::GET,
                    &format!("/flavors/{id}"),
                    None,
                    "get flavor",
                )
                .await?;
            let name = reply.body["flavor"]["name"]
                .as_str()
                .unwrap_or(&id)
                .to_owned();
            self.flavors.lock().await.insert(id, name.clone());
            info.flavor = name;
        }
        Ok(info)
    }

    async fn parse_servers(&self, items: Vec<ServerJson>) -> Result<Vec<ServerInfo>> {
        let mut out = Vec::with_capacity(items.len());
        for s in items {
            out.push(self.resolve_flavor(self.to_info(s)).await?);
        }
        Ok(out)
    }

    /// Every server, from the cache when it is fresh enough.
    pub(crate) async fn servers(&self) -> Result<Arc<Servers>> {
        Ok(self.servers_listing().await?.0)
    }

    /// Every server, and whether this call listed them just now (then an absent server is
    /// known to be absent without asking again).
    async fn servers_listing(&self) -> Result<(Arc<Servers>, bool)> {
        let mut slot = self.servers.snapshot.lock().await;
        if let Some((at, servers)) = slot.as_ref() {
            if at.elapsed() < self.config.tuning.server_cache_ttl {
                return Ok((servers.clone(), false));
            }
        }
        let items = self
            .client
            .list_typed(
                Service::Compute,
                "/servers/detail",
                "servers",
                "list servers",
            )
            .await?;
        let servers = Arc::new(Servers::new(
            self.parse_servers(items).await?,
            |s| &s.name,
            |s| &s.id,
        ));
        tracing::debug!(provider = %self.name, servers = servers.len(), "listed servers");
        *slot = Some((Instant::now(), servers.clone()));
        Ok((servers, true))
    }

    pub(crate) async fn server_by_name(&self, name: &str) -> Result<ServerInfo> {
        let (servers, fresh) = self.servers_listing().await?;
        let found = servers.named(name);
        match found.as_slice() {
            [one] => return Ok((*one).clone()),
            [] if fresh => return Err(Error::InstanceNotFound),
            [] => {}
            many => return Err(self.duplicate(name, many.len())),
        }
        // Maybe newer than the listing: ask Nova (its `name` filter is a regex).
        let path = format!("/servers/detail?name={}", regex_anchor(name));
        let items = self
            .client
            .list_typed(Service::Compute, &path, "servers", "get server by name")
            .await?;
        let found: Vec<ServerInfo> = self
            .parse_servers(items)
            .await?
            .into_iter()
            .filter(|s| s.name == name)
            .collect();
        match found.len() {
            1 => Ok(found.into_iter().next().ok_or(Error::InstanceNotFound)?),
            0 => Err(Error::InstanceNotFound),
            n => Err(self.duplicate(name, n)),
        }
    }

    fn duplicate(&self, name: &str, n: usize) -> Error {
        Error::cloud(
            &self.name,
            "get server by name",
            format!("{n} servers are named {name:?}; node names must be unique"),
        )
    }

    pub(crate) async fn server_by_provider_id(&self, provider_id: &str) -> Result<ServerInfo> {
        let (region, id) = parse_provider_id(provider_id)?;
        if let Some(r) = region {
            if r != self.client.region() {
                tracing::warn!(provider_id, region = r, "provider ID is in another region");
                return Err(Error::InstanceNotFound);
            }
        }
        let (servers, fresh) = self.servers_listing().await?;
        if let Some(s) = servers.by_id(id) {
            return Ok(s.clone());
        }
        if fresh {
            return Err(Error::InstanceNotFound);
        }
        let reply = self
            .client
            .request_text(
                Service::Compute,
                Method::GET,
                &format!("/servers/{id}"),
                None,
                "get server",
            )
            .await;
        match reply {
            Ok(text) => {
                let one: OneServerJson = serde_json::from_str(&text).map_err(|e| {
                    Error::cloud(
                        &self.name,
                        "get server",
                        format!("unexpected server in the answer: {e}"),
                    )
                })?;
                let mut v = self.parse_servers(vec![one.server]).await?;
                v.pop().ok_or(Error::InstanceNotFound)
            }
            Err(e) if is_not_found(&e) => Err(Error::InstanceNotFound),
            Err(e) => Err(e),
        }
    }

    async fn server_for_node(&self, node: &Node) -> Result<ServerInfo> {
        match node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
            Some(id) if !id.is_empty() => self.server_by_provider_id(id).await,
            _ => {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                self.server_by_name(name).await
            }
        }
    }

    /// `<provider name>:///<id>`: the scheme is the provider's name, as upstream's
    /// `GetInstanceProviderID` makes it on the Instances (v1) path, so in-tree (v1) and
    /// external (v2) Nodes get the same provider ID (`local:///<id>` under `local`).
    fn provider_id(&self, id: &str) -> String {
        format!("{}:///{id}", self.name)
    }

    fn zone_of(&self, s: &ServerInfo) -> Zone {
        Zone {
            failure_domain: s.availability_zone.clone(),
            region: self.client.region().to_owned(),
        }
    }
}

/// `^name$` with regex metacharacters escaped, URL-encoded.
fn regex_anchor(name: &str) -> String {
    let mut re = String::from("^");
    for c in name.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            re.push('\\');
        }
        re.push(c);
    }
    re.push('$');
    let mut out = String::new();
    for b in re.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[async_trait]
impl Instances for OpenStack {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        Ok(self.server_by_name(name).await?.addresses)
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        Ok(self.server_by_provider_id(provider_id).await?.addresses)
    }

    /// As upstream: `/<uuid>`, so that `openstack://` + it is the provider ID.
    async fn instance_id(&self, name: &str) -> Result<String> {
        Ok(format!("/{}", self.server_by_name(name).await?.id))
    }

    async fn instance_type(&self, name: &str) -> Result<String> {
        Ok(self.server_by_name(name).await?.flavor)
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        Ok(self.server_by_provider_id(provider_id).await?.flavor)
    }

    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> Result<()> {
        Err(Error::NotImplemented)
    }

    /// As the legacy provider: the instance name from metadata.
    async fn current_node_name(&self, _hostname: &str) -> Result<String> {
        Ok(self.local_metadata().await?.name)
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        match self.server_by_provider_id(provider_id).await {
            Ok(_) => Ok(true),
            Err(Error::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Ok(self.server_by_provider_id(provider_id).await?.status == "SHUTOFF")
    }
}

#[async_trait]
impl InstancesV2 for OpenStack {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        match self.server_for_node(node).await {
            Ok(_) => Ok(true),
            Err(Error::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        Ok(self.server_for_node(node).await?.status == "SHUTOFF")
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata> {
        let s = self.server_for_node(node).await?;
        Ok(InstanceMetadata {
            provider_id: self.provider_id(&s.id),
            instance_type: s.flavor.clone(),
            node_addresses: s.addresses.clone(),
            zone: s.availability_zone.clone(),
            region: self.client.region().to_owned(),
            additional_labels: BTreeMap::new(),
        })
    }
}

#[async_trait]
impl Zones for OpenStack {
    /// The zone of this machine, from instance metadata.
    async fn get_zone(&self) -> Result<Zone> {
        let md = self.local_metadata().await?;
        Ok(Zone {
            failure_domain: md.availability_zone,
            region: self.client.region().to_owned(),
        })
    }

    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        let s = self.server_by_provider_id(provider_id).await?;
        Ok(self.zone_of(&s))
    }

    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone> {
        let s = self.server_by_name(name).await?;
        Ok(self.zone_of(&s))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_as_upstream() {
        assert_eq!(
            parse_provider_id("openstack:///abc").unwrap(),
            (None, "abc")
        );
        assert_eq!(
            parse_provider_id("openstack://RegionOne/abc").unwrap(),
            (Some("RegionOne"), "abc")
        );
        assert_eq!(parse_provider_id("local:///abc").unwrap(), (None, "abc"));
        for bad in [
            "aws:///abc",
            "openstack://abc",
            "openstack:///",
            "openstack:///a/b",
            "abc",
        ] {
            assert!(parse_provider_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_become_anchored_escaped_regexes() {
        assert_eq!(regex_anchor("node-1"), "%5Enode-1%24");
        assert_eq!(regex_anchor("a.b"), "%5Ea%5C.b%24");
    }
}
