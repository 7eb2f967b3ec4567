//! `/loadbalancers`: create (VIP from the pool, or a requested one inside it, with its Neutron
//! port; listeners, pools, members and monitors in the same call when given), update, delete
//! (`?cascade=true`, taking the VIP port with it) and the status tree.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Extension;
use serde_json::{json, Map, Value};

use super::body::{invalid, Body};
use super::{
    conflict, find, healthmonitors, listeners, lock_lb, members, one, pools, put, ApiResult, View,
};
use crate::api::network::{
    create_vip_port, in_cidr, is_network_or_broadcast, Port, Subnet, PORTS, SUBNETS,
};
use crate::api::{new_id, ApiError, Caller, Ctx, Params};
use crate::defaults::{LbFlavor, LB_FLAVORS};
use crate::model::octavia::{
    self as m, Common, HealthMonitor, Listener, LoadBalancer, Pool, Record, StatusTree,
    LOADBALANCERS,
};
use crate::store::{Read, Tx};

const CREATE_FIELDS: &[&str] = &[
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
];

const UPDATE_FIELDS: &[&str] = &[
    "vip_qos_policy_id",
    "vip_address",
    "vip_subnet_id",
    "vip_network_id",
    "vip_port_id",
    "provider",
];

/// Why `vip` cannot be this load balancer's VIP (400), checked as Octavia checks a requested
/// `vip_address` against the VIP subnet, plus the local cloud's rule that VIPs are loopback
/// host addresses of `--lb-vip-pool`.
fn check_vip(
    r: &impl Read,
    pool: &crate::dataplane::VipPool,
    vip: std::net::IpAddr,
    subnet_id: Option<&str>,
) -> Result<(), ApiError> {
    if let Some(reason) = pool.refuse(vip) {
        return Err(ApiError::bad_request(format!(
            "Validation failure: vip_address {vip} {reason}."
        )));
    }
    // A subnet this cloud knows: the VIP must be on it too. (Unknown subnet IDs are taken as
    // given: the VIP pool is what places VIPs here.)
    if let (Some(id), std::net::IpAddr::V4(v4)) = (subnet_id, vip) {
        if let Some(subnet) = r.get::<Subnet>(SUBNETS, id) {
            if !in_cidr(v4, &subnet.cidr) || is_network_or_broadcast(v4, &subnet.cidr) {
                return Err(ApiError::bad_request(format!(
                    "Validation failure: vip_address {vip} is not a valid IP for the specified subnet {id} ({}).",
                    subnet.cidr
                )));
            }
        }
    }
    Ok(())
}

/// Octavia's checks of a caller's VIP port (`_validate_port_and_fill_or_validate_subnet`):
/// it exists (400 `Port <id> not found.`), no device uses it, and the VIP is its address on
/// `subnet_id` when given, else `wanted` when given (it must be the port's), else its first.
/// Returns the VIP, its subnet and the port's network.
fn adopt_vip_port(
    r: &impl Read,
    id: &str,
    subnet_id: Option<&str>,
    wanted: Option<std::net::IpAddr>,
) -> Result<(std::net::IpAddr, String, String), ApiError> {
    let Some(port) = r.get::<Port>(PORTS, id) else {
        return Err(ApiError::bad_request(format!("Port {id} not found.")));
    };
    if !port.device_id.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Validation failure: Port {id} is already used by device {} .",
            port.device_id
        )));
    }
    let fixed = match (subnet_id, wanted) {
        (Some(s), _) => port.fixed_ips.iter().find(|f| f.subnet_id == s).ok_or_else(|| {
            ApiError::bad_request(
                "Validation failure: No VIP address found on the specified VIP port within the specified subnet.",
            )
        })?,
        (None, Some(ip)) => port
            .fixed_ips
            .iter()
            .find(|f| f.ip_address.parse::<std::net::IpAddr>().ok() == Some(ip))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "Validation failure: Specified VIP address not found on the specified VIP port.",
                )
            })?,
        (None, None) => port.fixed_ips.first().ok_or_else(|| {
            ApiError::bad_request(format!(
                "Validation failure: Port {id} has no fixed IP for the VIP."
            ))
        })?,
    };
    let ip = fixed.ip_address.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "Validation failure: Port {id} has no valid IP address."
        ))
    })?;
    Ok((ip, fixed.subnet_id.clone(), port.network_id.clone()))
}

/// The subnet a new VIP port goes on: `subnet_id` if this cloud knows it, else the first
/// subnet of `network_id`.
fn vip_subnet(r: &impl Read, subnet_id: Option<&str>, network_id: Option<&str>) -> Option<Subnet> {
    if let Some(s) = subnet_id.and_then(|id| r.get::<Subnet>(SUBNETS, id)) {
        return Some(s);
    }
    let network_id = network_id?;
    r.list::<Subnet>(SUBNETS)
        .into_iter()
        .find(|s| s.network_id == network_id)
}

pub(super) async fn create(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let b = Body::parse_common(&body, "loadbalancer", CREATE_FIELDS)?;
    let subnet = b.opt_str("vip_subnet_id")?;
    let network = b.opt_str("vip_network_id")?;
    let port = b.opt_str("vip_port_id")?;
    if subnet.is_none() && network.is_none() && port.is_none() {
        return Err(invalid(
            "loadbalancer. VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.",
        ));
    }
    let wanted_vip = b.opt_ip("vip_address")?;
    let mut common = Common::new(&caller.project_id);
    b.apply_common(&mut common)?;
    let tree = Tree::parse(&b, &caller, &common.meta.id)?;
    let provider = b.opt_str("provider")?.unwrap_or_else(|| "amphora".into());
    let availability_zone = b.opt_str("availability_zone")?;
    let flavor_id = match b.opt_str("flavor_id")? {
        Some(id) => Some(check_flavor(&id)?.id.to_owned()),
        None => None,
    };
    b.opt_str("vip_qos_policy_id")?;
    let vip_pool = cloud.config.lb_vip_pool;
    let v = cloud
        .write(move |tx| {
            // Octavia's availability zones: here, the cloud's zones (Nova's and Cinder's).
            if let Some(az) = &availability_zone {
                if !crate::api::zones::known_zones(tx).contains(az) {
                    return Err(ApiError::bad_request(
                        "Validation failure: Invalid availability zone.",
                    ));
                }
            }
            let used: Vec<String> = tx
                .list::<LoadBalancer>(LOADBALANCERS)
                .into_iter()
                .map(|l| l.vip_address)
                .collect();
            // A port the caller brought (Octavia's `vip_port_id`): its address is the VIP,
            // its subnet and network the VIP's, and it stays the caller's (not deleted with
            // the load balancer).
            let adopted = match &port {
                Some(id) => Some(adopt_vip_port(tx, id, subnet.as_deref(), wanted_vip)?),
                None => None,
            };
            let (subnet, network, wanted_vip) = match adopted {
                Some((ip, s, n)) => (Some(s), Some(n), Some(ip)),
                None => (subnet, network, wanted_vip),
            };
            let vip = match wanted_vip {
                Some(a) => {
                    check_vip(tx, &vip_pool, a, subnet.as_deref())?;
                    if used.contains(&a.to_string()) {
                        return Err(conflict(format!(
                            "IP address {a} already allocated in subnet"
                        )));
                    }
                    a.to_string()
                }
                None => vip_pool
                    .allocate(&used)
                    .ok_or_else(|| {
                        conflict(format!(
                            "No more IP addresses available in the VIP pool {vip_pool}"
                        ))
                    })?
                    .to_string(),
            };
            // The VIP's Neutron port, unless the caller brought one: on the given subnet, or
            // the first subnet of the given network.
            let mut network = network;
            let mut subnet = subnet;
            let vip_port_id = match port {
                Some(p) => p,
                None => match vip_subnet(tx, subnet.as_deref(), network.as_deref()) {
                    Some(s) => {
                        let p = create_vip_port(
                            tx,
                            &common.meta.id,
                            &common.meta.project_id,
                            &s,
                            &vip,
                        )?;
                        network = Some(s.network_id.clone());
                        subnet = Some(s.meta.id);
                        p.meta.id
                    }
                    None => new_id(),
                },
            };
            let lb = LoadBalancer {
                common,
                vip_address: vip,
                vip_port_id,
                vip_subnet_id: subnet,
                vip_network_id: network,
                vip_qos_policy_id: None,
                provider,
                flavor_id,
                availability_zone,
            };
            put(tx, &lb)?;
            if tree.is_empty() {
                return Ok(one(tx, StatusCode::CREATED, &lb));
            }
            tree.insert(tx, &caller)?;
            Ok(crate::api::reply(
                StatusCode::CREATED,
                json!({"loadbalancer": full_view(tx, &lb)}),
            ))
        })
        .await?;
    Ok(v)
}

/// A pool given in a single-call create, with its health monitor and members.
struct PoolTree {
    pool: Pool,
    monitor: Option<HealthMonitor>,
    members: Vec<Body>,
}

/// The listeners (each with its default pool) and pools of a single-call create
/// (`{"loadbalancer": {"listeners": [{"default_pool": {"members": [...], "healthmonitor":
/// {...}}}], "pools": [...]}}`), read and validated before anything is stored.
struct Tree {
    listeners: Vec<(Listener, Option<PoolTree>)>,
    pools: Vec<PoolTree>,
}

/// The objects of list `key` in `b` (absent or `null` is none).
fn objects(b: &Body, key: &str) -> Result<Vec<Map<String, Value>>, ApiError> {
    match b.raw(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::Object(o) => Ok(o.clone()),
                other => Err(invalid(format!(
                    "{key}. Value: '{other}'. Value should be a list of objects"
                ))),
            })
            .collect(),
        Some(v) => Err(invalid(format!(
            "{key}. Value: '{v}'. Value should be a list"
        ))),
    }
}

impl PoolTree {
    fn parse(
        o: Map<String, Value>,
        key: &str,
        caller: &Caller,
        lb_id: &str,
    ) -> Result<Self, ApiError> {
        let b = Body::of(o, key, pools::CREATE_FIELDS)?;
        let pool = pools::build(&b, caller, lb_id)?;
        let monitor = match b.opt_object("healthmonitor")? {
            Some(o) => {
                let hb = Body::of(o, "healthmonitor", healthmonitors::FIELDS)?;
                Some(healthmonitors::build(&hb, caller, pool.id())?)
            }
            None => None,
        };
        let members = objects(&b, "members")?
            .into_iter()
            .map(|o| Body::of(o, "members", members::FIELDS))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PoolTree {
            pool,
            monitor,
            members,
        })
    }

    /// Stores the pool, then its monitor, then its members (so they start monitored).
    fn insert(&self, tx: &mut Tx<'_>, caller: &Caller) -> Result<(), ApiError> {
        put(tx, &self.pool)?;
        if let Some(hm) = &self.monitor {
            put(tx, hm)?;
        }
        for b in &self.members {
            let member = members::new_member(tx, caller, self.pool.id(), b)?;
            put(tx, &member)?;
        }
        Ok(())
    }
}

impl Tree {
    fn parse(b: &Body, caller: &Caller, lb_id: &str) -> Result<Self, ApiError> {
        let mut listeners = Vec::new();
        for o in objects(b, "listeners")? {
            let lb = Body::of(o, "listeners", &listeners::create_fields())?;
            let mut listener = listeners::build(&lb, caller, lb_id)?;
            let pool = match lb.opt_object("default_pool")? {
                Some(o) => {
                    let p = PoolTree::parse(o, "default_pool", caller, lb_id)?;
                    listener.default_pool_id = Some(p.pool.id().to_owned());
                    Some(p)
                }
                None => None,
            };
            listeners.push((listener, pool));
        }
        let pools = objects(b, "pools")?
            .into_iter()
            .map(|o| PoolTree::parse(o, "pools", caller, lb_id))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Tree { listeners, pools })
    }

    fn is_empty(&self) -> bool {
        self.listeners.is_empty() && self.pools.is_empty()
    }

    fn insert(&self, tx: &mut Tx<'_>, caller: &Caller) -> Result<(), ApiError> {
        for p in &self.pools {
            p.insert(tx, caller)?;
        }
        for (l, pool) in &self.listeners {
            if let Some(p) = pool {
                p.insert(tx, caller)?;
            }
            listeners::insert(tx, l)?;
        }
        Ok(())
    }
}

/// A load balancer with its listeners and pools shown in full (pools with their members and
/// health monitor), as Octavia answers a single-call create.
fn full_view(r: &impl Read, lb: &LoadBalancer) -> Value {
    let mut v = lb.view(r);
    v["listeners"] = m::listeners_of(r, lb.id())
        .iter()
        .map(|l| l.view(r))
        .collect();
    v["pools"] = m::pools_of(r, lb.id())
        .iter()
        .map(|p| {
            let mut pv = p.view(r);
            pv["members"] = m::members_of(r, p.id()).iter().map(|x| x.view(r)).collect();
            pv["healthmonitor"] = m::monitors_of(r, p.id())
                .first()
                .map_or(Value::Null, |hm| hm.view(r));
            pv
        })
        .collect();
    v
}

pub(super) async fn update(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let b = Body::parse_common(&body, "loadbalancer", UPDATE_FIELDS)?;
    cloud
        .write(move |tx| {
            let current: LoadBalancer = find(tx, &id)?;
            b.immutable(
                &current,
                &[
                    "vip_address",
                    "vip_subnet_id",
                    "vip_network_id",
                    "vip_port_id",
                    "provider",
                ],
            )?;
            let mut lb = lock_lb(tx, &id)?;
            b.apply_common(&mut lb.common)?;
            put(tx, &lb)?;
            Ok(one(tx, StatusCode::OK, &lb))
        })
        .await
}

pub(super) async fn delete(
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
            let listeners = m::listeners_of(tx, &id);
            let pools = m::pools_of(tx, &id);
            if !cascade && (!listeners.is_empty() || !pools.is_empty()) {
                return Err(ApiError::bad_request(format!(
                    "Validation failure: Cannot delete Load Balancer {id} - it has children"
                )));
            }
            super::delete_tree(tx, &id)
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(super) async fn status_tree(State(cloud): Ctx, Path(id): Path<String>) -> ApiResult {
    cloud.store.read(|r| {
        let lb: LoadBalancer = find(r, &id)?;
        Ok(crate::api::reply(
            StatusCode::OK,
            json!({"statuses": StatusTree::of(r, &lb)}),
        ))
    })
}

/// `GET /availabilityzones`: Octavia's availability zones, which here are the cloud's zones,
/// each enabled and without a profile.
pub(super) async fn availability_zones(State(cloud): Ctx) -> ApiResult {
    let zones = cloud.store.read(|r| crate::api::zones::known_zones(r));
    let zones: Vec<Value> = zones
        .into_iter()
        .map(|name| {
            json!({"name": name, "description": "", "enabled": true,
                "availability_zone_profile_id": null})
        })
        .collect();
    Ok(crate::api::reply(
        StatusCode::OK,
        json!({ "availability_zones": zones }),
    ))
}

/// The flavor a new load balancer asks for, as Octavia checks it: an unknown id is
/// `Invalid flavor_id.`, a disabled flavor `The selected flavor is not allowed in this
/// deployment` (both 400).
fn check_flavor(id: &str) -> Result<&'static LbFlavor, ApiError> {
    let flavor = LB_FLAVORS
        .iter()
        .find(|f| f.id == id)
        .ok_or_else(|| ApiError::bad_request("Validation failure: Invalid flavor_id."))?;
    if !flavor.enabled {
        return Err(ApiError::bad_request(format!(
            "The selected flavor is not allowed in this deployment: {id}"
        )));
    }
    Ok(flavor)
}

fn flavor_view(f: &LbFlavor) -> Value {
    json!({"id": f.id, "name": f.name, "description": f.description, "enabled": f.enabled,
        "flavor_profile_id": f.flavor_profile_id})
}

/// `GET /flavors`: Octavia's flavors ([`crate::defaults::LB_FLAVORS`]), with Octavia's
/// equality filters and `fields` (`openstack loadbalancer flavor show NAME` looks a name up
/// this way).
pub(super) async fn flavors(Query(params): Query<Params>) -> ApiResult {
    let flavors: Vec<Value> = LB_FLAVORS
        .iter()
        .map(flavor_view)
        .filter(|v| crate::api::matches_filters(v, &params, &["fields"]))
        .map(|v| crate::api::select_fields(v, &params))
        .collect();
    Ok(crate::api::reply(
        StatusCode::OK,
        json!({ "flavors": flavors, "flavors_links": [] }),
    ))
}

/// `GET /flavors/{id}`.
pub(super) async fn flavor(Path(id): Path<String>) -> ApiResult {
    let f = LB_FLAVORS
        .iter()
        .find(|f| f.id == id)
        .ok_or_else(|| ApiError::not_found("NotFound", format!("Flavor {id} not found.")))?;
    Ok(crate::api::reply(
        StatusCode::OK,
        json!({ "flavor": flavor_view(f) }),
    ))
}
