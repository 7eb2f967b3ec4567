//! Network v2.0 (Neutron): networks, subnets, ports with fixed IPs allocated from the subnet,
//! routers with interfaces, gateways and extra routes (`routes` on update and the atomic
//! `add_extraroutes`/`remove_extraroutes`), and floating IPs. Addresses are bookkeeping only:
//! nothing is configured on the host and no traffic is sent to them.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::handler::Handler;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, put};
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    matches_filters, paginate, parse_body, reply, select_fields, service_layers, ApiError, Cloud,
    Ctx, Params, Routes, Service,
};
use crate::model::{Meta, Record};
use crate::store::{Read, Tx};

mod addresses;
mod floating_ips;
mod networks;
mod ports;
mod routers;
mod security_groups;
mod subnets;

pub(crate) use addresses::*;
pub(crate) use floating_ips::*;
pub(crate) use networks::*;
pub(crate) use ports::*;
use routers::*;
pub(crate) use routers::{add_interface_on_subnet, new_router};
pub(crate) use security_groups::*;
pub(crate) use subnets::new_subnet;
use subnets::*;

pub(crate) use crate::model::network::*;

pub(crate) use super::records::{delete, find, Release, View};

// ---------------------------------------------------------------------------------------------
// Seeds

/// Creates DevStack's `private` and `public` networks and `router1` on first start.
pub(crate) fn seed(tx: &mut Tx<'_>, project_id: &str) -> Result<(), ApiError> {
    use crate::defaults as d;
    if !tx.list::<Network>(NETWORKS).is_empty() {
        return Ok(());
    }
    let private = new_network(tx, d::NETWORK, project_id, false)?;
    let private_subnet = new_subnet(tx, d::SUBNET, &private.meta.id, d::SUBNET_CIDR, project_id)?;
    let public = new_network(tx, d::PUBLIC_NETWORK, project_id, true)?;
    new_subnet(
        tx,
        d::PUBLIC_SUBNET,
        &public.meta.id,
        d::PUBLIC_SUBNET_CIDR,
        project_id,
    )?;
    let router = new_router(tx, d::ROUTER, project_id, Some(public.meta.id))?;
    add_interface_on_subnet(tx, &router, &private_subnet.meta.id)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// HTTP

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let v2 = "/network/v2.0";
    let r = Router::new();
    let r = resource::<Network, _, _>(r, "networks", create::<Network>);
    let r = resource::<Subnet, _, _>(r, "subnets", create_subnet);
    let r = resource::<Port, _, _>(r, "ports", create_port_api);
    let r = resource::<Router_, _, _>(r, "routers", create::<Router_>);
    let r = resource::<FloatingIp, _, _>(r, "floatingips", create::<FloatingIp>);
    let r = resource::<SecurityGroup, _, _>(r, "security-groups", create::<SecurityGroup>);
    let protected = r
        .route(
            &format!("{v2}/routers/{{id}}/add_router_interface"),
            put(add_router_interface),
        )
        .route(
            &format!("{v2}/routers/{{id}}/remove_router_interface"),
            put(remove_router_interface),
        )
        .route(
            &format!("{v2}/routers/{{id}}/add_extraroutes"),
            put(add_extraroutes),
        )
        .route(
            &format!("{v2}/routers/{{id}}/remove_extraroutes"),
            put(remove_extraroutes),
        )
        .route(
            &format!("{v2}/security-group-rules"),
            get(list::<SecurityGroupRule>).post(create_security_group_rule),
        )
        .route(
            &format!("{v2}/security-group-rules/{{id}}"),
            get(show::<SecurityGroupRule>).delete(delete::<SecurityGroupRule>),
        )
        .scoped(&cloud);
    let public = Router::new()
        .get_with_slash("/network", versions)
        .get_with_slash("/network/v2.0", resources);
    service_layers(public.merge(protected), &cloud, Service::Network)
}

/// A Neutron collection under `/network/v2.0/<path>`: list and create, then show, update and
/// delete by ID.
fn resource<R: Update + Release, H: Handler<T, Arc<Cloud>>, T: 'static>(
    router: Router<Arc<Cloud>>,
    path: &str,
    create: H,
) -> Router<Arc<Cloud>> {
    let path = format!("/network/v2.0/{path}");
    router.route(&path, get(list::<R>).post(create)).route(
        &format!("{path}/{{id}}"),
        get(show::<R>).put(update::<R>).delete(delete::<R>),
    )
}

async fn versions(State(cloud): Ctx) -> Response {
    reply(
        StatusCode::OK,
        json!({"versions": [{"id": "v2.0", "status": "CURRENT",
            "links": [{"rel": "self", "href": format!("{}/network/v2.0/", cloud.base_url)}]}]}),
    )
}

async fn resources(State(cloud): Ctx) -> Response {
    let resources: Vec<Value> = [
        "network",
        "subnet",
        "port",
        "router",
        "floatingip",
        "security-group",
        "security-group-rule",
    ]
        .iter()
        .map(|r| {
            json!({"name": r, "collection": format!("{r}s"),
                "links": [{"rel": "self", "href": format!("{}/network/v2.0/{r}s", cloud.base_url)}]})
        })
        .collect();
    reply(StatusCode::OK, json!({"resources": resources}))
}

const NOT_FILTERS: &[&str] = &[
    "limit",
    "marker",
    "fields",
    "sort_key",
    "sort_dir",
    "page_reverse",
];

async fn list<R: View>(
    State(cloud): Ctx,
    Query(params): Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let mut views: Vec<Value> = cloud.store.read(|v| {
        super::records::listed::<R>(v, &params, &[])
            .iter()
            .map(|item| item.view(v))
            .filter(|view| matches_filters(view, &params, NOT_FILTERS))
            .collect()
    });
    views.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let (page, next) = paginate(views, &params, &cloud.base_url, &uri, usize::MAX)?;
    let page = page
        .into_iter()
        .map(|v| select_fields(v, &params))
        .collect();
    Ok(reply(
        StatusCode::OK,
        super::list_body(R::NAMES.many, page, next),
    ))
}

async fn show<R: View>(
    State(cloud): Ctx,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let view = cloud
        .store
        .read(|v| find::<R>(v, &id).map(|item| item.view(v)))?;
    Ok(reply(
        StatusCode::OK,
        json!({ R::NAMES.one: select_fields(view, &params) }),
    ))
}

fn created<R: View>(cloud: &Cloud, item: &R) -> Response {
    let view = cloud.store.read(|v| item.view(v));
    reply(StatusCode::CREATED, json!({ R::NAMES.one: view }))
}

fn updated<R: View>(cloud: &Cloud, id: &str) -> Result<Response, ApiError> {
    let view = cloud
        .store
        .read(|v| find::<R>(v, id).map(|item| item.view(v)))?;
    Ok(reply(StatusCode::OK, json!({ R::NAMES.one: view })))
}

/// What a Neutron POST makes of its body: the generic [`create`] reads the body
/// (`{"<one>": {...}}`), makes the record in one transaction and answers 201 with its view.
trait Create: View + Send + 'static {
    type Body: DeserializeOwned + Send + 'static;

    /// Refuses a body before the transaction (attributes a POST does not take).
    fn check(_: &Self::Body) -> Result<(), ApiError> {
        Ok(())
    }

    fn create(tx: &mut Tx<'_>, caller: &super::Caller, body: Self::Body) -> Result<Self, ApiError>;
}

async fn create<R: Create>(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: R::Body = parse_wrapped(&body, R::NAMES.one)?;
    R::check(&b)?;
    let record = cloud.write(move |tx| R::create(tx, &caller, b)).await?;
    Ok(created(&cloud, &record))
}

/// What a Neutron PUT changes on a record of its kind: the generic [`update`] reads the body
/// (`{"<one>": {...}}`), 404s unless the record exists, applies it, and answers the new view.
trait Update: View + Send + 'static {
    type Body: DeserializeOwned + Send + 'static;

    /// Refuses a body before the record is read (read-only attributes).
    fn check(_: &Self::Body) -> Result<(), ApiError> {
        Ok(())
    }

    /// The resource's own attributes and checks.
    fn update(&mut self, tx: &mut Tx<'_>, body: Self::Body) -> Result<(), ApiError>;
}

async fn update<R: Update>(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: R::Body = parse_wrapped(&body, R::NAMES.one)?;
    R::check(&b)?;
    change(&cloud, id, move |tx, r: &mut R| r.update(tx, b)).await
}

/// A change of record `id` (404 unless it exists): `change`, a new revision, the updated view.
async fn change<R: View + Send + 'static>(
    cloud: &Arc<Cloud>,
    id: String,
    change: impl FnOnce(&mut Tx<'_>, &mut R) -> Result<(), ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    let key = id.clone();
    cloud
        .write(move |tx| {
            let mut record = find::<R>(tx, &key)?;
            change(tx, &mut record)?;
            record.touch();
            record.put(tx)?;
            Ok(())
        })
        .await?;
    updated::<R>(cloud, &id)
}

/// Copies each attribute an update body gives (`Some`) onto the record.
macro_rules! set_given {
    ($record:ident <- $body:ident: $($field:ident),+ $(,)?) => {
        $(if let Some(v) = $body.$field {
            $record.$field = v;
        })+
    };
}
use set_given;

fn parse_wrapped<T: DeserializeOwned>(body: &[u8], key: &str) -> Result<T, ApiError> {
    let mut value: Value = parse_body(body)?;
    let Some(obj) = value.as_object_mut() else {
        return Err(ApiError::bad_request(
            "Invalid input: the body must be a JSON object",
        ));
    };
    let Some(inner) = obj.remove(key) else {
        return Err(ApiError::bad_request(format!(
            "Resource body required: '{key}' is missing"
        )));
    };
    if let Some(other) = obj.keys().next() {
        return Err(ApiError::bad_request(format!(
            "Unrecognized attribute(s) '{other}'"
        )));
    }
    super::from_value(inner).map_err(|(path, msg)| {
        let msg = match msg.strip_prefix("unknown field `") {
            Some(rest) => format!(
                "Unrecognized attribute(s) '{}'",
                rest.split('`').next().unwrap_or(rest)
            ),
            None => format!("Invalid input for {key}.{path}. Reason: {msg}."),
        };
        ApiError::bad_request(msg)
    })
}

/// A create body's required attribute, or 400 naming it as Neutron does.
fn required<T: Clone>(value: &Option<T>, name: &str) -> Result<T, ApiError> {
    value.clone().ok_or_else(|| {
        ApiError::bad_request(format!(
            "Failed to parse request. Required attribute '{name}' not specified"
        ))
    })
}

fn project_of(caller: &super::Caller, given: &Option<String>) -> String {
    given.clone().unwrap_or_else(|| caller.project_id.clone())
}
type CallerExt = axum::Extension<super::Caller>;
use super::Caller;
