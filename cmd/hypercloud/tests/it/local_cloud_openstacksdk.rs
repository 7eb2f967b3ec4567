//! openstacksdk (pinned in hack/python-tools.sh, a client nobody here wrote and a different one
//! from the CLI's usage) against the real `hypercloud local-cloud serve`: runs
//! hack/conformance/openstacksdk_conformance.py, which asserts CRUD and filtered lists of
//! Neutron ports and floating IPs and of every Octavia kind, the single-call load balancer
//! create, a floating IP on the VIP port carrying real TCP traffic, and timestamp forms.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use hypercloud_testenv::localcloud::{state_dir, Serve};

use crate::BIN;

#[test]
fn openstacksdk_conformance() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_openstacksdk");
    let python = hypercloud_testenv::venv_python("venv", "openstack", "");
    let script =
        hypercloud_testenv::repo_root().join("hack/conformance/openstacksdk_conformance.py");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let _serve = Serve::start(BIN, &dir, &[]);
    let mut cmd = Command::new(python);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OS_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .arg(&script)
        .env("OS_CLIENT_CONFIG_FILE", dir.join("clouds.yaml"))
        .env("OS_CLOUD", "local")
        .output()
        .unwrap();
    hypercloud_testenv::conformance_passed(&out, &script, "openstacksdk conformance: ok");
}
