//! The `kubernetes.io/gce-pd` volume capability against the local cloud: a disk is created
//! (type, size, zone, tags), reused when it exists, attached to its instance read-write with
//! the disk's name as device name, refused to a second instance, grown, refused deletion while
//! attached, detached and deleted; each step checked from the cloud side over GCE's API.

use std::collections::BTreeMap;

use hypercloud_cloudprovider::{Error as CloudError, Interface, VolumeRequest};
use reqwest::Method;

use crate::support::{Cloud, ZONE_A, ZONE_B};

fn request(name: &str, zone: &str, size: u64, disk_type: &str) -> VolumeRequest {
    VolumeRequest {
        name: name.into(),
        size_gib: size,
        zone: zone.into(),
        volume_type: disk_type.into(),
        pool: String::new(),
        tags: BTreeMap::from([(
            "kubernetes.io/created-for/pvc/name".to_owned(),
            "claim-1".to_owned(),
        )]),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_disk_is_created_attached_grown_detached_and_deleted() {
    let cloud = Cloud::start().await;
    cloud.instance(ZONE_B, "node-1").await;
    cloud.instance(ZONE_B, "node-2").await;
    let gce = cloud.provider().await;
    let prov = gce.volume_provisioner().unwrap();
    let att = gce.volume_attacher().unwrap();
    assert_eq!(prov.plugin_name(), "kubernetes.io/gce-pd");

    // Create: in the asked zone, labelled with it and its region.
    let v = prov
        .create_volume(&request("pvc-1", ZONE_B, 3, "pd-ssd"))
        .await
        .unwrap();
    assert_eq!(v.id, "pvc-1");
    assert_eq!(v.size_gib, 3);
    assert_eq!(
        v.labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some(ZONE_B)
    );
    assert_eq!(
        v.labels
            .get("topology.kubernetes.io/region")
            .map(String::as_str),
        Some("us-central1")
    );
    let (status, disk) = cloud.get(&format!("zones/{ZONE_B}/disks/pvc-1")).await;
    assert_eq!(status, 200, "{disk}");
    assert_eq!(disk["sizeGb"], "3");
    assert!(
        disk["description"]
            .as_str()
            .unwrap()
            .contains("created-for/pvc/name"),
        "{disk}"
    );
    // The same name again is reused, as upstream; a zone outside the region is refused.
    let again = prov
        .create_volume(&request("pvc-1", ZONE_B, 3, ""))
        .await
        .unwrap();
    assert_eq!(again, v);
    let e = prov
        .create_volume(&request("pvc-x", "europe-west1-b", 1, ""))
        .await
        .unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("not one of the managed zones"),
        "{e}"
    );
    let (status, _) = cloud.get(&format!("zones/{ZONE_A}/disks/pvc-x")).await;
    assert_eq!(status, 404);

    // Attach: read-write, device name = disk name; again is a no-op.
    att.attach_disk("node-1", "pvc-1").await.unwrap();
    assert_eq!(
        cloud.devices(ZONE_B, "node-1").await,
        [("pvc-1".to_owned(), "READ_WRITE".to_owned())]
    );
    att.attach_disk("node-1", "pvc-1").await.unwrap();
    assert!(att.disk_is_attached("node-1", "pvc-1").await.unwrap());
    assert!(!att.disk_is_attached("node-2", "pvc-1").await.unwrap());
    let both = att
        .disks_are_attached("node-1", &["pvc-1".into(), "nope".into()])
        .await
        .unwrap();
    assert_eq!(
        both,
        BTreeMap::from([("nope".into(), false), ("pvc-1".into(), true)])
    );
    assert_eq!(
        att.get_attachment_disk_path("node-1", "pvc-1")
            .await
            .unwrap(),
        "/dev/disk/by-id/google-pvc-1"
    );
    assert!(att
        .get_attachment_disk_path("node-2", "pvc-1")
        .await
        .is_err());

    // A second instance is refused, naming the first; the cloud is unchanged.
    let e = att.attach_disk("node-2", "pvc-1").await.unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("attached to a different instance (node-1)"),
        "{e}"
    );
    assert!(cloud.devices(ZONE_B, "node-2").await.is_empty());
    // Missing instance or disk.
    assert!(matches!(
        att.attach_disk("node-9", "pvc-1").await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        att.attach_disk("node-2", "nope").await,
        Err(CloudError::DiskNotFound)
    ));

    // Deleting an attached disk is refused as in use; it stays.
    let e = prov.delete_volume("pvc-1").await.unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("the disk is in use"),
        "{e}"
    );
    let (status, _) = cloud.get(&format!("zones/{ZONE_B}/disks/pvc-1")).await;
    assert_eq!(status, 200);

    // Grow while attached; a smaller size is left alone.
    assert_eq!(prov.expand_volume("pvc-1", 5).await.unwrap(), 5);
    let (_, disk) = cloud.get(&format!("zones/{ZONE_B}/disks/pvc-1")).await;
    assert_eq!(disk["sizeGb"], "5");
    assert_eq!(prov.expand_volume("pvc-1", 4).await.unwrap(), 5);
    assert!(matches!(
        prov.expand_volume("nope", 4).await,
        Err(CloudError::DiskNotFound)
    ));

    // Detach, twice; a missing instance has nothing to detach.
    att.detach_disk("node-1", "pvc-1").await.unwrap();
    assert!(cloud.devices(ZONE_B, "node-1").await.is_empty());
    att.detach_disk("node-1", "pvc-1").await.unwrap();
    att.detach_disk("node-9", "pvc-1").await.unwrap();
    assert!(!att.disk_is_attached("node-1", "pvc-1").await.unwrap());

    // Delete, twice.
    prov.delete_volume("pvc-1").await.unwrap();
    let (status, _) = cloud.get(&format!("zones/{ZONE_B}/disks/pvc-1")).await;
    assert_eq!(status, 404);
    prov.delete_volume("pvc-1").await.unwrap();
}

#[tokio::test]
async fn the_default_zone_is_the_local_one_and_bad_types_are_refused() {
    let cloud = Cloud::start().await;
    let gce = cloud.provider().await;
    let prov = gce.volume_provisioner().unwrap();
    let v = prov
        .create_volume(&request("plain", "", 1, ""))
        .await
        .unwrap();
    assert_eq!(
        v.labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some(ZONE_A)
    );
    let e = prov
        .create_volume(&request("fancy", "", 1, "pd-extreme"))
        .await
        .unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("invalid GCE disk type"),
        "{e}"
    );
    let (status, _) = cloud.get(&format!("zones/{ZONE_A}/disks/fancy")).await;
    assert_eq!(status, 404);
    let (status, disk) = cloud.get(&format!("zones/{ZONE_A}/disks/plain")).await;
    assert_eq!(status, 200, "{disk}");
    // A disk deleted behind the provider's back counts as deleted.
    let (status, _) = cloud
        .gce(Method::DELETE, &format!("zones/{ZONE_A}/disks/plain"), None)
        .await;
    assert_eq!(status, 200);
    prov.delete_volume("plain").await.unwrap();
}

/// The provisioner reads a `kubernetes.io/gce-pd` class's parameters, also through the
/// instrumented wrapper every component puts around a provider.
#[tokio::test]
async fn class_parameters_are_the_gcepd_plugins() {
    let cloud = Cloud::start().await;
    let gce = std::sync::Arc::new(cloud.provider().await);
    let wrapped = hypercloud_cloudprovider::Instrumented::new(gce.clone(), None, None);
    for prov in [
        gce.volume_provisioner().unwrap(),
        wrapped.volume_provisioner().unwrap(),
    ] {
        let p = prov
            .class_parameters(&BTreeMap::from([
                ("type".to_owned(), "pd-ssd".to_owned()),
                ("zones".to_owned(), format!("{ZONE_A},{ZONE_B}")),
            ]))
            .unwrap();
        assert_eq!(p.volume_type, "pd-ssd");
        assert_eq!(p.zones, [ZONE_A, ZONE_B]);
        let e = prov
            .class_parameters(&BTreeMap::from([(
                "availability".to_owned(),
                ZONE_A.to_owned(),
            )]))
            .unwrap_err();
        assert!(e.contains("invalid option \"availability\""), "{e}");
    }
}

/// A name in two managed zones is refused rather than guessed, as upstream.
#[tokio::test]
async fn a_disk_name_in_two_zones_is_refused() {
    let cloud = Cloud::start().await;
    for zone in [ZONE_A, ZONE_B] {
        let (status, op) = cloud
            .gce(
                Method::POST,
                &format!("zones/{zone}/disks"),
                Some(serde_json::json!({"name": "twin", "sizeGb": "1"})),
            )
            .await;
        assert_eq!(status, 200, "{op}");
    }
    let gce = cloud.provider().await;
    let prov = gce.volume_provisioner().unwrap();
    for e in [
        prov.delete_volume("twin").await.unwrap_err(),
        prov.expand_volume("twin", 2).await.unwrap_err(),
    ] {
        assert!(
            hypercloud_cloudprovider::Chain(&e)
                .to_string()
                .contains("found in multiple zones"),
            "{e}"
        );
    }
    for zone in [ZONE_A, ZONE_B] {
        let (_, disk) = cloud.get(&format!("zones/{zone}/disks/twin")).await;
        assert_eq!(disk["sizeGb"], "1", "{disk}");
    }
}

/// A CSI PV of `pd.csi.storage.gke.io` gets its zonal disk's zone and region, as an in-tree
/// one; a regional handle is refused by name.
#[tokio::test]
async fn pd_csi_pvs_are_labelled_from_their_volume_handle() {
    let cloud = Cloud::start().await;
    let (status, op) = cloud
        .gce(
            Method::POST,
            &format!("zones/{ZONE_B}/disks"),
            Some(serde_json::json!({"name": "csi-disk", "sizeGb": "1"})),
        )
        .await;
    assert_eq!(status, 200, "{op}");
    let gce = cloud.provider().await;
    let labeler = gce.pv_labeler().unwrap();
    let pv = |handle: &str| -> k8s_openapi::api::core::v1::PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv"},
            "spec": {"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": handle}},
        }))
        .unwrap()
    };
    let labels = labeler
        .get_labels_for_volume(&pv(&format!("projects/demo/zones/{ZONE_B}/disks/csi-disk")))
        .await
        .unwrap();
    assert_eq!(
        labels,
        BTreeMap::from([
            (
                "topology.kubernetes.io/region".to_owned(),
                "us-central1".to_owned()
            ),
            ("topology.kubernetes.io/zone".to_owned(), ZONE_B.to_owned()),
        ])
    );
    assert!(matches!(
        labeler
            .get_labels_for_volume(&pv(&format!("projects/demo/zones/{ZONE_A}/disks/csi-disk")))
            .await,
        Err(CloudError::DiskNotFound)
    ));
    let e = labeler
        .get_labels_for_volume(&pv("projects/demo/regions/us-central1/disks/csi-disk"))
        .await
        .unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("regional persistent disks"),
        "{e}"
    );
}
