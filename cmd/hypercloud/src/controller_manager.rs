//! `controller-manager` (alias `kube-controller-manager`): the cloud-dependent controllers of
//! kube-controller-manager, in process with the provider (in-tree mode); with
//! `--cloud-provider=external` it runs none of them. It starts the provider, prints which
//! controllers it runs, then runs them while it leads the `kube-controller-manager` Lease
//! (see [`crate::runtime`]). With `external` it still contends for the Lease and serves
//! `/healthz` and `/metrics` (the real kube-controller-manager keeps running its non-cloud
//! controllers; this one has none), so it can stand in for kube-controller-manager in a
//! cluster and in leader-migration tests.

use clap::Command;
use hypercloud_controllers::names;
use hypercloud_options::ControllerOptions;

use crate::cloud::Common;

/// The component name: events, certificates, leader migration's `component`.
pub const COMPONENT: &str = "kube-controller-manager";

/// The in-tree cloud controllers of kube-controller-manager; with --cloud-provider=external
/// it runs none of them (`--help` lists them: [`adjust`]).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub controllers: ControllerOptions,
}

/// kube-controller-manager's defaults where they differ from the cloud-controller-manager's,
/// and the `--help` summary naming the controllers from the table that decides them.
pub fn adjust(cmd: Command) -> Command {
    let about = format!(
        "The in-tree cloud controllers of kube-controller-manager ({}); with \
         --cloud-provider=external it runs none of them",
        names::help_list(names::KUBE_CONTROLLER_MANAGER)
    );
    cmd.about(about)
        .mut_arg("secure_port", |a| a.default_value("10257"))
        .mut_arg("resource_name", |a| {
            a.default_value(hypercloud_cloudprovider::wellknown::LEASE_KUBE_CONTROLLER_MANAGER)
        })
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args {
        common,
        controllers,
    } = args;
    crate::runtime::start_and_run(
        COMPONENT,
        crate::personality::Personality::ControllerManager,
        names::KUBE_CONTROLLER_MANAGER,
        common,
        controllers,
        None,
        invoked_as,
    )
    .await
}
