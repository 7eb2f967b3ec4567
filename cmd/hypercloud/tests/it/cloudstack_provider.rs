//! The `cloudstack` provider in the real binary, against a real `hypercloud local-cloud serve`
//! process (its CloudStack dialect, the keys from `local-cloud cloudstack-keys`) and the real
//! kube-apiserver: the in-tree kubelet-helper registers a Node named by its VM, with
//! `cloudstack://<id>`, its NIC's IP and its zone; start-up reports Instances, Zones and load
//! balancers; a config with neither API keys nor a metadata URL is refused by name.
#![cfg(feature = "cloudstack")]
#![allow(clippy::unwrap_used)]

use hypercloud_testenv::localcloud::{cli_json, state_dir, Serve};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};

use crate::legacy_provider::{assert_capabilities, assert_refused, register_once, startup_report};
use crate::BIN;

#[tokio::test]
async fn kubelet_helper_registers_a_vm_with_keys_from_the_cli() {
    let _group = hypercloud_testenv::group("cloudstack_provider").await;
    let env = TestEnv::new("cloudstack-provider").await.expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let node_name = env.unique_name("cs-node");
    let server = cli_json(BIN, &dir, &["instance", "create", &node_name, "-o", "json"]);
    let id = server["id"].as_str().unwrap().to_owned();
    let keys = cli_json(BIN, &dir, &["cloudstack-keys", "-o", "json"]);
    let conf = tmp.path().join("cloudstack.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\napi-url = {}/client/api\napi-key = {}\nsecret-key = {}\n",
            serve.api_url,
            keys["api_key"].as_str().unwrap(),
            keys["secret_key"].as_str().unwrap()
        ),
    )
    .unwrap();
    let report = startup_report("cloudstack", &conf);
    assert_capabilities(&report, &["instances", "zones", "load-balancer"], &[]);
    register_once("cloudstack", &conf, &kubeconfig, &node_name);
    let nodes: Api<Node> = Api::all(env.client());
    let node = nodes.get(&node_name).await.expect("node registered");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        Some(format!("cloudstack://{id}"))
    );
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("nova"),
        "{labels:?}"
    );
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    assert!(
        addresses.iter().any(|a| a.type_ == "InternalIP"),
        "{addresses:?}"
    );
    nodes
        .delete(&node_name, &DeleteParams::default())
        .await
        .unwrap();

    assert_refused(
        "cloudstack",
        &conf,
        "[Global]\nzone = nova\n",
        "no cloud provider config given",
    );
    serve.terminate();
}
