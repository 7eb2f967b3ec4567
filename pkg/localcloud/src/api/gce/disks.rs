//! GCE zonal persistent disks: the Cinder volumes of the project, by name, in their
//! availability zone (`sizeGb` is the size, `users` the instances they are attached to,
//! `status` `READY` for an available or attached volume). A disk made here is a volume to
//! Cinder and the operator CLI. `resize` grows the volume (attached or not, as GCE allows);
//! `delete` refuses a disk still attached, as GCE does. A disk's `type` (one of
//! [`DISK_TYPES`]) is the volume's type and its `labels` the volume's metadata.

use super::body::{known_fields, opt_str, resource_name};
use super::operations::change_zonal;
use super::*;
use crate::api::compute::{find_server, Server};
use crate::api::volume::{self, Volume, VOLUMES};

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    let d = format!("{p}/zones/{{zone}}/disks");
    Router::new()
        .route(&d, get(list).post(insert))
        .route(&format!("{d}/{{name}}"), get(get_one).delete(delete))
        .route(&format!("{d}/{{name}}/resize"), post(resize))
}

/// The zonal persistent disk types a disk may have (GCE has more; these are the ones the
/// in-tree `kubernetes.io/gce-pd` plugin creates).
pub(crate) const DISK_TYPES: &[&str] = &["pd-standard", "pd-balanced", "pd-ssd", "pd-extreme"];
/// A disk's type when its insert names none, and a Cinder-made volume's.
const DEFAULT_DISK_TYPE: &str = "pd-standard";

/// The type a disk insert's `type` names (a full or partial `zones/Z/diskTypes/T` link of the
/// disk's own zone), as GCE answers: a malformed link or another zone's is invalid, a type the
/// zone lacks not found.
fn disk_type(project: &Project, zone: &str, link: Option<&str>) -> Result<String, ApiError> {
    let Some(link) = link else {
        return Ok(DEFAULT_DISK_TYPE.into());
    };
    let Some((scope, name)) = link.rsplit_once("diskTypes/") else {
        return Err(invalid(format!(
            "Invalid value for field 'resource.type': '{link}'. The URL is malformed."
        )));
    };
    let scope = scope.trim_end_matches('/');
    if !(scope.is_empty()
        || scope == format!("zones/{zone}")
        || scope.ends_with(&format!("/zones/{zone}")))
    {
        return Err(invalid(format!(
            "Invalid value for field 'resource.type': '{link}'. Disk type must be in zone '{zone}'."
        )));
    }
    if !DISK_TYPES.contains(&name) {
        return Err(project.not_found(&format!("zones/{zone}/diskTypes/{name}")));
    }
    Ok(name.to_owned())
}

/// A disk's `labels`: an object of strings.
fn labels(b: &Map<String, Value>) -> Result<BTreeMap<String, String>, ApiError> {
    match b.get("labels") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(v) => Ok((k.clone(), v.clone())),
                _ => Err(invalid(format!(
                    "Invalid value for field 'resource.labels[{k}]'."
                ))),
            })
            .collect(),
        Some(_) => Err(invalid("Invalid value for field 'resource.labels'.")),
    }
}

fn disk_status(cinder: &str) -> &'static str {
    match cinder {
        volume::AVAILABLE | volume::IN_USE => "READY",
        volume::CREATING => "CREATING",
        "deleting" => "DELETING",
        _ => "FAILED",
    }
}

pub(super) fn find_disk(
    r: &impl Read,
    project: &Project,
    zone: &str,
    name: &str,
) -> Result<Volume, ApiError> {
    r.list::<Volume>(VOLUMES)
        .into_iter()
        .find(|v| {
            v.meta.project_id == project.id
                && v.availability_zone == zone
                && v.name.as_deref() == Some(name)
        })
        .ok_or_else(|| project.not_found(&format!("zones/{zone}/disks/{name}")))
}

fn disk_view(s: &Scope<'_>, r: &impl Read, v: &Volume) -> Value {
    let zone = &v.availability_zone;
    let name = v.name.clone().unwrap_or_else(|| v.meta.id.clone());
    let users: Vec<String> = v
        .attachments
        .iter()
        .filter_map(|a| find_server(r, &a.server_id).ok())
        .map(|srv: Server| {
            s.link(&format!(
                "zones/{}/instances/{}",
                srv.availability_zone, srv.name
            ))
        })
        .collect();
    let mut view = json!({
        "kind": "compute#disk", "id": m::numeric_id(&v.meta.id).to_string(), "name": name,
        "description": v.description.clone().unwrap_or_default(), "sizeGb": v.size.to_string(),
        "zone": s.link(&format!("zones/{zone}")), "status": disk_status(&v.status),
        "type": s.link(&format!("zones/{zone}/diskTypes/{}", DISK_TYPES
            .iter()
            .find(|t| **t == v.volume_type)
            .unwrap_or(&DEFAULT_DISK_TYPE))),
        "creationTimestamp": m::timestamp(&v.meta.created_at),
        "selfLink": s.link(&format!("zones/{zone}/disks/{name}")),
        "labels": v.metadata, "physicalBlockSizeBytes": "4096",
    });
    if !users.is_empty() {
        view["users"] = json!(users);
    }
    view
}

async fn list(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    list_zonal(
        &cloud,
        &p,
        &q,
        ("compute#diskList", "disks"),
        |r, s, zone| {
            r.list::<Volume>(VOLUMES)
                .iter()
                .filter(|v| v.meta.project_id == s.project.id && v.availability_zone == zone)
                .map(|v| disk_view(s, r, v))
                .collect()
        },
    )
}

async fn get_one(State(cloud): Ctx, Path(p): Params_) -> Reply {
    read_zonal(&cloud, &p, |r, s, zone| {
        let v = find_disk(r, s.project, zone, param(&p, "name"))?;
        ok(disk_view(s, r, &v))
    })
}

/// Fields a disk insert takes; `sourceImage` is accepted but not modelled (every disk is a
/// blank volume).
const INSERT_FIELDS: &[&str] = &[
    "name",
    "sizeGb",
    "description",
    "kind",
    "type",
    "labels",
    "sourceImage",
];

/// The `sizeGb` of a body (an int64, which GCE's JSON writes as a string; a number is taken
/// too), checked to be within GCE's 1..=65536 GiB; `None` when absent.
fn size_gb(b: &Map<String, Value>, field: &str) -> Result<Option<u64>, ApiError> {
    let size = match b.get("sizeGb") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s
            .parse::<u64>()
            .map_err(|_| invalid(format!("Invalid value for field '{field}': '{s}'.")))?,
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| invalid(format!("Invalid value for field '{field}'.")))?,
        Some(_) => return Err(invalid(format!("Invalid value for field '{field}'."))),
    };
    if !(1..=65_536).contains(&size) {
        return Err(invalid(format!(
            "Invalid value for field '{field}': '{size}'. Must be between 1 and 65536."
        )));
    }
    Ok(Some(size))
}

async fn insert(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Map<String, Value> = parse_body(&body)?;
    known_fields(&b, "disk_resource", INSERT_FIELDS)?;
    let name = resource_name(&b)?;
    let size = size_gb(&b, "resource.sizeGb")?.unwrap_or(10);
    let description = opt_str(&b, "description", "resource.description")?.map(str::to_owned);
    let type_link = opt_str(&b, "type", "resource.type")?.map(str::to_owned);
    let labels = labels(&b)?;
    for key in ["sourceImage", "kind"] {
        opt_str(&b, key, &format!("resource.{key}"))?;
    }
    change_zonal(&cloud, p, move |tx, s, at| {
        let (project, zone) = (s.project, at.zone);
        let volume_type = disk_type(project, zone, type_link.as_deref())?;
        if find_disk(tx, project, zone, &name).is_ok() {
            return Err(already_exists(
                &project.path(&format!("zones/{zone}/disks/{name}")),
            ));
        }
        let (user_id, _) = user_of(s.cloud, tx);
        let v = Volume {
            meta: Meta::new(project.id.clone()),
            name: Some(name.clone()),
            description,
            size,
            status: volume::AVAILABLE.into(),
            availability_zone: zone.to_owned(),
            volume_type,
            user_id,
            metadata: labels,
            attachments: Vec::new(),
            multiattach: false,
        };
        tx.put(VOLUMES, &v.meta.id, &v)?;
        Ok(at.done("insert", "disks", &name, m::numeric_id(&v.meta.id)))
    })
    .await
}

async fn delete(State(cloud): Ctx, Path(p): Params_) -> Reply {
    change_zonal(&cloud, p, move |tx, s, at| {
        let (project, zone, name) = (s.project, at.zone, at.name);
        let v = find_disk(tx, project, zone, name)?;
        if !v.attachments.is_empty() {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "resourceInUseByAnotherResource",
                format!("The disk resource 'projects/{}/zones/{zone}/disks/{name}' is already being used by an instance", project.name)));
        }
        tx.delete(VOLUMES, &v.meta.id);
        Ok(at.done("delete", "disks", name, m::numeric_id(&v.meta.id)))
    })
    .await
}

/// `POST .../disks/{name}/resize` with `{"sizeGb": "N"}`: only a larger size is taken, as on
/// GCE (which cannot shrink a disk); an attached disk grows in place.
async fn resize(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Map<String, Value> = parse_body(&body)?;
    known_fields(&b, "disks_resize_request_resource", &["sizeGb"])?;
    let size = size_gb(&b, "sizeGb")?.ok_or_else(|| required("sizeGb"))?;
    change_zonal(&cloud, p, move |tx, s, at| {
        let mut v = find_disk(tx, s.project, at.zone, at.name)?;
        if size <= v.size {
            return Err(invalid(format!(
                "Invalid value for field 'sizeGb': '{size}'. New disk size '{size}' GiB must be larger than existing size '{}' GiB.",
                v.size
            )));
        }
        v.size = size;
        v.meta.touch();
        tx.put(VOLUMES, &v.meta.id, &v)?;
        tracing::info!(disk = %at.name, size_gb = size, "resized GCE disk");
        Ok(at.done("resize", "disks", at.name, m::numeric_id(&v.meta.id)))
    })
    .await
}
