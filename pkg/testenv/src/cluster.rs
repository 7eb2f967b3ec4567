//! The rest of a real cluster around the test control plane, as `hack/lib/cluster.sh` starts
//! it for the hack scripts (same binaries, same settings, read from that file): the upstream
//! kube-controller-manager (`--cloud-provider=external`: its non-cloud controllers: node
//! lifecycle and NotReady taints, endpoints, ReplicaSets, garbage collector...), the upstream
//! kube-scheduler, and kwok playing the kubelets of the Nodes labelled
//! [`KUBELET_LABEL`]`=<value>`, with the power switch (`hack/lib/kubelet-power.py`) that sets
//! that label only while the Node's instance runs in the cloud.
//!
//! The binaries are built by `hack/cluster.sh build` (cached; the first call here runs it when
//! needed). Like the rest of the process-level helpers, these panic with a message saying what
//! failed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::process::{free_port, Proc};

/// The label the power switch sets on a Node while its instance runs; kwok manages the Nodes
/// that carry it (`--manage-nodes-with-label-selector`).
pub const KUBELET_LABEL: &str = "hypercloud.io/kubelet";

/// The directory holding kube-controller-manager, kube-scheduler and kwok (`hack/cluster.sh
/// bin`, which builds them first when needed).
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| crate::hack_bin_dir("cluster.sh"))
}

/// A `NAME=value` setting of `hack/lib/cluster.sh`, where the timing of the cluster is decided.
pub fn setting(name: &str) -> String {
    let path = crate::repo_root().join("hack/lib/cluster.sh");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    parse_setting(&text, name).unwrap_or_else(|| panic!("{} sets no {name}", path.display()))
}

fn parse_setting(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix('=')?;
        Some(value.trim().to_owned())
    })
}

/// The envtest run dir's `pki` beside `kubeconfig` (hack/envtest.sh writes both), with the
/// service-account signing key and the CA the controller manager's token controllers need.
fn pki(kubeconfig: &Path) -> PathBuf {
    kubeconfig
        .parent()
        .map(|dir| dir.join("pki"))
        .unwrap_or_default()
}

/// The upstream kube-controller-manager against `kubeconfig`, `--cloud-provider=external`,
/// serving on a free loopback port, its log `dir/upstream-kube-controller-manager.log`; `extra`
/// are more flags (e.g. `--leader-elect-resource-namespace`, the leader-migration flags).
pub fn kube_controller_manager(kubeconfig: &Path, dir: &Path, extra: &[String]) -> Proc {
    let kubeconfig = kubeconfig.display().to_string();
    let mut cmd = Command::new(bin_dir().join("kube-controller-manager"));
    cmd.arg(format!("--kubeconfig={kubeconfig}"))
        .arg(format!("--authentication-kubeconfig={kubeconfig}"))
        .arg(format!("--authorization-kubeconfig={kubeconfig}"))
        .args(["--cloud-provider=external", "--bind-address=127.0.0.1"])
        .arg(format!("--secure-port={}", free_port()))
        .arg(format!(
            "--node-monitor-grace-period={}",
            setting("CLUSTER_NODE_MONITOR_GRACE")
        ))
        .arg("--v=2");
    let pki = pki(Path::new(&kubeconfig));
    if pki.join("sa.key").is_file() {
        cmd.arg(format!(
            "--service-account-private-key-file={}",
            pki.join("sa.key").display()
        ))
        .arg(format!("--root-ca-file={}", pki.join("ca.crt").display()));
    }
    cmd.args(extra);
    Proc::spawn(
        "upstream kube-controller-manager",
        cmd,
        dir.join("upstream-kube-controller-manager.log"),
    )
}

/// The upstream kube-scheduler against `kubeconfig`, its log `dir/upstream-kube-scheduler.log`.
pub fn kube_scheduler(kubeconfig: &Path, dir: &Path, extra: &[String]) -> Proc {
    let kubeconfig = kubeconfig.display().to_string();
    let mut cmd = Command::new(bin_dir().join("kube-scheduler"));
    cmd.arg(format!("--kubeconfig={kubeconfig}"))
        .arg(format!("--authentication-kubeconfig={kubeconfig}"))
        .arg(format!("--authorization-kubeconfig={kubeconfig}"))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()))
        .arg("--v=2")
        .args(extra);
    Proc::spawn(
        "upstream kube-scheduler",
        cmd,
        dir.join("upstream-kube-scheduler.log"),
    )
}

/// kwok playing the kubelets of the Nodes labelled [`KUBELET_LABEL`]`=value` (hack/lib/kwok-stages.yaml:
/// Nodes Ready with their Leases renewed, their pods Running), its log in `dir/kwok.log`.
pub fn kwok(kubeconfig: &Path, dir: &Path, value: &str) -> Proc {
    let repo = crate::repo_root();
    let mut cmd = Command::new(bin_dir().join("kwok"));
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!(
            "--config={}",
            repo.join("hack/lib/kwok-stages.yaml").display()
        ))
        .arg(format!(
            "--manage-nodes-with-label-selector={KUBELET_LABEL}={value}"
        ))
        .arg(format!(
            "--node-lease-duration-seconds={}",
            setting("CLUSTER_NODE_LEASE_SECONDS")
        ))
        .arg(format!("--cidr={}", setting("CLUSTER_POD_CIDR")));
    Proc::spawn("kwok", cmd, dir.join("kwok.log"))
}

/// kwok playing the kubelets of the Nodes labelled [`KUBELET_LABEL`]`=value`, and the power
/// switch that sets the label while a Node's instance runs; `instances` is the command that
/// prints the cloud's instances as JSON (`local-cloud --state-dir DIR instance list -o json`).
pub struct Kubelets {
    pub kwok: Proc,
    pub power: Proc,
}

impl Kubelets {
    pub fn start(kubeconfig: &Path, dir: &Path, value: &str, instances: &[String]) -> Kubelets {
        let repo = crate::repo_root();
        let kwok = kwok(kubeconfig, dir, value);
        let mut cmd = Command::new("python3");
        cmd.arg(repo.join("hack/lib/kubelet-power.py"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--label-value={value}"))
            .arg("--")
            .args(instances);
        let power = Proc::spawn("kubelet-power", cmd, dir.join("kubelet-power.log"));
        Kubelets { kwok, power }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_from_the_shell_file() {
        let text = "# x\nCLUSTER_A=10\nCLUSTER_AB=20s\n";
        assert_eq!(parse_setting(text, "CLUSTER_A").as_deref(), Some("10"));
        assert_eq!(parse_setting(text, "CLUSTER_AB").as_deref(), Some("20s"));
        assert_eq!(parse_setting(text, "CLUSTER_B"), None);
    }

    #[test]
    fn the_cluster_settings_exist() {
        for name in [
            "CLUSTER_NODE_LEASE_SECONDS",
            "CLUSTER_NODE_MONITOR_GRACE",
            "CLUSTER_POD_CIDR",
        ] {
            assert!(!setting(name).is_empty(), "{name}");
        }
    }
}
