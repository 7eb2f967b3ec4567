//! The Helm chart installed for real, as a newcomer installs it into the demo's cluster: `helm
//! install --wait` of `deploy/helm/hypercloud` (cloudProvider local, one replica, the
//! apiserver-plugin off) into kube-system of a real cluster (the upstream kube-controller-manager
//! making the Deployment's ReplicaSet and pod, the upstream kube-scheduler placing it by the
//! chart's control-plane nodeSelector and tolerations, kwok playing the kubelet of a
//! control-plane Node still tainted uninitialized). The Deployment becomes available, its pod
//! runs on that Node with the chart's flags, its Secret holds the cloud config; `helm
//! uninstall` takes it all away. (kwok plays the pod: the image is not pulled, nothing runs.)
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use hypercloud_testenv::cluster::{self, KUBELET_LABEL};
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use serde_json::json;

const NS: &str = "kube-system";
const CLOUD_CONF: &str = "[Global]\nauth-url = http://127.0.0.1:5000/v3\nusername = admin\n\
                          password = secret\ntenant-name = admin\ndomain-name = Default\n";

fn helm(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String) {
    let helm = hypercloud_testenv::tool("HYPERCLOUD_HELM", &["hack/helm.sh"]);
    let out = Command::new(helm)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .output()
        .expect("run helm");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_runs_the_cloud_controller_manager_on_a_control_plane_node() {
    let _group = hypercloud_testenv::group("helm_install").await;
    let env = TestEnv::new("e2e-helm").await.expect("testenv");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let kubeconfig = env.control_plane().kubeconfig().to_path_buf();
    let leases = format!("--leader-elect-resource-namespace={}", env.namespace());
    let release = env.unique_name("hc");

    let _kcm = cluster::kube_controller_manager(&kubeconfig, dir, std::slice::from_ref(&leases));
    let _scheduler = cluster::kube_scheduler(&kubeconfig, dir, std::slice::from_ref(&leases));
    let _kwok = cluster::kwok(&kubeconfig, dir, env.namespace());

    // A control-plane Node kwok plays, tainted as a cloud provider's new Node is.
    let nodes: Api<Node> = Api::all(env.client());
    let node = env.unique_name("e2e-cp");
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": node, "labels": {
            KUBELET_LABEL: env.namespace(),
            "node-role.kubernetes.io/control-plane": "",
            "kubernetes.io/os": "linux"}},
        "spec": {"taints": [
            {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true",
             "effect": "NoSchedule"},
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();

    let conf = dir.join("cloud.conf");
    std::fs::write(&conf, CLOUD_CONF).unwrap();
    let chart = hypercloud_testenv::repo_root().join("deploy/helm/hypercloud");
    let (ok, out) = helm(
        &kubeconfig,
        &[
            "install",
            &release,
            &chart.display().to_string(),
            "--namespace",
            NS,
            "--set",
            "cloudProvider=local",
            "--set-file",
            &format!("cloudConfig={}", conf.display()),
            "--set",
            "apiserverPlugin.enabled=false",
            "--set",
            "cloudControllerManager.replicas=1",
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    assert!(ok, "helm install:\n{out}");

    let deployments: Api<Deployment> = Api::namespaced(env.client(), NS);
    let d = deployments.get("cloud-controller-manager").await.unwrap();
    let status = d.status.clone().unwrap();
    assert_eq!(status.available_replicas, Some(1), "{status:?}");
    let pods: Api<Pod> = Api::namespaced(env.client(), NS);
    let pod = eventually(
        "the cloud-controller-manager pod Running on the control-plane Node",
        Duration::from_secs(60),
        || async {
            pods.list(&ListParams::default().labels("k8s-app=cloud-controller-manager"))
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
        },
    )
    .await;
    let container = &pod.spec.unwrap().containers[0];
    let args = container
        .args
        .clone()
        .unwrap_or_default()
        .into_iter()
        .chain(container.command.clone().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ");
    let env_vars = serde_json::to_string(&container.env).unwrap();
    assert!(
        args.contains("--cloud-provider=local") || env_vars.contains("\"local\""),
        "the pod does not run the local provider: {args} {env_vars}"
    );
    let secrets: Api<Secret> = Api::namespaced(env.client(), NS);
    let secret = secrets.get("hypercloud-cloud-config").await.unwrap();
    let data = secret.data.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&data["cloud.conf"].0),
        CLOUD_CONF,
        "the Secret holds the cloud config given with --set-file"
    );

    let (ok, out) = helm(
        &kubeconfig,
        &["uninstall", &release, "--namespace", NS, "--wait"],
    );
    assert!(ok, "helm uninstall:\n{out}");
    assert!(deployments
        .get_opt("cloud-controller-manager")
        .await
        .unwrap()
        .is_none());
    assert!(secrets
        .get_opt("hypercloud-cloud-config")
        .await
        .unwrap()
        .is_none());
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    env.cleanup().await.unwrap();
}
