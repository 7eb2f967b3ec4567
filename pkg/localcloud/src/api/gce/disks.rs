//! GCE zonal persistent disks: the Cinder volumes of the project, by name, in their
//! availability zone (`sizeGb` is the size, `users` the instances they are attached to,
//! `status` `READY` for an available or attached volume). A disk made here is a volume to
//! Cinder and the operator CLI.

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
}

fn disk_status(cinder: &str) -> &'static str {
    match cinder {
        volume::AVAILABLE | volume::IN_USE => "READY",
        volume::CREATING => "CREATING",
        "deleting" => "DELETING",
        _ => "FAILED",
    }
}

fn find_disk(r: &impl Read, project: &Project, zone: &str, name: &str) -> Result<Volume, ApiError> {
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
        "type": s.link(&format!("zones/{zone}/diskTypes/pd-standard")),
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

/// Fields a disk insert takes; `type`, `labels` and `sourceImage` are accepted but not
/// modelled (every disk is a plain volume).
const INSERT_FIELDS: &[&str] = &[
    "name",
    "sizeGb",
    "description",
    "kind",
    "type",
    "labels",
    "sourceImage",
];

async fn insert(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Map<String, Value> = parse_body(&body)?;
    known_fields(&b, "disk_resource", INSERT_FIELDS)?;
    let name = resource_name(&b)?;
    let size = match b.get("sizeGb") {
        None | Some(Value::Null) => 10,
        Some(Value::String(s)) => s
            .parse::<u64>()
            .map_err(|_| invalid(format!("Invalid value for field 'resource.sizeGb': '{s}'.")))?,
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| invalid("Invalid value for field 'resource.sizeGb'."))?,
        Some(_) => return Err(invalid("Invalid value for field 'resource.sizeGb'.")),
    };
    if !(1..=65_536).contains(&size) {
        return Err(invalid(format!(
            "Invalid value for field 'resource.sizeGb': '{size}'. Must be between 1 and 65536."
        )));
    }
    let description = opt_str(&b, "description", "resource.description")?.map(str::to_owned);
    for key in ["type", "sourceImage", "kind"] {
        opt_str(&b, key, &format!("resource.{key}"))?;
    }
    change_zonal(&cloud, p, move |tx, s, at| {
        let (project, zone) = (s.project, at.zone);
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
            volume_type: volume::VOLUME_TYPE.into(),
            user_id,
            metadata: BTreeMap::new(),
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
