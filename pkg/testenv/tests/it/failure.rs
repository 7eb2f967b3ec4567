//! When no control plane can be had, the failure names the step that failed: both the script's
//! message and the Rust helper's error. (Tests then fail; nothing is skipped.)

use hypercloud_testenv::{ControlPlane, Error, StartOptions};
use std::process::Command;

const STEP: &str = "find kube-apiserver and etcd binaries";

// Found at run time: a test executable built in another checkout sharing the target
// directory (CI's copy) would otherwise carry that checkout's path.
fn script() -> std::path::PathBuf {
    hypercloud_testenv::repo_root().join("hack/envtest.sh")
}

/// Runs `hack/envtest.sh start` with binaries from `bin` and its run directory `run`, checks
/// that it failed with status 1, and returns its output and stderr.
fn envtest_start_fails(
    bin: &std::path::Path,
    run: &std::path::Path,
) -> (std::process::Output, String) {
    let output = Command::new(script())
        .arg("start")
        .env("HYPERCLOUD_ENVTEST_BIN", bin)
        .env("HYPERCLOUD_ENVTEST_DIR", run)
        .output()
        .expect("run hack/envtest.sh");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    (output, stderr)
}

#[test]
fn envtest_start_without_binaries_names_the_step() {
    let bin = tempfile::tempdir().expect("bin dir");
    let run = tempfile::tempdir().expect("run dir");
    let (output, stderr) = envtest_start_fails(bin.path(), run.path());
    assert!(
        stderr.contains(&format!(
            "envtest: step \"{STEP}\" failed: no kube-apiserver in"
        )),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "printed an env after failing");
}

#[test]
fn envtest_start_with_a_dead_etcd_names_the_step_and_shows_its_log() {
    // Binaries that exit at once: start must not wait for its full timeout, and must say why.
    let bin = tempfile::tempdir().expect("bin dir");
    let run = tempfile::tempdir().expect("run dir");
    let fake = bin.path().join("kube-apiserver");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'fake apiserver: cannot start' >&2\nexit 3\n",
    )
    .expect("write fake");
    let etcd = bin.path().join("etcd");
    std::fs::write(
        &etcd,
        "#!/bin/sh\necho 'fake etcd: cannot start' >&2\nexit 3\n",
    )
    .expect("write fake");
    for file in [&fake, &etcd] {
        let status = Command::new("chmod")
            .arg("+x")
            .arg(file)
            .status()
            .expect("chmod");
        assert!(status.success());
    }
    let (_, stderr) = envtest_start_fails(bin.path(), run.path());
    assert!(
        stderr.contains(
            "envtest: step \"wait for etcd /health\" failed: etcd exited before it was ready"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("fake etcd: cannot start"),
        "log tail not shown: {stderr}"
    );
}

#[tokio::test]
async fn helper_error_names_the_step() {
    let bin = tempfile::tempdir().expect("bin dir");
    let run = tempfile::tempdir().expect("run dir");
    let options = StartOptions {
        bin_dir: Some(bin.path().to_owned()),
        ..StartOptions::new(run.path())
    };
    let error = ControlPlane::start(&options)
        .await
        .expect_err("started without binaries");
    assert!(
        matches!(error, Error::StartControlPlane { .. }),
        "{error:?}"
    );
    assert_eq!(error.step(), Some(STEP));
    assert!(
        error
            .to_string()
            .contains(&format!("step \"{STEP}\" failed")),
        "{error}"
    );
}

#[tokio::test]
async fn unreadable_kubeconfig_names_the_step() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("kubeconfig");
    let error = ControlPlane::from_kubeconfig(&missing)
        .await
        .expect_err("read a missing kubeconfig");
    assert!(matches!(error, Error::ReadKubeconfig { .. }), "{error:?}");
    assert!(
        error.to_string().contains("step \"read kubeconfig"),
        "{error}"
    );
}
