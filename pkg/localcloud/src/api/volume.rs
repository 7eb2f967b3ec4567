//! Block Storage v3 (Cinder): volumes with size and availability zone, attachments to servers
//! (made through Nova's `os-volume_attachments`, as real clouds do), `os-extend`, availability
//! zones and volume types, with microversions up to 3.70. Volumes hold no data.
//!
//! Status transitions are Cinder's: a new volume is `creating` (the 202 answer says so) and
//! then `available`; `os-extend` moves it to `extending` and back; Nova's attach moves it
//! `available` → `attaching` → `in-use` and its detach `in-use` → `detaching` → `available`
//! (or back to `in-use` while a multiattach volume has other attachments). Both steps are
//! durable writes, and the second is made before the answer is sent, so a client that does not
//! wait (as real Cinder needs) still finds the volume usable; one that polls, as the
//! `openstack` provider does, sees it settled at once. A server that stops between the two
//! steps finishes them when it starts again ([`settle_pending`]).
//!
//! A volume is attached to one server at a time unless it is `multiattach` (created with the
//! `multiattach` volume type, as devstack defines it, or the deprecated `multiattach: true`
//! of the create body); another attach is refused with Cinder's reservation error, which Nova
//! passes on.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::zones::{check_zone, zones_body};
use super::{
    iso, new_id, newest_first, now, paginate, parse_body, reply, service_layers, ApiError, Caller,
    Cloud, Ctx, Microversion, Microversions, Params, Routes, Service,
};
use crate::model::Meta;
use crate::store::{Read, Tx};

pub(crate) use crate::model::volume::{attached_to, Attachment, Volume, VOLUMES};

pub(crate) const MICROVERSIONS: Microversions = Microversions {
    service: "volume",
    min: Microversion(3, 0),
    max: Microversion(3, 70),
    legacy_header: None,
};

pub(crate) const AVAILABLE: &str = "available";
pub(crate) const IN_USE: &str = "in-use";
pub(crate) const CREATING: &str = "creating";
pub(crate) const EXTENDING: &str = "extending";
pub(crate) const ATTACHING: &str = "attaching";
pub(crate) const DETACHING: &str = "detaching";

pub(crate) const VOLUME_TYPE: &str = "lvmdriver-1";
/// devstack's multiattach volume type (extra spec `multiattach="<is> True"`).
const MULTIATTACH_TYPE: &str = "multiattach";

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("itemNotFound", format!("Volume {id} could not be found."))
}

pub(crate) fn find_volume(r: &impl Read, id: &str) -> Result<Volume, ApiError> {
    r.get::<Volume>(VOLUMES, id).ok_or_else(|| not_found(id))
}

/// What Nova records with an attachment besides the device.
#[derive(Debug, Default, Clone)]
pub(crate) struct AttachOptions {
    pub device: Option<String>,
    pub tag: Option<String>,
    pub delete_on_termination: bool,
    /// GCE's `deviceName` (see [`Attachment::device_name`]).
    pub device_name: Option<String>,
    /// GCE's `READ_ONLY` mode (see [`Attachment::read_only`]).
    pub read_only: bool,
}

/// Starts attaching a volume to a server (the first of the two writes: the volume becomes
/// `attaching` and the attachment, with its device, is recorded), choosing the next
/// `/dev/vdX` of the server unless given. As Cinder's reservation: a volume that is not
/// multiattach must be `available`, a multiattach one `available` or `in-use`, and so may a
/// volume attached only read-only when it is attached read-only again (GCE's `READ_ONLY`
/// sharing); a volume already attached to this server is refused as Nova refuses it.
/// [`finish`] completes it.
pub(crate) fn attach(
    tx: &mut Tx<'_>,
    volume_id: &str,
    server_id: &str,
    options: AttachOptions,
) -> Result<Volume, ApiError> {
    let mut v = find_volume(tx, volume_id)?;
    if v.attachments.iter().any(|a| a.server_id == server_id) {
        return Err(ApiError::bad_request(format!(
            "Invalid volume: volume {volume_id} already attached"
        )));
    }
    let shared_read_only = options.read_only && v.attachments.iter().all(|a| a.read_only);
    let allowed: &[&str] = if v.multiattach || shared_read_only {
        &[AVAILABLE, IN_USE]
    } else {
        &[AVAILABLE]
    };
    if !allowed.contains(&v.status.as_str()) {
        // Cinder's `attachment_create` refusal, as Nova's 400 wraps it.
        let expected = if v.multiattach {
            "available or in-use or downloading"
        } else {
            "available or downloading"
        };
        return Err(ApiError::bad_request(format!(
            "Invalid input received: Invalid volume: Volume {volume_id} status must be {expected} to reserve, but the current status is {}. (HTTP 400) (Request-ID: req-{})",
            v.status,
            new_id()
        )));
    }
    let taken: Vec<String> = attached_to(tx, server_id)
        .iter()
        .flat_map(|v| {
            v.attachments
                .iter()
                .filter(|a| a.server_id == server_id)
                .map(|a| a.device.clone())
        })
        .collect();
    let device = match options.device {
        Some(d) if taken.contains(&d) => {
            return Err(ApiError::bad_request(format!(
                "The supplied device path ({d}) is in use."
            )))
        }
        Some(d) => d,
        None => (b'b'..=b'z')
            .map(|c| format!("/dev/vd{}", c as char))
            .find(|d| !taken.contains(d))
            .ok_or_else(|| ApiError::bad_request("No free device name left on the server"))?,
    };
    v.attachments.push(Attachment {
        id: new_id(),
        server_id: server_id.into(),
        device,
        attached_at: iso(now()),
        tag: options.tag,
        delete_on_termination: options.delete_on_termination,
        detaching: false,
        device_name: options.device_name,
        read_only: options.read_only,
    });
    v.status = ATTACHING.into();
    v.meta.touch();
    tx.put(VOLUMES, volume_id, &v)?;
    Ok(v)
}

/// Starts detaching a volume from a server (the first of the two writes: the volume becomes
/// `detaching`, its attachment marked); [`finish`] removes the attachment.
pub(crate) fn begin_detach(
    tx: &mut Tx<'_>,
    volume_id: &str,
    server_id: &str,
) -> Result<(), ApiError> {
    let mut v = find_volume(tx, volume_id)?;
    if v.status != IN_USE {
        return Err(ApiError::bad_request(format!(
            "Invalid volume: Unable to detach volume. Volume status must be 'in-use' and attach_status must be 'attached' to detach. (volume {volume_id} is {})",
            v.status
        )));
    }
    for a in v
        .attachments
        .iter_mut()
        .filter(|a| a.server_id == server_id)
    {
        a.detaching = true;
    }
    v.status = DETACHING.into();
    v.meta.touch();
    tx.put(VOLUMES, volume_id, &v)?;
    Ok(())
}

/// Detaches a volume from a server at once (a deleted server's volumes).
pub(crate) fn detach(tx: &mut Tx<'_>, volume_id: &str, server_id: &str) -> Result<(), ApiError> {
    let mut v = find_volume(tx, volume_id)?;
    v.attachments.retain(|a| a.server_id != server_id);
    if v.attachments.is_empty() {
        v.status = AVAILABLE.into();
    } else if v.status != EXTENDING && v.status != CREATING {
        v.status = IN_USE.into();
    }
    v.meta.touch();
    tx.put(VOLUMES, volume_id, &v)?;
    Ok(())
}

fn view(cloud: &Cloud, v: &Volume, detail: bool, mv: Microversion) -> Value {
    let links = json!([
        {"rel": "self", "href": format!("{}/volume/v3/{}/volumes/{}", cloud.base_url, v.meta.project_id, v.meta.id)},
        {"rel": "bookmark", "href": format!("{}/volume/{}/volumes/{}", cloud.base_url, v.meta.project_id, v.meta.id)},
    ]);
    if !detail {
        return json!({"id": v.meta.id, "name": v.name, "links": links});
    }
    let attachments: Vec<Value> = v
        .attachments
        .iter()
        .map(|a| json!({"id": v.meta.id, "attachment_id": a.id, "volume_id": v.meta.id, "server_id": a.server_id, "host_name": null, "device": a.device, "attached_at": a.attached_at}))
        .collect();
    let mut out = json!({
        "id": v.meta.id, "name": v.name, "description": v.description, "size": v.size, "status": v.status,
        "availability_zone": v.availability_zone, "attachments": attachments, "bootable": "false",
        "encrypted": false, "created_at": v.meta.created_at.trim_end_matches('Z').to_owned() + ".000000",
        "updated_at": v.meta.updated_at.trim_end_matches('Z').to_owned() + ".000000",
        "volume_type": v.volume_type, "metadata": v.metadata, "user_id": v.user_id,
        "os-vol-tenant-attr:tenant_id": v.meta.project_id, "os-vol-host-attr:host": "local-cloud@lvm#lvm",
        "multiattach": v.multiattach, "links": links, "snapshot_id": null, "source_volid": null,
        "replication_status": null, "consistencygroup_id": null, "migration_status": null,
        "os-vol-mig-status-attr:migstat": null, "os-vol-mig-status-attr:name_id": null,
    });
    if mv >= Microversion(3, 13) {
        out["group_id"] = json!(null);
    }
    if mv >= Microversion(3, 21) {
        out["provider_id"] = json!(null);
    }
    if mv >= Microversion(3, 48) {
        out["service_uuid"] = json!(null);
        out["shared_targets"] = json!(false);
    }
    if mv >= Microversion(3, 63) {
        out["volume_type_id"] = json!(v.volume_type);
    }
    if mv >= Microversion(3, 65) {
        out["consumes_quota"] = json!(true);
    }
    out
}

/// Middleware: the `{project}` of `/volume/v3/{project}/...` must be the token's project;
/// another one is answered as Cinder answers it (400 `Malformed request url`), so no request
/// reaches another project's volumes.
async fn project_in_path(
    axum::Extension(caller): axum::Extension<Caller>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let in_path = req
        .uri()
        .path()
        .strip_prefix("/volume/v3/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default();
    if in_path != caller.project_id {
        return ApiError::bad_request("Malformed request url").into_response();
    }
    next.run(req).await
}

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let p = "/volume/v3/{project}";
    let protected = Router::new()
        .route(
            &format!("{p}/volumes"),
            get(list_volumes).post(create_volume),
        )
        .route(&format!("{p}/volumes/detail"), get(list_volumes_detail))
        .route(
            &format!("{p}/volumes/{{id}}"),
            get(get_volume).put(update_volume).delete(delete_volume),
        )
        .route(&format!("{p}/volumes/{{id}}/action"), post(volume_action))
        .route(&format!("{p}/os-availability-zone"), get(list_zones))
        .route(&format!("{p}/types"), get(list_types))
        .route_layer(axum::middleware::from_fn(project_in_path))
        .scoped(&cloud);
    let public = Router::new()
        .get_with_slash("/volume", versions)
        .get_with_slash("/volume/v3", versions)
        .route(p, get(versions));
    let router = public
        .merge(protected)
        .layer(axum::middleware::from_fn(|req, next| {
            super::negotiate_microversion(MICROVERSIONS, req, next)
        }));
    service_layers(router, &cloud, Service::Volume)
}

async fn versions(State(cloud): Ctx) -> Response {
    reply(
        StatusCode::OK,
        json!({"versions": [{
            "id": "v3.0", "status": "CURRENT", "version": MICROVERSIONS.max.to_string(),
            "min_version": MICROVERSIONS.min.to_string(), "updated": "2023-03-15T00:00:00Z",
            "links": [{"rel": "self", "href": format!("{}/volume/v3/", cloud.base_url)}],
            "media-types": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}],
        }]}),
    )
}

async fn list_volumes(
    state: Ctx,
    mv: Extension<Microversion>,
    q: Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    list(state, mv, q, uri, false).await
}

async fn list_volumes_detail(
    state: Ctx,
    mv: Extension<Microversion>,
    q: Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    list(state, mv, q, uri, true).await
}

async fn list(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Query(params): Query<Params>,
    uri: Uri,
    detail: bool,
) -> Result<Response, ApiError> {
    let mut vols: Vec<Volume> = cloud.store.read(|r| r.list::<Volume>(VOLUMES));
    vols.retain(|v| {
        params
            .get("name")
            .is_none_or(|n| v.name.as_deref() == Some(n))
            && params.get("status").is_none_or(|s| v.status == s)
            && params
                .get("availability_zone")
                .is_none_or(|z| v.availability_zone == z)
    });
    let mut views: Vec<Value> = vols.iter().map(|v| {
        let mut view = view(&cloud, v, true, mv);
        if !detail {
            view = json!({"id": view["id"], "name": view["name"], "links": view["links"], "created_at": view["created_at"]});
        }
        view
    }).collect();
    newest_first(&mut views, "created_at");
    if !detail {
        for v in &mut views {
            if let Some(o) = v.as_object_mut() {
                o.remove("created_at");
            }
        }
    }
    let (page, next) = paginate(views, &params, &cloud.base_url, &uri, 1000)?;
    Ok(reply(
        StatusCode::OK,
        super::list_body("volumes", page, next),
    ))
}

async fn get_volume(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path((_, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let v = cloud.store.read(|r| find_volume(r, &id))?;
    Ok(reply(
        StatusCode::OK,
        json!({"volume": view(&cloud, &v, true, mv)}),
    ))
}

#[derive(Deserialize)]
struct CreateVolumeBody {
    volume: CreateVolume,
}

/// Cinder's schema allows additional properties here, so unknown fields are ignored.
#[derive(Deserialize)]
struct CreateVolume {
    size: Option<Value>,
    name: Option<String>,
    description: Option<String>,
    availability_zone: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    volume_type: Option<String>,
    snapshot_id: Option<String>,
    source_volid: Option<String>,
    #[serde(rename = "imageRef")]
    image_ref: Option<String>,
    /// Deprecated in Cinder for the volume type's extra spec, still honoured.
    multiattach: Option<bool>,
}

/// A size in GiB (`size`, `new_size`), 1..=1000000, named `field` in errors.
fn parse_size(field: &str, v: Option<&Value>) -> Result<u64, ApiError> {
    let size = match v {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        None => {
            return Err(ApiError::bad_request(format!(
                "Invalid input for field/attribute {field}: '{field}' is a required property"
            )))
        }
        _ => None,
    };
    match size {
        Some(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err(ApiError::bad_request(format!("Invalid input for field/attribute {field}. Value: {}. It must be an integer between 1 and 1000000", v.map(Value::to_string).unwrap_or_default()))),
    }
}

async fn create_volume(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Extension(mv): Extension<Microversion>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: CreateVolumeBody = parse_body(&body)?;
    let b = b.volume;
    if b.snapshot_id.is_some() || b.source_volid.is_some() || b.image_ref.is_some() {
        return Err(ApiError::bad_request("Creating volumes from snapshots, volumes or images is not supported by the local cloud"));
    }
    let size = parse_size("size", b.size.as_ref())?;
    if let Some(t) = &b.volume_type {
        if t != VOLUME_TYPE && t != MULTIATTACH_TYPE {
            return Err(ApiError::not_found(
                "itemNotFound",
                format!("Volume type with name {t} could not be found."),
            ));
        }
    }
    let v = cloud
        .write(move |tx| {
            let zone = check_zone(tx, b.availability_zone.clone()).map_err(|_| {
                ApiError::bad_request(format!(
                    "Invalid input received: Availability zone '{}' is invalid.",
                    b.availability_zone.clone().unwrap_or_default()
                ))
            })?;
            let v = Volume {
                meta: Meta::new(caller.project_id),
                name: b.name,
                description: b.description,
                size,
                status: CREATING.into(),
                availability_zone: zone,
                multiattach: b.multiattach.unwrap_or(false)
                    || b.volume_type.as_deref() == Some(MULTIATTACH_TYPE),
                volume_type: b.volume_type.unwrap_or_else(|| VOLUME_TYPE.into()),
                user_id: caller.user_id,
                metadata: b.metadata.unwrap_or_default(),
                attachments: vec![],
            };
            tx.put(VOLUMES, &v.meta.id, &v)?;
            Ok(v)
        })
        .await?;
    let id = v.meta.id.clone();
    cloud.write(move |tx| finish(tx, &id)).await?;
    Ok(reply(
        StatusCode::ACCEPTED,
        json!({"volume": view(&cloud, &v, true, mv)}),
    ))
}

/// Whether a status is one of the transitions [`finish`] ends.
fn transitional(status: &str) -> bool {
    [CREATING, EXTENDING, ATTACHING, DETACHING].contains(&status)
}

/// Ends a volume's transition: `creating` becomes `available`; `attaching` becomes `in-use`;
/// `detaching` drops the attachments being detached; each then settles to `available` or
/// `in-use` by the attachments left, as `extending` does.
pub(crate) fn finish(tx: &mut Tx<'_>, id: &str) -> Result<(), ApiError> {
    let Some(mut v) = tx.get::<Volume>(VOLUMES, id) else {
        return Ok(());
    };
    if !transitional(&v.status) {
        return Ok(());
    }
    v.attachments.retain(|a| !a.detaching);
    v.status = if v.attachments.is_empty() {
        AVAILABLE.into()
    } else {
        IN_USE.into()
    };
    v.meta.touch();
    tx.put(VOLUMES, id, &v)?;
    Ok(())
}

/// Finishes the transitions a stopped server left (run at start).
pub(crate) fn settle_pending(tx: &mut Tx<'_>) -> Result<usize, ApiError> {
    let pending: Vec<String> = tx
        .list::<Volume>(VOLUMES)
        .into_iter()
        .filter(|v| transitional(&v.status))
        .map(|v| v.meta.id)
        .collect();
    for id in &pending {
        finish(tx, id)?;
    }
    Ok(pending.len())
}

#[derive(Deserialize)]
struct UpdateVolumeBody {
    volume: UpdateVolume,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateVolume {
    #[serde(default, deserialize_with = "super::nullable")]
    name: Option<Option<String>>,
    #[serde(default, deserialize_with = "super::nullable")]
    description: Option<Option<String>>,
    metadata: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "super::nullable")]
    display_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "super::nullable")]
    display_description: Option<Option<String>>,
}

async fn update_volume(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path((_, id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: UpdateVolumeBody = parse_body(&body)?;
    let v = cloud
        .write(move |tx| {
            let mut v = find_volume(tx, &id)?;
            if let Some(n) = b.volume.name.or(b.volume.display_name) {
                v.name = n;
            }
            if let Some(d) = b.volume.description.or(b.volume.display_description) {
                v.description = d;
            }
            if let Some(m) = b.volume.metadata {
                v.metadata = m;
            }
            v.meta.touch();
            tx.put(VOLUMES, &id, &v)?;
            Ok(v)
        })
        .await?;
    Ok(reply(
        StatusCode::OK,
        json!({"volume": view(&cloud, &v, true, mv)}),
    ))
}

async fn delete_volume(
    State(cloud): Ctx,
    Path((_, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    cloud
        .write(move |tx| {
            let v = find_volume(tx, &id)?;
            if v.status != AVAILABLE {
                return Err(ApiError::bad_request(format!(
                    "Invalid volume: Volume status must be available or error or error_restoring or error_extending or error_managing and must not be migrating, attached, belong to a group, have snapshots or be disassociated from snapshots after volume transfer. (volume {id} is {})",
                    v.status
                )));
            }
            tx.delete(VOLUMES, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn volume_action(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path((_, id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: serde_json::Map<String, Value> = parse_body(&body)?;
    let Some((action, arg)) = b.into_iter().next() else {
        return Err(ApiError::bad_request(
            "Malformed request body: no action given",
        ));
    };
    match action.as_str() {
        "os-extend" => {
            let new_size = parse_size("new_size", arg.get("new_size"))?;
            let id = cloud
                .write(move |tx| {
                    let mut v = find_volume(tx, &id)?;
                    if v.status != AVAILABLE && !(v.status == IN_USE && mv >= Microversion(3, 42)) {
                        return Err(ApiError::bad_request(format!("Invalid volume: Volume status must be 'available' to extend, but current status is: {}.", v.status)));
                    }
                    if new_size <= v.size {
                        return Err(ApiError::bad_request(format!("Invalid input received: New size for extend must be greater than current size. (current: {}, extended: {new_size}).", v.size)));
                    }
                    v.status = EXTENDING.into();
                    v.meta.touch();
                    tx.put(VOLUMES, &id, &v)?;
                    Ok(id)
                })
                .await?;
            cloud
                .write(move |tx| {
                    if let Some(mut v) = tx.get::<Volume>(VOLUMES, &id) {
                        v.size = new_size;
                        tx.put(VOLUMES, &id, &v)?;
                    }
                    finish(tx, &id)
                })
                .await?;
            Ok(StatusCode::ACCEPTED.into_response())
        }
        other => Err(ApiError::bad_request(format!(
            "Volume action {other} is not supported by the local cloud"
        ))),
    }
}

async fn list_zones(State(cloud): Ctx) -> Response {
    reply(StatusCode::OK, cloud.store.read(|r| zones_body(r)))
}

async fn list_types(State(_cloud): Ctx) -> Response {
    reply(
        StatusCode::OK,
        json!({"volume_types": [
            {"id": VOLUME_TYPE, "name": VOLUME_TYPE, "is_public": true, "description": null, "extra_specs": {}, "qos_specs_id": null, "os-volume-type-access:is_public": true},
            {"id": MULTIATTACH_TYPE, "name": MULTIATTACH_TYPE, "is_public": true, "description": null, "extra_specs": {"multiattach": "<is> True"}, "qos_specs_id": null, "os-volume-type-access:is_public": true},
        ]}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn volume(status: &str, attached: bool) -> Volume {
        Volume {
            meta: Meta::new("p"),
            name: None,
            description: None,
            size: 1,
            status: status.into(),
            availability_zone: "nova".into(),
            volume_type: VOLUME_TYPE.into(),
            user_id: "u".into(),
            metadata: BTreeMap::new(),
            multiattach: false,
            attachments: attached
                .then(|| Attachment {
                    id: "a".into(),
                    server_id: "s".into(),
                    device: "/dev/vdb".into(),
                    attached_at: iso(now()),
                    tag: None,
                    delete_on_termination: false,
                    detaching: status == DETACHING,
                    device_name: None,
                    read_only: false,
                })
                .into_iter()
                .collect(),
        }
    }

    /// A server stopped between the two writes of a transition finishes it when it starts.
    #[test]
    fn transitions_left_by_a_stopped_server_are_finished() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store");
        let vols = [
            volume(CREATING, false),
            volume(EXTENDING, true),
            volume(EXTENDING, false),
            volume(IN_USE, true),
            volume(ATTACHING, true),
            volume(DETACHING, true),
        ];
        store
            .write(|tx| {
                for v in &vols {
                    tx.put(VOLUMES, &v.meta.id, v)?;
                }
                Ok::<_, ApiError>(())
            })
            .expect("seeded");
        let settled = store.write(settle_pending).expect("settled");
        assert_eq!(settled, 5);
        let status =
            |i: usize| store.read(|r| find_volume(r, &vols[i].meta.id).expect("volume").status);
        assert_eq!(status(0), AVAILABLE);
        assert_eq!(status(1), IN_USE, "an attached volume goes back to in-use");
        assert_eq!(status(2), AVAILABLE);
        assert_eq!(status(3), IN_USE);
        assert_eq!(status(4), IN_USE, "an attach is completed");
        assert_eq!(status(5), AVAILABLE, "a detach is completed");
        let left = store.read(|r| find_volume(r, &vols[5].meta.id).expect("volume"));
        assert!(left.attachments.is_empty());
    }
}
