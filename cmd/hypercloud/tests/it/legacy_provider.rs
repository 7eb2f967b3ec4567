//! What the real-binary tests of the legacy clouds' providers (mesos, ovirt, photon,
//! rackspace, cloudstack) do the same way: the cloud-controller-manager's start-up report of a
//! provider, one in-tree kubelet-helper registration, and a config refused by name.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::BIN;

fn hypercloud(args: &[String]) -> (i32, String, String) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    hypercloud_testenv::process::run(BIN, &args)
}

/// The cloud-controller-manager's start-up report for `provider` with `conf` (it stops at the
/// missing kubeconfig, after the report); asserts the provider initialised.
pub fn startup_report(provider: &str, conf: &Path) -> String {
    let (_, stdout, stderr) = hypercloud(&[
        "cloud-controller-manager".into(),
        format!("--cloud-provider={provider}"),
        format!("--cloud-config={}", conf.display()),
        "--kubeconfig=/nonexistent/kubeconfig".into(),
    ]);
    assert!(
        stdout.contains(&format!("cloud provider \"{provider}\" initialized")),
        "{stdout}\n{stderr}"
    );
    stdout
}

/// Asserts the report says each capability is `supported` or `not supported`.
pub fn assert_capabilities(report: &str, supported: &[&str], unsupported: &[&str]) {
    for c in supported {
        assert!(
            report.contains(&format!("  {c:<14} supported")),
            "{c}: {report}"
        );
    }
    for c in unsupported {
        assert!(
            report.contains(&format!("  {c:<14} not supported")),
            "{c}: {report}"
        );
    }
}

/// One in-tree `kubelet-helper --once` of `provider` registering `node`; asserts it succeeded.
pub fn register_once(provider: &str, conf: &Path, kubeconfig: &str, node: &str) {
    let (code, stdout, stderr) = hypercloud(&[
        "kubelet-helper".into(),
        format!("--cloud-provider={provider}"),
        format!("--cloud-config={}", conf.display()),
        format!("--kubeconfig={kubeconfig}"),
        format!("--hostname-override={node}"),
        "--once".into(),
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
}

/// Writes `text` to `conf` and asserts the cloud-controller-manager refuses it (exit 2) with an
/// error containing `says`.
pub fn assert_refused(provider: &str, conf: &Path, text: &str, says: &str) {
    std::fs::write(conf, text).unwrap();
    let (code, _, stderr) = hypercloud(&[
        "cloud-controller-manager".into(),
        format!("--cloud-provider={provider}"),
        format!("--cloud-config={}", conf.display()),
        "--kubeconfig=/nonexistent/kubeconfig".into(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(says), "{stderr}");
}
