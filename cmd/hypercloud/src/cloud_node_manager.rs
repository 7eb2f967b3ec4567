//! `kubelet-helper cloud-node-manager`: cloud-provider-azure's per-node `cloud-node-manager`,
//! the node half of Azure's external layout. Each node runs one beside its kubelet
//! (`--cloud-provider=external`); it initialises only its own Node, from the VM's instance
//! metadata service by default, while the cloud-controller-manager runs with
//! `--controllers=*,-cloud-node` (see `hypercloud_controllers::node_manager`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use hypercloud_options::{GoDuration, KubeClientOptions, LoggingOptions};

use crate::cloud::UsageError;

/// Flags of `kubelet-helper cloud-node-manager` (upstream cloud-node-manager's names and
/// defaults).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub kube: KubeClientOptions,
    #[command(flatten)]
    pub logging: LoggingOptions,
    #[command(flatten)]
    pub node: Options,
}

/// The node manager's own flags.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Cloud node manager flags")]
pub struct Options {
    /// Name of the Node (default is hostname).
    #[arg(long = "node-name", value_name = "NAME")]
    pub node_name: Option<String>,

    /// The path to the cloud config file (azure.json). Upstream reads it only with
    /// --use-instance-metadata=false; hypercloud also reads the instance metadata service's
    /// address from it (hypercloudInstanceMetadataEndpoint, ...SourceAddress), so it is
    /// required.
    #[arg(long = "cloud-config", value_name = "FILE", required = true)]
    pub cloud_config: PathBuf,

    /// Should use Instance Metadata Service for fetching node information; if false will use
    /// ARM instead.
    #[arg(long = "use-instance-metadata", value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub use_instance_metadata: bool,

    /// Specifies how often the controller updates nodes' status.
    #[arg(
        long = "node-status-update-frequency",
        value_name = "DURATION",
        default_value = "5m"
    )]
    pub node_status_update_frequency: GoDuration,

    /// Whether the nodes should wait for routes created on Azure route table. It should be set
    /// to true when using kubenet plugin.
    #[arg(long = "wait-routes", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub wait_routes: bool,

    /// DEPRECATED: This flag will be removed in a future release. If true, the node will
    /// apply beta topology labels.
    #[arg(long = "enable-deprecated-beta-topology-labels", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_deprecated_beta_topology_labels: bool,

    /// The resync period in reflectors will be random between MinResyncPeriod and
    /// 2*MinResyncPeriod (0: no resync).
    #[arg(
        long = "min-resync-period",
        value_name = "DURATION",
        default_value = "0s"
    )]
    pub min_resync_period: GoDuration,

    /// Append every cloud provider call as a JSON line to this file (hypercloud's, as the
    /// other personalities' --trace-cloud-calls).
    #[arg(long = "trace-cloud-calls", value_name = "FILE")]
    pub trace_cloud_calls: Option<PathBuf>,
}

/// The component name in logs and traces.
const COMPONENT: &str = "cloud-node-manager";

#[cfg(feature = "azure")]
pub async fn run(args: Args) -> anyhow::Result<()> {
    use hypercloud_cloudprovider::Interface as _;
    use hypercloud_controllers::node_manager;
    use hypercloud_providers_azure::{Azure, Config};

    let Args {
        kube,
        logging,
        node,
    } = args;
    logging.init()?;
    kube.validate()?;
    let path = &node.cloud_config;
    let text = hypercloud_cloudprovider::input::read_input_text(path).map_err(|e| {
        UsageError(format!(
            "--cloud-config: cannot read {}: {e}",
            path.display()
        ))
    })?;
    let config = Config::parse(&text, &path.display().to_string())
        .map_err(|e| UsageError(format!("--cloud-config: {e}")))?;
    let azure = Azure::for_node_manager(config, node.use_instance_metadata);
    let metrics = prometheus::Registry::new();
    let cloud = crate::cloud::instrument(
        COMPONENT,
        Arc::new(azure),
        node.trace_cloud_calls.as_deref(),
        &metrics,
    )?;
    cloud
        .initialize(None)
        .await
        .context("initializing cloud provider \"azure\"")?;
    let node_name = node
        .node_name
        .clone()
        .unwrap_or_else(|| hypercloud_kubelet::registration::hostname(None));
    let source = if node.use_instance_metadata {
        "the instance metadata service"
    } else {
        "Azure Resource Manager"
    };
    println!("{COMPONENT}: looking after node {node_name}; its facts come from {source}");
    let client = kube.client().await?;
    let options = node_manager::Options {
        node_name,
        node_status_update_frequency: node.node_status_update_frequency.get(),
        wait_routes: node.wait_routes,
        beta_labels: node.enable_deprecated_beta_topology_labels,
        min_resync_period: node.min_resync_period.get(),
    };
    let mut shutdown = crate::runtime::shutdown_signal();
    let stop = async move {
        let _ = shutdown.wait_for(|s| *s).await;
    };
    node_manager::run(
        node_manager::Manager::new(client, cloud, options),
        &metrics,
        stop,
    )
    .await?;
    Ok(())
}

#[cfg(not(feature = "azure"))]
pub async fn run(_args: Args) -> anyhow::Result<()> {
    Err(UsageError(
        "kubelet-helper cloud-node-manager needs the azure feature of this binary".into(),
    )
    .into())
}
