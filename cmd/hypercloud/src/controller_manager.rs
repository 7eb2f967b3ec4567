//! `controller-manager` (alias `kube-controller-manager`): the cloud-dependent controllers of
//! kube-controller-manager, in process with the provider (in-tree mode); with
//! `--cloud-provider=external` it runs none of them. It starts the provider, prints which
//! controllers it runs, then runs them while it leads the `kube-controller-manager` Lease
//! (see [`crate::runtime`]). With `external` it still contends for the Lease and serves
//! `/healthz` and `/metrics` (the real kube-controller-manager keeps running its non-cloud
//! controllers; this one has none), so it can stand in for kube-controller-manager in a
//! cluster and in leader-migration tests.

use std::sync::Arc;

use clap::Command;
use hypercloud_controllers::names;
use hypercloud_options::ControllerOptions;

use crate::cloud::{self, Common};
use crate::leader_migration;

/// The component name: events, certificates, leader migration's `component`.
pub const COMPONENT: &str = "kube-controller-manager";

/// The in-tree cloud controllers of kube-controller-manager (node lifecycle, service load
/// balancers, routes); with --cloud-provider=external it runs none of them.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub controllers: ControllerOptions,
}

/// kube-controller-manager's defaults where they differ from the cloud-controller-manager's.
pub fn adjust(cmd: Command) -> Command {
    cmd.mut_arg("secure_port", |a| a.default_value("10257"))
        .mut_arg("resource_name", |a| {
            a.default_value(hypercloud_cloudprovider::wellknown::LEASE_KUBE_CONTROLLER_MANAGER)
        })
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args {
        common,
        controllers,
    } = args;
    controllers.validate()?;
    let enabled = names::resolve(
        names::KUBE_CONTROLLER_MANAGER,
        &controllers.generic.controllers,
    )?;
    let migration = leader_migration::plan(
        COMPONENT,
        names::KUBE_CONTROLLER_MANAGER,
        &enabled,
        &controllers.generic.leader_migration,
    )?;
    let metrics = prometheus::Registry::new();
    let cloud = cloud::start(invoked_as, &common, &metrics).await?;
    print!(
        "{}",
        cloud::report(invoked_as, &common.cloud, cloud.as_deref().map(|c| c as _))
    );
    match &cloud {
        None => {
            println!("cloud controllers: none (no in-tree cloud provider; with --cloud-provider=external the cloud-controller-manager runs them)");
            if let Some(plan) = &migration {
                print!("{}", leader_migration::report(plan, &controllers, false));
            }
        }
        Some(c) => crate::cloud_controller_manager::print_plan(
            c.as_ref(),
            &enabled,
            &controllers,
            migration.as_ref(),
        ),
    }
    let (enabled, migration) =
        leader_migration::apply(migration.as_ref(), enabled, cloud.is_some());
    crate::runtime::run(crate::runtime::Component {
        name: COMPONENT,
        kube: common.kube,
        options: controllers,
        enabled,
        migration,
        cloud: cloud.map(|c| c as Arc<dyn hypercloud_cloudprovider::Interface>),
        metrics,
    })
    .await
}
