//! What the volume tests (controller_manager_attach_detach.rs, kubelet_helper_volumes.rs)
//! share: the controller-manager running only the attach/detach controller, the cloud's and
//! the Node's view of attachments, and a pod using a claim.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use hypercloud_testenv::localcloud::openstack_json;
use hypercloud_testenv::process::{personality, Proc, Stdout};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use serde_json::json;

pub fn start_kcm(bin: &str, dir: &Path, kubeconfig: &Path, cloud_conf: &Path) -> Proc {
    let mut cmd = personality(bin, "controller-manager");
    cmd.arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", cloud_conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--leader-elect=false")
        .arg("--secure-port=0")
        .arg("--controllers=attachdetach")
        .arg("--v=2");
    Proc::spawn_with("controller-manager", cmd, dir.join("kcm.log"), Stdout::Null)
}

/// The servers a volume is attached to, as `openstack volume show` lists them.
pub fn attached_servers(state: &Path, id: &str) -> (String, Vec<String>) {
    let v = openstack_json(state, &["volume", "show", id]);
    let servers = v["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["server_id"].as_str().unwrap().to_owned())
        .collect();
    (v["status"].as_str().unwrap().to_owned(), servers)
}

/// The Node's `volumesAttached` as (name, devicePath).
pub async fn attached(nodes: &Api<Node>, node: &str) -> Vec<(String, String)> {
    nodes
        .get_status(node)
        .await
        .unwrap()
        .status
        .and_then(|s| s.volumes_attached)
        .unwrap_or_default()
        .into_iter()
        .map(|v| (v.name, v.device_path))
        .collect()
}

pub fn pod(name: &str, node: &str, claim: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "automountServiceAccountToken": false,
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
    }))
    .unwrap()
}
