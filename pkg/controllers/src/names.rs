//! Stable controller names, their aliases, and `--controllers` resolution (upstream
//! `k8s.io/cloud-provider/names` and `app.ControllersDisabledByDefault`).
//!
//! Canonical names end in `-controller` (Kubernetes 1.27+); the older short names stay
//! accepted as aliases, so existing flags keep working. This table only grows.

use std::collections::BTreeSet;

/// The cloud controllers this crate runs. The runner and the start-up report dispatch on
/// this, never on names; [`ControllerName`] gives each its stable name and aliases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Controller {
    /// [`CLOUD_NODE`].
    CloudNode,
    /// [`CLOUD_NODE_LIFECYCLE`].
    CloudNodeLifecycle,
    /// [`SERVICE_LB`].
    ServiceLb,
    /// [`NODE_IPAM`].
    NodeIpam,
    /// [`NODE_ROUTE`].
    NodeRoute,
    /// [`PV_LABEL`].
    PvLabel,
    /// [`PV_BINDER`].
    PvProvisioner,
    /// [`PV_EXPANDER`].
    PvExpander,
    /// [`ATTACH_DETACH`].
    AttachDetach,
}

impl Controller {
    /// Its names and default.
    pub const fn info(self) -> ControllerName {
        match self {
            Controller::CloudNode => CLOUD_NODE,
            Controller::CloudNodeLifecycle => CLOUD_NODE_LIFECYCLE,
            Controller::ServiceLb => SERVICE_LB,
            Controller::NodeIpam => NODE_IPAM,
            Controller::NodeRoute => NODE_ROUTE,
            Controller::PvLabel => PV_LABEL,
            Controller::PvProvisioner => PV_BINDER,
            Controller::PvExpander => PV_EXPANDER,
            Controller::AttachDetach => ATTACH_DETACH,
        }
    }

    /// Canonical name.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// The ServiceAccount (in kube-system) it acts as with
    /// `--use-service-account-credentials=true`: upstream's client names, which the
    /// apiserver's bootstrap RBAC (node-, service-, route-controller; node IPAM shares
    /// `node-controller`, as upstream's) and the
    /// cloud-controller-manager's RBAC (cloud-node-, pvl-controller) bind roles to; the volume
    /// controllers use kube-controller-manager's (persistent-volume-binder, expand-controller,
    /// attachdetach-controller).
    pub const fn service_account(self) -> &'static str {
        match self {
            Controller::CloudNode => "cloud-node-controller",
            Controller::CloudNodeLifecycle => "node-controller",
            Controller::ServiceLb => "service-controller",
            Controller::NodeIpam => "node-controller",
            Controller::NodeRoute => "route-controller",
            Controller::PvLabel => "pvl-controller",
            Controller::PvProvisioner => "persistent-volume-binder",
            Controller::PvExpander => "expand-controller",
            Controller::AttachDetach => "attachdetach-controller",
        }
    }

    /// The controller with this canonical name or alias, of any component.
    pub fn from_name(name: &str) -> Option<Controller> {
        lookup(CLOUD_CONTROLLER_MANAGER, name)
            .or_else(|| lookup(KUBE_CONTROLLER_MANAGER, name))
            .map(|c| c.id)
    }
}

impl std::fmt::Display for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Compares with a canonical name, so lists of controllers read like lists of names.
impl PartialEq<&str> for Controller {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// One controller: canonical name, aliases, and whether `*` enables it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerName {
    /// Which controller.
    pub id: Controller,
    /// Canonical name.
    pub name: &'static str,
    /// Older names accepted in `--controllers` and in leader migration configs.
    pub aliases: &'static [&'static str],
    /// Whether `*` includes it.
    pub on_by_default: bool,
}

/// Initialises Nodes from the cloud (cloud-controller-manager only).
pub const CLOUD_NODE: ControllerName = ControllerName {
    id: Controller::CloudNode,
    name: "cloud-node-controller",
    aliases: &["cloud-node"],
    on_by_default: true,
};
/// Taints shut-down Nodes and deletes Nodes whose instance is gone.
pub const CLOUD_NODE_LIFECYCLE: ControllerName = ControllerName {
    id: Controller::CloudNodeLifecycle,
    name: "cloud-node-lifecycle-controller",
    aliases: &["cloud-node-lifecycle"],
    on_by_default: true,
};
/// Load balancers for `type: LoadBalancer` Services.
pub const SERVICE_LB: ControllerName = ControllerName {
    id: Controller::ServiceLb,
    name: "service-lb-controller",
    // `service-controller`: the name upstream's default LeaderMigrationConfiguration uses.
    aliases: &["service", "service-controller"],
    on_by_default: true,
};
/// Pod CIDRs for Nodes (`spec.podCIDRs`) from `--cluster-cidr`: upstream's node IPAM
/// controller with the range allocator, which kube-controller-manager runs and the upstream
/// cloud-controller-manager example adds. Runs only with `--allocate-node-cidrs=true`.
pub const NODE_IPAM: ControllerName = ControllerName {
    id: Controller::NodeIpam,
    name: "node-ipam-controller",
    // `nodeipam`: kube-controller-manager's alias, and the one the upstream
    // cloud-controller-manager example registers.
    aliases: &["nodeipam"],
    on_by_default: true,
};
/// Cloud routes for node pod CIDRs.
pub const NODE_ROUTE: ControllerName = ControllerName {
    id: Controller::NodeRoute,
    name: "node-route-controller",
    // `route-controller`: the name upstream's default LeaderMigrationConfiguration uses.
    aliases: &["route", "route-controller"],
    on_by_default: true,
};

/// Zone/region labels (and node affinity) on PersistentVolumes of cloud volumes, the
/// cloud-controller-manager's counterpart of the PersistentVolumeLabel admission plugin. Off
/// by default: with CSI, volumes carry their topology themselves.
pub const PV_LABEL: ControllerName = ControllerName {
    id: Controller::PvLabel,
    name: "persistentvolume-label-controller",
    aliases: &["pvl"],
    on_by_default: false,
};

/// The cloud part of upstream's `persistentvolume-binder`: provisions cloud volumes for claims
/// of an in-tree plugin (`kubernetes.io/cinder`) and deletes them when their PV is released
/// with reclaim policy Delete (kube-controller-manager only: in the external layout this is the
/// CSI driver's external-provisioner, not the cloud-controller-manager's).
pub const PV_BINDER: ControllerName = ControllerName {
    id: Controller::PvProvisioner,
    name: "persistentvolume-binder-controller",
    aliases: &["persistentvolume-binder"],
    on_by_default: true,
};

/// The cloud part of upstream's `persistentvolume-expander`: grows the cloud volume of a
/// claim whose request grew, then the PV's and the claim's capacity (kube-controller-manager
/// only; externally the CSI driver's external-resizer).
pub const PV_EXPANDER: ControllerName = ControllerName {
    id: Controller::PvExpander,
    name: "persistentvolume-expander-controller",
    aliases: &["persistentvolume-expander"],
    on_by_default: true,
};

/// Upstream's attach/detach controller for an in-tree volume plugin: attaches the cloud
/// volumes of pods bound to a Node to its instance, records them in
/// `node.status.volumesAttached`, detaches them when no pod there uses them
/// (kube-controller-manager only; externally the CSI driver's external-attacher).
pub const ATTACH_DETACH: ControllerName = ControllerName {
    id: Controller::AttachDetach,
    name: "persistentvolume-attach-detach-controller",
    aliases: &["attachdetach"],
    on_by_default: true,
};

/// The cloud-controller-manager's controllers, in start order.
pub const CLOUD_CONTROLLER_MANAGER: &[ControllerName] = &[
    CLOUD_NODE,
    CLOUD_NODE_LIFECYCLE,
    SERVICE_LB,
    NODE_IPAM,
    NODE_ROUTE,
    PV_LABEL,
];

/// The cloud-dependent controllers kube-controller-manager runs in-tree (there the node
/// initialisation is the kubelet's, so no cloud-node controller), node IPAM, which the
/// route controller needs, and the volume controllers (kube-controller-manager's only).
pub const KUBE_CONTROLLER_MANAGER: &[ControllerName] = &[
    CLOUD_NODE_LIFECYCLE,
    SERVICE_LB,
    NODE_IPAM,
    NODE_ROUTE,
    PV_BINDER,
    PV_EXPANDER,
    ATTACH_DETACH,
];

/// The canonical names of `table` for `--help`, in start order, each that `*` leaves out
/// marked so: the personalities' help texts list what they run from here, so they cannot lag
/// behind the tables.
pub fn help_list(table: &[ControllerName]) -> String {
    table
        .iter()
        .map(|c| match c.on_by_default {
            true => c.name.to_string(),
            false => format!("{} (off by default)", c.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A `--controllers` entry names no known controller.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--controllers: unknown controller {given:?}; known: {known}")]
pub struct UnknownController {
    /// The entry as given (without a leading `-`).
    pub given: String,
    /// Known canonical names and aliases.
    pub known: String,
}

/// Finds a controller by canonical name or alias.
pub fn lookup(table: &[ControllerName], name: &str) -> Option<ControllerName> {
    table
        .iter()
        .copied()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// Resolves `--controllers` (`*`, `name`, `-name`) into the canonical names to run, in table
/// order. As upstream, an explicit `name` or `-name` wins over `*` whatever the order.
pub fn resolve(
    table: &[ControllerName],
    flags: &[String],
) -> Result<Vec<Controller>, UnknownController> {
    let mut star = false;
    let mut enabled = BTreeSet::new();
    let mut disabled = BTreeSet::new();
    for entry in flags.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if entry == "*" {
            star = true;
            continue;
        }
        let (negated, name) = match entry.strip_prefix('-') {
            Some(n) => (true, n),
            None => (false, entry),
        };
        let c = lookup(table, name).ok_or_else(|| UnknownController {
            given: name.into(),
            known: table
                .iter()
                .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        if negated {
            disabled.insert(c.name);
        } else {
            enabled.insert(c.name);
        }
    }
    Ok(table
        .iter()
        .filter(|c| {
            !disabled.contains(c.name) && (enabled.contains(c.name) || (star && c.on_by_default))
        })
        .map(|c| c.id)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(flags: &[&str]) -> Result<Vec<Controller>, UnknownController> {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        resolve(CLOUD_CONTROLLER_MANAGER, &flags)
    }

    #[test]
    fn star_enables_all_and_minus_disables() {
        assert_eq!(r(&["*"]).expect("ok").len(), 5);
        assert_eq!(
            r(&["*", "-route", "-nodeipam"]).expect("ok"),
            vec![
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller"
            ]
        );
        assert_eq!(r(&["-service-lb-controller", "*"]).expect("ok").len(), 4);
    }

    #[test]
    fn explicit_names_and_aliases() {
        assert_eq!(r(&["service"]).expect("ok"), vec!["service-lb-controller"]);
        assert_eq!(
            r(&["service-controller", "route-controller"]).expect("ok"),
            vec!["service-lb-controller", "node-route-controller"]
        );
        assert_eq!(
            r(&["route", "cloud-node"]).expect("ok"),
            vec!["cloud-node-controller", "node-route-controller"]
        );
        assert!(r(&[]).expect("ok").is_empty());
        assert_eq!(
            r(&["nodeipam", "route"]).expect("ok"),
            vec!["node-ipam-controller", "node-route-controller"]
        );
        assert_eq!(
            r(&["*", "pvl"]).expect("ok"),
            vec![
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
                "node-ipam-controller",
                "node-route-controller",
                "persistentvolume-label-controller"
            ]
        );
    }

    #[test]
    fn unknown_names_list_known_ones() {
        let err = r(&["*", "-teleport"]).expect_err("unknown");
        assert_eq!(err.given, "teleport");
        assert!(err.to_string().contains("service-lb-controller"));
        assert!(err.to_string().contains("route"));
        // kube-controller-manager has no cloud-node controller
        let flags = vec!["cloud-node".to_string()];
        assert!(resolve(KUBE_CONTROLLER_MANAGER, &flags).is_err());
        // and the cloud-controller-manager no volume controllers
        assert!(r(&["persistentvolume-binder"]).is_err());
    }

    #[test]
    fn kube_controller_manager_runs_the_volume_controllers_by_default() {
        let all = resolve(KUBE_CONTROLLER_MANAGER, &["*".to_string()]).expect("ok");
        assert!(all.contains(&Controller::PvProvisioner));
        assert!(all.contains(&Controller::PvExpander));
        let flags = vec!["*".to_string(), "-persistentvolume-expander".to_string()];
        let some = resolve(KUBE_CONTROLLER_MANAGER, &flags).expect("ok");
        assert!(!some.contains(&Controller::PvExpander));
        assert_eq!(
            Controller::from_name("persistentvolume-binder"),
            Some(Controller::PvProvisioner)
        );
    }
}

/// The docs' controller tables list exactly the controllers, aliases and per-component sets
/// defined above, so a new controller or alias cannot be forgotten there.
#[cfg(test)]
mod doc_tests {
    use super::*;

    const RUNTIME: &str = include_str!("../../../docs/controller-manager-runtime.md");
    const GUIDE: &str = include_str!("../../../docs/guide/in-tree-and-external.md");

    /// How a component has a controller: "on" (`*` runs it), "off" (only when named), "no".
    fn membership(table: &[ControllerName], name: &str) -> &'static str {
        match lookup(table, name) {
            Some(c) if c.on_by_default => "on",
            Some(_) => "off",
            None => "no",
        }
    }

    /// Every controller of either component, in the cloud-controller-manager's order and then
    /// kube-controller-manager's.
    fn all() -> Vec<ControllerName> {
        let mut all: Vec<ControllerName> = CLOUD_CONTROLLER_MANAGER.to_vec();
        for c in KUBE_CONTROLLER_MANAGER {
            if !all.iter().any(|a| a.id == c.id) {
                all.push(*c);
            }
        }
        all
    }

    /// The cells of each row of the table under `header` (after its `|---|` line).
    fn rows<'a>(doc: &'a str, header: &str) -> Vec<Vec<&'a str>> {
        let start = doc
            .find(header)
            .unwrap_or_else(|| panic!("no table headed {header:?}"));
        doc[start..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
            .collect()
    }

    /// The backticked words of a cell.
    fn ticked(cell: &str) -> Vec<&str> {
        cell.split('`').skip(1).step_by(2).collect()
    }

    type Row = (String, Vec<String>, &'static str, &'static str);

    /// (name, aliases, cloud-controller-manager, kube-controller-manager) from the code.
    fn expected() -> Vec<Row> {
        all()
            .iter()
            .map(|c| {
                (
                    c.name.to_owned(),
                    c.aliases.iter().map(|a| a.to_string()).collect(),
                    membership(CLOUD_CONTROLLER_MANAGER, c.name),
                    membership(KUBE_CONTROLLER_MANAGER, c.name),
                )
            })
            .collect()
    }

    fn owned(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn docs_list_every_controller() {
        // docs/controller-manager-runtime.md: "`name` (`alias`, ...) | on / off by default / – | ..."
        let cell = |c: &str| match c {
            "on" => "on",
            "off by default" => "off",
            "–" => "no",
            other => panic!("controller-manager-runtime.md: unknown cell {other:?}"),
        };
        let runtime: Vec<Row> = rows(
            RUNTIME,
            "| controller (aliases) | cloud-controller-manager | controller-manager (in-tree) |",
        )
        .iter()
        .map(|r| {
            let words = ticked(r[0]);
            (
                words[0].to_owned(),
                owned(&words[1..]),
                cell(r[1]),
                cell(r[2]),
            )
        })
        .collect();
        assert_eq!(
            runtime,
            expected(),
            "docs/controller-manager-runtime.md's controller table"
        );

        // docs/guide/in-tree-and-external.md: "`name` | `alias`, ... | yes / no ... | yes / off by default / no ..."
        let cell = |c: &str| {
            if c.starts_with("yes") {
                "on"
            } else if c.starts_with("off by default") {
                "off"
            } else if c.starts_with("no") {
                "no"
            } else {
                panic!("in-tree-and-external.md: unknown cell {c:?}")
            }
        };
        let guide: Vec<Row> = rows(
            GUIDE,
            "| controller | aliases | kube-controller-manager (in-tree) | cloud-controller-manager |",
        )
        .iter()
        .map(|r| {
            (
                ticked(r[0])[0].to_owned(),
                owned(&ticked(r[1])),
                cell(r[3]),
                cell(r[2]),
            )
        })
        .collect();
        assert_eq!(
            guide,
            expected(),
            "docs/guide/in-tree-and-external.md's controller table"
        );
    }
}
