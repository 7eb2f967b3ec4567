//! `csi-driver`: the provider's volume capability served as the cloud's CSI driver (see
//! `hypercloud_csi`): the Identity, Controller and Node services of CSI v1 on a unix socket,
//! under the upstream driver's name (`cinder.csi.openstack.org`, `ebs.csi.aws.com`, ...), for
//! the upstream sidecars, the kubelet and kube-controller-manager's CSI migration.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use hypercloud_cloudprovider::Interface;
use hypercloud_csi::{DriverOptions, NodeOptions};
use hypercloud_options::{CloudProviderOptions, KubeClientOptions, LoggingOptions};

use crate::cloud::{self, Common, UsageError};
use crate::personality::Personality;

/// The cloud's CSI driver: CSI v1 (Identity, Controller, Node) over gRPC on a unix socket,
/// backed by the provider's volumes.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub cloud: CloudProviderOptions,
    #[command(flatten)]
    pub logging: LoggingOptions,
    #[command(flatten)]
    pub csi: CsiOptions,
}

/// The CSI flags (the upstream drivers' names).
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "CSI flags")]
pub struct CsiOptions {
    /// The CSI endpoint: a unix socket (unix:///path/csi.sock or a plain path). A path that
    /// exists and is not a socket, or a socket another process serves, is refused.
    #[arg(long, value_name = "ENDPOINT", default_value = "unix:///tmp/csi.sock")]
    pub endpoint: String,

    /// Serve the Controller service (create, delete, attach, detach, expand volumes).
    #[arg(long = "provide-controller-service", value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub provide_controller_service: bool,

    /// Serve the Node service (stage, publish, expand on this node).
    #[arg(long = "provide-node-service", value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub provide_node_service: bool,

    /// The name of the node (and cloud instance) the Node service runs on; default: the
    /// NODE_NAME environment variable, else the host name.
    #[arg(long = "node-name", value_name = "NAME", env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// Where the instance's attached disks appear by ID (a real instance's /dev/disk/by-id;
    /// the local cloud's `<devicesDir>/<server id>` on one machine).
    #[arg(
        long = "device-dir",
        value_name = "DIR",
        default_value = "/dev/disk/by-id"
    )]
    pub device_dir: PathBuf,

    /// The most volumes the Node service reports it can attach (NodeGetInfo); default: the
    /// upstream driver's (256 for Cinder, 39 for EBS, 127 for GCE PD, 59 for vSphere).
    #[arg(long = "max-volumes-per-node", value_name = "N", value_parser = clap::value_parser!(i64).range(1..=4096))]
    pub max_volumes_per_node: Option<i64>,
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args {
        cloud: cloud_opts,
        logging,
        csi,
    } = args;
    if cloud_opts.is_external() || cloud_opts.cloud_provider.is_empty() {
        return Err(UsageError(format!(
            "--cloud-provider={:?}: the CSI driver serves a provider's volumes; name one (--cloud-provider=openstack --cloud-config=FILE)",
            cloud_opts.cloud_provider
        ))
        .into());
    }
    if !csi.provide_controller_service && !csi.provide_node_service {
        return Err(UsageError(
            "--provide-controller-service=false and --provide-node-service=false: nothing to serve"
                .into(),
        )
        .into());
    }
    // The socket before the provider: a bad endpoint is a usage error, found at once.
    let socket = hypercloud_csi::server::socket_path(&csi.endpoint)
        .map_err(|e| UsageError(e.to_string()))?;
    let listener = hypercloud_csi::server::bind(&socket).map_err(|e| UsageError(e.to_string()))?;
    let common = Common {
        cloud: cloud_opts,
        kube: KubeClientOptions::default(),
        logging,
    };
    let metrics = prometheus::Registry::new();
    let cloud = cloud::start(invoked_as, Personality::CsiDriver, &common, &metrics)
        .await?
        .context("the CSI driver needs a cloud provider")?;
    print!(
        "{}",
        cloud::report(
            invoked_as,
            &common.cloud,
            Some(cloud.as_ref() as &dyn Interface)
        )
    );
    let info =
        *hypercloud_csi::driver_for(cloud.as_ref()).map_err(|e| UsageError(e.to_string()))?;
    let node = if csi.provide_node_service {
        let node_name = match csi.node_name {
            Some(n) if !n.is_empty() => n,
            _ => hypercloud_kubelet::registration::hostname(None),
        };
        Some(NodeOptions {
            node_name,
            device_dir: csi.device_dir,
            max_volumes_per_node: csi.max_volumes_per_node,
        })
    } else {
        None
    };
    println!(
        "{invoked_as}: serving CSI driver {} on {} (controller service: {}, node service: {})",
        info.driver,
        csi.endpoint,
        csi.provide_controller_service,
        node.as_ref()
            .map_or("off".to_owned(), |n| format!("node {}", n.node_name))
    );
    let opts = DriverOptions {
        info,
        vendor_version: env!("CARGO_PKG_VERSION").to_owned(),
        controller: csi.provide_controller_service,
        node,
    };
    let mut stop = crate::runtime::shutdown_signal();
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let cloud: Arc<dyn Interface> = cloud;
    hypercloud_csi::run(cloud, opts, listener, socket, shutdown)
        .await
        .map_err(anyhow::Error::new)
}
