//! The personality table: which names select which component (hyperkube style).

use std::ffi::OsStr;
use std::path::Path;

use hypercloud_cloudprovider::Layout;

/// A component the binary can play.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Personality {
    KubeletHelper,
    ApiserverPlugin,
    ControllerManager,
    CloudControllerManager,
    CsiDriver,
    LocalCloud,
}

/// Every personality with its name and accepted aliases (symlink names).
pub const TABLE: &[(Personality, &str, &[&str])] = &[
    (Personality::KubeletHelper, "kubelet-helper", &[]),
    (Personality::ApiserverPlugin, "apiserver-plugin", &[]),
    (
        Personality::ControllerManager,
        "controller-manager",
        &["kube-controller-manager"],
    ),
    (
        Personality::CloudControllerManager,
        "cloud-controller-manager",
        &[],
    ),
    (Personality::CsiDriver, "csi-driver", &[]),
    (Personality::LocalCloud, "local-cloud", &[]),
];

impl Personality {
    /// The canonical name (also the subcommand).
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(p, _, _)| *p == self)
            .map(|(_, n, _)| *n)
            .unwrap_or("hypercloud")
    }

    /// The upstream layout this personality plays, which its provider is built for: the
    /// cloud-controller-manager is the external layout, every other component in-tree
    /// (`--cloud-provider=NAME`). The one place that decides it.
    pub fn layout(self) -> Layout {
        match self {
            Personality::CloudControllerManager | Personality::CsiDriver => Layout::External,
            Personality::KubeletHelper
            | Personality::ApiserverPlugin
            | Personality::ControllerManager
            | Personality::LocalCloud => Layout::InTree,
        }
    }

    /// Whether the provider gets a Kubernetes client in `initialize`, as upstream's
    /// controller managers give one (`Initialize(clientBuilder, stop)`) and the kubelet and
    /// apiserver do not.
    pub fn gives_provider_a_client(self) -> bool {
        matches!(
            self,
            Personality::ControllerManager | Personality::CloudControllerManager
        )
    }

    /// Finds a personality by name or alias.
    pub fn from_name(name: &str) -> Option<Self> {
        TABLE
            .iter()
            .find(|(_, n, aliases)| *n == name || aliases.contains(&name))
            .map(|(p, _, _)| *p)
    }
}

/// How the binary was invoked.
#[derive(Debug, PartialEq, Eq)]
pub enum Invocation {
    /// Under a personality's name (a symlink): the arguments are that personality's.
    Personality(Personality, String),
    /// As `hypercloud` (or `hypercloud-*`): the first argument picks the subcommand.
    Multicall,
    /// Under a name that is neither.
    Unknown(String),
}

/// Decides from `argv[0]`.
pub fn resolve(argv0: &OsStr) -> Invocation {
    let base = Path::new(argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = base.strip_suffix(".exe").unwrap_or(&base).to_string();
    if base == "hypercloud" || base.starts_with("hypercloud-") || base.starts_with("hypercloud_") {
        return Invocation::Multicall;
    }
    match Personality::from_name(&base) {
        Some(p) => Invocation::Personality(p, base),
        None => Invocation::Unknown(base),
    }
}

/// `name (aliases)` lines for `--list` and errors.
pub fn listing() -> Vec<String> {
    TABLE
        .iter()
        .map(|(_, name, aliases)| {
            if aliases.is_empty() {
                name.to_string()
            } else {
                format!("{name} (alias: {})", aliases.join(", "))
            }
        })
        .collect()
}

/// Every name a symlink may have.
pub fn all_names() -> Vec<&'static str> {
    TABLE
        .iter()
        .flat_map(|(_, n, a)| std::iter::once(*n).chain(a.iter().copied()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv0_basename_selects_personality() {
        assert_eq!(
            resolve(OsStr::new("/usr/local/bin/cloud-controller-manager")),
            Invocation::Personality(
                Personality::CloudControllerManager,
                "cloud-controller-manager".into()
            )
        );
        assert_eq!(
            resolve(OsStr::new("kube-controller-manager")),
            Invocation::Personality(
                Personality::ControllerManager,
                "kube-controller-manager".into()
            )
        );
        assert_eq!(resolve(OsStr::new("/x/hypercloud")), Invocation::Multicall);
        assert_eq!(
            resolve(OsStr::new("hypercloud-v0.1")),
            Invocation::Multicall
        );
        assert_eq!(
            resolve(OsStr::new("/x/kubectl")),
            Invocation::Unknown("kubectl".into())
        );
    }

    #[test]
    fn only_the_cloud_controller_manager_and_the_csi_driver_play_the_external_layout() {
        for (p, name, _) in TABLE {
            let want = if matches!(
                p,
                Personality::CloudControllerManager | Personality::CsiDriver
            ) {
                Layout::External
            } else {
                Layout::InTree
            };
            assert_eq!(p.layout(), want, "{name}");
        }
        assert!(Personality::ControllerManager.gives_provider_a_client());
        assert!(Personality::CloudControllerManager.gives_provider_a_client());
        assert!(!Personality::KubeletHelper.gives_provider_a_client());
        assert!(!Personality::ApiserverPlugin.gives_provider_a_client());
        assert!(!Personality::CsiDriver.gives_provider_a_client());
    }

    #[test]
    fn every_name_round_trips() {
        for name in all_names() {
            let p = Personality::from_name(name).expect(name);
            assert!(p.name() == name || all_names().contains(&p.name()));
        }
        assert_eq!(all_names().len(), 7);
    }
}
