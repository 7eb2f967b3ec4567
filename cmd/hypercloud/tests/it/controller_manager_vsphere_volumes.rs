//! The in-tree volume path of the `controller-manager` personality with the `vsphere`
//! provider: the real binary, the real apiserver (pkg/testenv) and VMware's vCenter simulator
//! (vcsim), every cloud-side fact checked with govc.
//!
//! - Provisioning: a `kubernetes.io/vsphere-volume` claim becomes a VMDK under `kubevols/` on
//!   the class's datastore (`govc datastore.ls`) and a `vsphereVolume` PV with the
//!   datastore's zone; growing the claim is refused by name (upstream v1.20's plugin had no
//!   expansion); reclaim Delete removes the file, then the PV. As `controller_manager_volumes`,
//!   the test plays the binder and the protection controllers, and takes that module's group.
//! - Attaching: a pod's `vsphereVolume` is added to the VM of its Node's provider ID
//!   (`govc device.info -vm`, the Node's `volumesAttached` with the disk's `wwn-0x` path) and
//!   removed, file kept, when the pod goes. As `controller_manager_gce_attach`, no scheduler
//!   or kubelet runs; it takes the attach/detach group.
//! - The kubelet's part: `kubelet-helper --cloud-provider=vsphere` registers its Node from its
//!   own VM (SMBIOS UUID file), reports the pod's volume in use, waits for the attach and
//!   reports the disk's `wwn-0x` device; it takes the kubelet-helper volumes group.
#![cfg(all(feature = "vsphere", feature = "openstack"))]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::vcsim::Vcsim;
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::volume_fixtures::{
    attach_fixture, attached, bind_and_grow, claim, class as class_of, delete_claim,
    delete_pod_until_detached, pod, run_pod_until_attached, start_controller_manager, wait_pv,
    wait_pv_deleted,
};
use crate::BIN;

const PLUGIN: &str = "kubernetes.io/vsphere-volume";
const VM: &str = "/DC0/vm/DC0_H0_VM0";
const HOST: &str = "/DC0/host/DC0_H0/DC0_H0";

fn start_kcm(dir: &Path, kubeconfig: &Path, conf: &Path, controllers: &str) -> Proc {
    start_controller_manager(BIN, dir, kubeconfig, "vsphere", conf, controllers, &[])
}

/// vcsim tracing every SOAP request to `dir/trace.log`, with a second datastore `LocalDS_1`
/// on DC0_H0, zone `zone-a` on that host and region `region-1` on DC0; a vsphere.conf for it
/// in `dir` (default datastore LocalDS_0).
fn inventory(dir: &Path, conf_extra: &str) -> (Vcsim, std::path::PathBuf) {
    let trace = dir.join("trace.log").display().to_string();
    let sim = Vcsim::start(&["-trace", "-trace-file", &trace]);
    let ds = dir.join("ds1");
    std::fs::create_dir_all(&ds).unwrap();
    sim.govc(&[
        "datastore.create",
        "-type",
        "local",
        "-name",
        "LocalDS_1",
        "-path",
        &ds.display().to_string(),
        HOST,
    ]);
    sim.tag_zone(HOST, "zone-a", "/DC0", "region-1");
    let conf = dir.join("vsphere.conf");
    std::fs::write(
        &conf,
        sim.ini_conf(&format!(
            "[Workspace]\ndefault-datastore = \"LocalDS_0\"\n{conf_extra}"
        )),
    )
    .unwrap();
    (sim, conf)
}

/// How many `method` requests vcsim has received, from its SOAP trace.
fn requests(dir: &Path, method: &str) -> usize {
    std::fs::read_to_string(dir.join("trace.log"))
        .unwrap_or_default()
        .matches(&format!("<{method} xmlns=\"urn:vim25\">"))
        .count()
}

/// The file names under a datastore's `kubevols/`.
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
        serde_json::from_str(&sim.govc(&["device.info", "-json", "-vm", vm])).unwrap();
    v.get("devices")
        .or_else(|| v.get("Devices"))
        .and_then(|d| d.as_array())
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d.pointer("/backing/fileName").and_then(|f| f.as_str()))
        .filter(|f| f.ends_with(".vmdk"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsphere_volumes_provisioned_on_the_class_datastore_and_reclaimed() {
    let _group = hypercloud_testenv::group("controller_manager_volumes").await;
    let env = hypercloud_testenv::TestEnv::new("kcm-vsphere-volumes")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let (sim, conf) = inventory(tmp.path(), "");

    let classes: Api<StorageClass> = Api::all(env.client());
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), env.namespace());
    let pp = PostParams::default();
    let class = env.unique_name("vmdk");
    classes
        .create(
            &pp,
            &class_of(
                &class,
                PLUGIN,
                json!({"diskformat": "zeroedthick", "datastore": "LocalDS_1", "fstype": "xfs"}),
                "Immediate",
                "Delete",
            ),
        )
        .await
        .unwrap();
    let kcm = start_kcm(
        tmp.path(),
        env.control_plane().kubeconfig(),
        &conf,
        "persistentvolume-binder,persistentvolume-expander",
    );

    // A VMDK of the request rounded up to GiB on the class's datastore, and its PV.
    let data = claims
        .create(&pp, &claim("data", &class, "1500Mi", "Filesystem", PLUGIN))
        .await
        .unwrap();
    let pv_name = format!("pvc-{}", data.uid().unwrap());
    let pv = wait_pv(&pvs, &pv_name).await;
    let spec = pv.spec.clone().unwrap();
    let source = spec.vsphere_volume.clone().unwrap();
    let file = format!("kubernetes-dynamic-{pv_name}.vmdk");
    assert_eq!(source.volume_path, format!("[LocalDS_1] kubevols/{file}"));
    assert_eq!(source.fs_type.as_deref(), Some("xfs"));
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(pv.labels()["topology.kubernetes.io/zone"], "zone-a");
    assert_eq!(pv.labels()["topology.kubernetes.io/region"], "region-1");
    assert_eq!(pv.annotations()["pv.kubernetes.io/provisioned-by"], PLUGIN);
    assert!(
        kubevols(&sim, "LocalDS_1").contains(&file),
        "{:?}",
        kubevols(&sim, "LocalDS_1")
    );
    assert!(!kubevols(&sim, "LocalDS_0").contains(&file));

    // Resize: bind the claim as the binder would, then grow its request (the admission
    // webhook would deny it; without one the expander says why not, by name).
    bind_and_grow(&claims, "data", &pv_name, "2Gi", "3Gi").await;
    let events: Api<Event> = Api::namespaced(env.client(), env.namespace());
    let note = eventually(
        "the claim's VolumeResizeFailed event",
        Duration::from_secs(60),
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("VolumeResizeFailed"))
                .and_then(|e| e.message)
        },
    )
    .await;
    assert!(note.contains("does not support volume expansion"), "{note}");
    let pv = pvs.get(&pv_name).await.unwrap();
    assert_eq!(pv.spec.unwrap().capacity.unwrap()["storage"].0, "2Gi");

    // Reclaim Delete: the claim goes, the VMDK goes, then the PV.
    delete_claim(&claims, "data").await;
    eventually(
        "the VMDK to be deleted",
        Duration::from_secs(60),
        || async { (!kubevols(&sim, "LocalDS_1").contains(&file)).then_some(()) },
    )
    .await;
    wait_pv_deleted(&pvs, &pv_name).await;

    // From the simulator's side: each change was asked for once (the test's govc only reads).
    for method in [
        "MakeDirectory",
        "CreateVirtualDisk_Task",
        "DeleteVirtualDisk_Task",
    ] {
        assert_eq!(requests(tmp.path(), method), 1, "{method}");
    }
    assert_eq!(requests(tmp.path(), "ExtendVirtualDisk_Task"), 0);

    drop(kcm);
    let _ = classes.delete(&class, &DeleteParams::default()).await;
    drop(sim);
    env.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsphere_disks_attached_to_the_pods_vm_and_detached_after() {
    let _group = hypercloud_testenv::group("controller_manager_attach_detach").await;
    let env = hypercloud_testenv::TestEnv::new("kcm-vsphere-attach")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let (sim, conf) = inventory(tmp.path(), "");
    let uuid = sim.vm_uuid(VM);
    sim.govc(&["datastore.mkdir", "-ds", "LocalDS_0", "kubevols"]);
    sim.govc(&[
        "datastore.disk.create",
        "-ds",
        "LocalDS_0",
        "-size",
        "1G",
        "kubevols/vad-data.vmdk",
    ]);
    let path = "[LocalDS_0] kubevols/vad-data.vmdk";

    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), env.namespace());
    // The Node's provider ID names the VM by its BIOS UUID, as the cloud-node controller sets.
    let node = env.unique_name("vad");
    let pv_name = env.unique_name("vad-pv");
    attach_fixture(
        &client,
        env.namespace(),
        &[(&node, format!("vsphere://{uuid}"))],
        &pv_name,
        json!({"vsphereVolume": {"volumePath": path, "fsType": "ext4"}}),
    )
    .await;

    let kcm = start_kcm(
        tmp.path(),
        env.control_plane().kubeconfig(),
        &conf,
        "attachdetach",
    );

    let list = run_pod_until_attached(&pods, &nodes, "web", &node).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].0, format!("{PLUGIN}/{path}"));
    assert!(list[0].1.starts_with("/dev/disk/by-id/wwn-0x"), "{list:?}");
    assert!(
        vm_disks(&sim, VM).iter().any(|f| f == path),
        "{:?}",
        vm_disks(&sim, VM)
    );

    delete_pod_until_detached(&pods, &nodes, "web", &node).await;
    eventually(
        "the VM to show the disk detached",
        Duration::from_secs(30),
        || async { vm_disks(&sim, VM).iter().all(|f| f != path).then_some(()) },
    )
    .await;
    // Removed from the VM, not destroyed; one ReconfigVM_Task each way, as vcsim saw them.
    assert!(kubevols(&sim, "LocalDS_0").contains(&"vad-data.vmdk".to_owned()));
    assert_eq!(requests(tmp.path(), "ReconfigVM_Task"), 2);
    assert_eq!(requests(tmp.path(), "DeleteVirtualDisk_Task"), 0);

    drop(kcm);
    drop(sim);
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_helper_waits_for_the_vsphere_attach_and_reports_the_device() {
    let _group = hypercloud_testenv::group("kubelet_helper_volumes").await;
    let env = hypercloud_testenv::TestEnv::new("kubelet-vsphere-volumes")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let uuid_file = tmp.path().join("product_uuid");
    let (sim, conf) = inventory(
        tmp.path(),
        &format!(
            "[Hypercloud]\nproduct-uuid-file = {}\n",
            uuid_file.display()
        ),
    );
    let node = env.unique_name("kvs-node");
    sim.set_guest(VM, &node, "10.20.0.5");
    let uuid = sim.vm_uuid(VM);
    std::fs::write(&uuid_file, uuid.to_uppercase()).unwrap();
    sim.govc(&["datastore.mkdir", "-ds", "LocalDS_0", "kubevols"]);
    sim.govc(&[
        "datastore.disk.create",
        "-ds",
        "LocalDS_0",
        "-size",
        "1G",
        "kubevols/kvs-data.vmdk",
    ]);
    let path = "[LocalDS_0] kubevols/kvs-data.vmdk";
    let unique = format!("{PLUGIN}/{path}");

    let client = env.client();
    let ns = env.namespace();
    let nodes: Api<Node> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    // The kubelet registers the Node.
    let pv_name = env.unique_name("kvs-pv");
    attach_fixture(
        &client,
        ns,
        &[],
        &pv_name,
        json!({"vsphereVolume": {"volumePath": path, "fsType": "ext4"}}),
    )
    .await;

    let kubeconfig = env.control_plane().kubeconfig();
    let mut cmd = personality(BIN, "kubelet-helper");
    cmd.arg("--cloud-provider=vsphere")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--hostname-override={node}"))
        .arg("--v=2");
    let kubelet = Proc::spawn_with(
        "kubelet-helper",
        cmd,
        tmp.path().join("kubelet.log"),
        Stdout::Log,
    );
    let registered = eventually(
        "the kubelet to register its Node",
        Duration::from_secs(60),
        || async { nodes.get_opt(&node).await.unwrap() },
    )
    .await;
    assert_eq!(
        registered.spec.unwrap().provider_id,
        Some(format!("vsphere://{uuid}"))
    );

    // The pod first, then the controller: the kubelet reports the volume in use and waits.
    pods.create(&pp, &pod("web", &node, "data")).await.unwrap();
    eventually(
        "the kubelet to wait for the attach",
        Duration::from_secs(30),
        || async {
            kubelet
                .log()
                .contains(&format!("volume {unique} (volume {pv_name:?}, pods {ns}/web): reported in use; waiting for it to be attached"))
                .then_some(())
        },
    )
    .await;
    assert!(vm_disks(&sim, VM).iter().all(|f| f != path));

    let kcm = start_kcm(tmp.path(), kubeconfig, &conf, "attachdetach");
    let said = eventually(
        "the kubelet to report the device",
        Duration::from_secs(60),
        || async {
            kubelet
                .log()
                .lines()
                .find(|l| l.starts_with(&format!("volume {unique} ")) && l.contains("is attached"))
                .map(str::to_owned)
        },
    )
    .await;
    assert!(
        said.contains("is attached to this node's instance at /dev/disk/by-id/wwn-0x"),
        "{said}"
    );
    assert!(vm_disks(&sim, VM).iter().any(|f| f == path));

    // The pod goes: the kubelet lets the volume go, the controller removes it from the VM.
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(
        "the VM to show the disk detached",
        Duration::from_secs(60),
        || async { vm_disks(&sim, VM).iter().all(|f| f != path).then_some(()) },
    )
    .await;
    assert!(attached(&nodes, &node).await.is_empty());

    drop(kcm);
    drop(kubelet);
    drop(sim);
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
}
