//! The in-tree volume path of the `controller-manager` personality with the `local` provider:
//! the real binary, the real apiserver (pkg/testenv) and a real `hypercloud local-cloud
//! serve`, checked from both sides (the PV and the claim; the Cinder volume as the official
//! `openstack` CLI shows it: `openstack volume show` / `volume list`).
//!
//! No upstream kube-controller-manager runs against the test apiserver, so the test plays its
//! binder (annotating claims `volume.kubernetes.io/storage-provisioner`, binding them), the
//! scheduler (`volume.kubernetes.io/selected-node`) and its pvc-/pv-protection controllers
//! (removing their finalizers); the controller-manager under test does only the cloud part.
//!
//! One test, on purpose: two controller-managers watching the same apiserver would both
//! provision every claim.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use hypercloud_testenv::localcloud::{cli, openstack_json, state_dir, Serve};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::volume_fixtures::{
    bind_and_grow, claim, class, delete_claim, drop_finalizers, select_node,
    start_controller_manager, wait_pv, wait_pv_deleted, waiting_claim, zoned_node,
};
use crate::BIN;
const PLUGIN: &str = "kubernetes.io/cinder";
const CINDER_CSI: &str = "cinder.csi.openstack.org";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The Cinder volume with this ID as `openstack volume show` shows it.
fn volume_show(state: &Path, id: &str) -> Value {
    openstack_json(state, &["volume", "show", id])
}

/// The IDs `openstack volume list` lists.
fn volume_ids(state: &Path) -> Vec<String> {
    openstack_json(state, &["volume", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["ID"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cinder_volumes_provisioned_expanded_and_reclaimed() {
    let _group = hypercloud_testenv::group("controller_manager_volumes").await;
    let env = hypercloud_testenv::TestEnv::new("kcm-volumes")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let state = state_dir(&tmp);
    let serve = Serve::start(BIN, &state, &["--availability-zones", "nova,zone-b"]);
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, serve.cloud_conf()).unwrap();

    let classes: Api<StorageClass> = Api::all(env.client());
    let nodes: Api<Node> = Api::all(env.client());
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), env.namespace());
    let pp = PostParams::default();

    let immediate = env.unique_name("cinder-fast");
    let delayed = env.unique_name("cinder-wait");
    classes
        .create(
            &pp,
            &class(
                &immediate,
                PLUGIN,
                json!({"type": "lvmdriver-1", "availability": "nova"}),
                "Immediate",
                "Delete",
            ),
        )
        .await
        .unwrap();
    classes
        .create(
            &pp,
            &class(
                &delayed,
                PLUGIN,
                json!({}),
                "WaitForFirstConsumer",
                "Retain",
            ),
        )
        .await
        .unwrap();
    // A Node in zone-b, labelled as the kubelet (or the cloud-node controller) labels it.
    let node = env.unique_name("vol-node");
    zoned_node(&nodes, &node, "zone-b", "RegionOne").await;

    let _kcm = start_controller_manager(
        BIN,
        tmp.path(),
        env.control_plane().kubeconfig(),
        "local",
        &conf,
        "persistentvolume-binder,persistentvolume-expander",
        &[],
    );

    // Immediate: a volume of the request rounded up to GiB, in the class's zone.
    let t = Instant::now();
    let data = claims
        .create(&pp, &claim("data", &immediate, "1500Mi", "Block", PLUGIN))
        .await
        .unwrap();
    let pv_name = format!("pvc-{}", data.uid().unwrap());
    let pv = wait_pv(&pvs, &pv_name).await;
    eprintln!("immediate provisioning took {:?}", t.elapsed());
    let spec = pv.spec.clone().unwrap();
    let volume_id = spec.cinder.as_ref().unwrap().volume_id.clone();
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert_eq!(spec.storage_class_name.as_deref(), Some(immediate.as_str()));
    assert_eq!(spec.volume_mode.as_deref(), Some("Block"));
    let claim_ref = spec.claim_ref.clone().unwrap();
    assert_eq!(claim_ref.uid, data.uid());
    assert_eq!(claim_ref.name.as_deref(), Some("data"));
    assert_eq!(pv.annotations()["pv.kubernetes.io/provisioned-by"], PLUGIN);
    assert_eq!(pv.labels()[ZONE], "nova");
    assert_eq!(pv.labels()[REGION], "RegionOne");
    let affinity = serde_json::to_value(&spec.node_affinity).unwrap();
    assert_eq!(
        affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"],
        json!([
            {"key": REGION, "operator": "In", "values": ["RegionOne"]},
            {"key": ZONE, "operator": "In", "values": ["nova"]},
        ])
    );
    let v = volume_show(&state, &volume_id);
    assert_eq!(v["size"], 2);
    assert_eq!(v["status"], "available");
    assert_eq!(v["availability_zone"], "nova");
    assert_eq!(v["type"], "lvmdriver-1");
    assert_eq!(v["name"], format!("kubernetes-dynamic-{pv_name}"));
    assert_eq!(v["attachments"], json!([]));
    assert_eq!(
        v["properties"]["kubernetes.io/created-for/pvc/name"],
        "data"
    );
    assert_eq!(
        v["properties"]["kubernetes.io/created-for/pvc/namespace"],
        env.namespace()
    );
    assert_eq!(
        v["properties"]["kubernetes.io/created-for/pv/name"],
        pv_name
    );

    // WaitForFirstConsumer: nothing until the scheduler picks a Node, then that Node's zone.
    // Annotated as the v1.34 binder annotates it (CSI migration: the migrated driver's name).
    let later_pv = waiting_claim(&claims, &pvs, "later", &delayed, CINDER_CSI).await;
    assert_eq!(volume_ids(&state), [volume_id.as_str()]);
    let pv2 = select_node(&claims, &pvs, "later", &node, &later_pv).await;
    assert_eq!(pv2.labels()[ZONE], "zone-b");
    let spec2 = pv2.spec.clone().unwrap();
    assert_eq!(
        spec2.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain")
    );
    assert_eq!(spec2.capacity.as_ref().unwrap()["storage"].0, "1Gi");
    let retained_id = spec2.cinder.as_ref().unwrap().volume_id.clone();
    let v2 = volume_show(&state, &retained_id);
    assert_eq!(v2["availability_zone"], "zone-b");
    assert_eq!(v2["size"], 1);
    assert_eq!(
        v2["properties"]["kubernetes.io/created-for/pvc/name"],
        "later"
    );

    // Resize: bind the claim as the binder would, then grow its request.
    let t = Instant::now();
    bind_and_grow(&claims, "data", &pv_name, "2Gi", "3Gi").await;
    let grown = eventually(
        "the claim's capacity to grow",
        Duration::from_secs(60),
        || async {
            let c = claims.get("data").await.unwrap();
            let cap = c
                .status
                .as_ref()?
                .capacity
                .as_ref()?
                .get("storage")?
                .0
                .clone();
            (cap == "3Gi").then_some(c)
        },
    )
    .await;
    eprintln!("expansion took {:?}", t.elapsed());
    assert_eq!(
        grown.annotations()["volume.kubernetes.io/storage-resizer"],
        PLUGIN
    );
    let pv = pvs.get(&pv_name).await.unwrap();
    assert_eq!(pv.spec.unwrap().capacity.unwrap()["storage"].0, "3Gi");
    let v = volume_show(&state, &volume_id);
    assert_eq!(v["size"], 3);
    assert_eq!(v["status"], "available");

    // Reclaim Delete: the claim goes (its protection finalizer removed, as the pvc-protection
    // controller would), the Cinder volume goes, then the PV.
    delete_claim(&claims, "data").await;
    eventually(
        "the Cinder volume to be deleted",
        Duration::from_secs(60),
        || async { (!volume_ids(&state).contains(&volume_id)).then_some(()) },
    )
    .await;
    wait_pv_deleted(&pvs, &pv_name).await;

    // A file-system claim: the cloud volume and the PV grow; the claim waits for the kubelet
    // to grow the file system (FileSystemResizePending), its status capacity unchanged.
    bind_and_grow(&claims, "later", &later_pv, "1Gi", "2Gi").await;
    let pending = eventually(
        "the file-system claim to wait for the kubelet",
        Duration::from_secs(60),
        || async {
            let c = claims.get("later").await.unwrap();
            let conds = c.status.as_ref()?.conditions.clone()?;
            conds
                .iter()
                .any(|c| c.type_ == "FileSystemResizePending")
                .then_some(c)
        },
    )
    .await;
    assert_eq!(
        pending.status.unwrap().capacity.unwrap()["storage"].0,
        "1Gi"
    );
    let pv2 = pvs.get(&later_pv).await.unwrap();
    assert_eq!(pv2.spec.unwrap().capacity.unwrap()["storage"].0, "2Gi");
    let v2 = volume_show(&state, &retained_id);
    assert_eq!(v2["size"], 2);
    assert_eq!(v2["status"], "available");

    // Retain: the claim goes, the volume and the PV stay.
    delete_claim(&claims, "later").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let v2 = volume_show(&state, &retained_id);
    assert_eq!(
        (v2["status"].as_str(), v2["size"].as_u64()),
        (Some("available"), Some(2))
    );
    assert_eq!(volume_ids(&state), [retained_id.as_str()]);
    let kept = pvs.get(&later_pv).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());

    // Clean up what the shared apiserver would keep.
    drop(_kcm);
    let _ = pvs.delete(&later_pv, &DeleteParams::default()).await;
    drop_finalizers(&pvs, &later_pv).await;
    let out = cli(BIN, &state, &["volume", "delete", &retained_id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for c in [&immediate, &delayed] {
        let _ = classes.delete(c, &DeleteParams::default()).await;
    }
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    drop(serve);
    env.cleanup().await.unwrap();
}
