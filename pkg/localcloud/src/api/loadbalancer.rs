//! Load Balancer v2 (Octavia) under `/load-balancer/v2`: load balancers with a VIP from the
//! local VIP pool, listeners, pools, members (including the batch member update the OpenStack
//! CCM uses), health monitors, cascade delete and the status tree, in Octavia's shapes and with
//! its error body (`{"faultcode", "faultstring", "debuginfo"}`). A change puts the load balancer
//! in `PENDING_UPDATE` (`PENDING_CREATE` when new) and further changes are refused with 409 until
//! the data plane ([`crate::lb`], the role of Octavia's worker and amphorae) has applied it and
//! moved it to `ACTIVE`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{json, Map, Value};

use super::{
    iso, list_body, matches_filters, new_id, now, paginate, parse_body, reply, require_token,
    select_fields, service_layers, ApiError, Caller, Cloud, Ctx, Params, Service,
};
use crate::lb::{first_ref, LISTENERS, LOADBALANCERS, MEMBERS, MONITORS, POOLS};
use crate::store::{Read, Tx};

type ApiResult = Result<Response, ApiError>;

/// What each kind is called in Octavia's messages and bodies.
#[derive(Clone, Copy)]
struct Kind {
    table: &'static str,
    title: &'static str,
    one: &'static str,
    many: &'static str,
}

const LB: Kind = Kind {
    table: LOADBALANCERS,
    title: "Load Balancer",
    one: "loadbalancer",
    many: "loadbalancers",
};
const LISTENER: Kind = Kind {
    table: LISTENERS,
    title: "Listener",
    one: "listener",
    many: "listeners",
};
const POOL: Kind = Kind {
    table: POOLS,
    title: "Pool",
    one: "pool",
    many: "pools",
};
const MEMBER: Kind = Kind {
    table: MEMBERS,
    title: "Member",
    one: "member",
    many: "members",
};
const MONITOR: Kind = Kind {
    table: MONITORS,
    title: "Health Monitor",
    one: "healthmonitor",
    many: "healthmonitors",
};

fn find(r: &impl Read, kind: Kind, id: &str) -> Result<Value, ApiError> {
    r.get::<Value>(kind.table, id)
        .ok_or_else(|| ApiError::not_found("NotFound", format!("{} {id} not found.", kind.title)))
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid input for field/attribute {}",
        message.into()
    ))
}

/// The object under `key` of a request body, with only `allowed` attributes.
fn object(body: &[u8], key: &str, allowed: &[&str]) -> Result<Map<String, Value>, ApiError> {
    let v: Value = parse_body(body)?;
    let Some(Value::Object(o)) = v.get(key).cloned() else {
        return Err(invalid(format!("{key}. Value: missing")));
    };
    for k in o.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(invalid(format!(
                "{key}. Unknown attribute for argument {key}: {k}"
            )));
        }
    }
    Ok(o)
}

fn opt_str(o: &Map<String, Value>, k: &str) -> Result<Option<String>, ApiError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(invalid(format!(
            "{k}. Value: '{v}'. Value should be string"
        ))),
    }
}

fn req_str(o: &Map<String, Value>, k: &str) -> Result<String, ApiError> {
    opt_str(o, k)?.ok_or_else(|| invalid(format!("{k}. Value: 'None'. Mandatory field missing.")))
}

fn opt_int(o: &Map<String, Value>, k: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(invalid(format!(
                "{k}. Value: '{v}'. Value should be between {min} and {max}"
            ))),
        },
    }
}

fn req_int(o: &Map<String, Value>, k: &str, min: i64, max: i64) -> Result<i64, ApiError> {
    opt_int(o, k, min, max)?
        .ok_or_else(|| invalid(format!("{k}. Value: 'None'. Mandatory field missing.")))
}

fn opt_bool(o: &Map<String, Value>, k: &str) -> Result<Option<bool>, ApiError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(invalid(format!(
            "{k}. Value: '{v}'. Value should be boolean"
        ))),
    }
}

fn one_of(k: &str, v: &str, allowed: &[&str]) -> Result<(), ApiError> {
    if allowed.contains(&v) {
        Ok(())
    } else {
        Err(invalid(format!(
            "{k}. Value: '{v}'. Value should be one of {allowed:?}"
        )))
    }
}

/// Copies the mutable, common attributes of a create/update body.
fn apply_common(target: &mut Value, o: &Map<String, Value>) -> Result<(), ApiError> {
    for k in ["name", "description"] {
        if o.contains_key(k) {
            target[k] = opt_str(o, k)?.unwrap_or_default().into();
        }
    }
    if let Some(b) = opt_bool(o, "admin_state_up")? {
        target["admin_state_up"] = b.into();
    }
    if let Some(tags) = o.get("tags") {
        if !tags.is_array() {
            return Err(invalid(format!(
                "tags. Value: '{tags}'. Value should be a list"
            )));
        }
        target["tags"] = tags.clone();
    }
    Ok(())
}

/// 409 when `o` changes an attribute that cannot change.
fn immutable(current: &Value, o: &Map<String, Value>, keys: &[&str]) -> Result<(), ApiError> {
    for k in keys {
        if let Some(v) = o.get(*k) {
            if v != &current[*k] {
                return Err(ApiError::conflict(
                    "Conflict",
                    format!("Attribute {k} is immutable and cannot be changed."),
                ));
            }
        }
    }
    Ok(())
}

/// Takes the load balancer's lock: 409 while it is `PENDING_*`, else `PENDING_UPDATE`.
fn lock_lb(tx: &mut Tx<'_>, lb_id: &str) -> Result<Value, ApiError> {
    let mut lb = find(tx, LB, lb_id)?;
    let status = lb["provisioning_status"].as_str().unwrap_or_default();
    if status.starts_with("PENDING_") {
        return Err(ApiError::conflict(
            "Conflict",
            format!("Load Balancer {lb_id} is immutable and cannot be updated."),
        ));
    }
    lb["provisioning_status"] = "PENDING_UPDATE".into();
    lb["updated_at"] = iso(now()).into();
    tx.put(LOADBALANCERS, lb_id, &lb)?;
    Ok(lb)
}

fn base(caller: &Caller) -> Value {
    let t = iso(now());
    json!({
        "id": new_id(),
        "name": "",
        "description": "",
        "admin_state_up": true,
        "project_id": caller.project_id,
        "tenant_id": caller.project_id,
        "provisioning_status": "PENDING_CREATE",
        "operating_status": "OFFLINE",
        "tags": [],
        "created_at": t,
        "updated_at": t,
    })
}

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap_or_default().to_owned()
}

fn refs(r: &impl Read, kind: Kind, key: &str, id: &str) -> Vec<Value> {
    r.list::<Value>(kind.table)
        .into_iter()
        .filter(|v| first_ref(v, key).as_deref() == Some(id))
        .collect()
}

fn members_of(r: &impl Read, pool_id: &str) -> Vec<Value> {
    r.list::<Value>(MEMBERS)
        .into_iter()
        .filter(|m| m["pool_id"] == pool_id)
        .collect()
}

fn ids(items: &[Value]) -> Value {
    Value::Array(items.iter().map(|v| json!({"id": v["id"]})).collect())
}

// ---- operating status -------------------------------------------------------------------------

fn member_status(m: &Value) -> String {
    if !m["admin_state_up"].as_bool().unwrap_or(true) {
        return "OFFLINE".into();
    }
    m["operating_status"]
        .as_str()
        .unwrap_or("NO_MONITOR")
        .to_owned()
}

fn pool_status(r: &impl Read, p: &Value) -> String {
    if !p["admin_state_up"].as_bool().unwrap_or(true) {
        return "OFFLINE".into();
    }
    let members: Vec<String> = members_of(r, p["id"].as_str().unwrap_or_default())
        .iter()
        .map(member_status)
        .collect();
    let errors = members.iter().filter(|s| *s == "ERROR").count();
    if !members.is_empty() && errors == members.len() {
        "ERROR".into()
    } else if errors > 0 {
        "DEGRADED".into()
    } else {
        "ONLINE".into()
    }
}

fn listener_status(r: &impl Read, l: &Value) -> String {
    if !l["admin_state_up"].as_bool().unwrap_or(true) {
        return "OFFLINE".into();
    }
    if l["provisioning_status"] == "ERROR" {
        return "ERROR".into();
    }
    match l["default_pool_id"]
        .as_str()
        .and_then(|p| r.get::<Value>(POOLS, p))
    {
        Some(p) => match pool_status(r, &p).as_str() {
            "ERROR" => "DEGRADED".into(),
            s => s.into(),
        },
        None => "ONLINE".into(),
    }
}

fn lb_status(r: &impl Read, lb: &Value) -> String {
    if !lb["admin_state_up"].as_bool().unwrap_or(true) {
        return "OFFLINE".into();
    }
    let id = lb["id"].as_str().unwrap_or_default();
    let degraded = refs(r, LISTENER, "loadbalancers", id)
        .iter()
        .any(|l| listener_status(r, l) != "ONLINE")
        || refs(r, POOL, "loadbalancers", id)
            .iter()
            .any(|p| pool_status(r, p) != "ONLINE");
    if degraded { "DEGRADED" } else { "ONLINE" }.into()
}

// ---- views ------------------------------------------------------------------------------------

fn view(r: &impl Read, kind: Kind, v: &Value) -> Value {
    let mut v = v.clone();
    let id = id_of(&v);
    match kind.table {
        LOADBALANCERS => {
            v["listeners"] = ids(&refs(r, LISTENER, "loadbalancers", &id));
            v["pools"] = ids(&refs(r, POOL, "loadbalancers", &id));
            v["operating_status"] = lb_status(r, &v).into();
        }
        LISTENERS => {
            v["operating_status"] = listener_status(r, &v).into();
        }
        POOLS => {
            v["members"] = ids(&members_of(r, &id));
            let monitor = refs(r, MONITOR, "pools", &id);
            v["healthmonitor_id"] = monitor.first().map_or(Value::Null, |m| m["id"].clone());
            v["listeners"] = ids(&r
                .list::<Value>(LISTENERS)
                .into_iter()
                .filter(|l| l["default_pool_id"] == id.as_str())
                .collect::<Vec<_>>());
            v["operating_status"] = pool_status(r, &v).into();
        }
        MEMBERS => {
            v["operating_status"] = member_status(&v).into();
        }
        _ => {
            v["operating_status"] = if v["admin_state_up"].as_bool().unwrap_or(true) {
                "ONLINE"
            } else {
                "OFFLINE"
            }
            .into();
        }
    }
    v
}

fn show(cloud: &Cloud, kind: Kind, id: &str) -> ApiResult {
    cloud.store.read(|r| {
        let v = find(r, kind, id)?;
        Ok(reply(
            StatusCode::OK,
            json!({ kind.one: view(r, kind, &v) }),
        ))
    })
}

fn list(
    cloud: &Cloud,
    kind: Kind,
    params: &Params,
    uri: &Uri,
    keep: impl Fn(&Value) -> bool,
) -> ApiResult {
    let items: Vec<Value> = cloud.store.read(|r| {
        let mut items: Vec<Value> = r
            .list::<Value>(kind.table)
            .into_iter()
            .filter(|v| keep(v))
            .map(|v| view(r, kind, &v))
            .filter(|v| {
                matches_filters(
                    v,
                    params,
                    &[
                        "limit",
                        "marker",
                        "fields",
                        "page_reverse",
                        "sort",
                        "sort_key",
                        "sort_dir",
                    ],
                )
            })
            .collect();
        items.sort_by(|a, b| {
            a["created_at"]
                .as_str()
                .cmp(&b["created_at"].as_str())
                .then_with(|| a["id"].as_str().cmp(&b["id"].as_str()))
        });
        items
    });
    let (page, next) = paginate(items, params, &cloud.base_url, uri, 1000)?;
    let page = page.into_iter().map(|v| select_fields(v, params)).collect();
    Ok(reply(StatusCode::OK, list_body(kind.many, page, next)))
}

// ---- load balancers ---------------------------------------------------------------------------

async fn list_lbs(State(cloud): Ctx, Query(params): Query<Params>, uri: Uri) -> ApiResult {
    list(&cloud, LB, &params, &uri, |_| true)
}

async fn get_lb(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    show(&cloud, LB, &id)
}

async fn create_lb(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let o = object(
        &body,
        "loadbalancer",
        &[
            "name",
            "description",
            "admin_state_up",
            "tags",
            "vip_address",
            "vip_subnet_id",
            "vip_network_id",
            "vip_port_id",
            "vip_qos_policy_id",
            "project_id",
            "tenant_id",
            "provider",
            "flavor_id",
            "availability_zone",
            "listeners",
            "pools",
        ],
    )?;
    let subnet = opt_str(&o, "vip_subnet_id")?;
    let network = opt_str(&o, "vip_network_id")?;
    let port = opt_str(&o, "vip_port_id")?;
    if subnet.is_none() && network.is_none() && port.is_none() {
        return Err(invalid(
            "loadbalancer. VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.",
        ));
    }
    if o.contains_key("listeners") || o.contains_key("pools") {
        return Err(ApiError::bad_request(
            "Creating listeners and pools with the load balancer (single-call create) is not supported here.",
        ));
    }
    let wanted_vip = opt_str(&o, "vip_address")?;
    if let Some(a) = &wanted_vip {
        if a.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(format!(
                "vip_address. Value: '{a}'. Invalid IP address"
            )));
        }
    }
    let provider = opt_str(&o, "provider")?.unwrap_or_else(|| "amphora".into());
    let pool = cloud.config.lb_vip_pool;
    let v = cloud
        .write(move |tx| {
            let used: Vec<String> = tx
                .list::<Value>(LOADBALANCERS)
                .iter()
                .filter_map(|l| l["vip_address"].as_str().map(str::to_owned))
                .collect();
            let vip = match wanted_vip {
                Some(a) if used.contains(&a) => {
                    return Err(ApiError::conflict(
                        "Conflict",
                        format!("IP address {a} already allocated in subnet"),
                    ))
                }
                Some(a) => a,
                None => pool
                    .allocate(&used)
                    .ok_or_else(|| {
                        ApiError::conflict(
                            "Conflict",
                            format!("No more IP addresses available in the VIP pool {pool}"),
                        )
                    })?
                    .to_string(),
            };
            let mut lb = base(&caller);
            apply_common(&mut lb, &o)?;
            let id = id_of(&lb);
            lb["vip_address"] = vip.into();
            lb["vip_port_id"] = port.unwrap_or_else(new_id).into();
            lb["vip_subnet_id"] = subnet.into();
            lb["vip_network_id"] = network.into();
            lb["vip_qos_policy_id"] = Value::Null;
            lb["provider"] = provider.into();
            lb["flavor_id"] = Value::Null;
            lb["availability_zone"] = o.get("availability_zone").cloned().unwrap_or(Value::Null);
            tx.put(LOADBALANCERS, &id, &lb)?;
            Ok(view(tx, LB, &lb))
        })
        .await?;
    Ok(reply(StatusCode::CREATED, json!({ LB.one: v })))
}

async fn update_lb(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let o = object(
        &body,
        "loadbalancer",
        &[
            "name",
            "description",
            "admin_state_up",
            "tags",
            "vip_qos_policy_id",
            "vip_address",
            "vip_subnet_id",
            "vip_network_id",
            "vip_port_id",
            "provider",
        ],
    )?;
    let lb_id = id.clone();
    let v = cloud
        .write(move |tx| {
            let current = find(tx, LB, &lb_id)?;
            immutable(
                &current,
                &o,
                &[
                    "vip_address",
                    "vip_subnet_id",
                    "vip_network_id",
                    "vip_port_id",
                    "provider",
                ],
            )?;
            let mut lb = lock_lb(tx, &lb_id)?;
            apply_common(&mut lb, &o)?;
            tx.put(LOADBALANCERS, &lb_id, &lb)?;
            Ok(view(tx, LB, &lb))
        })
        .await?;
    Ok(reply(StatusCode::OK, json!({ LB.one: v })))
}

async fn delete_lb(
    State(cloud): Ctx,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> ApiResult {
    let cascade = params
        .get("cascade")
        .is_some_and(|c| c.eq_ignore_ascii_case("true") || c == "1");
    cloud
        .write(move |tx| {
            lock_lb(tx, &id)?;
            let listeners = refs(tx, LISTENER, "loadbalancers", &id);
            let pools = refs(tx, POOL, "loadbalancers", &id);
            let has_children = !listeners.is_empty() || !pools.is_empty();
            if !cascade && has_children {
                return Err(ApiError::bad_request(format!(
                    "Validation failure: Cannot delete Load Balancer {id} - it has children"
                )));
            }
            for p in &pools {
                let pid = id_of(p);
                for m in members_of(tx, &pid) {
                    tx.delete(MEMBERS, &id_of(&m));
                }
                for hm in refs(tx, MONITOR, "pools", &pid) {
                    tx.delete(MONITORS, &id_of(&hm));
                }
                tx.delete(POOLS, &pid);
            }
            for l in &listeners {
                tx.delete(LISTENERS, &id_of(l));
            }
            tx.delete(LOADBALANCERS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn lb_status_tree(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    cloud.store.read(|r| {
        let lb = find(r, LB, &id)?;
        let listeners: Vec<Value> = refs(r, LISTENER, "loadbalancers", &id)
            .iter()
            .map(|l| {
                let pools: Vec<Value> = l["default_pool_id"]
                    .as_str()
                    .and_then(|p| r.get::<Value>(POOLS, p))
                    .into_iter()
                    .map(|p| {
                        let pid = id_of(&p);
                        let members: Vec<Value> = members_of(r, &pid)
                            .iter()
                            .map(|m| {
                                json!({"id": m["id"], "name": m["name"], "address": m["address"],
                                    "protocol_port": m["protocol_port"],
                                    "provisioning_status": m["provisioning_status"],
                                    "operating_status": member_status(m)})
                            })
                            .collect();
                        let mut pv = json!({"id": pid, "name": p["name"],
                            "provisioning_status": p["provisioning_status"],
                            "operating_status": pool_status(r, &p), "members": members});
                        if let Some(hm) = refs(r, MONITOR, "pools", &pid).first() {
                            pv["health_monitor"] = json!({"id": hm["id"], "name": hm["name"],
                                "type": hm["type"], "provisioning_status": hm["provisioning_status"],
                                "operating_status": view(r, MONITOR, hm)["operating_status"]});
                        }
                        pv
                    })
                    .collect();
                json!({"id": l["id"], "name": l["name"],
                    "provisioning_status": l["provisioning_status"],
                    "operating_status": listener_status(r, l), "pools": pools})
            })
            .collect();
        Ok(reply(
            StatusCode::OK,
            json!({"statuses": {"loadbalancer": {"id": lb["id"], "name": lb["name"],
                "provisioning_status": lb["provisioning_status"],
                "operating_status": lb_status(r, &lb), "listeners": listeners}}}),
        ))
    })
}

// ---- listeners --------------------------------------------------------------------------------

const LISTENER_PROTOCOLS: &[&str] = &[
    "TCP",
    "UDP",
    "HTTP",
    "HTTPS",
    "TERMINATED_HTTPS",
    "SCTP",
    "PROMETHEUS",
];

async fn list_listeners(State(cloud): Ctx, Query(params): Query<Params>, uri: Uri) -> ApiResult {
    let lb = params.get("loadbalancer_id").map(str::to_owned);
    let mut params = params;
    params.0.retain(|(k, _)| k != "loadbalancer_id");
    list(&cloud, LISTENER, &params, &uri, |v| {
        lb.as_ref()
            .is_none_or(|lb| first_ref(v, "loadbalancers").as_deref() == Some(lb))
    })
}

async fn get_listener(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    show(&cloud, LISTENER, &id)
}

const LISTENER_OPTIONAL: &[&str] = &[
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

async fn create_listener(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let mut allowed = vec![
        "name",
        "description",
        "admin_state_up",
        "tags",
        "loadbalancer_id",
        "protocol",
        "protocol_port",
        "default_pool_id",
        "project_id",
        "tenant_id",
        "default_pool",
        "l7policies",
    ];
    allowed.extend_from_slice(LISTENER_OPTIONAL);
    let o = object(&body, "listener", &allowed)?;
    let lb_id = req_str(&o, "loadbalancer_id")?;
    let protocol = req_str(&o, "protocol")?;
    one_of("protocol", &protocol, LISTENER_PROTOCOLS)?;
    let port = req_int(&o, "protocol_port", 1, 65535)?;
    let default_pool = opt_str(&o, "default_pool_id")?;
    let v = cloud
        .write(move |tx| {
            find(tx, LB, &lb_id)?;
            if refs(tx, LISTENER, "loadbalancers", &lb_id)
                .iter()
                .any(|l| l["protocol_port"] == port && (l["protocol"] == "UDP") == (protocol == "UDP"))
            {
                return Err(ApiError::conflict(
                    "Conflict",
                    format!("Another Listener on this Load Balancer is already using protocol_port {port}"),
                ));
            }
            if let Some(p) = &default_pool {
                find(tx, POOL, p)?;
            }
            lock_lb(tx, &lb_id)?;
            let mut l = base(&caller);
            apply_common(&mut l, &o)?;
            let id = id_of(&l);
            l["loadbalancers"] = json!([{"id": lb_id}]);
            l["protocol"] = protocol.into();
            l["protocol_port"] = port.into();
            l["default_pool_id"] = default_pool.into();
            l["connection_limit"] = (-1).into();
            for (k, d) in [
                ("timeout_client_data", 50000),
                ("timeout_member_connect", 5000),
                ("timeout_member_data", 50000),
                ("timeout_tcp_inspect", 0),
            ] {
                l[k] = d.into();
            }
            l["insert_headers"] = json!({});
            l["allowed_cidrs"] = Value::Null;
            l["default_tls_container_ref"] = Value::Null;
            l["sni_container_refs"] = json!([]);
            l["l7policies"] = json!([]);
            for k in LISTENER_OPTIONAL {
                if let Some(v) = o.get(*k) {
                    l[*k] = v.clone();
                }
            }
            tx.put(LISTENERS, &id, &l)?;
            Ok(view(tx, LISTENER, &l))
        })
        .await?;
    Ok(reply(StatusCode::CREATED, json!({ LISTENER.one: v })))
}

async fn update_listener(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let mut allowed = vec![
        "name",
        "description",
        "admin_state_up",
        "tags",
        "default_pool_id",
        "protocol",
        "protocol_port",
        "loadbalancer_id",
    ];
    allowed.extend_from_slice(LISTENER_OPTIONAL);
    let o = object(&body, "listener", &allowed)?;
    let lid = id.clone();
    let v = cloud
        .write(move |tx| {
            let mut l = find(tx, LISTENER, &lid)?;
            immutable(&l, &o, &["protocol", "protocol_port"])?;
            if let Some(v) = o.get("loadbalancer_id") {
                if v.as_str() != first_ref(&l, "loadbalancers").as_deref() {
                    return Err(ApiError::conflict(
                        "Conflict",
                        "Attribute loadbalancer_id is immutable and cannot be changed.",
                    ));
                }
            }
            let lb_id = first_ref(&l, "loadbalancers").unwrap_or_default();
            if o.contains_key("default_pool_id") {
                let p = opt_str(&o, "default_pool_id")?;
                if let Some(p) = &p {
                    find(tx, POOL, p)?;
                }
                l["default_pool_id"] = p.into();
            }
            lock_lb(tx, &lb_id)?;
            apply_common(&mut l, &o)?;
            for k in LISTENER_OPTIONAL {
                if let Some(v) = o.get(*k) {
                    l[*k] = v.clone();
                }
            }
            l["provisioning_status"] = "PENDING_UPDATE".into();
            l["updated_at"] = iso(now()).into();
            tx.put(LISTENERS, &lid, &l)?;
            Ok(view(tx, LISTENER, &l))
        })
        .await?;
    Ok(reply(StatusCode::OK, json!({ LISTENER.one: v })))
}

async fn delete_listener(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    cloud
        .write(move |tx| {
            let l = find(tx, LISTENER, &id)?;
            lock_lb(tx, &first_ref(&l, "loadbalancers").unwrap_or_default())?;
            tx.delete(LISTENERS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- pools ------------------------------------------------------------------------------------

async fn list_pools(State(cloud): Ctx, Query(params): Query<Params>, uri: Uri) -> ApiResult {
    let lb = params.get("loadbalancer_id").map(str::to_owned);
    let mut params = params;
    params.0.retain(|(k, _)| k != "loadbalancer_id");
    list(&cloud, POOL, &params, &uri, |v| {
        lb.as_ref()
            .is_none_or(|lb| first_ref(v, "loadbalancers").as_deref() == Some(lb))
    })
}

async fn get_pool(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    show(&cloud, POOL, &id)
}

async fn create_pool(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let o = object(
        &body,
        "pool",
        &[
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
        ],
    )?;
    let protocol = req_str(&o, "protocol")?;
    one_of(
        "protocol",
        &protocol,
        &["TCP", "UDP", "HTTP", "HTTPS", "PROXY", "PROXYV2", "SCTP"],
    )?;
    let algorithm = req_str(&o, "lb_algorithm")?;
    one_of(
        "lb_algorithm",
        &algorithm,
        &[
            "ROUND_ROBIN",
            "LEAST_CONNECTIONS",
            "SOURCE_IP",
            "SOURCE_IP_PORT",
        ],
    )?;
    let listener_id = opt_str(&o, "listener_id")?;
    let lb_given = opt_str(&o, "loadbalancer_id")?;
    if listener_id.is_none() && lb_given.is_none() {
        return Err(invalid(
            "pool. Either listener_id or loadbalancer_id must be specified.",
        ));
    }
    let v = cloud
        .write(move |tx| {
            let mut listener = match &listener_id {
                Some(l) => Some(find(tx, LISTENER, l)?),
                None => None,
            };
            let lb_id = match (&listener, lb_given) {
                (Some(l), _) => first_ref(l, "loadbalancers").unwrap_or_default(),
                (None, Some(lb)) => lb,
                (None, None) => String::new(),
            };
            find(tx, LB, &lb_id)?;
            if let Some(l) = &listener {
                if !l["default_pool_id"].is_null() {
                    return Err(ApiError::conflict(
                        "Conflict",
                        format!(
                            "Listener {} already has a default pool {}",
                            id_of(l),
                            l["default_pool_id"].as_str().unwrap_or_default()
                        ),
                    ));
                }
            }
            lock_lb(tx, &lb_id)?;
            let mut p = base(&caller);
            apply_common(&mut p, &o)?;
            let id = id_of(&p);
            p["loadbalancers"] = json!([{"id": lb_id}]);
            p["protocol"] = protocol.into();
            p["lb_algorithm"] = algorithm.into();
            p["session_persistence"] = o.get("session_persistence").cloned().unwrap_or(Value::Null);
            p["tls_enabled"] = o.get("tls_enabled").cloned().unwrap_or(false.into());
            p["tls_container_ref"] = Value::Null;
            p["ca_tls_container_ref"] = Value::Null;
            p["crl_container_ref"] = Value::Null;
            tx.put(POOLS, &id, &p)?;
            if let Some(l) = listener.as_mut() {
                l["default_pool_id"] = id.clone().into();
                l["provisioning_status"] = "PENDING_UPDATE".into();
                tx.put(LISTENERS, &id_of(l), l)?;
            }
            Ok(view(tx, POOL, &p))
        })
        .await?;
    Ok(reply(StatusCode::CREATED, json!({ POOL.one: v })))
}

async fn update_pool(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let o = object(
        &body,
        "pool",
        &[
            "name",
            "description",
            "admin_state_up",
            "tags",
            "lb_algorithm",
            "session_persistence",
            "protocol",
            "listener_id",
            "loadbalancer_id",
            "tls_enabled",
        ],
    )?;
    if let Some(a) = opt_str(&o, "lb_algorithm")? {
        one_of(
            "lb_algorithm",
            &a,
            &[
                "ROUND_ROBIN",
                "LEAST_CONNECTIONS",
                "SOURCE_IP",
                "SOURCE_IP_PORT",
            ],
        )?;
    }
    let pid = id.clone();
    let v = cloud
        .write(move |tx| {
            let mut p = find(tx, POOL, &pid)?;
            immutable(&p, &o, &["protocol"])?;
            if o.contains_key("listener_id") || o.contains_key("loadbalancer_id") {
                return Err(ApiError::conflict(
                    "Conflict",
                    "Attributes listener_id and loadbalancer_id are immutable and cannot be changed.",
                ));
            }
            lock_lb(tx, &first_ref(&p, "loadbalancers").unwrap_or_default())?;
            apply_common(&mut p, &o)?;
            for k in ["lb_algorithm", "session_persistence", "tls_enabled"] {
                if let Some(v) = o.get(k) {
                    p[k] = v.clone();
                }
            }
            p["provisioning_status"] = "PENDING_UPDATE".into();
            p["updated_at"] = iso(now()).into();
            tx.put(POOLS, &pid, &p)?;
            Ok(view(tx, POOL, &p))
        })
        .await?;
    Ok(reply(StatusCode::OK, json!({ POOL.one: v })))
}

async fn delete_pool(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    cloud
        .write(move |tx| {
            let p = find(tx, POOL, &id)?;
            lock_lb(tx, &first_ref(&p, "loadbalancers").unwrap_or_default())?;
            for m in members_of(tx, &id) {
                tx.delete(MEMBERS, &id_of(&m));
            }
            for hm in refs(tx, MONITOR, "pools", &id) {
                tx.delete(MONITORS, &id_of(&hm));
            }
            for mut l in tx.list::<Value>(LISTENERS) {
                if l["default_pool_id"] == id.as_str() {
                    l["default_pool_id"] = Value::Null;
                    tx.put(LISTENERS, &id_of(&l), &l)?;
                }
            }
            tx.delete(POOLS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- members ----------------------------------------------------------------------------------

const MEMBER_FIELDS: &[&str] = &[
    "name",
    "admin_state_up",
    "tags",
    "address",
    "protocol_port",
    "weight",
    "subnet_id",
    "monitor_address",
    "monitor_port",
    "backup",
    "project_id",
    "tenant_id",
    "id",
];

async fn list_members(
    State(cloud): Ctx,
    Path(pool_id): Path<String>,
    Query(params): Query<Params>,
    uri: Uri,
) -> ApiResult {
    cloud.store.read(|r| find(r, POOL, &pool_id))?;
    list(&cloud, MEMBER, &params, &uri, |m| {
        m["pool_id"] == pool_id.as_str()
    })
}

async fn get_member(State(cloud): Ctx, Path((pool_id, id)): Path<(String, String)>) -> ApiResult {
    cloud.store.read(|r| {
        find(r, POOL, &pool_id)?;
        let m = find(r, MEMBER, &id)?;
        if m["pool_id"] != pool_id.as_str() {
            return Err(find(r, MEMBER, "")
                .err()
                .unwrap_or_else(|| ApiError::internal("")));
        }
        Ok(reply(
            StatusCode::OK,
            json!({"member": view(r, MEMBER, &m)}),
        ))
    })
}

/// A new member of `pool_id` from a create body (validated).
fn new_member(
    tx: &Tx<'_>,
    caller: &Caller,
    pool_id: &str,
    o: &Map<String, Value>,
) -> Result<Value, ApiError> {
    let address = req_str(o, "address")?;
    if address.parse::<std::net::IpAddr>().is_err() {
        return Err(invalid(format!(
            "address. Value: '{address}'. Invalid IP address"
        )));
    }
    let port = req_int(o, "protocol_port", 1, 65535)?;
    let weight = opt_int(o, "weight", 0, 256)?.unwrap_or(1);
    if members_of(tx, pool_id)
        .iter()
        .any(|m| m["address"] == address.as_str() && m["protocol_port"] == port)
    {
        return Err(ApiError::conflict(
            "Conflict",
            format!(
                "Another member on this pool is already using ip {address} on protocol_port {port}"
            ),
        ));
    }
    let monitored = !refs(tx, MONITOR, "pools", pool_id).is_empty();
    let mut m = base(caller);
    apply_common(&mut m, o)?;
    m["pool_id"] = pool_id.into();
    m["address"] = address.into();
    m["protocol_port"] = port.into();
    m["weight"] = weight.into();
    m["backup"] = opt_bool(o, "backup")?.unwrap_or(false).into();
    m["subnet_id"] = opt_str(o, "subnet_id")?.into();
    m["monitor_address"] = opt_str(o, "monitor_address")?.into();
    m["monitor_port"] = opt_int(o, "monitor_port", 1, 65535)?.into();
    m["operating_status"] = if monitored { "OFFLINE" } else { "NO_MONITOR" }.into();
    Ok(m)
}

async fn create_member(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(pool_id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let o = object(&body, "member", MEMBER_FIELDS)?;
    let v = cloud
        .write(move |tx| {
            let p = find(tx, POOL, &pool_id)?;
            let m = new_member(tx, &caller, &pool_id, &o)?;
            lock_lb(tx, &first_ref(&p, "loadbalancers").unwrap_or_default())?;
            let id = id_of(&m);
            tx.put(MEMBERS, &id, &m)?;
            Ok(view(tx, MEMBER, &m))
        })
        .await?;
    Ok(reply(StatusCode::CREATED, json!({ MEMBER.one: v })))
}

async fn update_member(
    State(cloud): Ctx,
    Path((pool_id, id)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let o = object(&body, "member", MEMBER_FIELDS)?;
    let mid = id.clone();
    let v = cloud
        .write(move |tx| {
            let p = find(tx, POOL, &pool_id)?;
            let mut m = find(tx, MEMBER, &mid)?;
            if m["pool_id"] != pool_id.as_str() {
                return Err(find(tx, MEMBER, "")
                    .err()
                    .unwrap_or_else(|| ApiError::internal("")));
            }
            immutable(&m, &o, &["address", "protocol_port", "subnet_id"])?;
            lock_lb(tx, &first_ref(&p, "loadbalancers").unwrap_or_default())?;
            apply_common(&mut m, &o)?;
            for k in ["weight", "backup", "monitor_address", "monitor_port"] {
                if let Some(v) = o.get(k) {
                    m[k] = v.clone();
                }
            }
            m["provisioning_status"] = "PENDING_UPDATE".into();
            m["updated_at"] = iso(now()).into();
            tx.put(MEMBERS, &mid, &m)?;
            Ok(view(tx, MEMBER, &m))
        })
        .await?;
    Ok(reply(StatusCode::OK, json!({ MEMBER.one: v })))
}

/// `PUT /pools/{id}/members`: the pool's members become exactly the given list (matched by
/// address and port), as the OpenStack CCM uses it.
async fn batch_update_members(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(pool_id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let v: Value = parse_body(&body)?;
    let Some(items) = v["members"].as_array().cloned() else {
        return Err(invalid("members. Value: missing"));
    };
    let mut wanted = Vec::new();
    for item in items {
        let Value::Object(o) = item else {
            return Err(invalid("members. Value should be a list of objects"));
        };
        for k in o.keys() {
            if !MEMBER_FIELDS.contains(&k.as_str()) {
                return Err(invalid(format!(
                    "members. Unknown attribute for argument members: {k}"
                )));
            }
        }
        wanted.push(o);
    }
    cloud
        .write(move |tx| {
            let p = find(tx, POOL, &pool_id)?;
            lock_lb(tx, &first_ref(&p, "loadbalancers").unwrap_or_default())?;
            let existing = members_of(tx, &pool_id);
            let key = |a: &Value, port: &Value| format!("{a}:{port}");
            let mut keep = Vec::new();
            for o in &wanted {
                let k = key(
                    o.get("address").unwrap_or(&Value::Null),
                    o.get("protocol_port").unwrap_or(&Value::Null),
                );
                match existing
                    .iter()
                    .find(|m| key(&m["address"], &m["protocol_port"]) == k)
                {
                    Some(m) => {
                        let mut m = m.clone();
                        apply_common(&mut m, o)?;
                        for f in ["weight", "backup", "monitor_address", "monitor_port"] {
                            if let Some(v) = o.get(f) {
                                m[f] = v.clone();
                            }
                        }
                        m["provisioning_status"] = "PENDING_UPDATE".into();
                        keep.push(id_of(&m));
                        tx.put(MEMBERS, &id_of(&m), &m)?;
                    }
                    None => {
                        let m = new_member(tx, &caller, &pool_id, o)?;
                        keep.push(id_of(&m));
                        tx.put(MEMBERS, &id_of(&m), &m)?;
                    }
                }
            }
            for m in existing {
                if !keep.contains(&id_of(&m)) {
                    tx.delete(MEMBERS, &id_of(&m));
                }
            }
            Ok(())
        })
        .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn delete_member(
    State(cloud): Ctx,
    Path((pool_id, id)): Path<(String, String)>,
) -> ApiResult {
    cloud
        .write(move |tx| {
            let p = find(tx, POOL, &pool_id)?;
            let m = find(tx, MEMBER, &id)?;
            if m["pool_id"] != pool_id.as_str() {
                return Err(find(tx, MEMBER, "")
                    .err()
                    .unwrap_or_else(|| ApiError::internal("")));
            }
            lock_lb(tx, &first_ref(&p, "loadbalancers").unwrap_or_default())?;
            tx.delete(MEMBERS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- health monitors --------------------------------------------------------------------------

const MONITOR_FIELDS: &[&str] = &[
    "name",
    "admin_state_up",
    "tags",
    "pool_id",
    "type",
    "delay",
    "timeout",
    "max_retries",
    "max_retries_down",
    "http_method",
    "url_path",
    "expected_codes",
    "http_version",
    "domain_name",
    "project_id",
    "tenant_id",
];

async fn list_monitors(State(cloud): Ctx, Query(params): Query<Params>, uri: Uri) -> ApiResult {
    list(&cloud, MONITOR, &params, &uri, |_| true)
}

async fn get_monitor(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    show(&cloud, MONITOR, &id)
}

fn monitor_settings(m: &mut Value, o: &Map<String, Value>) -> Result<(), ApiError> {
    for (k, min, max) in [
        ("delay", 0, 2_147_483_647),
        ("timeout", 0, 2_147_483_647),
        ("max_retries", 1, 10),
        ("max_retries_down", 1, 10),
    ] {
        if let Some(n) = opt_int(o, k, min, max)? {
            m[k] = n.into();
        }
    }
    if let Some(c) = opt_str(o, "expected_codes")? {
        if !c
            .split(',')
            .all(|p| p.split('-').all(|n| n.trim().parse::<u16>().is_ok()))
        {
            return Err(invalid(format!(
                "expected_codes. Value: '{c}'. Value should be status codes"
            )));
        }
        m["expected_codes"] = c.into();
    }
    if let Some(u) = opt_str(o, "url_path")? {
        if !u.starts_with('/') {
            return Err(invalid(format!(
                "url_path. Value: '{u}'. Value should start with /"
            )));
        }
        m["url_path"] = u.into();
    }
    for k in ["http_method", "http_version", "domain_name"] {
        if let Some(v) = o.get(k) {
            m[k] = v.clone();
        }
    }
    Ok(())
}

async fn create_monitor(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let o = object(&body, "healthmonitor", MONITOR_FIELDS)?;
    let pool_id = req_str(&o, "pool_id")?;
    let kind = req_str(&o, "type")?;
    one_of(
        "type",
        &kind,
        &[
            "TCP",
            "HTTP",
            "HTTPS",
            "PING",
            "UDP-CONNECT",
            "TLS-HELLO",
            "SCTP",
        ],
    )?;
    req_int(&o, "delay", 0, 2_147_483_647)?;
    req_int(&o, "timeout", 0, 2_147_483_647)?;
    req_int(&o, "max_retries", 1, 10)?;
    let v = cloud
        .write(move |tx| {
            let p = find(tx, POOL, &pool_id)?;
            if !refs(tx, MONITOR, "pools", &pool_id).is_empty() {
                return Err(ApiError::conflict(
                    "Conflict",
                    format!("Pool {pool_id} already has a health monitor"),
                ));
            }
            lock_lb(tx, &first_ref(&p, "loadbalancers").unwrap_or_default())?;
            let mut m = base(&caller);
            apply_common(&mut m, &o)?;
            let id = id_of(&m);
            m["pools"] = json!([{"id": pool_id}]);
            m["type"] = kind.clone().into();
            m["max_retries_down"] = 3.into();
            if kind.starts_with("HTTP") {
                m["http_method"] = "GET".into();
                m["url_path"] = "/".into();
                m["expected_codes"] = "200".into();
                m["http_version"] = 1.0.into();
            } else {
                m["http_method"] = Value::Null;
                m["url_path"] = Value::Null;
                m["expected_codes"] = Value::Null;
                m["http_version"] = Value::Null;
            }
            m["domain_name"] = Value::Null;
            monitor_settings(&mut m, &o)?;
            tx.put(MONITORS, &id, &m)?;
            Ok(view(tx, MONITOR, &m))
        })
        .await?;
    Ok(reply(StatusCode::CREATED, json!({ MONITOR.one: v })))
}

async fn update_monitor(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let o = object(&body, "healthmonitor", MONITOR_FIELDS)?;
    let mid = id.clone();
    let v = cloud
        .write(move |tx| {
            let mut m = find(tx, MONITOR, &mid)?;
            immutable(&m, &o, &["type"])?;
            if let Some(p) = o.get("pool_id") {
                if p.as_str() != first_ref(&m, "pools").as_deref() {
                    return Err(ApiError::conflict(
                        "Conflict",
                        "Attribute pool_id is immutable and cannot be changed.",
                    ));
                }
            }
            let pool = find(tx, POOL, &first_ref(&m, "pools").unwrap_or_default())?;
            lock_lb(tx, &first_ref(&pool, "loadbalancers").unwrap_or_default())?;
            apply_common(&mut m, &o)?;
            monitor_settings(&mut m, &o)?;
            m["provisioning_status"] = "PENDING_UPDATE".into();
            m["updated_at"] = iso(now()).into();
            tx.put(MONITORS, &mid, &m)?;
            Ok(view(tx, MONITOR, &m))
        })
        .await?;
    Ok(reply(StatusCode::OK, json!({ MONITOR.one: v })))
}

async fn delete_monitor(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    cloud
        .write(move |tx| {
            let m = find(tx, MONITOR, &id)?;
            let pool_id = first_ref(&m, "pools").unwrap_or_default();
            if let Ok(pool) = find(tx, POOL, &pool_id) {
                lock_lb(tx, &first_ref(&pool, "loadbalancers").unwrap_or_default())?;
            }
            for mut member in members_of(tx, &pool_id) {
                member["operating_status"] = "NO_MONITOR".into();
                tx.put(MEMBERS, &id_of(&member), &member)?;
            }
            tx.delete(MONITORS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
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
        .route("/loadbalancers", get(list_lbs).post(create_lb))
        .route(
            "/loadbalancers/{id}",
            get(get_lb).put(update_lb).delete(delete_lb),
        )
        .route("/loadbalancers/{id}/status", get(lb_status_tree))
        .route("/listeners", get(list_listeners).post(create_listener))
        .route(
            "/listeners/{id}",
            get(get_listener)
                .put(update_listener)
                .delete(delete_listener),
        )
        .route("/pools", get(list_pools).post(create_pool))
        .route(
            "/pools/{id}",
            get(get_pool).put(update_pool).delete(delete_pool),
        )
        .route(
            "/pools/{id}/members",
            get(list_members)
                .post(create_member)
                .put(batch_update_members),
        )
        .route(
            "/pools/{id}/members/{member_id}",
            get(get_member).put(update_member).delete(delete_member),
        )
        .route("/healthmonitors", get(list_monitors).post(create_monitor))
        .route(
            "/healthmonitors/{id}",
            get(get_monitor).put(update_monitor).delete(delete_monitor),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            require_token,
        ));
    let router = Router::new()
        .route("/load-balancer", get(versions))
        .route("/load-balancer/", get(versions))
        .nest("/load-balancer/v2/lbaas", lbaas.clone())
        .nest("/load-balancer/v2.0/lbaas", lbaas);
    service_layers(router, &cloud, Service::LoadBalancer)
}
