//! Image v2 (Glance), read-only: one seeded public image, so that `openstack server create
//! --image cirros ...` and image-name lookups work. Images hold no data.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use super::{reply, service_layers, ApiError, Cloud, Ctx, Params, Routes, Service};
use crate::defaults::{Image, IMAGES};

pub(crate) fn find_image(id: &str) -> Option<&'static Image> {
    IMAGES.iter().find(|i| i.id == id)
}

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let protected = Router::new()
        .route("/image/v2/images", get(list_images))
        .route("/image/v2/images/{id}", get(get_image))
        .scoped(&cloud);
    let public = Router::new()
        .get_with_slash("/image", versions)
        .get_with_slash("/image/v2", versions);
    service_layers(public.merge(protected), &cloud, Service::Image)
}

async fn versions(State(cloud): Ctx) -> Response {
    reply(
        StatusCode::OK,
        json!({"versions": [{"id": "v2.16", "status": "CURRENT",
            "links": [{"rel": "self", "href": format!("{}/image/v2/", cloud.base_url)}]}]}),
    )
}

fn view(i: &Image) -> Value {
    json!({
        "id": i.id, "name": i.name, "status": "active", "visibility": "public", "protected": false,
        "container_format": "bare", "disk_format": "qcow2", "size": i.size, "virtual_size": null,
        "min_disk": 0, "min_ram": 0, "checksum": null, "os_hash_algo": null, "os_hash_value": null,
        "owner": null, "os_hidden": false, "tags": [], "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "self": format!("/v2/images/{}", i.id),
        "file": format!("/v2/images/{}/file", i.id), "schema": "/v2/schemas/image",
    })
}

async fn list_images(Query(params): Query<Params>) -> Result<Response, ApiError> {
    let mut images: Vec<&Image> = IMAGES
        .iter()
        .filter(|i| params.get("name").is_none_or(|n| n == i.name))
        .filter(|i| {
            // `id=in:a,b` is how openstacksdk asks for several at once.
            params.get("id").is_none_or(|id| {
                id.strip_prefix("in:")
                    .map_or(id == i.id, |ids| ids.split(',').any(|x| x == i.id))
            })
        })
        .filter(|_| params.get("status").is_none_or(|s| s == "active"))
        .collect();
    if let Some(marker) = params.get("marker") {
        let Some(pos) = images.iter().position(|i| i.id == marker) else {
            return Err(ApiError::bad_request(format!(
                "marker {marker} could not be found"
            )));
        };
        images.drain(..=pos);
    }
    let limit = match params.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("limit param must be an integer: {l:?}")))?,
        None => usize::MAX,
    };
    let more = images.len() > limit;
    images.truncate(limit);
    let mut body = json!({
        "images": images.iter().map(|i| view(i)).collect::<Vec<_>>(),
        "first": "/v2/images", "schema": "/v2/schemas/images",
    });
    if more {
        if let Some(last) = images.last() {
            body["next"] = json!(format!("/v2/images?marker={}&limit={limit}", last.id));
        }
    }
    Ok(reply(StatusCode::OK, body))
}

async fn get_image(Path(id): Path<String>) -> Result<Response, ApiError> {
    let image = find_image(&id).ok_or_else(|| {
        ApiError::not_found("HTTPNotFound", format!("No image found with ID {id}"))
    })?;
    Ok(reply(StatusCode::OK, view(image)))
}
