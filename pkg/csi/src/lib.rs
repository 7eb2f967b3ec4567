//! The `csi-driver` personality: a provider's volume capability served as a CSI v1 plugin.
//!
//! In the external layout the volume duties of kube-controller-manager's in-tree plugins
//! (create, attach, grow, detach, delete) and the kubelet's (format, mount) moved to CSI
//! drivers, which the upstream sidecars (external-provisioner, -attacher, -resizer) and the
//! kubelet call over gRPC on a unix socket. This crate answers those calls with the same
//! [`hypercloud_cloudprovider::VolumeProvisioner`] and
//! [`hypercloud_cloudprovider::VolumeAttacher`] the in-tree controllers use, under the upstream
//! driver's name ([`hypercloud_cloudprovider::csi_drivers`]), so CSI migration hands the in-tree volumes to it unchanged.
//!
//! - [`proto`]: the CSI v1 messages; [`server`]: the gRPC services on a unix socket.
//! - [`driver`]: the calls; [`node`]: the node side on this machine's block devices.

pub mod client;
pub mod driver;
mod error;
pub mod node;
pub mod proto;
pub mod server;

use std::sync::Arc;

use hypercloud_cloudprovider::Interface;

pub use client::Client;
pub use driver::{Driver, DriverOptions, NodeOptions};
pub use error::{Error, Result};
pub use hypercloud_cloudprovider::csi_drivers::{self as drivers, DriverInfo};

/// The CSI driver a provider plays: the one whose in-tree plugin its volume capability
/// serves. An error naming what is missing when the provider has no volume capability or
/// its plugin has no CSI driver here.
pub fn driver_for(cloud: &dyn Interface) -> Result<&'static DriverInfo> {
    let provider = cloud.provider_name().to_owned();
    let plugin = cloud
        .volume_provisioner()
        .map(|v| v.plugin_name().to_owned())
        .or_else(|| cloud.volume_attacher().map(|a| a.plugin_name().to_owned()))
        .ok_or_else(|| Error::Provider {
            provider: provider.clone(),
            why: "the provider has no volume capability, so there is no CSI driver to serve".into(),
        })?;
    drivers::for_plugin(&plugin).ok_or(Error::Provider {
        provider,
        why: format!("no CSI driver is known for the in-tree plugin {plugin}"),
    })
}

/// Builds the driver for `cloud` and serves it on `listener` (from [`server::bind`], at
/// `socket`) until `shutdown` completes.
pub async fn run(
    cloud: Arc<dyn Interface>,
    opts: DriverOptions,
    listener: tokio::net::UnixListener,
    socket: std::path::PathBuf,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    tracing::info!(driver = opts.info.driver, socket = %socket.display(), controller = opts.controller, node = opts.node.is_some(), "serving CSI");
    let driver = Arc::new(Driver::new(cloud, opts));
    server::serve(driver, listener, socket, shutdown).await
}
