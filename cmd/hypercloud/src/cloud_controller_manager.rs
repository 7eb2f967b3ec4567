//! `cloud-controller-manager`: the external form of the cloud controllers (upstream
//! `k8s.io/cloud-provider/app`): cloud-node, cloud-node-lifecycle, service and route, with
//! leader election. It starts the provider, prints which controllers it runs and why any are
//! off, then runs them while it leads (see [`crate::runtime`]) until SIGTERM.

use hypercloud_cloudprovider::Interface;
use hypercloud_controllers::names;
use hypercloud_leaderelection::migration::Placement;
use hypercloud_options::ControllerOptions;

use crate::cloud::{Common, UsageError};
use crate::leader_migration;

/// The component name: events, certificates, leader migration's `component`.
pub const COMPONENT: &str = "cloud-controller-manager";

/// The external cloud controllers (cloud-node, cloud-node-lifecycle, service, route) with
/// leader election and leader migration.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub controllers: ControllerOptions,
}

pub async fn run(args: Args, invoked_as: &str) -> anyhow::Result<()> {
    let Args {
        common,
        controllers,
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
        names::CLOUD_CONTROLLER_MANAGER,
        common,
        controllers,
        invoked_as,
    )
    .await
}

/// Prints each enabled controller and, as upstream logs at start-up, why one cannot run;
/// with leader migration, under which Lease each runs (or that it does not run here).
pub fn print_plan(
    cloud: &dyn Interface,
    enabled: &[&str],
    opts: &ControllerOptions,
    migration: Option<&leader_migration::Plan>,
) {
    println!("controllers:");
    for name in enabled {
        let blocked = match *name {
            // Both need to look instances up.
            n if n == names::CLOUD_NODE.name || n == names::CLOUD_NODE_LIFECYCLE.name => {
                (cloud.instances().is_none() && cloud.instances_v2().is_none())
                    .then_some("cloud provider does not support instances")
            }
            n if n == names::SERVICE_LB.name => cloud
                .load_balancer()
                .is_none()
                .then_some("cloud provider does not support load balancers"),
            n if n == names::NODE_ROUTE.name => {
                let shared = &opts.kube_cloud_shared;
                if !shared.allocate_node_cidrs || !shared.configure_cloud_routes {
                    Some("needs --allocate-node-cidrs=true and --configure-cloud-routes=true")
                } else if cloud.routes().is_none() {
                    Some("cloud provider does not support routes")
                } else {
                    None
                }
            }
            _ => None,
        };
        match (blocked, leader_migration::placement(migration, name)) {
            (Some(why), _) => println!("  {name:<32} disabled: {why}"),
            (None, Placement::Main) => println!("  {name:<32} enabled"),
            (None, Placement::Migration) => println!(
                "  {name:<32} enabled, under the migration lease {}",
                migration.map_or("", |m| m.lease.as_str())
            ),
            (None, Placement::Elsewhere(c)) => {
                println!("  {name:<32} not run here: leader migration assigns it to {c}")
            }
        }
    }
    if let Some(plan) = migration {
        print!("{}", leader_migration::report(plan, opts, true));
    }
}
