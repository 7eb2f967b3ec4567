//! The `ovirt` provider in the real binary, against a real `hypercloud local-cloud serve`
//! process (its oVirt dialect) and the real kube-apiserver: the in-tree kubelet-helper
//! registers a Node named by its VM's guest FQDN, with `ovirt:///<vm id>` and the guest's IP;
//! start-up reports Instances only; a config without `[connection] uri` is refused by name.
#![cfg(feature = "ovirt")]
#![allow(clippy::unwrap_used)]

use hypercloud_testenv::localcloud::{cli_json, state_dir, Serve};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};

use crate::legacy_provider::{assert_capabilities, assert_refused, register_once, startup_report};
use crate::BIN;

#[tokio::test]
async fn kubelet_helper_registers_a_vm_by_its_guest_fqdn() {
    let _group = hypercloud_testenv::group("ovirt_provider").await;
    let env = TestEnv::new("ovirt-provider").await.expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let server = cli_json(
        BIN,
        &dir,
        &["instance", "create", "k8s-node-1", "-o", "json"],
    );
    let vm_id = server["id"].as_str().unwrap().to_owned();
    // Without ovirt-fqdn metadata the guest reports the server's host name.
    let node_name = "k8s-node-1";

    let conf = tmp.path().join("ovirt.conf");
    std::fs::write(
        &conf,
        format!(
            "[connection]\nuri = {}/api\nusername = admin@internal\npassword = hypercloud\n[filters]\nvms = name=k8s-*\n",
            serve.api_url
        ),
    )
    .unwrap();
    let report = startup_report("ovirt", &conf);
    assert_capabilities(&report, &["instances"], &["zones"]);
    register_once("ovirt", &conf, &kubeconfig, node_name);
    let nodes: Api<Node> = Api::all(env.client());
    let node = nodes.get(node_name).await.expect("node registered");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        Some(format!("ovirt:///{vm_id}"))
    );
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    assert!(
        addresses.iter().any(|a| a.type_ == "InternalIP")
            && addresses.iter().any(|a| a.type_ == "ExternalIP"),
        "{addresses:?}"
    );
    nodes
        .delete(node_name, &DeleteParams::default())
        .await
        .unwrap();

    // The legacy provider required [connection] uri; so does this one, by name (exit 2).
    assert_refused(
        "ovirt",
        &conf,
        "[connection]\nusername = admin@internal\n",
        "missing ovirt uri",
    );
    serve.terminate();
}
