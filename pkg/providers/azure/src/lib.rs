//! hypercloud-providers-azure: the `azure` cloud provider.
//!
//! Upstream equivalent: kubernetes-sigs/cloud-provider-azure (`pkg/provider`, formerly the
//! in-tree `legacy-cloud-providers/azure`), for `vmType: standard` (VMs in availability sets).
//! Its `--cloud-config` is `azure.json`, read by [`config::Config::parse`]; the cloud's
//! endpoints (Azure Resource Manager, the Entra ID login endpoint, the token resource) come
//! from the named cloud, or for `AzureStackCloud` from the go-autorest environment file named
//! by `AZURE_ENVIRONMENT_FILEPATH` ([`config::Environment`]), which is how the same file points
//! at the local cloud. [`client::Arm`] calls Resource Manager with Microsoft's SDK for Rust
//! (azure_core's pipeline, azure_identity's credentials), typed by [`models`].
//!
//! Capabilities: Instances, InstancesV2 and Zones (`src/instances.rs`: node name = VM name,
//! provider ID `azure:///subscriptions/<s>/resourceGroups/<g>/providers/Microsoft.Compute/virtualMachines/<name>`,
//! addresses from the primary NIC's primary IP configuration and its public IP, instance type
//! the VM size, zone `<location>-<n>` or the fault domain, a stopped, deallocating or
//! deallocated VM shut down); Routes (`src/routes.rs`: one route per node in `routeTableName`,
//! named as the node, next hop its private address).
//!
//! Volumes: the in-tree `kubernetes.io/azure-disk` plugin's managed disks (`src/disks.rs`: volume
//! ID the disk's resource ID, created `Empty` in a zone `<location>-<n>` or none, grown while
//! unattached, attached by the lowest free LUN with a PATCH of the VM's data disks, PV labels).
//!
//! With `useInstanceMetadata`, what the VM this process runs on is (its addresses, size, ID and
//! zone) comes from the instance metadata service (`src/metadata.rs`), as upstream's in-tree
//! kubelet did; other nodes from Resource Manager.
//!
//! LoadBalancer (`src/loadbalancer.rs`): upstream v1.20's single load balancer per cluster
//! (`<cluster>`, `<cluster>-internal`), a frontend, rules and probes per Service named from
//! its UID, a public IP `<cluster>-a<uid>`, security rules, and the nodes' primary NICs in the
//! backend pool; every annotation refused by name that is not implemented (`SERVICE_SETTINGS`).
//!
//! Start here: [`register`] and [`Azure`]; then `src/instances.rs`, [`client`] and
//! `docs/azure-arm-client.md`. Not planned: scale sets (`vmType` `vmss`, `vmssflex`), reading
//! the config from the `kube-system/azure-cloud-provider` Secret.

pub mod client;
pub mod config;
mod disks;
pub mod error;
mod instances;
mod loadbalancer;
mod metadata;
pub mod models;
mod routes;

use std::sync::Arc;

use async_trait::async_trait;
use hypercloud_cloudprovider::ProviderError as _;
use hypercloud_cloudprovider::{CloudConfig, Interface, Registry};
use tokio::sync::OnceCell;

pub use client::{Arm, ArmOptions};
pub use config::Config;
pub use disks::{
    disk_parameters, parse_disk_uri, DiskParameters, DiskUri, AZURE_DISK_PLUGIN, DISK_BY_LUN_PREFIX,
};
pub use error::{Error, Result};
pub use instances::{parse_provider_id, provider_id, PROVIDER_ID_PREFIX};

/// The name the provider is registered under.
pub const PROVIDER_NAME: &str = "azure";

/// Registers `azure` in the binary's registry.
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "Microsoft Azure (Resource Manager with Microsoft's SDK for Rust; vmType standard); configured by upstream's azure.json --cloud-config",
        |config| Ok(Arc::new(Azure::from_cloud_config(config)?) as Arc<dyn Interface>),
    );
}

/// The azure cloud provider.
pub struct Azure {
    config: Arc<Config>,
    options: ArmOptions,
    /// The environment, when given already resolved (else `config.environment()`).
    environment: Option<config::Environment>,
    arm: OnceCell<Arm>,
    /// The instance metadata service, with `useInstanceMetadata`.
    imds: Option<metadata::Imds>,
    /// One route change at a time: the route table is made by the first and changed whole
    /// (upstream batches its route updates for the same reason).
    routes: tokio::sync::Mutex<()>,
    /// Whether `initialize` makes the Resource Manager client (and so fetches a token): not
    /// for a cloud-node-manager that reads the instance metadata service only, which needs
    /// no credential.
    connect_at_start: bool,
}

impl std::fmt::Debug for Azure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Azure")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Azure {
    /// A provider for a parsed config; the client's trust and endpoints from the process
    /// environment (`REQUESTS_CA_BUNDLE`, `AZURE_ENVIRONMENT_FILEPATH`).
    pub fn new(config: Config) -> Self {
        Self::with_options(config, ArmOptions::from_env())
    }

    /// A provider with the client's options given.
    pub fn with_options(config: Config, options: ArmOptions) -> Self {
        // A metadata client that cannot be built (a bad source address) is reported at its
        // first use by the calls that need it.
        let imds = config
            .use_instance_metadata
            .then(|| metadata::Imds::new(&config))
            .and_then(|r| {
                r.map_err(|e| tracing::warn!("instance metadata client: {e}"))
                    .ok()
            });
        Azure {
            config: Arc::new(config),
            options,
            environment: None,
            arm: OnceCell::new(),
            imds,
            routes: tokio::sync::Mutex::new(()),
            connect_at_start: true,
        }
    }

    /// A provider with the environment already resolved (tests; a caller that read the
    /// AzureStackCloud file itself).
    pub fn with_environment(
        config: Config,
        environment: config::Environment,
        options: ArmOptions,
    ) -> Self {
        Azure {
            environment: Some(environment),
            ..Self::with_options(config, options)
        }
    }

    /// The registry's factory: `azure.json` is required.
    pub fn from_cloud_config(
        config: Option<&CloudConfig>,
    ) -> hypercloud_cloudprovider::Result<Self> {
        let Some(cc) = config else {
            return Err(Error::ParseCloudConfig {
                origin: "--cloud-config".into(),
                message: "the azure provider needs azure.json (--cloud-config)".into(),
            }
            .into_cloud_config_error());
        };
        let text = cc.text(PROVIDER_NAME)?;
        Config::parse(text, &cc.origin)
            .map(Azure::new)
            .map_err(Error::into_cloud_config_error)
    }

    /// The provider of upstream's cloud-node-manager, which asks only about its own node:
    /// `use_instance_metadata` (its `--use-instance-metadata`, default true) decides whether
    /// the node's facts come from the instance metadata service or from Resource Manager,
    /// whatever `useInstanceMetadata` says in `config`. Unlike upstream's, whose metadata
    /// service sits at a fixed address, hypercloud's reads the service's address from
    /// azure.json (`hypercloudInstanceMetadataEndpoint`, `...SourceAddress`), so the file is
    /// needed in both modes. With the metadata service no token is fetched at start (nor
    /// later, as long as only the local VM is asked about).
    pub fn for_node_manager(mut config: Config, use_instance_metadata: bool) -> Self {
        if config.use_instance_metadata != use_instance_metadata {
            tracing::info!(
                origin = %config.origin,
                use_instance_metadata,
                "--use-instance-metadata overrides useInstanceMetadata of the cloud config"
            );
        }
        config.use_instance_metadata = use_instance_metadata;
        Azure {
            connect_at_start: !use_instance_metadata,
            ..Self::new(config)
        }
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Resource Manager requests sent so far.
    pub fn api_calls(&self) -> u64 {
        self.arm.get().map_or(0, Arm::requests)
    }

    /// The Resource Manager client, made (the environment resolved, a token fetched) once.
    pub(crate) async fn arm(&self) -> Result<&Arm> {
        self.arm
            .get_or_try_init(|| async {
                let environment = match &self.environment {
                    Some(e) => e.clone(),
                    None => self.config.environment()?,
                };
                let arm = Arm::new(&self.config, &environment, &self.options)?;
                arm.authenticate().await?;
                tracing::info!(
                    subscription = %self.config.subscription_id,
                    resource_group = %self.config.resource_group,
                    location = %self.config.location,
                    resource_manager = %environment.resource_manager_endpoint,
                    "azure provider resolved"
                );
                Ok(arm)
            })
            .await
    }
}

#[async_trait]
impl Interface for Azure {
    /// Resolves the environment and gets a token, so a wrong endpoint or credential stops
    /// start-up with a clear error.
    async fn initialize(
        &self,
        _client: Option<kube::Client>,
    ) -> hypercloud_cloudprovider::Result<()> {
        if !self.connect_at_start {
            return Ok(());
        }
        self.arm()
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

    /// As upstream's azure provider.
    fn has_cluster_id(&self) -> bool {
        true
    }

    // routes: only with azure.json's routeTableName, as upstream starts no route controller
    // without one.
    fn routes(&self) -> Option<&dyn hypercloud_cloudprovider::Routes> {
        self.config
            .route_table_name
            .is_some()
            .then_some(self as &dyn hypercloud_cloudprovider::Routes)
    }

    hypercloud_cloudprovider::capability_getters! {
        instances, instances_v2, zones, load_balancer, pv_labeler, volume_provisioner,
        volume_attacher, webhooks
    }
}
