//! `/pools`: a listener's (or load balancer's) pool of members and its balancing algorithm.

use axum::body::Bytes;
use axum::extract::OriginalUri;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;

use super::body::{invalid, Body};
use super::{conflict, find, list_on_lb, lock_lb, one, put, ApiResult, Release};
use crate::api::{ApiError, Caller, Ctx, Params};
use crate::model::octavia::{
    self as m, Common, Listener, LoadBalancer, Pool, Record, Ref, MEMBERS, MONITORS,
};
use crate::store::Tx;

const PROTOCOLS: &[&str] = &["TCP", "UDP", "HTTP", "HTTPS", "PROXY", "PROXYV2", "SCTP"];
const ALGORITHMS: &[&str] = &[
    "ROUND_ROBIN",
    "LEAST_CONNECTIONS",
    "SOURCE_IP",
    "SOURCE_IP_PORT",
];

pub(super) async fn list(
    State(cloud): Ctx,
    Query(params): Query<Params>,
    OriginalUri(uri): OriginalUri,
) -> ApiResult {
    list_on_lb(&cloud, params, &uri, Pool::lb_id)
}

/// The attributes a pool create takes (with a nested `members` list and `healthmonitor`).
pub(super) const CREATE_FIELDS: &[&str] = &[
    "name",
    "description",
    "admin_state_up",
    "tags",
    "listener_id",
    "loadbalancer_id",
    "protocol",
    "lb_algorithm",
    "session_persistence",
    "project_id",
    "tenant_id",
    "tls_enabled",
    "tls_container_ref",
    "ca_tls_container_ref",
    "crl_container_ref",
    "tls_ciphers",
    "tls_versions",
    "alpn_protocols",
    "members",
    "healthmonitor",
];

/// A new pool of `lb_id` from a create body (validated, not stored).
pub(super) fn build(b: &Body, caller: &Caller, lb_id: &str) -> Result<Pool, ApiError> {
    let protocol = b.req_one_of("protocol", PROTOCOLS)?;
    let lb_algorithm = b.req_one_of("lb_algorithm", ALGORITHMS)?;
    let mut common = Common::new(&caller.project_id);
    b.apply_common(&mut common)?;
    Ok(Pool {
        common,
        loadbalancers: Ref::to(lb_id),
        protocol,
        lb_algorithm,
        session_persistence: b.opt_object("session_persistence")?,
        tls_enabled: b.opt_bool("tls_enabled")?.unwrap_or(false),
        tls_container_ref: b.opt_str("tls_container_ref")?,
        ca_tls_container_ref: b.opt_str("ca_tls_container_ref")?,
        crl_container_ref: b.opt_str("crl_container_ref")?,
    })
}

pub(super) async fn create(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let b = Body::parse(&body, "pool", CREATE_FIELDS)?;
    let listener_id = b.opt_str("listener_id")?;
    let lb_given = b.opt_str("loadbalancer_id")?;
    if listener_id.is_none() && lb_given.is_none() {
        return Err(invalid(
            "pool. Either listener_id or loadbalancer_id must be specified.",
        ));
    }
    if b.has_value("members") || b.has_value("healthmonitor") {
        return Err(ApiError::bad_request(
            "Creating members or a health monitor with the pool is supported in a single-call load balancer create only.",
        ));
    }
    // The load balancer is known inside the transaction; validate the body now.
    build(&b, &caller, "")?;
    cloud
        .write(move |tx| {
            let mut listener = match &listener_id {
                Some(l) => Some(find::<Listener>(tx, l)?),
                None => None,
            };
            let lb_id = match (&listener, lb_given) {
                (Some(l), _) => l.lb_id().to_owned(),
                (None, Some(lb)) => lb,
                (None, None) => String::new(),
            };
            find::<LoadBalancer>(tx, &lb_id)?;
            if let Some(l) = &listener {
                if let Some(p) = &l.default_pool_id {
                    return Err(conflict(format!(
                        "Listener {} already has a default pool {p}",
                        l.id()
                    )));
                }
            }
            lock_lb(tx, &lb_id)?;
            let p = build(&b, &caller, &lb_id)?;
            put(tx, &p)?;
            if let Some(l) = listener.as_mut() {
                l.default_pool_id = Some(p.id().to_owned());
                l.common.touch();
                put(tx, l)?;
            }
            Ok(one(tx, StatusCode::CREATED, &p))
        })
        .await
}

pub(super) async fn update(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let b = Body::parse_common(
        &body,
        "pool",
        &[
            "lb_algorithm",
            "session_persistence",
            "protocol",
            "listener_id",
            "loadbalancer_id",
            "tls_enabled",
        ],
    )?;
    let algorithm = b.opt_one_of("lb_algorithm", ALGORITHMS)?;
    let session_persistence = b.opt_object("session_persistence")?;
    let tls_enabled = b.opt_bool("tls_enabled")?;
    cloud
        .write(move |tx| {
            let mut p: Pool = find(tx, &id)?;
            b.immutable(&p, &["protocol"])?;
            if b.has("listener_id") || b.has("loadbalancer_id") {
                return Err(conflict(
                    "Attributes listener_id and loadbalancer_id are immutable and cannot be changed.",
                ));
            }
            lock_lb(tx, p.lb_id())?;
            b.apply_common(&mut p.common)?;
            if let Some(a) = algorithm {
                p.lb_algorithm = a;
            }
            if b.has("session_persistence") {
                p.session_persistence = session_persistence;
            }
            if let Some(t) = tls_enabled {
                p.tls_enabled = t;
            }
            p.common.touch();
            put(tx, &p)?;
            Ok(one(tx, StatusCode::OK, &p))
        })
        .await
}

impl Release for Pool {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        lock_lb(tx, self.lb_id())?;
        for member in m::members_of(tx, self.id()) {
            tx.delete(MEMBERS, member.id());
        }
        for hm in m::monitors_of(tx, self.id()) {
            tx.delete(MONITORS, hm.id());
        }
        for mut l in m::listeners_using(tx, self.id()) {
            l.default_pool_id = None;
            put(tx, &l)?;
        }
        Ok(())
    }
}
