//! hypercloud-providers-aws: the `aws` cloud provider, on the official AWS SDK for Rust.
//!
//! Upstream equivalents: the legacy in-tree provider (`legacy-cloud-providers/aws`: `aws.go`,
//! `aws_loadbalancer.go`, `aws_routes.go`) and kubernetes/cloud-provider-aws
//! (`pkg/providers/v1`). Configuration is upstream's INI file ([`config`]: `[Global]`,
//! `[ServiceOverride "N"]`); credentials come from the SDK's default chain (environment, shared
//! config/credentials files, web identity, the instance role through IMDS); every request is
//! retried by the SDK's standard retry mode (throttling included), honouring its retry config
//! (`AWS_MAX_ATTEMPTS`, `AWS_RETRY_MODE`, the profile) unless `[Hypercloud] max-attempts` sets it.
//!
//! Capabilities: Instances and InstancesV2 (EC2 instances by private DNS name, the in-tree node
//! name, or by provider ID `aws:///<zone>/<instance-id>`, answered from one short-lived
//! `DescribeInstances` listing of the cluster's instances), Zones, LoadBalancer (classic ELB by
//! default, NLB with `service.beta.kubernetes.io/aws-load-balancer-type: nlb`), Routes (the
//! cluster's route table), PvLabeler (EBS volume zone/region) and the in-tree
//! `kubernetes.io/aws-ebs` plugin's cloud part: VolumeProvisioner and VolumeAttacher (EBS
//! volumes created, grown, deleted, attached and detached, `src/ebs.rs`). The node side reads
//! its identity from IMDS ([`metadata`]).
//!
//! ```no_run
//! # async fn demo() -> hypercloud_cloudprovider::Result<()> {
//! use hypercloud_cloudprovider::{CloudConfig, Interface, Layout, Registry};
//! let mut registry = Registry::new();
//! hypercloud_providers_aws::register(&mut registry);
//! let config = CloudConfig {
//!     origin: "inline".into(),
//!     bytes: b"[Global]\nZone = us-east-1a\n".to_vec(),
//! };
//! let cloud = registry.get("aws", Some(&config), Layout::External)?.expect("registered");
//! cloud.initialize(None).await?;
//! # Ok(()) }
//! ```
//!
//! Start here: [`register`] and [`Aws`] (the `Interface` and its capabilities), then
//! `src/instances.rs` (the listing every node is answered from) and `src/loadbalancer.rs`;
//! [`config`] for the INI file.
//!
//! Not here: the HTTP client and its retries (the AWS SDK's); the EBS CSI driver's volumes
//! (only labelled).

pub mod config;
mod ebs;
mod environment;
mod error;
mod instances;
mod loadbalancer;
pub mod metadata;
mod routes;
mod session;
mod volumes;

use hypercloud_cloudprovider::ProviderError as _;
use std::sync::Arc;

use async_trait::async_trait;
use hypercloud_cloudprovider::{CloudConfig, Interface, Registry};

pub use config::Config;
pub use ebs::{ebs_parameters, EbsParameters, AWS_EBS_PLUGIN};
pub use error::{Error, Result};
pub use instances::{parse_provider_id, PROVIDER_ID_PREFIX};
pub use metadata::{Identity, MetadataClient};
pub use session::RequestCounts;
pub use volumes::EBS_CSI_DRIVER;

/// The provider's registered name.
pub const PROVIDER_NAME: &str = "aws";

/// The cluster tag on every resource of a cluster: `kubernetes.io/cluster/<cluster ID>`.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";
/// The legacy cluster tag key (value: the cluster ID).
pub const LEGACY_CLUSTER_TAG: &str = "KubernetesCluster";

/// Registers `aws` in the binary's registry.
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "Amazon Web Services (EC2, ELB, ELBv2) via the AWS SDK for Rust; upstream INI --cloud-config ([Global], [ServiceOverride \"N\"]), optional",
        |config| Ok(Arc::new(Aws::from_cloud_config(config)?) as Arc<dyn Interface>),
    );
}

/// The AWS cloud provider.
pub struct Aws {
    config: Arc<Config>,
    session: tokio::sync::OnceCell<session::Session>,
    counts: Arc<RequestCounts>,
    instances: instances::InstanceCache,
    metadata: MetadataClient,
    identity: tokio::sync::OnceCell<Identity>,
    devices: std::sync::Mutex<ebs::Devices>,
}

impl std::fmt::Debug for Aws {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aws")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Aws {
    /// A provider for a parsed config (validated here). Nothing is contacted until the first
    /// call (or [`Interface::initialize`]).
    pub fn new(mut config: Config) -> Result<Self> {
        config.validate()?;
        let metadata = MetadataClient::new(
            &config.tuning.metadata_endpoint,
            config.tuning.metadata_timeout,
        )?;
        Ok(Aws {
            config: Arc::new(config),
            session: tokio::sync::OnceCell::new(),
            counts: Arc::new(RequestCounts::default()),
            instances: instances::InstanceCache::default(),
            metadata,
            identity: tokio::sync::OnceCell::new(),
            devices: std::sync::Mutex::default(),
        })
    }

    /// The factory: the config file is optional, as upstream.
    pub fn from_cloud_config(
        config: Option<&CloudConfig>,
    ) -> hypercloud_cloudprovider::Result<Self> {
        // At start-up, what the SDK will read by itself.
        environment::check()?;
        let parsed = match config {
            Some(cc) => Config::parse(cc.text(PROVIDER_NAME)?, &cc.origin),
            None => Ok(Config {
                origin: "(no --cloud-config)".into(),
                ..Config::default()
            }),
        };
        parsed
            .and_then(Aws::new)
            .map_err(Error::into_cloud_config_error)
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Requests sent to AWS so far (every attempt), per API, for measuring batching.
    pub fn request_counts(&self) -> &RequestCounts {
        &self.counts
    }

    /// Forgets the cached instance listing, so the next look-up asks EC2.
    pub async fn invalidate_cache(&self) {
        self.instances.invalidate().await;
    }

    /// The region in use (after the first call or [`Interface::initialize`]).
    pub fn region(&self) -> Option<&str> {
        self.session.get().map(|s| s.region.as_str())
    }

    /// The cluster ID in use (after the first call or [`Interface::initialize`]).
    pub fn cluster_id(&self) -> Option<&str> {
        self.session
            .get()
            .and_then(|s| s.cluster.as_ref())
            .map(|c| c.id.as_str())
    }

    /// This machine's instance identity from IMDS, read once.
    pub async fn local_identity(&self) -> hypercloud_cloudprovider::Result<Identity> {
        Ok(self
            .identity
            .get_or_try_init(|| self.metadata.identity())
            .await?
            .clone())
    }

    async fn session(&self) -> hypercloud_cloudprovider::Result<&session::Session> {
        self.session.get_or_try_init(|| self.connect()).await
    }
}

#[async_trait]
impl Interface for Aws {
    /// Resolves region and credentials and builds the SDK clients, so that a missing region
    /// or an unreachable metadata service stops start-up with a clear error.
    async fn initialize(
        &self,
        _client: Option<kube::Client>,
    ) -> hypercloud_cloudprovider::Result<()> {
        let s = self.session().await?;
        tracing::info!(region = %s.region, cluster = ?s.cluster, "aws provider ready");
        Ok(())
    }

    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// Whether a cluster ID is configured (or was found on this instance's tags); upstream
    /// warns without one, as resources of several clusters are then indistinguishable.
    fn has_cluster_id(&self) -> bool {
        match self.session.get() {
            Some(s) => s.cluster.is_some(),
            None => self.config.cluster_id().is_some(),
        }
    }

    // load_balancer: Classic ELB by default, NLB with `service.beta.kubernetes.io/aws-load-balancer-type: nlb`.
    // routes: The cluster's route table: `[Global] RouteTableID` or the one tagged for the cluster.
    // volume_provisioner, volume_attacher: the in-tree kubernetes.io/aws-ebs plugin's EBS volumes.
    // webhooks: hypercloud's own `service-lb-annotations` (loadbalancer.rs).
    hypercloud_cloudprovider::capability_getters! {
        instances, instances_v2, zones, load_balancer, routes, pv_labeler,
        volume_provisioner, volume_attacher, webhooks
    }
}
