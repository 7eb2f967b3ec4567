//! The `rackspace` provider in the real binary, against a real `hypercloud local-cloud serve`
//! process (its Keystone v2.0 with API keys) and the real kube-apiserver: the in-tree
//! kubelet-helper registers a Node named by its server, with `rackspace://<id>` and the server's
//! one address as InternalIP and ExternalIP; start-up reports Instances and Zones and no load
//! balancer; a config with `user-id` is refused by name.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use hypercloud_testenv::localcloud::{cli_json, http, state_dir, Serve};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use serde_json::Value;

use crate::legacy_provider::{assert_capabilities, assert_refused, register_once, startup_report};
use crate::BIN;

/// The admin's API key, read as Rackspace's control panel showed it.
fn api_key(serve: &Serve) -> String {
    let body =
        r#"{"auth": {"passwordCredentials": {"username": "admin", "password": "hypercloud"}}}"#;
    let (status, _, text) = http(
        "POST",
        &format!("{}/identity/v2.0/tokens", serve.api_url),
        &[],
        Some(body),
    );
    assert_eq!(status, 200, "{text}");
    let access: Value = serde_json::from_str(&text).unwrap();
    let token = access["access"]["token"]["id"].as_str().unwrap();
    let user = access["access"]["user"]["id"].as_str().unwrap();
    let (status, _, text) = http(
        "GET",
        &format!(
            "{}/identity/v2.0/users/{user}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials",
            serve.api_url
        ),
        &[("x-auth-token", token)],
        None,
    );
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    v["RAX-KSKEY:apiKeyCredentials"]["apiKey"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn kubelet_helper_registers_a_server_signing_in_with_an_api_key() {
    let _group = hypercloud_testenv::group("rackspace_provider").await;
    let env = TestEnv::new("rackspace-provider").await.expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let node_name = env.unique_name("rax-node");
    let server = cli_json(BIN, &dir, &["instance", "create", &node_name, "-o", "json"]);
    let id = server["id"].as_str().unwrap().to_owned();
    let conf = tmp.path().join("rackspace.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nauth-url = {}/identity/v2.0/\nusername = admin\napi-key = {}\nregion = RegionOne\n",
            serve.api_url,
            api_key(&serve)
        ),
    )
    .unwrap();
    let report = startup_report("rackspace", &conf);
    assert_capabilities(&report, &["instances", "zones"], &["load-balancer"]);
    register_once("rackspace", &conf, &kubeconfig, &node_name);
    let nodes: Api<Node> = Api::all(env.client());
    let node = nodes.get(&node_name).await.expect("node registered");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        Some(format!("rackspace://{id}"))
    );
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    let internal = addresses.iter().find(|a| a.type_ == "InternalIP");
    let external = addresses.iter().find(|a| a.type_ == "ExternalIP");
    assert!(
        internal.is_some() && internal.map(|a| &a.address) == external.map(|a| &a.address),
        "{addresses:?}"
    );
    nodes
        .delete(&node_name, &DeleteParams::default())
        .await
        .unwrap();

    // user-id is refused by name (exit 2), as gophercloud's Rackspace client refused it.
    assert_refused(
        "rackspace",
        &conf,
        "[Global]\nusername = admin\napi-key = k\nregion = R\nuser-id = u\n",
        "user-id is not supported",
    );
    serve.terminate();
}
