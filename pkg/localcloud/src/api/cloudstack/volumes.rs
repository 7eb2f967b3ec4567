//! Data disks: Cinder volumes shown as CloudStack volumes (`DATADISK`, `size` in bytes,
//! `deviceid` from the attachment's `/dev/vdX`: `vdb` is 1). A volume is made from a disk
//! offering (its size) or a custom size, attached and detached as Nova attaches them (and the
//! VM's config drive follows), grown by `resizeVolume` (never shrunk), deleted when detached.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::compute::{disk_offering, disk_offering_id, vm_state, zone_id, zone_named};
use super::{covers, filter, job, keyword, list, ownership, CsError, CsResult, Outcome, Req};
use crate::api::volume::{self, Volume, VOLUMES};
use crate::api::Cloud;
use crate::model::compute::{Server, ACTIVE, SHUTOFF};
use crate::model::{Meta, Record};
use crate::store::Read;

/// The volume metadata key that keeps a volume's disk offering.
const OFFERING_KEY: &str = "cloudstack-disk-offering";
const GB: u64 = 1 << 30;

/// The CloudStack device ID of a `/dev/vdX` (`vdb` → 1).
fn device_id(device: &str) -> Option<u32> {
    let letter = device.strip_prefix("/dev/vd")?.bytes().next()?;
    letter.checked_sub(b'a').map(u32::from)
}

fn volume_state(v: &Volume) -> &'static str {
    match v.status.as_str() {
        volume::CREATING => "Allocated",
        volume::AVAILABLE | volume::IN_USE => "Ready",
        volume::ATTACHING | volume::DETACHING => "Ready",
        volume::EXTENDING => "Resizing",
        _ => "Error",
    }
}

pub(super) fn volume_view(r: &impl Read, v: &Volume) -> Value {
    let offering = v
        .metadata
        .get(OFFERING_KEY)
        .map_or("Custom", String::as_str)
        .to_owned();
    let mut view = json!({
        "id": v.meta.id, "name": v.name.clone().unwrap_or_default(), "type": "DATADISK",
        "size": v.size * GB, "state": volume_state(v),
        "zoneid": zone_id(&v.availability_zone), "zonename": v.availability_zone,
        "diskofferingid": disk_offering_id(&offering), "diskofferingname": offering,
        "diskofferingdisplaytext": offering, "storagetype": "shared", "provisioningtype": "thin",
        "created": super::cs_date(&v.meta.created_at), "destroyed": false, "isextractable": true,
        "hypervisor": "KVM", "tags": [],
    });
    if let Some(a) = v.attachments.iter().find(|a| !a.detaching) {
        let vm = Server::get(r, &a.server_id);
        view["virtualmachineid"] = json!(a.server_id);
        view["vmname"] = json!(vm.as_ref().map(|s| s.name.clone()));
        view["vmdisplayname"] = json!(vm.as_ref().map(|s| s.name.clone()));
        view["vmstate"] = json!(vm.as_ref().map(|s| vm_state(&s.status)));
        view["deviceid"] = json!(device_id(&a.device));
        view["attached"] = json!(super::cs_date(&a.attached_at));
        view["path"] = json!(a.device);
    }
    if let Some(o) = view.as_object_mut() {
        o.extend(ownership(r, &v.meta.project_id));
    }
    view
}

fn find(r: &impl Read, req: &Req, key: &str) -> CsResult<Volume> {
    let id = req.required(key)?;
    Volume::get(r, id).ok_or_else(|| req.no_entity(key, id))
}

/// `listVolumes` (`id`, `name`, `virtualmachineid`, `projectid`, `zoneid`, `type`,
/// `keyword`).
pub(super) fn list_volumes(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items = cloud.store.read(|r| {
        let projects = req.projects(r)?;
        let mut vols: Vec<Volume> = Volume::list(r)
            .into_iter()
            .filter(|v| covers(&projects, &v.meta.project_id))
            .collect();
        vols.sort_by(|a, b| a.meta.created_at.cmp(&b.meta.created_at));
        Ok::<_, CsError>(vols.iter().map(|v| volume_view(r, v)).collect::<Vec<_>>())
    })?;
    filter(req, "id", "id", &mut items);
    filter(req, "name", "name", &mut items);
    filter(req, "virtualmachineid", "virtualmachineid", &mut items);
    filter(req, "zoneid", "zoneid", &mut items);
    filter(req, "type", "type", &mut items);
    keyword(req, "name", &mut items);
    list(req, "volume", items)
}

/// `createVolume` (`name`, `diskofferingid`, `size` in GB for the custom offering, `zoneid`,
/// `projectid`).
pub(super) async fn create_volume(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let name = req.get("name").map(str::to_owned);
    let size = req.number::<u64>("size", 1..=65536)?;
    let (offering, size) = match req.get("diskofferingid") {
        Some(id) => {
            let (name, fixed) = disk_offering(id).ok_or_else(|| req.no_entity("diskofferingid", id))?;
            match (fixed, size) {
                (0, Some(s)) => (name, s),
                (0, None) => {
                    return Err(CsError::invalid(
                        "This disk offering requires a custom size specified",
                    ))
                }
                (f, _) => (name, f),
            }
        }
        None => match size {
            Some(s) => ("Custom", s),
            None => {
                return Err(CsError::invalid(
                    "At least one of disk Offering ID or snapshot ID must be passed whilst creating volume",
                ))
            }
        },
    };
    let (project, zone) = cloud.store.read(|r| {
        let project = req.project(r)?;
        let zone = match req.get("zoneid") {
            Some(z) => zone_named(r, z).ok_or_else(|| req.no_entity("zoneid", z))?,
            None => crate::api::zones::check_zone(r, None)?,
        };
        Ok::<_, CsError>((project, zone))
    })?;
    let meta = Meta::new(project.id.clone());
    let id = meta.id.clone();
    let c = cloud.clone();
    job(cloud, req, "Volume", Some(id.clone()), move |tx| {
        let (user_id, _) = crate::api::gce::user_of(&c, tx);
        let v = Volume {
            meta,
            name,
            description: None,
            size,
            status: volume::AVAILABLE.into(),
            availability_zone: zone,
            volume_type: volume::VOLUME_TYPE.into(),
            user_id,
            metadata: BTreeMap::from([(OFFERING_KEY.to_owned(), offering.to_owned())]),
            attachments: Vec::new(),
            multiattach: false,
        };
        tx.put(VOLUMES, &v.meta.id, &v)?;
        tracing::info!(volume = %v.meta.id, size_gb = size, "created CloudStack volume");
        Ok(Outcome::Done(
            json!({"volume": volume_view(tx, &v)}),
            Some(id),
        ))
    })
    .await
}

/// `attachVolume` (`id`, `virtualmachineid`).
pub(super) async fn attach_volume(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let (v, server) = cloud.store.read(|r| {
        let v = find(r, req, "id")?;
        let id = req.required("virtualmachineid")?;
        let s = Server::get(r, id).ok_or_else(|| req.no_entity("virtualmachineid", id))?;
        Ok::<_, CsError>((v, s))
    })?;
    let dir = cloud.config.config_drive_dir();
    job(cloud, req, "Volume", None, move |tx| {
        let v = Volume::find(tx, &v.meta.id)?;
        let id = v.meta.id.clone();
        let refused = if let Some(a) = v.attachments.first() {
            Some(format!(
                "Volume {id} is already attached to VM {}",
                a.server_id
            ))
        } else if v.meta.project_id != server.meta.project_id {
            Some(format!(
                "Volume {id} and VM {} are in different projects",
                server.meta.id
            ))
        } else if v.availability_zone != server.availability_zone {
            Some(format!(
                "Volume {id} and VM {} are in different zones",
                server.meta.id
            ))
        } else if !matches!(server.status.as_str(), ACTIVE | SHUTOFF) {
            Some(format!(
                "VM {} is {}: volumes attach to a Running or Stopped VM",
                server.meta.id,
                vm_state(&server.status)
            ))
        } else {
            None
        };
        if let Some(text) = refused {
            return Ok(Outcome::Refused(CsError::state(text), Some(id)));
        }
        volume::attach(tx, &id, &server.meta.id, volume::AttachOptions::default())?;
        volume::finish(tx, &id)?;
        crate::model::config_drive::write(&dir, tx, &server)?;
        tracing::info!(vm = %server.name, volume = %id, "attached CloudStack volume");
        let v = Volume::find(tx, &id)?;
        Ok(Outcome::Done(
            json!({"volume": volume_view(tx, &v)}),
            Some(id),
        ))
    })
    .await
}

/// `detachVolume` (`id`, or `virtualmachineid` + `deviceid`).
pub(super) async fn detach_volume(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let v = cloud.store.read(|r| {
        if req.get("id").is_some() {
            return find(r, req, "id");
        }
        let vm = req.required("virtualmachineid")?;
        let device = req.required("deviceid")?;
        Volume::list(r)
            .into_iter()
            .find(|v| {
                v.attachments.iter().any(|a| {
                    a.server_id == vm
                        && device_id(&a.device).map(|d| d.to_string()).as_deref() == Some(device)
                })
            })
            .ok_or_else(|| req.no_entity("deviceid", device))
    })?;
    let dir = cloud.config.config_drive_dir();
    job(cloud, req, "Volume", None, move |tx| {
        let v = Volume::find(tx, &v.meta.id)?;
        let id = v.meta.id.clone();
        let Some(a) = v.attachments.first().cloned() else {
            return Ok(Outcome::Refused(
                CsError::state(format!(
                    "Please specify a volume that is attached to a VM ({id} is not)"
                )),
                Some(id),
            ));
        };
        volume::begin_detach(tx, &id, &a.server_id)?;
        volume::finish(tx, &id)?;
        if let Some(server) = Server::get(tx, &a.server_id) {
            crate::model::config_drive::write(&dir, tx, &server)?;
        }
        tracing::info!(vm = %a.server_id, volume = %id, "detached CloudStack volume");
        let v = Volume::find(tx, &id)?;
        Ok(Outcome::Done(
            json!({"volume": volume_view(tx, &v)}),
            Some(id),
        ))
    })
    .await
}

/// `resizeVolume` (`id`, `size` in GB, or `diskofferingid`): grows the volume.
pub(super) async fn resize_volume(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let size = req.number::<u64>("size", 1..=65536)?;
    let offering = match req.get("diskofferingid") {
        Some(id) => Some(disk_offering(id).ok_or_else(|| req.no_entity("diskofferingid", id))?),
        None => None,
    };
    let (offering_name, size) = match (offering, size) {
        (Some((name, 0)), Some(s)) => (Some(name), s),
        (Some((name, fixed)), _) if fixed > 0 => (Some(name), fixed),
        (None, Some(s)) => (None, s),
        _ => {
            return Err(CsError::invalid(
                "Unable to execute API command resizevolume due to missing parameter size",
            ))
        }
    };
    let v = cloud.store.read(|r| find(r, req, "id"))?;
    job(cloud, req, "Volume", None, move |tx| {
        let mut v = Volume::find(tx, &v.meta.id)?;
        let id = v.meta.id.clone();
        if size < v.size {
            return Ok(Outcome::Refused(
                CsError::invalid(format!(
                    "Going from existing size of {} GB to size of {size} GB would shrink the volume: the local cloud's volumes do not shrink",
                    v.size
                )),
                Some(id),
            ));
        }
        v.size = size;
        if let Some(name) = offering_name {
            v.metadata.insert(OFFERING_KEY.into(), name.into());
        }
        v.meta.touch();
        tx.put(VOLUMES, &id, &v)?;
        tracing::info!(volume = %id, size_gb = size, "resized CloudStack volume");
        Ok(Outcome::Done(json!({"volume": volume_view(tx, &v)}), Some(id)))
    })
    .await
}

/// `deleteVolume` (`id`): synchronous, `{"success": "true"}`; an attached volume is refused.
pub(super) async fn delete_volume(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let v = cloud.store.read(|r| find(r, req, "id"))?;
    if !v.attachments.is_empty() {
        return Err(CsError::invalid(
            "Please specify a volume that is not attached to any VM.",
        ));
    }
    let id = v.meta.id.clone();
    cloud
        .write(move |tx| {
            let v = Volume::find(tx, &id)?;
            if !v.attachments.is_empty() {
                return Err(CsError::invalid(
                    "Please specify a volume that is not attached to any VM.",
                )
                .into());
            }
            tx.delete(VOLUMES, &id);
            tracing::info!(volume = %id, "deleted CloudStack volume");
            Ok(())
        })
        .await?;
    Ok(json!({"success": "true"}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_count_from_vda() {
        assert_eq!(device_id("/dev/vdb"), Some(1));
        assert_eq!(device_id("/dev/vdc"), Some(2));
        assert_eq!(device_id("/dev/sdb"), None);
    }
}
