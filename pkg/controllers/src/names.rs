//! Stable controller names, their aliases, and `--controllers` resolution (upstream
//! `k8s.io/cloud-provider/names` and `app.ControllersDisabledByDefault`).
//!
//! Canonical names end in `-controller` (Kubernetes 1.27+); the older short names stay
//! accepted as aliases, so existing flags keep working. This table only grows.

use std::collections::BTreeSet;

/// One controller: canonical name, aliases, and whether `*` enables it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerName {
    /// Canonical name.
    pub name: &'static str,
    /// Older names accepted in `--controllers` and in leader migration configs.
    pub aliases: &'static [&'static str],
    /// Whether `*` includes it.
    pub on_by_default: bool,
}

/// Initialises Nodes from the cloud (cloud-controller-manager only).
pub const CLOUD_NODE: ControllerName = ControllerName {
    name: "cloud-node-controller",
    aliases: &["cloud-node"],
    on_by_default: true,
};
/// Taints shut-down Nodes and deletes Nodes whose instance is gone.
pub const CLOUD_NODE_LIFECYCLE: ControllerName = ControllerName {
    name: "cloud-node-lifecycle-controller",
    aliases: &["cloud-node-lifecycle"],
    on_by_default: true,
};
/// Load balancers for `type: LoadBalancer` Services.
pub const SERVICE_LB: ControllerName = ControllerName {
    name: "service-lb-controller",
    // `service-controller`: the name upstream's default LeaderMigrationConfiguration uses.
    aliases: &["service", "service-controller"],
    on_by_default: true,
};
/// Cloud routes for node pod CIDRs.
pub const NODE_ROUTE: ControllerName = ControllerName {
    name: "node-route-controller",
    // `route-controller`: the name upstream's default LeaderMigrationConfiguration uses.
    aliases: &["route", "route-controller"],
    on_by_default: true,
};

/// Zone/region labels (and node affinity) on PersistentVolumes of cloud volumes, the
/// cloud-controller-manager's counterpart of the PersistentVolumeLabel admission plugin. Off
/// by default: with CSI, volumes carry their topology themselves.
pub const PV_LABEL: ControllerName = ControllerName {
    name: "persistentvolume-label-controller",
    aliases: &["pvl"],
    on_by_default: false,
};

/// The cloud-controller-manager's controllers, in start order.
pub const CLOUD_CONTROLLER_MANAGER: &[ControllerName] = &[
    CLOUD_NODE,
    CLOUD_NODE_LIFECYCLE,
    SERVICE_LB,
    NODE_ROUTE,
    PV_LABEL,
];

/// The cloud-dependent controllers kube-controller-manager runs in-tree (there the node
/// initialisation is the kubelet's, so no cloud-node controller).
pub const KUBE_CONTROLLER_MANAGER: &[ControllerName] =
    &[CLOUD_NODE_LIFECYCLE, SERVICE_LB, NODE_ROUTE];

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
) -> Result<Vec<&'static str>, UnknownController> {
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
        .map(|c| c.name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(flags: &[&str]) -> Result<Vec<&'static str>, UnknownController> {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        resolve(CLOUD_CONTROLLER_MANAGER, &flags)
    }

    #[test]
    fn star_enables_all_and_minus_disables() {
        assert_eq!(r(&["*"]).expect("ok").len(), 4);
        assert_eq!(
            r(&["*", "-route"]).expect("ok"),
            vec![
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller"
            ]
        );
        assert_eq!(r(&["-service-lb-controller", "*"]).expect("ok").len(), 3);
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
            r(&["*", "pvl"]).expect("ok"),
            vec![
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
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
    }
}
