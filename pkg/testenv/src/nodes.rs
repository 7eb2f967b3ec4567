//! Nodes as the tests of the cloud controllers make and read them, standing in for the
//! kubelet: a Node registered with `--cloud-provider=external` (tainted, no provider ID), its
//! Ready condition, and what the cloud-node controller sets (upstream's e2e framework has the
//! same helpers in `test/e2e/framework/node`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

use crate::wait::eventually;

/// The taint a kubelet with `--cloud-provider=external` registers its Node with, until the
/// cloud-node controller has initialised it.
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// A Node object (not created) named `name`, with `provider_id` when given: what a provider's
/// InstancesV2 calls are asked about.
pub fn node(name: &str, provider_id: Option<&str>) -> Node {
    Node {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref()?.provider_id.as_deref()
}

pub fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// The status of the Node's Ready condition (`True`, `False`, `Unknown`), if it has one.
pub fn ready_status(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// Creates Node `name` as `kubelet --cloud-provider=external` registers it: with the
/// uninitialized taint (NoSchedule), no provider ID.
pub async fn create_tainted(nodes: &Api<Node>, name: &str) {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"taints": [{"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]}
    }))
    .expect("a Node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("create node {name}: {e}"));
}

/// Posts the Node's Ready condition, as its kubelet would.
pub async fn set_ready(nodes: &Api<Node>, name: &str, ready: bool) {
    let mut condition = json!({
        "type": "Ready", "status": if ready { "True" } else { "False" }, "reason": "KubeletReady",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"
    });
    if ready {
        condition["message"] = json!("kubelet is posting ready status");
    }
    let patch = json!({"status": {"conditions": [condition]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap_or_else(|e| panic!("set Ready={ready} on node {name}: {e}"));
}

/// Polls Node `name` until `pred` holds for it; the Node then. Fails after `limit` naming
/// `what`.
pub async fn wait_for(
    nodes: &Api<Node>,
    name: &str,
    what: &str,
    limit: Duration,
    pred: impl Fn(&Node) -> bool,
) -> Node {
    let pred = &pred;
    eventually(what, limit, move || async move {
        nodes.get(name).await.ok().filter(|n| pred(n))
    })
    .await
}
