//! What every Resource Manager resource type shares, in one place: its types ([`Kind`]),
//! who asks about which group ([`Scope`]), what a PUT asks for ([`Desired`]), the IDs of
//! resources and their children and references between resources by ID ([`resolve`]), the
//! checks of a body's fields, names and locations, and `etag`s. The HTTP side is in
//! [`super::resources`]; each type's own rules in [`super::network`] and [`super::compute`].

use serde_json::{Map, Value};

use super::{guid, location};
use crate::api::{ApiError, Caller, Cloud};
use crate::model::azure::{resource_key, ArmResource};
use crate::model::Record;
use crate::store::Read;

/// A resource type the dialect serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    VirtualNetwork,
    PublicIp,
    SecurityGroup,
    RouteTable,
    NetworkInterface,
    LoadBalancer,
    AvailabilitySet,
    Disk,
    VirtualMachine,
}

impl Kind {
    pub(crate) const ALL: [Kind; 9] = [
        Kind::VirtualNetwork,
        Kind::PublicIp,
        Kind::SecurityGroup,
        Kind::RouteTable,
        Kind::NetworkInterface,
        Kind::LoadBalancer,
        Kind::AvailabilitySet,
        Kind::Disk,
        Kind::VirtualMachine,
    ];

    /// The type as ARM writes it.
    pub(crate) fn ty(self) -> &'static str {
        match self {
            Kind::VirtualNetwork => "Microsoft.Network/virtualNetworks",
            Kind::PublicIp => "Microsoft.Network/publicIPAddresses",
            Kind::SecurityGroup => "Microsoft.Network/networkSecurityGroups",
            Kind::RouteTable => "Microsoft.Network/routeTables",
            Kind::NetworkInterface => "Microsoft.Network/networkInterfaces",
            Kind::LoadBalancer => "Microsoft.Network/loadBalancers",
            Kind::AvailabilitySet => "Microsoft.Compute/availabilitySets",
            Kind::Disk => "Microsoft.Compute/disks",
            Kind::VirtualMachine => "Microsoft.Compute/virtualMachines",
        }
    }

    pub(crate) fn namespace(self) -> &'static str {
        self.ty().split('/').next().unwrap_or_default()
    }

    /// The inline child collections of the type (`virtualNetworks/{v}/subnets/{s}` is
    /// `properties.subnets[]`).
    pub(crate) fn children(self) -> &'static [&'static str] {
        match self {
            Kind::VirtualNetwork => &["subnets"],
            Kind::SecurityGroup => &["securityRules"],
            Kind::RouteTable => &["routes"],
            Kind::LoadBalancer => &[
                "frontendIPConfigurations",
                "backendAddressPools",
                "probes",
                "loadBalancingRules",
            ],
            _ => &[],
        }
    }

    /// Collections of children shown in the body but not changed through it (a security
    /// group's default rules, a NIC's IP configurations).
    pub(crate) fn read_only_children(self) -> &'static [&'static str] {
        match self {
            Kind::SecurityGroup => &["defaultSecurityRules"],
            Kind::NetworkInterface => &["ipConfigurations"],
            _ => &[],
        }
    }

    /// Network resources carry an `etag`; so do VMs and disks in current API versions.
    pub(crate) fn has_etag(self) -> bool {
        !matches!(self, Kind::AvailabilitySet)
    }

    /// Whether the type is Microsoft.Network's (else Microsoft.Compute's).
    pub(crate) fn is_network(self) -> bool {
        self.namespace() == "Microsoft.Network"
    }

    /// Whether changes answer as long-running operations.
    pub(crate) fn long_running(self) -> bool {
        !matches!(self, Kind::AvailabilitySet)
    }

    /// Whether a PUT that creates answers 201 (availability sets and disks answer 200, the
    /// only success Microsoft's SDK takes from their PUT besides a disk's 202).
    pub(crate) fn created_answers_201(self) -> bool {
        !matches!(self, Kind::AvailabilitySet | Kind::Disk)
    }

    pub(crate) fn find(namespace: &str, ty: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.ty().eq_ignore_ascii_case(&format!("{namespace}/{ty}")))
    }
}

/// Who asks, about which group: what the types' functions are given.
pub(crate) struct Scope<'a> {
    pub cloud: &'a Cloud,
    pub project_id: &'a str,
    pub user_id: &'a str,
    /// The subscription in GUID form.
    pub subscription: String,
    pub location: String,
}

impl Scope<'_> {
    /// The ID of a resource (`/subscriptions/.../providers/Microsoft.Network/virtualNetworks/v`).
    pub(crate) fn id_of(&self, group: &str, kind: Kind, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{group}/providers/{}/{name}",
            self.subscription,
            kind.ty()
        )
    }

    /// The ID of `res`.
    pub(crate) fn id(&self, res: &ArmResource) -> String {
        self.id_of(&res.group, kind_of(res), &res.name)
    }

    /// The ID of a child of `res` (`.../virtualNetworks/v/subnets/s`).
    pub(crate) fn child_id(&self, res: &ArmResource, collection: &str, name: &str) -> String {
        format!("{}/{collection}/{name}", self.id(res))
    }
}

/// The kind of a stored resource (stored types are always ones of [`Kind`]).
pub(crate) fn kind_of(res: &ArmResource) -> Kind {
    Kind::ALL
        .into_iter()
        .find(|k| k.ty() == res.kind)
        .unwrap_or(Kind::VirtualNetwork)
}

/// What a PUT (or a PATCH merged into the resource) asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Desired {
    pub location: Option<String>,
    pub tags: Option<std::collections::BTreeMap<String, String>>,
    pub sku: Option<Value>,
    pub zones: Option<Vec<String>>,
    pub properties: Map<String, Value>,
}

/// A reference to a resource by ID: the resource and, for a child, its name.
pub(crate) struct Reference {
    pub resource: ArmResource,
    pub child: Option<String>,
}

/// ARM's 400 for a body it cannot take, with `code`.
pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message).with_kind(code)
}

/// The 404 of a missing resource, in ARM's words.
pub(crate) fn not_found(kind: Kind, group: &str, name: &str) -> ApiError {
    ApiError::not_found(
        "ResourceNotFound",
        format!(
            "The Resource '{}/{name}' under resource group '{group}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
            kind.ty()
        ),
    )
}

/// Resolves a reference (`{"id": "/subscriptions/..."}`) to a resource of `kind` (and, with
/// `collection`, one of its children) of the caller's subscription. `field` names where the
/// reference was, for the error.
pub(crate) fn resolve(
    r: &impl Read,
    s: &Scope<'_>,
    id: &str,
    kind: Kind,
    collection: Option<&str>,
    field: &str,
) -> Result<Reference, ApiError> {
    let bad = || {
        invalid(
            "InvalidResourceReference",
            format!("Resource {id} referenced by {field} was not found."),
        )
    };
    let segs: Vec<&str> = id.trim_matches('/').split('/').collect();
    // subscriptions/S/resourceGroups/G/providers/NS/type/name[/collection/child]
    let want = if collection.is_some() { 10 } else { 8 };
    if segs.len() != want
        || !segs[0].eq_ignore_ascii_case("subscriptions")
        || !segs[2].eq_ignore_ascii_case("resourceGroups")
        || !segs[4].eq_ignore_ascii_case("providers")
        || Kind::find(segs[5], segs[6]) != Some(kind)
        || super::unguid(segs[1]) != s.project_id
    {
        return Err(bad());
    }
    if let Some(c) = collection {
        if !segs[8].eq_ignore_ascii_case(c) {
            return Err(bad());
        }
    }
    let resource = ArmResource::get(r, &resource_key(s.project_id, segs[3], kind.ty(), segs[7]))
        .ok_or_else(bad)?;
    let child = collection.map(|_| segs[9].to_owned());
    if let (Some(c), Some(collection)) = (&child, collection) {
        let named = resource.properties[collection]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| {
                x["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(c))
            });
        if !named {
            return Err(bad());
        }
    }
    Ok(Reference { resource, child })
}

/// The `id` of an optional `{"id": ...}` object at `key` of `o`.
pub(crate) fn ref_id<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    o.get(key).and_then(|v| v["id"].as_str())
}

/// `o[key]` as an object (absent: empty).
pub(crate) fn obj<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(invalid(
            "InvalidRequestFormat",
            format!("Cannot parse the request: {field} must be an object."),
        )),
    }
}

/// `o[key]` as a list (absent: empty).
pub(crate) fn list<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<&'a [Value], ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(invalid(
            "InvalidRequestFormat",
            format!("Cannot parse the request: {field} must be a list."),
        )),
    }
}

/// `o[key]` as a string (absent: `None`).
pub(crate) fn string<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'a str>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(
            "InvalidRequestFormat",
            format!("Cannot parse the request: {field} must be a string."),
        )),
    }
}

/// `o[key]` as an integer in `range` (absent: `None`).
pub(crate) fn int(
    o: &Map<String, Value>,
    key: &str,
    field: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<Option<i64>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .filter(|n| range.contains(n))
            .map(Some)
            .ok_or_else(|| {
                invalid(
                    "InvalidParameter",
                    format!(
                        "The value {v} of {field} is not valid: an integer from {} to {} is expected.",
                        range.start(),
                        range.end()
                    ),
                )
            }),
    }
}

/// The `name` of a child element (`{"name", "properties"}`) at `field`.
pub(crate) fn child_name<'a>(v: &'a Value, field: &str) -> Result<&'a str, ApiError> {
    v["name"]
        .as_str()
        .filter(|n| check_name(n).is_ok())
        .ok_or_else(|| {
            invalid(
                "InvalidRequestFormat",
                format!("Cannot parse the request: {field}.name must be a valid resource name."),
            )
        })
}

/// A child element: its name and its properties.
pub(crate) type Child<'a> = (&'a str, Map<String, Value>);

/// The child elements of `properties[collection]`, checked to be named objects with unique
/// names.
pub(crate) fn children_of<'a>(
    properties: &'a Map<String, Value>,
    collection: &str,
) -> Result<Vec<Child<'a>>, ApiError> {
    let mut out: Vec<Child<'a>> = Vec::new();
    for (i, v) in list(properties, collection, &format!("properties.{collection}"))?
        .iter()
        .enumerate()
    {
        let field = format!("properties.{collection}[{i}]");
        let name = child_name(v, &field)?;
        if out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            return Err(invalid(
                "InvalidRequestFormat",
                format!("Cannot parse the request: {collection} has two elements named '{name}'."),
            ));
        }
        let props = match &v["properties"] {
            Value::Null => Map::new(),
            Value::Object(m) => m.clone(),
            _ => {
                return Err(invalid(
                    "InvalidRequestFormat",
                    format!("Cannot parse the request: {field}.properties must be an object."),
                ))
            }
        };
        out.push((name, props));
    }
    Ok(out)
}

/// ARM's rule for a resource's name: 1 to 80 characters, letters, digits, `_`, `-` and `.`,
/// starting with a letter or digit, not ending in `.` or `-`.
pub(crate) fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = (1..=80).contains(&name.chars().count())
        && name.chars().next().is_some_and(char::is_alphanumeric)
        && !name.ends_with('.')
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "InvalidResourceName",
            format!("Resource name {name} is invalid. The name can be up to 80 characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'."),
        ))
    }
}

/// The SKU of a resource being put: `sku.name` (any case) as `allowed` spells it, `default`
/// when none is asked for; 400 `code` naming `what` otherwise. One that exists keeps its SKU
/// (400 `fixed_code` when `fixed_code` is given and another is asked for).
pub(crate) fn sku_of(
    want: &Desired,
    existing: Option<&ArmResource>,
    what: &str,
    allowed: &[&'static str],
    default: &'static str,
    (code, fixed_code): (&'static str, Option<&'static str>),
) -> Result<&'static str, ApiError> {
    let asked = want
        .sku
        .as_ref()
        .and_then(|v| v["name"].as_str())
        .unwrap_or(default);
    let sku = allowed
        .iter()
        .find(|x| x.eq_ignore_ascii_case(asked))
        .copied()
        .ok_or_else(|| {
            invalid(
                code,
                format!(
                    "The {what} SKU '{asked}' is not one of {}.",
                    allowed.join(", ")
                ),
            )
        })?;
    if let (Some(fixed), Some(old)) = (
        fixed_code,
        existing
            .and_then(|e| e.sku.as_ref())
            .and_then(|v| v["name"].as_str()),
    ) {
        if !old.eq_ignore_ascii_case(sku) {
            return Err(invalid(
                fixed,
                format!("The SKU of a {what} cannot be changed from {old} to {sku}."),
            ));
        }
    }
    Ok(sku)
}

/// A fresh `etag`.
pub(crate) fn new_etag() -> String {
    format!("W/\"{}\"", crate::api::new_id())
}

pub(crate) fn scope<'a>(cloud: &'a Cloud, caller: &'a Caller) -> Scope<'a> {
    Scope {
        cloud,
        project_id: &caller.project_id,
        user_id: &caller.user_id,
        subscription: guid(&caller.project_id),
        location: location(cloud),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_arm_rules() {
        assert!(check_name("vnet-1.a_b").is_ok());
        for bad in ["", "-a", "a.", "a-", "a/b", "a b", &"x".repeat(81)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
