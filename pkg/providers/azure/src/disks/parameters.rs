//! The StorageClass parameters of `kubernetes.io/azure-disk`, as `pkg/volume/azure_dd`'s
//! provisioner reads them (upstream `azure_provision.go`), with what hypercloud does not
//! implement refused by name.

use std::collections::{BTreeMap, BTreeSet};

use hypercloud_cloudprovider::wellknown::parse_go_bool;

use super::{AZURE_DISK_PLUGIN, DEFAULT_CACHING};
use crate::error::{Error, Result};

/// The SKUs (`skuname`, `storageaccounttype`) a class may ask for, as upstream's SDK lists
/// them; the default is upstream's.
const SKUS: &[&str] = &[
    "Standard_LRS",
    "Premium_LRS",
    "StandardSSD_LRS",
    "UltraSSD_LRS",
    "Premium_ZRS",
    "StandardSSD_ZRS",
];
const DEFAULT_SKU: &str = "StandardSSD_LRS";

/// The caching modes upstream knows.
const CACHING_MODES: &[&str] = &["None", "ReadOnly", "ReadWrite"];

/// The StorageClass parameters of `kubernetes.io/azure-disk`, as `pkg/volume/azure_dd` reads
/// them (keys case-insensitive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskParameters {
    /// `skuname` or `storageaccounttype`, as Azure spells it; default `StandardSSD_LRS`.
    pub sku: String,
    /// `fsType`, lower-cased.
    pub fs_type: Option<String>,
    /// `resourceGroup`: where to make the disk; `None`: the config's.
    pub resource_group: Option<String>,
    /// `zoned`: whether the disk goes in the volume's zone (default true, as upstream for
    /// managed disks).
    pub zoned: bool,
    /// `zone`: the one zone to make it in (`<location>-<n>`).
    pub zone: Option<String>,
    /// `zones`: zones to choose from by the claim's name.
    pub zones: BTreeSet<String>,
    /// `tags`: `key=value,key2=value2`.
    pub tags: BTreeMap<String, String>,
    /// `diskIOPSReadWrite` (UltraSSD_LRS only).
    pub disk_iops_read_write: Option<String>,
    /// `diskMBpsReadWrite` (UltraSSD_LRS only).
    pub disk_mbps_read_write: Option<String>,
}

impl Default for DiskParameters {
    fn default() -> Self {
        DiskParameters {
            sku: DEFAULT_SKU.into(),
            fs_type: None,
            resource_group: None,
            zoned: true,
            zone: None,
            zones: BTreeSet::new(),
            tags: BTreeMap::new(),
            disk_iops_read_write: None,
            disk_mbps_read_write: None,
        }
    }
}

fn refused(message: String) -> Error {
    Error::DiskParameters(message)
}

fn not_implemented(what: &str) -> Error {
    refused(format!(
        "{what} not implemented by hypercloud's azure provider"
    ))
}

/// The SKU as Azure spells it (any case given); empty: the default.
pub(super) fn sku(asked: &str) -> Result<&'static str> {
    if asked.is_empty() {
        return Ok(DEFAULT_SKU);
    }
    SKUS.iter()
        .find(|s| s.eq_ignore_ascii_case(asked))
        .copied()
        .ok_or_else(|| {
            refused(format!(
                "{asked:?} is not a supported skuname/storageaccounttype; supported values are {}",
                SKUS.join(", ")
            ))
        })
}

/// Reads a `kubernetes.io/azure-disk` StorageClass's parameters in the cloud's `location`.
/// Refused by name: an unknown key; `kind` Shared or Dedicated and `storageaccount`
/// (unmanaged blob disks); `cachingmode` None or ReadWrite (the attacher is given the disk
/// URI only, never the PV, so every disk is attached with the in-tree default ReadOnly);
/// `diskEncryptionSetID`; `writeAcceleratorEnabled: true`; `maxShares` above 1 (shared disks);
/// a `location` other than the cloud's; and, as upstream, `zone` with `zones`, either with
/// `zoned: false`, and IOPS/MBps on a SKU other than UltraSSD_LRS.
pub fn disk_parameters(
    parameters: &BTreeMap<String, String>,
    location: &str,
) -> Result<DiskParameters> {
    let mut p = DiskParameters::default();
    let mut zoned = None;
    for (k, v) in parameters {
        match k.to_ascii_lowercase().as_str() {
            "skuname" | "storageaccounttype" => p.sku = sku(v)?.to_owned(),
            "kind" => match v.to_ascii_lowercase().as_str() {
                "managed" => {}
                "shared" | "dedicated" => {
                    return Err(not_implemented(&format!(
                        "kind {v}: unmanaged (blob) disks are"
                    )))
                }
                _ => {
                    return Err(refused(format!(
                        "{v:?} is not a supported kind; supported values are Managed (Shared and Dedicated are unmanaged blob disks)"
                    )))
                }
            },
            "cachingmode" => match v.as_str() {
                "" | DEFAULT_CACHING => {}
                m if CACHING_MODES.contains(&m) => {
                    return Err(not_implemented(&format!(
                        "cachingmode {m}: the attacher is given the disk URI only, not the PV, so every disk is attached {DEFAULT_CACHING}; other caching modes are"
                    )))
                }
                m => {
                    return Err(refused(format!(
                        "{m:?} is not a supported cachingmode; supported values are {}",
                        CACHING_MODES.join(", ")
                    )))
                }
            },
            "fstype" => p.fs_type = Some(v.to_lowercase()).filter(|f| !f.is_empty()),
            "resourcegroup" => p.resource_group = Some(v.clone()).filter(|g| !g.is_empty()),
            "location" => {
                if !v.is_empty() && !v.eq_ignore_ascii_case(location) {
                    return Err(refused(format!(
                        "location {v:?}: disks are made in the cloud config's location {location:?}"
                    )));
                }
            }
            "zoned" => {
                zoned = Some(parse_go_bool(v).ok_or_else(|| {
                    refused(format!("failed to parse 'zoned': {v:?} is not a boolean"))
                })?);
            }
            "zone" => p.zone = Some(v.trim().to_owned()),
            "zones" => {
                for z in v.split(',').map(str::trim) {
                    if z.is_empty() {
                        return Err(refused(format!(
                            "comma separated list of zones ({v:?}) must not contain an empty zone"
                        )));
                    }
                    p.zones.insert(z.to_owned());
                }
            }
            "tags" => p.tags = custom_tags(v)?,
            "diskiopsreadwrite" => p.disk_iops_read_write = Some(number(k, v)?),
            "diskmbpsreadwrite" => p.disk_mbps_read_write = Some(number(k, v)?),
            "storageaccount" => {
                return Err(not_implemented(
                    "storageaccount: unmanaged (blob) disks are",
                ))
            }
            "diskencryptionsetid" => {
                return Err(not_implemented(
                    "diskEncryptionSetID: disk encryption sets are",
                ))
            }
            "writeacceleratorenabled" => {
                if parse_go_bool(v) != Some(false) && !v.is_empty() {
                    return Err(not_implemented(
                        "writeAcceleratorEnabled: the write accelerator is",
                    ));
                }
            }
            "maxshares" => match v.trim().parse::<i64>() {
                Ok(1) => {}
                Ok(n) if n > 1 => {
                    return Err(not_implemented(&format!(
                        "maxShares {n}: shared disks are"
                    )))
                }
                _ => {
                    return Err(refused(format!(
                        "maxShares {v:?} is not a positive integer"
                    )))
                }
            },
            _ => {
                return Err(refused(format!(
                    "invalid option {k:?} for volume plugin {AZURE_DISK_PLUGIN}"
                )))
            }
        }
    }
    p.zoned = zoned.unwrap_or(true);
    if p.zone.is_some() && !p.zones.is_empty() {
        return Err(refused(
            "both zone and zones StorageClass parameters must not be used at the same time".into(),
        ));
    }
    if !p.zoned && (p.zone.is_some() || !p.zones.is_empty()) {
        return Err(refused(
            "zone and zones StorageClass parameters must be used together with zoned parameter"
                .into(),
        ));
    }
    if p.sku != "UltraSSD_LRS"
        && (p.disk_iops_read_write.is_some() || p.disk_mbps_read_write.is_some())
    {
        return Err(refused(format!(
            "diskIOPSReadWrite and diskMBpsReadWrite are only for UltraSSD_LRS disks, not {}",
            p.sku
        )));
    }
    Ok(p)
}

fn number(key: &str, v: &str) -> Result<String> {
    v.trim()
        .parse::<u64>()
        .map(|n| n.to_string())
        .map_err(|_| refused(format!("{key} {v:?} is not a non-negative integer")))
}

/// `key=value,key2=value2` (upstream `ConvertTagsToMap`: keys and values trimmed, a key
/// required).
fn custom_tags(v: &str) -> Result<BTreeMap<String, String>> {
    let mut tags = BTreeMap::new();
    for pair in v.split(',').filter(|p| !p.trim().is_empty()) {
        match pair.split_once('=') {
            Some((k, val)) if !k.trim().is_empty() => {
                tags.insert(k.trim().to_owned(), val.trim().to_owned());
            }
            _ => return Err(refused(format!("tags {v:?}: {pair:?} is not key=value"))),
        }
    }
    Ok(tags)
}

/// The parameters a provisioner hands back in [`VolumeRequest::options`]: those
/// [`disk_parameters`] reads again in `create_volume`, under their lower-case keys.
pub(super) fn request_options(
    parameters: &BTreeMap<String, String>,
    p: &DiskParameters,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in parameters {
        let key = k.to_ascii_lowercase();
        if matches!(
            key.as_str(),
            "resourcegroup" | "tags" | "diskiopsreadwrite" | "diskmbpsreadwrite"
        ) {
            out.insert(key, v.clone());
        }
    }
    if !p.zoned {
        out.insert("zoned".into(), "false".into());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parameters_as_the_azure_dd_plugin_reads_them() {
        let p = disk_parameters(
            &params(&[
                ("skuName", "premium_lrs"),
                ("kind", "managed"),
                ("cachingMode", "ReadOnly"),
                ("fsType", "XFS"),
                ("resourceGroup", "disks"),
                ("zones", "regionone-1, regionone-2"),
                ("tags", "team=a, env = b"),
                ("location", "RegionOne"),
                ("maxShares", "1"),
                ("writeAcceleratorEnabled", "false"),
            ]),
            "regionone",
        )
        .unwrap();
        assert_eq!(p.sku, "Premium_LRS");
        assert_eq!(p.fs_type.as_deref(), Some("xfs"));
        assert_eq!(p.resource_group.as_deref(), Some("disks"));
        assert!(p.zoned);
        assert_eq!(
            p.zones,
            BTreeSet::from(["regionone-1".into(), "regionone-2".into()])
        );
        assert_eq!(p.tags["env"], "b");
        let d = disk_parameters(&BTreeMap::new(), "regionone").unwrap();
        assert_eq!(d, DiskParameters::default());
        assert_eq!(d.sku, "StandardSSD_LRS");
        let u = disk_parameters(
            &params(&[
                ("storageaccounttype", "UltraSSD_LRS"),
                ("diskIOPSReadWrite", "1000"),
            ]),
            "regionone",
        )
        .unwrap();
        assert_eq!(u.disk_iops_read_write.as_deref(), Some("1000"));
        let off = disk_parameters(&params(&[("zoned", "false")]), "regionone").unwrap();
        assert!(!off.zoned);
        assert_eq!(
            request_options(&params(&[("zoned", "false"), ("resourceGroup", "g")]), &off),
            params(&[("zoned", "false"), ("resourcegroup", "g")])
        );
    }

    #[test]
    fn parameters_refused_by_name() {
        for (kv, words) in [
            (vec![("iopsPerGB", "5")], "invalid option \"iopsPerGB\""),
            (vec![("skuname", "Fast_LRS")], "not a supported skuname"),
            (
                vec![("kind", "Shared")],
                "kind Shared: unmanaged (blob) disks",
            ),
            (vec![("kind", "dedicated")], "unmanaged (blob) disks"),
            (vec![("kind", "blob")], "not a supported kind"),
            (vec![("cachingmode", "ReadWrite")], "cachingmode ReadWrite"),
            (
                vec![("cachingmode", "None")],
                "other caching modes are not implemented",
            ),
            (
                vec![("cachingmode", "readonly")],
                "not a supported cachingmode",
            ),
            (
                vec![("storageAccount", "acct")],
                "storageaccount: unmanaged",
            ),
            (
                vec![("diskEncryptionSetID", "/x")],
                "disk encryption sets are not implemented",
            ),
            (
                vec![("writeAcceleratorEnabled", "true")],
                "write accelerator",
            ),
            (vec![("maxShares", "2")], "maxShares 2: shared disks"),
            (vec![("maxShares", "0")], "not a positive integer"),
            (vec![("location", "westeurope")], "cloud config's location"),
            (vec![("zoned", "maybe")], "failed to parse 'zoned'"),
            (vec![("zone", "a"), ("zones", "b")], "at the same time"),
            (
                vec![("zoned", "false"), ("zone", "a")],
                "together with zoned",
            ),
            (vec![("zones", "a,,b")], "must not contain an empty zone"),
            (vec![("diskIOPSReadWrite", "100")], "only for UltraSSD_LRS"),
            (
                vec![("diskMBpsReadWrite", "x")],
                "not a non-negative integer",
            ),
            (vec![("tags", "a=b,c")], "\"c\" is not key=value"),
        ] {
            let e = disk_parameters(&params(&kv), "regionone")
                .unwrap_err()
                .to_string();
            assert!(e.contains(words), "{kv:?}: {e}");
        }
    }
}
