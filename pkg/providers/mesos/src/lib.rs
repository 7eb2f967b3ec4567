//! The `mesos` cloud provider: Kubernetes on Apache Mesos, as the in-tree provider of
//! Kubernetes v1.1-v1.9 served it (`pkg/cloudprovider/providers/mesos`, removed upstream with
//! the kubernetes-mesos framework it came with).
//!
//! Mesos is not an infrastructure cloud: it has no load balancers, routes, zones or volumes,
//! and the legacy provider supported none of them. What it had, this provider has:
//! - **Instances**: the agents the leading master lists in `/state`, by hostname. A Node's name
//!   is its agent's hostname (`CurrentNodeName` is the hostname itself) and its address is
//!   that name resolved by the system resolver (an IP literal is its own address), as the
//!   legacy provider's `ipAddress` did; the instance ID is the agent ID (the legacy provider
//!   answered an empty one, which today's controllers cannot use as a provider ID:
//!   `mesos://<agent id>` here). A disconnected agent (`active: false`) is shut down; an agent
//!   the master no longer lists does not exist.
//! - **Clusters** (`ListClusters`, `Master`): the master's `cluster` name (`mesos` without
//!   one) and the leading master's host. No other provider here has this capability; it is
//!   what upstream's `Clusters` interface was for: naming the clusters a cloud holds and the
//!   address of each one's master.
//!
//! Config: [`config`] (`[mesos-cloud]`); the master's client and its cache: [`client`].

pub mod client;
pub mod config;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hypercloud_cloudprovider::{Clusters, Error, Instances, Interface, Registry, Result};
use k8s_openapi::api::core::v1::NodeAddress;

pub use client::{Agent, Client, MesosState, DEFAULT_CLUSTER_NAME};
pub use config::Config;

/// The name given to `--cloud-provider`.
pub const PROVIDER_NAME: &str = "mesos";
/// Provider IDs are `mesos://<agent id>`.
pub const PROVIDER_ID_PREFIX: &str = "mesos://";

/// Registers the provider under [`PROVIDER_NAME`].
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "Apache Mesos (the master's /state: agents as instances, and Clusters); configured by the legacy [mesos-cloud] --cloud-config (optional: localhost:5050)",
        |config| Ok(Arc::new(Mesos::new(config::Config::from_cloud_config(config)?)?) as Arc<dyn Interface>),
    );
}

/// The mesos cloud provider.
pub struct Mesos {
    config: Config,
    client: Client,
}

impl std::fmt::Debug for Mesos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesos")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Mesos {
    /// A provider of the master in `config` (nothing is asked until the first call).
    pub fn new(config: Config) -> Result<Mesos> {
        let client = Client::new(&config)?;
        Ok(Mesos { config, client })
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The client of the master (the leader it follows, the cached state).
    pub fn client(&self) -> &Client {
        &self.client
    }

    async fn agent_by_hostname(&self, name: &str) -> Result<Agent> {
        self.client
            .state()
            .await?
            .agents
            .get(name)
            .cloned()
            .ok_or(Error::InstanceNotFound)
    }

    async fn agent_by_provider_id(&self, provider_id: &str) -> Result<Option<Agent>> {
        let id = agent_id(provider_id)?;
        Ok(self
            .client
            .state()
            .await?
            .agents
            .into_values()
            .find(|a| a.id == id))
    }

    /// The address of `name`: an IP literal is its own, else the system resolver's first
    /// answer (the legacy provider's `ipAddress`), within the HTTP client's timeout.
    async fn resolve(&self, name: &str) -> Result<IpAddr> {
        if name.is_empty() {
            return Err(Error::cloud(
                PROVIDER_NAME,
                "resolve node name",
                "no hostname specified",
            ));
        }
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return Ok(ip);
        }
        let lookup = tokio::net::lookup_host((name, 0));
        let timeout = self
            .config
            .http_client_timeout
            .max(Duration::from_millis(100));
        let found = tokio::time::timeout(timeout, lookup)
            .await
            .map_err(|_| {
                Error::cloud(
                    PROVIDER_NAME,
                    "resolve node name",
                    format!("{name:?}: no answer within {timeout:?}"),
                )
            })?
            .map_err(|e| {
                Error::cloud(PROVIDER_NAME, "resolve node name", format!("{name:?}: {e}"))
            })?
            .map(|a| a.ip())
            .next();
        let ip = found.ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "resolve node name",
                format!("{name:?} has no address"),
            )
        })?;
        tracing::debug!(%name, %ip, "resolved the node's hostname");
        Ok(ip)
    }

    async fn addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        let ip = self.resolve(name).await?;
        Ok(vec![NodeAddress {
            type_: "InternalIP".into(),
            address: ip.to_string(),
        }])
    }
}

/// The agent ID of `mesos://<id>` (also `mesos:///<id>`); another cloud's ID is an error, not
/// "not found" (that answer would get the Node deleted).
fn agent_id(provider_id: &str) -> Result<&str> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .map(|rest| rest.trim_start_matches('/'))
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "parse provider ID",
                format!("{provider_id:?} is not a {PROVIDER_ID_PREFIX}<agent id> provider ID"),
            )
        })
}

impl Interface for Mesos {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }

    fn clusters(&self) -> Option<&dyn Clusters> {
        Some(self)
    }
}

#[async_trait]
impl Instances for Mesos {
    /// The name resolved, as the legacy provider did (the agent is not looked up).
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        self.addresses(name).await
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        let agent = self
            .agent_by_provider_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        self.addresses(&agent.hostname).await
    }

    /// The agent ID of the agent with this hostname.
    async fn instance_id(&self, name: &str) -> Result<String> {
        Ok(self.agent_by_hostname(name).await?.id)
    }

    /// Mesos has no instance types: empty, after checking the agent exists.
    async fn instance_type(&self, name: &str) -> Result<String> {
        self.agent_by_hostname(name).await?;
        Ok(String::new())
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        self.agent_by_provider_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(String::new())
    }

    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> Result<()> {
        Err(Error::NotImplemented)
    }

    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Ok(self.agent_by_provider_id(provider_id).await?.is_some())
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let agent = self
            .agent_by_provider_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(!agent.active)
    }
}

#[async_trait]
impl Clusters for Mesos {
    /// Always one cluster: this one (upstream's comment).
    async fn list_clusters(&self) -> Result<Vec<String>> {
        Ok(vec![self.client.state().await?.cluster_name])
    }

    /// The leading master's host (a name or an address, without the port).
    async fn master(&self, cluster_name: &str) -> Result<String> {
        let state = self.client.state().await?;
        if state.cluster_name != cluster_name {
            return Err(Error::cloud(
                PROVIDER_NAME,
                "find the cluster's master",
                format!("the supplied cluster {cluster_name:?} does not exist (this master's cluster is {:?})", state.cluster_name),
            ));
        }
        let leader = state.leader.ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "find the cluster's master",
                "the currently leading master is unknown",
            )
        })?;
        let host = leader
            .rsplit_once(':')
            .map_or(leader.as_str(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        Ok(host.to_owned())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_name_an_agent_of_this_cloud() {
        assert_eq!(agent_id("mesos://abc-S1").unwrap(), "abc-S1");
        assert_eq!(agent_id("mesos:///abc-S1").unwrap(), "abc-S1");
        for bad in ["aws:///i-1", "mesos://", "mesos://a/b", ""] {
            let e = agent_id(bad).unwrap_err();
            let e = hypercloud_cloudprovider::Chain(&e).to_string();
            assert!(
                e.contains("is not a mesos://<agent id> provider ID"),
                "{bad}: {e}"
            );
        }
    }

    #[tokio::test]
    async fn addresses_are_the_name_resolved() {
        let m = Mesos::new(Config::default()).unwrap();
        let a = m.node_addresses("10.1.2.3").await.unwrap();
        assert_eq!(a[0].address, "10.1.2.3");
        assert_eq!(a[0].type_, "InternalIP");
        let local = m.node_addresses("localhost").await.unwrap();
        assert!(local[0].address.parse::<IpAddr>().unwrap().is_loopback());
        let e = m.node_addresses("no-such-host.invalid").await.unwrap_err();
        let e = hypercloud_cloudprovider::Chain(&e).to_string();
        assert!(
            e.contains("resolve node name") && e.contains("no-such-host.invalid"),
            "{e}"
        );
        assert!(matches!(
            m.add_ssh_key_to_all_instances("u", b"k").await,
            Err(Error::NotImplemented)
        ));
    }
}
