//! What the volume tests of every cloud share (controller_manager_*volumes.rs,
//! controller_manager_*attach*.rs, kubelet_helper_volumes.rs): the controller-manager running
//! only the controllers under test, the objects the upstream binder, scheduler and protection
//! controllers would leave or change (the test plays them: no upstream controller runs against
//! the test apiserver), and the Node's view of attachments. What the cloud says stays in each
//! cloud's test, asked with that cloud's own client.

#![allow(clippy::unwrap_used)]
// Each provider feature brings its own tests; a build without one leaves fixtures unused.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

#[cfg(feature = "openstack")]
use hypercloud_testenv::localcloud::openstack_json;
use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};

/// The credentials every process talking to moto gets (moto checks no signature).
pub const MOTO_ENV: &[(&str, &str)] = &[
    ("AWS_ACCESS_KEY_ID", "AKIDHYPERCLOUDTEST"),
    ("AWS_SECRET_ACCESS_KEY", "secret"),
    ("AWS_CONFIG_FILE", "/nonexistent"),
    ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
];

/// The `controller-manager` personality of `bin` for `provider`, running only `controllers`,
/// its log in `dir/kcm.log`; `env` is added to its environment.
pub fn start_controller_manager(
    bin: &str,
    dir: &Path,
    kubeconfig: &Path,
    provider: &str,
    cloud_conf: &Path,
    controllers: &str,
    env: &[(&str, &str)],
) -> Proc {
    let mut cmd = personality(bin, "controller-manager");
    cmd.arg(format!("--cloud-provider={provider}"))
        .arg(format!("--cloud-config={}", cloud_conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--leader-elect=false")
        .arg("--secure-port=0")
        .arg(format!("--controllers={controllers}"))
        .arg("--v=2")
        .envs(env.iter().copied());
    Proc::spawn_with("controller-manager", cmd, dir.join("kcm.log"), Stdout::Null)
}

/// The controller-manager of the local cloud running only the attach/detach controller.
pub fn start_kcm(bin: &str, dir: &Path, kubeconfig: &Path, cloud_conf: &Path) -> Proc {
    start_controller_manager(
        bin,
        dir,
        kubeconfig,
        "local",
        cloud_conf,
        "attachdetach",
        &[],
    )
}

/// A StorageClass of `provisioner` that allows expansion.
pub fn class(
    name: &str,
    provisioner: &str,
    params: Value,
    mode: &str,
    reclaim: &str,
) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "provisioner": provisioner,
        "parameters": params,
        "reclaimPolicy": reclaim,
        "allowVolumeExpansion": true,
        "volumeBindingMode": mode,
    }))
    .unwrap()
}

/// A claim as the binder leaves it for an external provisioner named `provisioner`.
pub fn claim(
    name: &str,
    class: &str,
    size: &str,
    mode: &str,
    provisioner: &str,
) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            "volume.kubernetes.io/storage-provisioner": provisioner,
            "volume.beta.kubernetes.io/storage-provisioner": provisioner,
        }},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                 "volumeMode": mode, "resources": {"requests": {"storage": size}}},
    }))
    .unwrap()
}

/// One cloud's attach tests take turns (each also takes the attach/detach group, beside the
/// other clouds' attach tests, whose controllers leave this cloud's volumes alone): an
/// attach/detach controller acts on every Node of the shared apiserver, so two runs of one
/// cloud would each try the other's Nodes in their own simulator (its instance unknown there,
/// or, with vcsim's fixed UUIDs, the same), retrying with back-off, spending the other's faults
/// and counting requests that are not theirs.
pub async fn attach_turn(cloud: &str) -> tokio::sync::MutexGuard<'static, ()> {
    use tokio::sync::Mutex;
    static AWS: Mutex<()> = Mutex::const_new(());
    static GCE: Mutex<()> = Mutex::const_new(());
    static VSPHERE: Mutex<()> = Mutex::const_new(());
    static OTHER: Mutex<()> = Mutex::const_new(());
    match cloud {
        "aws" => &AWS,
        "gce" => &GCE,
        "vsphere" => &VSPHERE,
        _ => &OTHER,
    }
    .lock()
    .await
}

/// The PV once it exists.
pub async fn wait_pv(pvs: &Api<PersistentVolume>, name: &str) -> PersistentVolume {
    eventually(&format!("PV {name}"), Duration::from_secs(90), || async {
        pvs.get_opt(name).await.unwrap()
    })
    .await
}

/// A Node as the cloud-node controller leaves it in `zone` of `region` (its topology labels
/// only): where the scheduler's pick sends a WaitForFirstConsumer volume.
pub async fn zoned_node(nodes: &Api<Node>, name: &str, zone: &str, region: &str) {
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": {
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": region}}}))
    .unwrap();
    nodes
        .create(&kube::api::PostParams::default(), &node)
        .await
        .unwrap();
}

/// Creates the 1Gi Filesystem claim `name` of a WaitForFirstConsumer `class` for
/// `provisioner`, and sees no PV come for 3 s (nothing before the scheduler's pick); returns
/// the name the provisioner will give its PV.
pub async fn waiting_claim(
    claims: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    name: &str,
    class: &str,
    provisioner: &str,
) -> String {
    let created = claims
        .create(
            &kube::api::PostParams::default(),
            &claim(name, class, "1Gi", "Filesystem", provisioner),
        )
        .await
        .unwrap();
    let pv = format!("pvc-{}", created.metadata.uid.unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        pvs.get_opt(&pv).await.unwrap().is_none(),
        "a PV before the scheduler picked a Node"
    );
    pv
}

/// The scheduler's pick, `volume.kubernetes.io/selected-node` = `node` on the claim; then the
/// PV `pv` once the provisioner has made it.
pub async fn select_node(
    claims: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    claim: &str,
    node: &str,
    pv: &str,
) -> PersistentVolume {
    claims
        .patch(
            claim,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {
                "volume.kubernetes.io/selected-node": node}}})),
        )
        .await
        .unwrap();
    wait_pv(pvs, pv).await
}

/// Removes an object's finalizers, as the protection controllers would; gone is fine.
pub async fn drop_finalizers<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {"finalizers": null}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("dropping finalizers of {name}: {e}"),
    }
}

/// Binds the claim to its PV of `capacity` as the binder would, then grows its request to
/// `grow_to`.
pub async fn bind_and_grow(
    claims: &Api<PersistentVolumeClaim>,
    claim: &str,
    pv: &str,
    capacity: &str,
    grow_to: &str,
) {
    let pp = PatchParams::default();
    claims
        .patch(
            claim,
            &pp,
            &Patch::Merge(&json!({"spec": {"volumeName": pv}})),
        )
        .await
        .unwrap();
    claims
        .patch_status(
            claim,
            &pp,
            &Patch::Merge(&json!({"status": {"phase": "Bound",
                "accessModes": ["ReadWriteOnce"], "capacity": {"storage": capacity}}})),
        )
        .await
        .unwrap();
    claims
        .patch(
            claim,
            &pp,
            &Patch::Merge(&json!({"spec": {"resources": {"requests": {"storage": grow_to}}}})),
        )
        .await
        .unwrap();
}

/// Deletes the claim and drops its protection finalizer.
pub async fn delete_claim(claims: &Api<PersistentVolumeClaim>, name: &str) {
    claims.delete(name, &DeleteParams::default()).await.unwrap();
    drop_finalizers(claims, name).await;
}

/// Waits until the PV is deleted (or being deleted), then drops its protection finalizer.
pub async fn wait_pv_deleted(pvs: &Api<PersistentVolume>, name: &str) {
    eventually("the PV to be deleted", Duration::from_secs(30), || async {
        let pv = pvs.get_opt(name).await.unwrap();
        pv.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    drop_finalizers(pvs, name).await;
}

/// The servers a volume is attached to, as `openstack volume show` lists them.
#[cfg(feature = "openstack")]
pub fn attached_servers(state: &Path, id: &str) -> (String, Vec<String>) {
    let v = openstack_json(state, &["volume", "show", id]);
    let servers = v["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["server_id"].as_str().unwrap().to_owned())
        .collect();
    (v["status"].as_str().unwrap().to_owned(), servers)
}

/// The Node's `volumesAttached` as (name, devicePath).
pub async fn attached(nodes: &Api<Node>, node: &str) -> Vec<(String, String)> {
    nodes
        .get_status(node)
        .await
        .unwrap()
        .status
        .and_then(|s| s.volumes_attached)
        .unwrap_or_default()
        .into_iter()
        .map(|v| (v.name, v.device_path))
        .collect()
}

pub fn pod(name: &str, node: &str, claim: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "automountServiceAccountToken": false,
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
    }))
    .unwrap()
}

/// What the attach tests set up in the cluster, as the upstream controllers would leave it:
/// the namespace's default ServiceAccount (the ServiceAccount admission wants it and no
/// kube-controller-manager makes it), the Nodes `(name, provider ID)` (a leftover of an
/// earlier run on the same apiserver goes first), and a Retain PV `pv_name` of the in-tree
/// volume `source` (e.g. `{"cinder": {"volumeID": ..}}`) bound to the claim `data`.
pub async fn attach_fixture(
    client: &kube::Client,
    ns: &str,
    nodes: &[(&str, String)],
    pv_name: &str,
    source: Value,
) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let pp = kube::api::PostParams::default();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    let _ = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&pp, &sa)
        .await;
    let node_api: Api<Node> = Api::all(client.clone());
    for (name, provider_id) in nodes {
        let _ = node_api.delete(name, &DeleteParams::default()).await;
        let n: Node = serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"providerID": provider_id}}),
        )
        .unwrap();
        node_api.create(&pp, &n).await.unwrap();
    }
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                          "persistentVolumeReclaimPolicy": "Retain",
                          "claimRef": {"namespace": ns, "name": "data"}});
    for (k, v) in source.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let pv: PersistentVolume =
        serde_json::from_value(json!({"metadata": {"name": pv_name}, "spec": spec})).unwrap();
    Api::<PersistentVolume>::all(client.clone())
        .create(&pp, &pv)
        .await
        .unwrap();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": pv_name, "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .create(&pp, &claim)
        .await
        .unwrap();
}

/// Creates pod `pod_name` on `node` using the claim `data` and waits until the Node's
/// `volumesAttached` lists a volume; returns that list. (Up to 2 minutes: the fault tests
/// retry through errors, throttling and a stuck attach with the controller's back-off, which a
/// loaded 2-core machine stretches.)
pub async fn run_pod_until_attached(
    pods: &Api<Pod>,
    nodes: &Api<Node>,
    pod_name: &str,
    node: &str,
) -> Vec<(String, String)> {
    pods.create(
        &kube::api::PostParams::default(),
        &pod(pod_name, node, "data"),
    )
    .await
    .unwrap();
    eventually(
        &format!("a volume in {node}'s volumesAttached"),
        Duration::from_secs(120),
        || async {
            let list = attached(nodes, node).await;
            (!list.is_empty()).then_some(list)
        },
    )
    .await
}

/// Deletes pod `pod_name` at once and waits until `node`'s `volumesAttached` is empty (the
/// controller takes the volume off the list first, then detaches it, as upstream).
pub async fn delete_pod_until_detached(
    pods: &Api<Pod>,
    nodes: &Api<Node>,
    pod_name: &str,
    node: &str,
) {
    pods.delete(pod_name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(
        &format!("the volume to leave {node}"),
        Duration::from_secs(120),
        || async { attached(nodes, node).await.is_empty().then_some(()) },
    )
    .await;
}
