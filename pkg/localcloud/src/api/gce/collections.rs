//! The GCE collections without an OpenStack counterpart, stored as [`GceObject`]s: routes,
//! firewalls and HTTP health checks (global), addresses, target pools and forwarding rules
//! (regional). One table of [`KINDS`] says what each is called, where it lives and what its
//! insert requires and defaults; the handlers are shared.

use super::*;

/// Where a collection lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Where {
    Global,
    Regional,
}

/// The type GCE's schema gives a field; an insert whose field has another type is a 400.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Ty {
    Str,
    Bool,
    /// An integer within the inclusive range.
    Int(i64, i64),
    /// A number within the inclusive range.
    Float(f64, f64),
    /// A list of strings, at most this many.
    Strs(usize),
    /// A list of objects.
    Objects,
    Object,
}

/// One collection.
pub(crate) struct Kind {
    /// The path segment (`routes`).
    pub collection: &'static str,
    /// `compute#route`
    pub kind: &'static str,
    pub place: Where,
    /// Fields an insert must have.
    pub required: &'static [(&'static str, Ty)],
    /// Fields an insert may have (besides `name`, `description`, `kind`).
    pub optional: &'static [(&'static str, Ty)],
    /// Defaults GCE fills in.
    pub defaults: fn() -> Value,
}

/// Most strings a list field takes (GCE's limits are in the hundreds; none of ours needs more).
const MANY: usize = 256;
/// A firewall or route priority.
const PRIORITY: Ty = Ty::Int(0, 65_535);
/// A legacy HTTP health check's interval and timeout, in seconds.
const CHECK_SECONDS: Ty = Ty::Int(1, 300);
/// A health check's healthy and unhealthy thresholds.
const THRESHOLD: Ty = Ty::Int(1, 10);

pub(crate) const KINDS: &[Kind] = &[
    Kind {
        collection: "routes",
        kind: "compute#route",
        place: Where::Global,
        required: &[("network", Ty::Str), ("destRange", Ty::Str)],
        optional: &[
            ("nextHopInstance", Ty::Str),
            ("nextHopIp", Ty::Str),
            ("nextHopGateway", Ty::Str),
            ("nextHopNetwork", Ty::Str),
            ("priority", PRIORITY),
            ("tags", Ty::Strs(MANY)),
        ],
        defaults: || json!({"priority": 1000, "routeType": "STATIC", "routeStatus": "ACTIVE"}),
    },
    Kind {
        collection: "firewalls",
        kind: "compute#firewall",
        place: Where::Global,
        required: &[],
        optional: &[
            ("network", Ty::Str),
            ("allowed", Ty::Objects),
            ("denied", Ty::Objects),
            ("sourceRanges", Ty::Strs(MANY)),
            ("sourceTags", Ty::Strs(MANY)),
            ("targetTags", Ty::Strs(MANY)),
            ("destinationRanges", Ty::Strs(MANY)),
            ("direction", Ty::Str),
            ("priority", PRIORITY),
            ("disabled", Ty::Bool),
            ("logConfig", Ty::Object),
            ("sourceServiceAccounts", Ty::Strs(MANY)),
            ("targetServiceAccounts", Ty::Strs(MANY)),
        ],
        defaults: || json!({"network": "global/networks/default", "direction": "INGRESS", "priority": 1000, "disabled": false}),
    },
    Kind {
        collection: "httpHealthChecks",
        kind: "compute#httpHealthCheck",
        place: Where::Global,
        required: &[],
        optional: &[
            ("host", Ty::Str),
            ("requestPath", Ty::Str),
            ("port", Ty::Int(1, 65_535)),
            ("checkIntervalSec", CHECK_SECONDS),
            ("timeoutSec", CHECK_SECONDS),
            ("unhealthyThreshold", THRESHOLD),
            ("healthyThreshold", THRESHOLD),
        ],
        defaults: || json!({"requestPath": "/", "port": 80, "checkIntervalSec": 5, "timeoutSec": 5, "unhealthyThreshold": 2, "healthyThreshold": 2}),
    },
    Kind {
        collection: "addresses",
        kind: "compute#address",
        place: Where::Regional,
        required: &[],
        optional: &[
            ("address", Ty::Str),
            ("addressType", Ty::Str),
            ("networkTier", Ty::Str),
            ("purpose", Ty::Str),
            ("subnetwork", Ty::Str),
            ("network", Ty::Str),
            ("ipVersion", Ty::Str),
            ("prefixLength", Ty::Int(0, 128)),
        ],
        defaults: || json!({"addressType": "EXTERNAL", "networkTier": "PREMIUM", "status": "RESERVED"}),
    },
    Kind {
        collection: "targetPools",
        kind: "compute#targetPool",
        place: Where::Regional,
        required: &[],
        optional: &[
            ("instances", Ty::Strs(1000)),
            // GCE takes at most one legacy HTTP health check per pool.
            ("healthChecks", Ty::Strs(1)),
            ("sessionAffinity", Ty::Str),
            ("failoverRatio", Ty::Float(0.0, 1.0)),
            ("backupPool", Ty::Str),
        ],
        defaults: || json!({"sessionAffinity": "NONE"}),
    },
    Kind {
        collection: "forwardingRules",
        kind: "compute#forwardingRule",
        place: Where::Regional,
        required: &[("target", Ty::Str)],
        optional: &[
            ("IPAddress", Ty::Str),
            ("IPProtocol", Ty::Str),
            ("portRange", Ty::Str),
            // GCE takes up to five ports in `ports`.
            ("ports", Ty::Strs(5)),
            ("allPorts", Ty::Bool),
            ("loadBalancingScheme", Ty::Str),
            ("network", Ty::Str),
            ("subnetwork", Ty::Str),
            ("networkTier", Ty::Str),
            ("backendService", Ty::Str),
            ("allowGlobalAccess", Ty::Bool),
        ],
        defaults: || json!({"IPProtocol": "TCP", "loadBalancingScheme": "EXTERNAL", "networkTier": "PREMIUM"}),
    },
];

/// Checks that `v`, the insert's field `key`, has type `ty`.
fn check_type(key: &str, ty: Ty, v: &Value) -> Result<(), ApiError> {
    let field = format!("resource.{key}");
    let bad = |must: &str| {
        invalid(format!(
            "Invalid value for field '{field}': {}. Must be {must}.",
            json_kind(v)
        ))
    };
    match ty {
        Ty::Str => v.is_string().then_some(()).ok_or_else(|| bad("a string")),
        Ty::Bool => v.is_boolean().then_some(()).ok_or_else(|| bad("a boolean")),
        Ty::Object => v.is_object().then_some(()).ok_or_else(|| bad("an object")),
        Ty::Int(lo, hi) => match v.as_i64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(()),
            Some(n) => Err(invalid(format!(
                "Invalid value for field '{field}': '{n}'. Must be between {lo} and {hi}."
            ))),
            None => Err(bad(&format!("an integer between {lo} and {hi}"))),
        },
        Ty::Float(lo, hi) => match v.as_f64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(()),
            _ => Err(bad(&format!("a number between {lo} and {hi}"))),
        },
        Ty::Strs(max) => match v.as_array() {
            Some(a) if a.len() > max => Err(invalid(format!(
                "Invalid value for field '{field}': at most {max} values are allowed."
            ))),
            Some(a) => each_is(&field, a, Value::is_string, "a string"),
            None => Err(bad("a list of strings")),
        },
        Ty::Objects => match v.as_array() {
            Some(a) => each_is(&field, a, Value::is_object, "an object"),
            None => Err(bad("a list of objects")),
        },
    }
}

/// Checks that every element of the list `field` is `what` (`is`), naming the first that is not.
fn each_is(field: &str, a: &[Value], is: fn(&Value) -> bool, what: &str) -> Result<(), ApiError> {
    match a.iter().position(|x| !is(x)) {
        Some(i) => Err(invalid(format!(
            "Invalid value for field '{field}[{i}]': {}. Must be {what}.",
            json_kind(&a[i])
        ))),
        None => Ok(()),
    }
}

fn kind_of(collection: &str, place: Where) -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.collection == collection && k.place == place)
}

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    let g = format!("{p}/global/{{collection}}");
    let r = format!("{p}/regions/{{region}}/{{collection}}");
    Router::new()
        .route(&g, get(list).post(insert))
        .route(&format!("{g}/{{name}}"), get(get_one).delete(delete))
        .route(&r, get(list).post(insert))
        .route(&format!("{r}/{{name}}"), get(get_one).delete(delete))
        .route(&format!("{r}/{{name}}/{{action}}"), post(action))
}

/// The kind and scope (`global`, `regions/r`) a path names.
fn locate(
    cloud: &Cloud,
    project: &Project,
    p: &BTreeMap<String, String>,
) -> Result<(&'static Kind, String), ApiError> {
    let collection = param(p, "collection");
    let (place, scope) = match p.get("region") {
        Some(region) => {
            check_region(cloud, project, region)?;
            (Where::Regional, format!("regions/{region}"))
        }
        None => (Where::Global, "global".to_owned()),
    };
    let kind = kind_of(collection, place)
        .ok_or_else(|| not_found(&format!("projects/{}/{scope}/{collection}", project.name)))?;
    Ok((kind, scope))
}

fn find(
    r: &impl Read,
    project: &Project,
    kind: &Kind,
    scope: &str,
    name: &str,
) -> Result<GceObject, ApiError> {
    r.get::<GceObject>(
        &GceObject::table(kind.collection),
        &GceObject::key(scope, name),
    )
    .filter(|o| o.meta.project_id == project.id)
    .ok_or_else(|| {
        not_found(&format!(
            "projects/{}/{scope}/{}/{name}",
            project.name, kind.collection
        ))
    })
}

/// Every object of a collection in a project (for other modules, e.g. a data plane).
pub(crate) fn objects(r: &impl Read, collection: &str) -> Vec<GceObject> {
    r.list::<GceObject>(&GceObject::table(collection))
}

async fn list(
    State(cloud): Ctx,
    Path(p): Params_,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let (kind, scope) = locate(&cloud, &project, &p)?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        let items = objects(r, kind.collection)
            .iter()
            .filter(|o| o.meta.project_id == project.id && o.scope == scope)
            .map(|o| object_view(&s, o, kind.kind, kind.collection))
            .collect();
        list_reply(
            &format!("{}List", kind.kind),
            format!("projects/{}/{scope}/{}", project.name, kind.collection),
            s.link(&format!("{scope}/{}", kind.collection)),
            items,
            &params,
        )
    })
}

async fn get_one(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let (kind, scope) = locate(&cloud, &project, &p)?;
        let o = find(r, &project, kind, &scope, param(&p, "name"))?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        Ok(reply(
            StatusCode::OK,
            object_view(&s, &o, kind.kind, kind.collection),
        ))
    })
}

/// Turns a reference into the full URL GCE shows (`global/networks/x` → `.../global/networks/x`).
fn full_link(s: &Scope<'_>, reference: &str) -> String {
    if reference.starts_with("http://") || reference.starts_with("https://") {
        return reference.to_owned();
    }
    let rest = reference.trim_start_matches('/');
    let rest = match rest.find("projects/") {
        Some(i) => rest[i..].splitn(3, '/').nth(2).unwrap_or(""),
        None => rest,
    };
    s.link(rest)
}

/// Checks and completes an insert's fields for `kind`.
fn prepare(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    kind: &Kind,
    scope: &str,
    mut fields: Map<String, Value>,
) -> Result<Map<String, Value>, ApiError> {
    // `null` is an absent field, as in GCE's JSON.
    fields.retain(|_, v| !v.is_null());
    for (key, v) in &fields {
        let ty = match key.as_str() {
            "name" | "description" | "kind" => Some(Ty::Str),
            k => kind
                .required
                .iter()
                .chain(kind.optional)
                .find(|(name, _)| *name == k)
                .map(|(_, ty)| *ty),
        };
        match ty {
            Some(ty) => check_type(key, ty, v)?,
            None => {
                return Err(invalid(format!(
                    "Invalid JSON payload received. Unknown name \"{key}\": Cannot find field."
                )))
            }
        }
    }
    let given: std::collections::BTreeSet<String> = fields.keys().cloned().collect();
    for (key, _) in kind.required {
        if !fields.contains_key(*key) {
            return Err(required(&format!("resource.{key}")));
        }
    }
    fields.remove("name");
    fields.remove("kind");
    if let Value::Object(defaults) = (kind.defaults)() {
        for (k, v) in defaults {
            fields.entry(k).or_insert(v);
        }
    }
    if kind.collection == "httpHealthChecks" && !given.contains("timeoutSec") {
        if let Some(interval) = fields.get("checkIntervalSec").and_then(Value::as_i64) {
            fields.insert("timeoutSec".into(), json!(interval.min(5)));
        }
    }
    for key in ["network", "nextHopInstance", "target", "subnetwork"] {
        if let Some(Value::String(r)) = fields.get(key) {
            let link = full_link(s, r);
            fields.insert(key.into(), json!(link));
        }
    }
    if let Some(Value::String(net)) = fields.get("network") {
        if find_network(tx, net).is_none() {
            return Err(invalid(format!(
                "Invalid value for field 'resource.network': '{net}'. The referenced network resource cannot be found."
            )));
        }
    }
    match kind.collection {
        "routes" => {
            let hops = [
                "nextHopInstance",
                "nextHopIp",
                "nextHopGateway",
                "nextHopNetwork",
            ];
            if hops.iter().filter(|h| fields.contains_key(**h)).count() != 1 {
                return Err(invalid("Exactly one of nextHopInstance, nextHopIp, nextHopGateway, nextHopNetwork must be specified"));
            }
            if let Some(Value::String(inst)) = fields.get("nextHopInstance") {
                let (zone, name) = instance_ref(inst).ok_or_else(|| {
                    invalid(format!(
                        "Invalid value for field 'resource.nextHopInstance': '{inst}'."
                    ))
                })?;
                instances::find_instance(tx, s.project, &zone, &name).map_err(|e| {
                    invalid(format!(
                        "Invalid value for field 'resource.nextHopInstance': '{inst}'. {}",
                        e.message
                    ))
                })?;
            }
            check_cidr("destRange", fields.get("destRange"))?;
        }
        "firewalls" => {
            if fields.contains_key("allowed") == fields.contains_key("denied") {
                return Err(invalid(
                    "Exactly one of 'allowed' or 'denied' must be specified",
                ));
            }
            for key in ["sourceRanges", "destinationRanges"] {
                if let Some(Value::Array(ranges)) = fields.get(key) {
                    for r in ranges {
                        check_cidr(key, Some(r))?;
                    }
                }
            }
            one_of(&fields, "direction", &["INGRESS", "EGRESS"])?;
            for key in ["allowed", "denied"] {
                if let Some(Value::Array(rules)) = fields.get(key) {
                    for (i, rule) in rules.iter().enumerate() {
                        check_firewall_rule(&format!("{key}[{i}]"), rule)?;
                    }
                }
            }
        }
        "httpHealthChecks" => {
            // A timeout longer than the interval is GCE's 400; when the interval is shorter
            // than the default timeout and no timeout is given, the timeout follows it.
            let interval = fields
                .get("checkIntervalSec")
                .and_then(Value::as_i64)
                .unwrap_or(5);
            let timeout = fields
                .get("timeoutSec")
                .and_then(Value::as_i64)
                .unwrap_or(5);
            if timeout > interval {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.timeoutSec': '{timeout}'. TimeoutSec should be less than or equal to checkIntervalSec ({interval})."
                )));
            }
            let path = fields
                .get("requestPath")
                .and_then(Value::as_str)
                .unwrap_or("/");
            if !path.starts_with('/') || path.chars().any(char::is_control) {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.requestPath': '{}'. Must start with '/' and hold no control characters.",
                    path.escape_default()
                )));
            }
        }
        "targetPools" => {
            one_of(
                &fields,
                "sessionAffinity",
                &["NONE", "CLIENT_IP", "CLIENT_IP_PROTO"],
            )?;
            // References must name what exists, as GCE answers 404 for a missing one.
            for hc in string_list(&fields, "healthChecks") {
                let name = m::last_segment(&hc);
                if tx
                    .get::<GceObject>(
                        &GceObject::table("httpHealthChecks"),
                        &GceObject::key("global", name),
                    )
                    .is_none_or(|o| o.meta.project_id != s.project.id)
                {
                    return Err(not_found(&format!(
                        "projects/{}/global/httpHealthChecks/{name}",
                        s.project.name
                    )));
                }
            }
            if let Some(Value::String(backup)) = fields.get("backupPool") {
                find(tx, s.project, kind, scope, m::last_segment(backup))?;
            }
            let list = fields.get("instances").cloned().unwrap_or(json!([]));
            let list = list.as_array().cloned().unwrap_or_default();
            let mut out = Vec::new();
            for i in list {
                let r = i
                    .as_str()
                    .ok_or_else(|| invalid("Invalid value for field 'resource.instances'"))?;
                out.push(json!(check_instance(tx, s, r)?));
            }
            fields.insert("instances".into(), json!(out));
            if let Some(Value::Array(hcs)) = fields.get("healthChecks").cloned() {
                let links: Vec<Value> = hcs
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|h| json!(full_link(s, h)))
                    .collect();
                fields.insert("healthChecks".into(), json!(links));
            }
        }
        "addresses" | "forwardingRules" => {
            let key = if kind.collection == "addresses" {
                "address"
            } else {
                "IPAddress"
            };
            let wanted = fields.get(key).and_then(Value::as_str).map(str::to_owned);
            if let Some(w) = &wanted {
                if w.parse::<std::net::Ipv4Addr>().is_err() {
                    return Err(invalid(format!(
                        "Invalid value for field 'resource.{key}': '{}'. Must be an IPv4 address.",
                        w.escape_default()
                    )));
                }
            }
            if kind.collection == "forwardingRules" {
                one_of(&fields, "IPProtocol", &["TCP", "UDP"])?;
                let target = fields
                    .get("target")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let pools = kind_of("targetPools", Where::Regional)
                    .ok_or_else(|| ApiError::internal("the targetPools collection is missing"))?;
                match target_pool_key(target) {
                    Some((pool_scope, name)) => {
                        find(tx, s.project, pools, &pool_scope, &name)?;
                    }
                    None => {
                        return Err(invalid(format!(
                        "Invalid value for field 'resource.target': '{}'. Must be a target pool.",
                        target.escape_default()
                    )))
                    }
                }
            }
            let address = reserve_address(tx, s, scope, wanted)?;
            fields.insert(key.into(), json!(address));
        }
        _ => {}
    }
    Ok(fields)
}

/// The strings of the list field `key` (types already checked).
fn string_list(fields: &Map<String, Value>, key: &str) -> Vec<String> {
    fields
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Checks that the string field `key`, when given, is one of `allowed` (GCE's enums).
fn one_of(fields: &Map<String, Value>, key: &str, allowed: &[&str]) -> Result<(), ApiError> {
    match fields.get(key).and_then(Value::as_str) {
        Some(v) if !allowed.contains(&v) => Err(invalid(format!(
            "Invalid value for field 'resource.{key}': '{}'. Must be one of {allowed:?}.",
            v.escape_default()
        ))),
        _ => Ok(()),
    }
}

/// `(scope, name)` of a target pool reference (`.../regions/r/targetPools/p`).
pub(crate) fn target_pool_key(reference: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = reference.trim_end_matches('/').split('/').collect();
    let i = parts.iter().rposition(|p| *p == "targetPools")?;
    let (region, name) = (parts.get(i.checked_sub(1)?)?, parts.get(i + 1)?);
    (i >= 2 && parts[i - 2] == "regions" && !name.is_empty())
        .then(|| (format!("regions/{region}"), name.to_string()))
}

/// A port or port range of a firewall rule: `80` or `8000-8100`, within 1..=65535, low ≤ high.
pub(crate) fn parse_port_range(entry: &str) -> Option<(u16, u16)> {
    let (a, b) = entry.split_once('-').unwrap_or((entry, entry));
    let (a, b) = (a.parse::<u16>().ok()?, b.parse::<u16>().ok()?);
    (a >= 1 && a <= b).then_some((a, b))
}

/// One `allowed`/`denied` entry of a firewall: `IPProtocol` (a name or a number 0..=255) and
/// `ports`, which only TCP, UDP and SCTP take.
fn check_firewall_rule(at: &str, rule: &Value) -> Result<(), ApiError> {
    let o = object(rule, &format!("resource.{at}"))?;
    known_fields(o, &format!("resource.{at}"), &["IPProtocol", "ports"])?;
    let proto = opt_str(o, "IPProtocol", &format!("resource.{at}.IPProtocol"))?
        .ok_or_else(|| required(&format!("resource.{at}.IPProtocol")))?;
    let named = ["tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"];
    let lower = proto.to_ascii_lowercase();
    if !named.contains(&lower.as_str()) && proto.parse::<u8>().is_err() {
        return Err(invalid(format!(
            "Invalid value for field 'resource.{at}.IPProtocol': '{}'. Must be a protocol name or number.",
            proto.escape_default()
        )));
    }
    let ports = match o.get("ports") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(invalid(format!(
                "Invalid value for field 'resource.{at}.ports': {}. Must be a list.",
                json_kind(other)
            )))
        }
    };
    if !ports.is_empty() && !["tcp", "udp", "sctp", "6", "17", "132"].contains(&lower.as_str()) {
        return Err(invalid(format!(
            "Invalid value for field 'resource.{at}.ports': ports are only allowed for tcp, udp and sctp."
        )));
    }
    for (i, p) in ports.iter().enumerate() {
        let ok = p.as_str().and_then(parse_port_range).is_some();
        if !ok {
            return Err(invalid(format!(
                "Invalid value for field 'resource.{at}.ports[{i}]': {}. Must be a port or a range of ports within 1-65535, low before high.",
                p.as_str().map_or_else(|| json_kind(p).to_owned(), |s| format!("'{}'", s.escape_default()))
            )));
        }
    }
    Ok(())
}

fn check_cidr(field: &str, v: Option<&Value>) -> Result<(), ApiError> {
    let s = v.and_then(Value::as_str).unwrap_or_default();
    let ok = match s.split_once('/') {
        Some((ip, len)) => {
            ip.parse::<std::net::IpAddr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 128)
        }
        None => s.parse::<std::net::IpAddr>().is_ok(),
    };
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "Invalid value for field 'resource.{field}': '{}'. Must be a CIDR address range",
            s.escape_default()
        )))
    }
}

/// `(zone, name)` of an instance reference (`.../zones/z/instances/n`).
pub(crate) fn instance_ref(reference: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = reference.trim_end_matches('/').split('/').collect();
    let i = parts.iter().rposition(|p| *p == "instances")?;
    let (zone, name) = (parts.get(i.checked_sub(1)?)?, parts.get(i + 1)?);
    (i >= 2 && parts[i - 2] == "zones").then(|| (zone.to_string(), name.to_string()))
}

/// Checks that an instance reference names an instance; returns its full link.
fn check_instance(tx: &Tx<'_>, s: &Scope<'_>, reference: &str) -> Result<String, ApiError> {
    let (zone, name) = instance_ref(reference).ok_or_else(|| {
        invalid(format!(
            "Invalid value for field 'instance': '{reference}'."
        ))
    })?;
    instances::find_instance(tx, s.project, &zone, &name)?;
    Ok(s.link(&format!("zones/{zone}/instances/{name}")))
}

/// An external address for an address or forwarding rule: the wanted one (a reserved
/// address of the project, or a free one of the external network) or a new one. External
/// addresses come from the external network's subnet, as floating IPs do, without a port.
fn reserve_address(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    scope: &str,
    wanted: Option<String>,
) -> Result<String, ApiError> {
    if let Some(w) = &wanted {
        let reserved = objects(tx, "addresses").into_iter().any(|a| {
            a.meta.project_id == s.project.id
                && a.scope == scope
                && a.fields["address"] == w.as_str()
        });
        if reserved {
            return Ok(w.clone());
        }
    }
    let external = tx
        .list::<crate::api::network::Network>(crate::api::network::NETWORKS)
        .into_iter()
        .find(|n| n.external)
        .ok_or_else(|| invalid("No external network exists to take an address from"))?;
    let fip = crate::api::network::new_floating_ip(
        tx,
        crate::api::network::FloatingIpSpec {
            network_id: external.meta.id,
            subnet_id: None,
            address: wanted,
            project_id: s.project.id.clone(),
            port_id: None,
            fixed_ip: None,
            description: RESERVED.into(),
        },
    )
    .map_err(|e| ApiError::new(e.status, "invalid", e.message))?;
    Ok(fip.floating_ip_address)
}

/// The description of a floating IP that holds a GCE address or forwarding rule's IP.
pub(crate) const RESERVED: &str = "GCE reserved external address";

/// Releases the floating IP holding `address` if it is one of ours and nothing else uses it.
fn release_address(tx: &mut Tx<'_>, project: &Project, address: &str) {
    let still_used = ["addresses", "forwardingRules"].iter().any(|c| {
        objects(tx, c).iter().any(|o| {
            o.meta.project_id == project.id
                && (o.fields["address"] == address || o.fields["IPAddress"] == address)
        })
    });
    if still_used {
        return;
    }
    let fips = tx.list::<crate::api::network::FloatingIp>(crate::api::network::FLOATING_IPS);
    for f in fips {
        if f.floating_ip_address == address && f.description == RESERVED && f.port_id.is_none() {
            tx.delete(crate::api::network::FLOATING_IPS, &f.meta.id);
        }
    }
}

async fn insert(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Result<Response, ApiError> {
    let b: Map<String, Value> = parse_body(&body)?;
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let (cloud, project) = (s.cloud, s.project);
        let (kind, scope) = locate(cloud, project, &p)?;
        let name = resource_name(&b)?;
        let table = GceObject::table(kind.collection);
        let key = GceObject::key(&scope, &name);
        if tx.get::<GceObject>(&table, &key).is_some() {
            return Err(already_exists(&format!(
                "projects/{}/{scope}/{}/{name}",
                project.name, kind.collection
            )));
        }
        let fields = prepare(tx, s, kind, &scope, b)?;
        let o = GceObject {
            meta: Meta::new(project.id.clone()),
            name,
            scope: scope.clone(),
            fields,
        };
        tx.put(&table, &key, &o)?;
        if kind.collection == "forwardingRules" {
            super::forwarding::sync(tx, cloud, project, &o)?;
        }
        if kind.collection == "firewalls" {
            super::forwarding::sync_all(tx, cloud, project)?;
        }
        Ok(Done {
            target: format!("{scope}/{}/{}", kind.collection, o.name),
            scope,
            op_type: "insert".into(),
            target_id: m::numeric_id(&o.meta.id),
        })
    })
    .await
}

async fn delete(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let (cloud, project) = (s.cloud, s.project);
        let (kind, scope) = locate(cloud, project, &p)?;
        let o = find(tx, project, kind, &scope, param(&p, "name"))?;
        let target = format!("{scope}/{}/{}", kind.collection, o.name);
        let link = s.link(&target);
        // GCE refuses to delete what another resource uses.
        let users: Vec<String> = KINDS
            .iter()
            .flat_map(|k| objects(tx, k.collection).into_iter().map(move |x| (k, x)))
            .filter(|(_, x)| x.meta.project_id == project.id)
            .filter(|(_, x)| {
                x.fields.values().any(|v| {
                    v == link.as_str()
                        || v.as_array()
                            .is_some_and(|a| a.iter().any(|e| e == link.as_str()))
                })
            })
            .map(|(k, x)| {
                format!(
                    "projects/{}/{}/{}/{}",
                    project.name, x.scope, k.collection, x.name
                )
            })
            .collect();
        if let Some(user) = users.first() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "resourceInUseByAnotherResource",
                format!(
                    "The {} resource '{}' is already being used by '{user}'",
                    kind.kind.trim_start_matches("compute#"),
                    link
                ),
            ));
        }
        if kind.collection == "forwardingRules" {
            super::forwarding::remove(tx, project, &o)?;
        }
        tx.delete(
            &GceObject::table(kind.collection),
            &GceObject::key(&scope, &o.name),
        );
        if kind.collection == "firewalls" {
            super::forwarding::sync_all(tx, cloud, project)?;
        }
        for key in ["address", "IPAddress"] {
            if let Some(a) = o.fields.get(key).and_then(Value::as_str) {
                release_address(tx, project, a);
            }
        }
        Ok(Done {
            scope,
            op_type: "delete".into(),
            target,
            target_id: m::numeric_id(&o.meta.id),
        })
    })
    .await
}

/// `targetPools/{name}/addInstance` and `removeInstance`.
async fn action(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Result<Response, ApiError> {
    let b: Value = parse_body(&body)?;
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let (cloud, project) = (s.cloud, s.project);
        let (kind, scope) = locate(cloud, project, &p)?;
        let action = param(&p, "action");
        if kind.collection != "targetPools" || !["addInstance", "removeInstance"].contains(&action)
        {
            return Err(not_found(&format!(
                "projects/{}/{scope}/{}/{}/{action}",
                project.name,
                kind.collection,
                param(&p, "name")
            )));
        }
        let mut o = find(tx, project, kind, &scope, param(&p, "name"))?;
        let mut current: Vec<String> = o
            .fields
            .get("instances")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let asked = b["instances"].as_array().cloned().unwrap_or_default();
        if asked.is_empty() {
            return Err(required("instances"));
        }
        for i in asked {
            let r = i["instance"]
                .as_str()
                .ok_or_else(|| required("instances[].instance"))?;
            let (zone, name) = instance_ref(r)
                .ok_or_else(|| invalid(format!("Invalid value for field 'instance': '{r}'.")))?;
            let link = s.link(&format!("zones/{zone}/instances/{name}"));
            if action == "addInstance" {
                check_instance(tx, s, r)?;
                if !current.contains(&link) {
                    current.push(link);
                }
            } else {
                current.retain(|c| c != &link);
            }
        }
        o.fields.insert("instances".into(), json!(current));
        o.meta.touch();
        tx.put(
            &GceObject::table(kind.collection),
            &GceObject::key(&scope, &o.name),
            &o,
        )?;
        let target = format!("{scope}/{}/{}", kind.collection, o.name);
        super::forwarding::sync_rules_of_pool(tx, cloud, project, &s.link(&target))?;
        Ok(Done {
            scope,
            op_type: action.to_owned(),
            target,
            target_id: m::numeric_id(&o.meta.id),
        })
    })
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn instance_references_parse() {
        assert_eq!(
            instance_ref("https://h/compute/v1/projects/p/zones/z1/instances/n1"),
            Some(("z1".into(), "n1".into()))
        );
        assert_eq!(
            instance_ref("zones/z/instances/n"),
            Some(("z".into(), "n".into()))
        );
        assert_eq!(instance_ref("instances/n"), None);
        assert_eq!(instance_ref("n"), None);
    }

    #[test]
    fn cidrs_are_checked() {
        assert!(check_cidr("destRange", Some(&json!("10.0.0.0/24"))).is_ok());
        assert!(check_cidr("destRange", Some(&json!("10.0.0.0/999"))).is_err());
        assert!(check_cidr("destRange", Some(&json!("x"))).is_err());
        assert!(check_cidr("destRange", None).is_err());
    }
}
