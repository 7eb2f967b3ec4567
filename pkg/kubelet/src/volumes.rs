//! The kubelet's cloud part of mounting in-tree plugin volumes (upstream: the kubelet's volume
//! manager with controller-managed attach/detach, and the `kubernetes.io/cinder` plugin's
//! `WaitForAttach`/`GetDeviceMountPath`), in-tree only: externally the CSI node plugin
//! (cinder-csi-plugin) does this.
//!
//! For the live pods bound to this Node, the plugin's volumes (a claim's bound PV or an inline
//! volume) are reported in `node.status.volumesInUse`, as the kubelet reports the volumes it
//! mounts or is about to mount (the attach/detach controller does not detach those). Each is
//! waited for until the attach/detach controller lists it in `node.status.volumesAttached`
//! and the cloud shows it attached to this Node's own instance; then its device path is
//! reported. Nothing is mounted on this machine: [`Volume::next_steps`] says what a real
//! kubelet would do. A volume no live pod uses any more leaves `volumesInUse` (a real kubelet
//! unmounts it first), which lets the controller detach it.

use std::collections::{BTreeMap, BTreeSet};

use hypercloud_cloudprovider::volume::{pod_terminated, pod_volumes};
use hypercloud_cloudprovider::{Interface, VolumeAttacher};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::Api;
use serde_json::json;

use crate::{Error, Result};

/// One volume this Node's pods use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    /// `kubernetes.io/cinder/<id>`.
    pub unique_name: String,
    /// The cloud's volume ID.
    pub volume_id: String,
    /// The PV's (or inline volume's) name.
    pub spec_name: String,
    /// The pods using it: (`namespace/name`, uid, the pod's name for the volume).
    pub pods: Vec<(String, String, String)>,
    /// The device path once attached to this Node's instance.
    pub device_path: Option<String>,
}

impl Volume {
    /// What a real kubelet would do now that the volume is attached at `device`: upstream's
    /// Cinder plugin formats it if blank and mounts it at its global mount path, then
    /// bind-mounts it into each pod's volume directory.
    pub fn next_steps(&self, plugin: &str, device: &str) -> String {
        let global = format!(
            "/var/lib/kubelet/plugins/{plugin}/mounts/{}",
            self.volume_id
        );
        let dir = plugin.replace('/', "~");
        let pods: Vec<String> = self
            .pods
            .iter()
            .map(|(_, uid, name)| format!("/var/lib/kubelet/pods/{uid}/volumes/{dir}/{name}"))
            .collect();
        format!(
            "a real kubelet would now format {device} if it has no file system, mount it at {global} and bind-mount it at {} (nothing is mounted on this machine)",
            pods.join(", ")
        )
    }
}

/// What one pass found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// The volumes the pods use, by unique name, with their device path once attached.
    pub volumes: BTreeMap<String, Volume>,
    /// Whether `volumesInUse` was written.
    pub reported_in_use: bool,
}

/// The plugin's volumes the live pods on `node` use.
pub fn desired(
    node: &str,
    pods: &[Pod],
    claims: &[PersistentVolumeClaim],
    pvs: &[PersistentVolume],
    attacher: &dyn VolumeAttacher,
) -> BTreeMap<String, Volume> {
    let bound_pv = |ns: &str, claim: &str| {
        let pv_name = claims
            .iter()
            .find(|c| {
                c.metadata.namespace.as_deref() == Some(ns)
                    && c.metadata.name.as_deref() == Some(claim)
            })?
            .spec
            .as_ref()?
            .volume_name
            .clone()?;
        pvs.iter()
            .find(|p| p.metadata.name.as_deref() == Some(pv_name.as_str()))
    };
    let mut out: BTreeMap<String, Volume> = BTreeMap::new();
    for pod in pods {
        if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node)
            || pod_terminated(pod)
        {
            continue;
        }
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        for v in pod_volumes(pod, attacher, bound_pv) {
            let entry = out.entry(v.unique_name.clone()).or_insert_with(|| Volume {
                unique_name: v.unique_name,
                volume_id: v.volume_id,
                spec_name: v.spec_name,
                pods: vec![],
                device_path: None,
            });
            entry
                .pods
                .push((key.clone(), uid.clone(), v.pod_volume_name));
        }
    }
    out
}

/// This Node's instance ID ([`hypercloud_cloudprovider::node::node_attach_instance`]).
async fn own_instance(cloud: &dyn Interface, node: &Node) -> Result<String> {
    hypercloud_cloudprovider::node::node_attach_instance(cloud, node)
        .await
        .map_err(|source| Error::CloudLookup {
            what: "the instance ID",
            node: node.metadata.name.clone().unwrap_or_default(),
            source,
        })
}

/// Writes `node.status.volumesInUse` when it changes: the entries of one plugin (names starting
/// with `prefix`) become `wanted`; other plugins' entries (an in-tree plugin's beside a CSI
/// driver's) stay as they are. Returns whether it wrote.
pub(crate) async fn report_in_use(
    nodes: &Api<Node>,
    node_name: &str,
    current: &[String],
    prefix: &str,
    wanted: &BTreeSet<String>,
) -> Result<bool> {
    let in_use: BTreeSet<&String> = current.iter().collect();
    let mut new_in_use: BTreeSet<&String> =
        current.iter().filter(|v| !v.starts_with(prefix)).collect();
    new_in_use.extend(wanted.iter());
    if new_in_use == in_use {
        return Ok(false);
    }
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
    Ok(true)
}

/// One pass of the volume manager for `node_name` (see the module docs). Volumes the cloud
/// shows attached get their device path; `volumesInUse` is written when it differs from the
/// volumes the pods use.
pub async fn sync(client: kube::Client, cloud: &dyn Interface, node_name: &str) -> Result<Pass> {
    let Some(attacher) = cloud.volume_attacher() else {
        return Ok(Pass::default());
    };
    let api = |e: kube::Error, what: &'static str| Error::VolumeLookup {
        what,
        node: node_name.to_owned(),
        source: e,
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get_status(node_name)
        .await
        .map_err(|e| api(e, "its Node"))?;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
        .await
        .map_err(|e| api(e, "its pods"))?
        .items;
    let uses_claims = pods.iter().any(|p| {
        p.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .any(|v| v.persistent_volume_claim.is_some())
    });
    let (claims, pvs) = if uses_claims {
        let claims = Api::<PersistentVolumeClaim>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| api(e, "PersistentVolumeClaims"))?
            .items;
        let pvs = Api::<PersistentVolume>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| api(e, "PersistentVolumes"))?
            .items;
        (claims, pvs)
    } else {
        (vec![], vec![])
    };
    let mut volumes = desired(node_name, &pods, &claims, &pvs, attacher);

    let status = node.status.clone().unwrap_or_default();
    let wanted: BTreeSet<String> = volumes.keys().cloned().collect();
    let plugin_prefix = format!("{}/", attacher.plugin_name());
    let reported_in_use = report_in_use(
        &nodes,
        node_name,
        status.volumes_in_use.as_deref().unwrap_or_default(),
        &plugin_prefix,
        &wanted,
    )
    .await?;

    let attached: BTreeMap<String, String> = status
        .volumes_attached
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.name, a.device_path))
        .collect();
    if volumes.keys().any(|k| attached.contains_key(k)) {
        let instance = own_instance(cloud, &node).await?;
        for v in volumes.values_mut() {
            if !attached.contains_key(&v.unique_name) {
                continue;
            }
            let lookup = |source| Error::CloudLookup {
                what: "a volume's attachment",
                node: node_name.to_owned(),
                source,
            };
            // The controller's record is not enough: the cloud must show it on this instance.
            if attacher
                .disk_is_attached(&instance, &v.volume_id)
                .await
                .map_err(lookup)?
            {
                v.device_path = Some(
                    attacher
                        .get_attachment_disk_path(&instance, &v.volume_id)
                        .await
                        .map_err(lookup)?,
                );
            }
        }
    }
    Ok(Pass {
        volumes,
        reported_in_use,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_steps_name_the_device_and_the_cinder_plugins_paths() {
        let v = Volume {
            unique_name: "kubernetes.io/cinder/vol-1".into(),
            volume_id: "vol-1".into(),
            spec_name: "pv-1".into(),
            pods: vec![("ns/web".into(), "uid-1".into(), "data".into())],
            device_path: Some("/dev/vdb".into()),
        };
        let s = v.next_steps("kubernetes.io/cinder", "/dev/vdb");
        assert!(s.contains("format /dev/vdb"), "{s}");
        assert!(
            s.contains("/var/lib/kubelet/plugins/kubernetes.io/cinder/mounts/vol-1"),
            "{s}"
        );
        assert!(
            s.contains("/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~cinder/data"),
            "{s}"
        );
    }
}
