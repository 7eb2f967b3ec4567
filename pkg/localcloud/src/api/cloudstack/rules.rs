//! Public IP addresses, load-balancer rules and firewall rules, and how they carry traffic.
//! A public IP is a floating IP of the external network (`associateIpAddress`); its rules are
//! kept as one Octavia load balancer per public IP ([`super::forwarding`]), which the
//! existing data plane serves at the public IP: the floating IP forwards
//! to the load balancer's VIP (taken from the VIP pool, its port on the rule's guest network),
//! one listener per load-balancer rule on its `publicport` (TCP or UDP), whose pool (the
//! rule's algorithm: `roundrobin` → `ROUND_ROBIN`, `leastconn` → `LEAST_CONNECTIONS`,
//! `source` → `SOURCE_IP`) has the assigned VMs' NIC addresses on the rule's network at
//! `privateport`. Firewall rules filter it: a listener's `allowed_cidrs` are the CIDRs of the
//! IP's firewall rules covering its protocol and port, so an IP without one lets nobody in,
//! as CloudStack's isolated networks; `openfirewall` (default true, as CloudStack outside
//! VPCs) makes the rule's firewall rule for `0.0.0.0/0` with the load-balancer rule.

use std::sync::Arc;

use serde_json::{json, Value};

use super::compute::{guest_network, vm_view, zone_id};
use super::forwarding::{allowed, sync};
use super::{covers, filter, job, keyword, list, ownership, CsError, CsResult, Outcome, Req};
use crate::api::network::{new_floating_ip, FloatingIpSpec};
use crate::api::zones::known_zones;
use crate::api::Cloud;
use crate::model::cloudstack::{FirewallRule, LbRule};
use crate::model::compute::{server_ports, Related, Server};
use crate::model::network::{FloatingIp, Network, Port, NETWORKS};
use crate::model::{Meta, Record};
use crate::store::Read;

/// The description of the floating IPs `associateIpAddress` makes.
const IP_MARK: &str = "CloudStack public IP address";

fn default_zone(r: &impl Read) -> String {
    known_zones(r)
        .into_iter()
        .next()
        .unwrap_or_else(|| crate::defaults::AVAILABILITY_ZONE.into())
}

/// The guest network of a public IP: the one it was associated for, else the network of its
/// first rule or of the port it forwards to.
pub(super) fn network_of_ip(r: &impl Read, f: &FloatingIp) -> Option<String> {
    f.description
        .strip_prefix(IP_MARK)
        .and_then(|rest| rest.strip_prefix(" for network "))
        .map(str::to_owned)
        .or_else(|| {
            LbRule::list(r)
                .into_iter()
                .find(|l| l.public_ip_id == f.meta.id)
                .map(|l| l.network_id)
        })
        .or_else(|| {
            let port = Port::get(r, f.port_id.as_deref()?)?;
            Some(port.network_id)
        })
}

fn find_ip(r: &impl Read, req: &Req, key: &str) -> CsResult<FloatingIp> {
    let id = req.required(key)?;
    FloatingIp::get(r, id).ok_or_else(|| req.no_entity(key, id))
}

// ------------------------------------------------------------------ public IPs

/// `associateIpAddress` (`networkid`, `zoneid`, `projectid`): a new floating IP of the
/// external network.
pub(super) async fn associate_ip_address(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let (project, network) = cloud.store.read(|r| {
        let project = req.project(r)?;
        let network = match req.get("networkid") {
            Some(id) => Some(
                guest_network(r, id)
                    .ok_or_else(|| req.no_entity("networkid", id))?
                    .meta
                    .id,
            ),
            None => None,
        };
        if let Some(z) = req.get("zoneid") {
            super::compute::zone_named(r, z).ok_or_else(|| req.no_entity("zoneid", z))?;
        }
        if network.is_none() && req.get("zoneid").is_none() {
            return Err(CsError::invalid(
                "Unable to figure out zone to assign IP to. Please specify either zoneId, or networkId, or vpcId in the call",
            ));
        }
        Ok::<_, CsError>((project, network))
    })?;
    let id = crate::time::new_id();
    let fip_id = id.clone();
    job(cloud, req, "IpAddress", Some(id), move |tx| {
        let external = tx
            .list::<Network>(NETWORKS)
            .into_iter()
            .find(|n| n.external)
            .ok_or_else(|| {
                CsError::state("The zone has no public network to take an address from")
            })?;
        let mut fip = new_floating_ip(
            tx,
            FloatingIpSpec {
                network_id: external.meta.id,
                subnet_id: None,
                address: None,
                project_id: project.id.clone(),
                port_id: None,
                fixed_ip: None,
                description: match &network {
                    Some(n) => format!("{IP_MARK} for network {n}"),
                    None => IP_MARK.into(),
                },
            },
        )
        .map_err(|e| CsError::state(format!("Insufficient address capacity: {}", e.message)))?;
        // The ID the answer named.
        FloatingIp::delete(tx, &fip.meta.id);
        fip.meta.id = fip_id.clone();
        fip.put(tx)?;
        tracing::info!(ip = %fip.floating_ip_address, "associated CloudStack public IP");
        let zone = default_zone(tx);
        Ok(Outcome::Done(
            json!({"ipaddress": public_ip_view(tx, &fip, &zone)}),
            Some(fip_id),
        ))
    })
    .await
}

/// `disassociateIpAddress` (`id`): releases the IP with its rules and their load balancer.
pub(super) async fn disassociate_ip_address(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let fip = cloud.store.read(|r| find_ip(r, req, "id"))?;
    let c = cloud.clone();
    job(cloud, req, "IpAddress", None, move |tx| {
        let id = fip.meta.id.clone();
        if !fip.description.starts_with(IP_MARK) && fip.port_id.is_some() {
            return Ok(Outcome::Refused(
                CsError::state(format!(
                    "Public IP {} is in use by a resource this API did not make",
                    fip.floating_ip_address
                )),
                Some(id),
            ));
        }
        for rule in LbRule::list(tx)
            .into_iter()
            .filter(|l| l.public_ip_id == id)
        {
            LbRule::delete(tx, rule.id());
        }
        for rule in FirewallRule::list(tx)
            .into_iter()
            .filter(|f| f.ip_address_id == id)
        {
            FirewallRule::delete(tx, rule.id());
        }
        sync(tx, &c, &id)?;
        FloatingIp::delete(tx, &id);
        tracing::info!(ip = %fip.floating_ip_address, "disassociated CloudStack public IP");
        Ok(Outcome::Done(json!({"success": true}), Some(id)))
    })
    .await
}

/// `listPublicIpAddresses` (`id`, `ipaddress`, `associatednetworkid`, `projectid`,
/// `isstaticnat`, `keyword`): the floating IPs of the projects.
pub(super) fn list_public_ip_addresses(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items = cloud.store.read(|r| {
        let projects = req.projects(r)?;
        let zone = default_zone(r);
        Ok::<_, CsError>(
            FloatingIp::list(r)
                .into_iter()
                .filter(|f| covers(&projects, &f.meta.project_id))
                .map(|f| public_ip_view(r, &f, &zone))
                .collect::<Vec<_>>(),
        )
    })?;
    filter(req, "id", "id", &mut items);
    filter(req, "ipaddress", "ipaddress", &mut items);
    filter(
        req,
        "associatednetworkid",
        "associatednetworkid",
        &mut items,
    );
    filter(req, "zoneid", "zoneid", &mut items);
    if let Some(nat) = req.get("isstaticnat") {
        let nat = nat.eq_ignore_ascii_case("true");
        items.retain(|i| i["isstaticnat"] == nat);
    }
    keyword(req, "ipaddress", &mut items);
    list(req, "publicipaddress", items)
}

/// A public IP's view (a floating IP of the external network).
fn public_ip_view(r: &impl Read, f: &FloatingIp, zone: &str) -> Value {
    let ports = Port::list(r);
    let port = f
        .port_id
        .as_deref()
        .and_then(|id| ports.iter().find(|p| p.meta.id == id));
    // Forwarding to a VM's port is CloudStack's static NAT.
    let vm = port
        .filter(|p| p.device_owner.starts_with("compute:"))
        .and_then(|p| Server::get(r, &p.device_id));
    let associated = network_of_ip(r, f);
    let mut v = json!({
        "id": f.meta.id, "ipaddress": f.floating_ip_address, "allocated": super::cs_date(&f.meta.created_at),
        "zoneid": zone_id(zone), "zonename": zone, "issourcenat": false, "isstaticnat": vm.is_some(),
        "issystem": false, "forvirtualnetwork": true, "state": "Allocated",
        "isportable": false, "fordisplay": true, "tags": [],
        "associatednetworkid": associated, "networkid": f.floating_network_id,
    });
    if let Some(vm) = vm {
        v["virtualmachineid"] = json!(vm.meta.id);
        v["virtualmachinename"] = json!(vm.name);
        v["virtualmachinedisplayname"] = json!(vm.name);
    }
    if let Some(o) = v.as_object_mut() {
        o.extend(ownership(r, &f.meta.project_id));
    }
    v
}

// ------------------------------------------------------------------ load-balancer rules

fn rule_view(r: &impl Read, rule: &LbRule) -> Value {
    let ip = FloatingIp::get(r, &rule.public_ip_id);
    let cidrs: Vec<String> = allowed(r, &rule.public_ip_id, &rule.protocol, rule.public_port);
    let zone = default_zone(r);
    let mut v = json!({
        "id": rule.meta.id, "name": rule.name, "description": rule.description,
        "publicipid": rule.public_ip_id,
        "publicip": ip.map(|f| f.floating_ip_address).unwrap_or_default(),
        "publicport": rule.public_port.to_string(), "privateport": rule.private_port.to_string(),
        "algorithm": rule.algorithm, "protocol": rule.protocol, "networkid": rule.network_id,
        "cidrlist": cidrs.join(","), "state": "Active",
        "zoneid": zone_id(&zone), "zonename": zone, "fordisplay": true,
        "tags": [],
    });
    if let Some(o) = v.as_object_mut() {
        o.extend(ownership(r, &rule.meta.project_id));
    }
    v
}

fn find_rule(r: &impl Read, req: &Req) -> CsResult<LbRule> {
    let id = req.required("id")?;
    LbRule::get(r, id).ok_or_else(|| req.no_entity("id", id))
}

/// A port parameter (1-65535).
fn port(req: &Req, key: &str) -> CsResult<u16> {
    req.required(key)?;
    Ok(req.number::<u16>(key, 1..=65535)?.unwrap_or_default())
}

/// `createLoadBalancerRule` (`publicipid`, `publicport`, `privateport`, `algorithm`, `name`,
/// `protocol`, `networkid`, `openfirewall`, `description`, `cidrlist`).
pub(super) async fn create_load_balancer_rule(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let name = req.required("name")?.to_owned();
    let algorithm = req.required("algorithm")?.to_ascii_lowercase();
    if !matches!(algorithm.as_str(), "roundrobin" | "leastconn" | "source") {
        return Err(CsError::invalid(format!(
            "Invalid algorithm: {algorithm} (roundrobin, leastconn or source)"
        )));
    }
    let private_port = port(req, "privateport")?;
    let public_port = port(req, "publicport")?;
    let protocol = req.get("protocol").unwrap_or("tcp").to_ascii_lowercase();
    if !matches!(protocol.as_str(), "tcp" | "udp") {
        return Err(CsError::invalid(format!(
            "Invalid protocol: {protocol} (tcp or udp)"
        )));
    }
    let open = req.flag("openfirewall", true)?;
    let cidrs = cidr_list(req)?;
    let description = req.get("description").unwrap_or_default().to_owned();
    let (fip, network) = cloud.store.read(|r| {
        let fip = find_ip(r, req, "publicipid")?;
        let network = match req.get("networkid") {
            Some(id) => guest_network(r, id).ok_or_else(|| req.no_entity("networkid", id))?,
            None => network_of_ip(r, &fip)
                .and_then(|id| guest_network(r, &id))
                .ok_or_else(|| {
                    CsError::invalid(
                        "Unable to execute API command createloadbalancerrule: networkid is required for a public IP without rules",
                    )
                })?,
        };
        Ok::<_, CsError>((fip, network))
    })?;
    let mut meta = Meta::new(fip.meta.project_id.clone());
    let id = meta.id.clone();
    let c = cloud.clone();
    job(cloud, req, "LoadBalancerRule", Some(id.clone()), move |tx| {
        let clash = LbRule::list(tx).into_iter().find(|l| {
            l.public_ip_id == fip.meta.id && l.public_port == public_port && l.protocol == protocol
        });
        if let Some(other) = clash {
            return Ok(Outcome::Refused(
                CsError::state(format!(
                    "The range specified, {public_port}-{public_port}, conflicts with rule {} which has {}-{}",
                    other.meta.id, other.public_port, other.public_port
                )),
                Some(id),
            ));
        }
        meta.id = id.clone();
        let rule = LbRule {
            meta,
            name,
            description,
            public_ip_id: fip.meta.id.clone(),
            public_port,
            private_port,
            algorithm,
            protocol: protocol.clone(),
            network_id: network.meta.id,
            vm_ids: Vec::new(),
        };
        rule.put(tx)?;
        if open {
            FirewallRule {
                meta: Meta::new(fip.meta.project_id.clone()),
                ip_address_id: fip.meta.id.clone(),
                protocol,
                start_port: Some(public_port),
                end_port: Some(public_port),
                cidrs: if cidrs.is_empty() { vec!["0.0.0.0/0".into()] } else { cidrs },
            }
            .put(tx)?;
        }
        sync(tx, &c, &fip.meta.id)?;
        tracing::info!(rule = %rule.name, ip = %fip.floating_ip_address, port = public_port, "created CloudStack load balancer rule");
        Ok(Outcome::Done(
            json!({"loadbalancer": rule_view(tx, &rule)}),
            Some(id),
        ))
    })
    .await
}

/// `deleteLoadBalancerRule` (`id`).
pub(super) async fn delete_load_balancer_rule(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let rule = cloud.store.read(|r| find_rule(r, req))?;
    let c = cloud.clone();
    job(cloud, req, "LoadBalancerRule", None, move |tx| {
        LbRule::delete(tx, rule.id());
        sync(tx, &c, &rule.public_ip_id)?;
        tracing::info!(rule = %rule.name, "deleted CloudStack load balancer rule");
        Ok(Outcome::Done(json!({"success": true}), Some(rule.meta.id)))
    })
    .await
}

/// `assignToLoadBalancerRule` / `removeFromLoadBalancerRule` (`id`, `virtualmachineids`).
pub(super) async fn assign(cloud: &Arc<Cloud>, req: &Req, add: bool) -> CsResult<Value> {
    let vms: Vec<String> = req
        .required("virtualmachineids")?
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let rule = cloud.store.read(|r| {
        let rule = find_rule(r, req)?;
        for vm in &vms {
            let s = Server::get(r, vm).ok_or_else(|| req.no_entity("virtualmachineids", vm))?;
            if s.meta.project_id != rule.meta.project_id {
                return Err(CsError::invalid(format!(
                    "VM {vm} is not in the project of load balancer rule {}",
                    rule.meta.id
                )));
            }
        }
        Ok::<_, CsError>(rule)
    })?;
    let c = cloud.clone();
    job(cloud, req, "LoadBalancerRule", None, move |tx| {
        let mut rule = LbRule::find(tx, rule.id())?;
        let id = rule.meta.id.clone();
        if add {
            if let Some(vm) = vms.iter().find(|v| rule.vm_ids.contains(v)) {
                return Ok(Outcome::Refused(
                    CsError::invalid(format!(
                        "VM {vm} is already assigned to load balancer rule {id}"
                    )),
                    Some(id),
                ));
            }
            let off_network = vms.iter().find(|vm| {
                !server_ports(tx, vm)
                    .iter()
                    .any(|p| p.network_id == rule.network_id)
            });
            if let Some(vm) = off_network {
                return Ok(Outcome::Refused(
                    CsError::invalid(format!(
                        "VM {vm} has no NIC in network {} of load balancer rule {id}",
                        rule.network_id
                    )),
                    Some(id),
                ));
            }
            rule.vm_ids.extend(vms.iter().cloned());
        } else {
            if let Some(vm) = vms.iter().find(|v| !rule.vm_ids.contains(v)) {
                return Ok(Outcome::Refused(
                    CsError::invalid(format!(
                        "VM {vm} is not assigned to load balancer rule {id}"
                    )),
                    Some(id),
                ));
            }
            rule.vm_ids.retain(|v| !vms.contains(v));
        }
        rule.meta.touch();
        rule.put(tx)?;
        sync(tx, &c, &rule.public_ip_id)?;
        Ok(Outcome::Done(json!({"success": true}), Some(id)))
    })
    .await
}

/// `listLoadBalancerRules` (`id`, `name`, `publicipid`, `virtualmachineid`, `networkid`,
/// `zoneid`, `projectid`, `keyword`).
pub(super) fn list_load_balancer_rules(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items = cloud.store.read(|r| {
        let projects = req.projects(r)?;
        let mut rules: Vec<LbRule> = LbRule::list(r)
            .into_iter()
            .filter(|l| covers(&projects, &l.meta.project_id))
            .collect();
        if let Some(vm) = req.get("virtualmachineid") {
            rules.retain(|l| l.vm_ids.iter().any(|v| v == vm));
        }
        rules.sort_by(|a, b| a.meta.created_at.cmp(&b.meta.created_at));
        Ok::<_, CsError>(rules.iter().map(|l| rule_view(r, l)).collect::<Vec<_>>())
    })?;
    filter(req, "id", "id", &mut items);
    filter(req, "name", "name", &mut items);
    filter(req, "publicipid", "publicipid", &mut items);
    filter(req, "networkid", "networkid", &mut items);
    filter(req, "zoneid", "zoneid", &mut items);
    keyword(req, "name", &mut items);
    list(req, "loadbalancerrule", items)
}

/// `listLoadBalancerRuleInstances` (`id`, `applied`): the rule's VMs.
pub(super) fn list_load_balancer_rule_instances(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let items = cloud.store.read(|r| {
        let rule = find_rule(r, req)?;
        let rel = Related::load(r);
        let vms: Vec<Value> = rule
            .vm_ids
            .iter()
            .filter_map(|id| Server::get(r, id))
            .map(|s| vm_view(r, &rel, &s))
            .collect();
        Ok::<_, CsError>(vms)
    })?;
    list(req, "loadbalancerruleinstance", items)
}

// ------------------------------------------------------------------ firewall rules

/// `cidrlist`: comma-separated IPv4 CIDRs.
fn cidr_list(req: &Req) -> CsResult<Vec<String>> {
    let Some(list) = req.get("cidrlist") else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            let ok = c.split_once('/').is_some_and(|(ip, len)| {
                ip.parse::<std::net::Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
            });
            if ok {
                Ok(c.to_owned())
            } else {
                Err(CsError::invalid(format!(
                    "Source cidrs formatting error {c}"
                )))
            }
        })
        .collect()
}

fn firewall_view(r: &impl Read, f: &FirewallRule) -> Value {
    let ip = FloatingIp::get(r, &f.ip_address_id);
    let mut v = json!({
        "id": f.meta.id, "protocol": f.protocol, "ipaddressid": f.ip_address_id,
        "ipaddress": ip.as_ref().map(|i| i.floating_ip_address.clone()).unwrap_or_default(),
        "cidrlist": f.cidrs.join(","), "state": "Active", "fordisplay": true, "tags": [],
        "networkid": ip.and_then(|i| network_of_ip(r, &i)),
        "purpose": "Firewall",
    });
    if let Some(p) = f.start_port {
        v["startport"] = json!(p);
    }
    if let Some(p) = f.end_port {
        v["endport"] = json!(p);
    }
    v
}

/// `createFirewallRule` (`ipaddressid`, `protocol`, `startport`, `endport`, `cidrlist`).
pub(super) async fn create_firewall_rule(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let protocol = req.required("protocol")?.to_ascii_lowercase();
    if !matches!(protocol.as_str(), "tcp" | "udp" | "icmp" | "all") {
        return Err(CsError::invalid(format!(
            "Invalid protocol: {protocol} (tcp, udp, icmp or all)"
        )));
    }
    let start = req.number::<u16>("startport", 1..=65535)?;
    let end = req.number::<u16>("endport", 1..=65535)?.or(start);
    if let (Some(a), Some(b)) = (start, end) {
        if a > b {
            return Err(CsError::invalid(format!(
                "Start port {a} can't be bigger than end port {b}"
            )));
        }
    }
    if matches!(protocol.as_str(), "tcp" | "udp") && start.is_none() {
        return Err(CsError::invalid(
            "Unable to execute API command createfirewallrule due to missing parameter startport",
        ));
    }
    let mut cidrs = cidr_list(req)?;
    if cidrs.is_empty() {
        cidrs.push("0.0.0.0/0".into());
    }
    let fip = cloud.store.read(|r| find_ip(r, req, "ipaddressid"))?;
    let meta = Meta::new(fip.meta.project_id.clone());
    let id = meta.id.clone();
    let c = cloud.clone();
    job(cloud, req, "FirewallRule", Some(id.clone()), move |tx| {
        let rule = FirewallRule {
            meta,
            ip_address_id: fip.meta.id.clone(),
            protocol,
            start_port: start,
            end_port: end,
            cidrs,
        };
        rule.put(tx)?;
        sync(tx, &c, &fip.meta.id)?;
        tracing::info!(ip = %fip.floating_ip_address, cidrs = ?rule.cidrs, "created CloudStack firewall rule");
        Ok(Outcome::Done(
            json!({"firewallrule": firewall_view(tx, &rule)}),
            Some(id),
        ))
    })
    .await
}

/// `deleteFirewallRule` (`id`).
pub(super) async fn delete_firewall_rule(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let rule = cloud.store.read(|r| {
        let id = req.required("id")?;
        FirewallRule::get(r, id).ok_or_else(|| req.no_entity("id", id))
    })?;
    let c = cloud.clone();
    job(cloud, req, "FirewallRule", None, move |tx| {
        FirewallRule::delete(tx, rule.id());
        sync(tx, &c, &rule.ip_address_id)?;
        Ok(Outcome::Done(json!({"success": true}), Some(rule.meta.id)))
    })
    .await
}

/// `listFirewallRules` (`id`, `ipaddressid`, `networkid`, `projectid`).
pub(super) fn list_firewall_rules(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items = cloud.store.read(|r| {
        let projects = req.projects(r)?;
        let mut rules: Vec<FirewallRule> = FirewallRule::list(r)
            .into_iter()
            .filter(|f| covers(&projects, &f.meta.project_id))
            .collect();
        rules.sort_by(|a, b| a.meta.created_at.cmp(&b.meta.created_at));
        Ok::<_, CsError>(
            rules
                .iter()
                .map(|f| firewall_view(r, f))
                .collect::<Vec<_>>(),
        )
    })?;
    filter(req, "id", "id", &mut items);
    filter(req, "ipaddressid", "ipaddressid", &mut items);
    filter(req, "networkid", "networkid", &mut items);
    list(req, "firewallrule", items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firewall_rules_admit_their_protocol_and_ports() {
        let rule = FirewallRule {
            meta: Meta::new("p"),
            ip_address_id: "ip".into(),
            protocol: "tcp".into(),
            start_port: Some(80),
            end_port: Some(90),
            cidrs: vec!["10.0.0.0/8".into()],
        };
        assert!(rule.admits("tcp", 80) && rule.admits("tcp", 90));
        assert!(!rule.admits("tcp", 91) && !rule.admits("udp", 80));
        let all = FirewallRule {
            protocol: "all".into(),
            start_port: None,
            end_port: None,
            ..rule
        };
        assert!(all.admits("udp", 53));
    }
}
