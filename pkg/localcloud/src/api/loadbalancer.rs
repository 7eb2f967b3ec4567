//! Load Balancer v2 (Octavia) under `/load-balancer/v2`: load balancers with a VIP from the
//! local VIP pool, listeners, pools, members (including the batch member update the OpenStack
//! CCM uses), health monitors, cascade delete and the status tree, in Octavia's shapes and with
//! its error body (`{"faultcode", "faultstring", "debuginfo"}`). A change puts the load balancer
//! in `PENDING_UPDATE` (`PENDING_CREATE` when new) and further changes are refused with 409 until
//! the data plane ([`crate::dataplane`], the role of Octavia's worker and amphorae) has applied
//! it and moved it to `ACTIVE`. The records are [`crate::model::octavia`]'s; this module reads
//! request bodies into them ([`Body`], which answers 400 naming the field, with Octavia's
//! ranges) and renders their views.

mod body;
mod healthmonitors;
mod listeners;
mod loadbalancers;
mod members;
mod pools;

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use super::network::delete_vip_port;
use super::{
    list_body, matches_filters, paginate, reply, select_fields, service_layers, ApiError, Cloud,
    Ctx, Params, Routes, Service,
};
use crate::model::octavia::{
    self as m, HealthMonitor, Listener, LoadBalancer, Member, Octavia, Pool, Record,
};
use crate::store::{Read, Tx};

type ApiResult = Result<Response, ApiError>;

use super::records::{delete, find, Release, View};

fn conflict(message: impl Into<String>) -> ApiError {
    ApiError::conflict("Conflict", message)
}

fn put<T: Record>(tx: &mut Tx<'_>, record: &T) -> Result<(), ApiError> {
    record.put(tx)?;
    Ok(())
}

/// Takes the load balancer's lock: 409 while it is `PENDING_*`, else `PENDING_UPDATE`.
fn lock_lb(tx: &mut Tx<'_>, lb_id: &str) -> Result<LoadBalancer, ApiError> {
    let mut lb: LoadBalancer = find(tx, lb_id)?;
    if lb.common.provisioning_status.is_pending() {
        return Err(conflict(format!(
            "Load Balancer {lb_id} is immutable and cannot be updated."
        )));
    }
    lb.common.touch();
    put(tx, &lb)?;
    Ok(lb)
}

// ---- views ------------------------------------------------------------------------------------

impl View for LoadBalancer {
    fn view(&self, r: &impl Read) -> Value {
        let mut v = self.base_view();
        v["listeners"] = json!(m::refs(&m::listeners_of(r, self.id())));
        v["pools"] = json!(m::refs(&m::pools_of(r, self.id())));
        v["operating_status"] = json!(m::lb_status(r, self));
        v
    }
}

impl View for Listener {
    fn view(&self, r: &impl Read) -> Value {
        let mut v = self.base_view();
        v["operating_status"] = json!(m::listener_status(r, self));
        v
    }
}

impl View for Pool {
    fn view(&self, r: &impl Read) -> Value {
        let mut v = self.base_view();
        v["members"] = json!(m::refs(&m::members_of(r, self.id())));
        v["healthmonitor_id"] = json!(m::monitors_of(r, self.id())
            .first()
            .map(|hm| hm.id().to_owned()));
        v["listeners"] = json!(m::refs(&m::listeners_using(r, self.id())));
        v["operating_status"] = json!(m::pool_status(r, self));
        v
    }
}

impl View for Member {
    fn view(&self, _: &impl Read) -> Value {
        let mut v = self.base_view();
        v["operating_status"] = json!(m::member_status(self));
        v
    }
}

impl View for HealthMonitor {
    fn view(&self, _: &impl Read) -> Value {
        let mut v = self.base_view();
        v["operating_status"] = json!(m::monitor_status(self));
        v
    }
}

/// Deletes a pool with its members and health monitor, as Octavia deletes them with it.
pub(crate) fn delete_pool(tx: &mut Tx<'_>, pool_id: &str) {
    for member in m::members_of(tx, pool_id) {
        Member::delete(tx, member.id());
    }
    for hm in m::monitors_of(tx, pool_id) {
        HealthMonitor::delete(tx, hm.id());
    }
    Pool::delete(tx, pool_id);
}

/// Deletes load balancer `lb_id` with its listeners, pools (and their members and monitors)
/// and its VIP port: Octavia's cascade delete, and what the GCE dialect and the AWS follower
/// do when the forwarding rule or the followed load balancer goes. The data plane closes its
/// listeners.
pub(crate) fn delete_tree(tx: &mut Tx<'_>, lb_id: &str) -> Result<(), ApiError> {
    for p in m::pools_of(tx, lb_id) {
        delete_pool(tx, p.id());
    }
    for l in m::listeners_of(tx, lb_id) {
        Listener::delete(tx, l.id());
    }
    if let Some(lb) = tx.get::<LoadBalancer>(m::LOADBALANCERS, lb_id) {
        delete_vip_port(tx, lb_id, &lb.vip_port_id)?;
    }
    LoadBalancer::delete(tx, lb_id);
    Ok(())
}

/// `{"<kind>": view}` with `status`.
fn one<T: View>(r: &impl Read, status: StatusCode, record: &T) -> Response {
    reply(status, json!({ T::NAMES.one: record.view(r) }))
}

fn show<T: View>(cloud: &Cloud, id: &str) -> ApiResult {
    cloud.store.read(|r| {
        let record: T = find(r, id)?;
        Ok(one(r, StatusCode::OK, &record))
    })
}

const NOT_FILTERS: &[&str] = &[
    "limit",
    "marker",
    "fields",
    "page_reverse",
    "sort",
    "sort_key",
    "sort_dir",
];

/// `uri` is the request's original URI (the router is nested under two prefixes), so the
/// `next` link names the whole path.
fn list<T: View + Octavia>(
    cloud: &Cloud,
    params: &Params,
    uri: &Uri,
    extra: &[(&str, &str)],
    keep: impl Fn(&T) -> bool,
) -> ApiResult {
    // Every filter answered by the index: sort and page the records, render only the page.
    // Otherwise every candidate is rendered and the view filter decides (a filter on a field
    // the view computes, such as `operating_status`).
    let all_indexed = params
        .0
        .iter()
        .all(|(k, _)| NOT_FILTERS.contains(&k.as_str()) || T::INDEXED.contains(&k.as_str()));
    let listed = cloud.store.read(|r| {
        let mut records: Vec<T> = super::records::listed(r, params, extra);
        records.retain(|v| keep(v));
        records.sort_by(|a, b| {
            a.common()
                .meta
                .created_at
                .cmp(&b.common().meta.created_at)
                .then_with(|| a.id().cmp(b.id()))
        });
        if all_indexed {
            let ids: Vec<Value> = records.iter().map(|v| json!({"id": v.id()})).collect();
            let (page, next) = paginate(ids, params, &cloud.base_url, uri, 1000)?;
            let by_id: std::collections::HashMap<&str, &T> =
                records.iter().map(|v| (v.id(), v)).collect();
            let page: Vec<Value> = page
                .iter()
                .filter_map(|p| p["id"].as_str().and_then(|id| by_id.get(id)))
                .map(|v| v.view(r))
                .collect();
            return Ok::<_, ApiError>((page, next));
        }
        let items: Vec<Value> = records
            .iter()
            .map(|v| v.view(r))
            .filter(|v| matches_filters(v, params, NOT_FILTERS))
            .collect();
        paginate(items, params, &cloud.base_url, uri, 1000)
    });
    let (page, next) = listed?;
    let page = page.into_iter().map(|v| select_fields(v, params)).collect();
    Ok(reply(StatusCode::OK, list_body(T::NAMES.many, page, next)))
}

/// Lists of listeners and pools take `?loadbalancer_id=`.
fn list_on_lb<T: View + Octavia>(
    cloud: &Cloud,
    params: Params,
    uri: &Uri,
    lb_of: impl Fn(&T) -> &str,
) -> ApiResult {
    let lb = params.get("loadbalancer_id").map(str::to_owned);
    let mut params = params;
    params.0.retain(|(k, _)| k != "loadbalancer_id");
    let extra: Vec<(&str, &str)> = lb
        .iter()
        .map(|lb| ("loadbalancers.id", lb.as_str()))
        .collect();
    list(cloud, &params, uri, &extra, |v: &T| {
        lb.as_deref().is_none_or(|lb| lb_of(v) == lb)
    })
}

async fn get_one<T: View>(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    show::<T>(&cloud, &id)
}

async fn list_all<T: View + Octavia>(
    State(cloud): Ctx,
    Query(params): Query<Params>,
    axum::extract::OriginalUri(uri): axum::extract::OriginalUri,
) -> ApiResult {
    list::<T>(&cloud, &params, &uri, &[], |_| true)
}

// ---- routing ----------------------------------------------------------------------------------

async fn versions(State(cloud): Ctx) -> Response {
    let href = format!("{}/load-balancer/v2", cloud.base_url);
    reply(
        StatusCode::OK,
        json!({"versions": [
            {"id": "v2.0", "status": "SUPPORTED", "updated": "2016-12-11T00:00:00Z",
             "links": [{"href": href, "rel": "self"}]},
            {"id": "v2.27", "status": "CURRENT", "updated": "2023-05-05T00:00:00Z",
             "links": [{"href": href, "rel": "self"}]},
        ]}),
    )
}

/// The Load Balancer API router.
pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let lbaas = Router::new()
        .route(
            "/loadbalancers",
            get(list_all::<LoadBalancer>).post(loadbalancers::create),
        )
        .route(
            "/loadbalancers/{id}",
            get(get_one::<LoadBalancer>)
                .put(loadbalancers::update)
                .delete(loadbalancers::delete),
        )
        .route(
            "/loadbalancers/{id}/status",
            get(loadbalancers::status_tree),
        )
        .route("/availabilityzones", get(loadbalancers::availability_zones))
        .route("/flavors", get(loadbalancers::flavors))
        .route("/flavors/{id}", get(loadbalancers::flavor))
        .route("/listeners", get(listeners::list).post(listeners::create))
        .route(
            "/listeners/{id}",
            get(get_one::<Listener>)
                .put(listeners::update)
                .delete(delete::<Listener>),
        )
        .route("/pools", get(pools::list).post(pools::create))
        .route(
            "/pools/{id}",
            get(get_one::<Pool>)
                .put(pools::update)
                .delete(delete::<Pool>),
        )
        .route(
            "/pools/{id}/members",
            get(members::list)
                .post(members::create)
                .put(members::batch_update),
        )
        .route(
            "/pools/{id}/members/{member_id}",
            get(members::get)
                .put(members::update)
                .delete(members::delete),
        )
        .route(
            "/healthmonitors",
            get(list_all::<HealthMonitor>).post(healthmonitors::create),
        )
        .route(
            "/healthmonitors/{id}",
            get(get_one::<HealthMonitor>)
                .put(healthmonitors::update)
                .delete(delete::<HealthMonitor>),
        )
        .scoped(&cloud);
    let router = Router::new()
        .get_with_slash("/load-balancer", versions)
        .nest("/load-balancer/v2/lbaas", lbaas.clone())
        .nest("/load-balancer/v2.0/lbaas", lbaas);
    service_layers(router, &cloud, Service::LoadBalancer)
}
