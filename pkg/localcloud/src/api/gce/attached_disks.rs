//! An instance's persistent disks: `instances.attachDisk`, `instances.detachDisk` and the
//! `disks[]` of the instance view. An attached disk is the Cinder volume's attachment to the
//! Nova server (so Nova, Cinder, the config drive and the operator CLI see it), with GCE's
//! `deviceName` and mode kept on the attachment. A disk is attached `READ_WRITE` to one
//! instance, or `READ_ONLY` to any number, as on GCE; the change is complete (the volume
//! `in-use`, the config drive rewritten) before the Operation is answered.

use super::body::{known_fields, opt_str};
use super::operations::change_zonal;
use super::*;
use crate::api::compute::Server;
use crate::api::volume::{self, attached_to, Volume};

/// The device name GCE shows for an attachment without one of its own (Nova's): GCE's
/// default for a disk attached without `deviceName`.
fn default_device_name(index: usize) -> String {
    format!("persistent-disk-{index}")
}

/// The attachments of a server as GCE lists them, in device order: (index, device name,
/// volume).
fn attached(r: &impl Read, server_id: &str) -> Vec<(usize, String, Volume)> {
    attached_to(r, server_id)
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let name = v
                .attachments
                .iter()
                .find(|a| a.server_id == server_id)
                .and_then(|a| a.device_name.clone())
                .unwrap_or_else(|| default_device_name(i));
            (i, name, v)
        })
        .collect()
}

/// The `disks[]` of an instance view (`compute#attachedDisk`).
pub(super) fn view(s: &Scope<'_>, r: &impl Read, server: &Server) -> Vec<Value> {
    attached(r, &server.meta.id)
        .into_iter()
        .map(|(index, device_name, v)| {
            let a = v.attachments.iter().find(|a| a.server_id == server.meta.id);
            let mode = if a.is_some_and(|a| a.read_only) {
                "READ_ONLY"
            } else {
                "READ_WRITE"
            };
            let disk = v.name.clone().unwrap_or_else(|| v.meta.id.clone());
            json!({
                "kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": mode,
                "source": s.link(&format!("zones/{}/disks/{disk}", v.availability_zone)),
                "deviceName": device_name, "index": index, "boot": false,
                "autoDelete": a.is_some_and(|a| a.delete_on_termination),
                "interface": "SCSI", "diskSizeGb": v.size.to_string(),
            })
        })
        .collect()
}

/// Fields an AttachedDisk body takes; `kind`, `type` (only `PERSISTENT`), `boot` (only
/// `false`), `autoDelete` and `interface` are accepted as Google's clients send them.
const ATTACH_FIELDS: &[&str] = &[
    "source",
    "deviceName",
    "mode",
    "kind",
    "type",
    "boot",
    "autoDelete",
    "interface",
];

/// What an attachDisk asks for, checked before anything changes.
struct Attach {
    /// The disk's zone (`None`: a bare name, in the instance's zone) and name.
    zone: Option<String>,
    disk: String,
    source: String,
    device_name: Option<String>,
    read_only: bool,
    auto_delete: bool,
}

fn parse_attach(body: &Bytes) -> Result<Attach, ApiError> {
    let b: Map<String, Value> = parse_body(body)?;
    known_fields(&b, "resource", ATTACH_FIELDS)?;
    let source = opt_str(&b, "source", "resource.source")?
        .ok_or_else(|| required("resource.source"))?
        .to_owned();
    let (zone, disk) = match m::scoped_ref(&source, "zones", "disks") {
        Some((zone, disk)) => (Some(zone.to_owned()), disk.to_owned()),
        None if !source.contains('/') => (None, source.clone()),
        None => {
            return Err(invalid(format!(
                "Invalid value for field 'resource.source': '{source}'. The URL is malformed."
            )))
        }
    };
    let device_name = opt_str(&b, "deviceName", "resource.deviceName")?.map(str::to_owned);
    if let Some(d) = &device_name {
        super::body::check_name(d).map_err(|_| {
            invalid(format!(
                "Invalid value for field 'resource.deviceName': '{d}'. Must be a match of regex '[a-z]([-a-z0-9]*[a-z0-9])?'"
            ))
        })?;
    }
    let read_only = match opt_str(&b, "mode", "resource.mode")? {
        None | Some("READ_WRITE") => false,
        Some("READ_ONLY") => true,
        Some(other) => {
            return Err(invalid(format!(
                "Invalid value for field 'resource.mode': '{other}'. Must be one of [READ_ONLY, READ_WRITE]."
            )))
        }
    };
    match opt_str(&b, "type", "resource.type")? {
        None | Some("PERSISTENT") => {}
        Some(other) => {
            return Err(invalid(format!(
                "Invalid value for field 'resource.type': '{other}'. Only PERSISTENT disks can be attached to a running instance."
            )))
        }
    }
    if b.get("boot").and_then(Value::as_bool) == Some(true) {
        return Err(invalid(
            "Invalid value for field 'resource.boot': 'true'. A boot disk cannot be attached to an existing instance.",
        ));
    }
    let auto_delete = match b.get("autoDelete") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(x)) => *x,
        Some(other) => {
            return Err(invalid(format!(
                "Invalid value for field 'resource.autoDelete': {}. Must be a boolean.",
                super::body::json_kind(other)
            )))
        }
    };
    Ok(Attach {
        zone,
        disk,
        source,
        device_name,
        read_only,
        auto_delete,
    })
}

/// GCE's refusal of a disk attached where the new attachment may not share it.
fn in_use(project: &Project, zone: &str, disk: &str, by: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "resourceInUseByAnotherResource",
        format!(
            "The disk resource '{}' is already being used by '{}'",
            project.path(&format!("zones/{zone}/disks/{disk}")),
            project.path(&format!("zones/{zone}/instances/{by}"))
        ),
    )
}

/// `POST .../instances/{name}/attachDisk`.
pub(super) async fn attach(cloud: Arc<Cloud>, p: BTreeMap<String, String>, body: Bytes) -> Reply {
    let want = parse_attach(&body)?;
    let dir = cloud.config.config_drive_dir();
    change_zonal(&cloud, p, move |tx, s, at| {
        let (project, zone) = (s.project, at.zone);
        let server = super::find_instance(tx, project, zone, at.name)?;
        let disk_zone = want.zone.as_deref().unwrap_or(zone);
        let v = super::disks::find_disk(tx, project, disk_zone, &want.disk)?;
        if disk_zone != zone {
            return Err(invalid(format!(
                "Invalid value for field 'resource.source': '{}'. Disk must be in the same zone as the instance.",
                want.source
            )));
        }
        let here = attached(tx, &server.meta.id);
        if let Some(d) = &want.device_name {
            if here.iter().any(|(_, name, _)| name == d) {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.deviceName': '{d}'. Device name is already in use by another disk of the instance."
                )));
            }
        }
        // A disk is shared only read-only, by every instance it is attached to.
        let blocker = v
            .attachments
            .iter()
            .find(|a| !(want.read_only && a.read_only) || a.server_id == server.meta.id);
        if let Some(a) = blocker {
            let by = crate::api::compute::find_server(tx, &a.server_id)
                .map(|x| x.name)
                .unwrap_or_else(|_| a.server_id.clone());
            return Err(in_use(project, zone, &want.disk, &by));
        }
        let device_name = want.device_name.clone().unwrap_or_else(|| {
            (0..)
                .map(default_device_name)
                .find(|n| !here.iter().any(|(_, name, _)| name == n))
                .unwrap_or_default()
        });
        volume::attach(
            tx,
            &v.meta.id,
            &server.meta.id,
            volume::AttachOptions {
                delete_on_termination: want.auto_delete,
                device_name: Some(device_name.clone()),
                read_only: want.read_only,
                ..Default::default()
            },
        )?;
        volume::finish(tx, &v.meta.id)?;
        crate::model::config_drive::write(&dir, tx, &server)?;
        tracing::info!(instance = %server.name, disk = %want.disk, device = %device_name, "attached GCE disk");
        Ok(at.done(
            "attachDisk",
            "instances",
            &server.name,
            m::numeric_id(&server.meta.id),
        ))
    })
    .await
}

/// `POST .../instances/{name}/detachDisk?deviceName=`.
pub(super) async fn detach(cloud: Arc<Cloud>, p: BTreeMap<String, String>, q: Params) -> Reply {
    let device_name = q
        .get("deviceName")
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| required("deviceName"))?;
    let dir = cloud.config.config_drive_dir();
    change_zonal(&cloud, p, move |tx, s, at| {
        let server = super::find_instance(tx, s.project, at.zone, at.name)?;
        let (_, _, v) = attached(tx, &server.meta.id)
            .into_iter()
            .find(|(_, name, _)| *name == device_name)
            .ok_or_else(|| {
                invalid(format!(
                    "Invalid value for field 'deviceName': '{device_name}'. No attached disk found with device name '{device_name}'"
                ))
            })?;
        volume::begin_detach(tx, &v.meta.id, &server.meta.id)?;
        volume::finish(tx, &v.meta.id)?;
        crate::model::config_drive::write(&dir, tx, &server)?;
        tracing::info!(instance = %server.name, device = %device_name, "detached GCE disk");
        Ok(at.done(
            "detachDisk",
            "instances",
            &server.name,
            m::numeric_id(&server.meta.id),
        ))
    })
    .await
}
