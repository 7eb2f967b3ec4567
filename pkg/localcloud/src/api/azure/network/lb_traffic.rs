//! How an Azure load balancer carries traffic: each frontend IP configuration is an Octavia
//! load balancer of the same project (named `azure-<lb>-<frontend>`), kept in step by
//! [`sync_project`] after every change to a load balancer, NIC, security group or virtual
//! network, so the existing data plane (listeners, proxying, health probes, metrics) does the
//! work. One listener per load-balancing rule of the frontend (its protocol and frontend
//! port), with a pool (`ROUND_ROBIN`, or `SOURCE_IP` for the `SourceIP*` distributions) whose
//! members are the addresses of the NIC IP configurations in the rule's backend pool, at the
//! rule's backend port, and a monitor from the rule's probe (TCP, HTTP GET `requestPath`
//! expecting 200; an `Https` probe checks the connection only). A public frontend's public IP
//! (a floating IP) is associated with the Octavia VIP port, which is how the data plane opens
//! it; an internal frontend's address is the VIP itself, from the cloud's VIP pool.
//! Security groups are enforced there: a listener's `allowed_cidrs` are the sources the
//! inbound rules of the members' NIC and subnet security groups allow to the backend port
//! (rules by priority; the first matching `Deny` of every source ends the walk). Without any
//! security group a Basic load balancer lets everyone in and a Standard one nobody, as Azure
//! does. With `enableFloatingIP` the data plane still proxies to the member's own address.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::model::octavia::{
    listeners_of, members_of, monitors_of, Common, HealthMonitor, Listener, ListenerTls,
    LoadBalancer, Member, Pool, Ref, LISTENERS, LISTENER_TIMEOUTS, LOADBALANCERS, MEMBERS,
    MONITORS,
};

/// The description of the Octavia objects this module makes.
const MARK: &str = "Azure load balancer frontend";

fn octavia_name(lb: &ArmResource, frontend: &str) -> String {
    format!("azure-{}-{frontend}", lb.name)
}

fn common(project_id: &str, name: &str) -> Common {
    let mut c = Common::new(project_id);
    c.name = name.to_owned();
    c.description = MARK.to_owned();
    c
}

/// The VIP of a frontend's Octavia load balancer (an internal frontend's address).
pub(super) fn frontend_vip(r: &impl Read, lb: &ArmResource, frontend: &str) -> Option<String> {
    let id = lb.children.get(&frontend.to_lowercase())?;
    r.get::<LoadBalancer>(LOADBALANCERS, id)
        .map(|l| l.vip_address)
}

/// Takes away every Octavia load balancer of `lb`'s frontends.
pub(super) fn remove_traffic(tx: &mut Tx<'_>, lb: &ArmResource) -> Result<(), ApiError> {
    for id in lb.children.values() {
        crate::api::loadbalancer::delete_tree(tx, id)?;
    }
    Ok(())
}

/// Brings every Azure load balancer of the project in step with its rules and backends.
pub(crate) fn sync_project(tx: &mut Tx<'_>, s: &Scope<'_>) -> Result<(), ApiError> {
    for mut lb in ArmResource::list_where(tx, "type", Kind::LoadBalancer.ty()) {
        if lb.meta.project_id != s.project_id {
            continue;
        }
        let before = lb.children.clone();
        sync(tx, s, &mut lb)?;
        if lb.children != before {
            lb.put(tx)?;
        }
    }
    Ok(())
}

/// A load-balancing rule, resolved.
struct Rule {
    protocol: &'static str,
    frontend_port: u16,
    backend_port: u16,
    algorithm: &'static str,
    members: Vec<PoolMember>,
    probe: Option<Value>,
}

fn rules_of(r: &impl Read, s: &Scope<'_>, lb: &ArmResource, frontend: &str) -> Vec<Rule> {
    let frontend_id = s.child_id(lb, "frontendIPConfigurations", frontend);
    let probe = |id: &str| {
        let name = own_child(s, lb, "probes", id)?;
        lb.properties["probes"]
            .as_array()?
            .iter()
            .find(|p| {
                p["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(&name))
            })
            .map(|p| p["properties"].clone())
    };
    let mut out = Vec::new();
    for rule in lb.properties["loadBalancingRules"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let rp = &rule["properties"];
        if !rp["frontendIPConfiguration"]["id"]
            .as_str()
            .is_some_and(|x| x.eq_ignore_ascii_case(&frontend_id))
        {
            continue;
        }
        let port = |k: &str| {
            rp[k]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(0)
        };
        let members = rp["backendAddressPool"]["id"]
            .as_str()
            .map(|id| pool_members(r, s, id))
            .unwrap_or_default();
        out.push(Rule {
            protocol: if rp["protocol"] == "Udp" {
                "UDP"
            } else {
                "TCP"
            },
            frontend_port: port("frontendPort"),
            backend_port: port("backendPort"),
            algorithm: if rp["loadDistribution"] == "Default" {
                "ROUND_ROBIN"
            } else {
                "SOURCE_IP"
            },
            members,
            probe: rp["probe"]["id"].as_str().and_then(probe),
        });
    }
    out
}

/// The security groups that apply to a member: its NIC's and its subnet's.
fn member_groups(r: &impl Read, s: &Scope<'_>, m: &PoolMember) -> Vec<ArmResource> {
    let mut ids: Vec<String> = Vec::new();
    if let Some(id) = m.nic.properties["networkSecurityGroup"]["id"].as_str() {
        ids.push(id.to_owned());
    }
    for c in m.nic.properties["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(subnet) = c["properties"]["subnet"]["id"].as_str() else {
            continue;
        };
        if let Ok(vnet) = resolve(
            r,
            s,
            subnet,
            Kind::VirtualNetwork,
            Some("subnets"),
            "subnet",
        ) {
            let child = vnet.child.unwrap_or_default();
            for sub in vnet.resource.properties["subnets"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if sub["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(&child))
                {
                    if let Some(id) = sub["properties"]["networkSecurityGroup"]["id"].as_str() {
                        ids.push(id.to_owned());
                    }
                }
            }
        }
    }
    ids.sort();
    ids.dedup();
    ids.iter()
        .filter_map(|id| resolve(r, s, id, Kind::SecurityGroup, None, "networkSecurityGroup").ok())
        .map(|x| x.resource)
        .collect()
}

/// Whether a rule's port field(s) admit `port`.
fn admits_port(rule: &Value, port: u16) -> bool {
    let one = |r: &str| {
        let r = r.trim();
        if r == "*" {
            return true;
        }
        match r.split_once('-') {
            Some((a, b)) => {
                matches!((a.trim().parse::<u16>(), b.trim().parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&port))
            }
            None => r.parse::<u16>() == Ok(port),
        }
    };
    let single = rule["destinationPortRange"].as_str().is_some_and(one);
    single
        || rule["destinationPortRanges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(one)
}

/// A rule's sources as CIDRs (`*` and `Internet` are everyone; other service tags, none).
fn sources(rule: &Value) -> Vec<String> {
    let mut all: Vec<&str> = rule["sourceAddressPrefixes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(one) = rule["sourceAddressPrefix"].as_str() {
        all.push(one);
    }
    all.into_iter()
        .filter_map(|x| match x {
            "*" | "Internet" | "0.0.0.0/0" => Some("0.0.0.0/0".to_owned()),
            c if parse_cidr(c).is_some() => Some(c.to_owned()),
            c if c.parse::<Ipv4Addr>().is_ok() => Some(format!("{c}/32")),
            _ => None,
        })
        .collect()
}

/// The sources one security group lets reach `protocol`/`port`: its inbound rules by
/// priority, `Allow` adding its sources until a `Deny` of every source matches.
fn group_allows(nsg: &ArmResource, protocol: &str, port: u16) -> BTreeSet<String> {
    let mut rules: Vec<&Value> = nsg.properties["securityRules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| &r["properties"])
        .filter(|r| r["direction"] == "Inbound")
        .collect();
    rules.sort_by_key(|r| r["priority"].as_i64().unwrap_or(i64::MAX));
    let mut out = BTreeSet::new();
    for r in rules {
        let proto = r["protocol"].as_str().unwrap_or("*");
        if !(proto == "*" || proto.eq_ignore_ascii_case(protocol)) || !admits_port(r, port) {
            continue;
        }
        let srcs = sources(r);
        if r["access"] == "Deny" {
            if srcs.iter().any(|x| x == "0.0.0.0/0") {
                break;
            }
            continue;
        }
        out.extend(srcs);
    }
    out
}

/// A listener's `allowed_cidrs`: the union over its members of what all their groups allow.
fn allowed_sources(r: &impl Read, s: &Scope<'_>, lb: &ArmResource, rule: &Rule) -> Vec<String> {
    let standard = lb.sku.as_ref().and_then(|k| k["name"].as_str()) == Some("Standard");
    let mut out = BTreeSet::new();
    for m in &rule.members {
        let groups = member_groups(r, s, m);
        if groups.is_empty() {
            if !standard {
                out.insert("0.0.0.0/0".to_owned());
            }
            continue;
        }
        let mut sets = groups
            .iter()
            .map(|g| group_allows(g, rule.protocol, rule.backend_port));
        let first = sets.next().unwrap_or_default();
        let both = sets.fold(first, |acc, next| {
            if next.contains("0.0.0.0/0") {
                acc
            } else if acc.contains("0.0.0.0/0") {
                next
            } else {
                acc.intersection(&next).cloned().collect()
            }
        });
        out.extend(both);
    }
    out.into_iter().collect()
}

/// The subnet a frontend's VIP port goes on: an internal frontend's own, else the first
/// member's, else any of the project's.
fn vip_subnet(r: &impl Read, s: &Scope<'_>, fp: &Value, rules: &[Rule]) -> Option<Subnet> {
    if let Some(id) = fp["subnet"]["id"].as_str() {
        let vnet = resolve(r, s, id, Kind::VirtualNetwork, Some("subnets"), "subnet").ok()?;
        let subnet_id = vnet
            .resource
            .children
            .get(&vnet.child?.to_lowercase())?
            .clone();
        return r.get::<Subnet>(SUBNETS, &subnet_id);
    }
    let member_subnet = rules
        .iter()
        .flat_map(|rule| rule.members.iter())
        .find_map(|m| m.nic.backing.as_ref().and_then(|p| r.get::<Port>(PORTS, p)))
        .and_then(|p| p.fixed_ips.first().map(|f| f.subnet_id.clone()))
        .and_then(|id| r.get::<Subnet>(SUBNETS, &id));
    member_subnet.or_else(|| {
        let external: BTreeSet<String> = r
            .list::<Network>(NETWORKS)
            .into_iter()
            .filter(|n| n.external)
            .map(|n| n.meta.id)
            .collect();
        r.list::<Subnet>(SUBNETS)
            .into_iter()
            .find(|x| x.meta.project_id == s.project_id && !external.contains(&x.network_id))
    })
}

/// Brings one Azure load balancer's Octavia load balancers in step with it.
fn sync(tx: &mut Tx<'_>, s: &Scope<'_>, lb: &mut ArmResource) -> Result<(), ApiError> {
    let frontends: Vec<(String, Value)> = lb.properties["frontendIPConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["name"].as_str().unwrap_or_default().to_owned(),
                f["properties"].clone(),
            )
        })
        .collect();
    // Frontends that went take their Octavia load balancers with them.
    let gone: Vec<String> = lb
        .children
        .keys()
        .filter(|k| !frontends.iter().any(|(n, _)| n.to_lowercase() == **k))
        .cloned()
        .collect();
    for k in gone {
        if let Some(id) = lb.children.remove(&k) {
            crate::api::loadbalancer::delete_tree(tx, &id)?;
        }
    }
    for (name, fp) in frontends {
        let rules = rules_of(tx, s, lb, &name);
        let octavia = match lb
            .children
            .get(&name.to_lowercase())
            .and_then(|id| tx.get::<LoadBalancer>(LOADBALANCERS, id))
        {
            Some(o) => o,
            None => {
                let Some(subnet) = vip_subnet(tx, s, &fp, &rules) else {
                    continue;
                };
                let used: Vec<String> = tx
                    .list::<LoadBalancer>(LOADBALANCERS)
                    .into_iter()
                    .map(|l| l.vip_address)
                    .collect();
                let vip = match fp["privateIPAddress"].as_str() {
                    Some(ip) if fp["privateIPAllocationMethod"] == "Static" => {
                        if used.iter().any(|u| u == ip) {
                            return Err(invalid("PrivateIPAddressInUse", format!("The address {ip} of frontend {name} is already another load balancer's.")));
                        }
                        ip.to_owned()
                    }
                    _ => s
                        .cloud
                        .config
                        .lb_vip_pool
                        .allocate(&used)
                        .ok_or_else(|| {
                            invalid(
                                "PrivateIPAddressNotAvailable",
                                "No more addresses in the local cloud's VIP pool.",
                            )
                        })?
                        .to_string(),
                };
                let c = common(s.project_id, &octavia_name(lb, &name));
                let port = crate::api::network::create_vip_port(
                    tx,
                    &c.meta.id,
                    s.project_id,
                    &subnet,
                    &vip,
                )?;
                let o = LoadBalancer {
                    common: c,
                    vip_address: vip,
                    vip_port_id: port.meta.id,
                    vip_subnet_id: Some(subnet.meta.id.clone()),
                    vip_network_id: Some(subnet.network_id.clone()),
                    vip_qos_policy_id: None,
                    provider: "amphora".into(),
                    flavor_id: None,
                    availability_zone: None,
                };
                o.put(tx)?;
                lb.children
                    .insert(name.to_lowercase(), o.common.meta.id.clone());
                o
            }
        };
        sync_listeners(tx, s, lb, &octavia, &rules)?;
        // A public frontend's address forwards to the VIP.
        let pip = fp["publicIPAddress"]["id"]
            .as_str()
            .and_then(|id| resolve(tx, s, id, Kind::PublicIp, None, "publicIPAddress").ok())
            .and_then(|p| p.resource.backing);
        for mut fip in tx.list::<FloatingIp>(FLOATING_IPS) {
            let ours = Some(&fip.meta.id) == pip.as_ref();
            let on_vip = fip.port_id.as_deref() == Some(octavia.vip_port_id.as_str());
            if ours && !on_vip {
                fip.port_id = Some(octavia.vip_port_id.clone());
                fip.fixed_ip_address = Some(octavia.vip_address.clone());
            } else if !ours && on_vip {
                fip.port_id = None;
                fip.fixed_ip_address = None;
                fip.router_id = None;
            } else {
                continue;
            }
            fip.touch();
            tx.put(FLOATING_IPS, &fip.meta.id.clone(), &fip)?;
        }
    }
    Ok(())
}

fn sync_listeners(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    lb: &ArmResource,
    octavia: &LoadBalancer,
    rules: &[Rule],
) -> Result<(), ApiError> {
    let lb_id = octavia.common.meta.id.clone();
    let name = octavia.common.name.clone();
    for l in listeners_of(tx, &lb_id) {
        if !rules
            .iter()
            .any(|r| r.frontend_port == l.protocol_port && r.protocol == l.protocol)
        {
            if let Some(pool_id) = &l.default_pool_id {
                crate::api::loadbalancer::delete_pool(tx, pool_id);
            }
            tx.delete(LISTENERS, l.id());
        }
    }
    for rule in rules {
        let sources = allowed_sources(tx, s, lb, rule);
        let label = format!(
            "{name}-{}-{}",
            rule.protocol.to_lowercase(),
            rule.frontend_port
        );
        let existing = listeners_of(tx, &lb_id)
            .into_iter()
            .find(|l| l.protocol_port == rule.frontend_port && l.protocol == rule.protocol);
        if let Some(mut l) = existing.clone() {
            if l.allowed_cidrs.as_ref() != Some(&sources) {
                l.allowed_cidrs = Some(sources.clone());
                l.common.touch();
                l.put(tx)?;
            }
        }
        let pool_id = match existing.and_then(|l| l.default_pool_id) {
            Some(id) => {
                if let Some(mut pool) = tx.get::<Pool>(crate::model::octavia::POOLS, &id) {
                    if pool.lb_algorithm != rule.algorithm {
                        pool.lb_algorithm = rule.algorithm.into();
                        pool.common.touch();
                        pool.put(tx)?;
                    }
                }
                id
            }
            None => {
                let pool = Pool {
                    common: common(s.project_id, &label),
                    loadbalancers: Ref::to(&lb_id),
                    protocol: rule.protocol.into(),
                    lb_algorithm: rule.algorithm.into(),
                    session_persistence: None,
                    tls_enabled: false,
                    tls_container_ref: None,
                    ca_tls_container_ref: None,
                    crl_container_ref: None,
                };
                let timeouts: BTreeMap<&str, i64> = LISTENER_TIMEOUTS.into_iter().collect();
                let t = |k: &str| timeouts.get(k).copied().unwrap_or(0);
                let listener = Listener {
                    common: common(s.project_id, &label),
                    loadbalancers: Ref::to(&lb_id),
                    protocol: rule.protocol.into(),
                    protocol_port: rule.frontend_port,
                    default_pool_id: Some(pool.id().to_owned()),
                    connection_limit: -1,
                    timeout_client_data: t("timeout_client_data"),
                    timeout_member_connect: t("timeout_member_connect"),
                    timeout_member_data: t("timeout_member_data"),
                    timeout_tcp_inspect: t("timeout_tcp_inspect"),
                    insert_headers: BTreeMap::new(),
                    allowed_cidrs: Some(sources.clone()),
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
        let probe_port = rule
            .probe
            .as_ref()
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let monitor_port = probe_port.filter(|p| *p != rule.backend_port);
        for mem in members_of(tx, &pool_id) {
            let wanted = rule.members.iter().any(|m| m.address == mem.address)
                && mem.protocol_port == rule.backend_port
                && mem.monitor_port == monitor_port;
            if !wanted {
                tx.delete(MEMBERS, mem.id());
            }
        }
        let have = members_of(tx, &pool_id);
        for m in &rule.members {
            if have.iter().any(|x| x.address == m.address) {
                continue;
            }
            Member {
                common: common(s.project_id, &m.nic.name),
                pool_id: pool_id.clone(),
                address: m.address.clone(),
                protocol_port: rule.backend_port,
                weight: 1,
                backup: false,
                subnet_id: None,
                monitor_address: None,
                monitor_port,
            }
            .put(tx)?;
        }
        let want_monitor = rule.probe.as_ref().map(|p| {
            let kind = monitor_kind(p["protocol"].as_str().unwrap_or("Tcp"));
            let http = kind == "HTTP";
            let interval = p["intervalInSeconds"].as_u64().unwrap_or(15).clamp(1, 300) as u32;
            let down = p["probeThreshold"]
                .as_u64()
                .or_else(|| p["numberOfProbes"].as_u64())
                .unwrap_or(2)
                .clamp(1, 10) as u8;
            HealthMonitor {
                common: common(s.project_id, &label),
                pools: Ref::to(&pool_id),
                kind: kind.into(),
                delay: interval,
                timeout: interval.min(5),
                max_retries: 1,
                max_retries_down: down,
                http_method: http.then(|| "GET".into()),
                url_path: p["requestPath"]
                    .as_str()
                    .map(str::to_owned)
                    .filter(|_| http),
                expected_codes: http.then(|| "200".into()),
                http_version: None,
                domain_name: None,
            }
        });
        let current = monitors_of(tx, &pool_id);
        let same = match (&want_monitor, current.first()) {
            (Some(w), Some(c)) => {
                current.len() == 1
                    && w.kind == c.kind
                    && w.delay == c.delay
                    && w.max_retries_down == c.max_retries_down
                    && w.url_path == c.url_path
            }
            (None, None) => true,
            _ => false,
        };
        if !same {
            for mon in current {
                tx.delete(MONITORS, mon.id());
            }
            if let Some(m) = want_monitor {
                m.put(tx)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nsg(rules: Value) -> ArmResource {
        ArmResource {
            meta: crate::model::Meta::new("p"),
            group: "g".into(),
            kind: Kind::SecurityGroup.ty().into(),
            name: "n".into(),
            scope: String::new(),
            location: "l".into(),
            tags: Default::default(),
            etag: String::new(),
            sku: None,
            zones: Vec::new(),
            backing: None,
            children: Default::default(),
            status: None,
            properties: json!({"securityRules": rules}),
        }
    }

    fn rule(priority: i64, access: &str, src: &str, port: &str) -> Value {
        json!({"name": format!("r{priority}"), "properties": {"priority": priority, "access": access, "direction": "Inbound", "protocol": "Tcp", "sourceAddressPrefix": src, "destinationPortRange": port}})
    }

    #[test]
    fn groups_allow_by_priority_until_a_deny_of_everyone() {
        let g = nsg(json!([
            rule(100, "Allow", "10.0.0.0/8", "80"),
            rule(200, "Deny", "*", "*"),
            rule(300, "Allow", "*", "80"),
        ]));
        assert_eq!(
            group_allows(&g, "TCP", 80).into_iter().collect::<Vec<_>>(),
            ["10.0.0.0/8"]
        );
        assert!(group_allows(&g, "TCP", 81).is_empty());
        assert!(group_allows(&g, "UDP", 80).is_empty());
        let open = nsg(json!([rule(100, "Allow", "Internet", "8000-8100")]));
        assert_eq!(
            group_allows(&open, "TCP", 8080)
                .into_iter()
                .collect::<Vec<_>>(),
            ["0.0.0.0/0"]
        );
        assert!(group_allows(&open, "TCP", 8101).is_empty());
    }
}
