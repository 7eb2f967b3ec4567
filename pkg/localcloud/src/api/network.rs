//! Network v2.0 (Neutron): networks, subnets, ports with fixed IPs allocated from the subnet,
//! routers with interfaces, gateways and extra routes (`routes` on update and the atomic
//! `add_extraroutes`/`remove_extraroutes`), and floating IPs. Addresses are bookkeeping only:
//! nothing is configured on the host and no traffic is sent to them.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::Router;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{
    iso, matches_filters, new_id, now, paginate, parse_body, reply, require_token, select_fields,
    service_layers, ApiError, Cloud, Ctx, Params, Service,
};
use crate::store::{Read, Tx};

pub(crate) const NETWORKS: &str = "networks";
pub(crate) const SUBNETS: &str = "subnets";
pub(crate) const PORTS: &str = "ports";
pub(crate) const ROUTERS: &str = "routers";
pub(crate) const FLOATING_IPS: &str = "floatingips";

pub(crate) const OWNER_ROUTER_INTERFACE: &str = "network:router_interface";
pub(crate) const OWNER_ROUTER_GATEWAY: &str = "network:router_gateway";

/// A Neutron resource kind: how it is stored, named and shown.
pub(crate) trait Resource: Serialize + DeserializeOwned {
    const KIND: &'static str;
    const SINGULAR: &'static str;
    const NOT_FOUND: &'static str;
    const TITLE: &'static str;
    fn view(&self, r: &impl Read) -> Value;
}

fn not_found<R: Resource>(id: &str) -> ApiError {
    ApiError::not_found(
        R::NOT_FOUND,
        format!("{} {id} could not be found.", R::TITLE),
    )
}

pub(crate) fn find<R: Resource>(r: &impl Read, id: &str) -> Result<R, ApiError> {
    r.get::<R>(R::KIND, id).ok_or_else(|| not_found::<R>(id))
}

fn stamp(project_id: &str, created_at: &str, updated_at: &str, revision: u64) -> Value {
    json!({
        "tenant_id": project_id, "project_id": project_id, "created_at": created_at,
        "updated_at": updated_at, "revision_number": revision, "tags": [],
    })
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Network {
    pub id: String,
    pub name: String,
    pub project_id: String,
    pub admin_state_up: bool,
    pub shared: bool,
    pub external: bool,
    pub mtu: u32,
    pub description: String,
    pub created_at: String,
    pub updated_at: String,
    pub revision_number: u64,
}

impl Resource for Network {
    const KIND: &'static str = NETWORKS;
    const SINGULAR: &'static str = "network";
    const NOT_FOUND: &'static str = "NetworkNotFound";
    const TITLE: &'static str = "Network";
    fn view(&self, r: &impl Read) -> Value {
        let mut subnets: Vec<String> = r
            .list::<Subnet>(SUBNETS)
            .into_iter()
            .filter(|s| s.network_id == self.id)
            .map(|s| s.id)
            .collect();
        subnets.sort();
        merge(
            json!({
                "id": self.id, "name": self.name, "status": "ACTIVE", "admin_state_up": self.admin_state_up,
                "shared": self.shared, "router:external": self.external, "mtu": self.mtu,
                "description": self.description, "subnets": subnets, "availability_zones": ["nova"],
                "availability_zone_hints": [], "port_security_enabled": true, "is_default": false,
                "ipv4_address_scope": null, "ipv6_address_scope": null, "l2_adjacency": true,
            }),
            stamp(
                &self.project_id,
                &self.created_at,
                &self.updated_at,
                self.revision_number,
            ),
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Pool {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct HostRoute {
    pub destination: String,
    pub nexthop: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Subnet {
    pub id: String,
    pub name: String,
    pub network_id: String,
    pub project_id: String,
    pub cidr: String,
    pub gateway_ip: Option<String>,
    pub allocation_pools: Vec<Pool>,
    pub enable_dhcp: bool,
    pub dns_nameservers: Vec<String>,
    pub host_routes: Vec<HostRoute>,
    pub description: String,
    pub created_at: String,
    pub updated_at: String,
    pub revision_number: u64,
}

impl Resource for Subnet {
    const KIND: &'static str = SUBNETS;
    const SINGULAR: &'static str = "subnet";
    const NOT_FOUND: &'static str = "SubnetNotFound";
    const TITLE: &'static str = "Subnet";
    fn view(&self, _: &impl Read) -> Value {
        merge(
            json!({
                "id": self.id, "name": self.name, "network_id": self.network_id, "cidr": self.cidr,
                "ip_version": 4, "gateway_ip": self.gateway_ip, "allocation_pools": self.allocation_pools,
                "enable_dhcp": self.enable_dhcp, "dns_nameservers": self.dns_nameservers,
                "host_routes": self.host_routes, "description": self.description,
                "ipv6_ra_mode": null, "ipv6_address_mode": null, "subnetpool_id": null,
                "service_types": [], "segment_id": null, "dns_publish_fixed_ip": false,
            }),
            stamp(
                &self.project_id,
                &self.created_at,
                &self.updated_at,
                self.revision_number,
            ),
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct FixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Port {
    pub id: String,
    pub name: String,
    pub network_id: String,
    pub project_id: String,
    pub mac_address: String,
    pub fixed_ips: Vec<FixedIp>,
    pub device_id: String,
    pub device_owner: String,
    pub admin_state_up: bool,
    pub description: String,
    pub allowed_address_pairs: Vec<Value>,
    pub security_groups: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
    pub revision_number: u64,
}

impl Resource for Port {
    const KIND: &'static str = PORTS;
    const SINGULAR: &'static str = "port";
    const NOT_FOUND: &'static str = "PortNotFound";
    const TITLE: &'static str = "Port";
    fn view(&self, _: &impl Read) -> Value {
        let status = if self.device_id.is_empty() {
            "DOWN"
        } else {
            "ACTIVE"
        };
        merge(
            json!({
                "id": self.id, "name": self.name, "network_id": self.network_id,
                "mac_address": self.mac_address, "fixed_ips": self.fixed_ips, "device_id": self.device_id,
                "device_owner": self.device_owner, "admin_state_up": self.admin_state_up,
                "status": status, "description": self.description,
                "allowed_address_pairs": self.allowed_address_pairs, "security_groups": self.security_groups,
                "binding:vnic_type": "normal", "binding:host_id": "", "binding:vif_type": "unbound",
                "binding:vif_details": {}, "binding:profile": {}, "port_security_enabled": true,
                "extra_dhcp_opts": [], "dns_name": "", "dns_assignment": [],
            }),
            stamp(
                &self.project_id,
                &self.created_at,
                &self.updated_at,
                self.revision_number,
            ),
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Router_ {
    pub id: String,
    pub name: String,
    pub project_id: String,
    pub admin_state_up: bool,
    /// The external network of the gateway, when set.
    pub gateway_network_id: Option<String>,
    pub routes: Vec<HostRoute>,
    pub description: String,
    pub created_at: String,
    pub updated_at: String,
    pub revision_number: u64,
}

impl Resource for Router_ {
    const KIND: &'static str = ROUTERS;
    const SINGULAR: &'static str = "router";
    const NOT_FOUND: &'static str = "RouterNotFound";
    const TITLE: &'static str = "Router";
    fn view(&self, r: &impl Read) -> Value {
        let gateway = self.gateway_network_id.as_ref().map(|net| {
            let ips: Vec<FixedIp> = r
                .list::<Port>(PORTS)
                .into_iter()
                .filter(|p| p.device_id == self.id && p.device_owner == OWNER_ROUTER_GATEWAY)
                .flat_map(|p| p.fixed_ips)
                .collect();
            json!({"network_id": net, "enable_snat": true, "external_fixed_ips": ips})
        });
        merge(
            json!({
                "id": self.id, "name": self.name, "status": "ACTIVE", "admin_state_up": self.admin_state_up,
                "external_gateway_info": gateway, "routes": self.routes, "description": self.description,
                "distributed": false, "ha": false, "availability_zones": ["nova"],
                "availability_zone_hints": [], "flavor_id": null,
            }),
            stamp(
                &self.project_id,
                &self.created_at,
                &self.updated_at,
                self.revision_number,
            ),
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FloatingIp {
    pub id: String,
    pub floating_ip_address: String,
    pub floating_network_id: String,
    pub port_id: Option<String>,
    pub fixed_ip_address: Option<String>,
    pub router_id: Option<String>,
    pub project_id: String,
    pub description: String,
    pub created_at: String,
    pub updated_at: String,
    pub revision_number: u64,
}

impl Resource for FloatingIp {
    const KIND: &'static str = FLOATING_IPS;
    const SINGULAR: &'static str = "floatingip";
    const NOT_FOUND: &'static str = "FloatingIPNotFound";
    const TITLE: &'static str = "Floating IP";
    fn view(&self, _: &impl Read) -> Value {
        let status = if self.port_id.is_some() {
            "ACTIVE"
        } else {
            "DOWN"
        };
        merge(
            json!({
                "id": self.id, "floating_ip_address": self.floating_ip_address,
                "floating_network_id": self.floating_network_id, "port_id": self.port_id,
                "fixed_ip_address": self.fixed_ip_address, "router_id": self.router_id,
                "status": status, "description": self.description, "port_details": null,
                "dns_name": "", "dns_domain": "", "qos_policy_id": null, "port_forwardings": [],
            }),
            stamp(
                &self.project_id,
                &self.created_at,
                &self.updated_at,
                self.revision_number,
            ),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Addresses

/// `10.0.0.0/24` → (network address, prefix length).
pub(crate) fn parse_cidr(cidr: &str) -> Option<(Ipv4Addr, u32)> {
    let (addr, len) = cidr.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    if len > 32 {
        return None;
    }
    Some((Ipv4Addr::from(u32::from(addr) & mask(len)), len))
}

fn mask(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

pub(crate) fn in_cidr(ip: Ipv4Addr, cidr: &str) -> bool {
    parse_cidr(cidr).is_some_and(|(net, len)| u32::from(ip) & mask(len) == u32::from(net))
}

fn parse_ip(s: &str) -> Result<Ipv4Addr, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("'{s}' is not a valid IPv4 address")))
}

/// Addresses already taken in `subnet`: ports, floating IPs and (unless `gateway_free`) the
/// gateway.
fn used_ips(r: &impl Read, subnet: &Subnet, gateway_free: bool) -> HashSet<Ipv4Addr> {
    let mut used: HashSet<Ipv4Addr> = r
        .list::<Port>(PORTS)
        .into_iter()
        .flat_map(|p| p.fixed_ips)
        .filter(|f| f.subnet_id == subnet.id)
        .filter_map(|f| f.ip_address.parse().ok())
        .collect();
    used.extend(
        r.list::<FloatingIp>(FLOATING_IPS)
            .into_iter()
            .filter_map(|f| f.floating_ip_address.parse::<Ipv4Addr>().ok())
            .filter(|ip| in_cidr(*ip, &subnet.cidr)),
    );
    if !gateway_free {
        if let Some(gw) = subnet.gateway_ip.as_deref().and_then(|g| g.parse().ok()) {
            used.insert(gw);
        }
    }
    used
}

/// Picks `wanted` (checking it) or the lowest free address of the subnet's pools. Only a
/// router interface (`for_router`) may take the gateway address.
fn allocate_ip(
    r: &impl Read,
    subnet: &Subnet,
    wanted: Option<&str>,
    for_router: bool,
) -> Result<String, ApiError> {
    let used = used_ips(r, subnet, for_router);
    if let Some(wanted) = wanted {
        let ip = parse_ip(wanted)?;
        if !in_cidr(ip, &subnet.cidr) {
            return Err(ApiError::bad_request(format!(
                "IP address {ip} is not a valid IP for the specified subnet."
            ))
            .with_kind("InvalidIpForSubnet"));
        }
        if used.contains(&ip) {
            return Err(ApiError::conflict(
                "IpAddressAlreadyAllocated",
                format!("IP address {ip} already allocated in subnet {}", subnet.id),
            ));
        }
        return Ok(ip.to_string());
    }
    for pool in &subnet.allocation_pools {
        let (Ok(start), Ok(end)) = (pool.start.parse::<Ipv4Addr>(), pool.end.parse::<Ipv4Addr>())
        else {
            continue;
        };
        for n in u32::from(start)..=u32::from(end) {
            let ip = Ipv4Addr::from(n);
            if !used.contains(&ip) {
                return Ok(ip.to_string());
            }
        }
    }
    Err(ApiError::conflict(
        "IpAddressGenerationFailure",
        format!(
            "No more IP addresses available on network {}.",
            subnet.network_id
        ),
    ))
}

fn random_mac() -> String {
    format!(
        "fa:16:3e:{:02x}:{:02x}:{:02x}",
        fastrand::u8(..),
        fastrand::u8(..),
        fastrand::u8(..)
    )
}

/// What a new port asks for.
pub(crate) struct PortSpec {
    pub network_id: String,
    pub name: String,
    pub fixed_ips: Vec<(Option<String>, Option<String>)>,
    pub device_id: String,
    pub device_owner: String,
    pub project_id: String,
}

/// Creates a port with its fixed IPs (shared by the port API, Nova and routers).
pub(crate) fn create_port(tx: &mut Tx<'_>, spec: PortSpec) -> Result<Port, ApiError> {
    find::<Network>(tx, &spec.network_id)?;
    let subnets: Vec<Subnet> = tx
        .list::<Subnet>(SUBNETS)
        .into_iter()
        .filter(|s| s.network_id == spec.network_id)
        .collect();
    let mut wanted = spec.fixed_ips;
    if wanted.is_empty() {
        if let Some(first) = subnets.first() {
            wanted.push((Some(first.id.clone()), None));
        }
    }
    let mut fixed_ips = Vec::new();
    for (subnet_id, ip) in wanted {
        let subnet = match (&subnet_id, &ip) {
            (Some(id), _) => subnets.iter().find(|s| &s.id == id).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid input for operation: Failed to create port on network {}, because fixed_ips included invalid subnet {id}.",
                    spec.network_id
                ))
                .with_kind("InvalidInput")
            })?,
            (None, Some(ip)) => {
                let parsed = parse_ip(ip)?;
                subnets.iter().find(|s| in_cidr(parsed, &s.cidr)).ok_or_else(|| {
                    ApiError::bad_request(format!("IP address {ip} is not a valid IP for any subnet on network {}.", spec.network_id))
                        .with_kind("InvalidIpForNetwork")
                })?
            }
            (None, None) => continue,
        };
        // Our own earlier picks in this port are not in the store yet.
        let mut ip_address = allocate_ip(
            tx,
            subnet,
            ip.as_deref(),
            spec.device_owner == OWNER_ROUTER_INTERFACE,
        )?;
        while fixed_ips
            .iter()
            .any(|f: &FixedIp| f.ip_address == ip_address)
        {
            if ip.is_some() {
                return Err(ApiError::conflict(
                    "IpAddressAlreadyAllocated",
                    format!("IP address {ip_address} given twice"),
                ));
            }
            let n = u32::from(parse_ip(&ip_address)?) + 1;
            ip_address = Ipv4Addr::from(n).to_string();
        }
        fixed_ips.push(FixedIp {
            subnet_id: subnet.id.clone(),
            ip_address,
        });
    }
    let ts = iso(now());
    let port = Port {
        id: new_id(),
        name: spec.name,
        network_id: spec.network_id,
        project_id: spec.project_id,
        mac_address: random_mac(),
        fixed_ips,
        device_id: spec.device_id,
        device_owner: spec.device_owner,
        admin_state_up: true,
        description: String::new(),
        allowed_address_pairs: Vec::new(),
        security_groups: Vec::new(),
        created_at: ts.clone(),
        updated_at: ts,
        revision_number: 1,
    };
    tx.put(PORTS, &port.id, &port)?;
    Ok(port)
}

/// Removes a port and whatever points at it (floating IP associations).
pub(crate) fn delete_port_cascade(tx: &mut Tx<'_>, port_id: &str) -> Result<(), ApiError> {
    tx.delete(PORTS, port_id);
    for mut fip in tx.list::<FloatingIp>(FLOATING_IPS) {
        if fip.port_id.as_deref() == Some(port_id) {
            fip.port_id = None;
            fip.fixed_ip_address = None;
            fip.router_id = None;
            fip.revision_number += 1;
            fip.updated_at = iso(now());
            tx.put(FLOATING_IPS, &fip.id.clone(), &fip)?;
        }
    }
    Ok(())
}

impl ApiError {
    pub(crate) fn with_kind(mut self, kind: &'static str) -> Self {
        self.kind = kind;
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Seeds

/// Creates DevStack's `private` and `public` networks and `router1` on first start.
pub(crate) fn seed(tx: &mut Tx<'_>, project_id: &str) -> Result<(), ApiError> {
    use crate::defaults as d;
    if !tx.list::<Network>(NETWORKS).is_empty() {
        return Ok(());
    }
    let private = new_network(tx, d::NETWORK, project_id, false)?;
    let private_subnet = new_subnet(tx, d::SUBNET, &private.id, d::SUBNET_CIDR, project_id)?;
    let public = new_network(tx, d::PUBLIC_NETWORK, project_id, true)?;
    new_subnet(
        tx,
        d::PUBLIC_SUBNET,
        &public.id,
        d::PUBLIC_SUBNET_CIDR,
        project_id,
    )?;
    let router = new_router(tx, d::ROUTER, project_id, Some(public.id))?;
    add_interface_on_subnet(tx, &router, &private_subnet.id)?;
    Ok(())
}

fn new_network(
    tx: &mut Tx<'_>,
    name: &str,
    project_id: &str,
    external: bool,
) -> Result<Network, ApiError> {
    let ts = iso(now());
    let n = Network {
        id: new_id(),
        name: name.into(),
        project_id: project_id.into(),
        admin_state_up: true,
        shared: false,
        external,
        mtu: 1450,
        description: String::new(),
        created_at: ts.clone(),
        updated_at: ts,
        revision_number: 1,
    };
    tx.put(NETWORKS, &n.id, &n)?;
    Ok(n)
}

fn default_pools(cidr: &str) -> Result<(Option<String>, Vec<Pool>), ApiError> {
    let (net, len) = parse_cidr(cidr).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Invalid input for cidr. Reason: '{cidr}' is not a valid IP subnet."
        ))
    })?;
    if len > 30 {
        return Err(ApiError::bad_request(format!(
            "Invalid input for cidr. Reason: '{cidr}' is too small for a subnet."
        )));
    }
    let first = u32::from(net);
    let last = first | !mask(len);
    Ok((
        Some(Ipv4Addr::from(first + 1).to_string()),
        vec![Pool {
            start: Ipv4Addr::from(first + 2).to_string(),
            end: Ipv4Addr::from(last - 1).to_string(),
        }],
    ))
}

fn new_subnet(
    tx: &mut Tx<'_>,
    name: &str,
    network_id: &str,
    cidr: &str,
    project_id: &str,
) -> Result<Subnet, ApiError> {
    let (gateway_ip, allocation_pools) = default_pools(cidr)?;
    let ts = iso(now());
    let s = Subnet {
        id: new_id(),
        name: name.into(),
        network_id: network_id.into(),
        project_id: project_id.into(),
        cidr: cidr.into(),
        gateway_ip,
        allocation_pools,
        enable_dhcp: true,
        dns_nameservers: vec![],
        host_routes: vec![],
        description: String::new(),
        created_at: ts.clone(),
        updated_at: ts,
        revision_number: 1,
    };
    tx.put(SUBNETS, &s.id, &s)?;
    Ok(s)
}

fn new_router(
    tx: &mut Tx<'_>,
    name: &str,
    project_id: &str,
    gateway: Option<String>,
) -> Result<Router_, ApiError> {
    let ts = iso(now());
    let router = Router_ {
        id: new_id(),
        name: name.into(),
        project_id: project_id.into(),
        admin_state_up: true,
        gateway_network_id: None,
        routes: vec![],
        description: String::new(),
        created_at: ts.clone(),
        updated_at: ts,
        revision_number: 1,
    };
    tx.put(ROUTERS, &router.id, &router)?;
    set_gateway(tx, router, gateway)
}

fn set_gateway(
    tx: &mut Tx<'_>,
    mut router: Router_,
    network_id: Option<String>,
) -> Result<Router_, ApiError> {
    if router.gateway_network_id == network_id {
        return Ok(router);
    }
    for p in tx.list::<Port>(PORTS) {
        if p.device_id == router.id && p.device_owner == OWNER_ROUTER_GATEWAY {
            tx.delete(PORTS, &p.id);
        }
    }
    if let Some(net_id) = &network_id {
        let net = find::<Network>(tx, net_id)?;
        if !net.external {
            return Err(ApiError::bad_request(format!(
                "Bad router request: Network {net_id} is not an external network."
            )));
        }
        create_port(
            tx,
            PortSpec {
                network_id: net_id.clone(),
                name: String::new(),
                fixed_ips: vec![],
                device_id: router.id.clone(),
                device_owner: OWNER_ROUTER_GATEWAY.into(),
                project_id: String::new(),
            },
        )?;
    }
    router.gateway_network_id = network_id;
    tx.put(ROUTERS, &router.id.clone(), &router)?;
    Ok(router)
}

fn add_interface_on_subnet(
    tx: &mut Tx<'_>,
    router: &Router_,
    subnet_id: &str,
) -> Result<Port, ApiError> {
    let subnet = find::<Subnet>(tx, subnet_id)?;
    if router_subnets(tx, &router.id)
        .iter()
        .any(|s| s.id == subnet.id)
    {
        return Err(ApiError::bad_request(format!(
            "Bad router request: Router already has a port on subnet {subnet_id}."
        )));
    }
    let ip = subnet.gateway_ip.clone();
    create_port(
        tx,
        PortSpec {
            network_id: subnet.network_id.clone(),
            name: String::new(),
            fixed_ips: vec![(Some(subnet.id.clone()), ip)],
            device_id: router.id.clone(),
            device_owner: OWNER_ROUTER_INTERFACE.into(),
            project_id: router.project_id.clone(),
        },
    )
}

/// Subnets the router is attached to (interfaces and gateway).
fn router_subnets(r: &impl Read, router_id: &str) -> Vec<Subnet> {
    let ports: Vec<Port> = r
        .list::<Port>(PORTS)
        .into_iter()
        .filter(|p| p.device_id == router_id && p.device_owner.starts_with("network:router"))
        .collect();
    r.list::<Subnet>(SUBNETS)
        .into_iter()
        .filter(|s| {
            ports
                .iter()
                .any(|p| p.fixed_ips.iter().any(|f| f.subnet_id == s.id))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// HTTP

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let v2 = "/network/v2.0";
    let protected = Router::new()
        .route(
            &format!("{v2}/networks"),
            get(list::<Network>).post(create_network),
        )
        .route(
            &format!("{v2}/networks/{{id}}"),
            get(show::<Network>)
                .put(update_network)
                .delete(delete_network),
        )
        .route(
            &format!("{v2}/subnets"),
            get(list::<Subnet>).post(create_subnet),
        )
        .route(
            &format!("{v2}/subnets/{{id}}"),
            get(show::<Subnet>).put(update_subnet).delete(delete_subnet),
        )
        .route(
            &format!("{v2}/ports"),
            get(list::<Port>).post(create_port_api),
        )
        .route(
            &format!("{v2}/ports/{{id}}"),
            get(show::<Port>).put(update_port).delete(delete_port),
        )
        .route(
            &format!("{v2}/routers"),
            get(list::<Router_>).post(create_router),
        )
        .route(
            &format!("{v2}/routers/{{id}}"),
            get(show::<Router_>)
                .put(update_router)
                .delete(delete_router),
        )
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
            &format!("{v2}/floatingips"),
            get(list::<FloatingIp>).post(create_floating_ip),
        )
        .route(
            &format!("{v2}/floatingips/{{id}}"),
            get(show::<FloatingIp>)
                .put(update_floating_ip)
                .delete(delete_floating_ip),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            require_token,
        ));
    let public = Router::new()
        .route("/network", get(versions))
        .route("/network/", get(versions))
        .route("/network/v2.0", get(resources))
        .route("/network/v2.0/", get(resources));
    service_layers(public.merge(protected), &cloud, Service::Network)
}

async fn versions(State(cloud): Ctx) -> Response {
    reply(
        StatusCode::OK,
        json!({"versions": [{"id": "v2.0", "status": "CURRENT",
            "links": [{"rel": "self", "href": format!("{}/network/v2.0/", cloud.base_url)}]}]}),
    )
}

async fn resources(State(cloud): Ctx) -> Response {
    let resources: Vec<Value> = ["network", "subnet", "port", "router", "floatingip"]
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

async fn list<R: Resource>(
    State(cloud): Ctx,
    Query(params): Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let mut views: Vec<Value> = cloud.store.read(|v| {
        v.list::<R>(R::KIND)
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
    Ok(reply(StatusCode::OK, super::list_body(R::KIND, page, next)))
}

async fn show<R: Resource>(
    State(cloud): Ctx,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let view = cloud
        .store
        .read(|v| find::<R>(v, &id).map(|item| item.view(v)))?;
    Ok(reply(
        StatusCode::OK,
        json!({ R::SINGULAR: select_fields(view, &params) }),
    ))
}

fn created<R: Resource>(cloud: &Cloud, item: &R) -> Response {
    let view = cloud.store.read(|v| item.view(v));
    reply(StatusCode::CREATED, json!({ R::SINGULAR: view }))
}

fn updated<R: Resource>(cloud: &Cloud, id: &str) -> Result<Response, ApiError> {
    let view = cloud
        .store
        .read(|v| find::<R>(v, id).map(|item| item.view(v)))?;
    Ok(reply(StatusCode::OK, json!({ R::SINGULAR: view })))
}

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
    serde_json::from_value(inner).map_err(|e| {
        let msg = e.to_string();
        let msg = match msg.strip_prefix("unknown field `") {
            Some(rest) => format!(
                "Unrecognized attribute(s) '{}'",
                rest.split('`').next().unwrap_or(rest)
            ),
            None => format!("Invalid input for operation: {msg}"),
        };
        ApiError::bad_request(msg)
    })
}

fn project_of(caller: &super::Caller, given: &Option<String>) -> String {
    given.clone().unwrap_or_else(|| caller.project_id.clone())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct NetworkBody {
    name: Option<String>,
    admin_state_up: Option<bool>,
    shared: Option<bool>,
    #[serde(rename = "router:external")]
    external: Option<bool>,
    mtu: Option<u32>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    port_security_enabled: Option<bool>,
    availability_zone_hints: Option<Value>,
    #[serde(rename = "provider:network_type")]
    _network_type: Option<Value>,
    #[serde(rename = "provider:physical_network")]
    _physical_network: Option<Value>,
    #[serde(rename = "provider:segmentation_id")]
    _segmentation_id: Option<Value>,
    dns_domain: Option<Value>,
    qos_policy_id: Option<Value>,
    is_default: Option<bool>,
}

type CallerExt = axum::Extension<super::Caller>;

async fn create_network(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: NetworkBody = parse_wrapped(&body, "network")?;
    let project_id = b.project_id.clone().or(b.tenant_id.clone());
    let net = cloud
        .write(move |tx| {
            let mut n = new_network(
                tx,
                b.name.as_deref().unwrap_or(""),
                &project_of(&caller, &project_id),
                b.external.unwrap_or(false),
            )?;
            n.admin_state_up = b.admin_state_up.unwrap_or(true);
            n.shared = b.shared.unwrap_or(false);
            n.mtu = b.mtu.unwrap_or(1450);
            n.description = b.description.unwrap_or_default();
            tx.put(NETWORKS, &n.id.clone(), &n)?;
            Ok(n)
        })
        .await?;
    Ok(created(&cloud, &net))
}

async fn update_network(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: NetworkBody = parse_wrapped(&body, "network")?;
    let id2 = id.clone();
    cloud
        .write(move |tx| {
            let mut n = find::<Network>(tx, &id2)?;
            if let Some(v) = b.name {
                n.name = v;
            }
            if let Some(v) = b.admin_state_up {
                n.admin_state_up = v;
            }
            if let Some(v) = b.shared {
                n.shared = v;
            }
            if let Some(v) = b.external {
                n.external = v;
            }
            if let Some(v) = b.mtu {
                n.mtu = v;
            }
            if let Some(v) = b.description {
                n.description = v;
            }
            n.revision_number += 1;
            n.updated_at = iso(now());
            tx.put(NETWORKS, &id2, &n)?;
            Ok(())
        })
        .await?;
    updated::<Network>(&cloud, &id)
}

async fn delete_network(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    cloud
        .write(move |tx| {
            find::<Network>(tx, &id)?;
            let ports: Vec<Port> = tx.list::<Port>(PORTS).into_iter().filter(|p| p.network_id == id).collect();
            if !ports.is_empty() {
                return Err(ApiError::conflict(
                    "NetworkInUse",
                    format!("Unable to complete operation on network {id}. There are one or more ports still in use on the network."),
                ));
            }
            for s in tx.list::<Subnet>(SUBNETS) {
                if s.network_id == id {
                    tx.delete(SUBNETS, &s.id);
                }
            }
            tx.delete(NETWORKS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct SubnetBody {
    network_id: Option<String>,
    cidr: Option<String>,
    ip_version: Option<u8>,
    name: Option<String>,
    #[serde(default, deserialize_with = "super::nullable")]
    gateway_ip: Option<Option<String>>,
    allocation_pools: Option<Vec<Pool>>,
    enable_dhcp: Option<bool>,
    dns_nameservers: Option<Vec<String>>,
    host_routes: Option<Vec<HostRoute>>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    subnetpool_id: Option<Value>,
    ipv6_ra_mode: Option<Value>,
    ipv6_address_mode: Option<Value>,
    service_types: Option<Value>,
    segment_id: Option<Value>,
    dns_publish_fixed_ip: Option<bool>,
}

async fn create_subnet(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: SubnetBody = parse_wrapped(&body, "subnet")?;
    let network_id = b.network_id.clone().ok_or_else(|| {
        ApiError::bad_request(
            "Failed to parse request. Required attribute 'network_id' not specified",
        )
    })?;
    let cidr = b.cidr.clone().ok_or_else(|| {
        ApiError::bad_request(
            "Bad subnet request: a subnetpool must be specified in the absence of a cidr.",
        )
    })?;
    match b.ip_version {
        Some(4) => {}
        Some(6) => {
            return Err(ApiError::bad_request(
                "IPv6 subnets are not supported by the local cloud.",
            ))
        }
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "Invalid input for ip_version. Reason: {v} is not in [4, 6]."
            )))
        }
        None => {
            return Err(ApiError::bad_request(
                "Failed to parse request. Required attribute 'ip_version' not specified",
            ))
        }
    }
    let project_id = b.project_id.clone().or(b.tenant_id.clone());
    let subnet = cloud
        .write(move |tx| {
            find::<Network>(tx, &network_id)?;
            let (net, len) = parse_cidr(&cidr).ok_or_else(|| ApiError::bad_request(format!("Invalid input for cidr. Reason: '{cidr}' is not a valid IP subnet.")))?;
            let cidr = format!("{net}/{len}");
            for other in tx.list::<Subnet>(SUBNETS).into_iter().filter(|s| s.network_id == network_id) {
                if let Some((o, olen)) = parse_cidr(&other.cidr) {
                    if in_cidr(o, &cidr) || in_cidr(net, &format!("{o}/{olen}")) {
                        return Err(ApiError::bad_request(format!(
                            "Invalid input for operation: Requested subnet with cidr: {cidr} for network: {network_id} overlaps with another subnet."
                        )));
                    }
                }
            }
            let mut s = new_subnet(tx, b.name.as_deref().unwrap_or(""), &network_id, &cidr, &project_of(&caller, &project_id))?;
            if let Some(gw) = b.gateway_ip {
                if let Some(g) = &gw {
                    let ip = parse_ip(g)?;
                    if !in_cidr(ip, &cidr) {
                        return Err(ApiError::bad_request(format!("Invalid input: gateway {g} is not in {cidr}")));
                    }
                }
                s.gateway_ip = gw;
            }
            if let Some(pools) = b.allocation_pools {
                for p in &pools {
                    let (start, end) = (parse_ip(&p.start)?, parse_ip(&p.end)?);
                    if !in_cidr(start, &cidr) || !in_cidr(end, &cidr) || start > end {
                        return Err(ApiError::bad_request(format!("The allocation pool {}-{} spans beyond the subnet cidr {cidr}.", p.start, p.end)).with_kind("OutOfBoundsAllocationPool"));
                    }
                }
                s.allocation_pools = pools;
            }
            s.enable_dhcp = b.enable_dhcp.unwrap_or(true);
            s.dns_nameservers = b.dns_nameservers.unwrap_or_default();
            s.host_routes = b.host_routes.unwrap_or_default();
            s.description = b.description.unwrap_or_default();
            tx.put(SUBNETS, &s.id.clone(), &s)?;
            Ok(s)
        })
        .await?;
    Ok(created(&cloud, &subnet))
}

async fn update_subnet(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: SubnetBody = parse_wrapped(&body, "subnet")?;
    if b.cidr.is_some() || b.network_id.is_some() || b.ip_version.is_some() {
        return Err(ApiError::bad_request(
            "Cannot update read-only attribute cidr, network_id or ip_version",
        ));
    }
    let id2 = id.clone();
    cloud
        .write(move |tx| {
            let mut s = find::<Subnet>(tx, &id2)?;
            if let Some(v) = b.name {
                s.name = v;
            }
            if let Some(v) = b.enable_dhcp {
                s.enable_dhcp = v;
            }
            if let Some(v) = b.dns_nameservers {
                s.dns_nameservers = v;
            }
            if let Some(v) = b.host_routes {
                s.host_routes = v;
            }
            if let Some(v) = b.description {
                s.description = v;
            }
            if let Some(v) = b.gateway_ip {
                s.gateway_ip = v;
            }
            s.revision_number += 1;
            s.updated_at = iso(now());
            tx.put(SUBNETS, &id2, &s)?;
            Ok(())
        })
        .await?;
    updated::<Subnet>(&cloud, &id)
}

async fn delete_subnet(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    cloud
        .write(move |tx| {
            find::<Subnet>(tx, &id)?;
            if tx.list::<Port>(PORTS).iter().any(|p| p.fixed_ips.iter().any(|f| f.subnet_id == id)) {
                return Err(ApiError::conflict(
                    "SubnetInUse",
                    format!("Unable to complete operation on subnet {id}: One or more ports have an IP allocation from this subnet."),
                ));
            }
            tx.delete(SUBNETS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedIpBody {
    subnet_id: Option<String>,
    ip_address: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct PortBody {
    network_id: Option<String>,
    name: Option<String>,
    fixed_ips: Option<Vec<FixedIpBody>>,
    device_id: Option<String>,
    device_owner: Option<String>,
    admin_state_up: Option<bool>,
    description: Option<String>,
    mac_address: Option<String>,
    allowed_address_pairs: Option<Vec<Value>>,
    security_groups: Option<Vec<String>>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    port_security_enabled: Option<bool>,
    #[serde(rename = "binding:host_id")]
    _host_id: Option<Value>,
    #[serde(rename = "binding:vnic_type")]
    _vnic_type: Option<Value>,
    #[serde(rename = "binding:profile")]
    _profile: Option<Value>,
    dns_name: Option<Value>,
    extra_dhcp_opts: Option<Value>,
    qos_policy_id: Option<Value>,
}

async fn create_port_api(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: PortBody = parse_wrapped(&body, "port")?;
    let network_id = b.network_id.clone().ok_or_else(|| {
        ApiError::bad_request(
            "Failed to parse request. Required attribute 'network_id' not specified",
        )
    })?;
    let project_id = b.project_id.clone().or(b.tenant_id.clone());
    let port = cloud
        .write(move |tx| {
            let fixed_ips = b
                .fixed_ips
                .unwrap_or_default()
                .into_iter()
                .map(|f| (f.subnet_id, f.ip_address))
                .collect();
            let mut p = create_port(
                tx,
                PortSpec {
                    network_id,
                    name: b.name.unwrap_or_default(),
                    fixed_ips,
                    device_id: b.device_id.unwrap_or_default(),
                    device_owner: b.device_owner.unwrap_or_default(),
                    project_id: project_of(&caller, &project_id),
                },
            )?;
            if let Some(mac) = b.mac_address {
                p.mac_address = mac;
            }
            p.admin_state_up = b.admin_state_up.unwrap_or(true);
            p.description = b.description.unwrap_or_default();
            p.allowed_address_pairs = b.allowed_address_pairs.unwrap_or_default();
            p.security_groups = b.security_groups.unwrap_or_default();
            tx.put(PORTS, &p.id.clone(), &p)?;
            Ok(p)
        })
        .await?;
    Ok(created(&cloud, &port))
}

async fn update_port(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: PortBody = parse_wrapped(&body, "port")?;
    if b.network_id.is_some() {
        return Err(ApiError::bad_request(
            "Cannot update read-only attribute network_id",
        ));
    }
    if b.fixed_ips.is_some() {
        return Err(ApiError::bad_request("Changing fixed_ips of an existing port is not supported by the local cloud; create a new port"));
    }
    let id2 = id.clone();
    cloud
        .write(move |tx| {
            let mut p = find::<Port>(tx, &id2)?;
            if let Some(v) = b.name {
                p.name = v;
            }
            if let Some(v) = b.device_id {
                p.device_id = v;
            }
            if let Some(v) = b.device_owner {
                p.device_owner = v;
            }
            if let Some(v) = b.admin_state_up {
                p.admin_state_up = v;
            }
            if let Some(v) = b.description {
                p.description = v;
            }
            if let Some(v) = b.mac_address {
                p.mac_address = v;
            }
            if let Some(v) = b.allowed_address_pairs {
                p.allowed_address_pairs = v;
            }
            if let Some(v) = b.security_groups {
                p.security_groups = v;
            }
            p.revision_number += 1;
            p.updated_at = iso(now());
            tx.put(PORTS, &id2, &p)?;
            Ok(())
        })
        .await?;
    updated::<Port>(&cloud, &id)
}

async fn delete_port(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    cloud
        .write(move |tx| {
            let p = find::<Port>(tx, &id)?;
            if p.device_owner == OWNER_ROUTER_INTERFACE || p.device_owner == OWNER_ROUTER_GATEWAY {
                return Err(ApiError::conflict(
                    "PortInUse",
                    format!("Port {id} cannot be deleted directly via the port API: has device owner {}.", p.device_owner),
                ));
            }
            delete_port_cascade(tx, &id)
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct GatewayBody {
    network_id: String,
    enable_snat: Option<bool>,
    external_fixed_ips: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct RouterBody {
    name: Option<String>,
    admin_state_up: Option<bool>,
    #[serde(default, deserialize_with = "super::nullable")]
    external_gateway_info: Option<Option<GatewayBody>>,
    routes: Option<Vec<HostRoute>>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    distributed: Option<bool>,
    ha: Option<bool>,
    availability_zone_hints: Option<Value>,
    flavor_id: Option<Value>,
}

async fn create_router(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: RouterBody = parse_wrapped(&body, "router")?;
    if b.routes.is_some() {
        return Err(ApiError::bad_request(
            "Attribute 'routes' not allowed in POST",
        ));
    }
    let project_id = b.project_id.clone().or(b.tenant_id.clone());
    let router = cloud
        .write(move |tx| {
            let gateway = b.external_gateway_info.flatten().map(|g| g.network_id);
            let mut r = new_router(
                tx,
                b.name.as_deref().unwrap_or(""),
                &project_of(&caller, &project_id),
                gateway,
            )?;
            r.admin_state_up = b.admin_state_up.unwrap_or(true);
            r.description = b.description.unwrap_or_default();
            tx.put(ROUTERS, &r.id.clone(), &r)?;
            Ok(r)
        })
        .await?;
    Ok(created(&cloud, &router))
}

/// Checks routes as Neutron does: valid CIDR and address, nexthop on a subnet the router is
/// attached to.
fn check_routes(
    r: &impl Read,
    router_id: &str,
    routes: &[HostRoute],
) -> Result<Vec<HostRoute>, ApiError> {
    let subnets = router_subnets(r, router_id);
    let mut out: Vec<HostRoute> = Vec::new();
    for route in routes {
        let (net, len) = parse_cidr(&route.destination).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid input for routes. Reason: '{}' is not a valid IP subnet.",
                route.destination
            ))
        })?;
        let nexthop = parse_ip(&route.nexthop)?;
        if !subnets.iter().any(|s| in_cidr(nexthop, &s.cidr)) {
            return Err(ApiError::bad_request(format!(
                "Invalid format for routes: {{'destination': '{}', 'nexthop': '{}'}}, the nexthop is not connected with router",
                route.destination, route.nexthop
            ))
            .with_kind("InvalidRoutes"));
        }
        let normal = HostRoute {
            destination: format!("{net}/{len}"),
            nexthop: nexthop.to_string(),
        };
        if !out.contains(&normal) {
            out.push(normal);
        }
    }
    Ok(out)
}

async fn update_router(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: RouterBody = parse_wrapped(&body, "router")?;
    let id2 = id.clone();
    cloud
        .write(move |tx| {
            let mut r = find::<Router_>(tx, &id2)?;
            if let Some(gw) = b.external_gateway_info {
                r = set_gateway(tx, r, gw.map(|g| g.network_id))?;
            }
            if let Some(v) = b.name {
                r.name = v;
            }
            if let Some(v) = b.admin_state_up {
                r.admin_state_up = v;
            }
            if let Some(v) = b.description {
                r.description = v;
            }
            if let Some(routes) = b.routes {
                r.routes = check_routes(tx, &id2, &routes)?;
            }
            r.revision_number += 1;
            r.updated_at = iso(now());
            tx.put(ROUTERS, &id2, &r)?;
            Ok(())
        })
        .await?;
    updated::<Router_>(&cloud, &id)
}

async fn delete_router(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    cloud
        .write(move |tx| {
            find::<Router_>(tx, &id)?;
            let ports: Vec<Port> = tx
                .list::<Port>(PORTS)
                .into_iter()
                .filter(|p| p.device_id == id)
                .collect();
            if ports
                .iter()
                .any(|p| p.device_owner == OWNER_ROUTER_INTERFACE)
            {
                return Err(ApiError::conflict(
                    "RouterInUse",
                    format!("Router {id} still has ports"),
                ));
            }
            if tx
                .list::<FloatingIp>(FLOATING_IPS)
                .iter()
                .any(|f| f.router_id.as_deref() == Some(id.as_str()))
            {
                return Err(ApiError::conflict(
                    "RouterInUse",
                    format!("Router {id} still has floating IPs associated"),
                ));
            }
            for p in ports {
                tx.delete(PORTS, &p.id);
            }
            tx.delete(ROUTERS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InterfaceBody {
    subnet_id: Option<String>,
    port_id: Option<String>,
}

fn interface_info(router: &Router_, port: &Port) -> Value {
    let subnet_ids: Vec<&str> = port
        .fixed_ips
        .iter()
        .map(|f| f.subnet_id.as_str())
        .collect();
    json!({
        "id": router.id, "tenant_id": router.project_id, "project_id": router.project_id,
        "port_id": port.id, "network_id": port.network_id,
        "subnet_id": subnet_ids.first(), "subnet_ids": subnet_ids,
    })
}

async fn add_router_interface(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: InterfaceBody = parse_body(&body)?;
    let info = cloud
        .write(move |tx| {
            let router = find::<Router_>(tx, &id)?;
            let port = match (b.subnet_id, b.port_id) {
                (Some(subnet_id), None) => add_interface_on_subnet(tx, &router, &subnet_id)?,
                (None, Some(port_id)) => {
                    let mut port = find::<Port>(tx, &port_id)?;
                    if !port.device_id.is_empty() {
                        return Err(ApiError::conflict(
                            "PortInUse",
                            format!("Port {port_id} is already in use by {}", port.device_id),
                        ));
                    }
                    port.device_id = router.id.clone();
                    port.device_owner = OWNER_ROUTER_INTERFACE.into();
                    port.revision_number += 1;
                    tx.put(PORTS, &port_id, &port)?;
                    port
                }
                _ => return Err(ApiError::bad_request(
                    "Bad router request: Either subnet_id or port_id must be specified, not both",
                )),
            };
            Ok(interface_info(&router, &port))
        })
        .await?;
    Ok(reply(StatusCode::OK, info))
}

async fn remove_router_interface(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: InterfaceBody = parse_body(&body)?;
    let info = cloud
        .write(move |tx| {
            let router = find::<Router_>(tx, &id)?;
            let interfaces: Vec<Port> = tx
                .list::<Port>(PORTS)
                .into_iter()
                .filter(|p| p.device_id == id && p.device_owner == OWNER_ROUTER_INTERFACE)
                .collect();
            let port = match (&b.subnet_id, &b.port_id) {
                (Some(s), _) => interfaces.into_iter().find(|p| p.fixed_ips.iter().any(|f| &f.subnet_id == s)),
                (None, Some(p)) => interfaces.into_iter().find(|i| &i.id == p),
                (None, None) => return Err(ApiError::bad_request("Bad router request: Either subnet_id or port_id must be specified")),
            }
            .ok_or_else(|| {
                ApiError::not_found("RouterInterfaceNotFound", format!("Router {id} does not have an interface with {}", b.subnet_id.clone().or(b.port_id.clone()).unwrap_or_default()))
            })?;
            let subnets: Vec<Subnet> = port.fixed_ips.iter().filter_map(|f| tx.get::<Subnet>(SUBNETS, &f.subnet_id)).collect();
            for route in &router.routes {
                if let Ok(hop) = route.nexthop.parse::<Ipv4Addr>() {
                    if subnets.iter().any(|s| in_cidr(hop, &s.cidr)) {
                        return Err(ApiError::conflict(
                            "RouterInterfaceInUseByRoute",
                            format!("Router interface for subnet on router {id} cannot be deleted, as it is required by one or more routes."),
                        ));
                    }
                }
            }
            tx.delete(PORTS, &port.id);
            Ok(interface_info(&router, &port))
        })
        .await?;
    Ok(reply(StatusCode::OK, info))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutesOnly {
    routes: Vec<HostRoute>,
}

async fn add_extraroutes(
    state: Ctx,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    change_routes(state, path, body, true).await
}

async fn remove_extraroutes(
    state: Ctx,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    change_routes(state, path, body, false).await
}

/// Neutron's extraroute-atomic: add or remove a set of routes in one step, without a
/// read-modify-write race between clients.
async fn change_routes(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
    add: bool,
) -> Result<Response, ApiError> {
    let b: RoutesOnly = parse_wrapped(&body, "router")?;
    let id2 = id.clone();
    cloud
        .write(move |tx| {
            let mut r = find::<Router_>(tx, &id2)?;
            if add {
                for route in check_routes(tx, &id2, &b.routes)? {
                    if !r.routes.contains(&route) {
                        r.routes.push(route);
                    }
                }
            } else {
                let remove: Vec<HostRoute> = b
                    .routes
                    .iter()
                    .map(|route| {
                        let dest = parse_cidr(&route.destination)
                            .map_or(route.destination.clone(), |(n, l)| format!("{n}/{l}"));
                        HostRoute {
                            destination: dest,
                            nexthop: route.nexthop.clone(),
                        }
                    })
                    .collect();
                r.routes.retain(|route| !remove.contains(route));
            }
            r.revision_number += 1;
            r.updated_at = iso(now());
            tx.put(ROUTERS, &id2, &r)?;
            Ok(())
        })
        .await?;
    updated::<Router_>(&cloud, &id)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct FloatingIpBody {
    floating_network_id: Option<String>,
    #[serde(default, deserialize_with = "super::nullable")]
    port_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "super::nullable")]
    fixed_ip_address: Option<Option<String>>,
    floating_ip_address: Option<String>,
    subnet_id: Option<String>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    dns_name: Option<Value>,
    dns_domain: Option<Value>,
    qos_policy_id: Option<Value>,
}

/// Points `fip` at `port_id` (or nowhere), finding the router that connects them.
fn associate(
    tx: &Tx<'_>,
    fip: &mut FloatingIp,
    port_id: Option<String>,
    fixed_ip: Option<String>,
) -> Result<(), ApiError> {
    let Some(port_id) = port_id else {
        fip.port_id = None;
        fip.fixed_ip_address = None;
        fip.router_id = None;
        return Ok(());
    };
    let port = find::<Port>(tx, &port_id)?;
    let fixed = match fixed_ip {
        Some(ip) => port
            .fixed_ips
            .iter()
            .find(|f| f.ip_address == ip)
            .cloned()
            .ok_or_else(|| {
                ApiError::bad_request(format!("Port {port_id} does not have fixed ip {ip}"))
            })?,
        None => port.fixed_ips.first().cloned().ok_or_else(|| {
            ApiError::bad_request(format!(
                "Bad floatingip request: Port {port_id} does not have any IPv4 address"
            ))
        })?,
    };
    if let Some(other) = tx.list::<FloatingIp>(FLOATING_IPS).into_iter().find(|f| {
        f.id != fip.id
            && f.port_id.as_deref() == Some(port_id.as_str())
            && f.fixed_ip_address.as_deref() == Some(fixed.ip_address.as_str())
    }) {
        return Err(ApiError::conflict(
            "FloatingIPPortAlreadyAssociated",
            format!("Cannot associate floating IP {} with port {port_id} using fixed IP {}, as that fixed IP already has a floating IP {}.", fip.floating_ip_address, fixed.ip_address, other.floating_ip_address),
        ));
    }
    let router = tx.list::<Router_>(ROUTERS).into_iter().find(|r| {
        r.gateway_network_id.as_deref() == Some(fip.floating_network_id.as_str())
            && router_subnets(tx, &r.id)
                .iter()
                .any(|s| s.id == fixed.subnet_id)
    });
    let Some(router) = router else {
        return Err(ApiError::not_found(
            "ExternalGatewayForFloatingIPNotFound",
            format!(
                "External network {} is not reachable from subnet {}.",
                fip.floating_network_id, fixed.subnet_id
            ),
        ));
    };
    fip.port_id = Some(port_id);
    fip.fixed_ip_address = Some(fixed.ip_address);
    fip.router_id = Some(router.id);
    Ok(())
}

async fn create_floating_ip(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: FloatingIpBody = parse_wrapped(&body, "floatingip")?;
    let net_id = b.floating_network_id.clone().ok_or_else(|| {
        ApiError::bad_request(
            "Failed to parse request. Required attribute 'floating_network_id' not specified",
        )
    })?;
    let project_id = b.project_id.clone().or(b.tenant_id.clone());
    let fip = cloud
        .write(move |tx| {
            let net = find::<Network>(tx, &net_id)?;
            if !net.external {
                return Err(ApiError::bad_request(format!(
                    "Bad floatingip request: Network {net_id} is not a valid external network."
                )));
            }
            let subnet = tx
                .list::<Subnet>(SUBNETS)
                .into_iter()
                .find(|s| {
                    s.network_id == net_id && b.subnet_id.as_ref().is_none_or(|id| id == &s.id)
                })
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Bad floatingip request: Network {net_id} has no subnet to allocate from."
                    ))
                })?;
            let address = allocate_ip(tx, &subnet, b.floating_ip_address.as_deref(), false)?;
            let ts = iso(now());
            let mut fip = FloatingIp {
                id: new_id(),
                floating_ip_address: address,
                floating_network_id: net_id,
                port_id: None,
                fixed_ip_address: None,
                router_id: None,
                project_id: project_of(&caller, &project_id),
                description: b.description.unwrap_or_default(),
                created_at: ts.clone(),
                updated_at: ts,
                revision_number: 1,
            };
            associate(
                tx,
                &mut fip,
                b.port_id.flatten(),
                b.fixed_ip_address.flatten(),
            )?;
            tx.put(FLOATING_IPS, &fip.id.clone(), &fip)?;
            Ok(fip)
        })
        .await?;
    Ok(created(&cloud, &fip))
}

async fn update_floating_ip(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: FloatingIpBody = parse_wrapped(&body, "floatingip")?;
    if b.floating_network_id.is_some() || b.floating_ip_address.is_some() {
        return Err(ApiError::bad_request(
            "Cannot update read-only attribute floating_network_id or floating_ip_address",
        ));
    }
    let id2 = id.clone();
    cloud
        .write(move |tx| {
            let mut fip = find::<FloatingIp>(tx, &id2)?;
            if let Some(port) = b.port_id {
                associate(tx, &mut fip, port, b.fixed_ip_address.flatten())?;
            }
            if let Some(d) = b.description {
                fip.description = d;
            }
            fip.revision_number += 1;
            fip.updated_at = iso(now());
            tx.put(FLOATING_IPS, &id2, &fip)?;
            Ok(())
        })
        .await?;
    updated::<FloatingIp>(&cloud, &id)
}

async fn delete_floating_ip(
    State(cloud): Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    cloud
        .write(move |tx| {
            find::<FloatingIp>(tx, &id)?;
            tx.delete(FLOATING_IPS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cidr_math() {
        assert_eq!(
            parse_cidr("10.0.0.7/24"),
            Some((Ipv4Addr::new(10, 0, 0, 0), 24))
        );
        assert!(parse_cidr("10.0.0.0/33").is_none());
        assert!(in_cidr(Ipv4Addr::new(10, 0, 0, 200), "10.0.0.0/24"));
        assert!(!in_cidr(Ipv4Addr::new(10, 0, 1, 1), "10.0.0.0/24"));
        let (gw, pools) = default_pools("10.0.0.0/24").unwrap();
        assert_eq!(gw.as_deref(), Some("10.0.0.1"));
        assert_eq!(
            pools,
            vec![Pool {
                start: "10.0.0.2".into(),
                end: "10.0.0.254".into()
            }]
        );
    }
}
