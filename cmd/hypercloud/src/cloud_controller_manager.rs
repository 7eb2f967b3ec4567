//! `cloud-controller-manager`: the external form of the cloud controllers (upstream
//! `k8s.io/cloud-provider/app`): cloud-node, cloud-node-lifecycle, service and route, with
//! leader election. It starts the provider, prints which controllers it runs and why any are
//! off, then runs them while it leads (see [`crate::runtime`]) until SIGTERM.

use std::fmt::Write as _;

use hypercloud_controllers::names;
use hypercloud_controllers::Plan as ControllerPlan;
use hypercloud_leaderelection::migration::Placement;
use hypercloud_options::{CloudWebhookOptions, ControllerOptions};

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
    #[command(flatten)]
    pub webhooks: CloudWebhookOptions,
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

/// Prints each enabled controller of `plan` and, as upstream logs at start-up, why one cannot
/// run; with leader migration, under which Lease each runs (or that it does not run here).
pub fn print_plan(
    plan: &ControllerPlan,
    opts: &ControllerOptions,
    migration: Option<&leader_migration::Plan>,
) {
    print!("{}", plan_report(plan, opts, migration));
}

/// The text [`print_plan`] prints.
fn plan_report(
    plan: &ControllerPlan,
    opts: &ControllerOptions,
    migration: Option<&leader_migration::Plan>,
) -> String {
    let mut out = String::from("controllers:\n");
    for entry in plan.entries() {
        let name = entry.controller.name();
        let line = match (&entry.blocked, leader_migration::placement(migration, name)) {
            (Some(why), _) => format!("disabled: {}", why.reason()),
            (None, Placement::Main) => "enabled".to_string(),
            (None, Placement::Migration) => format!(
                "enabled, under the migration lease {}",
                migration.map_or("", |m| m.lease.as_str())
            ),
            (None, Placement::Elsewhere(c)) => {
                format!("not run here: leader migration assigns it to {c}")
            }
        };
        let _ = writeln!(out, "  {name:<32} {line}");
    }
    if let Some(m) = migration {
        out.push_str(&leader_migration::report(m, opts, true));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig};
    use hypercloud_controllers::Controller;

    use crate::leader_migration::tests::opts as options;

    /// The report and the runner read one plan: what the report calls disabled is exactly
    /// what the runner does not start.
    #[test]
    fn report_and_runner_agree() {
        let cloud = FakeCloud::new(FakeConfig {
            disabled: vec!["pv-labeler".into(), "routes".into()],
            ..Default::default()
        });
        let opts = options(&[
            "--controllers=*,pvl",
            "--allocate-node-cidrs=true",
            "--configure-cloud-routes=true",
            "--cluster-cidr=10.244.0.0/16",
        ]);
        let enabled = names::resolve(names::CLOUD_CONTROLLER_MANAGER, &opts.generic.controllers)
            .expect("resolve");
        let plan = hypercloud_controllers::plan(&cloud, &opts, &enabled);
        let text = plan_report(&plan, &opts, None);
        assert!(
            text.contains(
                "  persistentvolume-label-controller disabled: cloud provider does not label volumes\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  node-route-controller            disabled: cloud provider does not support routes\n"),
            "{text}"
        );
        assert_eq!(
            plan.running(),
            [
                Controller::CloudNode,
                Controller::CloudNodeLifecycle,
                Controller::ServiceLb,
                // Node IPAM needs no cloud capability.
                Controller::NodeIpam
            ]
        );
        for entry in plan.entries() {
            let reported_enabled =
                text.contains(&format!("  {:<32} enabled", entry.controller.name()));
            assert_eq!(
                reported_enabled,
                plan.running().contains(&entry.controller),
                "{text}"
            );
        }
    }
}
