//! The metadata reader against the local cloud's config drives and metadata service (both
//! orders of `search-order`, fallback, and both failing), Zones::get_zone and
//! Instances::current_node_name through it, Cinder volume zones (Volumes and PvLabeler), and
//! creating, extending and deleting Cinder volumes (VolumeProvisioner).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;

use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{Error, Interface, VolumeRequest};
use hypercloud_providers_openstack::{Config, MetadataReader};
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, CinderPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
};
use reqwest::Method;
use serde_json::json;
use support::Cloud;

fn reader(metadata_section: &str) -> MetadataReader {
    let text = format!("[Metadata]\n{metadata_section}");
    let c = Config::parse(&text, "test").unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    MetadataReader::new(c.metadata).unwrap()
}

/// A mounted-drive layout whose metadata says `from-drive`, to tell the sources apart.
fn fake_drive() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let latest = dir.path().join("openstack/latest");
    std::fs::create_dir_all(&latest).unwrap();
    std::fs::write(
        latest.join("meta_data.json"),
        json!({"uuid": "from-drive", "name": "drive-node", "availability_zone": "drive-az"})
            .to_string(),
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn config_drive_and_metadata_service_in_either_order() {
    let cloud = Cloud::start().await;
    let id = cloud.create_server("meta-node", "1", Some("az-2")).await;
    let url = cloud.metadata_url();

    // The local cloud's own config drive for the instance.
    let md = reader(&format!(
        "search-order = configDrive\nconfig-drive-dir = {}\ninstance-id = {id}\n",
        cloud.config_drive_dir().display()
    ))
    .read()
    .await
    .unwrap();
    assert_eq!(md.uuid, id);
    assert_eq!(md.name, "meta-node");
    assert_eq!(md.hostname, "meta-node");
    assert_eq!(md.availability_zone, "az-2");

    // The metadata service, naming the instance.
    let md = reader(&format!(
        "search-order = metadataService\nmetadata-url = {url}\ninstance-id = meta-node\n"
    ))
    .read()
    .await
    .unwrap();
    assert_eq!(md.uuid, id);
    assert_eq!(md.availability_zone, "az-2");

    let drive = fake_drive();
    let both = |order: &str| {
        format!(
            "search-order = {order}\nconfig-drive-dir = {}\nmetadata-url = {url}\ninstance-id = meta-node\n",
            drive.path().display()
        )
    };
    let first = reader(&both("configDrive,metadataService"))
        .read()
        .await
        .unwrap();
    assert_eq!(first.uuid, "from-drive");
    let first = reader(&both("metadataService,configDrive"))
        .read()
        .await
        .unwrap();
    assert_eq!(first.uuid, id);

    // The first source failing falls through to the second.
    let empty = tempfile::tempdir().unwrap();
    let md = reader(&format!(
        "config-drive-dir = {}\nmetadata-url = {url}\ninstance-id = meta-node\n",
        empty.path().display()
    ))
    .read()
    .await
    .unwrap();
    assert_eq!(md.uuid, id);
    cloud.shutdown().await;
}

#[tokio::test]
async fn every_source_failing_names_each_attempt() {
    let cloud = Cloud::start().await;
    let empty = tempfile::tempdir().unwrap();
    let err = reader(&format!(
        "search-order = metadataService,configDrive\nconfig-drive-dir = {}\nmetadata-url = {}\ninstance-id = ghost\nrequest-timeout = 2s\n",
        empty.path().display(),
        cloud.metadata_url()
    ))
    .read()
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("could not read instance metadata from any source: metadataService: GET "),
        "{err}"
    );
    assert!(err.contains("HTTP 404"), "{err}");
    assert!(
        err.contains("; configDrive: no config drive for instance ghost in"),
        "{err}"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn zone_and_node_name_of_this_machine_come_from_metadata() {
    let cloud = Cloud::start().await;
    let id = cloud.create_server("self-node", "1", Some("az-2")).await;
    let os = cloud.provider_with(&format!(
        "[Metadata]\nsearch-order = configDrive\nconfig-drive-dir = {}\ninstance-id = {id}\n",
        cloud.config_drive_dir().display()
    ));
    let zone = os.zones().unwrap().get_zone().await.unwrap();
    assert_eq!(zone.failure_domain, "az-2");
    assert_eq!(zone.region, "RegionOne");
    assert_eq!(
        os.instances()
            .unwrap()
            .current_node_name("whatever-the-hostname-is")
            .await
            .unwrap(),
        "self-node"
    );
    let broken = cloud.provider_with("[Metadata]\nsearch-order = configDrive\n");
    let e = broken.zones().unwrap().get_zone().await.unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("read instance metadata"),
        "{e}"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn volume_zone_and_region() {
    let cloud = Cloud::start().await;
    let v = cloud
        .ok(
            Method::POST,
            &format!("/volume/v3/{}/volumes", cloud.project),
            Some(json!({"volume": {"size": 1, "name": "pv-1", "availability_zone": "az-2"}})),
        )
        .await;
    let vol = v["volume"]["id"].as_str().unwrap();
    let os = cloud.provider_with("");
    let zone = os.volumes().volume_zone(vol).await.unwrap();
    assert_eq!(zone.failure_domain, "az-2");
    assert_eq!(zone.region, "RegionOne");
    assert!(matches!(
        os.volumes().volume_zone("no-such-volume").await,
        Err(Error::DiskNotFound)
    ));
    assert!(os.clusters().is_none());

    // The PvLabeler capability on top: Cinder PVs (in-tree source or the Cinder CSI driver).
    let labeler = os.pv_labeler().unwrap();
    let expected = BTreeMap::from([
        (LABEL_TOPOLOGY_ZONE.to_owned(), "az-2".to_owned()),
        (LABEL_TOPOLOGY_REGION.to_owned(), "RegionOne".to_owned()),
    ]);
    assert_eq!(
        labeler
            .get_labels_for_volume(&cinder_pv(vol))
            .await
            .unwrap(),
        expected
    );
    assert_eq!(
        labeler
            .get_labels_for_volume(&csi_pv("cinder.csi.openstack.org", vol))
            .await
            .unwrap(),
        expected
    );
    for not_ours in [
        csi_pv("ebs.csi.aws.com", vol),
        cinder_pv("placeholder-for-provisioning"),
        PersistentVolume::default(),
    ] {
        assert!(labeler
            .get_labels_for_volume(&not_ours)
            .await
            .unwrap()
            .is_empty());
    }
    assert!(matches!(
        labeler.get_labels_for_volume(&cinder_pv("gone")).await,
        Err(Error::DiskNotFound)
    ));
    let ignoring = cloud.provider_with("[BlockStorage]\nignore-volume-az = true\n");
    assert!(ignoring
        .pv_labeler()
        .unwrap()
        .get_labels_for_volume(&cinder_pv(vol))
        .await
        .unwrap()
        .is_empty());
    cloud.shutdown().await;
}

#[tokio::test]
async fn cinder_volumes_created_extended_and_deleted() {
    let cloud = Cloud::start().await;
    let os = cloud.provider_with("");
    let volumes = os.volume_provisioner().unwrap();
    assert_eq!(volumes.plugin_name(), "kubernetes.io/cinder");
    let request = VolumeRequest {
        name: "kubernetes-dynamic-pvc-u1".into(),
        size_gib: 2,
        zone: "az-2".into(),
        volume_type: "lvmdriver-1".into(),
        pool: String::new(),
        tags: [(
            "kubernetes.io/created-for/pvc/name".to_owned(),
            "data".to_owned(),
        )]
        .into(),
        ..Default::default()
    };
    let created = volumes.create_volume(&request).await.unwrap();
    assert_eq!(created.size_gib, 2);
    assert_eq!(created.labels[LABEL_TOPOLOGY_ZONE], "az-2");
    assert_eq!(created.labels[LABEL_TOPOLOGY_REGION], "RegionOne");
    let path = format!("/volume/v3/{}/volumes/{}", cloud.project, created.id);
    let v = cloud.ok(Method::GET, &path, None).await;
    assert_eq!(v["volume"]["status"], "available");
    assert_eq!(v["volume"]["name"], "kubernetes-dynamic-pvc-u1");
    assert_eq!(
        v["volume"]["metadata"]["kubernetes.io/created-for/pvc/name"],
        "data"
    );
    assert_eq!(
        volumes.volume_id(&cinder_pv(&created.id)).as_deref(),
        Some(created.id.as_str())
    );
    assert!(volumes
        .volume_id(&csi_pv("cinder.csi.openstack.org", &created.id))
        .is_none());

    // Extend: to 5, then asking for less is a no-op that reports the size.
    assert_eq!(volumes.expand_volume(&created.id, 5).await.unwrap(), 5);
    assert_eq!(volumes.expand_volume(&created.id, 3).await.unwrap(), 5);
    let v = cloud.ok(Method::GET, &path, None).await;
    assert_eq!(v["volume"]["size"], 5);
    assert_eq!(v["volume"]["status"], "available");

    // In use: neither extended (as the in-tree plugin) nor deleted.
    let server = cloud.create_server("vm", "m1.small", None).await;
    cloud
        .ok(
            Method::POST,
            &format!("/compute/v2.1/servers/{server}/os-volume_attachments"),
            Some(json!({"volumeAttachment": {"volumeId": created.id}})),
        )
        .await;
    let err = volumes.expand_volume(&created.id, 6).await.unwrap_err();
    assert!(
        format!("{err:?}").contains("can not be expanded"),
        "{err:?}"
    );
    let err = volumes.delete_volume(&created.id).await.unwrap_err();
    assert!(format!("{err:?}").contains("still attached"), "{err:?}");
    cloud.delete_server(&server).await;

    volumes.delete_volume(&created.id).await.unwrap();
    assert_eq!(cloud.call(Method::GET, &path, None).await.0.as_u16(), 404);
    // Gone already: deleted.
    volumes.delete_volume(&created.id).await.unwrap();
    assert!(matches!(
        volumes.expand_volume(&created.id, 9).await,
        Err(Error::DiskNotFound)
    ));
    // A zone Cinder does not have is the cloud's error.
    let bad = VolumeRequest {
        zone: "nowhere".into(),
        ..request
    };
    assert!(volumes.create_volume(&bad).await.is_err());
    cloud.shutdown().await;
}

/// The in-tree Cinder plugin's attach calls against the local cloud's Nova and Cinder:
/// attach (and again: a no-op), device path, the attached checks, a second server refused,
/// detach (and again), and a volume that does not exist.
#[tokio::test]
async fn cinder_volumes_attached_and_detached() {
    let cloud = Cloud::start().await;
    let os = cloud.provider_with("");
    let volumes = os.volume_provisioner().unwrap();
    let attacher = os.volume_attacher().unwrap();
    assert_eq!(attacher.plugin_name(), "kubernetes.io/cinder");
    let spec = cinder_pv("v-1").spec.unwrap();
    assert_eq!(attacher.pv_volume_id(&spec).as_deref(), Some("v-1"));
    let csi = csi_pv("cinder.csi.openstack.org", "v-1").spec.unwrap();
    assert!(attacher.pv_volume_id(&csi).is_none());

    let request = VolumeRequest {
        name: "kubernetes-dynamic-pvc-a1".into(),
        size_gib: 1,
        ..Default::default()
    };
    let vol = volumes.create_volume(&request).await.unwrap().id;
    let a = cloud.create_server("node-a", "m1.small", None).await;
    let b = cloud.create_server("node-b", "m1.small", None).await;
    let path = format!("/volume/v3/{}/volumes/{vol}", cloud.project);

    assert!(!attacher.disk_is_attached(&a, &vol).await.unwrap());
    attacher.attach_disk(&a, &vol).await.unwrap();
    let v = cloud.ok(Method::GET, &path, None).await;
    assert_eq!(v["volume"]["status"], "in-use");
    assert_eq!(v["volume"]["attachments"][0]["server_id"], a.as_str());
    // Again: already attached, nothing asked of Nova, still one attachment.
    attacher.attach_disk(&a, &vol).await.unwrap();
    let v = cloud.ok(Method::GET, &path, None).await;
    assert_eq!(v["volume"]["attachments"].as_array().unwrap().len(), 1);
    assert_eq!(
        attacher.get_attachment_disk_path(&a, &vol).await.unwrap(),
        "/dev/vdb"
    );
    assert!(attacher.disk_is_attached(&a, &vol).await.unwrap());
    assert!(!attacher.disk_is_attached(&b, &vol).await.unwrap());
    let all = attacher
        .disks_are_attached(&a, &[vol.clone(), "missing".to_owned()])
        .await
        .unwrap();
    assert!(all[&vol]);
    assert!(!all["missing"]);

    // Not multiattach: a second server is refused, naming the first.
    let err = attacher.attach_disk(&b, &vol).await.unwrap_err();
    assert!(
        format!("{}", hypercloud_cloudprovider::Chain(&err))
            .contains(&format!("attached to a different instance ({a})")),
        "{err}"
    );
    let err = attacher
        .get_attachment_disk_path(&b, &vol)
        .await
        .unwrap_err();
    assert!(
        format!("{}", hypercloud_cloudprovider::Chain(&err)).contains("different compute"),
        "{err}"
    );

    // Detach from the wrong server: nothing happens; from the right one: available.
    attacher.detach_disk(&b, &vol).await.unwrap();
    assert!(attacher.disk_is_attached(&a, &vol).await.unwrap());
    attacher.detach_disk(&a, &vol).await.unwrap();
    let v = cloud.ok(Method::GET, &path, None).await;
    assert_eq!(v["volume"]["status"], "available");
    assert_eq!(v["volume"]["attachments"], json!([]));
    attacher.detach_disk(&a, &vol).await.unwrap();
    let err = attacher
        .get_attachment_disk_path(&a, &vol)
        .await
        .unwrap_err();
    assert!(
        format!("{}", hypercloud_cloudprovider::Chain(&err)).contains("its status is available"),
        "{err}"
    );
    // Now the second server may have it.
    attacher.attach_disk(&b, &vol).await.unwrap();
    assert_eq!(
        attacher.get_attachment_disk_path(&b, &vol).await.unwrap(),
        "/dev/vdb"
    );
    attacher.detach_disk(&b, &vol).await.unwrap();

    assert!(matches!(
        attacher.attach_disk(&a, "missing").await,
        Err(Error::DiskNotFound)
    ));
    attacher.detach_disk(&a, "missing").await.unwrap();
    assert!(!attacher.disk_is_attached(&a, "missing").await.unwrap());
    cloud.shutdown().await;
}

fn cinder_pv(volume_id: &str) -> PersistentVolume {
    PersistentVolume {
        spec: Some(PersistentVolumeSpec {
            cinder: Some(CinderPersistentVolumeSource {
                volume_id: volume_id.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn csi_pv(driver: &str, handle: &str) -> PersistentVolume {
    PersistentVolume {
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}
