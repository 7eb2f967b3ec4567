//! Upstream reference manifests start hypercloud's cloud-controller-manager unchanged: each
//! argument list of `tests/data/upstream-ccm-args.txt` (the Kubernetes docs' CCM DaemonSet,
//! cloud-provider-openstack's DaemonSet, static Pod and Helm chart), adapted only in the
//! provider name and the kubelet's `$(VAR)` expansion, runs against the test apiserver: the
//! process passes its flag checks, prints its start-up report, and keeps running.
//!
//! The process finds the apiserver through `KUBECONFIG`, as `kubectl` would, in place of the
//! in-cluster configuration a Pod has. Flags no list sets are appended for the test
//! machine: `--secure-port` (a free port, so the four processes and other tests do not
//! collide on upstream's 10258) and, where a manifest leaves `--bind-address` or
//! `--webhook-bind-address` at upstream's default 0.0.0.0, `=127.0.0.1` (everything here
//! listens on loopback only).

use std::time::Duration;

use hypercloud_testenv::process::{free_port, personality, Proc, Stdout};

use crate::BIN;

/// `(source, args)` for each list of the data file.
fn cases() -> Vec<(String, Vec<String>)> {
    let text = include_str!("../data/upstream-ccm-args.txt");
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.strip_prefix("== ") {
            Some(source) => cases.push((source.to_string(), Vec::new())),
            None => cases
                .last_mut()
                .expect("an argument before the first `== source` line")
                .1
                .push(line.to_string()),
        }
    }
    cases
}

/// The adaptations the data file names, and nothing else.
fn adapt(arg: &str, cloud_config: &str) -> String {
    arg.replace("--cloud-provider=openstack", "--cloud-provider=fake")
        .replace(
            "--cloud-provider=<YOUR_CLOUD_PROVIDER>",
            "--cloud-provider=fake",
        )
        .replace("$(CLOUD_CONFIG)", cloud_config)
        .replace("$(CLUSTER_NAME)", "kubernetes")
}

#[test]
fn the_data_file_holds_the_four_reference_lists() {
    let _group = hypercloud_testenv::group_blocking("upstream_manifests");
    let cases = cases();
    assert_eq!(cases.len(), 4, "{cases:?}");
    for (source, args) in &cases {
        assert!(
            args.iter().any(|a| a.starts_with("--cloud-provider=")),
            "{source}"
        );
    }
}

#[tokio::test]
async fn upstream_reference_argument_lists_start_the_ccm() {
    let _group = hypercloud_testenv::group("upstream_manifests").await;
    let env = hypercloud_testenv::TestEnv::new("upstream-manifests")
        .await
        .expect("testenv");
    let dir = tempfile::tempdir().expect("tmp");
    let cloud_config = dir.path().join("cloud.conf");
    std::fs::write(
        &cloud_config,
        "region: RegionOne\nzone: nova\ninstances: []\n",
    )
    .expect("cloud config");
    let cloud_config = cloud_config.display().to_string();
    let kubeconfig = env.control_plane().kubeconfig().to_path_buf();
    let mut running = Vec::new();
    for (i, (source, args)) in cases().into_iter().enumerate() {
        let mut args: Vec<String> = args.iter().map(|a| adapt(a, &cloud_config)).collect();
        for flag in ["--bind-address=", "--webhook-bind-address="] {
            if !args.iter().any(|a| a.starts_with(flag)) {
                args.push(format!("{flag}127.0.0.1"));
            }
        }
        args.push(format!("--secure-port={}", free_port()));
        let mut cmd = personality(BIN, "cloud-controller-manager");
        cmd.args(&args).env("KUBECONFIG", &kubeconfig);
        let log = dir.path().join(format!("ccm-{i}.log"));
        let mut proc = Proc::spawn_with(&format!("ccm ({source})"), cmd, log, Stdout::Log);
        proc.wait_for_output("controllers:", Duration::from_secs(30));
        running.push((source, proc));
    }
    // Still running a while later: no flag refused, no start-up step failed.
    std::thread::sleep(Duration::from_secs(3));
    for (source, proc) in &mut running {
        assert!(proc.running(), "{source}: exited\n{}", proc.log());
    }
    drop(running);
    env.cleanup().await.expect("cleanup");
}
