//! The in-tree `kubernetes.io/aws-ebs` volume path of the `controller-manager` personality with
//! the `aws` provider: the real binary, the real apiserver (pkg/testenv) and moto, checked from
//! both sides (the PV, the claim and the Node; the EBS volume as `aws ec2 describe-volumes`
//! shows it). As in `controller_manager_volumes`, the test plays the binder and the
//! pvc-/pv-protection controllers, and no scheduler or kubelet runs: the pod is bound by hand
//! and nothing has the volume mounted.
#![cfg(feature = "aws")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::aws::Cloud;
use hypercloud_testenv::process::Proc;
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::volume_fixtures::{
    attach_fixture, bind_and_grow, claim, class as class_of, delete_claim,
    delete_pod_until_detached, run_pod_until_attached, start_controller_manager, wait_pv,
    wait_pv_deleted, MOTO_ENV,
};
use crate::BIN;

const PLUGIN: &str = "kubernetes.io/aws-ebs";
const ZONE_B: &str = "us-east-1b";

fn start_kcm(dir: &Path, kubeconfig: &Path, conf: &Path, controllers: &str) -> Proc {
    start_controller_manager(BIN, dir, kubeconfig, "aws", conf, controllers, MOTO_ENV)
}

/// The volume as `aws ec2 describe-volumes` shows it; `None` when EC2 has no such volume.
fn volume(cloud: &Cloud, id: &str) -> Option<Value> {
    let all = cloud.moto.cli(&["ec2", "describe-volumes"]);
    all["Volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["VolumeId"] == id)
        .cloned()
}

fn tag<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v["Tags"]
        .as_array()?
        .iter()
        .find(|t| t["Key"] == key)?
        .get("Value")?
        .as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ebs_volumes_provisioned_in_the_class_zone_expanded_and_reclaimed() {
    let _group = hypercloud_testenv::group("controller_manager_volumes").await;
    let env = hypercloud_testenv::TestEnv::new("kcm-aws-volumes")
        .await
        .expect("testenv");
    let cloud = Cloud::start(1, 0);
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, cloud.conf("")).unwrap();

    let classes: Api<StorageClass> = Api::all(env.client());
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), env.namespace());
    let pp = PostParams::default();
    let class = env.unique_name("ebs-gp2");
    classes
        .create(
            &pp,
            &class_of(
                &class,
                PLUGIN,
                json!({"type": "gp2", "zone": ZONE_B, "fsType": "ext4"}),
                "Immediate",
                "Delete",
            ),
        )
        .await
        .unwrap();
    let _kcm = start_kcm(
        tmp.path(),
        env.control_plane().kubeconfig(),
        &conf,
        "persistentvolume-binder,persistentvolume-expander",
    );

    // A volume of the request rounded up to GiB, in the class's zone, and its PV.
    let data = claims
        .create(&pp, &claim("data", &class, "1500Mi", "Filesystem", PLUGIN))
        .await
        .unwrap();
    let pv_name = format!("pvc-{}", data.uid().unwrap());
    let pv = wait_pv(&pvs, &pv_name).await;
    let spec = pv.spec.clone().unwrap();
    let ebs = spec.aws_elastic_block_store.clone().unwrap();
    let prefix = format!("aws://{ZONE_B}/");
    assert!(ebs.volume_id.starts_with(&prefix), "{ebs:?}");
    assert_eq!(ebs.fs_type.as_deref(), Some("ext4"));
    let id = ebs.volume_id[prefix.len()..].to_owned();
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(pv.labels()["topology.kubernetes.io/zone"], ZONE_B);
    assert_eq!(pv.labels()["topology.kubernetes.io/region"], "us-east-1");
    assert_eq!(pv.annotations()["pv.kubernetes.io/provisioned-by"], PLUGIN);
    // What EC2 says.
    let v = volume(&cloud, &id).expect("the volume in EC2");
    assert_eq!(v["AvailabilityZone"], ZONE_B, "{v}");
    assert_eq!(v["Size"], 2, "{v}");
    assert_eq!(v["VolumeType"], "gp2", "{v}");
    assert_eq!(v["State"], "available", "{v}");
    assert_eq!(
        tag(&v, "Name"),
        Some(format!("kubernetes-dynamic-{pv_name}").as_str()),
        "{v}"
    );
    assert_eq!(tag(&v, "kubernetes.io/cluster/demo"), Some("owned"), "{v}");
    assert_eq!(
        tag(&v, "kubernetes.io/created-for/pvc/name"),
        Some("data"),
        "{v}"
    );
    assert_eq!(
        tag(&v, "kubernetes.io/created-for/pv/name"),
        Some(pv_name.as_str())
    );

    // Resize: bind the claim as the binder would, then grow its request.
    bind_and_grow(&claims, "data", &pv_name, "2Gi", "3Gi").await;
    eventually("the volume to grow", Duration::from_secs(60), || async {
        (volume(&cloud, &id).unwrap()["Size"] == 3).then_some(())
    })
    .await;

    // Reclaim Delete: the claim goes, the volume goes, then the PV.
    delete_claim(&claims, "data").await;
    eventually(
        "the volume to be deleted",
        Duration::from_secs(60),
        || async { volume(&cloud, &id).is_none().then_some(()) },
    )
    .await;
    wait_pv_deleted(&pvs, &pv_name).await;

    drop(_kcm);
    let _ = classes.delete(&class, &DeleteParams::default()).await;
    env.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ebs_volumes_attached_to_the_pods_node_and_detached_after() {
    let _group = hypercloud_testenv::group("controller_manager_attach_detach").await;
    let env = hypercloud_testenv::TestEnv::new("kcm-aws-attach")
        .await
        .expect("testenv");
    let cloud = Cloud::start(1, 0);
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, cloud.conf("")).unwrap();
    let instance = cloud.field(0, "InstanceId").to_owned();
    let node_name = cloud.field(0, "PrivateDnsName").to_owned();
    let zone = cloud.instances[0]["Placement"]["AvailabilityZone"]
        .as_str()
        .unwrap()
        .to_owned();
    let created = cloud.moto.cli(&[
        "ec2",
        "create-volume",
        "--availability-zone",
        &zone,
        "--size",
        "1",
    ]);
    let id = created["VolumeId"].as_str().unwrap().to_owned();
    let volume_id = format!("aws://{zone}/{id}");

    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), env.namespace());
    // The Node is named by its instance's private DNS name, as on AWS.
    let pv_name = env.unique_name("aws-pv");
    attach_fixture(
        &client,
        env.namespace(),
        &[(&node_name, format!("aws:///{zone}/{instance}"))],
        &pv_name,
        json!({"awsElasticBlockStore": {"volumeID": volume_id, "fsType": "ext4"}}),
    )
    .await;

    let kcm = start_kcm(
        tmp.path(),
        env.control_plane().kubeconfig(),
        &conf,
        "attachdetach",
    );

    // Upstream's first device name, as EC2 reports it.
    assert_eq!(
        run_pod_until_attached(&pods, &nodes, "web", &node_name).await,
        [(format!("{PLUGIN}/{volume_id}"), "/dev/xvdba".to_owned())]
    );
    let v = volume(&cloud, &id).unwrap();
    assert_eq!(v["State"], "in-use", "{v}");
    assert_eq!(v["Attachments"][0]["InstanceId"], instance.as_str(), "{v}");
    assert_eq!(v["Attachments"][0]["Device"], "/dev/xvdba", "{v}");
    assert_eq!(v["Attachments"][0]["State"], "attached", "{v}");

    delete_pod_until_detached(&pods, &nodes, "web", &node_name).await;
    eventually(
        "EC2 to show the volume detached",
        Duration::from_secs(60),
        || async { (volume(&cloud, &id).unwrap()["State"] == "available").then_some(()) },
    )
    .await;
    let v = volume(&cloud, &id).unwrap();
    assert!(
        v["Attachments"].as_array().is_none_or(|a| a.is_empty()),
        "{v}"
    );

    drop(kcm);
    let _ = nodes.delete(&node_name, &DeleteParams::default()).await;
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
    env.cleanup().await.unwrap();
}
