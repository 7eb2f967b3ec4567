//! `/listeners`: a protocol port on a load balancer's VIP, with Octavia's timeouts and limits.

use axum::body::Bytes;
use axum::extract::OriginalUri;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;

use super::body::{Body, COMMON_FIELDS, MAX_INT, MAX_TIMEOUT_MS};
use super::{conflict, find, list_on_lb, lock_lb, one, put, ApiResult, Release};
use crate::api::{ApiError, Caller, Ctx, Params};
use crate::model::octavia::{
    self as m, Common, Listener, ListenerTls, LoadBalancer, Pool, Ref, LISTENER_TIMEOUTS,
};
use crate::store::Tx;

const PROTOCOLS: &[&str] = &[
    "TCP",
    "UDP",
    "HTTP",
    "HTTPS",
    "TERMINATED_HTTPS",
    "SCTP",
    "PROMETHEUS",
];

const OPTIONAL: &[&str] = &[
    "connection_limit",
    "timeout_client_data",
    "timeout_member_connect",
    "timeout_member_data",
    "timeout_tcp_inspect",
    "insert_headers",
    "allowed_cidrs",
    "default_tls_container_ref",
    "sni_container_refs",
    "client_ca_tls_container_ref",
    "client_authentication",
    "client_crl_container_ref",
    "tls_ciphers",
    "tls_versions",
    "alpn_protocols",
    "hsts_max_age",
    "hsts_include_subdomains",
    "hsts_preload",
];

/// The attributes a create or update takes besides the common ones: `own` and [`OPTIONAL`].
fn fields(own: &[&'static str]) -> Vec<&'static str> {
    let mut all = own.to_vec();
    all.extend_from_slice(OPTIONAL);
    all
}

/// Copies the optional attributes of a create or update body, range-checked as Octavia does:
/// timeouts 0..=365 days in milliseconds, `connection_limit` -1 (unlimited) or more.
fn apply_options(b: &Body, l: &mut Listener) -> Result<(), ApiError> {
    if let Some(n) = b.opt_int("connection_limit", -1, MAX_INT)? {
        l.connection_limit = n;
    }
    for (k, _) in LISTENER_TIMEOUTS {
        if let Some(n) = b.opt_int(k, 0, MAX_TIMEOUT_MS)? {
            *timeout_mut(l, k) = n;
        }
    }
    if let Some(h) = b.opt_str_map("insert_headers")? {
        l.insert_headers = h;
    }
    if b.has("allowed_cidrs") {
        l.allowed_cidrs = b.opt_cidrs("allowed_cidrs")?;
    }
    if b.has("default_tls_container_ref") {
        l.default_tls_container_ref = b.opt_str("default_tls_container_ref")?;
    }
    if let Some(refs) = b.opt_str_list("sni_container_refs")? {
        l.sni_container_refs = refs;
    }
    let t = &mut l.tls;
    if b.has("client_ca_tls_container_ref") {
        t.client_ca_tls_container_ref = b.opt_str("client_ca_tls_container_ref")?;
    }
    if b.has("client_authentication") {
        t.client_authentication =
            b.opt_one_of("client_authentication", &["NONE", "OPTIONAL", "MANDATORY"])?;
    }
    if b.has("client_crl_container_ref") {
        t.client_crl_container_ref = b.opt_str("client_crl_container_ref")?;
    }
    if b.has("tls_ciphers") {
        t.tls_ciphers = b.opt_str("tls_ciphers")?;
    }
    if b.has("tls_versions") {
        t.tls_versions = b.opt_str_list("tls_versions")?;
    }
    if b.has("alpn_protocols") {
        t.alpn_protocols = b.opt_str_list("alpn_protocols")?;
    }
    if b.has("hsts_max_age") {
        t.hsts_max_age = b.opt_int("hsts_max_age", 0, MAX_INT)?;
    }
    if b.has("hsts_include_subdomains") {
        t.hsts_include_subdomains = b.opt_bool("hsts_include_subdomains")?;
    }
    if b.has("hsts_preload") {
        t.hsts_preload = b.opt_bool("hsts_preload")?;
    }
    Ok(())
}

fn timeout_mut<'a>(l: &'a mut Listener, key: &str) -> &'a mut i64 {
    match key {
        "timeout_client_data" => &mut l.timeout_client_data,
        "timeout_member_connect" => &mut l.timeout_member_connect,
        "timeout_member_data" => &mut l.timeout_member_data,
        _ => &mut l.timeout_tcp_inspect,
    }
}

pub(super) async fn list(
    State(cloud): Ctx,
    Query(params): Query<Params>,
    OriginalUri(uri): OriginalUri,
) -> ApiResult {
    list_on_lb(&cloud, params, &uri, Listener::lb_id)
}

/// The attributes a listener create takes besides the common ones (and, in a single-call load
/// balancer create, a nested `default_pool`).
pub(super) fn create_fields() -> Vec<&'static str> {
    let mut f = fields(COMMON_CREATE);
    f.extend_from_slice(&COMMON_FIELDS);
    f
}

const COMMON_CREATE: &[&str] = &[
    "loadbalancer_id",
    "protocol",
    "protocol_port",
    "default_pool_id",
    "project_id",
    "tenant_id",
    "default_pool",
    "l7policies",
];

/// A new listener of `lb_id` from a create body (validated, not stored).
pub(super) fn build(b: &Body, caller: &Caller, lb_id: &str) -> Result<Listener, ApiError> {
    let protocol = b.req_one_of("protocol", PROTOCOLS)?;
    let port = b.req_port("protocol_port")?;
    if b.has_value("l7policies") {
        return Err(ApiError::bad_request(
            "Creating L7 policies with the listener is not supported here.",
        ));
    }
    let mut common = Common::new(&caller.project_id);
    b.apply_common(&mut common)?;
    let mut l = Listener {
        common,
        loadbalancers: Ref::to(lb_id),
        protocol,
        protocol_port: port,
        default_pool_id: b.opt_str("default_pool_id")?,
        connection_limit: -1,
        timeout_client_data: 0,
        timeout_member_connect: 0,
        timeout_member_data: 0,
        timeout_tcp_inspect: 0,
        insert_headers: Default::default(),
        allowed_cidrs: None,
        default_tls_container_ref: None,
        sni_container_refs: Vec::new(),
        l7policies: Vec::new(),
        tls: ListenerTls::default(),
    };
    for (k, default) in LISTENER_TIMEOUTS {
        *timeout_mut(&mut l, k) = default;
    }
    apply_options(b, &mut l)?;
    Ok(l)
}

/// Stores a new listener: 409 when its port is taken on its load balancer, 404 for an unknown
/// default pool. The caller holds the load balancer's lock.
pub(super) fn insert(tx: &mut Tx<'_>, l: &Listener) -> Result<(), ApiError> {
    let udp = l.protocol == "UDP";
    let port = l.protocol_port;
    if m::listeners_of(tx, l.lb_id())
        .iter()
        .any(|o| o.protocol_port == port && (o.protocol == "UDP") == udp)
    {
        return Err(conflict(format!(
            "Another Listener on this Load Balancer is already using protocol_port {port}"
        )));
    }
    if let Some(p) = &l.default_pool_id {
        find::<Pool>(tx, p)?;
    }
    put(tx, l)
}

pub(super) async fn create(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let b = Body::parse(&body, "listener", &create_fields())?;
    let lb_id = b.req_str("loadbalancer_id")?;
    if b.has_value("default_pool") {
        return Err(ApiError::bad_request(
            "Creating a default pool with the listener is supported in a single-call load balancer create only.",
        ));
    }
    let l = build(&b, &caller, &lb_id)?;
    cloud
        .write(move |tx| {
            find::<LoadBalancer>(tx, &lb_id)?;
            lock_lb(tx, &lb_id)?;
            insert(tx, &l)?;
            Ok(one(tx, StatusCode::CREATED, &l))
        })
        .await
}

pub(super) async fn update(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let b = Body::parse_common(
        &body,
        "listener",
        &fields(&[
            "default_pool_id",
            "protocol",
            "protocol_port",
            "loadbalancer_id",
        ]),
    )?;
    cloud
        .write(move |tx| {
            let mut l: Listener = find(tx, &id)?;
            b.immutable(&l, &["protocol", "protocol_port"])?;
            if let Some(v) = b.raw("loadbalancer_id") {
                if v.as_str() != Some(l.lb_id()) {
                    return Err(conflict(
                        "Attribute loadbalancer_id is immutable and cannot be changed.",
                    ));
                }
            }
            if b.has("default_pool_id") {
                let p = b.opt_str("default_pool_id")?;
                if let Some(p) = &p {
                    find::<Pool>(tx, p)?;
                }
                l.default_pool_id = p;
            }
            lock_lb(tx, l.lb_id())?;
            b.apply_common(&mut l.common)?;
            apply_options(&b, &mut l)?;
            l.common.touch();
            put(tx, &l)?;
            Ok(one(tx, StatusCode::OK, &l))
        })
        .await
}

impl Release for Listener {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        lock_lb(tx, self.lb_id())?;
        Ok(())
    }
}
