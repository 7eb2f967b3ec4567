//! `--cloud-provider=vsphere` end to end: the real binary, the real apiserver (pkg/testenv)
//! and VMware's vCenter simulator (vcsim), with govc changing the inventory.
//!
//! - External layout: the cloud-controller-manager initialises a tainted Node from its VM
//!   (provider ID, addresses, instance type, zone/region from tags), taints it when govc
//!   powers the VM off and deletes it when govc destroys the VM; its start-up report says
//!   plainly that vSphere has no load balancers or routes.
//!   Its PV-label controller labels a `vsphereVolume` PV with its datastore's zone.
//! - In-tree layout: kubelet-helper finds its own VM by the SMBIOS UUID file and registers the
//!   Node with the same facts; apiserver-plugin's PersistentVolumeLabel admission patches a
//!   `vsphereVolume` PV with the same zone labels.
//! - Start-up errors for bad credentials and an unknown datacenter name the problem.
#![cfg(feature = "vsphere")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::nodes::{
    self, create_tainted, has_taint, internal_ip, provider_id, set_ready, TAINT_UNINITIALIZED,
};
use hypercloud_testenv::process::{free_port, personality, run, Proc, Stdout};
use hypercloud_testenv::vcsim::Vcsim;
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::api::{DeleteParams, PostParams};
use kube::Api;

use crate::BIN;
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const VM: &str = "/DC0/vm/DC0_H0_VM0";

fn label<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// vcsim whose DC0_H0_VM0 reports guest host name `node` and 10.20.0.5, with zone `zone-a` on
/// its host and region `region-1` on the datacenter; a vsphere.conf for it in `dir`.
fn inventory(dir: &Path, node: &str, conf_extra: &str) -> (Vcsim, String, std::path::PathBuf) {
    let sim = Vcsim::start(&[]);
    sim.set_guest(VM, node, "10.20.0.5");
    sim.tag_zone("/DC0/host/DC0_H0/DC0_H0", "zone-a", "/DC0", "region-1");
    let uuid = sim.vm_uuid(VM);
    let conf = dir.join("vsphere.conf");
    std::fs::write(&conf, sim.ini_conf(conf_extra)).unwrap();
    (sim, uuid, conf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ccm_initialises_taints_and_deletes_nodes_from_vcsim() {
    let _group = hypercloud_testenv::group("vsphere_provider").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-vsphere")
        .await
        .expect("testenv");
    let node = env.unique_name("vs-node");
    let dir = tempfile::tempdir().unwrap();
    // A short listing lifetime so the power-off shows within the test's patience.
    let (sim, uuid, conf) = inventory(dir.path(), &node, "[Hypercloud]\ncache-ttl = 1s\n");
    let nodes: Api<Node> = Api::all(env.client());
    create_tainted(&nodes, &node).await;
    set_ready(&nodes, &node, true).await;

    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=vsphere")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .args([
            "--leader-elect=false",
            "--secure-port=0",
            "--node-monitor-period=1s",
            "--controllers=*,persistentvolume-label-controller",
            "--v=2",
        ]);
    let report = dir.path().join("report.txt");
    let ccm = Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.path().join("ccm.log"),
        Stdout::File(report.clone()),
    );

    let n = nodes::wait_for(
        &nodes,
        &node,
        "the Node to be initialised from vSphere",
        Duration::from_secs(60),
        |n| {
            !has_taint(n, TAINT_UNINITIALIZED)
                && provider_id(n).is_some_and(|id| !id.is_empty())
                && internal_ip(n).is_some()
        },
    )
    .await;
    assert_eq!(provider_id(&n), Some(format!("vsphere://{uuid}").as_str()));
    assert_eq!(internal_ip(&n).as_deref(), Some("10.20.0.5"));
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("zone-a"));
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some("region-1"));
    assert_eq!(
        label(&n, "node.kubernetes.io/instance-type"),
        Some("vsphere-vm.cpu-1.mem-0gb.os-other")
    );
    // No load balancers and no routes on vSphere, said plainly at start-up.
    let text = ccm.stdout();
    assert!(
        text.contains("cloud provider does not support load balancers"),
        "{text}"
    );
    assert!(text.contains("load-balancer  not supported"), "{text}");

    // The PV-label controller labels a vsphereVolume PV with its datastore's zone: vcsim's
    // LocalDS_0 is mounted by DC0_H0, whose tags say zone-a, region-1.
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let pv_name = env.unique_name("vs-pv");
    let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "vsphereVolume": {"volumePath": "[LocalDS_0] kubevols/data.vmdk", "fsType": "ext4"}
        }
    }))
    .unwrap();
    pvs.create(&PostParams::default(), &pv).await.unwrap();
    let labelled = eventually("the PV's zone labels", Duration::from_secs(60), || async {
        pvs.get(&pv_name).await.ok().filter(|p| {
            p.metadata.labels.as_ref().is_some_and(|l| {
                l.get("topology.kubernetes.io/zone").map(String::as_str) == Some("zone-a")
            })
        })
    })
    .await;
    assert_eq!(
        labelled.metadata.labels.as_ref().unwrap()["topology.kubernetes.io/region"],
        "region-1"
    );
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;

    // govc powers the VM off; its kubelet stops posting Ready.
    sim.govc(&["vm.power", "-off", "-force", VM]);
    set_ready(&nodes, &node, false).await;
    nodes::wait_for(
        &nodes,
        &node,
        "the shutdown taint",
        Duration::from_secs(60),
        |n| has_taint(n, SHUTDOWN),
    )
    .await;

    // govc destroys the VM: the Node goes.
    sim.govc(&["vm.destroy", VM]);
    eventually(
        "the Node of the destroyed VM to be deleted",
        Duration::from_secs(60),
        || async { nodes.get_opt(&node).await.unwrap().is_none().then_some(()) },
    )
    .await;
    drop(ccm);
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
}

#[tokio::test]
async fn kubelet_helper_in_tree_registers_its_own_vm() {
    let _group = hypercloud_testenv::group("vsphere_provider").await;
    let env = hypercloud_testenv::TestEnv::new("kubelet-vsphere")
        .await
        .expect("testenv");
    let node = env.unique_name("vs-kubelet");
    let dir = tempfile::tempdir().unwrap();
    let uuid_file = dir.path().join("product_uuid");
    let (sim, uuid, conf) = inventory(
        dir.path(),
        "guest-name-differs",
        &format!(
            "[Hypercloud]\nproduct-uuid-file = {}\n",
            uuid_file.display()
        ),
    );
    std::fs::write(&uuid_file, uuid.to_uppercase()).unwrap();
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let (code, stdout, stderr) = run(
        BIN,
        &[
            "kubelet-helper",
            "--cloud-provider=vsphere",
            &format!("--cloud-config={}", conf.display()),
            &format!("--kubeconfig={kubeconfig}"),
            &format!("--hostname-override={node}"),
            "--once",
        ],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let nodes: Api<Node> = Api::all(env.client());
    let n = nodes.get(&node).await.expect("registered");
    assert_eq!(provider_id(&n), Some(format!("vsphere://{uuid}").as_str()));
    assert_eq!(internal_ip(&n).as_deref(), Some("10.20.0.5"));
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("zone-a"));
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some("region-1"));
    assert!(!has_taint(&n, TAINT_UNINITIALIZED));
    let _ = nodes.delete(&node, &DeleteParams::default()).await;

    // apiserver-plugin: PersistentVolumeLabel admission for a vsphereVolume PV.
    let ca = dir.path().join("ca.crt");
    let port = free_port();
    let mut cmd = personality(BIN, "apiserver-plugin");
    cmd.args([
        "--cloud-provider=vsphere",
        &format!("--cloud-config={}", conf.display()),
        &format!("--kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1",
        &format!("--secure-port={port}"),
        &format!("--ca-bundle-file={}", ca.display()),
    ]);
    let _plugin = Proc::spawn("apiserver-plugin", cmd, dir.path().join("plugin.log"));
    let client = eventually(
        "the webhook's CA bundle",
        Duration::from_secs(30),
        || async {
            let pem = std::fs::read(&ca).ok()?;
            let cert = reqwest::Certificate::from_pem(&pem).ok()?;
            reqwest::Client::builder()
                .add_root_certificate(cert)
                .build()
                .ok()
        },
    )
    .await;
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "pv-1",
            "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
            "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
            "name": "pv-a",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-a"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "vsphereVolume": {"volumePath": "[LocalDS_0] kubevols/a.vmdk"}}}
        }
    });
    let url = format!("https://127.0.0.1:{port}/mutate/persistentvolumelabel");
    let resp: serde_json::Value =
        eventually("the webhook to answer", Duration::from_secs(30), || async {
            client
                .post(&url)
                .json(&review)
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()
        })
        .await;
    assert_eq!(resp["response"]["allowed"], true, "{resp}");
    // A base64 string, or (as kube-rs writes []byte) an array of numbers.
    let bytes: Vec<u8> = match &resp["response"]["patch"] {
        serde_json::Value::Array(a) => a.iter().map(|b| b.as_u64().unwrap() as u8).collect(),
        other => {
            serde_json::from_value::<k8s_openapi::ByteString>(other.clone())
                .expect("base64 patch")
                .0
        }
    };
    let patch = String::from_utf8(bytes).unwrap();
    assert!(
        patch.contains("zone-a") && patch.contains("region-1"),
        "{patch}"
    );

    // Bad credentials and an unknown datacenter stop start-up, naming the problem.
    let bad = dir.path().join("bad.conf");
    for (conf_text, want) in [
        (
            sim.ini_conf("").replace("\"pass\"", "\"wrong\""),
            "user name or password is not valid",
        ),
        (
            sim.ini_conf("").replace("\"DC0\"", "\"DC7\""),
            "datacenter \"DC7\"",
        ),
    ] {
        std::fs::write(&bad, conf_text).unwrap();
        let (code, stdout, stderr) = run(
            BIN,
            &[
                "kubelet-helper",
                "--cloud-provider=vsphere",
                &format!("--cloud-config={}", bad.display()),
                &format!("--kubeconfig={kubeconfig}"),
                "--once",
            ],
        );
        assert_ne!(code, 0, "{stdout}");
        assert!(stderr.contains(want), "{want}: {stderr}");
    }
}
