//! `--help` of the controller managers against golden files, and the upstream flag names.
//!
//! Regenerate after an intended change with `hack/update-golden.sh` (sets
//! `HYPERCLOUD_UPDATE_GOLDEN=1`); review the diff like code.

use std::process::Command;

use crate::BIN;

/// Flags of upstream cloud-controller-manager that hypercloud must accept under the same name.
const UPSTREAM_CCM_FLAGS: &[&str] = &[
    "--cloud-provider",
    "--cloud-config",
    "--kubeconfig",
    "--master",
    "--kube-api-qps",
    "--kube-api-burst",
    "--controllers",
    "--min-resync-period",
    "--leader-elect",
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
    "--leader-elect-resource-lock",
    "--leader-elect-resource-name",
    "--leader-elect-resource-namespace",
    "--enable-leader-migration",
    "--leader-migration-config",
    "--cluster-name",
    "--cluster-cidr",
    "--allocate-node-cidrs",
    "--configure-cloud-routes",
    "--node-monitor-period",
    "--route-reconciliation-period",
    "--use-service-account-credentials",
    "--node-status-update-frequency",
    "--concurrent-node-syncs",
    "--concurrent-service-syncs",
    "--secure-port",
    "--bind-address",
    "--cert-dir",
    "--tls-cert-file",
    "--tls-private-key-file",
    "--tls-min-version",
    "--tls-cipher-suites",
    "--tls-sni-cert-key",
    "--permit-port-sharing",
    "--permit-address-sharing",
    "--authentication-kubeconfig",
    "--authorization-kubeconfig",
    "--authorization-always-allow-paths",
    "--authorization-webhook-cache-authorized-ttl",
    "--authorization-webhook-cache-unauthorized-ttl",
    "--authentication-token-webhook-cache-ttl",
    "--authentication-skip-lookup",
    "--authentication-tolerate-lookup-failure",
    "--client-ca-file",
    "--requestheader-client-ca-file",
    "--requestheader-allowed-names",
    "--requestheader-username-headers",
    "--requestheader-uid-headers",
    "--requestheader-group-headers",
    "--requestheader-extra-headers-prefix",
    "--webhooks",
    "--webhook-bind-address",
    "--webhook-secure-port",
    "--webhook-cert-dir",
    "--webhook-tls-cert-file",
    "--webhook-tls-private-key-file",
    "--v",
    "--logging-format",
];

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("COLUMNS", "100")
        .output()
        .expect("run hypercloud");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

fn check_golden(name: &str, actual: &str) {
    let path = hypercloud_testenv::repo_root()
        .join("cmd/hypercloud/tests/golden")
        .join(name);
    if std::env::var_os("HYPERCLOUD_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run hack/update-golden.sh", path.display()));
    assert!(
        expected == actual,
        "{} is stale; run hack/update-golden.sh and review the diff.\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn cloud_controller_manager_help_matches_golden() {
    let _group = hypercloud_testenv::group_blocking("help_golden");
    check_golden(
        "cloud-controller-manager.help",
        &help(&[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--help",
        ]),
    );
}

#[test]
fn controller_manager_help_matches_golden() {
    let _group = hypercloud_testenv::group_blocking("help_golden");
    check_golden(
        "controller-manager.help",
        &help(&["controller-manager", "--help"]),
    );
}

#[test]
fn cloud_controller_manager_accepts_every_upstream_flag_name() {
    let _group = hypercloud_testenv::group_blocking("help_golden");
    let text = help(&["cloud-controller-manager", "--help"]);
    for flag in UPSTREAM_CCM_FLAGS {
        let shown = format!("{flag} <");
        let shown_bool = format!("{flag} [");
        assert!(
            text.contains(&shown)
                || text.contains(&shown_bool)
                || text.contains(&format!("{flag}\n")),
            "--help lacks upstream flag {flag}"
        );
    }
}

#[test]
fn defaults_shown_are_upstream() {
    let _group = hypercloud_testenv::group_blocking("help_golden");
    let ccm = help(&["cloud-controller-manager", "--help"]);
    let kcm = help(&["controller-manager", "--help"]);
    assert!(ccm.contains("[default: 10258]"));
    assert!(kcm.contains("[default: 10257]"));
    assert!(ccm.contains("[default: cloud-controller-manager]"));
    assert!(kcm.contains("[default: kube-controller-manager]"));
    for d in [
        "[default: 15s]",
        "[default: 10s]",
        "[default: 2s]",
        "[default: 5m0s]",
        "[default: kube-system]",
    ] {
        assert!(ccm.contains(d), "missing {d}");
    }
}
