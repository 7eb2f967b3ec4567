//! GCE zonal persistent disks: the Cinder volumes of the project, by name, in their
//! availability zone (`sizeGb` is the size, `users` the instances they are attached to,
//! `status` `READY` for an available or attached volume). A disk made here is a volume to
//! Cinder and the operator CLI.

use super::body::{opt_str, resource_name};
use super::list::list_reply;
use super::operations::{change, Done};
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
        .ok_or_else(|| {
            not_found(&format!(
                "projects/{}/zones/{zone}/disks/{name}",
                project.name
            ))
        })
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

async fn list(
    State(cloud): Ctx,
    Path(p): Params_,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let zone = param(&p, "zone");
        check_zone(r, &project, zone)?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        let items = r
            .list::<Volume>(VOLUMES)
            .iter()
            .filter(|v| v.meta.project_id == project.id && v.availability_zone == zone)
            .map(|v| disk_view(&s, r, v))
            .collect();
        list_reply(
            "compute#diskList",
            format!("projects/{}/zones/{zone}/disks", project.name),
            s.link(&format!("zones/{zone}/disks")),
            items,
            &params,
        )
    })
}

async fn get_one(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let zone = param(&p, "zone");
        check_zone(r, &project, zone)?;
        let v = find_disk(r, &project, zone, param(&p, "name"))?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        Ok(reply(StatusCode::OK, disk_view(&s, r, &v)))
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

async fn insert(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Result<Response, ApiError> {
    let b: Map<String, Value> = parse_body(&body)?;
    if let Some(unknown) = b.keys().find(|k| !INSERT_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\" at 'disk_resource': Cannot find field."
        )));
    }
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
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let project = s.project;
        let zone = param(&p, "zone").to_owned();
        check_zone(tx, project, &zone)?;
        if find_disk(tx, project, &zone, &name).is_ok() {
            return Err(already_exists(&format!(
                "projects/{}/zones/{zone}/disks/{name}",
                project.name
            )));
        }
        let (user_id, _) = user_of(s.cloud, tx);
        let v = Volume {
            meta: Meta::new(project.id.clone()),
            name: Some(name.clone()),
            description,
            size,
            status: volume::AVAILABLE.into(),
            availability_zone: zone.clone(),
            volume_type: volume::VOLUME_TYPE.into(),
            user_id,
            metadata: BTreeMap::new(),
            attachments: Vec::new(),
            multiattach: false,
        };
        tx.put(VOLUMES, &v.meta.id, &v)?;
        Ok(Done {
            scope: format!("zones/{zone}"),
            op_type: "insert".into(),
            target: format!("zones/{zone}/disks/{name}"),
            target_id: m::numeric_id(&v.meta.id),
        })
    })
    .await
}

async fn delete(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let project = s.project;
        let zone = param(&p, "zone").to_owned();
        check_zone(tx, project, &zone)?;
        let v = find_disk(tx, project, &zone, param(&p, "name"))?;
        if !v.attachments.is_empty() {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "resourceInUseByAnotherResource",
                format!("The disk resource 'projects/{}/zones/{zone}/disks/{}' is already being used by an instance", project.name, param(&p, "name"))));
        }
        tx.delete(VOLUMES, &v.meta.id);
        Ok(Done {
            scope: format!("zones/{zone}"),
            op_type: "delete".into(),
            target: format!("zones/{zone}/disks/{}", param(&p, "name")),
            target_id: m::numeric_id(&v.meta.id),
        })
    })
    .await
}
