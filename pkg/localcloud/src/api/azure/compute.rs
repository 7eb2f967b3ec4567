//! Microsoft.Compute: virtual machines (Nova servers: the computer name the server's name,
//! the VM size a flavor of as many vCPUs, zone `n` the cloud's n-th availability zone, the
//! network interfaces the server's ports, data disks Cinder volumes attached by LUN, power
//! states the server's status, with `deallocated` kept beside it), managed disks (Cinder
//! volumes) and availability sets (kept as ARM shows them; a VM's fault domain is its place
//! in the set). So a VM made here is a server to Nova, and a disk a volume to Cinder.
//! Upstream equivalent: Azure's compute resource provider.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::arm::{int, invalid, list, obj, ref_id, resolve, string, Desired, Kind, Scope};
use super::network::{nic_port, vm_of_server};
use crate::api::compute::{self, add_server, find_flavor, remove_server, Server, SERVERS};
use crate::api::network::{Port, PORTS};
use crate::api::volume::{self, attached_to, Volume, VOLUMES};
use crate::api::zones::known_zones;
use crate::api::ApiError;
use crate::model::azure::{resource_key, resource_scope, ArmResource};
use crate::model::{Meta, Record};
use crate::store::{Read, Tx};

mod disks;
mod vms;

pub(crate) use disks::managed_by;
use disks::*;
use vms::*;
pub(crate) use vms::{action, instance_view};

/// A VM size: name, vCPUs, memory (MiB), most data disks.
struct Size {
    name: &'static str,
    cores: u32,
    memory_mb: u32,
    max_data_disks: u32,
}

/// The sizes the local cloud offers (a few of Azure's common ones).
const SIZES: &[Size] = &[
    Size {
        name: "Standard_B1s",
        cores: 1,
        memory_mb: 1024,
        max_data_disks: 2,
    },
    Size {
        name: "Standard_B1ms",
        cores: 1,
        memory_mb: 2048,
        max_data_disks: 2,
    },
    Size {
        name: "Standard_B2s",
        cores: 2,
        memory_mb: 4096,
        max_data_disks: 4,
    },
    Size {
        name: "Standard_A1_v2",
        cores: 1,
        memory_mb: 2048,
        max_data_disks: 2,
    },
    Size {
        name: "Standard_DS1_v2",
        cores: 1,
        memory_mb: 3584,
        max_data_disks: 4,
    },
    Size {
        name: "Standard_D2s_v3",
        cores: 2,
        memory_mb: 8192,
        max_data_disks: 4,
    },
    Size {
        name: "Standard_D4s_v3",
        cores: 4,
        memory_mb: 16384,
        max_data_disks: 8,
    },
    Size {
        name: "Standard_D8s_v3",
        cores: 8,
        memory_mb: 32768,
        max_data_disks: 16,
    },
];

fn size(name: &str) -> Option<&'static Size> {
    SIZES.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// `locations/{l}/vmSizes`.
pub(crate) fn vm_sizes() -> Vec<Value> {
    SIZES
        .iter()
        .map(|s| {
            json!({
                "name": s.name, "numberOfCores": s.cores, "memoryInMB": s.memory_mb,
                "maxDataDiskCount": s.max_data_disks, "osDiskSizeInMB": 1_047_552,
                "resourceDiskSizeInMB": s.cores * 4096,
            })
        })
        .collect()
}

/// The Nova flavor of a size: the one with as many vCPUs.
fn flavor_of(s: &Size) -> &'static str {
    match s.cores {
        1 => "m1.small",
        2 => "m1.medium",
        4 => "m1.large",
        _ => "m1.xlarge",
    }
}

/// The SKUs a managed disk may have.
const DISK_SKUS: &[&str] = &[
    "Standard_LRS",
    "Premium_LRS",
    "StandardSSD_LRS",
    "UltraSSD_LRS",
    "Premium_ZRS",
    "StandardSSD_ZRS",
    "PremiumV2_LRS",
];

/// A time as Azure's compute API writes it (`2026-11-28T03:58:05.0000000+00:00`).
fn azure_time(iso: &str) -> String {
    iso.strip_suffix('Z')
        .map_or_else(|| iso.to_owned(), |t| format!("{t}.0000000+00:00"))
}

fn not_allowed(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "OperationNotAllowed", message)
}

fn change_not_allowed(property: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "PropertyChangeNotAllowed",
        format!("Changing property '{property}' is not allowed."),
    )
}

pub(crate) fn properties(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    match super::arm::kind_of(res) {
        Kind::AvailabilitySet => availability_set_view(r, s, res),
        Kind::Disk => disk_view(r, s, res),
        _ => vm_view(r, s, res),
    }
}

pub(crate) fn apply(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    kind: Kind,
    res: &mut ArmResource,
    existing: Option<&ArmResource>,
    want: &mut Desired,
) -> Result<(), ApiError> {
    match kind {
        Kind::AvailabilitySet => apply_availability_set(tx, s, res, existing, want),
        Kind::Disk => apply_disk(tx, s, res, existing, want),
        _ => apply_vm(tx, s, res, existing, want),
    }
}

pub(crate) fn remove(tx: &mut Tx<'_>, s: &Scope<'_>, res: &ArmResource) -> Result<(), ApiError> {
    match super::arm::kind_of(res) {
        Kind::AvailabilitySet => {
            let vms = set_members(tx, s, res);
            if vms.is_empty() {
                Ok(())
            } else {
                Err(not_allowed(format!(
                    "Availability set {} cannot be deleted: it still has virtual machines ({}).",
                    res.name,
                    vms.iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        }
        Kind::Disk => {
            let Some(id) = &res.backing else {
                return Ok(());
            };
            if let Some(v) = tx.get::<Volume>(VOLUMES, id) {
                if let Some(a) = v.attachments.first() {
                    let vm = vm_of_server(tx, &a.server_id)
                        .map_or_else(|| a.server_id.clone(), |v| v.name);
                    return Err(not_allowed(format!(
                        "Disk {} is attached to VM {vm}.",
                        res.name
                    )));
                }
            }
            tx.delete(VOLUMES, id);
            Ok(())
        }
        _ => remove_vm(tx, s, res),
    }
}

// ---- availability sets ---------------------------------------------------------------------

fn apply_availability_set(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &ArmResource,
    existing: Option<&ArmResource>,
    want: &mut Desired,
) -> Result<(), ApiError> {
    let sku = super::arm::sku_of(
        want,
        existing,
        "availability set",
        &["Aligned", "Classic"],
        "Classic",
        ("InvalidParameter", None),
    )?;
    want.sku = Some(json!({"name": sku}));
    let p = &mut want.properties;
    let faults = int(
        p,
        "platformFaultDomainCount",
        "properties.platformFaultDomainCount",
        1..=3,
    )?
    .unwrap_or(2);
    let updates = int(
        p,
        "platformUpdateDomainCount",
        "properties.platformUpdateDomainCount",
        1..=20,
    )?
    .unwrap_or(5);
    if let Some(old) = existing {
        let had = old.properties["platformFaultDomainCount"].as_i64();
        if had != Some(faults) && !set_members(tx, s, res).is_empty() {
            return Err(change_not_allowed("platformFaultDomainCount"));
        }
    }
    p.insert("platformFaultDomainCount".into(), json!(faults));
    p.insert("platformUpdateDomainCount".into(), json!(updates));
    for k in ["virtualMachines", "statuses"] {
        p.remove(k);
    }
    Ok(())
}

/// The VMs in an availability set.
fn set_members(r: &impl Read, s: &Scope<'_>, set: &ArmResource) -> Vec<ArmResource> {
    let id = s.id(set);
    ArmResource::list_where(r, "type", Kind::VirtualMachine.ty())
        .into_iter()
        .filter(|vm| {
            vm.meta.project_id == s.project_id
                && vm.properties["availabilitySet"]["id"]
                    .as_str()
                    .is_some_and(|x| x.eq_ignore_ascii_case(&id))
        })
        .collect()
}

fn availability_set_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = res.properties.as_object().cloned().unwrap_or_default();
    let vms: Vec<Value> = set_members(r, s, res)
        .iter()
        .map(|v| json!({"id": s.id(v)}))
        .collect();
    p.insert("virtualMachines".into(), Value::Array(vms));
    Value::Object(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_map_to_flavors_of_as_many_vcpus() {
        for s in SIZES {
            let f = find_flavor(flavor_of(s)).expect("a flavor");
            assert!(f.vcpus >= s.cores.min(8), "{}", s.name);
        }
        assert!(size("standard_b1s").is_some());
        assert!(size("Standard_Nope").is_none());
        assert_eq!(
            azure_time("2026-11-28T03:58:05Z"),
            "2026-11-28T03:58:05.0000000+00:00"
        );
    }
}
