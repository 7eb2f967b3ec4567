//! A Node follows its instance, in a real cluster: the upstream kube-controller-manager
//! (`--cloud-provider=external`), kwok playing the kubelets only while their instances run
//! (`hack/lib/kubelet-power.py`), and hypercloud's cloud-controller-manager.
//!
//! - Both Nodes register tainted, kwok makes them Ready and renews their Leases, and the
//!   cloud-controller-manager initialises them.
//! - Stopping one instance stops its kubelet: the Lease expires, the upstream controller
//!   manager marks the Node NotReady (Unknown) and taints it unreachable, and the
//!   cloud-node-lifecycle controller asks the cloud and adds the shutdown taint. Starting it
//!   again brings the Node back Ready and the shutdown taint goes.
//! - Deleting the other instance deletes its Node.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use hypercloud_testenv::cluster::{self, Kubelets, KUBELET_LABEL};
use hypercloud_testenv::nodes::{self, has_taint, TAINT_UNINITIALIZED};
use hypercloud_testenv::process::Proc;
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, ResourceExt};
use support::cloud::LocalCloud;
use support::cluster::Leftovers;
use support::process::{run, Bin};

const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";

async fn renew_time(leases: &Api<Lease>, name: &str) -> Option<String> {
    let lease = leases.get_opt(name).await.ok()??;
    Some(format!("{:?}", lease.spec?.renew_time?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_follows_its_instance() {
    let _group = hypercloud_testenv::group("instance_power").await;
    let bin = Bin::install();
    let env = TestEnv::new("e2e-instance-power").await.expect("testenv");
    let leftovers = Leftovers::new(&env);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let kubeconfig_path = env.control_plane().kubeconfig().to_path_buf();
    let kubeconfig = format!("--kubeconfig={}", kubeconfig_path.display());
    let leases = format!("--leader-elect-resource-namespace={}", env.namespace());
    let stopped = env.unique_name("e2e-stopped");
    let deleted = env.unique_name("e2e-deleted");

    let cloud = LocalCloud::start(&bin, "127.0.132.0/24", "az-1");
    let instances = [
        cloud.create_instance(&stopped, "az-1", "m1.small"),
        cloud.create_instance(&deleted, "az-1", "m1.small"),
    ];
    let conf = cloud.cloud_conf("cloud.conf", None);

    let _kcm =
        cluster::kube_controller_manager(&kubeconfig_path, dir, std::slice::from_ref(&leases));
    let kubelets = Kubelets::start(
        &kubeconfig_path,
        dir,
        env.namespace(),
        &cloud.instances_command(),
    );
    let mut cmd = bin.command("cloud-controller-manager");
    cmd.args(["--cloud-provider=local", &kubeconfig, &leases])
        .arg(format!("--cloud-config={}", conf.display()))
        .args([
            "--controllers=cloud-node,cloud-node-lifecycle",
            "--secure-port=0",
        ]);
    let mut ccm = Proc::spawn("cloud-controller-manager", cmd, dir.join("ccm.log"));

    let api: Api<Node> = Api::all(env.client());
    for instance in &instances {
        leftovers.node(&instance.name);
        let mut cmd = bin.command("kubelet-helper");
        cmd.args(["--cloud-provider=external", &kubeconfig, "--once"])
            .arg(format!("--hostname-override={}", instance.name))
            .arg(format!("--node-ip={}", instance.address));
        run(cmd);
    }
    for instance in &instances {
        let node = nodes::wait_for(
            &api,
            &instance.name,
            "the Node to be Ready (kwok) and initialised (cloud-controller-manager)",
            Duration::from_secs(90),
            |n| nodes::ready_status(n) == Some("True") && !has_taint(n, TAINT_UNINITIALIZED),
        )
        .await;
        assert_eq!(
            node.labels().get(KUBELET_LABEL).map(String::as_str),
            Some(env.namespace()),
            "the power switch labelled the Node of a running instance"
        );
    }
    // kwok renews the Node's Lease, as a kubelet does.
    let node_leases: Api<Lease> = Api::namespaced(env.client(), "kube-node-lease");
    let first = eventually(
        "kwok to create the Node Lease",
        Duration::from_secs(30),
        || renew_time(&node_leases, &stopped),
    )
    .await;
    eventually(
        "kwok to renew the Node Lease",
        Duration::from_secs(30),
        || {
            let leases = node_leases.clone();
            let (first, name) = (first.clone(), stopped.clone());
            async move { renew_time(&leases, &name).await.filter(|t| *t != first) }
        },
    )
    .await;

    // Power off: the kubelet stops, the Lease expires, the controller manager marks the Node
    // NotReady and the cloud-node-lifecycle controller adds the shutdown taint.
    cloud.cli(&["instance", "stop", &stopped]);
    let node = nodes::wait_for(
        &api,
        &stopped,
        "the stopped instance's Node to turn NotReady with the unreachable and shutdown taints",
        Duration::from_secs(120),
        |n| {
            nodes::ready_status(n) != Some("True")
                && has_taint(n, TAINT_UNREACHABLE)
                && has_taint(n, TAINT_SHUTDOWN)
        },
    )
    .await;
    assert!(
        !node.labels().contains_key(KUBELET_LABEL),
        "the power switch took the label off: {:?}",
        node.labels()
    );
    let other = api.get(&deleted).await.unwrap();
    assert_eq!(
        nodes::ready_status(&other),
        Some("True"),
        "the running instance's Node stays Ready"
    );
    assert!(!has_taint(&other, TAINT_SHUTDOWN));

    // Power on again: Ready, and the shutdown taint goes.
    cloud.cli(&["instance", "start", &stopped]);
    nodes::wait_for(
        &api,
        &stopped,
        "the restarted instance's Node to be Ready without the shutdown taint",
        Duration::from_secs(90),
        |n| nodes::ready_status(n) == Some("True") && !has_taint(n, TAINT_SHUTDOWN),
    )
    .await;

    // Delete the other instance: its Node goes.
    cloud.cli(&["instance", "delete", &deleted]);
    eventually(
        "the deleted instance's Node to be deleted",
        Duration::from_secs(120),
        || {
            let api = api.clone();
            let name = deleted.clone();
            async move { api.get_opt(&name).await.ok()?.is_none().then_some(()) }
        },
    )
    .await;
    assert!(ccm.running(), "cloud-controller-manager exited");
    let power_log = kubelets.power.log();
    assert!(
        power_log.contains(&format!("{stopped}: instance SHUTOFF, kubelet off")),
        "{power_log}"
    );

    leftovers.clean(env.client()).await;
    env.cleanup().await.unwrap();
}
