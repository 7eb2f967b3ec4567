//! The external layout end to end: the kubelet and kube-controller-manager run with
//! `--cloud-provider=external` and the cloud-controller-manager alone talks to the local
//! cloud.
//!
//! - `kubelet-helper` registers its Node tainted uninitialized, with the `--node-ip`
//!   annotation and nothing from the cloud, and makes no cloud call.
//! - `kube-controller-manager` runs no cloud controller and makes no cloud call (its
//!   `--trace-cloud-calls` file stays absent or empty) while holding its Lease.
//! - All of it in a real cluster: the upstream kube-controller-manager runs its non-cloud
//!   controllers and kwok plays the kubelet while the instance runs
//!   (`hypercloud_testenv::cluster`), so the Node is Ready because a kubelet said so.
//! - `cloud-controller-manager` initialises the Node from the cloud (the same Node the
//!   in-tree layout registers, see `in_tree.rs`), creates a load balancer that forwards a
//!   request to the Node's InternalIP:nodePort, and its PV-label controller labels the
//!   PersistentVolume of a local-cloud volume (no webhook in this layout).
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use hypercloud_testenv::leases::LeaseRef;
use hypercloud_testenv::nodes::{self, has_taint, provider_id, TAINT_UNINITIALIZED};
use hypercloud_testenv::process::Proc;
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use support::cloud::LocalCloud;
use support::cluster::{
    assert_node_from_cloud, assert_pv_labelled, cinder_pv, load_balancer_round_trip, Leftovers,
    RealCluster, E2E_LABEL,
};
use support::process::{run, Bin};
use support::trace::{methods, traced};

const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_layout() {
    let _group = hypercloud_testenv::group("external").await;
    let bin = Bin::install();
    let env = TestEnv::new("e2e-external").await.expect("testenv");
    let leftovers = Leftovers::new(&env);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let kubeconfig = format!(
        "--kubeconfig={}",
        env.control_plane().kubeconfig().display()
    );
    let leases = format!("--leader-elect-resource-namespace={}", env.namespace());
    let node_name = env.unique_name("e2e-node");
    let run_label = env.unique_name("external");

    let cloud = LocalCloud::start(&bin, "127.0.131.0/24", "az-1,az-2");
    let instance = cloud.create_instance(&node_name, "az-1", "m1.medium");
    let volume = cloud.create_volume(&format!("vol-{node_name}"), "az-2");
    let conf = cloud.cloud_conf("cloud.conf", None);

    // The rest of the cluster (hypercloud's controller-manager below holds this namespace's
    // kube-controller-manager Lease).
    let _cluster = RealCluster::start(&env, dir, &cloud);

    // kube-controller-manager, external: every controller it has, which is none.
    let kcm_trace = dir.join("kube-controller-manager.jsonl");
    let mut cmd = bin.command("kube-controller-manager");
    cmd.args(["--cloud-provider=external", &kubeconfig, &leases])
        .args(["--secure-port=0", "--v=2"])
        .arg(format!("--trace-cloud-calls={}", kcm_trace.display()));
    let mut kcm = Proc::spawn("kube-controller-manager", cmd, dir.join("kcm.log"));
    kcm.wait_for_output("running no cloud controllers", Duration::from_secs(30));

    // The kubelet: tainted, the node IP as an annotation, no cloud call.
    let kubelet_trace = dir.join("kubelet-helper.jsonl");
    leftovers.node(&node_name);
    let mut cmd = bin.command("kubelet-helper");
    cmd.args(["--cloud-provider=external", &kubeconfig, "--once"])
        .arg(format!("--hostname-override={node_name}"))
        .arg(format!("--node-ip={}", instance.address))
        .arg(format!("--node-labels={E2E_LABEL}={run_label}"))
        .arg(format!("--trace-cloud-calls={}", kubelet_trace.display()));
    let out = run(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("kubelet-helper: registered node {node_name}")),
        "{stdout}"
    );
    assert_eq!(methods(&traced(&kubelet_trace)), Vec::<&str>::new());
    let nodes: Api<Node> = Api::all(env.client());
    let registered = nodes.get(&node_name).await.unwrap();
    assert!(
        has_taint(&registered, TAINT_UNINITIALIZED),
        "{registered:?}"
    );
    assert_eq!(provider_id(&registered), None);
    assert_eq!(
        registered.annotations().get(PROVIDED_NODE_IP),
        Some(&instance.address)
    );
    assert!(
        !registered
            .labels()
            .contains_key("topology.kubernetes.io/zone"),
        "{:?}",
        registered.labels()
    );
    RealCluster::wait_ready(&nodes, &node_name).await;

    // The cloud-controller-manager: node initialisation, load balancers, PV labels.
    let ccm_trace = dir.join("cloud-controller-manager.jsonl");
    let mut cmd = bin.command("cloud-controller-manager");
    cmd.args(["--cloud-provider=local", &kubeconfig, &leases])
        .arg(format!("--cloud-config={}", conf.display()))
        .args([
            "--controllers=cloud-node,service,pvl",
            "--secure-port=0",
            "--v=2",
        ])
        .arg(format!("--trace-cloud-calls={}", ccm_trace.display()));
    let mut ccm = Proc::spawn("cloud-controller-manager", cmd, dir.join("ccm.log"));
    let initialised = nodes::wait_for(
        &nodes,
        &node_name,
        "the Node to be initialised by the cloud-controller-manager",
        Duration::from_secs(60),
        |n| {
            let addressed = n
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .is_some_and(|a| !a.is_empty());
            !has_taint(n, TAINT_UNINITIALIZED) && addressed
        },
    )
    .await;
    assert_node_from_cloud(&initialised, &instance);

    load_balancer_round_trip(&env, &cloud, &instance.address, "127.0.131.").await;

    // A PV of a local-cloud volume: created as given, then labelled by the controller.
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let pv_name = env.unique_name("e2e-pv");
    let selector = BTreeMap::from([(E2E_LABEL.to_owned(), run_label.clone())]);
    leftovers.persistent_volume(&pv_name);
    let created = pvs
        .create(
            &PostParams::default(),
            &cinder_pv(&pv_name, selector, &volume, true),
        )
        .await
        .unwrap();
    assert!(
        !created.labels().contains_key("topology.kubernetes.io/zone"),
        "no webhook labels PVs in the external layout: {:?}",
        created.labels()
    );
    let labelled = eventually("the PV to be labelled", Duration::from_secs(30), || {
        let pvs = pvs.clone();
        let name = pv_name.clone();
        async move {
            let pv = pvs.get(&name).await.ok()?;
            pv.labels()
                .contains_key("topology.kubernetes.io/zone")
                .then_some(pv)
        }
    })
    .await;
    assert_pv_labelled(&labelled, "az-2");

    // The cloud work was the cloud-controller-manager's alone.
    let ccm_calls = traced(&ccm_trace);
    let ccm_methods = methods(&ccm_calls);
    for m in [
        "instance_metadata",
        "ensure_load_balancer",
        "ensure_load_balancer_deleted",
        "get_labels_for_volume",
    ] {
        assert!(
            ccm_methods.contains(&m),
            "the cloud-controller-manager never called {m}: {ccm_methods:?}"
        );
    }
    assert!(kcm.running(), "kube-controller-manager exited");
    assert!(ccm.running(), "cloud-controller-manager exited");
    assert_eq!(
        methods(&traced(&kcm_trace)),
        Vec::<&str>::new(),
        "kube-controller-manager --cloud-provider=external called the cloud"
    );
    let kcm_log = kcm.log();
    assert!(kcm_log.contains("cloud controllers: none"), "{kcm_log}");
    for lease in ["kube-controller-manager", "cloud-controller-manager"] {
        assert!(
            LeaseRef::new(env.client(), env.namespace(), lease)
                .holder()
                .await
                .is_some(),
            "nobody holds the {lease} Lease"
        );
    }

    leftovers.clean(env.client()).await;
    env.cleanup().await.unwrap();
}
