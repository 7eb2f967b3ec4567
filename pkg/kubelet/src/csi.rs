//! The kubelet's half of a CSI driver (upstream: the kubelet's plugin registration, which
//! node-driver-registrar triggers, and its volume manager's CSI attacher/mounter).
//!
//! [`register`] asks the driver who this node is (`GetPluginInfo`, `NodeGetInfo`) and writes
//! what the kubelet writes: the node's `CSINode` (driver, node ID, topology keys, volume
//! limit, and the `storage.alpha.kubernetes.io/migrated-plugins` annotation naming the
//! in-tree plugin whose volumes the driver took over), and the Node's topology labels and
//! `csi.volume.kubernetes.io/nodeid` annotation.
//!
//! [`VolumeManager::sync`] then plays the volume manager for the pods bound to the node: the
//! driver's volumes they use (PVs of the driver, and with CSI migration the in-tree plugin's
//! PVs, translated to the driver's volume handle as the kubelet does) are reported in
//! `node.status.volumesInUse`; once their `VolumeAttachment` is attached, each is staged once
//! (`NodeStageVolume` at the global mount path) and published into each pod
//! (`NodePublishVolume`); a pod gone is unpublished, a volume no pod uses unstaged and only
//! then dropped from `volumesInUse`, so the attach/detach controller detaches it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hypercloud_cloudprovider::volume::pod_terminated;
use hypercloud_csi::proto::{
    volume_capability, GetPluginInfoRequest, NodeGetInfoRequest, NodePublishVolumeRequest,
    NodeStageVolumeRequest, NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest, VolumeCapability,
};
use hypercloud_csi::{Client, DriverInfo};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::api::{ListParams, Patch, PatchParams};
use kube::Api;
use serde_json::json;
use sha2::Digest as _;

use crate::{Error, Result};

/// The annotation naming the in-tree plugins whose volumes a node's CSI drivers serve.
pub const MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";
/// The Node annotation mapping driver names to this node's IDs.
pub const NODE_ID_ANNOTATION: &str = "csi.volume.kubernetes.io/nodeid";

fn csi_err(what: &'static str, node: &str, status: tonic::Status) -> Error {
    Error::Csi {
        what,
        node: node.to_owned(),
        message: format!("{:?}: {}", status.code(), status.message()),
    }
}

fn api_err<'a>(what: &'static str, node: &'a str) -> impl Fn(kube::Error) -> Error + 'a {
    move |source| Error::VolumeLookup {
        what,
        node: node.to_owned(),
        source,
    }
}

/// Who the driver says this node is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The driver's name.
    pub driver: String,
    /// The node's ID for the driver.
    pub node_id: String,
    /// The topology segments of the node.
    pub topology: BTreeMap<String, String>,
    /// The most volumes the node attaches (0: no limit given).
    pub max_volumes: i64,
}

/// Registers the driver on `node_name` as the kubelet does (see the module docs); `info`
/// names the in-tree plugin it took over (the migrated-plugins annotation).
pub async fn register(
    client: &kube::Client,
    csi: &Client,
    info: &DriverInfo,
    node_name: &str,
) -> Result<Registration> {
    let plugin = csi
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .map_err(|s| csi_err("GetPluginInfo", node_name, s))?;
    let node_info = csi
        .node_get_info(NodeGetInfoRequest {})
        .await
        .map_err(|s| csi_err("NodeGetInfo", node_name, s))?;
    let reg = Registration {
        driver: plugin.name,
        node_id: node_info.node_id,
        topology: node_info
            .accessible_topology
            .map(|t| t.segments)
            .unwrap_or_default(),
        max_volumes: node_info.max_volumes_per_node,
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get(node_name)
        .await
        .map_err(api_err("its Node", node_name))?;
    let mut ids: BTreeMap<String, String> = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_ID_ANNOTATION))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    ids.insert(reg.driver.clone(), reg.node_id.clone());
    let ids = serde_json::to_string(&ids).unwrap_or_default();
    nodes
        .patch(
            node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "labels": reg.topology,
                "annotations": {NODE_ID_ANNOTATION: ids},
            }})),
        )
        .await
        .map_err(|source| Error::Register {
            node: node_name.to_owned(),
            source,
        })?;
    let mut driver = json!({
        "name": reg.driver,
        "nodeID": reg.node_id,
        "topologyKeys": reg.topology.keys().collect::<Vec<_>>(),
    });
    if reg.max_volumes > 0 {
        driver["allocatable"] = json!({"count": reg.max_volumes});
    }
    let csinode: CSINode = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {
            "name": node_name,
            "annotations": {MIGRATED_PLUGINS: info.in_tree_plugin},
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": node_name,
                "uid": node.metadata.uid.clone().unwrap_or_default(),
            }],
        },
        "spec": {"drivers": [driver]},
    }))
    .map_err(|e| Error::Csi {
        what: "building the CSINode",
        node: node_name.to_owned(),
        message: e.to_string(),
    })?;
    Api::<CSINode>::all(client.clone())
        .patch(
            node_name,
            &PatchParams::apply("hypercloud-kubelet-helper").force(),
            &Patch::Apply(&csinode),
        )
        .await
        .map_err(|source| Error::Register {
            node: node_name.to_owned(),
            source,
        })?;
    Ok(reg)
}

/// One volume of the driver that pods on this node use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsiVolume {
    /// `kubernetes.io/csi/<driver>^<handle>`: the name in `volumesInUse`/`volumesAttached`.
    pub unique_name: String,
    /// The driver's volume handle.
    pub handle: String,
    /// The PV.
    pub pv: String,
    /// `fsType` of the PV (empty: the driver's default).
    pub fs_type: String,
    /// Read-only PV.
    pub read_only: bool,
    /// The pods using it: their UIDs.
    pub pod_uids: BTreeSet<String>,
}

/// The volume handle and fsType of a PV for `driver`: a CSI PV of the driver, or (CSI
/// migration) an in-tree PV of the plugin it took over, translated as csi-translation-lib does
/// (the in-tree volume ID is the handle).
pub fn pv_handle(pv: &PersistentVolume, info: &DriverInfo) -> Option<(String, String, bool)> {
    let spec = pv.spec.as_ref()?;
    if let Some(c) = spec.csi.as_ref().filter(|c| c.driver == info.driver) {
        return Some((
            c.volume_handle.clone(),
            c.fs_type.clone().unwrap_or_default(),
            c.read_only.unwrap_or(false),
        ));
    }
    match info.in_tree_plugin {
        "kubernetes.io/cinder" => spec.cinder.as_ref().map(|c| {
            (
                c.volume_id.clone(),
                c.fs_type.clone().unwrap_or_default(),
                c.read_only.unwrap_or(false),
            )
        }),
        "kubernetes.io/aws-ebs" => spec.aws_elastic_block_store.as_ref().map(|c| {
            (
                c.volume_id.clone(),
                c.fs_type.clone().unwrap_or_default(),
                c.read_only.unwrap_or(false),
            )
        }),
        _ => None,
    }
}

/// The driver's volumes the live pods on `node` use, by unique name.
pub fn desired(
    node: &str,
    pods: &[Pod],
    claims: &[PersistentVolumeClaim],
    pvs: &[PersistentVolume],
    info: &DriverInfo,
) -> BTreeMap<String, CsiVolume> {
    let mut out: BTreeMap<String, CsiVolume> = BTreeMap::new();
    for pod in pods {
        if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node)
            || pod_terminated(pod)
        {
            continue;
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
        for v in volumes {
            let Some(claim) = &v.persistent_volume_claim else {
                continue;
            };
            let Some(pv_name) = claims
                .iter()
                .find(|c| {
                    c.metadata.namespace.as_deref() == Some(ns.as_str())
                        && c.metadata.name.as_deref() == Some(claim.claim_name.as_str())
                })
                .and_then(|c| c.spec.as_ref()?.volume_name.clone())
            else {
                continue;
            };
            let Some(pv) = pvs
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(pv_name.as_str()))
            else {
                continue;
            };
            let Some((handle, fs_type, read_only)) = pv_handle(pv, info) else {
                continue;
            };
            let unique_name = format!("kubernetes.io/csi/{}^{handle}", info.driver);
            out.entry(unique_name.clone())
                .or_insert_with(|| CsiVolume {
                    unique_name,
                    handle,
                    pv: pv_name.clone(),
                    fs_type,
                    read_only,
                    pod_uids: BTreeSet::new(),
                })
                .pod_uids
                .insert(uid.clone());
        }
    }
    out
}

/// The kubelet's paths for one driver under `--root-dir`.
#[derive(Clone, Debug)]
pub struct Paths {
    root: PathBuf,
    driver: String,
}

impl Paths {
    /// Paths under `root` (`/var/lib/kubelet`) for `driver`.
    pub fn new(root: &Path, driver: &str) -> Self {
        Self {
            root: root.to_path_buf(),
            driver: driver.to_owned(),
        }
    }

    /// The global mount (staging) path: `plugins/kubernetes.io/csi/<driver>/<sha256 of the
    /// handle>/globalmount`, as the kubelet names it.
    pub fn staging(&self, handle: &str) -> PathBuf {
        let digest = sha2::Sha256::digest(handle.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.root
            .join("plugins/kubernetes.io/csi")
            .join(&self.driver)
            .join(hex)
            .join("globalmount")
    }

    /// A pod's mount of the PV: `pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`.
    pub fn target(&self, pod_uid: &str, pv: &str) -> PathBuf {
        self.root
            .join("pods")
            .join(pod_uid)
            .join("volumes/kubernetes.io~csi")
            .join(pv)
            .join("mount")
    }
}

/// What one pass did, for the caller to report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Volumes staged in this pass: (unique name, staging path).
    pub staged: Vec<(String, PathBuf)>,
    /// Targets published: (unique name, target path).
    pub published: Vec<(String, PathBuf)>,
    /// Targets unpublished.
    pub unpublished: Vec<PathBuf>,
    /// Volumes unstaged (no pod uses them any more).
    pub unstaged: Vec<String>,
    /// Volumes still waiting for their VolumeAttachment.
    pub waiting: Vec<String>,
}

/// The volume manager's memory between passes.
#[derive(Debug)]
pub struct VolumeManager {
    info: DriverInfo,
    node: String,
    paths: Paths,
    /// Staged volumes: unique name → (handle, staging path).
    staged: BTreeMap<String, (String, PathBuf)>,
    /// Published targets → (unique name, handle).
    published: BTreeMap<PathBuf, (String, String)>,
}

impl VolumeManager {
    /// A manager for `node`'s volumes of the driver `info`, mounting under `root_dir`.
    pub fn new(info: DriverInfo, node: &str, root_dir: &Path) -> Self {
        Self {
            paths: Paths::new(root_dir, info.driver),
            info,
            node: node.to_owned(),
            staged: BTreeMap::new(),
            published: BTreeMap::new(),
        }
    }

    fn capability(v: &CsiVolume) -> VolumeCapability {
        use volume_capability::{AccessMode, AccessType, Mode, MountVolume};
        VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume {
                fs_type: v.fs_type.clone(),
                ..Default::default()
            })),
            access_mode: Some(AccessMode {
                mode: if v.read_only {
                    Mode::SingleNodeReaderOnly
                } else {
                    Mode::SingleNodeWriter
                } as i32,
            }),
        }
    }

    /// One pass (see the module docs).
    pub async fn sync(&mut self, client: &kube::Client, csi: &Client) -> Result<Pass> {
        let node_name = self.node.clone();
        let node_name = node_name.as_str();
        let pods = Api::<Pod>::all(client.clone())
            .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
            .await
            .map_err(api_err("its pods", node_name))?
            .items;
        let claims = Api::<PersistentVolumeClaim>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(api_err("PersistentVolumeClaims", node_name))?
            .items;
        let pvs = Api::<PersistentVolume>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(api_err("PersistentVolumes", node_name))?
            .items;
        let wanted = desired(node_name, &pods, &claims, &pvs, &self.info);
        let mut pass = Pass::default();

        // Unpublish targets of pods gone, unstage volumes no pod uses.
        let wanted_targets: BTreeSet<PathBuf> = wanted
            .values()
            .flat_map(|v| v.pod_uids.iter().map(|u| self.paths.target(u, &v.pv)))
            .collect();
        let gone: Vec<PathBuf> = self
            .published
            .keys()
            .filter(|t| !wanted_targets.contains(*t))
            .cloned()
            .collect();
        for target in gone {
            let Some((_, handle)) = self.published.get(&target).cloned() else {
                continue;
            };
            csi.node_unpublish_volume(NodeUnpublishVolumeRequest {
                volume_id: handle,
                target_path: target.display().to_string(),
            })
            .await
            .map_err(|s| csi_err("NodeUnpublishVolume", node_name, s))?;
            self.published.remove(&target);
            pass.unpublished.push(target);
        }
        let unstage: Vec<String> = self
            .staged
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .cloned()
            .collect();
        for name in unstage {
            let Some((handle, staging)) = self.staged.get(&name).cloned() else {
                continue;
            };
            csi.node_unstage_volume(NodeUnstageVolumeRequest {
                volume_id: handle,
                staging_target_path: staging.display().to_string(),
            })
            .await
            .map_err(|s| csi_err("NodeUnstageVolume", node_name, s))?;
            self.staged.remove(&name);
            pass.unstaged.push(name);
        }

        // volumesInUse: this driver's entries are the wanted ones plus the still staged.
        let nodes: Api<Node> = Api::all(client.clone());
        let node = nodes
            .get_status(node_name)
            .await
            .map_err(api_err("its Node", node_name))?;
        let status = node.status.unwrap_or_default();
        let prefix = format!("kubernetes.io/csi/{}^", self.info.driver);
        let in_use: BTreeSet<String> = status
            .volumes_in_use
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut new_in_use: BTreeSet<String> = in_use
            .iter()
            .filter(|v| !v.starts_with(&prefix))
            .cloned()
            .collect();
        new_in_use.extend(wanted.keys().cloned());
        new_in_use.extend(self.staged.keys().cloned());
        if new_in_use != in_use {
            let body = if new_in_use.is_empty() {
                json!({"status": {"volumesInUse": null}})
            } else {
                json!({"status": {"volumesInUse": new_in_use}})
            };
            nodes
                .patch_status(node_name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map_err(|source| Error::PatchVolumesInUse {
                    node: node_name.to_owned(),
                    source,
                })?;
        }

        if wanted.is_empty() {
            return Ok(pass);
        }
        let attachments = Api::<VolumeAttachment>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(api_err("VolumeAttachments", node_name))?
            .items;
        for v in wanted.values() {
            let attached = attachments.iter().find(|a| {
                a.spec.attacher == self.info.driver
                    && a.spec.node_name == node_name
                    && a.spec.source.persistent_volume_name.as_deref() == Some(v.pv.as_str())
                    && a.status.as_ref().is_some_and(|s| s.attached)
            });
            let Some(attached) = attached else {
                pass.waiting.push(v.unique_name.clone());
                continue;
            };
            let publish_context: BTreeMap<String, String> = attached
                .status
                .as_ref()
                .and_then(|s| s.attachment_metadata.clone())
                .unwrap_or_default()
                .into_iter()
                .collect();
            let cap = Self::capability(v);
            let staging = self.paths.staging(&v.handle);
            if !self.staged.contains_key(&v.unique_name) {
                csi.node_stage_volume(NodeStageVolumeRequest {
                    volume_id: v.handle.clone(),
                    publish_context: publish_context.clone(),
                    staging_target_path: staging.display().to_string(),
                    volume_capability: Some(cap.clone()),
                    ..Default::default()
                })
                .await
                .map_err(|s| csi_err("NodeStageVolume", node_name, s))?;
                self.staged
                    .insert(v.unique_name.clone(), (v.handle.clone(), staging.clone()));
                pass.staged.push((v.unique_name.clone(), staging.clone()));
            }
            for uid in &v.pod_uids {
                let target = self.paths.target(uid, &v.pv);
                if self.published.contains_key(&target) {
                    continue;
                }
                csi.node_publish_volume(NodePublishVolumeRequest {
                    volume_id: v.handle.clone(),
                    publish_context: publish_context.clone(),
                    staging_target_path: staging.display().to_string(),
                    target_path: target.display().to_string(),
                    volume_capability: Some(cap.clone()),
                    readonly: v.read_only,
                    ..Default::default()
                })
                .await
                .map_err(|s| csi_err("NodePublishVolume", node_name, s))?;
                self.published
                    .insert(target.clone(), (v.unique_name.clone(), v.handle.clone()));
                pass.published.push((v.unique_name.clone(), target));
            }
        }
        Ok(pass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cinder() -> &'static DriverInfo {
        hypercloud_csi::drivers::for_plugin("kubernetes.io/cinder").expect("cinder")
    }

    #[test]
    fn paths_are_the_kubelets() {
        let p = Paths::new(Path::new("/var/lib/kubelet"), "cinder.csi.openstack.org");
        let s = p.staging("vol-1").display().to_string();
        assert!(
            s.starts_with("/var/lib/kubelet/plugins/kubernetes.io/csi/cinder.csi.openstack.org/"),
            "{s}"
        );
        assert!(s.ends_with("/globalmount"), "{s}");
        // sha256("vol-1") in hex: 64 characters between the driver and globalmount.
        let hash = s.split('/').nth_back(1).expect("hash");
        assert_eq!(hash.len(), 64);
        assert_ne!(p.staging("vol-2"), p.staging("vol-1"));
        assert_eq!(
            p.target("uid-1", "pv-1"),
            PathBuf::from("/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount")
        );
    }

    #[test]
    fn in_tree_and_csi_pvs_both_give_the_handle() {
        let pv = |spec: serde_json::Value| -> PersistentVolume {
            serde_json::from_value(json!({"metadata": {"name": "pv"}, "spec": spec})).expect("pv")
        };
        let in_tree = pv(json!({"cinder": {"volumeID": "v1", "fsType": "ext4"}}));
        assert_eq!(
            pv_handle(&in_tree, cinder()),
            Some(("v1".into(), "ext4".into(), false))
        );
        let csi = pv(json!({"csi": {"driver": "cinder.csi.openstack.org", "volumeHandle": "v2"}}));
        assert_eq!(
            pv_handle(&csi, cinder()),
            Some(("v2".into(), String::new(), false))
        );
        let other = pv(json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v3"}}));
        assert_eq!(pv_handle(&other, cinder()), None);
    }
}
