//! Zone and region labels of `vsphereVolume` PersistentVolumes (upstream legacy
//! `GetVolumeLabels`): the volume path names a datastore (`[datastore1] kubevols/disk.vmdk`);
//! its zone and region are the tags of the configured categories on the datastore itself, else
//! on the hosts that mount it and their ancestry. A datastore mounted in several zones gets
//! every zone (joined with `__`, as upstream multi-zone labels).
//!
//! With several vCenters, the datastore is looked for in the `[Workspace] server` vCenter
//! first (where volumes are provisioned), then in the others in config order, and its zone
//! comes from the tags of the vCenter that has it. Upstream's legacy `GetVolumeLabels` also
//! looked for the datastore by name in every vCenter (`FindDatastoreByName`, keeping the one
//! holding the file), but then took zones from the workspace vCenter's hosts only; asking the
//! datastore's own vCenter is what that meant for a volume of another vCenter.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{
    volume::MULTI_ZONE_DELIMITER, Error as CloudError, PvLabeler, Result,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};

use crate::inventory::Inventory;
use crate::soap::{self, Moref, ObjectSpec, PropertyFilterSpec, PropertySpec};
use crate::VSphere;

/// The vSphere CSI driver, whose PVs are labelled as in-tree ones.
pub(crate) const VSPHERE_CSI_DRIVER: &str = "csi.vsphere.vmware.com";

/// `[datastore] path/to/disk.vmdk` → (`datastore`, `path/to/disk.vmdk`); `None` when the
/// path has no `[datastore]` prefix.
pub fn parse_volume_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.trim().strip_prefix('[')?;
    let (ds, file) = rest.split_once(']')?;
    let ds = ds.trim();
    (!ds.is_empty()).then_some((ds, file.trim()))
}

impl VSphere {
    /// The vCenters in the order a datastore named by a volume is looked for: the workspace
    /// vCenter, then the others in config order.
    pub(crate) fn datastore_search_order(&self) -> Vec<&Inventory> {
        let ws = self.workspace();
        std::iter::once(ws)
            .chain(self.vcenters.iter().filter(|v| v.index != ws.index))
            .collect()
    }

    /// The datastore named `name` in a datacenter in scope of `inv`'s vCenter.
    async fn datastore_in(&self, inv: &Inventory, name: &str) -> crate::Result<Option<Moref>> {
        let vc = inv.client.vcenter();
        let dcs = if vc.datacenters.is_empty() {
            inv.all_datacenter_names().await?
        } else {
            vc.datacenters.clone()
        };
        for dc in dcs {
            if let Some(m) = inv
                .find_by_path(&format!("{dc}/datastore/{name}"))
                .await?
                .filter(|m| m.kind == "Datastore")
            {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// The datastore named `name` and the vCenter that has it
    /// ([`VSphere::datastore_search_order`]).
    async fn datastore(&self, name: &str) -> Result<Option<(&Inventory, Moref)>> {
        for inv in self.datastore_search_order() {
            let found = self
                .datastore_in(inv, name)
                .await
                .map_err(|e| self.naming_vcenter(inv, e))?;
            if let Some(m) = found {
                return Ok(Some((inv, m)));
            }
        }
        Ok(None)
    }
}

impl VSphere {
    /// The zone and region labels of volumes on datastore `ds_name` (empty when no label
    /// categories are configured): the datastore's own tags win; else the zones of every
    /// host that mounts it, from their ancestry.
    pub(crate) async fn datastore_labels(&self, ds_name: &str) -> Result<BTreeMap<String, String>> {
        let labels = &self.config.labels;
        if labels.zone.is_none() && labels.region.is_none() {
            return Ok(BTreeMap::new());
        }
        let (inv, ds) = self
            .datastore(ds_name)
            .await?
            .ok_or(CloudError::DiskNotFound)?;
        self.labels_of_datastore(inv, &ds, ds_name).await
    }

    /// [`VSphere::datastore_labels`] of a datastore already found (in `inv`'s vCenter).
    pub(crate) async fn labels_of_datastore(
        &self,
        inv: &Inventory,
        ds: &Moref,
        ds_name: &str,
    ) -> Result<BTreeMap<String, String>> {
        let labels = &self.config.labels;
        if labels.zone.is_none() && labels.region.is_none() {
            return Ok(BTreeMap::new());
        }
        if let Ok(zone) = self
            .zone_of_objects(inv, std::slice::from_ref(ds), ds_name)
            .await
        {
            return Ok(to_labels(
                BTreeSet::from([zone.failure_domain]),
                BTreeSet::from([zone.region]),
            ));
        }
        let objs = inv
            .retrieve_objects(PropertyFilterSpec {
                prop_set: vec![PropertySpec {
                    kind: "Datastore".into(),
                    path_set: vec!["host".into()],
                }],
                object_set: vec![ObjectSpec {
                    obj: ds.clone(),
                    skip: false,
                    select_set: Vec::new(),
                }],
            })
            .await
            .map_err(|e| self.naming_vcenter(inv, e))?;
        let hosts: Vec<Moref> = objs
            .iter()
            .flat_map(|o| {
                o.get("host")
                    .map(|v| v.host_mounts.clone())
                    .unwrap_or_default()
            })
            .map(|m: soap::DatastoreHostMount| m.key)
            .collect();
        let (mut zones, mut regions) = (BTreeSet::new(), BTreeSet::new());
        for host in hosts {
            let mut chain = vec![ds.clone()];
            chain.extend(
                inv.ancestry(&host.value)
                    .await
                    .map_err(|e| self.naming_vcenter(inv, e))?,
            );
            let z = self.zone_of_objects(inv, &chain, ds_name).await?;
            zones.insert(z.failure_domain);
            regions.insert(z.region);
        }
        if zones.is_empty() && regions.is_empty() {
            return Err(crate::cloud_error(
                "get volume labels",
                format!("datastore {ds_name:?} has no zone tags and no host mounts it"),
            ));
        }
        if regions.len() > 1 {
            return Err(crate::cloud_error(
                "get volume labels",
                format!(
                    "datastore {ds_name:?} is mounted in several regions: {}",
                    regions.into_iter().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        Ok(to_labels(zones, regions))
    }
}

impl VSphere {
    /// The labels of a First Class Disk (a vSphere CSI volume handle): those of the
    /// datastore in scope that has it (`RetrieveVStorageObject` on each, until found), in
    /// each vCenter in [`VSphere::datastore_search_order`].
    async fn fcd_labels(&self, id: &str) -> Result<BTreeMap<String, String>> {
        let labels = &self.config.labels;
        if labels.zone.is_none() && labels.region.is_none() {
            return Ok(BTreeMap::new());
        }
        for inv in self.datastore_search_order() {
            if let Some(labels) = self.fcd_labels_in(inv, id).await? {
                return Ok(labels);
            }
        }
        Err(CloudError::DiskNotFound)
    }

    /// [`VSphere::fcd_labels`] in one vCenter; `None` when none of its datastores has it.
    async fn fcd_labels_in(
        &self,
        inv: &Inventory,
        id: &str,
    ) -> Result<Option<BTreeMap<String, String>>> {
        let datastores = inv
            .datastores()
            .await
            .map_err(|e| self.naming_vcenter(inv, e))?;
        for (ds, name) in datastores {
            let found = inv
                .client
                .call(|sc| {
                    Ok(soap::RetrieveVStorageObject::new(
                        sc.vstorage_object_manager
                            .clone()
                            .ok_or_else(|| crate::Error::Decode {
                                operation: "RetrieveServiceContent".into(),
                                status: 200,
                                message: "vCenter offers no vStorageObjectManager".into(),
                            })?,
                        soap::VStorageObjectId { id: id.to_owned() },
                        ds.clone(),
                    ))
                })
                .await;
            match found {
                Ok(_) => return self.labels_of_datastore(inv, &ds, &name).await.map(Some),
                Err(crate::Error::Fault { fault, .. })
                    if fault == "NotFound" || fault == "InvalidArgument" =>
                {
                    continue
                }
                Err(e) => return Err(self.naming_vcenter(inv, e).into()),
            }
        }
        Ok(None)
    }
}

/// The VMDK path a PV names: an in-tree `vsphereVolume`'s `volumePath`, or the volume handle
/// of a `csi.vsphere.vmware.com` PV when it is one (a volume migrated from the in-tree
/// plugin); `Err(handle)` for any other handle of that driver (a First Class Disk ID).
fn volume_path_of(spec: &PersistentVolumeSpec) -> Option<Result<String, String>> {
    if let Some(v) = &spec.vsphere_volume {
        return Some(Ok(v.volume_path.clone()));
    }
    let csi = spec
        .csi
        .as_ref()
        .filter(|c| c.driver == VSPHERE_CSI_DRIVER)?;
    Some(if parse_volume_path(&csi.volume_handle).is_some() {
        Ok(csi.volume_handle.clone())
    } else {
        Err(csi.volume_handle.clone())
    })
}

#[async_trait]
impl PvLabeler for VSphere {
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<BTreeMap<String, String>> {
        let Some(path) = pv.spec.as_ref().and_then(volume_path_of) else {
            return Ok(BTreeMap::new());
        };
        let path = match path {
            Ok(p) => p,
            Err(handle) => return self.fcd_labels(&handle).await,
        };
        let labels = &self.config.labels;
        if labels.zone.is_none() && labels.region.is_none() {
            return Ok(BTreeMap::new());
        }
        let (ds_name, _) = parse_volume_path(&path).ok_or_else(|| {
            crate::cloud_error(
                "parse volume path",
                format!("{path:?} is not a vSphere volume path ([datastore] path/disk.vmdk)"),
            )
        })?;
        self.datastore_labels(ds_name).await
    }
}

fn to_labels(zones: BTreeSet<String>, regions: BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let zones: Vec<String> = zones.into_iter().filter(|z| !z.is_empty()).collect();
    if !zones.is_empty() {
        out.insert(
            LABEL_TOPOLOGY_ZONE.to_owned(),
            zones.join(MULTI_ZONE_DELIMITER),
        );
    }
    if let Some(r) = regions.into_iter().find(|r| !r.is_empty()) {
        out.insert(LABEL_TOPOLOGY_REGION.to_owned(), r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_paths_name_their_datastore() {
        assert_eq!(
            parse_volume_path("[LocalDS_0] kubevols/a.vmdk"),
            Some(("LocalDS_0", "kubevols/a.vmdk"))
        );
        assert_eq!(parse_volume_path("[ds 1]x.vmdk"), Some(("ds 1", "x.vmdk")));
        assert_eq!(parse_volume_path("kubevols/a.vmdk"), None);
        assert_eq!(parse_volume_path("[] a"), None);
    }

    #[test]
    fn labels_join_zones() {
        let l = to_labels(
            BTreeSet::from(["b".into(), "a".into()]),
            BTreeSet::from(["r".into()]),
        );
        assert_eq!(l.get(LABEL_TOPOLOGY_ZONE).map(String::as_str), Some("a__b"));
        assert_eq!(l.get(LABEL_TOPOLOGY_REGION).map(String::as_str), Some("r"));
    }
}
