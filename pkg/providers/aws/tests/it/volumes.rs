//! EBS volumes of the in-tree `kubernetes.io/aws-ebs` plugin against moto: provisioning
//! (zone, type, IOPS, encryption, tags), growth, deletion, attaching with upstream's device
//! names and detaching, each checked with the `aws` CLI; and the EC2 requests one volume
//! costs.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeMap;

use hypercloud_cloudprovider::{Chain, Interface, VolumeRequest};
use serde_json::Value;
use support::{s, World};

/// The volume as `aws ec2 describe-volumes` shows it; `None` once it is gone.
fn describe(w: &World, vol: &str) -> Option<Value> {
    let all = w.moto.cli(&["ec2", "describe-volumes"]);
    all["Volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| s(v, "VolumeId") == vol)
        .cloned()
}

fn tags(v: &Value) -> BTreeMap<String, String> {
    v["Tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| (s(t, "Key").to_owned(), s(t, "Value").to_owned()))
        .collect()
}

/// `aws://<zone>/vol-...` → `vol-...`.
fn ec2_id(id: &str) -> String {
    id.rsplit('/').next().unwrap().to_owned()
}

fn request(name: &str, zone: &str, size: u64, options: &[(&str, &str)]) -> VolumeRequest {
    let options: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    VolumeRequest {
        name: name.into(),
        size_gib: size,
        zone: zone.into(),
        volume_type: options.get("type").cloned().unwrap_or_default(),
        tags: BTreeMap::from([(
            "kubernetes.io/created-for/pvc/name".to_owned(),
            "claim-1".to_owned(),
        )]),
        options,
        ..Default::default()
    }
}

#[tokio::test]
async fn ebs_volumes_created_in_the_class_zone_grown_and_deleted() {
    let _group = hypercloud_testenv::group("volumes").await;
    let w = World::start(1, 0);
    let aws = support::provider(&w.conf(""));
    let volumes = aws.volume_provisioner().expect("volume provisioner");
    assert_eq!(volumes.plugin_name(), "kubernetes.io/aws-ebs");

    let class = BTreeMap::from([
        ("type".to_owned(), "io1".to_owned()),
        ("iopsPerGB".to_owned(), "10".to_owned()),
        ("zone".to_owned(), "us-east-1b".to_owned()),
        ("encrypted".to_owned(), "true".to_owned()),
        ("fsType".to_owned(), "xfs".to_owned()),
    ]);
    let p = volumes.class_parameters(&class).unwrap();
    assert_eq!(p.zone, "us-east-1b");
    assert_eq!(p.volume_type, "io1");
    assert_eq!(p.fs_type.as_deref(), Some("xfs"));
    let refused = volumes
        .class_parameters(&BTreeMap::from([("replication-type".into(), "x".into())]))
        .unwrap_err();
    assert!(refused.contains("\"replication-type\""), "{refused}");

    let opts: Vec<(&str, &str)> = class
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let vol = volumes
        .create_volume(&request("demo-dynamic-pvc-1", "us-east-1b", 4, &opts))
        .await
        .unwrap();
    assert!(vol.id.starts_with("aws://us-east-1b/vol-"), "{vol:?}");
    assert_eq!(vol.size_gib, 4);
    assert_eq!(
        vol.labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("us-east-1b")
    );
    assert_eq!(
        vol.labels
            .get("topology.kubernetes.io/region")
            .map(String::as_str),
        Some("us-east-1")
    );
    let id = ec2_id(&vol.id);
    // What EC2 says.
    let v = describe(&w, &id).expect("volume in EC2");
    assert_eq!(s(&v, "AvailabilityZone"), "us-east-1b", "{v}");
    assert_eq!(v["Size"].as_u64(), Some(4), "{v}");
    assert_eq!(s(&v, "VolumeType"), "io1", "{v}");
    // 4 GiB × 10 IOPS is below upstream's floor of 100.
    assert_eq!(v["Iops"].as_u64(), Some(100), "{v}");
    assert_eq!(v["Encrypted"].as_bool(), Some(true), "{v}");
    assert_eq!(s(&v, "State"), "available", "{v}");
    let t = tags(&v);
    assert_eq!(t["Name"], "demo-dynamic-pvc-1", "{t:?}");
    assert_eq!(t["kubernetes.io/cluster/demo"], "owned", "{t:?}");
    assert_eq!(t["kubernetes.io/created-for/pvc/name"], "claim-1", "{t:?}");
    assert!(!t.contains_key("KubernetesCluster"), "{t:?}");

    // Growth.
    assert_eq!(volumes.expand_volume(&vol.id, 7).await.unwrap(), 7);
    let v = describe(&w, &id).unwrap();
    assert_eq!(v["Size"].as_u64(), Some(7), "{v}");
    // Already that large: left alone.
    assert_eq!(volumes.expand_volume(&vol.id, 5).await.unwrap(), 7);

    // A default (gp2) volume in no zone goes to [Global] Zone.
    let plain = volumes
        .create_volume(&request("demo-dynamic-pvc-2", "", 1, &[]))
        .await
        .unwrap();
    assert!(plain.id.starts_with("aws://us-east-1a/vol-"), "{plain:?}");
    let v = describe(&w, &ec2_id(&plain.id)).unwrap();
    assert_eq!(s(&v, "VolumeType"), "gp2", "{v}");
    // A type the plugin does not create is refused by name before EC2 is asked.
    let e = volumes
        .create_volume(&request("x", "", 1, &[("type", "gp9")]))
        .await
        .unwrap_err();
    let e = Chain(&e).to_string();
    assert!(e.contains("invalid AWS VolumeType \"gp9\""), "{e}");

    volumes.delete_volume(&vol.id).await.unwrap();
    volumes.delete_volume(&plain.id).await.unwrap();
    assert!(describe(&w, &id).is_none());
    assert!(describe(&w, &ec2_id(&plain.id)).is_none());
    // Gone already: fine.
    volumes.delete_volume(&vol.id).await.unwrap();
}

#[tokio::test]
async fn ebs_volumes_attached_at_upstream_device_names_and_detached() {
    let _group = hypercloud_testenv::group("volumes").await;
    let w = World::start(2, 0);
    let aws = support::provider(&w.conf(""));
    let volumes = aws.volume_provisioner().unwrap();
    let attacher = aws.volume_attacher().expect("volume attacher");
    assert_eq!(attacher.plugin_name(), "kubernetes.io/aws-ebs");
    let i0 = w.field(0, "InstanceId").to_owned();
    let i1 = w.field(1, "InstanceId").to_owned();

    let counts = aws.request_counts();
    let start = counts.ec2();
    let vol = volumes
        .create_volume(&request("demo-dynamic-pvc-a", "us-east-1a", 1, &[]))
        .await
        .unwrap();
    let provision = counts.ec2() - start;
    let id = ec2_id(&vol.id);
    let other = volumes
        .create_volume(&request("demo-dynamic-pvc-b", "us-east-1a", 1, &[]))
        .await
        .unwrap();

    let before = counts.ec2();
    attacher.attach_disk(&i0, &vol.id).await.unwrap();
    let attach = counts.ec2() - before;
    let v = describe(&w, &id).unwrap();
    let a = &v["Attachments"][0];
    assert_eq!(s(a, "InstanceId"), i0, "{v}");
    assert_eq!(s(a, "Device"), "/dev/xvdba", "{v}");
    assert_eq!(s(a, "State"), "attached", "{v}");
    assert_eq!(s(&v, "State"), "in-use", "{v}");
    assert_eq!(
        attacher
            .get_attachment_disk_path(&i0, &vol.id)
            .await
            .unwrap(),
        "/dev/xvdba"
    );
    assert!(attacher.disk_is_attached(&i0, &vol.id).await.unwrap());
    assert!(!attacher.disk_is_attached(&i1, &vol.id).await.unwrap());
    let both = attacher
        .disks_are_attached(&i0, &[vol.id.clone(), other.id.clone()])
        .await
        .unwrap();
    assert!(both[&vol.id], "{both:?}");
    assert!(!both[&other.id], "{both:?}");
    // Attached already: nothing to do.
    attacher.attach_disk(&i0, &vol.id).await.unwrap();
    // Attached to another instance: refused naming it.
    let e = attacher.attach_disk(&i1, &vol.id).await.unwrap_err();
    let e = Chain(&e).to_string();
    assert!(e.contains(&i0), "{e}");
    // The next volume on the instance gets the next name.
    attacher.attach_disk(&i0, &other.id).await.unwrap();
    let v = describe(&w, &ec2_id(&other.id)).unwrap();
    assert_eq!(s(&v["Attachments"][0], "Device"), "/dev/xvdbb", "{v}");
    // An attached volume is not deleted: the error names where it is.
    let e = volumes.delete_volume(&other.id).await.unwrap_err();
    let e = Chain(&e).to_string();
    assert!(e.contains(&i0), "{e}");
    assert!(describe(&w, &ec2_id(&other.id)).is_some());

    let before = counts.ec2();
    attacher.detach_disk(&i0, &vol.id).await.unwrap();
    let detach = counts.ec2() - before;
    let v = describe(&w, &id).unwrap();
    assert!(
        v["Attachments"].as_array().is_none_or(|a| a.is_empty()),
        "{v}"
    );
    assert_eq!(s(&v, "State"), "available", "{v}");
    assert!(!attacher.disk_is_attached(&i0, &vol.id).await.unwrap());
    // Not attached: nothing to do.
    attacher.detach_disk(&i0, &vol.id).await.unwrap();
    // Now free, it may go to the other instance (whose names are its own).
    attacher.attach_disk(&i1, &vol.id).await.unwrap();
    let v = describe(&w, &id).unwrap();
    assert_eq!(s(&v["Attachments"][0], "InstanceId"), i1, "{v}");
    assert_eq!(s(&v["Attachments"][0], "Device"), "/dev/xvdba", "{v}");
    attacher.detach_disk(&i1, &vol.id).await.unwrap();
    attacher.detach_disk(&i0, &other.id).await.unwrap();
    // Names used on an instance go to the back of its queue (upstream's deviceAllocator).
    attacher.attach_disk(&i0, &other.id).await.unwrap();
    let v = describe(&w, &ec2_id(&other.id)).unwrap();
    assert_eq!(s(&v["Attachments"][0], "Device"), "/dev/xvdbc", "{v}");
    attacher.detach_disk(&i0, &other.id).await.unwrap();

    let before = counts.ec2();
    volumes.delete_volume(&vol.id).await.unwrap();
    let delete = counts.ec2() - before;
    volumes.delete_volume(&other.id).await.unwrap();
    assert!(describe(&w, &id).is_none());
    eprintln!(
        "EC2 requests for one volume: provision {provision}, attach {attach}, detach {detach}, delete {delete}"
    );
    // CreateVolume + DescribeVolumes (available); DescribeInstances (devices) +
    // DescribeVolumes (available) + AttachVolume + DescribeVolumes (attached); DescribeVolumes
    // + DetachVolume + DescribeVolumes (detached); DescribeVolumes + DeleteVolume.
    assert_eq!((provision, attach, detach, delete), (2, 4, 3, 2));
}
