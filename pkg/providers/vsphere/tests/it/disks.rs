//! The `kubernetes.io/vsphere-volume` capability against vcsim, each step checked from the
//! cloud side with govc (`datastore.ls`, `device.info -vm`): VMDKs created on the datastore
//! a class names (or `[Workspace] default-datastore`), added to a VM by its BIOS UUID,
//! refused for a second VM, removed with the file kept, deleted; what vSphere cannot do
//! refused by name.

use std::collections::BTreeMap;

use hypercloud_cloudprovider::{Chain, CloudConfig, Error as CloudError, Interface, VolumeRequest};
use hypercloud_providers_vsphere::VSphere;
use hypercloud_testenv::vcsim::Vcsim;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
};

const VM0: &str = "/DC0/vm/DC0_H0_VM0";
const VM1: &str = "/DC0/vm/DC0_H0_VM1";
const HOST: &str = "/DC0/host/DC0_H0/DC0_H0";

/// The vCenter requests the provider asked for: every request but a task's re-reads (a task
/// vcsim had not finished at its first read is read again; that is how busy the machine was).
fn asked(cloud: &VSphere) -> u64 {
    cloud.api_calls() - cloud.task_repolls()
}

async fn started(text: &str) -> VSphere {
    let p = VSphere::from_cloud_config(Some(&CloudConfig {
        origin: "test.conf".into(),
        bytes: text.as_bytes().to_vec(),
    }))
    .expect("valid config");
    p.initialize(None).await.expect("initialize");
    p
}

/// vcsim with a second datastore `LocalDS_1` (a directory of `dir`) on DC0_H0, zone tags on
/// that host and region tags on DC0.
fn inventory(dir: &std::path::Path) -> Vcsim {
    let sim = Vcsim::start(&[]);
    let path = dir.join("ds1");
    std::fs::create_dir_all(&path).expect("datastore dir");
    sim.govc(&[
        "datastore.create",
        "-type",
        "local",
        "-name",
        "LocalDS_1",
        "-path",
        &path.display().to_string(),
        HOST,
    ]);
    sim.tag_zone(HOST, "zone-a", "/DC0", "region-1");
    sim
}

/// The file names under `kubevols/` of a datastore, as govc lists them.
fn kubevols(sim: &Vcsim, ds: &str) -> Vec<String> {
    let out = sim.govc_output(&["datastore.ls", "-ds", ds, "kubevols"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The VMDK files of a VM's disks, as `govc device.info -json` shows them.
fn vm_disks(sim: &Vcsim, vm: &str) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_str(&sim.govc(&["device.info", "-json", "-vm", vm])).expect("json");
    let devices = v
        .get("devices")
        .or_else(|| v.get("Devices"))
        .and_then(|d| d.as_array())
        .cloned()
        .unwrap_or_default();
    devices
        .iter()
        .filter_map(|d| d.pointer("/backing/fileName").and_then(|f| f.as_str()))
        .filter(|f| f.ends_with(".vmdk"))
        .map(str::to_owned)
        .collect()
}

fn request(name: &str, pool: &str) -> VolumeRequest {
    VolumeRequest {
        name: name.into(),
        size_gib: 2,
        pool: pool.into(),
        tags: BTreeMap::from([(
            "kubernetes.io/created-for/pvc/name".to_owned(),
            "claim-1".to_owned(),
        )]),
        ..Default::default()
    }
}

#[tokio::test]
async fn vmdks_created_attached_detached_and_deleted() {
    let dir = tempfile::tempdir().expect("tmp");
    let sim = inventory(dir.path());
    let cloud = started(&sim.ini_conf("[Workspace]\ndefault-datastore = \"LocalDS_0\"\n")).await;
    let volumes = cloud.volume_provisioner().expect("volume provisioner");
    let attacher = cloud.volume_attacher().expect("volume attacher");
    assert_eq!(volumes.plugin_name(), "kubernetes.io/vsphere-volume");
    let vm0 = sim.vm_uuid(VM0);
    let vm1 = sim.vm_uuid(VM1);

    // The class's datastore is honoured, and its zone labels the volume.
    let before = asked(&cloud);
    let created = volumes
        .create_volume(&request("kubernetes-dynamic-pvc-1", "LocalDS_1"))
        .await
        .expect("create");
    let provision_calls = asked(&cloud) - before;
    let path = "[LocalDS_1] kubevols/kubernetes-dynamic-pvc-1.vmdk";
    assert_eq!(created.id, path);
    assert_eq!(created.size_gib, 2);
    assert_eq!(created.labels["topology.kubernetes.io/zone"], "zone-a");
    assert_eq!(created.labels["topology.kubernetes.io/region"], "region-1");
    assert!(
        kubevols(&sim, "LocalDS_1").contains(&"kubernetes-dynamic-pvc-1.vmdk".to_owned()),
        "{:?}",
        kubevols(&sim, "LocalDS_1")
    );
    assert!(!kubevols(&sim, "LocalDS_0").contains(&"kubernetes-dynamic-pvc-1.vmdk".to_owned()));
    // Created again (a retried provisioning): the file is reused.
    assert_eq!(
        volumes
            .create_volume(&request("kubernetes-dynamic-pvc-1", "LocalDS_1"))
            .await
            .expect("create again")
            .id,
        path
    );
    // No datastore in the class: [Workspace] default-datastore.
    let default = volumes
        .create_volume(&request("kubernetes-dynamic-pvc-2", ""))
        .await
        .expect("create on the default datastore");
    assert_eq!(
        default.id,
        "[LocalDS_0] kubevols/kubernetes-dynamic-pvc-2.vmdk"
    );
    assert!(kubevols(&sim, "LocalDS_0").contains(&"kubernetes-dynamic-pvc-2.vmdk".to_owned()));

    // Attach to VM0 by its BIOS UUID; govc sees the disk on the VM.
    let before = asked(&cloud);
    attacher.attach_disk(&vm0, path).await.expect("attach");
    let attach_calls = asked(&cloud) - before;
    assert!(
        vm_disks(&sim, VM0).iter().any(|f| f == path),
        "{:?}",
        vm_disks(&sim, VM0)
    );
    assert!(attacher
        .disk_is_attached(&vm0, path)
        .await
        .expect("attached"));
    assert!(!attacher
        .disk_is_attached(&vm1, path)
        .await
        .expect("not on vm1"));
    let dev = attacher
        .get_attachment_disk_path(&vm0, path)
        .await
        .expect("device path");
    assert!(dev.starts_with("/dev/disk/by-id/wwn-0x"), "{dev}");
    // Attached already: nothing to do.
    attacher
        .attach_disk(&vm0, path)
        .await
        .expect("attach again");
    assert_eq!(vm_disks(&sim, VM0).iter().filter(|f| *f == path).count(), 1);
    let both = attacher
        .disks_are_attached(&vm0, &[path.to_owned(), default.id.clone()])
        .await
        .expect("disks are attached");
    assert!(both[path]);
    assert!(!both[&default.id]);

    // Refused by name: a second VM, deleting an attached disk, growing.
    let err = attacher
        .attach_disk(&vm1, path)
        .await
        .expect_err("other VM");
    let msg = Chain(&err).to_string();
    assert!(
        msg.contains("attached to a different VM (DC0_H0_VM0)"),
        "{msg}"
    );
    assert!(vm_disks(&sim, VM1).iter().all(|f| f != path));
    let err = volumes.delete_volume(path).await.expect_err("in use");
    let msg = Chain(&err).to_string();
    assert!(msg.contains("attached to VM DC0_H0_VM0"), "{msg}");
    let err = volumes
        .expand_volume(path, 5)
        .await
        .expect_err("no expansion");
    let msg = Chain(&err).to_string();
    assert!(msg.contains("does not support volume expansion"), "{msg}");

    // Detach: the device goes, the file stays.
    let before = asked(&cloud);
    attacher.detach_disk(&vm0, path).await.expect("detach");
    let detach_calls = asked(&cloud) - before;
    assert!(vm_disks(&sim, VM0).iter().all(|f| f != path));
    assert!(kubevols(&sim, "LocalDS_1").contains(&"kubernetes-dynamic-pvc-1.vmdk".to_owned()));
    assert!(!attacher
        .disk_is_attached(&vm0, path)
        .await
        .expect("detached"));
    attacher
        .detach_disk(&vm0, path)
        .await
        .expect("detach again");

    // Delete: the file goes; deleting again is fine.
    let before = asked(&cloud);
    volumes.delete_volume(path).await.expect("delete");
    let delete_calls = asked(&cloud) - before;
    assert!(
        !kubevols(&sim, "LocalDS_1").contains(&"kubernetes-dynamic-pvc-1.vmdk".to_owned()),
        "{:?}",
        kubevols(&sim, "LocalDS_1")
    );
    volumes.delete_volume(path).await.expect("delete again");
    assert!(matches!(
        attacher
            .attach_disk("00000000-0000-0000-0000-000000000000", path)
            .await,
        Err(CloudError::InstanceNotFound)
    ));

    // A VM without a SCSI controller (govc removes VM1's) first gets a pvscsi controller.
    sim.govc(&["device.remove", "-vm", VM1, "pvscsi-202"]);
    let path2 = "[LocalDS_0] kubevols/kubernetes-dynamic-pvc-2.vmdk";
    attacher
        .attach_disk(&vm1, path2)
        .await
        .expect("attach with a new controller");
    assert!(
        vm_disks(&sim, VM1).iter().any(|f| f == path2),
        "{:?}",
        vm_disks(&sim, VM1)
    );
    let listing = sim.govc(&["device.ls", "-vm", VM1]);
    assert!(listing.contains("ParaVirtualSCSIController"), "{listing}");
    attacher.detach_disk(&vm1, path2).await.expect("detach");
    assert!(vm_disks(&sim, VM1).iter().all(|f| f != path2));
    // [Disk] scsicontrollertype = lsilogic-sas: VM1's pvscsi controller is not used; an LSI
    // Logic SAS controller is added.
    let sas = started(&sim.ini_conf("[Disk]\nscsicontrollertype = lsilogic-sas\n")).await;
    let sas_attacher = sas.volume_attacher().expect("volume attacher");
    sas_attacher
        .attach_disk(&vm1, path2)
        .await
        .expect("attach on an lsilogic-sas controller");
    let listing = sim.govc(&["device.ls", "-vm", VM1]);
    assert!(
        listing.contains("VirtualLsiLogicSASController"),
        "{listing}"
    );
    sas_attacher.detach_disk(&vm1, path2).await.expect("detach");
    volumes
        .delete_volume(&default.id)
        .await
        .expect("delete default");

    let per_volume = provision_calls + attach_calls + detach_calls + delete_calls;
    eprintln!(
        "vCenter requests per volume: provision {provision_calls}, attach {attach_calls}, detach {detach_calls}, delete {delete_calls}: {per_volume}"
    );
    // Each: its look-ups, one method and its task's state.
    assert!(per_volume <= 24, "{per_volume}");

    // Without zone labels (no [Labels]) there is no vAPI call: SOAP requests only.
    let soap_only = started(
        &sim.ini_conf("[Workspace]\ndefault-datastore = \"LocalDS_0\"\n")
            .replace(
                "[Labels]\nregion = \"k8s-region\"\nzone = \"k8s-zone\"\n",
                "",
            ),
    )
    .await;
    let volumes = soap_only.volume_provisioner().expect("volume provisioner");
    let attacher = soap_only.volume_attacher().expect("volume attacher");
    let before = asked(&soap_only);
    let v = volumes
        .create_volume(&request("kubernetes-dynamic-pvc-5", "LocalDS_1"))
        .await
        .expect("create");
    assert!(v.labels.is_empty(), "{:?}", v.labels);
    let provision = asked(&soap_only) - before;
    attacher.attach_disk(&vm0, &v.id).await.expect("attach");
    let attach = asked(&soap_only) - before - provision;
    attacher.detach_disk(&vm0, &v.id).await.expect("detach");
    let detach = asked(&soap_only) - before - provision - attach;
    volumes.delete_volume(&v.id).await.expect("delete");
    let soap = asked(&soap_only) - before;
    eprintln!(
        "SOAP requests per volume without labels: provision {provision}, attach {attach}, detach {detach}, delete {}: {soap}",
        soap - provision - attach - detach
    );
    // Each step: one or two look-ups, one method, one read of its task.
    assert!(soap <= 16, "{soap}");
}

#[tokio::test]
async fn class_parameters_and_missing_datastores_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tmp");
    let sim = inventory(dir.path());
    let cloud = started(&sim.ini_conf("")).await;
    let volumes = cloud.volume_provisioner().expect("volume provisioner");
    let p = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let ok = volumes
        .class_parameters(&p(&[
            ("diskformat", "zeroedthick"),
            ("datastore", "LocalDS_1"),
            ("fstype", "xfs"),
        ]))
        .expect("valid");
    assert_eq!(ok.volume_type, "zeroedthick");
    assert_eq!(ok.pool, "LocalDS_1");
    assert_eq!(ok.fs_type.as_deref(), Some("xfs"));
    let source = |fs: Option<&str>| {
        volumes
            .volume_source("[LocalDS_1] kubevols/a.vmdk", fs)
            .vsphere_volume
            .expect("vsphereVolume")
    };
    assert_eq!(source(Some("xfs")).fs_type.as_deref(), Some("xfs"));
    assert_eq!(source(None).fs_type.as_deref(), Some("ext4"));
    assert_eq!(source(None).volume_path, "[LocalDS_1] kubevols/a.vmdk");
    let err = volumes
        .class_parameters(&p(&[("storagePolicyName", "gold")]))
        .expect_err("policy");
    assert!(err.contains("storagepolicyname"), "{err}");

    // A zeroedthick disk is made; no datastore anywhere, or one that does not exist, is named.
    let mut r = request("kubernetes-dynamic-pvc-z", "LocalDS_1");
    r.volume_type = "zeroedthick".into();
    volumes.create_volume(&r).await.expect("zeroedthick");
    let err = volumes
        .create_volume(&request("kubernetes-dynamic-pvc-3", ""))
        .await
        .expect_err("no datastore");
    assert!(
        Chain(&err).to_string().contains("default-datastore"),
        "{}",
        Chain(&err)
    );
    let err = volumes
        .create_volume(&request("kubernetes-dynamic-pvc-3", "NoSuchDS"))
        .await
        .expect_err("unknown datastore");
    assert!(
        Chain(&err).to_string().contains("\"NoSuchDS\""),
        "{}",
        Chain(&err)
    );
}

#[tokio::test]
async fn vsphere_csi_volumes_get_their_datastore_zone() {
    let dir = tempfile::tempdir().expect("tmp");
    let sim = inventory(dir.path());
    let cloud = started(&sim.ini_conf("")).await;
    let labeler = cloud.pv_labeler().expect("pv labeler");
    let csi = |driver: &str, handle: &str| PersistentVolume {
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    // A First Class Disk (the CSI driver's block volumes), made with govc.
    let out = sim.govc(&["disk.create", "-ds", "LocalDS_1", "-size", "1G", "fcd-1"]);
    let id = out.lines().last().expect("disk id").trim().to_owned();
    let labels = labeler
        .get_labels_for_volume(&csi("csi.vsphere.vmware.com", &id))
        .await
        .expect("labels of a first class disk");
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone-a");
    assert_eq!(labels["topology.kubernetes.io/region"], "region-1");
    // A volume migrated from the in-tree plugin: its handle is the VMDK path.
    let labels = labeler
        .get_labels_for_volume(&csi(
            "csi.vsphere.vmware.com",
            "[LocalDS_0] kubevols/a.vmdk",
        ))
        .await
        .expect("labels of a migrated volume");
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone-a");
    assert!(matches!(
        labeler
            .get_labels_for_volume(&csi(
                "csi.vsphere.vmware.com",
                "6f0b3d52-0000-0000-0000-000000000000"
            ))
            .await,
        Err(CloudError::DiskNotFound)
    ));
    assert!(labeler
        .get_labels_for_volume(&csi("ebs.csi.aws.com", "vol-1"))
        .await
        .expect("not ours")
        .is_empty());
}
