//! CloudStack records: what the CloudStack dialect keeps that the local cloud's own records do
//! not hold. Virtual machines, zones, projects, networks, public IPs (Neutron floating IPs)
//! and volumes are the local cloud's records shown by the dialect; async jobs, load-balancer
//! rules and firewall rules have no counterpart (a rule's traffic is carried by an Octavia
//! load balancer the dialect keeps in step with it). Upstream equivalent: CloudStack's
//! `async_job`, `load_balancing_rules` (+ `load_balancer_vm_map`) and `firewall_rules`
//! (+ `firewall_rules_cidrs`) tables.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{impl_record, Meta};

pub(crate) const CLOUDSTACK_JOBS: &str = "cloudstack_jobs";
pub(crate) const CLOUDSTACK_LB_RULES: &str = "cloudstack_lb_rules";
pub(crate) const CLOUDSTACK_FIREWALL_RULES: &str = "cloudstack_firewall_rules";

/// An async job: the change is made in the transaction that records it, so a stored job is
/// done (`status` 1) or failed (2, the change not made).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AsyncJob {
    #[serde(flatten)]
    pub meta: Meta,
    /// The command that made it (`createLoadBalancerRule`).
    pub command: String,
    /// The user whose keys signed it.
    pub user_id: String,
    /// 1 succeeded, 2 failed.
    pub status: u8,
    /// 0 on success, the error code (530) on failure.
    pub result_code: u16,
    /// `{"loadbalancer": {...}}`, `{"success": true}`, or `{"errorcode", "errortext"}`.
    pub result: Value,
    /// What the job is about (`LoadBalancerRule`, `IpAddress`, `Volume`, ...) and its ID.
    #[serde(default)]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub instance_id: Option<String>,
}

impl_record!(AsyncJob: CLOUDSTACK_JOBS, ("asyncjobs", "asyncjobs", "Async job"), "AsyncJobNotFound");

/// A load-balancer rule of a public IP: `publicport` of the IP forwarded to `privateport` of
/// the assigned VMs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LbRule {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub description: String,
    /// The public IP (a floating IP's ID).
    pub public_ip_id: String,
    pub public_port: u16,
    pub private_port: u16,
    /// `roundrobin`, `leastconn` or `source`.
    pub algorithm: String,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// The guest network of its VMs.
    pub network_id: String,
    /// The assigned VMs (Nova server IDs), in assignment order.
    pub vm_ids: Vec<String>,
}

impl_record!(LbRule: CLOUDSTACK_LB_RULES, ("loadbalancerrule", "loadbalancerrule", "Load balancer rule"), "LoadBalancerRuleNotFound");

/// An ingress firewall rule of a public IP: sources in `cidrs` may reach `protocol` ports
/// `start_port..=end_port` of the IP.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FirewallRule {
    #[serde(flatten)]
    pub meta: Meta,
    pub ip_address_id: String,
    /// `tcp`, `udp`, `icmp` or `all`.
    pub protocol: String,
    pub start_port: Option<u16>,
    pub end_port: Option<u16>,
    pub cidrs: Vec<String>,
}

impl_record!(FirewallRule: CLOUDSTACK_FIREWALL_RULES, ("firewallrule", "firewallrule", "Firewall rule"), "FirewallRuleNotFound");

impl FirewallRule {
    /// Whether the rule lets `protocol` traffic to `port` through.
    pub fn admits(&self, protocol: &str, port: u16) -> bool {
        let proto = self.protocol == "all" || self.protocol == protocol;
        let ports = match (self.start_port, self.end_port) {
            (Some(a), Some(b)) => (a..=b).contains(&port),
            (Some(a), None) => a == port,
            _ => true,
        };
        proto && ports
    }
}
