//! A server's interfaces (`os-interface`) and volume attachments (`os-volume_attachments`),
//! with the attach and detach transitions they share with Cinder.

use super::*;

pub(super) fn interface_view(p: &Port) -> Value {
    json!({
        "port_state": "ACTIVE", "port_id": p.meta.id, "net_id": p.network_id, "mac_addr": p.mac_address,
        "fixed_ips": p.fixed_ips.iter().map(|f| json!({"subnet_id": f.subnet_id, "ip_address": f.ip_address})).collect::<Vec<_>>(),
    })
}

pub(super) async fn list_interfaces(
    State(cloud): Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let views: Vec<Value> = cloud.store.read(|r| {
        find_server(r, &id).map(|_| server_ports(r, &id).iter().map(interface_view).collect())
    })?;
    Ok(reply(
        StatusCode::OK,
        json!({"interfaceAttachments": views}),
    ))
}

pub(super) async fn get_interface(
    State(cloud): Ctx,
    Path((id, port)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let view = cloud.store.read(|r| {
        find_server(r, &id)?;
        server_ports(r, &id)
            .iter()
            .find(|p| p.meta.id == port)
            .map(interface_view)
            .ok_or_else(|| {
                ApiError::not_found("itemNotFound", format!("Port {port} is not attached"))
            })
    })?;
    Ok(reply(StatusCode::OK, json!({"interfaceAttachment": view})))
}

pub(super) fn attachment_view(server_id: &str, v: &Volume, mv: Microversion) -> Value {
    let a = v.attachments.iter().find(|a| a.server_id == server_id);
    let mut view = json!({"id": v.meta.id, "serverId": server_id, "volumeId": v.meta.id, "device": a.map(|a| a.device.clone())});
    if mv >= Microversion(2, 70) {
        view["tag"] = json!(a.and_then(|a| a.tag.clone()));
    }
    if mv >= Microversion(2, 79) {
        view["delete_on_termination"] = json!(a.is_some_and(|a| a.delete_on_termination));
    }
    view
}

pub(super) async fn list_attachments(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let views: Vec<Value> = cloud.store.read(|r| {
        find_server(r, &id).map(|_| {
            volume::attached_to(r, &id)
                .iter()
                .map(|v| attachment_view(&id, v, mv))
                .collect()
        })
    })?;
    Ok(reply(StatusCode::OK, json!({"volumeAttachments": views})))
}

pub(super) async fn get_attachment(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path((id, vol)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let view = cloud.store.read(|r| {
        find_server(r, &id)?;
        volume::attached_to(r, &id)
            .iter()
            .find(|v| v.meta.id == vol)
            .map(|v| attachment_view(&id, v, mv))
            .ok_or_else(|| {
                ApiError::not_found(
                    "itemNotFound",
                    format!("Volume {vol} is not attached to {id}"),
                )
            })
    })?;
    Ok(reply(StatusCode::OK, json!({"volumeAttachment": view})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttachBody {
    #[serde(rename = "volumeAttachment")]
    attachment: Attach,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Attach {
    #[serde(rename = "volumeId")]
    volume_id: String,
    #[serde(default, deserialize_with = "crate::api::nullable")]
    device: Option<Option<String>>,
    tag: Option<String>,
    delete_on_termination: Option<bool>,
}

/// A body field Nova's schema for this microversion does not have.
pub(super) fn unexpected(field: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid input for field/attribute volumeAttachment. Value: {field}. Additional properties are not allowed ('{field}' was unexpected)"
    ))
}

/// Nova's attach: the volume is reserved (`attaching`, device chosen) and then attached
/// (`in-use`), both durable, before the answer; the server's config drive shows the new
/// disk. Refusals are Nova's (see [`volume::attach`]).
pub(super) async fn attach_volume(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: AttachBody = parse_body(&body)?;
    let b = b.attachment;
    if b.tag.is_some() && mv < Microversion(2, 49) {
        return Err(unexpected("tag"));
    }
    if b.delete_on_termination.is_some() && mv < Microversion(2, 79) {
        return Err(unexpected("delete_on_termination"));
    }
    let vol = b.volume_id.clone();
    let server = id.clone();
    cloud
        .write(move |tx| {
            find_server(tx, &server)?;
            if tx.get::<Volume>(VOLUMES, &b.volume_id).is_none() {
                return Err(ApiError::not_found(
                    "itemNotFound",
                    format!("Volume {} could not be found.", b.volume_id),
                ));
            }
            volume::attach(
                tx,
                &b.volume_id,
                &server,
                volume::AttachOptions {
                    device: b.device.flatten(),
                    tag: b.tag,
                    delete_on_termination: b.delete_on_termination.unwrap_or(false),
                    ..Default::default()
                },
            )
        })
        .await?;
    let view = complete_transition(&cloud, id.clone(), vol.clone())
        .await?
        .map(|v| attachment_view(&id, &v, mv))
        .unwrap_or(Value::Null);
    tracing::info!(server = %id, volume = %vol, device = %view["device"], "attached volume");
    Ok(reply(StatusCode::OK, json!({"volumeAttachment": view})))
}

/// The second write of an attach or detach: ends the volume's transition and rewrites the
/// server's config drive (whose `devices` list the attached disks). Returns the volume.
pub(super) async fn complete_transition(
    cloud: &Arc<Cloud>,
    server_id: String,
    volume_id: String,
) -> Result<Option<Volume>, ApiError> {
    let dir = cloud.config.config_drive_dir();
    cloud
        .write(move |tx| {
            volume::finish(tx, &volume_id)?;
            if let Some(s) = tx.get::<Server>(SERVERS, &server_id) {
                crate::model::config_drive::write(&dir, tx, &s)?;
            }
            Ok(tx.get::<Volume>(VOLUMES, &volume_id))
        })
        .await
}

pub(super) async fn detach_volume(
    State(cloud): Ctx,
    Path((id, vol)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (server, volume_id) = (id.clone(), vol.clone());
    cloud
        .write(move |tx| {
            find_server(tx, &server)?;
            if !volume::attached_to(tx, &server)
                .iter()
                .any(|v| v.meta.id == volume_id)
            {
                return Err(ApiError::not_found(
                    "itemNotFound",
                    format!("Volume {volume_id} is not attached to {server}"),
                ));
            }
            volume::begin_detach(tx, &volume_id, &server)
        })
        .await?;
    complete_transition(&cloud, id.clone(), vol.clone()).await?;
    tracing::info!(server = %id, volume = %vol, "detached volume");
    Ok(StatusCode::ACCEPTED.into_response())
}
