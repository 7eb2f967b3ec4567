//! Member security groups (`--enforce-member-security-groups`): whether the Neutron security
//! groups of a member's port let the load balancer in, as Neutron's firewall decides for an
//! amphora's packets to a member in a real cloud.
//!
//! The member's port is the port holding the member's address among its fixed IPs; a member on
//! an address no port holds (a raw IP) is not filtered, nor is a port of Neutron's own devices
//! (`network:*`, which carry no groups). Otherwise Neutron's rule applies: traffic is admitted
//! only by an ingress rule of one of the port's groups whose ethertype matches, whose protocol is
//! unset or the pool's (TCP for HTTP/HTTPS/PROXY/TERMINATED_HTTPS), whose port range is unset or
//! holds the port, and whose remote side covers the load balancer. The amphora reaches a member
//! from its own port on the member's subnet (the member's `subnet_id`, else the load balancer's
//! VIP subnet), whose address the local cloud does not allocate: so a `remote_ip_prefix` covers
//! it only when it holds that whole subnet (or is unset), and a `remote_group_id` never does (the
//! amphora's port is in no group of the project, as in Octavia, whose amphorae carry a group of
//! the service project). A port without groups admits nothing.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::model::network::{
    Port, SecurityGroupRule, Subnet, PORTS, SECURITY_GROUP_RULES, SUBNETS,
};
use crate::model::octavia::{LoadBalancer, Member, Pool};
use crate::store::Read;

use super::proxy::parse_cidrs;

/// What the member's groups admit from its load balancer: the member port, the monitor port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Admits {
    pub(super) traffic: bool,
    pub(super) monitor: bool,
}

/// The network side of the store the check needs, read once per reconcile.
pub(super) struct Firewall {
    /// Groups of the port holding each address (ports of `network:*` devices left out).
    groups_by_ip: HashMap<IpAddr, Vec<String>>,
    rules: HashMap<String, Vec<SecurityGroupRule>>,
    subnets: HashMap<String, Subnet>,
}

impl Firewall {
    pub(super) fn read(r: &impl Read) -> Firewall {
        let mut groups_by_ip = HashMap::new();
        for p in r.list::<Port>(PORTS) {
            if p.device_owner.starts_with("network:") {
                continue;
            }
            for f in &p.fixed_ips {
                if let Ok(ip) = f.ip_address.parse::<IpAddr>() {
                    groups_by_ip.insert(ip, p.security_groups.clone());
                }
            }
        }
        let mut rules: HashMap<String, Vec<SecurityGroupRule>> = HashMap::new();
        for rule in r.list::<SecurityGroupRule>(SECURITY_GROUP_RULES) {
            rules
                .entry(rule.security_group_id.clone())
                .or_default()
                .push(rule);
        }
        let subnets = r
            .list::<Subnet>(SUBNETS)
            .into_iter()
            .map(|s| (s.meta.id.clone(), s))
            .collect();
        Firewall {
            groups_by_ip,
            rules,
            subnets,
        }
    }

    /// What `member` of `pool` (of load balancer `lb`, when known) is reached on.
    /// `monitor_udp`: the pool's health monitor probes over UDP (UDP-CONNECT).
    pub(super) fn admits(
        &self,
        member: &Member,
        pool: &Pool,
        lb: Option<&LoadBalancer>,
        monitor_udp: bool,
    ) -> Admits {
        let open = Admits {
            traffic: true,
            monitor: true,
        };
        let Ok(ip) = member.address.parse::<IpAddr>() else {
            return open;
        };
        let Some(groups) = self.groups_by_ip.get(&ip) else {
            return open;
        };
        let source = member
            .subnet_id
            .as_deref()
            .or(lb.and_then(|l| l.vip_subnet_id.as_deref()))
            .and_then(|id| self.subnets.get(id))
            .and_then(|s| {
                parse_cidrs(std::slice::from_ref(&s.cidr))
                    .into_iter()
                    .next()
            });
        let protocol = match pool.protocol.as_str() {
            "UDP" => "udp",
            "SCTP" => "sctp",
            _ => "tcp",
        };
        let monitor_port = member.monitor_port.unwrap_or(member.protocol_port);
        let admitted = |protocol: &str, port: u16| {
            groups
                .iter()
                .filter_map(|g| self.rules.get(g))
                .flatten()
                .any(|r| rule_admits(r, ip, protocol, port, source))
        };
        Admits {
            traffic: admitted(protocol, member.protocol_port),
            monitor: admitted(if monitor_udp { "udp" } else { "tcp" }, monitor_port),
        }
    }
}

/// Whether ingress `rule` lets the load balancer (somewhere in `source`, a network/prefix) reach
/// `ip:port` over `protocol`.
fn rule_admits(
    rule: &SecurityGroupRule,
    ip: IpAddr,
    protocol: &str,
    port: u16,
    source: Option<(IpAddr, u8)>,
) -> bool {
    let ethertype = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
    if rule.direction != "ingress" || rule.ethertype != ethertype || rule.remote_group_id.is_some()
    {
        return false;
    }
    // Neutron accepts protocol names and numbers; "any" and an unset protocol match all.
    let number = match protocol {
        "tcp" => "6",
        "udp" => "17",
        _ => "132",
    };
    let protocol_ok = match rule.protocol.as_deref() {
        None | Some("any") => true,
        Some(p) => p.eq_ignore_ascii_case(protocol) || p == number,
    };
    // Neutron applies a port range only to TCP, UDP, SCTP (and the like).
    let min = rule.port_range_min.unwrap_or(1);
    let max = rule.port_range_max.unwrap_or(u16::MAX);
    let port_ok = rule.protocol.is_none() || (min..=max).contains(&port);
    let remote_ok = match rule.remote_ip_prefix.as_deref() {
        None => true,
        Some(prefix) => match (parse_cidrs(&[prefix.to_owned()]).first(), source) {
            (Some(&(net, bits)), Some((src, src_bits))) => {
                bits <= src_bits && super::proxy::admitted(&[(net, bits)], src)
            }
            // The load balancer's subnet is unknown: only an all-covering prefix admits it.
            (Some(&(_, bits)), None) => bits == 0,
            (None, _) => false,
        },
    };
    protocol_ok && port_ok && remote_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Meta;

    fn rule(
        protocol: Option<&str>,
        ports: Option<(u16, u16)>,
        prefix: Option<&str>,
    ) -> SecurityGroupRule {
        SecurityGroupRule {
            meta: Meta::new("p"),
            security_group_id: "g".into(),
            direction: "ingress".into(),
            ethertype: "IPv4".into(),
            protocol: protocol.map(str::to_owned),
            port_range_min: ports.map(|p| p.0),
            port_range_max: ports.map(|p| p.1),
            remote_ip_prefix: prefix.map(str::to_owned),
            remote_group_id: None,
            description: String::new(),
        }
    }

    #[test]
    fn a_rule_admits_the_member_subnet_on_its_port_only() {
        let ip = IpAddr::from([127, 1, 0, 5]);
        let subnet = Some((IpAddr::from([127, 1, 0, 0]), 16));
        let node_port = rule(Some("tcp"), Some((30080, 30080)), Some("127.1.0.0/16"));
        assert!(rule_admits(&node_port, ip, "tcp", 30080, subnet));
        assert!(!rule_admits(&node_port, ip, "tcp", 30081, subnet));
        assert!(!rule_admits(&node_port, ip, "udp", 30080, subnet));
        // A prefix narrower than the subnet does not cover the amphora's unknown address.
        let narrow = rule(Some("tcp"), None, Some("127.1.0.0/24"));
        assert!(!rule_admits(&narrow, ip, "tcp", 30080, subnet));
        let any = rule(None, None, Some("0.0.0.0/0"));
        assert!(rule_admits(&any, ip, "udp", 53, subnet));
        assert!(rule_admits(&any, ip, "tcp", 1, None));
        assert!(rule_admits(
            &rule(Some("6"), None, None),
            ip,
            "tcp",
            80,
            subnet
        ));
        let mut from_group = rule(None, None, None);
        from_group.remote_group_id = Some("g".into());
        assert!(!rule_admits(&from_group, ip, "tcp", 80, subnet));
        let mut egress = rule(None, None, None);
        egress.direction = "egress".into();
        assert!(!rule_admits(&egress, ip, "tcp", 80, subnet));
        let mut v6 = rule(None, None, None);
        v6.ethertype = "IPv6".into();
        assert!(!rule_admits(&v6, ip, "tcp", 80, subnet));
    }
}
