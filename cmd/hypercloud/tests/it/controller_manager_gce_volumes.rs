//! The in-tree volume path of the `controller-manager` personality with the `gce` provider: the
//! real binary, the real apiserver (pkg/testenv) and a real `hypercloud local-cloud serve`
//! speaking Compute Engine, checked from both sides (the PV and the claim; the persistent disk
//! as `disks.get` shows it). As in `controller_manager_volumes`, the test plays the binder, the
//! scheduler (`volume.kubernetes.io/selected-node`) and the pvc-/pv-protection controllers; it
//! takes that module's group, so that only one controller-manager provisions at a time. The
//! cloud side is read with Google's own client (google-cloud-compute, through
//! `hack/lib/gce-disk.py`).
#![cfg(feature = "gce")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hypercloud_testenv::localcloud::{gce_disk, http, state_dir, Serve};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::gce_provider::gce_conf;
use crate::proxy::Proxy;
use crate::volume_fixtures::{
    bind_and_grow, claim, class as class_of, delete_claim, drop_finalizers, select_node,
    start_controller_manager, wait_pv, wait_pv_deleted, waiting_claim, zoned_node,
};
use crate::BIN;
const PLUGIN: &str = "kubernetes.io/gce-pd";
const ZONE_B: &str = "us-central1-b";

/// Whether `disks.get` over plain HTTP finds the disk: what the waits poll, cheap enough not to
/// stretch the windows in which the controller's requests are counted (the checks after them
/// use Google's client).
fn disk_exists(serve: &Serve, zone: &str, name: &str) -> bool {
    let url = format!(
        "{}/compute/v1/projects/demo/zones/{zone}/disks/{name}",
        serve.api_url
    );
    http("GET", &url, &[], None).0 == 200
}

/// A disk as Google's client shows it (`disks.get`); `None` when it is not found.
fn disk(serve: &Serve, zone: &str, name: &str) -> Option<Value> {
    gce_disk(&serve.api_url, "demo", zone, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_persistent_disks_provisioned_expanded_and_reclaimed_or_retained() {
    let _group = hypercloud_testenv::group("controller_manager_volumes").await;
    let env = hypercloud_testenv::TestEnv::new("kcm-gce-volumes")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let serve = Serve::start(
        BIN,
        &state_dir(&tmp),
        &[
            "--availability-zones",
            "us-central1-a,us-central1-b",
            "--region",
            "us-central1",
        ],
    );
    // The provider speaks through the proxy (proxy.rs) only to count its requests.
    let proxy = Proxy::start(&serve.api_url, &[]).await;
    let conf = gce_conf(tmp.path(), &proxy.url, &serve.metadata_url, true, "");

    let classes: Api<StorageClass> = Api::all(env.client());
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), env.namespace());
    let nodes: Api<Node> = Api::all(env.client());
    let pp = PostParams::default();
    let class = env.unique_name("pd-ssd");
    classes
        .create(
            &pp,
            &class_of(
                &class,
                PLUGIN,
                json!({"type": "pd-ssd", "zones": ZONE_B, "replication-type": "none"}),
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
        "gce",
        &conf,
        "persistentvolume-binder,persistentvolume-expander",
        &[],
    );

    // A disk of the request rounded up to GiB, in the class's zone, and its PV.
    let before_provision = proxy.requests();
    let data = claims
        .create(&pp, &claim("data", &class, "1500Mi", "Block", PLUGIN))
        .await
        .unwrap();
    let pv_name = format!("pvc-{}", data.uid().unwrap());
    let pv = wait_pv(&pvs, &pv_name).await;
    let provision_requests = proxy.requests() - before_provision;
    let spec = pv.spec.clone().unwrap();
    let pd = spec.gce_persistent_disk.clone().unwrap();
    assert_eq!(pd.pd_name, format!("kubernetes-dynamic-{pv_name}"));
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(pv.labels()["topology.kubernetes.io/zone"], ZONE_B);
    assert_eq!(pv.labels()["topology.kubernetes.io/region"], "us-central1");
    assert_eq!(pv.annotations()["pv.kubernetes.io/provisioned-by"], PLUGIN);
    let d = disk(&serve, ZONE_B, &pd.pd_name).expect("the disk in the class's zone");
    assert_eq!(d["size_gb"], "2", "{d}");
    assert!(
        d["type"].as_str().unwrap().ends_with("/diskTypes/pd-ssd"),
        "the class's type: {d}"
    );
    assert!(
        d["description"].as_str().unwrap().contains("\"data\""),
        "{d}"
    );

    // Resize: bind the claim as the binder would, then grow its request.
    bind_and_grow(&claims, "data", &pv_name, "2Gi", "3Gi").await;
    eventually("the disk to grow", Duration::from_secs(60), || async {
        (disk(&serve, ZONE_B, &pd.pd_name).unwrap()["size_gb"] == "3").then_some(())
    })
    .await;

    // Reclaim Delete: the claim goes, the disk goes, then the PV.
    let before_delete = proxy.requests();
    delete_claim(&claims, "data").await;
    eventually(
        "the disk to be deleted",
        Duration::from_secs(60),
        || async { (!disk_exists(&serve, ZONE_B, &pd.pd_name)).then_some(()) },
    )
    .await;
    let delete_requests = proxy.requests() - before_delete;
    assert!(disk(&serve, ZONE_B, &pd.pd_name).is_none());
    // What a provision and a delete cost in Compute Engine requests (the closing note of issue
    // 31 quotes them): a budget, so that a change that adds calls is seen. Measured 3 and 3
    // (2026-11-27).
    eprintln!("gce cloud requests: provision {provision_requests}, delete {delete_requests}");
    assert!(
        provision_requests <= 4,
        "provisioning took {provision_requests} requests"
    );
    assert!(
        delete_requests <= 4,
        "deleting took {delete_requests} requests"
    );
    wait_pv_deleted(&pvs, &pv_name).await;

    // WaitForFirstConsumer and reclaim Retain: nothing until the scheduler picks a Node, then
    // a disk in that Node's zone (the class names none); the claim goes, the disk and PV stay.
    let delayed = env.unique_name("pd-later");
    classes
        .create(
            &pp,
            &class_of(
                &delayed,
                PLUGIN,
                json!({}),
                "WaitForFirstConsumer",
                "Retain",
            ),
        )
        .await
        .unwrap();
    let node = env.unique_name("pd-node");
    zoned_node(&nodes, &node, ZONE_B, "us-central1").await;
    let later_pv = waiting_claim(&claims, &pvs, "later", &delayed, PLUGIN).await;
    let later_disk = format!("kubernetes-dynamic-{later_pv}");
    for zone in ["us-central1-a", ZONE_B] {
        assert!(disk(&serve, zone, &later_disk).is_none(), "{zone}");
    }
    let kept = select_node(&claims, &pvs, "later", &node, &later_pv).await;
    assert_eq!(kept.labels()["topology.kubernetes.io/zone"], ZONE_B);
    assert_eq!(
        kept.spec
            .as_ref()
            .unwrap()
            .persistent_volume_reclaim_policy
            .as_deref(),
        Some("Retain")
    );
    let d = disk(&serve, ZONE_B, &later_disk).expect("the disk in the Node's zone");
    assert_eq!(d["size_gb"], "1", "{d}");
    assert!(disk(&serve, "us-central1-a", &later_disk).is_none());
    delete_claim(&claims, "later").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        disk(&serve, ZONE_B, &later_disk).is_some(),
        "the Retain disk is gone"
    );
    let kept = pvs.get(&later_pv).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());

    drop(_kcm);
    let _ = pvs.delete(&later_pv, &DeleteParams::default()).await;
    drop_finalizers(&pvs, &later_pv).await;
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    let _ = classes.delete(&delayed, &DeleteParams::default()).await;
    let _ = classes.delete(&class, &DeleteParams::default()).await;
    drop(serve);
    env.cleanup().await.unwrap();
}
