//! hypercloud-providers-gce: the `gce` cloud provider.
//!
//! Upstream equivalent: the legacy in-tree provider (`legacy-cloud-providers/gce`, now
//! kubernetes/cloud-provider-gcp's `providers/gce`). Configuration is its `gce.conf`
//! ([`config`]); Compute Engine is reached over its v1 REST API with JSON (`client`), and the
//! GCE metadata server answers what the machine itself is (project, zone, network, and, for
//! the node the process runs on, its addresses and identity, as upstream does in-tree).
//!
//! Capabilities: Instances (incl. `AddSSHKeyToAllInstances`: the key goes into the project's
//! `ssh-keys` metadata), InstancesV2, Zones and Routes (one GCE route per pod CIDR, next hop
//! the node's instance) and LoadBalancer (external TCP/UDP: forwarding rule, target pool,
//! HTTP health check and firewall, named `a<uid>` as upstream). Provider IDs are `gce://<project>/<zone>/<name>`;
//! instances are looked up by name in the local zone, or in every zone of the region with
//! `multizone`/`regional`; a `TERMINATED` instance is shut down. PvLabeler gives a
//! `gcePersistentDisk` PV its disk's zone and region; VolumeProvisioner and VolumeAttacher
//! create, resize, delete, attach and detach zonal persistent disks for the in-tree
//! `kubernetes.io/gce-pd` plugin (`src/disks.rs`). Not yet: internal load balancers,
//! regional disks.
//!
//! ```no_run
//! # async fn demo() -> hypercloud_cloudprovider::Result<()> {
//! use hypercloud_cloudprovider::{CloudConfig, Interface};
//! let conf = CloudConfig {
//!     origin: "inline".into(),
//!     bytes: b"[global]\nproject-id = demo\nlocal-zone = us-central1-a\napi-endpoint = http://127.0.0.1:8800/compute/v1/\n[Hypercloud]\nanonymous = true\n".to_vec(),
//! };
//! let cloud = hypercloud_providers_gce::Gce::from_cloud_config(Some(&conf))?;
//! cloud.initialize(None).await?;
//! let zone = cloud.zones().expect("zones").get_zone().await?;
//! # Ok(()) }
//! ```
//!
//! Requests carry a token from the metadata server, a service-account key file (found by the
//! Application Default Credentials search for `token-url = nil`, as upstream, or named by
//! `[Hypercloud] credentials-file`) or upstream's `AltTokenSource`; or none
//! (`[Hypercloud] anonymous = true`): see [`credentials`] and [`config::TokenSource`].
//!
//! Start here: [`register`] and [`Gce`], then `src/client.rs` (the Compute v1 REST client and
//! its operations) and `src/loadbalancer.rs`; [`config`] for `gce.conf`.
//!
//! Not here: regional persistent disks, internal load balancers.

mod client;
pub mod config;
pub mod credentials;
mod disks;
mod error;
mod instances;
mod loadbalancer;
mod routes;
mod volumes;

use hypercloud_cloudprovider::ProviderError as _;
use std::sync::Arc;

use async_trait::async_trait;
use hypercloud_cloudprovider::{CloudConfig, Interface, Registry};
use tokio::sync::OnceCell;

pub use client::last_segment;
pub use config::Config;
pub use disks::{pd_parameters, PdParameters, GCE_PD_PLUGIN};
pub use error::{Error, Result};
pub use instances::{parse_provider_id, provider_id, region_of_zone, PROVIDER_ID_PREFIX};

/// The name the provider is registered under.
pub const PROVIDER_NAME: &str = "gce";

/// Registers `gce` in the binary's registry.
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "Google Compute Engine (Compute v1 REST + the metadata server); configured by the legacy gce.conf --cloud-config (optional on a GCE VM)",
        |config| Ok(Arc::new(Gce::from_cloud_config(config)?) as Arc<dyn Interface>),
    );
}

/// What start-up resolves: from the config, else the metadata server.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub compute: client::Compute,
    pub local_zone: String,
    pub region: String,
    /// Where instances are looked for.
    pub managed_zones: Vec<String>,
    /// The network of routes and firewalls.
    pub network: String,
    /// The instance this process runs on, when the metadata server knows one.
    pub current_instance: Option<String>,
}

/// The gce cloud provider.
pub struct Gce {
    config: Arc<Config>,
    metadata: client::Metadata,
    credentials: Arc<client::Credentials>,
    resolved: OnceCell<Resolved>,
}

impl std::fmt::Debug for Gce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gce")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Gce {
    /// A provider for a parsed config. Credentials files are read here (the Application
    /// Default Credentials search reads the process's environment), so a bad one stops
    /// start-up naming the file.
    pub fn new(config: Config) -> Result<Self> {
        Ok(Gce {
            metadata: client::Metadata::new(&config)?,
            credentials: Arc::new(client::Credentials::resolve(
                &config.global.token_source,
                |k| std::env::var(k).ok(),
            )?),
            config: Arc::new(config),
            resolved: OnceCell::new(),
        })
    }

    /// The registry's factory. Without a `gce.conf` everything comes from the metadata server.
    pub fn from_cloud_config(
        config: Option<&CloudConfig>,
    ) -> hypercloud_cloudprovider::Result<Self> {
        let parsed = match config {
            Some(cc) => Config::parse(cc.text(PROVIDER_NAME)?, &cc.origin),
            None => Ok(Config::default()),
        };
        parsed
            .and_then(Gce::new)
            .map_err(Error::into_cloud_config_error)
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Compute Engine requests sent so far.
    pub fn api_calls(&self) -> u64 {
        self.resolved.get().map_or(0, |r| r.compute.calls())
    }

    /// Resolves the project, zone, region, managed zones and network once.
    pub(crate) async fn resolved(&self) -> Result<&Resolved> {
        self.resolved.get_or_try_init(|| self.resolve()).await
    }

    async fn resolve(&self) -> Result<Resolved> {
        let g = &self.config.global;
        let from_metadata = |what: &str, e: Error| {
            Error::Missing(format!(
                "{what} is not in the cloud config and the metadata server did not say: {e}"
            ))
        };
        let project = match &g.project_id {
            Some(p) => p.clone(),
            None => self
                .metadata
                .get("project/project-id")
                .await
                .map_err(|e| from_metadata("[global] project-id", e))?,
        };
        let local_zone = match &g.local_zone {
            Some(z) => z.clone(),
            None => last_segment(
                &self
                    .metadata
                    .get("instance/zone")
                    .await
                    .map_err(|e| from_metadata("[global] local-zone", e))?,
            )
            .to_owned(),
        };
        let region = region_of_zone(&local_zone)?;
        let compute = client::Compute::new(
            &self.config,
            project,
            self.metadata.clone(),
            self.credentials.clone(),
        )?;
        let managed_zones = if self.config.multizone() {
            let filter = format!("region eq .*/regions/{region}");
            let mut zones: Vec<String> = compute
                .list(&compute.path("zones"), &filter, "zones.list")
                .await?
                .iter()
                .filter_map(|z| z["name"].as_str().map(str::to_owned))
                .collect();
            zones.sort();
            if zones.is_empty() {
                return Err(Error::Missing(format!(
                    "no zone of region {region} exists in project {}",
                    compute.project
                )));
            }
            zones
        } else {
            compute
                .get(&compute.path(&format!("zones/{local_zone}")), "zones.get")
                .await?;
            vec![local_zone.clone()]
        };
        let current_instance = self
            .metadata
            .get("instance/name")
            .await
            .ok()
            .filter(|n| !n.is_empty());
        let network = match &g.network_name {
            Some(n) => n.clone(),
            None => match self
                .metadata
                .get("instance/network-interfaces/0/network")
                .await
            {
                Ok(n) => last_segment(&n).to_owned(),
                Err(_) => "default".to_owned(),
            },
        };
        tracing::info!(project = %compute.project, zone = %local_zone, %region, zones = ?managed_zones, %network,
            current_instance = current_instance.as_deref().unwrap_or(""), "gce provider resolved");
        Ok(Resolved {
            compute,
            local_zone,
            region,
            managed_zones,
            network,
            current_instance,
        })
    }
}

#[async_trait]
impl Interface for Gce {
    /// Resolves the project and zones (config, else metadata server) and checks that the API
    /// answers, so a wrong endpoint or project stops start-up with a clear error.
    async fn initialize(
        &self,
        _client: Option<kube::Client>,
    ) -> hypercloud_cloudprovider::Result<()> {
        self.resolved()
            .await
            .map(|_| ())
            .map_err(|e| hypercloud_cloudprovider::Error::Initialize {
                provider: PROVIDER_NAME.into(),
                source: Box::new(e),
            })
    }

    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// As upstream's gce provider.
    fn has_cluster_id(&self) -> bool {
        true
    }

    // webhooks: hypercloud's own `service-lb-annotations` (loadbalancer.rs).
    hypercloud_cloudprovider::capability_getters! {
        instances, instances_v2, zones, routes, load_balancer, pv_labeler,
        volume_provisioner, volume_attacher, webhooks
    }
}
