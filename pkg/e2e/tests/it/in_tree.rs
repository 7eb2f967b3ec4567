//! The in-tree layout end to end: every component is given `--cloud-provider=local` and asks
//! the local cloud itself.
//!
//! - The apiserver's duties: the `apiserver-plugin` webhook, registered with the real
//!   kube-apiserver from the shipped `deploy/apiserver-plugin/webhooks.yaml`, refuses a Node
//!   without an instance and labels the PersistentVolume of a local-cloud volume with its
//!   zone (and refuses one of a volume the cloud does not have).
//! - The kubelet's duties: `kubelet-helper` registers a Node whose name, provider ID,
//!   addresses and labels come from the cloud (through the webhook, which lets it in).
//! - The controller-manager's duties: `kube-controller-manager` creates a load balancer that
//!   forwards a request to the Node's InternalIP:nodePort, and deletes it with the Service.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use hypercloud_testenv::process::{free_port, Proc};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use serde_json::json;
use support::cloud::LocalCloud;
use support::cluster::{
    assert_node_from_cloud, assert_pv_labelled, cinder_pv, load_balancer_round_trip, Leftovers,
    RealCluster, E2E_LABEL,
};
use support::process::{run, Bin};
use support::trace::{methods, traced};
use support::webhooks;

/// Whether some `method` call of `records` had `name` among its arguments.
fn called_for(records: &[serde_json::Value], method: &str, name: &str) -> bool {
    records
        .iter()
        .any(|r| r["method"] == method && r["args"].to_string().contains(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_tree_layout() {
    let _group = hypercloud_testenv::group("in_tree").await;
    let bin = Bin::install();
    let env = TestEnv::new("e2e-in-tree").await.expect("testenv");
    let leftovers = Leftovers::new(&env);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let kubeconfig = format!(
        "--kubeconfig={}",
        env.control_plane().kubeconfig().display()
    );
    let node_name = env.unique_name("e2e-node");
    let ghost = env.unique_name("e2e-ghost");
    let run_label = env.unique_name("in-tree");
    let selector = BTreeMap::from([(E2E_LABEL.to_owned(), run_label.clone())]);

    let cloud = LocalCloud::start(&bin, "127.0.130.0/24", "az-1,az-2");
    let instance = cloud.create_instance(&node_name, "az-1", "m1.medium");
    let volume = cloud.create_volume(&format!("vol-{node_name}"), "az-2");
    let conf = cloud.cloud_conf("cloud.conf", None);

    // The apiserver's duties: the webhook, called by the real apiserver.
    let port = free_port();
    let ca = dir.join("ca.crt");
    let plugin_trace = dir.join("apiserver-plugin.jsonl");
    let mut cmd = bin.command("apiserver-plugin");
    cmd.args(["--cloud-provider=local", &kubeconfig])
        .arg(format!("--cloud-config={}", conf.display()))
        .args(["--bind-address=127.0.0.1", &format!("--secure-port={port}")])
        .arg(format!("--cert-dir={}", dir.join("certs").display()))
        .arg(format!("--ca-bundle-file={}", ca.display()))
        .arg(format!("--trace-cloud-calls={}", plugin_trace.display()));
    let mut plugin = Proc::spawn("apiserver-plugin", cmd, dir.join("apiserver-plugin.log"));
    let banner = plugin.wait_for_output("caBundle: ", Duration::from_secs(30));
    let base = format!("https://127.0.0.1:{port}");
    assert!(
        banner.contains(&format!("serving admission webhooks on {base}")),
        "{banner}"
    );
    let (mutating, validating) = webhooks::shipped(
        &run_label,
        &base,
        &std::fs::read(&ca).unwrap(),
        (E2E_LABEL, &run_label),
    );
    leftovers.webhook_configurations(&run_label);
    Api::<MutatingWebhookConfiguration>::all(env.client())
        .create(&PostParams::default(), &mutating)
        .await
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(env.client())
        .create(&PostParams::default(), &validating)
        .await
        .unwrap();

    // A Node for an instance that does not exist is refused. The apiserver picks webhook
    // configurations up asynchronously: a Node created before that is removed and retried.
    let nodes: Api<Node> = Api::all(env.client());
    leftovers.node(&ghost);
    let ghost_node: Node =
        serde_json::from_value(json!({"metadata": {"name": ghost, "labels": selector}})).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let denial = loop {
        match nodes.create(&PostParams::default(), &ghost_node).await {
            Err(kube::Error::Api(status)) => break status,
            Ok(_) => nodes
                .delete(&ghost, &DeleteParams::default())
                .await
                .map(drop)
                .unwrap(),
            Err(e) => panic!("creating Node {ghost}: {e}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the apiserver never called the cloud node webhook"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(denial.code, 400, "{denial:?}");
    assert!(
        denial.message.contains("cloudnode.hypercloud.io")
            && denial.message.contains(&format!(
                "node \"{ghost}\" has no instance in cloud provider \"local\""
            )),
        "{}",
        denial.message
    );
    assert!(nodes.get_opt(&ghost).await.unwrap().is_none());

    // The kubelet's duties: its Node, from the cloud (name from the instance metadata).
    let node_conf = cloud.cloud_conf("node.conf", Some(&instance));
    let kubelet_trace = dir.join("kubelet-helper.jsonl");
    leftovers.node(&node_name);
    let mut cmd = bin.command("kubelet-helper");
    cmd.args(["--cloud-provider=local", &kubeconfig, "--once"])
        .arg(format!("--cloud-config={}", node_conf.display()))
        .arg(format!("--hostname-override={node_name}"))
        .arg(format!("--node-labels={E2E_LABEL}={run_label}"))
        .arg(format!("--trace-cloud-calls={}", kubelet_trace.display()));
    let out = run(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("kubelet-helper: registered node {node_name}")),
        "{stdout}"
    );
    let node = nodes.get(&node_name).await.unwrap();
    assert_node_from_cloud(&node, &instance);
    let asked = traced(&kubelet_trace);
    for m in [
        "current_node_name",
        "instance_id",
        "node_addresses",
        "instance_type",
    ] {
        assert!(
            methods(&asked).contains(&m),
            "kubelet-helper never called {m}: {asked:?}"
        );
    }
    // The webhook asked the cloud about both Nodes.
    let admitted = traced(&plugin_trace);
    for n in [&ghost, &node_name] {
        assert!(
            called_for(&admitted, "instance_exists", n),
            "the webhook never checked {n}: {admitted:?}"
        );
    }
    // The rest of the cluster: the upstream controller manager has no cloud part, hypercloud's
    // below supplies it; kwok is the kubelet while the instance runs.
    let _cluster = RealCluster::start(&env, dir, &cloud);
    RealCluster::wait_ready(&nodes, &node_name).await;

    // The controller-manager's duties: only the service controller (node lifecycle would
    // judge every Node of the shared apiserver against this cloud), its Lease in our
    // namespace.
    let kcm_trace = dir.join("kube-controller-manager.jsonl");
    let mut cmd = bin.command("kube-controller-manager");
    cmd.args(["--cloud-provider=local", &kubeconfig])
        .arg(format!("--cloud-config={}", conf.display()))
        .args([
            "--controllers=service-lb-controller",
            "--secure-port=0",
            "--v=2",
        ])
        .arg(format!(
            "--leader-elect-resource-namespace={}",
            env.namespace()
        ))
        .arg(format!("--trace-cloud-calls={}", kcm_trace.display()));
    let mut kcm = Proc::spawn("kube-controller-manager", cmd, dir.join("kcm.log"));
    load_balancer_round_trip(&env, &cloud, &instance.address, "127.0.130.").await;
    let lb_calls = traced(&kcm_trace);
    for m in ["ensure_load_balancer", "ensure_load_balancer_deleted"] {
        assert!(methods(&lb_calls).contains(&m), "kcm never called {m}");
    }
    let lease = Api::<Lease>::namespaced(env.client(), env.namespace())
        .get("kube-controller-manager")
        .await
        .unwrap();
    assert!(lease
        .spec
        .and_then(|s| s.holder_identity)
        .is_some_and(|h| !h.is_empty()));
    assert!(kcm.running(), "kube-controller-manager exited");

    // The PV of a local-cloud volume gets its zone from the webhook when it is created.
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let pv_name = env.unique_name("e2e-pv");
    leftovers.persistent_volume(&pv_name);
    let created = pvs
        .create(
            &PostParams::default(),
            &cinder_pv(&pv_name, selector.clone(), &volume, false),
        )
        .await
        .unwrap();
    assert_pv_labelled(&created, "az-2");
    // One of a volume the cloud does not have is refused (failurePolicy Fail).
    let missing = env.unique_name("e2e-pv-missing");
    leftovers.persistent_volume(&missing);
    let refused = pvs
        .create(
            &PostParams::default(),
            &cinder_pv(&missing, selector.clone(), "no-such-volume", false),
        )
        .await
        .expect_err("a PV of a volume the cloud does not have");
    assert!(
        refused
            .to_string()
            .contains("persistentvolumelabel.hypercloud.io"),
        "{refused}"
    );
    assert!(plugin.running(), "apiserver-plugin exited");

    leftovers.clean(env.client()).await;
    env.cleanup().await.unwrap();
}
