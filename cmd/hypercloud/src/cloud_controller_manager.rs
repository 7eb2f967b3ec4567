//! `cloud-controller-manager`: the external form of the cloud controllers (upstream
//! `k8s.io/cloud-provider/app`): those of [`names::CLOUD_CONTROLLER_MANAGER`], with leader
//! election. It starts the provider, prints which controllers it runs and why any are
//! off, then runs them while it leads (see [`crate::runtime`]) until SIGTERM.

use hypercloud_controllers::names;
use hypercloud_options::{CloudWebhookOptions, ControllerOptions};

use crate::cloud::{Common, UsageError};

/// The component name: events, certificates, leader migration's `component`.
pub const COMPONENT: &str = "cloud-controller-manager";

/// The external cloud controllers with leader election and leader migration (`--help` lists
/// them: [`about`]).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub controllers: ControllerOptions,
    #[command(flatten)]
    pub webhooks: CloudWebhookOptions,
}

/// The `--help` summary, naming the controllers from the table that decides them.
pub fn about() -> String {
    format!(
        "The external cloud controllers ({}) with leader election and leader migration",
        names::help_list(names::CLOUD_CONTROLLER_MANAGER)
    )
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args {
        common,
        controllers,
        webhooks,
    } = args;
    if common.cloud.cloud_provider.is_empty() {
        return Err(UsageError(
            "--cloud-provider cannot be empty (see `hypercloud providers`)".into(),
        )
        .into());
    }
    if common.cloud.is_external() {
        return Err(UsageError(
            "--cloud-provider=external is for the other components; the cloud-controller-manager needs the name of the provider it runs".into(),
        )
        .into());
    }
    crate::runtime::start_and_run(
        COMPONENT,
        crate::personality::Personality::CloudControllerManager,
        names::CLOUD_CONTROLLER_MANAGER,
        common,
        controllers,
        Some(webhooks),
        invoked_as,
    )
    .await
}
