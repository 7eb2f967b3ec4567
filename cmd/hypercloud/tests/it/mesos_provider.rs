//! The `mesos` provider in the real binary, against a real `hypercloud local-cloud serve`
//! process (its Mesos dialect) and the real kube-apiserver: the in-tree kubelet-helper
//! registers a Node named by its agent's hostname, with the agent's ID as provider ID and the
//! hostname resolved as its address; start-up reports Instances and Clusters; a bad config is
//! refused by name.
#![cfg(feature = "mesos")]
#![allow(clippy::unwrap_used)]

use hypercloud_testenv::localcloud::{cli_json, http, state_dir, Serve};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};

use crate::legacy_provider::{assert_capabilities, assert_refused, register_once, startup_report};
use crate::BIN;

fn hypercloud(args: &[String]) -> (i32, String, String) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    hypercloud_testenv::process::run(BIN, &args)
}

#[tokio::test]
async fn kubelet_helper_registers_an_agent_as_its_node() {
    let _group = hypercloud_testenv::group("mesos_provider").await;
    let env = TestEnv::new("mesos-provider").await.expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &["--mesos-cluster=rehearsal"]);
    let server = cli_json(BIN, &dir, &["instance", "create", "agent-1", "-o", "json"]);
    let server_id = server["id"].as_str().unwrap().to_owned();
    let (status, _, body) = http("GET", &format!("{}/state", serve.api_url), &[], None);
    assert_eq!(status, 200, "{body}");
    let state: serde_json::Value = serde_json::from_str(&body).unwrap();
    let agent = state["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"].as_str().unwrap().starts_with(&server_id))
        .cloned()
        .unwrap_or_else(|| panic!("no agent for {server_id}: {state}"));
    let hostname = agent["hostname"].as_str().unwrap().to_owned();

    let conf = tmp.path().join("mesos.conf");
    let master = serve.api_url.trim_start_matches("http://").to_owned();
    std::fs::write(
        &conf,
        format!("[mesos-cloud]\nmesos-master = {master}\nstate-cache-ttl = 0s\n"),
    )
    .unwrap();
    let conf_arg = format!("--cloud-config={}", conf.display());

    // Start-up report of the cloud-controller-manager: what the provider supports.
    let report = startup_report("mesos", &conf);
    assert_capabilities(&report, &["instances", "clusters"], &["load-balancer"]);
    register_once("mesos", &conf, &kubeconfig, &hostname);
    let nodes: Api<Node> = Api::all(env.client());
    let node = nodes.get(&hostname).await.expect("node registered");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        Some(format!("mesos://{}", agent["id"].as_str().unwrap()))
    );
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == hostname),
        "{addresses:?}"
    );
    nodes
        .delete(&hostname, &DeleteParams::default())
        .await
        .unwrap();

    // A node name no agent has: registration fails and says so.
    let (code, _, stderr) = hypercloud(&[
        "kubelet-helper".into(),
        "--cloud-provider=mesos".into(),
        conf_arg,
        format!("--kubeconfig={kubeconfig}"),
        "--hostname-override=10.99.0.1".into(),
        "--once".into(),
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("instance not found"), "{stderr}");

    // A config the provider cannot use stops start-up, naming the key and the file.
    assert_refused(
        "mesos",
        &conf,
        "[mesos-cloud]\nmesos-master = zk://zk1:2181/mesos\n",
        "ZooKeeper",
    );
    serve.terminate();
}
