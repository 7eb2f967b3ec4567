//! `hack/envtest.sh start | env | stop` on a run dir of its own: the printed env is usable, and
//! `stop` ends exactly the processes `start` recorded.

use hypercloud_testenv::ControlPlane;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn envtest(command: &str, run_dir: &Path) -> Output {
    // Found at run time, not from the checkout the test was compiled in.
    Command::new(hypercloud_testenv::repo_root().join("hack/envtest.sh"))
        .arg(command)
        .env("HYPERCLOUD_ENVTEST_DIR", run_dir)
        .env_remove("HYPERCLOUD_ENVTEST_OWNER_PID")
        .output()
        .expect("run hack/envtest.sh")
}

fn recorded_pid(run_dir: &Path, name: &str) -> u32 {
    std::fs::read_to_string(run_dir.join(format!("{name}.pid")))
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid")
}

fn running(pid: u32) -> bool {
    // A zombie (exited, not yet reaped by its new parent) has an empty cmdline.
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| !cmdline.is_empty())
}

#[tokio::test]
async fn start_env_stop() {
    let run = tempfile::tempdir().expect("run dir");
    let started = envtest("start", run.path());
    let stderr = String::from_utf8_lossy(&started.stderr);
    assert!(started.status.success(), "start failed:\n{stderr}");
    let stdout = String::from_utf8_lossy(&started.stdout).into_owned();
    let kubeconfig = run.path().join("kubeconfig");
    assert_eq!(
        stdout,
        format!(
            "export KUBECONFIG={0}\nexport HYPERCLOUD_TEST_KUBECONFIG={0}\n",
            kubeconfig.display()
        )
    );

    let etcd = recorded_pid(run.path(), "etcd");
    let apiserver = recorded_pid(run.path(), "kube-apiserver");
    assert!(running(etcd) && running(apiserver));

    // Reachable with the kubeconfig it wrote; `env` prints the same env; a second `start` reuses it.
    let plane = ControlPlane::from_kubeconfig(PathBuf::from(&kubeconfig))
        .await
        .expect("load kubeconfig");
    let version = plane
        .client()
        .expect("client")
        .apiserver_version()
        .await
        .expect("GET /version");
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "34")
    );
    let env = envtest("env", run.path());
    assert_eq!(String::from_utf8_lossy(&env.stdout), stdout);
    let again = envtest("start", run.path());
    assert!(again.status.success());
    assert_eq!(recorded_pid(run.path(), "kube-apiserver"), apiserver);

    let stopped = envtest("stop", run.path());
    assert!(
        stopped.status.success(),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    assert!(!running(etcd), "etcd {etcd} still running");
    assert!(
        !running(apiserver),
        "kube-apiserver {apiserver} still running"
    );

    let env = envtest("env", run.path());
    assert_eq!(env.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&env.stderr);
    assert!(
        stderr.contains("envtest: step \"read env of the control plane in"),
        "{stderr}"
    );
}
