//! Zone and region labels of `vsphereVolume` PersistentVolumes (upstream legacy
//! `GetVolumeLabels`): the volume path names a datastore (`[datastore1] kubevols/disk.vmdk`);
//! its zone and region are the tags of the configured categories on the datastore itself, else
//! on the hosts that mount it and their ancestry. A datastore mounted in several zones gets
//! every zone (joined with `__`, as upstream multi-zone labels).

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use hypercloud_cloudprovider::wellknown::{LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE};
use hypercloud_cloudprovider::{
    volume::MULTI_ZONE_DELIMITER, Error as CloudError, PvLabeler, Result,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};

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
    /// The datastore named `name` in a datacenter in scope.
    async fn datastore(&self, name: &str) -> Result<Option<Moref>> {
        let dcs = if self.config.vcenter.datacenters.is_empty() {
            self.inventory.all_datacenter_names().await?
        } else {
            self.config.vcenter.datacenters.clone()
        };
        for dc in dcs {
            if let Some(m) = self
                .inventory
                .find_by_path(&format!("{dc}/datastore/{name}"))
                .await?
                .filter(|m| m.kind == "Datastore")
            {
                return Ok(Some(m));
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
        let ds = self
            .datastore(ds_name)
            .await?
            .ok_or(CloudError::DiskNotFound)?;
        self.labels_of_datastore(&ds, ds_name).await
    }

    /// [`VSphere::datastore_labels`] of a datastore already found.
    pub(crate) async fn labels_of_datastore(
        &self,
        ds: &Moref,
        ds_name: &str,
    ) -> Result<BTreeMap<String, String>> {
        let labels = &self.config.labels;
        if labels.zone.is_none() && labels.region.is_none() {
            return Ok(BTreeMap::new());
        }
        if let Ok(zone) = self
            .zone_of_objects(std::slice::from_ref(ds), ds_name)
            .await
        {
            return Ok(to_labels(
                BTreeSet::from([zone.failure_domain]),
                BTreeSet::from([zone.region]),
            ));
        }
        let objs = self
            .inventory
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
            .await?;
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
            chain.extend(self.inventory.ancestry(&host.value).await?);
            let z = self.zone_of_objects(&chain, ds_name).await?;
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
    /// datastore in scope that has it (`RetrieveVStorageObject` on each, until found).
    async fn fcd_labels(&self, id: &str) -> Result<BTreeMap<String, String>> {
        let labels = &self.config.labels;
        if labels.zone.is_none() && labels.region.is_none() {
            return Ok(BTreeMap::new());
        }
        for (ds, name) in self.inventory.datastores().await? {
            let found = self
                .inventory
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
                Ok(_) => return self.datastore_labels(&name).await,
                Err(crate::Error::Fault { fault, .. })
                    if fault == "NotFound" || fault == "InvalidArgument" =>
                {
                    continue
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(CloudError::DiskNotFound)
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
