//! The external layout's storage path, with the upstream parts unchanged: the csi-driver
//! personality (controller and node) on a backed local cloud, the upstream external-provisioner,
//! external-attacher and external-resizer (hack/csi-tools.sh) and the upstream
//! kube-controller-manager's attach/detach, PV binder and expander controllers, against the
//! real apiserver; the kubelet-helper (external) registers the driver (CSINode) and stages and
//! publishes its volumes. A claim is provisioned, attached, staged and published (a real ext4
//! mount under the kubelet's root dir), written, detached, grown offline by the resizer,
//! attached again with its data, then detached and deleted: every step checked from the cloud
//! with the official openstack CLI.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hypercloud_testenv::localcloud::{
    cli_json, mounts_under, openstack_json, state_dir, LoopGuard, MountGuard, Serve,
};
use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::{cluster, TestEnv};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::process::hypercloud;

const DRIVER: &str = "cinder.csi.openstack.org";
const NODE: &str = "csi-e2e-node";

fn sidecar(name: &str, socket: &Path, kubeconfig: &Path, dir: &Path, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(hypercloud_testenv::csi_tool(name));
    cmd.arg(format!("--csi-address={}", socket.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--v=3")
        .args(extra);
    Proc::spawn(name, cmd, dir.join(format!("{name}.log")))
}

fn volume_show(state: &Path, id: &str) -> serde_json::Value {
    openstack_json(state, &["volume", "show", id])
}

async fn apply(client: &kube::Client, value: serde_json::Value) {
    let obj: kube::api::DynamicObject = serde_json::from_value(value.clone()).unwrap();
    let gvk = kube::api::GroupVersionKind::try_from(obj.types.as_ref().unwrap()).unwrap();
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<kube::api::DynamicObject> = match obj.namespace() {
        Some(ns) => Api::namespaced_with(client.clone(), &ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        &obj.name_any(),
        &PatchParams::apply("csi-e2e").force(),
        &Patch::Apply(&obj),
    )
    .await
    .unwrap();
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "containers": [{"name": "c", "image": "busybox",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }))
    .unwrap()
}

/// The pod's mount of the PV under the kubelet root dir, once published.
fn target(root: &Path, pod: &Pod, pv: &str) -> std::path::PathBuf {
    root.join("pods")
        .join(pod.uid().unwrap())
        .join("volumes/kubernetes.io~csi")
        .join(pv)
        .join("mount")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sidecars_provision_attach_mount_grow_detach_delete() {
    let _group = hypercloud_testenv::group("csi_sidecars").await;
    let env = TestEnv::new("e2e-csi").await.expect("testenv");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let kubeconfig = env.control_plane().kubeconfig().to_path_buf();
    let client = env.client();
    let ns = env.namespace().to_owned();

    // The cloud: volumes backed by files, attached ones by loop devices.
    let state = state_dir(&work);
    let _loops = LoopGuard(state.clone());
    let serve = Serve::start_backed(hypercloud(), &state, &[]);
    let conf = dir.join("cloud.conf");
    std::fs::write(&conf, serve.cloud_conf()).unwrap();
    let server = cli_json(
        hypercloud(),
        &state,
        &["instance", "create", NODE, "-o", "json"],
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let root = dir.join("kubelet");
    let _mounts = MountGuard(dir.to_path_buf());

    // The driver (controller and node service in one process, as cinder-csi-plugin can).
    let socket = dir.join("csi.sock");
    let mut driver_cmd = personality(hypercloud(), "csi-driver");
    driver_cmd
        .arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg(format!("--node-name={NODE}"))
        .arg(format!(
            "--device-dir={}",
            serve.devices_of(&server).display()
        ))
        .arg("--v=4");
    let _driver = Proc::spawn_with(
        "csi-driver",
        driver_cmd,
        dir.join("csi-driver.log"),
        Stdout::Log,
    );
    // The kubelet: registers the Node (external), then the driver.
    let mut kubelet_cmd = personality(hypercloud(), "kubelet-helper");
    kubelet_cmd
        .arg("--cloud-provider=external")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--hostname-override={NODE}"))
        .arg(format!("--provider-id=openstack:///{server}"))
        .arg(format!("--csi-driver-endpoint=unix://{}", socket.display()))
        .arg(format!("--root-dir={}", root.display()))
        .arg("--v=2");
    let kubelet = Proc::spawn_with(
        "kubelet-helper",
        kubelet_cmd,
        dir.join("kubelet-helper.log"),
        Stdout::Log,
    );
    let csinodes: Api<CSINode> = Api::all(client.clone());
    let csinode = eventually(
        "the CSINode with the driver",
        Duration::from_secs(60),
        || async {
            csinodes
                .get_opt(NODE)
                .await
                .ok()
                .flatten()
                .filter(|c| c.spec.drivers.iter().any(|d| d.name == DRIVER))
        },
    )
    .await;
    let d = &csinode.spec.drivers[0];
    assert_eq!(d.node_id, server);
    assert_eq!(
        csinode.annotations()["storage.alpha.kubernetes.io/migrated-plugins"],
        "kubernetes.io/cinder"
    );

    // Upstream: the controller-manager's volume controllers and the three sidecars.
    let _kcm = cluster::kube_controller_manager(
        &kubeconfig,
        dir,
        &[
            "--controllers=persistentvolume-binder-controller,persistentvolume-attach-detach-controller,persistentvolume-expander-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller".into(),
            "--leader-elect=false".into(),
        ],
    );
    let _provisioner = sidecar(
        "csi-provisioner",
        &socket,
        &kubeconfig,
        dir,
        &["--extra-create-metadata"],
    );
    let _attacher = sidecar("csi-attacher", &socket, &kubeconfig, dir, &[]);
    let _resizer = sidecar("csi-resizer", &socket, &kubeconfig, dir, &[]);

    apply(
        &client,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": DRIVER}, "spec": {"attachRequired": true, "podInfoOnMount": false}}),
    )
    .await;
    let class = env.unique_name("csi-cinder");
    apply(
        &client,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class}, "provisioner": DRIVER, "allowVolumeExpansion": true,
        "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
    )
    .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    claims.create(&PostParams::default(), &claim).await.unwrap();

    // Provisioned: a PV of the driver, the volume in the cloud.
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv_name = eventually("the claim bound", Duration::from_secs(90), || async {
        claims.get("data").await.ok()?.spec?.volume_name
    })
    .await;
    let pv = pvs.get(&pv_name).await.unwrap();
    let csi = pv.spec.as_ref().unwrap().csi.clone().unwrap();
    assert_eq!(csi.driver, DRIVER);
    let volume = csi.volume_handle.clone();
    let shown = volume_show(&state, &volume);
    assert_eq!(shown["size"], 1);
    assert_eq!(shown["name"], pv_name.as_str());
    assert_eq!(
        shown["properties"]["kubernetes.io/created-for/pvc/name"],
        "data"
    );

    // A pod on the node: attached by the attacher, staged and published by the kubelet.
    // (No service-account controller runs: the namespace's default account is made here.)
    apply(
        &client,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": ns}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let p1 = pods
        .create(&PostParams::default(), &pod("writer"))
        .await
        .unwrap();
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    eventually(
        "the VolumeAttachment attached",
        Duration::from_secs(90),
        || async {
            vas.list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|a| {
                    a.spec.source.persistent_volume_name.as_deref() == Some(pv_name.as_str())
                        && a.status.as_ref().is_some_and(|s| s.attached)
                })
        },
    )
    .await;
    let shown = volume_show(&state, &volume);
    assert_eq!(shown["status"], "in-use");
    assert_eq!(shown["attachments"][0]["server_id"], server.as_str());
    let t1 = target(&root, &p1, &pv_name);
    eventually(
        "the pod's volume mounted",
        Duration::from_secs(60),
        || async { mounts_under(dir).contains(&t1).then_some(()) },
    )
    .await;
    std::fs::write(t1.join("greeting"), "written through the CSI sidecars\n").unwrap();

    // The pod goes: unpublished, unstaged, detached.
    pods.delete("writer", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(
        "the volume detached in the cloud",
        Duration::from_secs(90),
        || async { (volume_show(&state, &volume)["status"] == "available").then_some(()) },
    )
    .await;
    assert!(mounts_under(dir).is_empty(), "{:?}", mounts_under(dir));

    // Grown offline by the resizer: the cloud holds 2 GiB.
    claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
        )
        .await
        .unwrap();
    eventually(
        "the volume grown in the cloud",
        Duration::from_secs(90),
        || async { (volume_show(&state, &volume)["size"] == 2).then_some(()) },
    )
    .await;

    // Attached again: the data is there, on the grown file system.
    let p2 = pods
        .create(&PostParams::default(), &pod("reader"))
        .await
        .unwrap();
    let t2 = target(&root, &p2, &pv_name);
    eventually(
        "the second pod's volume mounted",
        Duration::from_secs(90),
        || async { mounts_under(dir).contains(&t2).then_some(()) },
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(t2.join("greeting")).unwrap(),
        "written through the CSI sidecars\n"
    );
    let st = rustix::fs::statvfs(&t2).unwrap();
    assert!(
        st.f_blocks * st.f_frsize > 3 << 29,
        "file system not grown: {} bytes",
        st.f_blocks * st.f_frsize
    );

    // Pod and claim deleted: detached, then the volume deleted in the cloud.
    pods.delete("reader", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the volume deleted in the cloud",
        Duration::from_secs(120),
        || async {
            let all = openstack_json(&state, &["volume", "list"]);
            (!all.as_array()?.iter().any(|v| v["ID"] == volume.as_str())).then_some(())
        },
    )
    .await;
    assert!(mounts_under(dir).is_empty());
    drop(kubelet);
}
