//! Flavors (`/flavors`, fixed: see [`crate::defaults`]) and availability zones
//! (`os-availability-zone`).

use super::*;

pub(super) fn flavor_view(cloud: &Cloud, f: &Flavor, detail: bool, mv: Microversion) -> Value {
    let mut v = json!({"id": f.id, "name": f.name, "links": links(cloud, "flavors", f.id)});
    if detail {
        v["ram"] = json!(f.ram_mb);
        v["vcpus"] = json!(f.vcpus);
        v["disk"] = json!(f.disk_gb);
        v["swap"] = if mv >= Microversion(2, 75) {
            json!(0)
        } else {
            json!("")
        };
        v["OS-FLV-EXT-DATA:ephemeral"] = json!(0);
        v["OS-FLV-DISABLED:disabled"] = json!(false);
        v["os-flavor-access:is_public"] = json!(true);
        v["rxtx_factor"] = json!(1.0);
        if mv >= Microversion(2, 61) {
            v["extra_specs"] = json!({});
        }
    }
    if mv >= Microversion(2, 55) {
        v["description"] = json!(null);
    }
    v
}

pub(super) async fn list_flavors(
    state: Ctx,
    mv: Extension<Microversion>,
    q: Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    flavors(state, mv, q, uri, false).await
}

pub(super) async fn list_flavors_detail(
    state: Ctx,
    mv: Extension<Microversion>,
    q: Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    flavors(state, mv, q, uri, true).await
}

pub(super) async fn flavors(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Query(params): Query<Params>,
    uri: Uri,
    detail: bool,
) -> Result<Response, ApiError> {
    let views: Vec<Value> = FLAVORS
        .iter()
        .map(|f| flavor_view(&cloud, f, detail, mv))
        .collect();
    let (page, next) = paginate(views, &params, &cloud.base_url, &uri, 1000)?;
    Ok(reply(
        StatusCode::OK,
        crate::api::list_body("flavors", page, next),
    ))
}

pub(super) async fn get_flavor(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let f = FLAVORS.iter().find(|f| f.id == id).ok_or_else(|| {
        ApiError::not_found("itemNotFound", format!("Flavor {id} could not be found."))
    })?;
    Ok(reply(
        StatusCode::OK,
        json!({"flavor": flavor_view(&cloud, f, true, mv)}),
    ))
}

pub(super) async fn list_zones(State(cloud): Ctx) -> Response {
    reply(StatusCode::OK, cloud.store.read(|r| zones_body(r)))
}
