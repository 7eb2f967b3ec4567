//! The `photon` provider in the real binary, against a real `hypercloud local-cloud serve`
//! process (its Photon Controller dialect) and the real kube-apiserver: the in-tree
//! kubelet-helper registers a Node named by its VM, with `photon://<vm id>` and the VM's IP;
//! the controller-manager's in-tree volume controllers create a `kubernetes.io/photon-pd` disk
//! for a claim, attach it to the pod's Node's VM and detach it, and delete it with the claim,
//! each change a Photon task; a config without `[Global] target` is refused by name.
#![cfg(feature = "photon")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::localcloud::{cli_json, http, state_dir, Serve};
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use crate::legacy_provider::{assert_capabilities, assert_refused, register_once, startup_report};
use crate::volume_fixtures::{
    attach_turn, claim, class as class_of, delete_claim, delete_pod_until_detached,
    run_pod_until_attached, start_controller_manager, wait_pv, wait_pv_deleted,
};
use crate::BIN;

const PLUGIN: &str = "kubernetes.io/photon-pd";

/// `GET` of the dialect, as JSON; `None` on 404.
fn photon(serve: &Serve, path: &str) -> Option<Value> {
    let (status, _, body) = http("GET", &format!("{}{path}", serve.api_url), &[], None);
    match status {
        404 => None,
        200 => Some(serde_json::from_str(&body).unwrap()),
        other => panic!("GET {path}: {other} {body}"),
    }
}

/// The ID of the local cloud's project `demo`, as the Photon API lists it.
fn demo_project(serve: &Serve) -> String {
    let projects = photon(serve, "/v1/tenants/default/projects?name=demo").unwrap();
    projects["items"][0]["id"].as_str().unwrap().to_owned()
}

fn photon_conf(dir: &Path, serve: &Serve) -> std::path::PathBuf {
    let conf = dir.join("photon.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\ntarget = {}\nproject = {}\n",
            serve.api_url,
            demo_project(serve)
        ),
    )
    .unwrap();
    conf
}

#[tokio::test]
async fn kubelet_helper_registers_a_vm_by_its_name() {
    let _group = hypercloud_testenv::group("photon_provider").await;
    let env = TestEnv::new("photon-provider").await.expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let node_name = env.unique_name("pc-node");
    let server = cli_json(BIN, &dir, &["instance", "create", &node_name, "-o", "json"]);
    let vm_id = server["id"].as_str().unwrap().to_owned();
    let conf = photon_conf(tmp.path(), &serve);
    let report = startup_report("photon", &conf);
    assert_capabilities(&report, &["instances", "zones"], &["load-balancer"]);
    register_once("photon", &conf, &kubeconfig, &node_name);
    let nodes: Api<Node> = Api::all(env.client());
    let node = nodes.get(&node_name).await.expect("node registered");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        Some(format!("photon://{vm_id}"))
    );
    let networks = photon(&serve, &format!("/v1/vms/{vm_id}/subnets")).unwrap();
    let ip = networks["resourceProperties"]["networkConnections"][0]["ipAddress"]
        .as_str()
        .unwrap()
        .to_owned();
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == ip),
        "{addresses:?}"
    );
    nodes
        .delete(&node_name, &DeleteParams::default())
        .await
        .unwrap();

    // The legacy provider required [Global] target; so does this one, by name (exit 2).
    assert_refused(
        "photon",
        &conf,
        "[Global]\nproject = p\n",
        "endpoint was not specified",
    );
    serve.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn photon_disks_provisioned_attached_detached_and_deleted() {
    let _group = hypercloud_testenv::group("controller_manager_attach_detach").await;
    let _turn = attach_turn("photon").await;
    let env = TestEnv::new("kcm-photon-volumes").await.expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let conf = photon_conf(tmp.path(), &serve);
    let vm_name = env.unique_name("pc-vm");
    let vm = cli_json(BIN, &dir, &["instance", "create", &vm_name, "-o", "json"])["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let client = env.client();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), env.namespace());
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), env.namespace());
    let pp = PostParams::default();
    let _ = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(
        client.clone(),
        env.namespace(),
    )
    .create(
        &pp,
        &serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap(),
    )
    .await;
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": vm_name}, "spec": {"providerID": format!("photon://{vm}")}}),
    )
    .unwrap();
    nodes.create(&pp, &node).await.unwrap();

    let class = env.unique_name("pd-gold");
    classes
        .create(
            &pp,
            &class_of(
                &class,
                PLUGIN,
                json!({"flavor": "pd-gold", "fsType": "xfs"}),
                "Immediate",
                "Delete",
            ),
        )
        .await
        .unwrap();
    let _kcm = start_controller_manager(
        BIN,
        tmp.path(),
        env.control_plane().kubeconfig(),
        "photon",
        &conf,
        "persistentvolume-binder,attachdetach",
        &[],
    );

    // A disk of the request rounded up to GiB, with the class's flavor, and its PV. The claim
    // names no provisioner: no upstream binder knows kubernetes.io/photon-pd any more.
    let mut unannotated = claim("data", &class, "1500Mi", "Filesystem", PLUGIN);
    unannotated.metadata.annotations = None;
    let data = claims.create(&pp, &unannotated).await.unwrap();
    let pv_name = format!("pvc-{}", data.uid().unwrap());
    let pv = wait_pv(&pvs, &pv_name).await;
    let spec = pv.spec.clone().unwrap();
    let pd = spec
        .photon_persistent_disk
        .clone()
        .expect("photonPersistentDisk");
    assert_eq!(pd.fs_type.as_deref(), Some("xfs"));
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(pv.annotations()["pv.kubernetes.io/provisioned-by"], PLUGIN);
    let disk = photon(&serve, &format!("/v1/disks/{}", pd.pd_id)).expect("the disk");
    assert_eq!(
        (
            &disk["name"],
            &disk["flavor"],
            &disk["capacityGb"],
            &disk["state"]
        ),
        (
            &json!(format!("kubernetes-dynamic-{pv_name}")),
            &json!("pd-gold"),
            &json!(2),
            &json!("DETACHED")
        ),
        "{disk}"
    );

    // Bound as the binder would bind it; a pod on the Node: the disk goes to its VM.
    let ppatch = PatchParams::default();
    claims
        .patch(
            "data",
            &ppatch,
            &Patch::Merge(&json!({"spec": {"volumeName": pv_name}})),
        )
        .await
        .unwrap();
    claims
        .patch_status(
            "data",
            &ppatch,
            &Patch::Merge(&json!({"status": {"phase": "Bound",
                "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}}})),
        )
        .await
        .unwrap();
    let unique = format!("{PLUGIN}/{}", pd.pd_id);
    assert_eq!(
        run_pod_until_attached(&pods, &nodes, "web", &vm_name).await,
        [(
            unique.clone(),
            format!("/dev/disk/by-id/wwn-0x{}", pd.pd_id.replace('-', ""))
        )]
    );
    let disk = photon(&serve, &format!("/v1/disks/{}", pd.pd_id)).unwrap();
    assert_eq!(disk["vms"], json!([vm]), "{disk}");
    assert_eq!(disk["state"], "ATTACHED");

    delete_pod_until_detached(&pods, &nodes, "web", &vm_name).await;
    eventually(
        "the disk to be detached in the cloud",
        Duration::from_secs(30),
        || async {
            let d = photon(&serve, &format!("/v1/disks/{}", pd.pd_id)).unwrap();
            (d["vms"] == json!([])).then_some(())
        },
    )
    .await;

    // Reclaim Delete: the claim goes, the disk goes (a Photon task), then the PV.
    delete_claim(&claims, "data").await;
    eventually(
        "the disk to be deleted",
        Duration::from_secs(60),
        || async {
            photon(&serve, &format!("/v1/disks/{}", pd.pd_id))
                .is_none()
                .then_some(())
        },
    )
    .await;
    wait_pv_deleted(&pvs, &pv_name).await;
    let _ = nodes.delete(&vm_name, &DeleteParams::default()).await;
    serve.terminate();
}
