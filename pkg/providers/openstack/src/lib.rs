//! hypercloud-providers-openstack: the `openstack` cloud provider, and `local`, the same provider
//! preset to the one-machine local cloud's endpoint and credentials.
//!
//! Upstream equivalents: kubernetes/cloud-provider-openstack's openstack-cloud-controller-manager
//! (`pkg/openstack`) and the legacy in-tree provider (`pkg/cloudprovider/providers/openstack`,
//! later `legacy-cloud-providers/openstack`). Configuration is upstream's `cloud.conf`
//! ([`config`]); the cloud is reached over Keystone v3, Nova, Neutron and Cinder with reqwest
//! ([`client`](crate::OpenStack)).
//!
//! Capabilities: Instances and InstancesV2 (Nova servers by name or provider ID
//! `openstack:///<uuid>`, answered from one short-lived listing of all servers), Zones, Routes
//! (Neutron router extra routes, only with `[Route] router-id`), PvLabeler (Cinder volume
//! zone/region labels; also as the lower-level [`Volumes`] trait), VolumeProvisioner (Cinder
//! create/delete/extend for the in-tree `kubernetes.io/cinder` plugin), VolumeAttacher (Nova
//! volume attachments for the same plugin) and the [`MetadataReader`]
//! for the node side, and LoadBalancer on Octavia when the catalog has a `load-balancer`
//! endpoint, named per [`Layout`] as each upstream did (`a<uid>` in-tree,
//! `kube_service_<cluster>_<namespace>_<name>` external, which also adopts in-tree load
//! balancers; see the `loadbalancer` module). Not supported: Clusters (as upstream).
//!
//! ```no_run
//! # async fn demo() -> hypercloud_cloudprovider::Result<()> {
//! use hypercloud_cloudprovider::{Interface, Layout, Registry};
//! let mut registry = Registry::new();
//! hypercloud_providers_openstack::register(&mut registry);
//! // `local` needs no config file: it talks to `hypercloud local-cloud serve` on 127.0.0.1:8800.
//! let cloud = hypercloud_providers_openstack::OpenStack::local(None, Layout::External)?;
//! let zone = cloud.zones().expect("zones").get_zone_by_node_name("node-1").await?;
//! # Ok(()) }
//! ```
//!
//! Start here: [`register`] and [`OpenStack`], then `src/client.rs` (Keystone tokens, the
//! catalog, retries: every request), and one capability module: `src/instances.rs`,
//! `src/loadbalancer.rs` or `src/volumes.rs`; [`config`] for `cloud.conf`.
//!
//! Not here: the local cloud (`hypercloud-localcloud` is a dependency only for the `local`
//! preset's defaults), or a CSI driver: the volume capabilities are the in-tree Cinder plugin's
//! cloud part, for the controller-manager and the kubelet-helper.

mod client;
pub mod config;
mod error;
mod instances;
mod loadbalancer;
pub mod metadata;
pub mod rackspace;
mod routes;
mod volumes;
pub mod webhook;

use hypercloud_cloudprovider::ProviderError as _;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use hypercloud_cloudprovider::credential_secret::{self, CredentialSecret, SecretRef};
use hypercloud_cloudprovider::{CloudConfig, Interface, Layout, LoadBalancer, Registry, Routes};

pub use config::Config;
pub use error::{Error, Result};
pub use instances::{parse_provider_id, PROVIDER_ID_PREFIX};
pub use loadbalancer::{
    ANNOTATION_FLOATING_NETWORK_ID, ANNOTATION_FLOATING_SUBNET_ID, ANNOTATION_INTERNAL,
    ANNOTATION_KEEP_FLOATING_IP, ANNOTATION_LOAD_BALANCER_ADDRESS, ANNOTATION_LOAD_BALANCER_ID,
};
pub use metadata::{Metadata, MetadataReader};
pub use volumes::{Volumes, CINDER_CSI_DRIVER, CINDER_PLUGIN};

/// Provider name of the real OpenStack provider.
pub const OPENSTACK: &str = "openstack";
/// Provider name of the preset for the local cloud.
pub const LOCAL: &str = "local";

/// Registers `openstack` and `local` in the binary's registry; both are built for the
/// asking component's layout (in-tree or external load-balancer behaviour).
pub fn register(registry: &mut Registry) {
    registry.register_layout_aware(
        OPENSTACK,
        "OpenStack (Keystone v3, Nova, Neutron, Cinder); configured by an upstream cloud.conf --cloud-config",
        |config, layout| {
            Ok(Arc::new(OpenStack::from_cloud_config(config, layout)?) as Arc<dyn Interface>)
        },
    );
    registry.register_layout_aware(
        LOCAL,
        "the openstack provider preset to `hypercloud local-cloud` on 127.0.0.1:8800; --cloud-config optional (overrides)",
        |config, layout| Ok(Arc::new(OpenStack::local(config, layout)?) as Arc<dyn Interface>),
    );
    rackspace::register(registry);
}

/// The OpenStack cloud provider.
pub struct OpenStack {
    name: String,
    /// In-tree or external: load-balancer names and whether the Service is annotated.
    layout: Layout,
    /// The component's Kubernetes client, from [`Interface::initialize`] (external: the
    /// Service annotations are written with it).
    kube: std::sync::OnceLock<kube::Client>,
    config: Arc<Config>,
    client: client::Client,
    servers: instances::ServerCache,
    flavors: tokio::sync::Mutex<BTreeMap<String, String>>,
    metadata: MetadataReader,
    local_metadata: tokio::sync::OnceCell<Metadata>,
    /// What the last ensure of each load balancer converged (`loadbalancer::Converged`): the
    /// ensure the service controller runs for the provider's own annotation write reuses it.
    converged: std::sync::Mutex<BTreeMap<String, loadbalancer::Converged>>,
    /// What `get_load_balancer` found per load balancer name (`loadbalancer::Looked`): the
    /// service controller asks it right before deleting, and the deletion reuses it.
    looked: std::sync::Mutex<BTreeMap<String, loadbalancer::Looked>>,
    /// The followed credentials Secret (`[Global] secret-name`), from [`Interface::initialize`].
    credentials: std::sync::OnceLock<CredentialSecret>,
}

impl std::fmt::Debug for OpenStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStack")
            .field("name", &self.name)
            .field("layout", &self.layout)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenStack {
    /// A provider named `name` for a resolved, valid `config`, in `layout`.
    pub fn new(name: &str, config: Config, layout: Layout) -> Result<Self> {
        config.validate()?;
        let config = Arc::new(config);
        Ok(OpenStack {
            name: name.into(),
            layout,
            kube: std::sync::OnceLock::new(),
            client: client::Client::new(name, config.clone())?,
            metadata: MetadataReader::new(config.metadata.clone())?,
            config,
            servers: instances::ServerCache::default(),
            flavors: tokio::sync::Mutex::new(BTreeMap::new()),
            local_metadata: tokio::sync::OnceCell::new(),
            converged: std::sync::Mutex::new(BTreeMap::new()),
            looked: std::sync::Mutex::new(BTreeMap::new()),
            credentials: std::sync::OnceLock::new(),
        })
    }

    /// The `openstack` factory: a `cloud.conf` is required.
    pub fn from_cloud_config(
        config: Option<&CloudConfig>,
        layout: Layout,
    ) -> hypercloud_cloudprovider::Result<Self> {
        let Some(cc) = config else {
            return Err(hypercloud_cloudprovider::Error::MissingCloudConfig {
                provider: OPENSTACK.into(),
            });
        };
        let text = cc.text(OPENSTACK)?;
        Self::build(OPENSTACK, Config::parse(text, &cc.origin), layout)
    }

    /// The `local` factory: the local cloud's defaults, overridden by `config` when given.
    pub fn local(
        config: Option<&CloudConfig>,
        layout: Layout,
    ) -> hypercloud_cloudprovider::Result<Self> {
        let base = config::local_defaults();
        let parsed = match config {
            Some(cc) => Config::parse_onto(base, cc.text(LOCAL)?, &cc.origin),
            None => Ok(base),
        };
        Self::build(LOCAL, parsed, layout)
    }

    fn build(
        name: &str,
        parsed: Result<Config>,
        layout: Layout,
    ) -> hypercloud_cloudprovider::Result<Self> {
        parsed
            .and_then(Config::resolve)
            .and_then(|c| OpenStack::new(name, c, layout))
            .map_err(|e| e.into_cloud_config_error_as(name))
    }

    /// The layout this provider was built for.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// HTTP requests sent to the cloud so far (every attempt, Keystone included), for
    /// measuring batching.
    pub fn api_calls(&self) -> u64 {
        self.client.calls()
    }

    /// How many versions of the credentials Secret were applied so far (the one read at
    /// start included); 0 without `[Global] secret-name`.
    pub fn credentials_versions(&self) -> u64 {
        self.credentials
            .get()
            .map_or(0, CredentialSecret::applied_count)
    }

    /// Forgets the cached server listing, so the next look-up asks the cloud.
    pub async fn invalidate_cache(&self) {
        self.servers.invalidate().await;
    }

    /// The metadata reader configured by `[Metadata]`.
    pub fn metadata_reader(&self) -> &MetadataReader {
        &self.metadata
    }

    /// Volume look-ups (not part of the upstream interface).
    pub fn volumes(&self) -> &dyn Volumes {
        self
    }

    /// Reads `secret` (with `client`, else a client from `[Global] kubeconfig-path` or the
    /// in-cluster configuration) and follows it: each version's credentials replace those
    /// in use. A changed region is refused (it is part of every node's identity).
    async fn follow_credentials(
        &self,
        secret: SecretRef,
        client: Option<kube::Client>,
    ) -> hypercloud_cloudprovider::Result<CredentialSecret> {
        let startup = |message: String| hypercloud_cloudprovider::Error::Initialize {
            provider: self.name.clone(),
            source: Box::new(hypercloud_cloudprovider::Message(message)),
        };
        let client = match client {
            Some(c) => c,
            None => credential_secret::client_for(self.config.global.kubeconfig_path.as_deref())
                .await
                .map_err(|e| {
                    startup(format!(
                        "[Global] secret-name {secret}: no Kubernetes client to read it with ([Global] kubeconfig-path): {e}"
                    ))
                })?,
        };
        let base = self.config.clone();
        let identity = self.client.identity();
        let apply: credential_secret::Apply = Arc::new(move |data| {
            let merged = base.with_credentials_from(data)?;
            let current = identity.current();
            if identity.generation_replaced() && merged.global.region != current.region {
                return Err(format!(
                    "it changes the region from {:?} to {:?}, which needs a restart",
                    current.region.as_deref().unwrap_or_default(),
                    merged.global.region.as_deref().unwrap_or_default()
                ));
            }
            identity.replace(merged.global);
            Ok(())
        });
        CredentialSecret::follow(client, secret, apply)
            .await
            .map_err(|e| startup(e.to_string()))
    }

    /// This machine's instance metadata, read once.
    async fn local_metadata(&self) -> hypercloud_cloudprovider::Result<Metadata> {
        self.local_metadata
            .get_or_try_init(|| self.metadata.read())
            .await
            .cloned()
            .map_err(|e| e.into_provider_error_as(&self.name))
    }
}

#[async_trait]
impl Interface for OpenStack {
    /// Reads and then follows the credentials Secret when `[Global] secret-name` names one,
    /// and authenticates once, so that bad credentials or an unreachable Keystone stop
    /// start-up with a clear error instead of failing every later call.
    async fn initialize(
        &self,
        client: Option<kube::Client>,
    ) -> hypercloud_cloudprovider::Result<()> {
        if let Some(c) = client.clone() {
            // A second initialize keeps the first client.
            let _ = self.kube.set(c);
        }
        if let Some(secret) = self.config.credentials_secret() {
            if self.credentials.get().is_none() {
                let followed = self.follow_credentials(secret, client).await?;
                let _ = self.credentials.set(followed);
            }
        }
        self.client.authenticate().await
    }

    fn credentials_health(&self) -> std::result::Result<(), String> {
        self.credentials
            .get()
            .map_or(Ok(()), CredentialSecret::health)
    }

    fn provider_name(&self) -> &str {
        &self.name
    }

    /// As upstream's OpenStack provider.
    fn has_cluster_id(&self) -> bool {
        true
    }

    // webhooks: hypercloud's own (see [`webhook`]): `service-lb-annotations`.
    hypercloud_cloudprovider::capability_getters! {
        instances, instances_v2, zones, pv_labeler, volume_provisioner, volume_attacher, webhooks
    }

    /// Only when the Keystone catalog (read by [`Interface::initialize`]) has a `load-balancer`
    /// (Octavia) endpoint, so clouds without Octavia keep working, and `[LoadBalancer]
    /// enabled` is not `false` (OCCM).
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        (self.client.has_load_balancer() && self.config.load_balancer.enabled != Some(false))
            .then_some(self as &dyn LoadBalancer)
    }

    /// Only with `[Route] router-id`, as upstream.
    fn routes(&self) -> Option<&dyn Routes> {
        self.config
            .route
            .router_id
            .as_ref()
            .map(|_| self as &dyn Routes)
    }
}
