//! Leader migration (KEP-2436) in the controller managers, as kube-controller-manager's and
//! `k8s.io/cloud-provider/app`'s `Run` set it up: the configuration named by
//! `--leader-migration-config` (or upstream's default), and which of the enabled controllers
//! run under the component's own Lease, which only while it also holds the migration Lease,
//! and which not at all; and the start-up report of where each enabled controller runs
//! ([`print_plan`]). [`crate::runtime`] acts on the [`Plan`] and prints the report.

use std::fmt::Write as _;

use hypercloud_controllers::names::{self, ControllerName};
use hypercloud_controllers::{Controller, Plan as ControllerPlan};
use hypercloud_leaderelection::migration::{LeaderMigrationConfiguration, Migrator, Placement};
use hypercloud_options::{ControllerOptions, LeaderMigrationOptions};

use crate::cloud::UsageError;

/// Where each enabled controller of one component runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// `default` or the configuration file.
    pub source: String,
    /// The migration Lease's name (`leaderName`).
    pub lease: String,
    /// Run under the component's own Lease.
    pub main: Vec<&'static str>,
    /// Run only while the component also holds the migration Lease.
    pub migration: Vec<&'static str>,
    /// Not run here: the configuration assigns them to another component.
    pub elsewhere: Vec<(&'static str, String)>,
    /// Configuration entries naming none of this component's controllers.
    pub unmatched: Vec<String>,
}

impl Plan {
    /// Whether to contend for the migration Lease: only with something to run under it.
    /// Holding it with nothing to run would keep the other component from running the
    /// migrated controllers (a gap), so a component that can run none of them stays out.
    pub fn contends(&self, has_cloud: bool) -> bool {
        has_cloud && !self.migration.is_empty()
    }
}

/// The migration Lease and what runs under it.
pub struct Migration {
    /// The Lease name (`leaderName`), in `--leader-elect-resource-namespace`.
    pub lease: String,
    /// The part of the controller plan migrated to this Lease.
    pub plan: ControllerPlan,
}

/// The plan for `component` with `--controllers` resolved to `enabled` (canonical names of
/// `table`), or `None` without `--enable-leader-migration`. An unreadable or invalid
/// configuration is a usage error (exit 2).
pub fn plan(
    component: &str,
    table: &[ControllerName],
    enabled: &[&'static str],
    opts: &LeaderMigrationOptions,
) -> anyhow::Result<Option<Plan>> {
    if !opts.enable_leader_migration {
        return Ok(None);
    }
    let (config, source) = match opts.config_path() {
        None => (
            LeaderMigrationConfiguration::default(),
            "default".to_string(),
        ),
        Some(path) => (
            LeaderMigrationConfiguration::read(path)
                .map_err(|e| UsageError(hypercloud_cloudprovider::Chain(&e).to_string()))?,
            path.display().to_string(),
        ),
    };
    let controllers: Vec<(&'static str, &[&str])> = enabled
        .iter()
        .map(|n| {
            let aliases = names::lookup(table, n).map_or(&[][..], |c| c.aliases);
            (*n, aliases)
        })
        .collect();
    let lease = config.leader_name.clone();
    let split = Migrator::new(config, component).split(&controllers);
    // An entry naming a controller this component has but --controllers left off is not
    // "unmatched": it is simply not running.
    let unmatched = split
        .unmatched
        .into_iter()
        .filter(|n| names::lookup(table, n).is_none())
        .collect();
    Ok(Some(Plan {
        source,
        lease,
        main: split.main,
        migration: split.migration,
        elsewhere: split.elsewhere,
        unmatched,
    }))
}

/// The parts of the controller plan to run under the component's own Lease and, when it
/// contends for the migration Lease, under that one.
pub fn apply(
    plan: Option<&Plan>,
    controllers: &ControllerPlan,
    has_cloud: bool,
) -> (ControllerPlan, Option<Migration>) {
    let part = |names: &[&str]| {
        let ids: Vec<Controller> = names
            .iter()
            .filter_map(|n| Controller::from_name(n))
            .collect();
        controllers.only(&ids)
    };
    match plan {
        None => (controllers.clone(), None),
        Some(p) => (
            part(&p.main),
            p.contends(has_cloud).then(|| Migration {
                lease: p.lease.clone(),
                plan: part(&p.migration),
            }),
        ),
    }
}

/// Where one enabled controller runs: [`Placement::Main`] without leader migration.
pub fn placement(plan: Option<&Plan>, controller: &str) -> Placement {
    let Some(plan) = plan else {
        return Placement::Main;
    };
    if plan.migration.contains(&controller) {
        return Placement::Migration;
    }
    plan.elsewhere
        .iter()
        .find(|(n, _)| *n == controller)
        .map_or(Placement::Main, |(_, c)| Placement::Elsewhere(c.clone()))
}

/// The start-up lines describing `plan`, under the controller list.
pub fn report(plan: &Plan, opts: &ControllerOptions, has_cloud: bool) -> String {
    let ns = &opts.leader_election.resource_namespace;
    let main = format!("{ns}/{}", opts.leader_election.resource_name);
    let migration = format!("{ns}/{}", plan.lease);
    let list = |v: &[&str]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "leader migration: enabled (configuration: {}), migration lease {migration}",
        plan.source
    );
    let _ = writeln!(out, "  under lease {main}: {}", list(&plan.main));
    if plan.contends(has_cloud) {
        let _ = writeln!(
            out,
            "  under lease {migration} (only while holding it): {}",
            list(&plan.migration)
        );
    } else if !has_cloud {
        let _ = writeln!(
            out,
            "  not contending for lease {migration}: no cloud provider, so none of the migrated controllers can run here"
        );
    } else {
        let _ = writeln!(
            out,
            "  not contending for lease {migration}: none of this component's enabled controllers is migrated to it"
        );
    }
    for (name, component) in &plan.elsewhere {
        let _ = writeln!(out, "  not run here: {name} (assigned to {component})");
    }
    if !plan.unmatched.is_empty() {
        let _ = writeln!(
            out,
            "  configuration entries naming no controller of this component (ignored): {}",
            plan.unmatched.join(", ")
        );
    }
    out
}

/// Prints each enabled controller of `plan` (of a component with a cloud) and, as upstream logs
/// at start-up, why one cannot run; with leader migration, under which Lease each runs (or that
/// it does not run here).
pub fn print_plan(plan: &ControllerPlan, opts: &ControllerOptions, migration: Option<&Plan>) {
    print!("{}", plan_report(plan, opts, migration));
}

/// The text [`print_plan`] prints.
fn plan_report(
    plan: &ControllerPlan,
    opts: &ControllerOptions,
    migration: Option<&Plan>,
) -> String {
    let mut out = String::from("controllers:\n");
    for entry in plan.entries() {
        let name = entry.controller.name();
        let line = match (&entry.blocked, placement(migration, name)) {
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
        out.push_str(&report(m, opts, true));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig};

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        c: ControllerOptions,
    }

    /// Controller flags as parsed from `args`.
    fn opts(args: &[&str]) -> ControllerOptions {
        Flags::parse_from(std::iter::once("t").chain(args.iter().copied())).c
    }

    fn write(dir: &tempfile::TempDir, text: &str) -> String {
        let p = dir.path().join("lm.yaml");
        std::fs::write(&p, text).expect("write");
        format!("--leader-migration-config={}", p.display())
    }

    #[test]
    fn off_without_the_flag() {
        let o = opts(&[]);
        let p = plan(
            "cloud-controller-manager",
            names::CLOUD_CONTROLLER_MANAGER,
            &["service-lb-controller"],
            &o.generic.leader_migration,
        )
        .expect("plan");
        assert_eq!(p, None);
    }

    #[test]
    fn default_configuration_moves_the_three_in_either_component() {
        let o = opts(&["--enable-leader-migration"]);
        let ccm = plan(
            "cloud-controller-manager",
            names::CLOUD_CONTROLLER_MANAGER,
            &[
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
                "node-route-controller",
            ],
            &o.generic.leader_migration,
        )
        .expect("plan")
        .expect("on");
        assert_eq!(ccm.source, "default");
        assert_eq!(ccm.lease, "cloud-provider-extraction-migration");
        assert_eq!(ccm.main, ["cloud-node-controller"]);
        assert_eq!(
            ccm.migration,
            [
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
                "node-route-controller"
            ]
        );
        let kcm = plan(
            "kube-controller-manager",
            names::KUBE_CONTROLLER_MANAGER,
            &["cloud-node-lifecycle-controller", "service-lb-controller"],
            &o.generic.leader_migration,
        )
        .expect("plan")
        .expect("on");
        assert!(kcm.main.is_empty());
        assert_eq!(
            kcm.migration,
            ["cloud-node-lifecycle-controller", "service-lb-controller"]
        );
        // route-controller is KCM's, only not enabled here: not "unmatched".
        assert!(kcm.unmatched.is_empty(), "{kcm:?}");
        let text = report(&kcm, &opts(&["--leader-elect-resource-name=kcm"]), true);
        assert!(
            text.contains("  under lease kube-system/kcm: none\n"),
            "{text}"
        );
        assert!(text.contains("  under lease kube-system/cloud-provider-extraction-migration (only while holding it): cloud-node-lifecycle-controller, service-lb-controller\n"), "{text}");
        assert!(report(&kcm, &o, false).contains("not contending"));
    }

    #[test]
    fn a_configuration_file_assigns_per_component() {
        let dir = tempfile::tempdir().expect("tmp");
        let flag = write(
            &dir,
            "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: lm\ncontrollerLeaders:\n  - {name: service, component: kube-controller-manager}\n  - {name: route, component: cloud-controller-manager}\n  - {name: persistentvolume-attach-detach-controller, component: kube-controller-manager}\n",
        );
        let o = opts(&["--enable-leader-migration", &flag]);
        let ccm = plan(
            "cloud-controller-manager",
            names::CLOUD_CONTROLLER_MANAGER,
            &[
                "cloud-node-controller",
                "service-lb-controller",
                "node-route-controller",
            ],
            &o.generic.leader_migration,
        )
        .expect("plan")
        .expect("on");
        assert_eq!(ccm.main, ["cloud-node-controller"]);
        assert_eq!(ccm.migration, ["node-route-controller"]);
        assert_eq!(
            ccm.elsewhere,
            [(
                "service-lb-controller",
                "kube-controller-manager".to_string()
            )]
        );
        assert_eq!(ccm.unmatched, ["persistentvolume-attach-detach-controller"]);
        let text = report(&ccm, &o, true);
        assert!(
            text.contains(
                "not run here: service-lb-controller (assigned to kube-controller-manager)"
            ),
            "{text}"
        );
        assert!(
            text.contains("(ignored): persistentvolume-attach-detach-controller"),
            "{text}"
        );
        // Nothing migrated to this component: it stays out of the migration Lease.
        let only_node = plan(
            "cloud-controller-manager",
            names::CLOUD_CONTROLLER_MANAGER,
            &["cloud-node-controller"],
            &o.generic.leader_migration,
        )
        .expect("plan")
        .expect("on");
        assert!(!only_node.contends(true));
        assert!(report(&only_node, &o, true).contains("not contending for lease kube-system/lm"));
    }

    #[test]
    fn bad_configuration_is_a_usage_error_naming_the_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let flag = write(
            &dir,
            "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: lm\ncontrollerLeaders:\n  - {name: service}\n",
        );
        let o = opts(&["--enable-leader-migration", &flag]);
        let err = plan(
            "cloud-controller-manager",
            names::CLOUD_CONTROLLER_MANAGER,
            &["service-lb-controller"],
            &o.generic.leader_migration,
        )
        .expect_err("invalid");
        assert!(err.is::<UsageError>());
        assert!(
            err.to_string()
                .contains("controllerLeaders[0].component: Required value"),
            "{err}"
        );
    }

    /// The report and the runner read one plan: what the report calls disabled is exactly
    /// what the runner does not start.
    #[test]
    fn report_and_runner_agree() {
        let cloud = FakeCloud::new(FakeConfig {
            disabled: vec!["pv-labeler".into(), "routes".into()],
            ..Default::default()
        });
        let opts = opts(&[
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
