//! How the load-balancer and firewall rules of a public IP carry traffic (see
//! [`super::rules`]): one Octavia load balancer per public IP, named `cloudstack-<ip id>`
//! and described [`MARK`], kept in step with the IP's rules so that the data plane serves it
//! at the public IP. Upstream equivalent: the virtual router's HAProxy and iptables rules that
//! CloudStack's `LoadBalancingRulesManager` and `FirewallManager` program.

use std::collections::BTreeMap;

use crate::api::network::create_vip_port;
use crate::api::{ApiError, Cloud};
use crate::model::cloudstack::{FirewallRule, LbRule};
use crate::model::compute::server_ports;
use crate::model::network::{FloatingIp, Subnet, SUBNETS};
use crate::model::octavia::{
    listeners_of, members_of, Common, Listener, ListenerTls, LoadBalancer, Member, Pool, Ref,
    LISTENERS, LISTENER_TIMEOUTS, LOADBALANCERS, MEMBERS,
};
use crate::model::Record;
use crate::store::{Read, Tx};

/// The description of the Octavia objects this module makes.
const MARK: &str = "CloudStack public IP";

pub(super) fn lb_name(ip_id: &str) -> String {
    format!("cloudstack-{ip_id}")
}

/// The CIDRs the firewall rules of public IP `ip_id` let reach `protocol` port `port`.
pub(super) fn allowed(r: &impl Read, ip_id: &str, protocol: &str, port: u16) -> Vec<String> {
    let mut cidrs: Vec<String> = FirewallRule::list(r)
        .into_iter()
        .filter(|f| f.ip_address_id == ip_id && f.admits(protocol, port))
        .flat_map(|f| f.cidrs)
        .collect();
    cidrs.sort();
    cidrs.dedup();
    cidrs
}

fn common(project_id: &str, name: &str) -> Common {
    let mut c = Common::new(project_id);
    c.name = name.to_owned();
    c.description = MARK.to_owned();
    c
}

fn octavia_algorithm(algorithm: &str) -> &'static str {
    match algorithm {
        "leastconn" => "LEAST_CONNECTIONS",
        "source" => "SOURCE_IP",
        _ => "ROUND_ROBIN",
    }
}

fn find_lb(r: &impl Read, ip_id: &str) -> Option<LoadBalancer> {
    let name = lb_name(ip_id);
    r.list::<LoadBalancer>(LOADBALANCERS)
        .into_iter()
        .find(|l| l.common.name == name && l.common.description == MARK)
}

/// The address of VM `vm` on `network` (its first NIC there).
fn vm_address(r: &impl Read, vm: &str, network: &str) -> Option<String> {
    server_ports(r, vm)
        .iter()
        .filter(|p| p.network_id == network)
        .find_map(|p| p.fixed_ips.first().map(|f| f.ip_address.clone()))
}

/// Brings public IP `ip_id`'s Octavia load balancer in line with its rules (per the module
/// docs): made with the first rule, removed with the last.
pub(super) fn sync(tx: &mut Tx<'_>, cloud: &Cloud, ip_id: &str) -> Result<(), ApiError> {
    let rules: Vec<LbRule> = LbRule::list(tx)
        .into_iter()
        .filter(|l| l.public_ip_id == ip_id)
        .collect();
    let fip = FloatingIp::get(tx, ip_id);
    let (Some(mut fip), Some(first)) = (fip, rules.first()) else {
        if let Some(lb) = find_lb(tx, ip_id) {
            crate::api::loadbalancer::delete_tree(tx, &lb.common.meta.id)?;
        }
        return Ok(());
    };
    let project = fip.meta.project_id.clone();
    let lb = match find_lb(tx, ip_id) {
        Some(lb) => lb,
        None => {
            let used: Vec<String> = tx
                .list::<LoadBalancer>(LOADBALANCERS)
                .into_iter()
                .map(|l| l.vip_address)
                .collect();
            let vip = cloud
                .config
                .lb_vip_pool
                .allocate(&used)
                .ok_or_else(|| {
                    ApiError::internal("No more addresses in the local cloud's VIP pool")
                })?
                .to_string();
            let common = common(&project, &lb_name(ip_id));
            let subnet = tx
                .list::<Subnet>(SUBNETS)
                .into_iter()
                .find(|s| s.network_id == first.network_id)
                .ok_or_else(|| ApiError::bad_request("The rule's network has no subnet"))?;
            let port = create_vip_port(tx, &common.meta.id, &project, &subnet, &vip)?;
            LoadBalancer {
                common,
                vip_address: vip,
                vip_port_id: port.meta.id,
                vip_subnet_id: Some(subnet.meta.id),
                vip_network_id: Some(subnet.network_id),
                vip_qos_policy_id: None,
                provider: "amphora".into(),
                flavor_id: None,
                availability_zone: None,
            }
        }
    };
    let mut lb = lb;
    lb.common.touch();
    lb.put(tx)?;
    let lb_id = lb.common.meta.id.clone();
    let wanted = |l: &Listener| {
        rules.iter().any(|r| {
            r.public_port == l.protocol_port && r.protocol.eq_ignore_ascii_case(&l.protocol)
        })
    };
    for l in listeners_of(tx, &lb_id) {
        if !wanted(&l) {
            if let Some(pool) = &l.default_pool_id {
                crate::api::loadbalancer::delete_pool(tx, pool);
            }
            tx.delete(LISTENERS, l.id());
        }
    }
    for rule in &rules {
        let protocol = rule.protocol.to_ascii_uppercase();
        let sources = allowed(tx, ip_id, &rule.protocol, rule.public_port);
        let name = format!("{}-{}", lb_name(ip_id), rule.public_port);
        let existing = listeners_of(tx, &lb_id)
            .into_iter()
            .find(|l| l.protocol_port == rule.public_port && l.protocol == protocol);
        let pool_id = match existing {
            Some(mut l) => {
                if l.allowed_cidrs.as_ref() != Some(&sources) {
                    l.allowed_cidrs = Some(sources);
                    l.common.touch();
                    l.put(tx)?;
                }
                l.default_pool_id.unwrap_or_default()
            }
            None => {
                let pool = Pool {
                    common: common(&project, &name),
                    loadbalancers: Ref::to(&lb_id),
                    protocol: protocol.clone(),
                    lb_algorithm: octavia_algorithm(&rule.algorithm).into(),
                    session_persistence: None,
                    tls_enabled: false,
                    tls_container_ref: None,
                    ca_tls_container_ref: None,
                    crl_container_ref: None,
                };
                let timeouts: BTreeMap<&str, i64> = LISTENER_TIMEOUTS.into_iter().collect();
                let t = |k: &str| timeouts.get(k).copied().unwrap_or(0);
                let listener = Listener {
                    common: common(&project, &name),
                    loadbalancers: Ref::to(&lb_id),
                    protocol,
                    protocol_port: rule.public_port,
                    default_pool_id: Some(pool.id().to_owned()),
                    connection_limit: -1,
                    timeout_client_data: t("timeout_client_data"),
                    timeout_member_connect: t("timeout_member_connect"),
                    timeout_member_data: t("timeout_member_data"),
                    timeout_tcp_inspect: t("timeout_tcp_inspect"),
                    insert_headers: BTreeMap::new(),
                    allowed_cidrs: Some(sources),
                    default_tls_container_ref: None,
                    sni_container_refs: Vec::new(),
                    l7policies: Vec::new(),
                    tls: ListenerTls::default(),
                };
                pool.put(tx)?;
                listener.put(tx)?;
                pool.id().to_owned()
            }
        };
        if let Some(mut pool) = Pool::get(tx, &pool_id) {
            let algorithm = octavia_algorithm(&rule.algorithm);
            if pool.lb_algorithm != algorithm {
                pool.lb_algorithm = algorithm.into();
                pool.common.touch();
                pool.put(tx)?;
            }
        }
        let addresses: Vec<(String, String)> = rule
            .vm_ids
            .iter()
            .filter_map(|vm| Some((vm.clone(), vm_address(tx, vm, &rule.network_id)?)))
            .collect();
        for m in members_of(tx, &pool_id) {
            let keep = m.protocol_port == rule.private_port
                && addresses.iter().any(|(_, ip)| *ip == m.address);
            if !keep {
                tx.delete(MEMBERS, m.id());
            }
        }
        let members = members_of(tx, &pool_id);
        for (vm, ip) in &addresses {
            if members.iter().any(|m| m.address == *ip) {
                continue;
            }
            Member {
                common: common(&project, vm),
                pool_id: pool_id.clone(),
                address: ip.clone(),
                protocol_port: rule.private_port,
                weight: 1,
                backup: false,
                subnet_id: None,
                monitor_address: None,
                monitor_port: None,
            }
            .put(tx)?;
        }
    }
    if fip.port_id.as_deref() != Some(lb.vip_port_id.as_str()) {
        fip.port_id = Some(lb.vip_port_id.clone());
        fip.fixed_ip_address = Some(lb.vip_address.clone());
        fip.meta.touch();
        fip.put(tx)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithms_map_onto_octavias() {
        assert_eq!(octavia_algorithm("roundrobin"), "ROUND_ROBIN");
        assert_eq!(octavia_algorithm("leastconn"), "LEAST_CONNECTIONS");
        assert_eq!(octavia_algorithm("source"), "SOURCE_IP");
    }
}
