//! The in-tree `kubernetes.io/aws-ebs` volume path of the `controller-manager` personality with
//! the `aws` provider: the real binary, the real apiserver (pkg/testenv) and moto, checked from
//! both sides (the PV, the claim and the Node; the EBS volume as `aws ec2 describe-volumes`
//! shows it). As in `controller_manager_volumes`, the test plays the binder and the
//! pvc-/pv-protection controllers, and no scheduler or kubelet runs: the pod is bound by hand
//! and nothing has the volume mounted.
#![cfg(all(feature = "aws", feature = "openstack"))]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::aws::Cloud;
use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

use crate::volume_fixtures::{attached, pod};
use crate::BIN;

const PLUGIN: &str = "kubernetes.io/aws-ebs";
const ZONE_B: &str = "us-east-1b";

fn start_kcm(dir: &Path, kubeconfig: &Path, conf: &Path, controllers: &str) -> Proc {
    let mut cmd = personality(BIN, "controller-manager");
    cmd.arg("--cloud-provider=aws")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--leader-elect=false")
        .arg("--secure-port=0")
        .arg(format!("--controllers={controllers}"))
        .arg("--v=2")
        // Moto accepts any signature.
        .env("AWS_ACCESS_KEY_ID", "AKIDHYPERCLOUDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent");
    Proc::spawn_with("controller-manager", cmd, dir.join("kcm.log"), Stdout::Null)
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
            &serde_json::from_value(json!({
                "metadata": {"name": class}, "provisioner": PLUGIN,
                "parameters": {"type": "gp2", "zone": ZONE_B, "fsType": "ext4"},
                "reclaimPolicy": "Delete", "allowVolumeExpansion": true,
                "volumeBindingMode": "Immediate",
            }))
            .unwrap(),
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
        .create(
            &pp,
            &serde_json::from_value(json!({
                "metadata": {"name": "data", "annotations": {
                    "volume.kubernetes.io/storage-provisioner": PLUGIN}},
                "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1500Mi"}}},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let pv_name = format!("pvc-{}", data.uid().unwrap());
    let pv = eventually(
        &format!("PV {pv_name}"),
        Duration::from_secs(90),
        || async { pvs.get_opt(&pv_name).await.unwrap() },
    )
    .await;
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
    claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"volumeName": pv_name}})),
        )
        .await
        .unwrap();
    claims
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Bound",
                "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}}})),
        )
        .await
        .unwrap();
    claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"resources": {"requests": {"storage": "3Gi"}}}})),
        )
        .await
        .unwrap();
    eventually("the volume to grow", Duration::from_secs(60), || async {
        (volume(&cloud, &id).unwrap()["Size"] == 3).then_some(())
    })
    .await;

    // Reclaim Delete: the claim goes, the volume goes, then the PV.
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    let unfinalize = json!({"metadata": {"finalizers": null}});
    let _ = claims
        .patch("data", &PatchParams::default(), &Patch::Merge(&unfinalize))
        .await;
    eventually(
        "the volume to be deleted",
        Duration::from_secs(60),
        || async { volume(&cloud, &id).is_none().then_some(()) },
    )
    .await;
    eventually("the PV to be deleted", Duration::from_secs(30), || async {
        let pv = pvs.get_opt(&pv_name).await.unwrap();
        pv.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    let _ = pvs
        .patch(
            &pv_name,
            &PatchParams::default(),
            &Patch::Merge(&unfinalize),
        )
        .await;

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
    let ns = env.namespace();
    let nodes: Api<Node> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    let _ = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&pp, &sa)
        .await;
    // The Node is named by its instance's private DNS name, as on AWS; left over from an
    // earlier run on the same apiserver, it goes first.
    let _ = nodes.delete(&node_name, &DeleteParams::default()).await;
    let n: Node = serde_json::from_value(json!({"metadata": {"name": node_name},
        "spec": {"providerID": format!("aws:///{zone}/{instance}")}}))
    .unwrap();
    nodes.create(&pp, &n).await.unwrap();
    let pv_name = env.unique_name("aws-pv");
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": pv_name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain",
                 "awsElasticBlockStore": {"volumeID": volume_id, "fsType": "ext4"},
                 "claimRef": {"namespace": ns, "name": "data"}},
    }))
    .unwrap();
    pvs.create(&pp, &pv).await.unwrap();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": pv_name, "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    claims.create(&pp, &claim).await.unwrap();

    let kcm = start_kcm(
        tmp.path(),
        env.control_plane().kubeconfig(),
        &conf,
        "attachdetach",
    );

    pods.create(&pp, &pod("web", &node_name, "data"))
        .await
        .unwrap();
    eventually(
        "the volume in the Node's volumesAttached",
        Duration::from_secs(60),
        || async { (!attached(&nodes, &node_name).await.is_empty()).then_some(()) },
    )
    .await;
    // Upstream's first device name, as EC2 reports it.
    assert_eq!(
        attached(&nodes, &node_name).await,
        [(format!("{PLUGIN}/{volume_id}"), "/dev/xvdba".to_owned())]
    );
    let v = volume(&cloud, &id).unwrap();
    assert_eq!(v["State"], "in-use", "{v}");
    assert_eq!(v["Attachments"][0]["InstanceId"], instance.as_str(), "{v}");
    assert_eq!(v["Attachments"][0]["Device"], "/dev/xvdba", "{v}");
    assert_eq!(v["Attachments"][0]["State"], "attached", "{v}");

    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(
        "the volume to leave the Node",
        Duration::from_secs(60),
        || async { attached(&nodes, &node_name).await.is_empty().then_some(()) },
    )
    .await;
    // The controller takes the volume off the Node's list first, then detaches it.
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
