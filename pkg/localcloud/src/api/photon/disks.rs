//! The Photon dialect's persistent disks: the project's Cinder volumes, created, attached,
//! detached and deleted through tasks (see the module doc of [`super`]).

use super::*;

fn disk_view(cloud: &Cloud, v: &Volume) -> Value {
    let tags: Vec<&String> = v.metadata.keys().collect();
    json!({
        "id": v.meta.id, "name": v.name, "kind": DISK_KIND, "flavor": v.volume_type,
        "capacityGb": v.size, "state": disk_state(v), "datastore": v.availability_zone,
        "vms": v.attachments.iter().map(|a| a.server_id.as_str()).collect::<Vec<_>>(),
        "tags": tags, "cost": [],
        "selfLink": format!("{}/v1/disks/{}", cloud.base_url, v.meta.id),
    })
}

fn disk_not_found(id: &str) -> ApiError {
    photon_error(
        StatusCode::NOT_FOUND,
        "DiskNotFound",
        format!("Disk {id} not found"),
    )
}

fn find_disk(r: &impl Read, id: &str) -> Result<Volume, ApiError> {
    r.get::<Volume>(VOLUMES, id)
        .ok_or_else(|| disk_not_found(id))
}

pub(super) async fn project_disks(
    State(cloud): Ctx,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let items = cloud.store.read(|r| {
        find_project(r, &id)?;
        let mut vols: Vec<Volume> = r
            .list::<Volume>(VOLUMES)
            .into_iter()
            .filter(|v| v.meta.project_id == id)
            .collect();
        vols.sort_by(|a, b| a.meta.created_at.cmp(&b.meta.created_at));
        Ok::<_, ApiError>(vols.iter().map(|v| disk_view(&cloud, v)).collect())
    })?;
    page(&format!("/v1/projects/{id}/disks"), &params, items)
}

pub(super) async fn disk(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let v = cloud.store.read(|r| find_disk(r, &id))?;
    Ok(reply(StatusCode::OK, disk_view(&cloud, &v)))
}

fn invalid(message: impl Into<String>) -> ApiError {
    photon_error(StatusCode::BAD_REQUEST, "InvalidEntity", message)
}

/// A `DiskCreateSpec`, checked as Photon's validation does.
struct DiskSpec {
    name: String,
    flavor: String,
    capacity_gb: u64,
    tags: Vec<String>,
}

fn disk_spec(body: &Bytes) -> Result<DiskSpec, ApiError> {
    let b: Map<String, Value> = parse_body(body)?;
    for key in b.keys() {
        if !matches!(
            key.as_str(),
            "name" | "kind" | "flavor" | "capacityGb" | "affinities" | "tags"
        ) {
            return Err(invalid(format!(
                "Unrecognized field \"{key}\" of DiskCreateSpec: it takes name, kind, flavor, capacityGb, affinities and tags"
            )));
        }
    }
    let text = |k: &str| -> Result<String, ApiError> {
        match b.get(k) {
            None | Some(Value::Null) => Err(invalid(format!("{k} may not be null (was null)"))),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(invalid(format!("{k} must be a string (was {other})"))),
        }
    };
    let name = text("name")?;
    let name_ok = name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !name_ok {
        return Err(invalid(format!(
            "name must match \"^[a-zA-Z][a-zA-Z0-9-]*\" and be at most {MAX_NAME} characters (was {name})"
        )));
    }
    let kind = text("kind")?;
    if kind != DISK_KIND && kind != "persistent" {
        return Err(invalid(format!("kind must be {DISK_KIND} (was {kind})")));
    }
    let flavor = text("flavor")?;
    if flavor.is_empty() {
        return Err(invalid("flavor may not be empty"));
    }
    let capacity_gb = match b.get("capacityGb") {
        Some(Value::Number(n)) => n.as_u64().filter(|c| (1..=65536).contains(c)),
        _ => None,
    }
    .ok_or_else(|| {
        invalid(format!(
            "capacityGb must be a whole number of GB from 1 to 65536 (was {})",
            b.get("capacityGb").unwrap_or(&Value::Null)
        ))
    })?;
    let tags = match b.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(format!("tags must be strings (was {t})")))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(invalid(format!("tags must be a list (was {other})"))),
    };
    Ok(DiskSpec {
        name,
        flavor,
        capacity_gb,
        tags,
    })
}

/// Makes a change and records its task in one transaction; `change` returns the task's entity
/// or, for a change refused by the state of things, the failed step's error (the change then
/// not made, the task `ERROR`). The answer is the task, `QUEUED`, as Photon answers.
async fn change<F>(
    cloud: &Arc<Cloud>,
    operation: &'static str,
    change: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(&mut Tx<'_>) -> Result<(String, (String, &'static str), Option<StepError>), ApiError>
        + Send
        + 'static,
{
    let task = cloud
        .write(move |tx| {
            let (project, (entity_id, entity_kind), error) = change(tx)?;
            let task = Task {
                meta: Meta::new(project),
                operation: operation.into(),
                state: if error.is_some() {
                    "ERROR"
                } else {
                    "COMPLETED"
                }
                .into(),
                entity_id,
                entity_kind: entity_kind.into(),
                error,
                resource_properties: None,
            };
            task.put(tx)?;
            Ok(task)
        })
        .await?;
    let mut view = stored_task_view(cloud, &task);
    view["state"] = json!("QUEUED");
    if let Some(steps) = view["steps"].as_array_mut() {
        for s in steps {
            s["state"] = json!("QUEUED");
            s["errors"] = json!([]);
        }
    }
    Ok(reply(StatusCode::CREATED, view))
}

fn state_error(message: String) -> Option<StepError> {
    Some(StepError {
        code: "StateError".into(),
        message,
    })
}

pub(super) async fn create_disk(
    State(cloud): Ctx,
    Path(project): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let spec = disk_spec(&body)?;
    let c = cloud.clone();
    change(&cloud, "CREATE_DISK", move |tx| {
        find_project(tx, &project)?;
        let (user_id, _) = crate::api::gce::user_of(&c, tx);
        let v = Volume {
            meta: Meta::new(project.clone()),
            name: Some(spec.name),
            description: None,
            size: spec.capacity_gb,
            status: volume::AVAILABLE.into(),
            availability_zone: defaults::AVAILABILITY_ZONE.into(),
            volume_type: spec.flavor,
            user_id,
            metadata: spec.tags.into_iter().map(|t| (t, String::new())).collect(),
            attachments: Vec::new(),
            multiattach: false,
        };
        tx.put(VOLUMES, &v.meta.id, &v)?;
        tracing::info!(disk = %v.meta.id, "created Photon persistent disk");
        Ok((project, (v.meta.id, DISK_KIND), None))
    })
    .await
}

pub(super) async fn delete_disk(
    State(cloud): Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    change(&cloud, "DELETE_DISK", move |tx| {
        let v = find_disk(tx, &id)?;
        let project = v.meta.project_id.clone();
        if let Some(a) = v.attachments.first() {
            return Ok((
                project,
                (id.clone(), DISK_KIND),
                state_error(format!(
                    "Disk {id} is attached to VM {}: detach it first",
                    a.server_id
                )),
            ));
        }
        tx.delete(VOLUMES, &id);
        tracing::info!(disk = %id, "deleted Photon persistent disk");
        Ok((project, (id, DISK_KIND), None))
    })
    .await
}

/// The `diskId` of a `VmDiskOperation`.
fn disk_operation(body: &Bytes) -> Result<String, ApiError> {
    let b: Map<String, Value> = parse_body(body)?;
    for key in b.keys() {
        if key != "diskId" && key != "arguments" {
            return Err(invalid(format!(
                "Unrecognized field \"{key}\" of VmDiskOperation: it takes diskId and arguments"
            )));
        }
    }
    match b.get("diskId") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        other => Err(invalid(format!(
            "diskId may not be null or empty (was {})",
            other.unwrap_or(&Value::Null)
        ))),
    }
}

pub(super) async fn attach_disk(
    State(cloud): Ctx,
    Path(vm_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let disk_id = disk_operation(&body)?;
    let dir = cloud.config.config_drive_dir();
    change(&cloud, "ATTACH_DISK", move |tx| {
        let server = find_vm(tx, &vm_id)?;
        let v = find_disk(tx, &disk_id)?;
        let project = server.meta.project_id.clone();
        let entity = (vm_id.clone(), "vm");
        if v.meta.project_id != server.meta.project_id {
            return Ok((
                project,
                entity,
                state_error(format!("Disk {disk_id} is not in the VM's project")),
            ));
        }
        if let Some(a) = v.attachments.first() {
            return Ok((
                project,
                entity,
                state_error(format!(
                    "Disk {disk_id} is already attached to VM {}",
                    a.server_id
                )),
            ));
        }
        if !matches!(server.status.as_str(), ACTIVE | SHUTOFF) {
            return Ok((
                project,
                entity,
                state_error(format!(
                    "VM {vm_id} is {}: disks attach to a STARTED or STOPPED VM",
                    vm_state(&server.status)
                )),
            ));
        }
        volume::attach(tx, &disk_id, &vm_id, volume::AttachOptions::default())?;
        volume::finish(tx, &disk_id)?;
        crate::model::config_drive::write(&dir, tx, &server)?;
        tracing::info!(vm = %server.name, disk = %disk_id, "attached Photon persistent disk");
        Ok((project, entity, None))
    })
    .await
}

pub(super) async fn detach_disk(
    State(cloud): Ctx,
    Path(vm_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let disk_id = disk_operation(&body)?;
    let dir = cloud.config.config_drive_dir();
    change(&cloud, "DETACH_DISK", move |tx| {
        let server = find_vm(tx, &vm_id)?;
        let v = find_disk(tx, &disk_id)?;
        let project = server.meta.project_id.clone();
        let entity = (vm_id.clone(), "vm");
        if !v.attachments.iter().any(|a| a.server_id == vm_id) {
            return Ok((
                project,
                entity,
                state_error(format!("Disk {disk_id} is not attached to VM {vm_id}")),
            ));
        }
        volume::begin_detach(tx, &disk_id, &vm_id)?;
        volume::finish(tx, &disk_id)?;
        crate::model::config_drive::write(&dir, tx, &server)?;
        tracing::info!(vm = %server.name, disk = %disk_id, "detached Photon persistent disk");
        Ok((project, entity, None))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_specs_are_checked_as_photon_checks_them() {
        let ok = disk_spec(&Bytes::from_static(
            br#"{"name":"kubernetes-dynamic-pvc-1","kind":"persistent-disk","flavor":"pd","capacityGb":2,"tags":["a=b"]}"#,
        ))
        .map_err(|e| e.message)
        .expect("a valid spec");
        assert_eq!((ok.capacity_gb, ok.tags.len()), (2, 1));
        for (bad, says) in [
            (
                r#"{"name":"1x","kind":"persistent-disk","flavor":"pd","capacityGb":1}"#,
                "name must match",
            ),
            (
                r#"{"name":"x","kind":"ephemeral-disk","flavor":"pd","capacityGb":1}"#,
                "kind must be",
            ),
            (
                r#"{"name":"x","kind":"persistent-disk","flavor":"","capacityGb":1}"#,
                "flavor may not be empty",
            ),
            (
                r#"{"name":"x","kind":"persistent-disk","flavor":"pd","capacityGb":0}"#,
                "capacityGb must be",
            ),
            (
                r#"{"name":"x","kind":"persistent-disk","flavor":"pd","capacityGb":1.5}"#,
                "capacityGb must be",
            ),
            (
                r#"{"name":"x","kind":"persistent-disk","capacityGb":1}"#,
                "flavor may not be null",
            ),
            (
                r#"{"name":"x","kind":"persistent-disk","flavor":"pd","capacityGb":1,"size":3}"#,
                "Unrecognized field \"size\"",
            ),
        ] {
            let e = disk_spec(&Bytes::from(bad))
                .err()
                .map(|e| e.message)
                .unwrap_or_default();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
