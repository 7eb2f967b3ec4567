//! What the GCE collections without an OpenStack counterpart share (routes, firewalls, HTTP
//! health checks, health checks: global; addresses, target pools, forwarding rules, backend
//! services: regional; instance groups: zonal): each is a [`Collection`] (where it lives, the
//! fields its insert takes with their types, its defaults and its own checks), and list, get,
//! insert, update and delete are written once here over it.

use std::collections::BTreeSet;

use super::body::{json_kind, resource_name};
use super::instances::find_instance;
use super::networks::find_network;
use super::operations::{change, object_view, Done};
use super::*;
use crate::api::network::{new_floating_ip, FloatingIp, FloatingIpSpec, Network};
use crate::api::network::{FLOATING_IPS, NETWORKS};
use crate::model::gce::address::{Address, AddressSpec};
use crate::model::gce::backend_service::BackendServiceSpec;
use crate::model::gce::firewall::FirewallSpec;
use crate::model::gce::forwarding_rule::{ForwardingRule, ForwardingRuleSpec};
use crate::model::gce::health_check::HealthCheckSpec;
use crate::model::gce::http_health_check::HttpHealthCheckSpec;
use crate::model::gce::instance_group::InstanceGroupSpec;
use crate::model::gce::route::RouteSpec;
use crate::model::gce::target_pool::TargetPoolSpec;
use crate::model::gce::{instance_ref, Object, Spec};
use crate::model::Record;

/// Where a collection lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Where {
    Global,
    Regional,
    Zonal,
}

/// The type GCE's schema gives a field; an insert whose field has another type is a 400.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Ty {
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

/// Fields of an insert and their types.
pub(super) type Fields = &'static [(&'static str, Ty)];

/// Most strings a list field takes (GCE's limits are in the hundreds; none of ours needs more).
pub(super) const MANY: usize = 256;
/// A firewall or route priority.
pub(super) const PRIORITY: Ty = Ty::Int(0, 65_535);

/// One collection of typed GCE resources, as its insert and delete treat it.
pub(super) trait Collection: Spec {
    const PLACE: Where;
    /// Fields an insert must have (none unless said).
    const REQUIRED: Fields = &[];
    /// Fields an insert may have (besides `name`, `description`, `kind`).
    const OPTIONAL: Fields;
    /// Whether GCE updates it in place (`PUT` replaces, `PATCH` merges); the others answer 405.
    const UPDATABLE: bool = false;
    /// Defaults GCE fills in.
    fn defaults() -> Value;
    /// The collection's own checks and completions of an insert's fields, after the shared
    /// ones (types, required fields, defaults, links, the network).
    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError>;
    /// After an insert is stored (what the data plane follows).
    fn inserted(_tx: &mut Tx<'_>, _s: &Scope<'_>, _o: &Object<Self>) -> Result<(), ApiError> {
        Ok(())
    }
    /// After an update is stored.
    fn updated(_tx: &mut Tx<'_>, _s: &Scope<'_>, _o: &Object<Self>) -> Result<(), ApiError> {
        Ok(())
    }
    /// Before a delete.
    fn deleting(_tx: &mut Tx<'_>, _s: &Scope<'_>, _o: &Object<Self>) -> Result<(), ApiError> {
        Ok(())
    }
    /// After a delete.
    fn deleted(_tx: &mut Tx<'_>, _s: &Scope<'_>, _o: &Object<Self>) -> Result<(), ApiError> {
        Ok(())
    }
}

/// An insert being prepared: its transaction, where it goes and its fields.
pub(super) struct Insert<'a, 'tx> {
    pub tx: &'a mut Tx<'tx>,
    pub s: &'a Scope<'a>,
    /// `global` or `regions/r`.
    pub scope: &'a str,
    /// The fields the body had (before defaults).
    pub given: &'a BTreeSet<String>,
    /// The fields, checked and completed so far.
    pub fields: &'a mut Map<String, Value>,
}

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

/// The collections, as a path names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    Routes,
    Firewalls,
    HttpHealthChecks,
    Addresses,
    TargetPools,
    ForwardingRules,
    HealthChecks,
    BackendServices,
    InstanceGroups,
}

/// The collection a path names (`{collection}`, under `global` or `regions/{region}`): none
/// when there is none of that name living there.
pub(super) fn which(p: &BTreeMap<String, String>) -> Option<Which> {
    let place = if p.contains_key("region") {
        Where::Regional
    } else if p.contains_key("zone") {
        Where::Zonal
    } else {
        Where::Global
    };
    [
        (RouteSpec::COLLECTION, RouteSpec::PLACE, Which::Routes),
        (
            FirewallSpec::COLLECTION,
            FirewallSpec::PLACE,
            Which::Firewalls,
        ),
        (
            HttpHealthCheckSpec::COLLECTION,
            HttpHealthCheckSpec::PLACE,
            Which::HttpHealthChecks,
        ),
        (
            AddressSpec::COLLECTION,
            AddressSpec::PLACE,
            Which::Addresses,
        ),
        (
            TargetPoolSpec::COLLECTION,
            TargetPoolSpec::PLACE,
            Which::TargetPools,
        ),
        (
            ForwardingRuleSpec::COLLECTION,
            ForwardingRuleSpec::PLACE,
            Which::ForwardingRules,
        ),
        (
            HealthCheckSpec::COLLECTION,
            HealthCheckSpec::PLACE,
            Which::HealthChecks,
        ),
        (
            BackendServiceSpec::COLLECTION,
            BackendServiceSpec::PLACE,
            Which::BackendServices,
        ),
        (
            InstanceGroupSpec::COLLECTION,
            InstanceGroupSpec::PLACE,
            Which::InstanceGroups,
        ),
    ]
    .into_iter()
    .find(|(c, w, _)| *c == param(p, "collection") && *w == place)
    .map(|(_, _, which)| which)
}

/// The scope (`global`, `regions/r`, `zones/z`) of a path, its region or zone checked.
pub(super) fn scope_of(
    r: &impl Read,
    cloud: &Cloud,
    project: &Project,
    p: &BTreeMap<String, String>,
) -> Result<String, ApiError> {
    if let Some(zone) = p.get("zone") {
        check_zone(r, project, zone)?;
        return Ok(format!("zones/{zone}"));
    }
    match p.get("region") {
        Some(region) => {
            check_region(cloud, project, region)?;
            Ok(format!("regions/{region}"))
        }
        None => Ok("global".to_owned()),
    }
}

/// The resource of the project called `name` in `scope`.
pub(super) fn find<S: Spec>(
    r: &impl Read,
    project: &Project,
    scope: &str,
    name: &str,
) -> Result<Object<S>, ApiError> {
    Object::<S>::get_in(r, &project.id, scope, name)
        .ok_or_else(|| project.not_found(&format!("{scope}/{}/{name}", S::COLLECTION)))
}

pub(super) fn list<S: Collection>(
    cloud: &Cloud,
    p: &BTreeMap<String, String>,
    params: &Params,
) -> Result<Response, ApiError> {
    read(cloud, p, |r, s| {
        let scope = scope_of(r, cloud, s.project, p)?;
        let items = Object::<S>::list_in(r, &s.project.id)
            .iter()
            .filter(|o| o.scope == scope)
            .map(|o| object_view(s, o))
            .collect();
        s.list_reply(
            &format!("{}List", S::KIND),
            &format!("{scope}/{}", S::COLLECTION),
            items,
            params,
        )
    })
}

pub(super) fn get_one<S: Collection>(
    cloud: &Cloud,
    p: &BTreeMap<String, String>,
) -> Result<Response, ApiError> {
    read(cloud, p, |r, s| {
        let scope = scope_of(r, cloud, s.project, p)?;
        let o = find::<S>(r, s.project, &scope, param(p, "name"))?;
        ok(object_view(s, &o))
    })
}

/// A path whose collection is none of ours (or not where it lives): the project and region
/// are checked first, as for the others.
pub(super) async fn unknown(
    cloud: &Arc<Cloud>,
    p: BTreeMap<String, String>,
) -> Result<Response, ApiError> {
    let cloud2 = cloud.clone();
    cloud
        .write(move |tx| {
            let project = Project::find(tx, param(&p, "project"))?;
            let scope = scope_of(tx, &cloud2, &project, &p)?;
            Err(project.not_found(&format!("{scope}/{}", param(&p, "collection"))))
        })
        .await
}

/// Turns a reference into the full URL GCE shows (`global/networks/x` → `.../global/networks/x`).
pub(super) fn full_link(s: &Scope<'_>, reference: &str) -> String {
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

/// Checks and completes an insert's fields for `S`.
fn prepare<S: Collection>(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    scope: &str,
    mut fields: Map<String, Value>,
) -> Result<Map<String, Value>, ApiError> {
    // `null` is an absent field, as in GCE's JSON.
    fields.retain(|_, v| !v.is_null());
    for (key, v) in &fields {
        let ty = match key.as_str() {
            "name" | "description" | "kind" => Some(Ty::Str),
            k => S::REQUIRED
                .iter()
                .chain(S::OPTIONAL)
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
    let given: BTreeSet<String> = fields.keys().cloned().collect();
    for (key, _) in S::REQUIRED {
        if !fields.contains_key(*key) {
            return Err(required(&format!("resource.{key}")));
        }
    }
    fields.remove("name");
    fields.remove("kind");
    if let Value::Object(defaults) = S::defaults() {
        for (k, v) in defaults {
            fields.entry(k).or_insert(v);
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
    S::prepare(Insert {
        tx,
        s,
        scope,
        given: &given,
        fields: &mut fields,
    })?;
    Ok(fields)
}

/// The strings of the list field `key` (types already checked).
pub(super) fn string_list(fields: &Map<String, Value>, key: &str) -> Vec<String> {
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
pub(super) fn one_of(
    fields: &Map<String, Value>,
    key: &str,
    allowed: &[&str],
) -> Result<(), ApiError> {
    match fields.get(key).and_then(Value::as_str) {
        Some(v) if !allowed.contains(&v) => Err(invalid(format!(
            "Invalid value for field 'resource.{key}': '{}'. Must be one of {allowed:?}.",
            v.escape_default()
        ))),
        _ => Ok(()),
    }
}

pub(super) fn check_cidr(field: &str, v: Option<&Value>) -> Result<(), ApiError> {
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

/// Checks that an instance reference names an instance; returns its full link.
pub(super) fn check_instance(
    tx: &Tx<'_>,
    s: &Scope<'_>,
    reference: &str,
) -> Result<String, ApiError> {
    let (zone, name) = instance_ref(reference).ok_or_else(|| {
        invalid(format!(
            "Invalid value for field 'instance': '{reference}'."
        ))
    })?;
    find_instance(tx, s.project, &zone, &name)?;
    Ok(s.link(&format!("zones/{zone}/instances/{name}")))
}

/// The description of a floating IP that holds a GCE address or forwarding rule's IP.
pub(crate) const RESERVED: &str = "GCE reserved external address";

/// An external address for an address or forwarding rule: the wanted one (a reserved
/// address of the project, or a free one of the external network) or a new one. External
/// addresses come from the external network's subnet, as floating IPs do, without a port.
pub(super) fn reserve_address(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    scope: &str,
    wanted: Option<String>,
) -> Result<String, ApiError> {
    if let Some(w) = &wanted {
        let reserved = Address::list_in(tx, &s.project.id)
            .iter()
            .any(|a| a.scope == scope && a.spec.address == *w);
        if reserved {
            return Ok(w.clone());
        }
    }
    let external = tx
        .list::<Network>(NETWORKS)
        .into_iter()
        .find(|n| n.external)
        .ok_or_else(|| invalid("No external network exists to take an address from"))?;
    let fip = new_floating_ip(
        tx,
        FloatingIpSpec {
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

/// Releases the floating IP holding `address` if it is one of ours and nothing else uses it.
fn release_address(tx: &mut Tx<'_>, project: &Project, address: &str) {
    let still_used = Address::list_in(tx, &project.id)
        .iter()
        .any(|a| a.spec.address == address)
        || ForwardingRule::list_in(tx, &project.id)
            .iter()
            .any(|r| r.spec.ip_address == address);
    if still_used {
        return;
    }
    for f in tx.list::<FloatingIp>(FLOATING_IPS) {
        if f.floating_ip_address == address && f.description == RESERVED && f.port_id.is_none() {
            tx.delete(FLOATING_IPS, &f.meta.id);
        }
    }
}

pub(super) async fn insert<S: Collection>(
    cloud: &Arc<Cloud>,
    p: BTreeMap<String, String>,
    b: Map<String, Value>,
) -> Result<Response, ApiError> {
    change(cloud, param(&p, "project").to_owned(), move |tx, s| {
        let scope = scope_of(tx, s.cloud, s.project, &p)?;
        let name = resource_name(&b)?;
        if Object::<S>::get_at(tx, &scope, &name).is_some() {
            return Err(already_exists(
                &s.project.path(&format!("{scope}/{}/{name}", S::COLLECTION)),
            ));
        }
        let fields = prepare::<S>(tx, s, &scope, b)?;
        let spec: S = serde_json::from_value(Value::Object(fields))
            .map_err(|e| ApiError::internal(format!("a checked {} did not read: {e}", S::KIND)))?;
        let o = Object::new(s.project.id.clone(), name, scope.clone(), spec);
        o.put(tx)?;
        S::inserted(tx, s, &o)?;
        let id = m::numeric_id(&o.meta.id);
        Ok(Done::of(scope, "insert", S::COLLECTION, &o.name, id))
    })
    .await
}

/// `PUT` (the body replaces the fields) or `PATCH` (the body's fields replace those) of a
/// resource GCE updates in place; its `fingerprint`, when quoted, must be the current one.
pub(super) async fn update<S: Collection>(
    cloud: &Arc<Cloud>,
    p: BTreeMap<String, String>,
    mut b: Map<String, Value>,
    merge: bool,
) -> Result<Response, ApiError> {
    change(cloud, param(&p, "project").to_owned(), move |tx, s| {
        let scope = scope_of(tx, s.cloud, s.project, &p)?;
        let name = param(&p, "name");
        if !S::UPDATABLE {
            // Still a 404 for what does not exist, as GCE checks the resource first.
            find::<S>(tx, s.project, &scope, name)?;
            return Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "httpMethodNotAllowed",
                format!("The local cloud does not update {} in place", S::COLLECTION),
            ));
        }
        let mut o = find::<S>(tx, s.project, &scope, name)?;
        let mut shown = o.fields();
        S::shown(&mut shown);
        // A resource GCE fingerprints takes its fingerprint back; elsewhere it is an unknown
        // field (prepare says so).
        if let Some(current) = shown.get("fingerprint").and_then(Value::as_str) {
            if let Some(print) = b.remove("fingerprint") {
                if print.as_str() != Some(current) {
                    return Err(stale_fingerprint(S::KIND.trim_start_matches("compute#")));
                }
            }
        }
        if let Some(given) = b.get("name").and_then(Value::as_str) {
            if given != o.name {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.name': '{}'. The name cannot change.",
                    given.escape_default()
                )));
            }
        }
        for key in [
            "id",
            "selfLink",
            "creationTimestamp",
            "region",
            "zone",
            "size",
        ] {
            b.remove(key);
        }
        let fields = if merge {
            let mut fields = o.fields();
            fields.extend(b);
            fields
        } else {
            b
        };
        let fields = prepare::<S>(tx, s, &scope, fields)?;
        o.spec = serde_json::from_value(Value::Object(fields))
            .map_err(|e| ApiError::internal(format!("a checked {} did not read: {e}", S::KIND)))?;
        o.meta.touch();
        o.put(tx)?;
        S::updated(tx, s, &o)?;
        let id = m::numeric_id(&o.meta.id);
        let op = if merge { "patch" } else { "update" };
        Ok(Done::of(scope, op, S::COLLECTION, &o.name, id))
    })
    .await
}

/// Who of the project holds `link` in a field, at any depth (a backend's `group`) (the first:
/// GCE names one).
fn users_of(r: &impl Read, project: &Project, link: &str) -> Option<String> {
    fn holds(v: &Value, link: &str) -> bool {
        match v {
            Value::String(s) => s == link,
            Value::Array(a) => a.iter().any(|e| holds(e, link)),
            Value::Object(o) => o.values().any(|e| holds(e, link)),
            _ => false,
        }
    }
    fn holding<S: Spec>(r: &impl Read, project: &Project, link: &str) -> Option<String> {
        Object::<S>::list_in(r, &project.id)
            .into_iter()
            .find(|x| x.fields().values().any(|v| holds(v, link)))
            .map(|x| project.path(&format!("{}/{}/{}", x.scope, S::COLLECTION, x.name)))
    }
    holding::<RouteSpec>(r, project, link)
        .or_else(|| holding::<FirewallSpec>(r, project, link))
        .or_else(|| holding::<HttpHealthCheckSpec>(r, project, link))
        .or_else(|| holding::<AddressSpec>(r, project, link))
        .or_else(|| holding::<TargetPoolSpec>(r, project, link))
        .or_else(|| holding::<ForwardingRuleSpec>(r, project, link))
        .or_else(|| holding::<HealthCheckSpec>(r, project, link))
        .or_else(|| holding::<BackendServiceSpec>(r, project, link))
        .or_else(|| holding::<InstanceGroupSpec>(r, project, link))
}

pub(super) async fn delete<S: Collection>(
    cloud: &Arc<Cloud>,
    p: BTreeMap<String, String>,
) -> Result<Response, ApiError> {
    change(cloud, param(&p, "project").to_owned(), move |tx, s| {
        let project = s.project;
        let scope = scope_of(tx, s.cloud, project, &p)?;
        let o = find::<S>(tx, project, &scope, param(&p, "name"))?;
        let target = format!("{scope}/{}/{}", S::COLLECTION, o.name);
        let link = s.link(&target);
        // GCE refuses to delete what another resource uses.
        if let Some(user) = users_of(tx, project, &link) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "resourceInUseByAnotherResource",
                format!(
                    "The {} resource '{}' is already being used by '{user}'",
                    S::KIND.trim_start_matches("compute#"),
                    link
                ),
            ));
        }
        S::deleting(tx, s, &o)?;
        o.remove(tx);
        S::deleted(tx, s, &o)?;
        let fields = o.fields();
        for key in ["address", "IPAddress"] {
            if let Some(a) = fields.get(key).and_then(Value::as_str) {
                release_address(tx, project, a);
            }
        }
        let id = m::numeric_id(&o.meta.id);
        Ok(Done::of(scope, "delete", S::COLLECTION, &o.name, id))
    })
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn path(q: &[(&str, &str)]) -> BTreeMap<String, String> {
        q.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn paths_name_a_collection_where_it_lives() {
        let global = |c| which(&path(&[("project", "p"), ("collection", c)]));
        let regional = |c| which(&path(&[("region", "r"), ("collection", c)]));
        assert_eq!(global("routes"), Some(Which::Routes));
        assert_eq!(global("firewalls"), Some(Which::Firewalls));
        assert_eq!(global("httpHealthChecks"), Some(Which::HttpHealthChecks));
        assert_eq!(regional("addresses"), Some(Which::Addresses));
        assert_eq!(regional("targetPools"), Some(Which::TargetPools));
        assert_eq!(regional("forwardingRules"), Some(Which::ForwardingRules));
        assert_eq!(global("addresses"), None);
        assert_eq!(regional("routes"), None);
        assert_eq!(global("backendServices"), None);
        assert_eq!(regional("backendServices"), Some(Which::BackendServices));
        assert_eq!(global("healthChecks"), Some(Which::HealthChecks));
        let zonal = |c| which(&path(&[("zone", "z"), ("collection", c)]));
        assert_eq!(zonal("instanceGroups"), Some(Which::InstanceGroups));
        assert_eq!(regional("instanceGroups"), None);
    }

    #[test]
    fn cidrs_are_checked() {
        assert!(check_cidr("destRange", Some(&json!("10.0.0.0/24"))).is_ok());
        assert!(check_cidr("destRange", Some(&json!("10.0.0.0/999"))).is_err());
        assert!(check_cidr("destRange", Some(&json!("x"))).is_err());
        assert!(check_cidr("destRange", None).is_err());
    }
}
