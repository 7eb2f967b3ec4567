//! The `rackspace` provider: Kubernetes on the Rackspace Cloud, as the in-tree provider of
//! Kubernetes v0.x to v1.7 served it (`pkg/cloudprovider/providers/rackspace`, removed by
//! kubernetes/kubernetes#52855 with "use the OpenStack provider instead").
//!
//! Rackspace ran OpenStack (Nova, Cinder) behind an identity of its own: Keystone v2.0 with an
//! API-key sign-in (`RAX-KSKEY:apiKeyCredentials`) and service names of its own in the catalog.
//! So this provider is a preset of the openstack provider's code paths where Rackspace behaved
//! the same (the Keystone client, now speaking v2.0, with its token renewal and retries; Nova's
//! volume attachments for the `kubernetes.io/cinder` plugin) and the legacy provider's own
//! answers where it did not:
//! - **Instances**: a Node is the `ACTIVE` server of its name (a name that is an IP: the server
//!   with that address). `NodeAddresses` is one IP, the server's first `private` address, else
//!   `public`, else `accessIPv4`, else `accessIPv6`, as `InternalIP` and `ExternalIP` (upstream
//!   also gave the since-removed `LegacyHostIP`). `InstanceID` is the server ID (provider ID
//!   `rackspace://<id>`): the config drive's `meta_data.json` `uuid` when it is this server's
//!   (upstream read it for every name, so a controller-manager answered its own ID for every
//!   Node), else Nova's.
//! - **Zones**: the region only, as upstream.
//! - **Volumes**: Cinder volumes attached to and detached from the Node's server through Nova,
//!   as upstream's `AttachDisk`/`DetachDisk`; no provisioning (upstream's `CreateVolume` and
//!   `DeleteVolume` were unimplemented) and no PV labels.
//! - No load balancer (upstream's `LoadBalancer()` answered false, kubernetes/kubernetes#4478)
//!   and no routes: `[LoadBalancer]` keys are accepted and warned about as ignored, as upstream
//!   parsed and ignored them.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use hypercloud_cloudprovider::{
    CloudConfig, Error as CloudError, Instances, Interface, Layout, ProviderError as _, Registry,
    Result as CloudResult, VolumeAttacher, Zone, Zones,
};
use k8s_openapi::api::core::v1::{NodeAddress, PersistentVolumeSpec};
use reqwest::Method;
use serde::Deserialize;

use crate::client::Service;
use crate::config::{Config, Global, Secret};
use crate::OpenStack;

/// The name given to `--cloud-provider`.
pub const RACKSPACE: &str = "rackspace";
/// Rackspace's identity, the legacy provider's default `auth-url` (gophercloud's
/// `RackspaceUSIdentity`).
pub const RACKSPACE_IDENTITY: &str = "https://identity.api.rackspacecloud.com/v2.0/";
/// Where the legacy provider read the kubelet's own server from.
pub const METADATA_PATH: &str = "/media/configdrive/openstack/latest/meta_data.json";

/// Registers the provider under [`RACKSPACE`].
pub fn register(registry: &mut Registry) {
    registry.register_layout_aware(
        RACKSPACE,
        "Rackspace Cloud (Keystone v2.0 with an API key, Nova, Cinder attachments); configured by the legacy rackspace [Global] --cloud-config",
        |config, layout| Ok(Arc::new(Rackspace::from_cloud_config(config, layout)?) as Arc<dyn Interface>),
    );
}

/// What the legacy `[Global]` (and hypercloud's `[Hypercloud]`) said, beyond the OpenStack
/// config it becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RackspaceConfig {
    /// Where the kubelet's config drive `meta_data.json` is (`[Hypercloud] metadata-path`).
    pub metadata_path: PathBuf,
    /// Warnings about keys accepted and ignored, as upstream ignored them.
    pub warnings: Vec<String>,
}

/// Parses the legacy rackspace cloud config into the openstack provider's [`Config`].
pub fn parse_config(text: &str, origin: &str) -> Result<(Config, RackspaceConfig), String> {
    let file = hypercloud_cloudprovider::gcfg::parse(text)?;
    for s in &file.sections {
        let known = matches!(
            s.name.to_ascii_lowercase().as_str(),
            "global" | "loadbalancer" | "hypercloud"
        );
        if !known || s.subsection.is_some() {
            return Err(format!(
                "line {}: unknown section [{}]; the rackspace provider reads [Global], [LoadBalancer] and [Hypercloud]",
                s.line, s.name
            ));
        }
    }
    let mut g = Global::default();
    let mut rax = RackspaceConfig {
        metadata_path: PathBuf::from(METADATA_PATH),
        warnings: Vec::new(),
    };
    for e in &file.entries {
        let at = |m: &str| format!("line {}: [{}] {}: {m}", e.line, e.section, e.key);
        let value = e.value.clone().unwrap_or_default().trim().to_owned();
        let some = || Some(value.clone()).filter(|v| !v.is_empty());
        match (e.section.as_str(), e.key_lower().as_str()) {
            ("global", "auth-url") => g.auth_url = some(),
            ("global", "username") => g.username = some(),
            ("global", "password") => g.password = some().map(Secret::new),
            ("global", "api-key") => g.api_key = some().map(Secret::new),
            ("global", "tenant-id") => g.project_id = some(),
            ("global", "tenant-name") => g.project_name = some(),
            ("global", "region") => g.region = some(),
            ("global", "user-id") => {
                return Err(at(
                    "Rackspace's identity signs in by username (user-id is not supported, as gophercloud's rackspace client refused it)",
                ))
            }
            ("global", "domain-id" | "domain-name") => rax.warnings.push(at(
                "ignored: Rackspace's identity (Keystone v2.0) has no domains, and the legacy provider did not send it",
            )),
            (
                "loadbalancer",
                "subnet-id" | "create-monitor" | "monitor-delay" | "monitor-timeout"
                | "monitor-max-retries",
            ) => {
                rax.warnings.push(at(
                    "ignored: the rackspace provider has no load balancer (upstream parsed [LoadBalancer] and answered LoadBalancer() false)",
                ))
            }
            ("hypercloud", "metadata-path") => rax.metadata_path = PathBuf::from(value),
            ("hypercloud", "ca-file") => g.ca_file = some().map(PathBuf::from),
            _ => return Err(at("unknown key")),
        }
    }
    if g.auth_url.is_none() {
        g.auth_url = Some(RACKSPACE_IDENTITY.into());
    }
    let auth = g
        .auth_url
        .as_deref()
        .unwrap_or_default()
        .trim_end_matches('/');
    if !auth.ends_with("/v2.0") {
        return Err(format!(
            "[Global] auth-url {auth:?} must be a Keystone v2.0 URL (.../v2.0), as Rackspace's identity"
        ));
    }
    if g.username.is_none() {
        return Err("[Global] username is required".into());
    }
    if g.api_key.is_none() && g.password.is_none() {
        return Err("[Global] api-key (or password) is required".into());
    }
    if g.region.is_none() {
        return Err(
            "[Global] region is required: Rackspace's catalog has an endpoint per region (DFW, ORD, IAD, ...)".into(),
        );
    }
    let config = Config {
        global: g,
        origin: origin.into(),
        warnings: rax.warnings.clone(),
        ..Config::default()
    };
    Ok((config, rax))
}

/// A server as the rackspace provider reads it.
#[derive(Clone, Debug, Deserialize)]
struct Server {
    id: String,
    name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    addresses: BTreeMap<String, Vec<Address>>,
    #[serde(rename = "accessIPv4", default)]
    access_ipv4: String,
    #[serde(rename = "accessIPv6", default)]
    access_ipv6: String,
}

#[derive(Clone, Debug, Deserialize)]
struct Address {
    addr: String,
}

#[derive(Deserialize)]
struct OneServer {
    server: Server,
}

impl Server {
    fn first(&self, network: &str) -> Option<&str> {
        self.addresses
            .get(network)
            .and_then(|a| a.first())
            .map(|a| a.addr.as_str())
            .filter(|a| !a.is_empty())
    }

    /// Upstream's one address: private, public, accessIPv4, accessIPv6.
    fn address(&self) -> Option<&str> {
        self.first("private")
            .or_else(|| self.first("public"))
            .or_else(|| Some(self.access_ipv4.as_str()).filter(|a| !a.is_empty()))
            .or_else(|| Some(self.access_ipv6.as_str()).filter(|a| !a.is_empty()))
    }

    fn has_address(&self, ip: &str) -> bool {
        self.first("private") == Some(ip)
            || self.first("public") == Some(ip)
            || self.access_ipv4 == ip
            || self.access_ipv6 == ip
    }
}

/// Go's `regexp.QuoteMeta`: the name as a literal in Nova's regular-expression filter.
fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The rackspace cloud provider.
pub struct Rackspace {
    inner: OpenStack,
    rax: RackspaceConfig,
}

impl std::fmt::Debug for Rackspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rackspace")
            .field("inner", &self.inner)
            .field("rax", &self.rax)
            .finish()
    }
}

impl Rackspace {
    /// The `rackspace` factory: the legacy config is required.
    pub fn from_cloud_config(config: Option<&CloudConfig>, layout: Layout) -> CloudResult<Self> {
        let Some(cc) = config else {
            return Err(CloudError::MissingCloudConfig {
                provider: RACKSPACE.into(),
            });
        };
        let text = cc.text(RACKSPACE)?;
        let (config, rax) =
            parse_config(text, &cc.origin).map_err(|message| CloudError::InvalidCloudConfig {
                provider: RACKSPACE.into(),
                origin: cc.origin.clone(),
                message,
            })?;
        for w in &rax.warnings {
            tracing::warn!(provider = RACKSPACE, origin = %cc.origin, "{w}");
        }
        let inner = OpenStack::new(RACKSPACE, config, layout)
            .map_err(|e| e.into_cloud_config_error_as(RACKSPACE))?;
        Ok(Rackspace { inner, rax })
    }

    /// HTTP requests sent so far (Keystone included).
    pub fn api_calls(&self) -> u64 {
        self.inner.api_calls()
    }

    fn op_error(&self, operation: &str, message: String) -> CloudError {
        CloudError::cloud(RACKSPACE, operation, message)
    }

    /// The `ACTIVE` server of a Node's name (a name that is an IP: the server with it), as
    /// upstream's `getServerByName`.
    async fn server_named(&self, name: &str) -> CloudResult<Server> {
        let client = &self.inner.client;
        let servers: Vec<Server> = if name.parse::<IpAddr>().is_ok() {
            client
                .list_typed(
                    Service::Compute,
                    "/servers/detail",
                    "servers",
                    "list servers",
                )
                .await?
                .into_iter()
                .filter(|s: &Server| s.has_address(name))
                .collect()
        } else {
            let query = serde_urlencoded::to_string([
                ("name", format!("^{}$", quote_meta(name))),
                ("status", "ACTIVE".to_owned()),
            ])
            .unwrap_or_default();
            client
                .list_typed(
                    Service::Compute,
                    &format!("/servers/detail?{query}"),
                    "servers",
                    "list servers",
                )
                .await?
        };
        match servers.len() {
            0 => Err(CloudError::InstanceNotFound),
            1 => Ok(servers
                .into_iter()
                .next()
                .ok_or(CloudError::InstanceNotFound)?),
            n => Err(self.op_error(
                "find the server",
                format!("{n} servers match {name:?} where one is expected"),
            )),
        }
    }

    async fn server(&self, id: &str) -> CloudResult<Option<Server>> {
        match self
            .inner
            .client
            .request_text(
                Service::Compute,
                Method::GET,
                &format!("/servers/{id}"),
                None,
                "get server",
            )
            .await
        {
            Ok(text) => serde_json::from_str::<OneServer>(&text)
                .map(|s| Some(s.server))
                .map_err(|e| self.op_error("get server", format!("not a Nova server: {e}"))),
            Err(e) if crate::client::is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The config drive's server, when it is the one named `name`.
    fn config_drive_id(&self, name: &str) -> Option<String> {
        read_meta_data(&self.rax.metadata_path)
            .filter(|(_, n)| n == name)
            .map(|(id, _)| id)
    }
}

/// `uuid` and `name` of a config drive's `meta_data.json`.
fn read_meta_data(path: &Path) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct MetaData {
        uuid: String,
        #[serde(default)]
        name: String,
    }
    let text = std::fs::read(path).ok()?;
    let m: MetaData = serde_json::from_slice(&text).ok()?;
    Some((m.uuid, m.name))
}

fn server_id(provider_id: &str) -> CloudResult<&str> {
    provider_id
        .strip_prefix("rackspace://")
        .map(|rest| rest.trim_start_matches('/'))
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .ok_or_else(|| {
            CloudError::cloud(
                RACKSPACE,
                "parse provider ID",
                format!("{provider_id:?} is not a rackspace://<server id> provider ID"),
            )
        })
}

fn addresses(server: &Server) -> CloudResult<Vec<NodeAddress>> {
    let ip = server.address().ok_or_else(|| {
        CloudError::cloud(
            RACKSPACE,
            "read the server's address",
            format!("no address found for server {}", server.name),
        )
    })?;
    Ok(["InternalIP", "ExternalIP"]
        .iter()
        .map(|t| NodeAddress {
            type_: (*t).into(),
            address: ip.to_owned(),
        })
        .collect())
}

#[async_trait]
impl Interface for Rackspace {
    /// Signs in (Keystone v2.0) now, so a wrong key stops start-up.
    async fn initialize(&self, _client: Option<kube::Client>) -> CloudResult<()> {
        self.inner.client.authenticate().await
    }

    fn provider_name(&self) -> &str {
        RACKSPACE
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }

    fn zones(&self) -> Option<&dyn Zones> {
        Some(self)
    }

    fn volume_attacher(&self) -> Option<&dyn VolumeAttacher> {
        Some(self)
    }
}

#[async_trait]
impl Instances for Rackspace {
    async fn node_addresses(&self, name: &str) -> CloudResult<Vec<NodeAddress>> {
        addresses(&self.server_named(name).await?)
    }

    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> CloudResult<Vec<NodeAddress>> {
        let s = self
            .server(server_id(provider_id)?)
            .await?
            .ok_or(CloudError::InstanceNotFound)?;
        addresses(&s)
    }

    async fn instance_id(&self, name: &str) -> CloudResult<String> {
        if let Some(id) = self.config_drive_id(name) {
            return Ok(id);
        }
        Ok(self.server_named(name).await?.id)
    }

    /// Empty, as upstream.
    async fn instance_type(&self, _name: &str) -> CloudResult<String> {
        Ok(String::new())
    }

    async fn instance_type_by_provider_id(&self, _provider_id: &str) -> CloudResult<String> {
        Ok(String::new())
    }

    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> CloudResult<()> {
        Err(CloudError::NotImplemented)
    }

    async fn current_node_name(&self, hostname: &str) -> CloudResult<String> {
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> CloudResult<bool> {
        Ok(self.server(server_id(provider_id)?).await?.is_some())
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> CloudResult<bool> {
        let s = self
            .server(server_id(provider_id)?)
            .await?
            .ok_or(CloudError::InstanceNotFound)?;
        Ok(s.status == "SHUTOFF")
    }
}

/// The region only, as upstream's `GetZone`.
#[async_trait]
impl Zones for Rackspace {
    async fn get_zone(&self) -> CloudResult<Zone> {
        Ok(Zone {
            failure_domain: String::new(),
            region: self.inner.client.region(),
        })
    }

    async fn get_zone_by_provider_id(&self, _provider_id: &str) -> CloudResult<Zone> {
        self.get_zone().await
    }

    async fn get_zone_by_node_name(&self, _name: &str) -> CloudResult<Zone> {
        self.get_zone().await
    }
}

/// Cinder attachments through Nova: the openstack provider's, where Rackspace behaved the same.
#[async_trait]
impl VolumeAttacher for Rackspace {
    fn plugin_name(&self) -> &str {
        VolumeAttacher::plugin_name(&self.inner)
    }

    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        self.inner.pv_volume_id(spec)
    }

    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        self.inner.pod_volume_id(volume)
    }

    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        self.inner.attach_disk(instance_id, volume_id).await
    }

    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> CloudResult<()> {
        self.inner.detach_disk(instance_id, volume_id).await
    }

    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> CloudResult<bool> {
        self.inner.disk_is_attached(instance_id, volume_id).await
    }

    async fn disks_are_attached(
        &self,
        instance_id: &str,
        volume_ids: &[String],
    ) -> CloudResult<BTreeMap<String, bool>> {
        self.inner.disks_are_attached(instance_id, volume_ids).await
    }

    async fn get_attachment_disk_path(
        &self,
        instance_id: &str,
        volume_id: &str,
    ) -> CloudResult<String> {
        self.inner
            .get_attachment_disk_path(instance_id, volume_id)
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_legacy_keys_become_a_v2_openstack_config() {
        let (c, rax) = parse_config(
            "[Global]\nauth-url = http://127.0.0.1:8800/identity/v2.0\nusername = admin\napi-key = k3y\ntenant-id = t1\nregion = DFW\ndomain-name = Default\n[LoadBalancer]\nsubnet-id = s\n",
            "rax.conf",
        )
        .unwrap();
        assert!(c.global.identity_v2());
        assert_eq!(
            c.global.keystone_url(),
            "http://127.0.0.1:8800/identity/v2.0"
        );
        assert_eq!(c.global.api_key.as_ref().map(Secret::expose), Some("k3y"));
        assert_eq!(c.global.project_id.as_deref(), Some("t1"));
        assert_eq!(rax.warnings.len(), 2, "{:?}", rax.warnings);
        assert!(rax.warnings[0].contains("domain-name: ignored"));
        assert!(rax.warnings[1].contains("no load balancer"));
        let (c, _) =
            parse_config("[Global]\nusername = a\npassword = p\nregion = ORD\n", "x").unwrap();
        assert_eq!(c.global.auth_url.as_deref(), Some(RACKSPACE_IDENTITY));
    }

    #[test]
    fn bad_input_is_named() {
        for (text, want) in [
            (
                "[Global]\nusername = a\nregion = R\n",
                "api-key (or password) is required",
            ),
            (
                "[Global]\napi-key = k\nregion = R\n",
                "username is required",
            ),
            (
                "[Global]\nusername = a\napi-key = k\n",
                "region is required",
            ),
            (
                "[Global]\nusername = a\napi-key = k\nregion = R\nuser-id = u\n",
                "user-id is not supported",
            ),
            (
                "[Global]\nauth-url = http://k/v3\nusername = a\napi-key = k\nregion = R\n",
                "must be a Keystone v2.0 URL",
            ),
            (
                "[Global]\nusername = a\napi-key = k\nregion = R\ntrust-id = t\n",
                "trust-id: unknown key",
            ),
            ("[Route]\nrouter-id = r\n", "unknown section [Route]"),
        ] {
            let e = parse_config(text, "x").unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn one_address_in_upstream_s_order_and_names_quoted_for_nova() {
        let s: Server = serde_json::from_value(serde_json::json!({
            "id": "1", "name": "n", "accessIPv4": "198.51.100.1",
            "addresses": {"public": [{"addr": "203.0.113.5"}], "private": [{"addr": "10.0.0.5"}]},
        }))
        .unwrap();
        assert_eq!(s.address(), Some("10.0.0.5"));
        assert!(s.has_address("198.51.100.1") && !s.has_address("10.0.0.6"));
        let bare: Server = serde_json::from_value(
            serde_json::json!({"id": "1", "name": "n", "accessIPv6": "2001:db8::1"}),
        )
        .unwrap();
        assert_eq!(bare.address(), Some("2001:db8::1"));
        assert_eq!(quote_meta("node-1.example"), "node-1\\.example");
        assert!(server_id("openstack:///x").is_err());
        assert_eq!(server_id("rackspace://abc").unwrap(), "abc");
    }
}
