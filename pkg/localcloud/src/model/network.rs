//! Network v2.0 (Neutron) records: networks, subnets, ports with their fixed IPs, routers,
//! floating IPs, security groups and their rules, as stored. The API
//! (`api/network`) writes them; the data plane reads ports, subnets, floating IPs and
//! security group rules. Upstream equivalent: `neutron.db.models_v2` and the models of the
//! `l3` and `securitygroup` extensions.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{impl_record, Meta};

pub(crate) const NETWORKS: &str = "networks";
pub(crate) const SUBNETS: &str = "subnets";
pub(crate) const PORTS: &str = "ports";
pub(crate) const ROUTERS: &str = "routers";
pub(crate) const FLOATING_IPS: &str = "floatingips";
pub(crate) const SECURITY_GROUPS: &str = "security_groups";
pub(crate) const SECURITY_GROUP_RULES: &str = "security_group_rules";

pub(crate) const OWNER_ROUTER_INTERFACE: &str = "network:router_interface";
pub(crate) const OWNER_ROUTER_GATEWAY: &str = "network:router_gateway";

// ---- Networks -------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Network {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub admin_state_up: bool,
    pub shared: bool,
    pub external: bool,
    pub mtu: u32,
    pub description: String,
}

impl_record!(Network: NETWORKS, ("network", NETWORKS, "Network"), "NetworkNotFound");

// ---- Ports ----------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct FixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Port {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub network_id: String,
    pub mac_address: String,
    pub fixed_ips: Vec<FixedIp>,
    pub device_id: String,
    pub device_owner: String,
    pub admin_state_up: bool,
    pub description: String,
    pub allowed_address_pairs: Vec<Value>,
    pub security_groups: Vec<String>,
}

impl_record!(Port: PORTS, ("port", PORTS, "Port"), "PortNotFound", &[
    "id", "name", "project_id", "network_id", "device_id", "device_owner", "description",
    "security_groups",
]);

// ---- Routers --------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Router_ {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub admin_state_up: bool,
    /// The external network of the gateway, when set.
    pub gateway_network_id: Option<String>,
    pub routes: Vec<HostRoute>,
    pub description: String,
}

impl_record!(Router_: ROUTERS, ("router", ROUTERS, "Router"), "RouterNotFound");

// ---- Floating IPs ---------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FloatingIp {
    #[serde(flatten)]
    pub meta: Meta,
    pub floating_ip_address: String,
    pub floating_network_id: String,
    pub port_id: Option<String>,
    pub fixed_ip_address: Option<String>,
    pub router_id: Option<String>,
    pub description: String,
}

impl_record!(FloatingIp: FLOATING_IPS, ("floatingip", FLOATING_IPS, "Floating IP"),
    "FloatingIPNotFound", &[
    "id", "project_id", "port_id", "floating_network_id", "floating_ip_address", "description",
]);

// ---- Security groups and their rules --------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SecurityGroup {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub description: String,
    pub stateful: bool,
}

impl_record!(SecurityGroup: SECURITY_GROUPS,
    ("security_group", SECURITY_GROUPS, "Security group"), "SecurityGroupNotFound", &["id", "name", "project_id", "description"]);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct SecurityGroupRule {
    #[serde(flatten)]
    pub meta: Meta,
    pub security_group_id: String,
    pub direction: String,
    pub ethertype: String,
    pub protocol: Option<String>,
    pub port_range_min: Option<u16>,
    pub port_range_max: Option<u16>,
    pub remote_ip_prefix: Option<String>,
    pub remote_group_id: Option<String>,
    pub description: String,
}

impl_record!(SecurityGroupRule: SECURITY_GROUP_RULES,
    ("security_group_rule", SECURITY_GROUP_RULES, "Security group rule"),
    "SecurityGroupRuleNotFound", &[
    "id", "project_id", "security_group_id", "direction", "ethertype",
]);

// ---- Subnets --------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Pool {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostRoute {
    pub destination: String,
    pub nexthop: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Subnet {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub network_id: String,
    pub cidr: String,
    pub gateway_ip: Option<String>,
    pub allocation_pools: Vec<Pool>,
    pub enable_dhcp: bool,
    pub dns_nameservers: Vec<String>,
    pub host_routes: Vec<HostRoute>,
    pub description: String,
}

impl_record!(Subnet: SUBNETS, ("subnet", SUBNETS, "Subnet"), "SubnetNotFound", &[
    "id", "name", "project_id", "network_id", "cidr",
]);
