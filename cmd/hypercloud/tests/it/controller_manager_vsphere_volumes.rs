//! The in-tree volume path of the `controller-manager` personality with the `vsphere`
//! provider: the real binary, the real apiserver (pkg/testenv) and VMware's vCenter simulator
//! (vcsim), every cloud-side fact checked with govc. The controller-manager reaches vcsim
//! through the fault proxy (proxy.rs), which counts what each step costs in vCenter requests.
//!
//! - Provisioning: a `kubernetes.io/vsphere-volume` claim becomes a VMDK under `kubevols/` on
//!   the class's datastore (`govc datastore.ls`) and a `vsphereVolume` PV with the
//!   datastore's zone; growing the claim is refused by name (upstream v1.20's plugin had no
//!   expansion); reclaim Delete removes the file, then the PV. WaitForFirstConsumer with a
//!   class that names no datastore: nothing until the claim has a selected Node, then a VMDK
//!   on the most free datastore shared by the hosts of that Node's zone; reclaim Retain keeps
//!   the VMDK and the PV. As `controller_manager_volumes`, the test plays the binder and the
//!   protection controllers, and takes that module's group.
//! - Attaching: a pod's `vsphereVolume` is added to the VM of its Node's provider ID
//!   (`govc device.info -vm`, the Node's `volumesAttached` with the disk's `wwn-0x` path) and
//!   removed, file kept, when the pod goes; also with the proxy answering the
//!   `ReconfigVM_Task` that adds the disk and the one that removes it with SOAP faults (5xx),
//!   and leaving an add's task `running` past the provider's `task-timeout`: the controller
//!   retries with back-off and converges, the disk on the VM once (one add reached vcsim).
//!   As `controller_manager_gce_attach`, no scheduler or kubelet runs; it takes the
//!   attach/detach group.
//! - The kubelet's part: `kubelet-helper --cloud-provider=vsphere` registers its Node from its
//!   own VM (SMBIOS UUID file), reports the pod's volume in use, waits for the attach and
//!   reports the disk's `wwn-0x` device; it takes the kubelet-helper volumes group.
#![cfg(all(feature = "vsphere", feature = "openstack"))]
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::vcsim::Vcsim;
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::proxy::{ErrorBody, Fault, Proxy};
use crate::volume_fixtures::{
    attach_fixture, attach_turn, attached, bind_and_grow, claim, class as class_of, delete_claim,
    delete_pod_until_detached, drop_finalizers, pod, run_pod_until_attached, select_node,
    start_controller_manager, wait_pv, wait_pv_deleted, waiting_claim, zoned_node,
};
use crate::BIN;

const PLUGIN: &str = "kubernetes.io/vsphere-volume";
const VM: &str = "/DC0/vm/DC0_H0_VM0";
const HOST: &str = "/DC0/host/DC0_H0/DC0_H0";
/// A host of the cluster DC0_C0, which no zone tag reaches.
const CLUSTER_HOST: &str = "/DC0/host/DC0_C0/DC0_C0_H0";

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
    trace_count(dir, &format!("<{method} xmlns=\"urn:vim25\">"))
}

/// How many times `text` is in vcsim's SOAP trace.
fn trace_count(dir: &Path, text: &str) -> usize {
    std::fs::read_to_string(dir.join("trace.log"))
        .unwrap_or_default()
        .matches(text)
        .count()
}

/// How many SOAP requests vcsim has received (by anyone, govc included), from its trace: the
/// method elements of requests (`<Method xmlns="urn:vim25">`), not of answers.
pub(crate) fn soap_requests(dir: &Path) -> usize {
    let trace = std::fs::read_to_string(dir.join("trace.log")).unwrap_or_default();
    trace
        .match_indices(" xmlns=\"urn:vim25\">")
        .filter(|(at, _)| {
            let head = &trace[..*at];
            let name = &head[head.rfind('<').map_or(0, |p| p + 1)..];
            !name.is_empty() && !name.contains(char::is_whitespace) && !name.ends_with("Response")
        })
        .count()
}

/// What a `ReconfigVM_Task` that adds a device and one that removes it carry.
const ADD_DEVICE: &str = "<operation>add</operation>";
const REMOVE_DEVICE: &str = "<operation>remove</operation>";

/// The most vCenter requests (SOAP and vAPI, through the proxy) each step may cost. Measured
/// (2026-11-27, a fresh controller-manager: its first VM listing makes a container view, its
/// first tag read a vAPI session): provision 13 (6 SOAP: the datastore, its hosts and one's
/// ancestry for the zone labels, `MakeDirectory`, `CreateVirtualDisk_Task`, its task; 7 vAPI:
/// the session, the tags and categories of the datastore and the host's ancestry), attach 6
/// (the VMs' devices, `ReconfigVM_Task`, its task, then the VM and its devices again for the
/// device path), detach 3, delete 5 (the datastore, the VMs' devices, `DeleteVirtualDisk_Task`,
/// its task); a provision in a zone 9 (8 SOAP), warm tags, cold for the other hosts.
const PROVISION_BUDGET: usize = 16;
const ZONED_PROVISION_BUDGET: usize = 12;
const DELETE_BUDGET: usize = 7;
const ATTACH_BUDGET: usize = 8;
const DETACH_BUDGET: usize = 5;

/// vcsim's base URL, for the proxy.
fn sim_url(sim: &Vcsim) -> String {
    format!("https://127.0.0.1:{}", sim.port())
}

/// A vsphere.conf in `dir` as [`inventory`]'s, but reaching vcsim through the proxy (plain
/// HTTP to it; it speaks HTTPS to vcsim), with `hypercloud` added to `[Hypercloud]`.
fn conf_via(dir: &Path, sim: &Vcsim, proxy: &Proxy, hypercloud: &str) -> PathBuf {
    let port = proxy.url.rsplit(':').next().unwrap();
    let text = sim
        .ini_conf(&format!(
            "[Workspace]\ndefault-datastore = \"LocalDS_0\"\n[Hypercloud]\nplain-http = true\n{hypercloud}"
        ))
        .replace(
            &format!("port = \"{}\"", sim.port()),
            &format!("port = \"{port}\""),
        );
    let conf = dir.join("vsphere-via-proxy.conf");
    std::fs::write(&conf, text).unwrap();
    conf
}

/// Once the controller-manager has logged in and started its controllers: what a test counts
/// after that is the controllers' work, not start-up's.
async fn wait_started(kcm: &Proc) {
    eventually(
        "the controller-manager to start its controllers",
        Duration::from_secs(60),
        || async { kcm.log().contains("starting controllers").then_some(()) },
    )
    .await;
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
pub(crate) fn vm_disks(sim: &Vcsim, vm: &str) -> Vec<String> {
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
    let (sim, _) = inventory(tmp.path(), "");
    // A datastore outside zone-a (on a host of the cluster, which has no zone tag) whose name
    // sorts first: a zone's volume must not land on it, however free it is.
    let other = tmp.path().join("ds-other");
    std::fs::create_dir_all(&other).unwrap();
    sim.govc(&[
        "datastore.create",
        "-type",
        "local",
        "-name",
        "AnotherDS",
        "-path",
        &other.display().to_string(),
        CLUSTER_HOST,
    ]);
    let proxy = Proxy::start(&sim_url(&sim), &[]).await;
    let conf = conf_via(tmp.path(), &sim, &proxy, "");

    let client = env.client();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), env.namespace());
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
    wait_started(&kcm).await;

    // A VMDK of the request rounded up to GiB on the class's datastore, and its PV.
    let (before_provision, soap_before) = (proxy.requests(), soap_requests(tmp.path()));
    let data = claims
        .create(&pp, &claim("data", &class, "1500Mi", "Filesystem", PLUGIN))
        .await
        .unwrap();
    let pv_name = format!("pvc-{}", data.uid().unwrap());
    let pv = wait_pv(&pvs, &pv_name).await;
    let provision_requests = proxy.requests() - before_provision;
    // Only the controller-manager spoke to vcsim meanwhile: its SOAP share, from the trace.
    let provision_soap = soap_requests(tmp.path()) - soap_before;
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
    let events: Api<Event> = Api::namespaced(client.clone(), env.namespace());
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
    let before_delete = proxy.requests();
    delete_claim(&claims, "data").await;
    eventually(
        "the VMDK to be deleted",
        Duration::from_secs(60),
        || async { (!kubevols(&sim, "LocalDS_1").contains(&file)).then_some(()) },
    )
    .await;
    let delete_requests = proxy.requests() - before_delete;
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
    // What a provision and a delete cost in vCenter requests (SOAP and vAPI, as the proxy
    // counts them; the closing note of issue 31 quotes them): a budget, so that a change that
    // adds calls is seen.
    eprintln!(
        "vsphere cloud requests: provision {provision_requests} ({provision_soap} SOAP), delete {delete_requests}"
    );
    assert!(
        provision_requests <= PROVISION_BUDGET,
        "provisioning took {provision_requests} requests"
    );
    assert!(
        delete_requests <= DELETE_BUDGET,
        "deleting took {delete_requests} requests"
    );

    // WaitForFirstConsumer and reclaim Retain: nothing until the scheduler picks a Node, then
    // a VMDK on a datastore of that Node's zone (the class names none): of those mounted on
    // every host of zone-a (DC0_H0: LocalDS_0 and LocalDS_1), the most free, LocalDS_1 (vcsim
    // counts LocalDS_0's VM disks), not the default LocalDS_0 nor AnotherDS outside the zone.
    // The claim goes; the VMDK and the PV stay.
    let delayed = env.unique_name("vmdk-later");
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
    let node = env.unique_name("vmdk-node");
    zoned_node(&nodes, &node, "zone-a", "region-1").await;
    let later_pv = waiting_claim(&claims, &pvs, "later", &delayed, PLUGIN).await;
    let later_file = format!("kubernetes-dynamic-{later_pv}.vmdk");
    assert_eq!(requests(tmp.path(), "CreateVirtualDisk_Task"), 1);
    let (before_zoned, soap_before) = (proxy.requests(), soap_requests(tmp.path()));
    let kept = select_node(&claims, &pvs, "later", &node, &later_pv).await;
    let zoned_requests = proxy.requests() - before_zoned;
    let zoned_soap = soap_requests(tmp.path()) - soap_before;
    eprintln!("vsphere cloud requests: provision in a zone {zoned_requests} ({zoned_soap} SOAP)");
    assert!(
        zoned_requests <= ZONED_PROVISION_BUDGET,
        "provisioning in a zone took {zoned_requests} requests"
    );
    assert_eq!(
        kept.spec
            .as_ref()
            .unwrap()
            .vsphere_volume
            .as_ref()
            .unwrap()
            .volume_path,
        format!("[LocalDS_1] kubevols/{later_file}")
    );
    assert_eq!(kept.labels()["topology.kubernetes.io/zone"], "zone-a");
    assert_eq!(kept.labels()["topology.kubernetes.io/region"], "region-1");
    assert_eq!(
        kept.spec
            .as_ref()
            .unwrap()
            .persistent_volume_reclaim_policy
            .as_deref(),
        Some("Retain")
    );
    assert!(kubevols(&sim, "LocalDS_1").contains(&later_file));
    for ds in ["LocalDS_0", "AnotherDS"] {
        assert!(!kubevols(&sim, ds).contains(&later_file), "{ds}");
    }
    delete_claim(&claims, "later").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        kubevols(&sim, "LocalDS_1").contains(&later_file),
        "the Retain VMDK is gone"
    );
    let kept = pvs.get(&later_pv).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());
    assert_eq!(requests(tmp.path(), "DeleteVirtualDisk_Task"), 1);

    drop(kcm);
    let _ = pvs.delete(&later_pv, &DeleteParams::default()).await;
    drop_finalizers(&pvs, &later_pv).await;
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    let _ = classes.delete(&delayed, &DeleteParams::default()).await;
    let _ = classes.delete(&class, &DeleteParams::default()).await;
    drop(sim);
    env.cleanup().await.unwrap();
}

/// What the proxy does to the `ReconfigVM_Task` that adds the disk: two SOAP faults (5xx),
/// then one that passes but whose task stays `running` (every poll of it rewritten) until the
/// provider's `task-timeout` (2s); the controller's next try finds the disk on the VM.
const ATTACH_FAULTS: &[Fault] = &[(500, None), (503, None)];
/// And to the one that removes it: two SOAP faults (5xx).
const DETACH_FAULTS: &[Fault] = &[(500, None), (503, Some("1"))];
/// A vSphere task's state as `RetrievePropertiesEx` answers it (vcsim writes the `xsi:type`
/// attribute with a prefix of its own), and the same task stuck.
const TASK_DONE: &str = r#""TaskInfoState">success</val>"#;
const TASK_RUNNING: &str = r#""TaskInfoState">running</val>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsphere_disks_attached_to_the_pods_vm_and_detached_after() {
    attach_and_detach("kcm-vsphere-attach", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsphere_attach_and_detach_converge_through_soap_faults_and_a_stuck_task() {
    attach_and_detach("kcm-vsphere-attach-faults", true).await;
}

/// A pod's disk added to its Node's VM and removed after, the controller-manager speaking to
/// vcsim through the proxy; `misbehave`: the proxy fails and stalls the attach and fails the
/// detach.
async fn attach_and_detach(name: &str, misbehave: bool) {
    let _turn = attach_turn("vsphere").await;
    let _group = hypercloud_testenv::group("controller_manager_attach_detach").await;
    let env = hypercloud_testenv::TestEnv::new(name)
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let (sim, _) = inventory(tmp.path(), "");
    let proxy = Proxy::start(&sim_url(&sim), &[]).await;
    proxy.error_body(ErrorBody::Soap);
    let conf = conf_via(tmp.path(), &sim, &proxy, "task-timeout = 2s\n");
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
    wait_started(&kcm).await;
    let rules = misbehave.then(|| {
        (
            proxy.fail_next("POST", ADD_DEVICE, ATTACH_FAULTS),
            proxy.rewrite_next(
                "POST",
                "<pathSet>info.state</pathSet>",
                usize::MAX,
                TASK_DONE,
                TASK_RUNNING,
            ),
            proxy.fail_next("POST", REMOVE_DEVICE, DETACH_FAULTS),
        )
    });

    let (before_attach, soap_before) = (proxy.requests(), soap_requests(tmp.path()));
    let list = run_pod_until_attached(&pods, &nodes, "web", &node).await;
    let attach_requests = proxy.requests() - before_attach;
    let attach_soap = soap_requests(tmp.path()) - soap_before;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].0, format!("{PLUGIN}/{path}"));
    assert!(list[0].1.starts_with("/dev/disk/by-id/wwn-0x"), "{list:?}");
    // On the VM once, however many times the controller asked: one add reached vCenter.
    assert_eq!(
        vm_disks(&sim, VM).iter().filter(|f| *f == path).count(),
        1,
        "{:?}",
        vm_disks(&sim, VM)
    );
    assert_eq!(trace_count(tmp.path(), ADD_DEVICE), 1);
    if let Some((failed, stuck, _)) = &rules {
        stuck.retire();
        assert_eq!(failed.served(), ATTACH_FAULTS.len());
        assert!(stuck.served() >= 1, "no poll of the stuck task");
        let log = kcm.log();
        assert!(
            log.contains("attaching or detaching volumes, retrying")
                && log.contains("fault proxy: 503")
                && log.contains("still running after 2s (task-timeout)"),
            "the controller did not retry through the faults and the stuck task:\n{log}"
        );
    }

    let before_detach = proxy.requests();
    delete_pod_until_detached(&pods, &nodes, "web", &node).await;
    eventually(
        "the VM to show the disk detached",
        Duration::from_secs(30),
        || async { vm_disks(&sim, VM).iter().all(|f| f != path).then_some(()) },
    )
    .await;
    let detach_requests = proxy.requests() - before_detach;
    // Removed from the VM, not destroyed; one change each way reached vcsim.
    assert!(kubevols(&sim, "LocalDS_0").contains(&"vad-data.vmdk".to_owned()));
    assert_eq!(trace_count(tmp.path(), REMOVE_DEVICE), 1);
    assert_eq!(requests(tmp.path(), "ReconfigVM_Task"), 2);
    assert_eq!(requests(tmp.path(), "DeleteVirtualDisk_Task"), 0);
    if let Some((_, _, detach)) = &rules {
        assert_eq!(detach.served(), DETACH_FAULTS.len());
    } else {
        // What an attach (with the device path) and a detach cost in vCenter requests (the
        // closing note of issue 31 quotes them): a budget, so that a change that adds calls
        // is seen.
        eprintln!(
            "vsphere cloud requests: attach {attach_requests} ({attach_soap} SOAP), detach {detach_requests}"
        );
        assert!(
            attach_requests <= ATTACH_BUDGET,
            "attach took {attach_requests} requests"
        );
        assert!(
            detach_requests <= DETACH_BUDGET,
            "detach took {detach_requests} requests"
        );
    }

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
