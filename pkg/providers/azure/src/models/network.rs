//! Microsoft.Network: virtual networks and subnets, NICs, public IPs, route tables, network
//! security groups and load balancers. Lists the provider edits (rules, routes, pools, a
//! configuration's backend pools) are always sent, so that removing the last item sends
//! `[]`; read-only back-references are never sent.

use serde::{Deserialize, Serialize};

use super::{nullable, Extra, Reference, Resource};

/// Skips a `Vec` that is empty (read-only back-references).
fn empty<T>(v: &[T]) -> bool {
    v.is_empty()
}

/// A virtual network.
pub type VirtualNetwork = Resource<VirtualNetworkProperties>;

/// A virtual network's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualNetworkProperties {
    /// Its address space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_space: Option<AddressSpace>,
    /// Its subnets, inline.
    #[serde(deserialize_with = "nullable")]
    pub subnets: Vec<Subnet>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `addressSpace`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AddressSpace {
    /// CIDRs.
    #[serde(deserialize_with = "nullable")]
    pub address_prefixes: Vec<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A subnet.
pub type Subnet = Resource<SubnetProperties>;

/// A subnet's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubnetProperties {
    /// Its CIDR.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_prefix: Option<String>,
    /// Its security group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<Reference>,
    /// Its route table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_table: Option<Reference>,
    /// The IP configurations on it; read-only.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub ip_configurations: Vec<Reference>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A network interface.
pub type NetworkInterface = Resource<NetworkInterfaceProperties>;

/// A NIC's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkInterfaceProperties {
    /// Its IP configurations.
    #[serde(deserialize_with = "nullable")]
    pub ip_configurations: Vec<IpConfiguration>,
    /// Its security group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<Reference>,
    /// The VM using it; read-only.
    #[serde(skip_serializing)]
    pub virtual_machine: Option<Reference>,
    /// `FA-16-3E-...`; read-only.
    #[serde(skip_serializing)]
    pub mac_address: Option<String>,
    /// Whether it is its VM's primary NIC; read-only.
    #[serde(skip_serializing)]
    pub primary: Option<bool>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A NIC's IP configuration.
pub type IpConfiguration = Resource<IpConfigurationProperties>;

/// An IP configuration's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IpConfigurationProperties {
    /// The private address.
    #[serde(rename = "privateIPAddress", skip_serializing_if = "Option::is_none")]
    pub private_ip_address: Option<String>,
    /// `Dynamic` or `Static`.
    #[serde(
        rename = "privateIPAllocationMethod",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_allocation_method: Option<String>,
    /// `IPv4` or `IPv6`.
    #[serde(
        rename = "privateIPAddressVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address_version: Option<String>,
    /// Its public IP.
    #[serde(rename = "publicIPAddress", skip_serializing_if = "Option::is_none")]
    pub public_ip_address: Option<Reference>,
    /// Its subnet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet: Option<Reference>,
    /// The primary configuration of its NIC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// The load balancers' backend pools it is in.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub load_balancer_backend_address_pools: Vec<Reference>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A public IP address.
pub type PublicIpAddress = Resource<PublicIpAddressProperties>;

/// A public IP's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PublicIpAddressProperties {
    /// The address; read-only.
    #[serde(skip_serializing)]
    pub ip_address: Option<String>,
    /// `Static` or `Dynamic`.
    #[serde(
        rename = "publicIPAllocationMethod",
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_allocation_method: Option<String>,
    /// `IPv4` or `IPv6`.
    #[serde(
        rename = "publicIPAddressVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_address_version: Option<String>,
    /// Its DNS name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_settings: Option<DnsSettings>,
    /// The IP configuration using it; read-only.
    #[serde(skip_serializing)]
    pub ip_configuration: Option<Reference>,
    /// Minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_in_minutes: Option<i32>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `dnsSettings` of a public IP.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DnsSettings {
    /// The label (`<label>.<location>.cloudapp.azure.com`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain_name_label: Option<String>,
    /// The FQDN; read-only.
    #[serde(skip_serializing)]
    pub fqdn: Option<String>,
    /// Fields not modelled (`reverseFqdn`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A route table.
pub type RouteTable = Resource<RouteTableProperties>;

/// A route table's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteTableProperties {
    /// Its routes, inline.
    #[serde(deserialize_with = "nullable")]
    pub routes: Vec<Route>,
    /// The subnets using it; read-only.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub subnets: Vec<Reference>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled (`disableBgpRoutePropagation`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A route.
pub type Route = Resource<RouteProperties>;

/// A route's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteProperties {
    /// The destination CIDR (a node's pod CIDR).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_prefix: Option<String>,
    /// `VirtualAppliance`, `VnetLocal`, `Internet`, `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop_type: Option<String>,
    /// The next hop, for `VirtualAppliance` (the node's address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop_ip_address: Option<String>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A network security group.
pub type NetworkSecurityGroup = Resource<NetworkSecurityGroupProperties>;

/// A network security group's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkSecurityGroupProperties {
    /// Its rules, inline.
    #[serde(deserialize_with = "nullable")]
    pub security_rules: Vec<SecurityRule>,
    /// Azure's six default rules; read-only.
    #[serde(deserialize_with = "nullable", skip_serializing)]
    pub default_security_rules: Vec<SecurityRule>,
    /// The NICs using it; read-only.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub network_interfaces: Vec<Reference>,
    /// The subnets using it; read-only.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub subnets: Vec<Reference>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A security rule.
pub type SecurityRule = Resource<SecurityRuleProperties>;

/// A security rule's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityRuleProperties {
    /// `Tcp`, `Udp`, `Icmp`, `*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// `*` or a port or range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_port_range: Option<String>,
    /// `80`, `1000-2000`, `*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_port_range: Option<String>,
    /// Several destination ports.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub destination_port_ranges: Vec<String>,
    /// `*`, a CIDR, a service tag (`Internet`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_address_prefix: Option<String>,
    /// Several sources.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub source_address_prefixes: Vec<String>,
    /// The destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_address_prefix: Option<String>,
    /// Several destinations.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub destination_address_prefixes: Vec<String>,
    /// `Allow` or `Deny`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// 100 to 4096, unique per direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `Inbound` or `Outbound`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// Free text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A load balancer.
pub type LoadBalancer = Resource<LoadBalancerProperties>;

/// A load balancer's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancerProperties {
    /// Its frontends.
    #[serde(rename = "frontendIPConfigurations", deserialize_with = "nullable")]
    pub frontend_ip_configurations: Vec<FrontendIpConfiguration>,
    /// Its backend pools.
    #[serde(deserialize_with = "nullable")]
    pub backend_address_pools: Vec<BackendAddressPool>,
    /// Its health probes.
    #[serde(deserialize_with = "nullable")]
    pub probes: Vec<Probe>,
    /// Its rules.
    #[serde(deserialize_with = "nullable")]
    pub load_balancing_rules: Vec<LoadBalancingRule>,
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled (`inboundNatRules`, `outboundRules`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A frontend IP configuration.
pub type FrontendIpConfiguration = Resource<FrontendIpConfigurationProperties>;

/// A frontend's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FrontendIpConfigurationProperties {
    /// The private address (an internal load balancer).
    #[serde(rename = "privateIPAddress", skip_serializing_if = "Option::is_none")]
    pub private_ip_address: Option<String>,
    /// `Dynamic` or `Static`.
    #[serde(
        rename = "privateIPAllocationMethod",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_allocation_method: Option<String>,
    /// The public IP (an external load balancer).
    #[serde(rename = "publicIPAddress", skip_serializing_if = "Option::is_none")]
    pub public_ip_address: Option<Reference>,
    /// The subnet (an internal load balancer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet: Option<Reference>,
    /// The rules using it; read-only.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub load_balancing_rules: Vec<Reference>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A backend address pool.
pub type BackendAddressPool = Resource<BackendAddressPoolProperties>;

/// A backend pool's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackendAddressPoolProperties {
    /// The NICs' IP configurations in it; read-only (membership is set on the NIC).
    #[serde(
        rename = "backendIPConfigurations",
        deserialize_with = "nullable",
        skip_serializing_if = "empty"
    )]
    pub backend_ip_configurations: Vec<Reference>,
    /// The rules using it; read-only.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "empty")]
    pub load_balancing_rules: Vec<Reference>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A health probe.
pub type Probe = Resource<ProbeProperties>;

/// A probe's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProbeProperties {
    /// `Tcp`, `Http`, `Https`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The port probed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Seconds between probes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_in_seconds: Option<i32>,
    /// Failures before a backend is out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number_of_probes: Option<i32>,
    /// The path, for `Http`/`Https`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_path: Option<String>,
    /// Fields not modelled (`probeThreshold`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A load-balancing rule.
pub type LoadBalancingRule = Resource<LoadBalancingRuleProperties>;

/// A rule's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancingRuleProperties {
    /// The frontend.
    #[serde(
        rename = "frontendIPConfiguration",
        skip_serializing_if = "Option::is_none"
    )]
    pub frontend_ip_configuration: Option<Reference>,
    /// The backend pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_address_pool: Option<Reference>,
    /// The probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Reference>,
    /// `Tcp`, `Udp`, `All`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The frontend port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frontend_port: Option<i32>,
    /// The backend port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_port: Option<i32>,
    /// Minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_in_minutes: Option<i32>,
    /// Direct server return.
    #[serde(rename = "enableFloatingIP", skip_serializing_if = "Option::is_none")]
    pub enable_floating_ip: Option<bool>,
    /// TCP reset on idle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_tcp_reset: Option<bool>,
    /// `Default`, `SourceIP`, `SourceIPProtocol`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_distribution: Option<String>,
    /// No outbound SNAT through this rule's frontend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_outbound_snat: Option<bool>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}
