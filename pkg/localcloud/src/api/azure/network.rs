//! Microsoft.Network: virtual networks and their subnets (a Neutron network and its subnets,
//! each subnet attached to the project's router so public IPs reach it, addresses from `.4` as
//! Azure reserves the first four), public IP addresses (Neutron floating IPs of the external
//! network), network interfaces (Neutron ports, one fixed IP per IP configuration, a public IP
//! an association of its floating IP), network security groups and route tables (kept as ARM
//! shows them; what enforces them comes with load balancers). So a NIC made here is a port to
//! Neutron, and a public IP a floating IP. Upstream equivalent: Azure's network resource
//! provider.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde_json::{json, Map, Value};

use super::arm::{
    children_of, int, invalid, list, obj, ref_id, resolve, string, Desired, Kind, Scope,
};
use crate::api::network::{
    add_interface_on_subnet, associate, create_port, delete_port_cascade, in_cidr, new_floating_ip,
    new_network, new_router, new_subnet, parse_cidr, FloatingIp, FloatingIpSpec, Network, Pool,
    Port, PortSpec, Router_, Subnet, FLOATING_IPS, NETWORKS, OWNER_ROUTER_INTERFACE, PORTS,
    ROUTERS, SUBNETS,
};
use crate::api::ApiError;
use crate::model::azure::ArmResource;
use crate::model::Record;
use crate::store::{Read, Tx};

mod lb_traffic;
mod load_balancers;
mod nics;
mod public_ips;
mod route_tables;
mod security_groups;
mod vnets;

use lb_traffic::*;
use load_balancers::*;
use nics::*;
use public_ips::*;
use route_tables::*;
use security_groups::*;
use vnets::*;

/// The description that marks a floating IP as an Azure public IP address.
const PUBLIC_IP: &str = "Azure public IP address";
/// The router that connects virtual networks' subnets to the external network when the
/// project has none with a gateway.
const ROUTER: &str = "azure-virtual-networks";

pub(crate) fn properties(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    match super::arm::kind_of(res) {
        Kind::VirtualNetwork => vnet_view(r, s, res),
        Kind::PublicIp => public_ip_view(r, s, res),
        Kind::SecurityGroup => nsg_view(r, s, res),
        Kind::RouteTable => route_table_view(r, s, res),
        Kind::LoadBalancer => lb_view(r, s, res),
        _ => nic_view(r, s, res),
    }
}

pub(crate) fn apply(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    kind: Kind,
    res: &mut ArmResource,
    existing: Option<&ArmResource>,
    want: &mut Desired,
) -> Result<(), ApiError> {
    match kind {
        Kind::VirtualNetwork => apply_vnet(tx, s, res, want),
        Kind::PublicIp => apply_public_ip(tx, s, res, existing, want),
        Kind::SecurityGroup => apply_nsg(want),
        Kind::RouteTable => apply_route_table(want),
        Kind::LoadBalancer => apply_lb(tx, s, res, existing, want),
        _ => apply_nic(tx, s, res, want),
    }
}

pub(crate) fn remove(tx: &mut Tx<'_>, s: &Scope<'_>, res: &ArmResource) -> Result<(), ApiError> {
    match super::arm::kind_of(res) {
        Kind::VirtualNetwork => remove_vnet(tx, s, res),
        Kind::PublicIp => remove_public_ip(tx, res),
        Kind::SecurityGroup => {
            refuse_if_referenced(tx, s, res, "InUseNetworkSecurityGroupCannotBeDeleted")
        }
        Kind::RouteTable => refuse_if_referenced(tx, s, res, "InUseRouteTableCannotBeDeleted"),
        Kind::LoadBalancer => remove_lb(tx, s, res),
        _ => remove_nic(tx, s, res),
    }
}

/// After a resource of `kind` was stored or deleted: what carries load balancers' traffic
/// follows (their rules, the NICs in their pools, the security groups and subnets of those).
pub(crate) fn after_change(tx: &mut Tx<'_>, s: &Scope<'_>, kind: Kind) -> Result<(), ApiError> {
    match kind {
        Kind::LoadBalancer
        | Kind::NetworkInterface
        | Kind::SecurityGroup
        | Kind::VirtualNetwork
        | Kind::PublicIp => sync_project(tx, s),
        _ => Ok(()),
    }
}

/// The stored properties of `res` as an object.
fn props(res: &ArmResource) -> Map<String, Value> {
    res.properties.as_object().cloned().unwrap_or_default()
}

/// `{"id": ...}`.
fn id_ref(id: String) -> Value {
    json!({"id": id})
}

/// The element view of an inline child.
fn child_view(
    s: &Scope<'_>,
    res: &ArmResource,
    collection: &str,
    ty: &str,
    name: &str,
    properties: Value,
) -> Value {
    json!({
        "id": s.child_id(res, collection, name),
        "name": name,
        "type": format!("{}/{collection}", res.kind).replace(&format!("/{collection}"), &format!("/{ty}")),
        "properties": properties,
    })
}

/// Shows `p[collection]` as ARM shows a resource's inline children: each `{id, name, type,
/// properties}` with `provisioningState`, after `extra` added what the cloud decides to the
/// child's properties (given its name).
fn show_children(
    p: &mut Map<String, Value>,
    s: &Scope<'_>,
    res: &ArmResource,
    collection: &str,
    mut extra: impl FnMut(&str, &mut Map<String, Value>),
) {
    let items: Vec<Value> = p
        .get(collection)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_owned();
            let mut cp = c["properties"].as_object().cloned().unwrap_or_default();
            extra(&name, &mut cp);
            child_view(s, res, collection, collection, &name, with_state(cp))
        })
        .collect();
    p.insert(collection.into(), Value::Array(items));
}

fn with_state(mut p: Map<String, Value>) -> Value {
    p.insert("provisioningState".into(), json!("Succeeded"));
    Value::Object(p)
}

fn external_network(r: &impl Read) -> Result<Network, ApiError> {
    r.list::<Network>(NETWORKS)
        .into_iter()
        .find(|n| n.external)
        .ok_or_else(|| {
            ApiError::internal(
                "The local cloud has no external network to take public addresses from.",
            )
        })
}

/// The ports on a subnet other than its router interface.
fn subnet_users(r: &impl Read, subnet_id: &str) -> Vec<Port> {
    r.list::<Port>(PORTS)
        .into_iter()
        .filter(|p| {
            p.device_owner != OWNER_ROUTER_INTERFACE
                && p.fixed_ips.iter().any(|f| f.subnet_id == subnet_id)
        })
        .collect()
}

/// The vnets' subnets that refer to `id` at `key`.
fn subnets_referring(r: &impl Read, s: &Scope<'_>, key: &str, id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for vnet in ArmResource::list_where(r, "type", Kind::VirtualNetwork.ty()) {
        if vnet.meta.project_id != s.project_id {
            continue;
        }
        for c in vnet.properties["subnets"].as_array().into_iter().flatten() {
            if c["properties"][key]["id"]
                .as_str()
                .is_some_and(|x| x.eq_ignore_ascii_case(id))
            {
                let name = c["name"].as_str().unwrap_or_default();
                out.push(id_ref(s.child_id(&vnet, "subnets", name)));
            }
        }
    }
    out
}

/// The NICs that refer to `id` at `key` (of the NIC, or of one of its IP configurations).
fn nics_referring(r: &impl Read, s: &Scope<'_>, key: &str, id: &str) -> Vec<ArmResource> {
    ArmResource::list_where(r, "type", Kind::NetworkInterface.ty())
        .into_iter()
        .filter(|nic| nic.meta.project_id == s.project_id)
        .filter(|nic| {
            let refers = |v: &Value| {
                v[key]["id"]
                    .as_str()
                    .is_some_and(|x| x.eq_ignore_ascii_case(id))
            };
            refers(&nic.properties)
                || nic.properties["ipConfigurations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| refers(&c["properties"]))
        })
        .collect()
}

fn refuse_if_referenced(
    r: &impl Read,
    s: &Scope<'_>,
    res: &ArmResource,
    code: &'static str,
) -> Result<(), ApiError> {
    let id = s.id(res);
    let key = if super::arm::kind_of(res) == Kind::SecurityGroup {
        "networkSecurityGroup"
    } else {
        "routeTable"
    };
    let mut users: Vec<String> = nics_referring(r, s, key, &id)
        .iter()
        .map(|n| s.id(n))
        .collect();
    users.extend(
        subnets_referring(r, s, key, &id)
            .iter()
            .filter_map(|v| v["id"].as_str().map(str::to_owned)),
    );
    if users.is_empty() {
        Ok(())
    } else {
        Err(invalid(
            code,
            format!(
                "{} {} is in use by {} and cannot be deleted.",
                res.kind,
                res.name,
                users.join(", ")
            ),
        ))
    }
}

/// The ID of the VM whose server is `server_id`.
fn vm_of(r: &impl Read, s: &Scope<'_>, server_id: &str) -> Option<String> {
    vm_of_server(r, server_id).map(|v| s.id(&v))
}

/// The Neutron port of a NIC referenced by `id` (for a VM's network profile).
pub(crate) fn nic_port(
    r: &impl Read,
    s: &Scope<'_>,
    id: &str,
    field: &str,
) -> Result<(ArmResource, Port), ApiError> {
    let nic = resolve(r, s, id, Kind::NetworkInterface, None, field)?.resource;
    let port = nic
        .backing
        .as_ref()
        .and_then(|p| r.get::<Port>(PORTS, p))
        .ok_or_else(|| {
            invalid(
                "InvalidResourceReference",
                format!("Resource {id} referenced by {field} was not found."),
            )
        })?;
    Ok((nic, port))
}

/// The VM whose server is `server_id`.
pub(crate) fn vm_of_server(r: &impl Read, server_id: &str) -> Option<ArmResource> {
    ArmResource::list_where(r, "backing", server_id)
        .into_iter()
        .find(|v| v.kind == Kind::VirtualMachine.ty())
}

/// Whether NIC `nic_id` is the primary one of the VM whose server is `server_id`.
pub(crate) fn is_primary_nic(r: &impl Read, server_id: &str, nic_id: &str) -> bool {
    let Some(vm) = vm_of_server(r, server_id) else {
        return false;
    };
    let nics = vm.properties["networkProfile"]["networkInterfaces"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let primary = nics
        .iter()
        .find(|n| n["properties"]["primary"].as_bool() == Some(true))
        .or_else(|| nics.first());
    primary
        .and_then(|n| n["id"].as_str())
        .is_some_and(|id| id.eq_ignore_ascii_case(nic_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_overlap_and_nest_as_cidrs_do() {
        assert!(overlaps("10.0.0.0/16", "10.0.1.0/24"));
        assert!(!overlaps("10.0.0.0/24", "10.0.1.0/24"));
        assert!(within("10.0.1.0/24", "10.0.0.0/16"));
        assert!(!within("10.1.0.0/24", "10.0.0.0/16"));
        assert!(!within("10.0.0.0/8", "10.0.0.0/16"));
    }

    #[test]
    fn port_ranges_and_dns_labels_are_checked() {
        for ok in ["*", "80", "8000-8100"] {
            assert!(port_range_ok(ok), "{ok}");
        }
        for bad in ["", "x", "90-80", "70000"] {
            assert!(!port_range_ok(bad), "{bad}");
        }
        assert!(dns_label_ok("my-app1"));
        for bad in ["ab", "1app", "App", "app-", "a_b"] {
            assert!(!dns_label_ok(bad), "{bad}");
        }
        assert_eq!(azure_mac("fa:16:3e:0a:bc:01"), "FA-16-3E-0A-BC-01");
    }
}
