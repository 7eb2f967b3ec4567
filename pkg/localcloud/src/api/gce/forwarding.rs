//! How a GCE forwarding rule carries traffic: through an Octavia load balancer of the same
//! project that this module keeps in step with the rule, its target pool and the pool's HTTP
//! health check, so the existing data plane (listeners, proxying, health probes, metrics) does
//! the work. One listener per port of the rule's `portRange` (TCP or UDP as `IPProtocol`), each
//! with a pool (`ROUND_ROBIN`, or `SOURCE_IP` for a `CLIENT_IP` session affinity) whose members
//! are the target pool's instances at their `networkIP` and the same port (GCE forwards to the
//! port the packet came to), and an HTTP monitor from the first health check (`port`,
//! `requestPath`, `checkIntervalSec`, `timeoutSec`, thresholds). The rule's external address
//! (a floating IP) is associated with the load balancer's VIP port, which is how the data plane
//! opens the rule's address. Firewalls are enforced there: a listener's `allowed_cidrs` are
//! the source ranges of the firewalls that allow its port to the pool's instances (none: no
//! one gets in, as GCE denies ingress by default). An `INTERNAL` rule's backends are the
//! instances of its backend service's instance groups, its pools' algorithm the service's
//! session affinity, its monitor the service's health check (HTTP or TCP); its address is the
//! load balancer's VIP itself, in the rule's subnetwork. The Octavia load balancer is named
//! `gce-<region>-<rule>`; Octavia clients see it too.

use super::instances::find_instance;
use super::networks::find_network;
use super::*;
use crate::api::compute::server_ports;
use crate::api::network::{create_vip_port, FloatingIp, Subnet, FLOATING_IPS, SUBNETS};
use crate::model::gce::backend_service::{backend_service_key, BackendService};
use crate::model::gce::firewall::Firewall;
use crate::model::gce::forwarding_rule::ForwardingRule;
use crate::model::gce::health_check::HealthCheck;
use crate::model::gce::http_health_check::HttpHealthCheck;
use crate::model::gce::instance_group::{instance_group_key, InstanceGroup};
use crate::model::gce::instance_ref;
use crate::model::gce::target_pool::{target_pool_key, TargetPool};
use crate::model::octavia::{
    listeners_of, members_of, monitors_of, Common, HealthMonitor, Listener, ListenerTls,
    LoadBalancer, Member, Pool, Record, Ref, LISTENERS, LISTENER_TIMEOUTS, LOADBALANCERS, MEMBERS,
    MONITORS,
};

/// The description of the Octavia objects this module makes.
const MARK: &str = "GCE forwarding rule";
/// A rule's port range may open at most this many listeners.
const MAX_PORTS: u32 = 64;

fn lb_name(rule: &ForwardingRule) -> String {
    format!("gce-{}-{}", m::last_segment(&rule.scope), rule.name)
}

fn find_lb(r: &impl Read, project_id: &str, name: &str) -> Option<LoadBalancer> {
    r.list::<LoadBalancer>(LOADBALANCERS).into_iter().find(|l| {
        l.common.name == name
            && l.common.description == MARK
            && l.common.meta.project_id == project_id
    })
}

/// The ports of a rule: `portRange` (`80`, `8000-8100`) or `ports`.
fn ports_of(rule: &ForwardingRule) -> Result<Vec<u16>, ApiError> {
    let parse = |field: &str, s: &str| {
        s.trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                invalid(format!(
                    "Invalid value for field 'resource.{field}': '{}'. Must be a port within 1-65535.",
                    s.escape_default()
                ))
            })
    };
    let mut ports = Vec::new();
    if let Some(range) = &rule.spec.port_range {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let (a, b) = (parse("portRange", a)?, parse("portRange", b)?);
        if a > b || u32::from(b - a) >= MAX_PORTS {
            return Err(invalid(format!(
                "Invalid value for field 'resource.portRange': '{range}'. The local cloud forwards at most {MAX_PORTS} ports per rule"
            )));
        }
        ports.extend(a..=b);
    }
    for p in rule.spec.ports.iter().flatten() {
        ports.push(parse("ports", p)?);
    }
    ports.sort_unstable();
    ports.dedup();
    Ok(ports)
}

/// How the backends are probed: a legacy HTTP health check, or a health check's HTTP or TCP
/// probe.
struct Check {
    /// `HTTP` or `TCP` (the Octavia monitor's type).
    kind: &'static str,
    port: i64,
    /// HTTP only.
    request_path: Option<String>,
    check_interval_sec: i64,
    timeout_sec: i64,
    healthy_threshold: i64,
    unhealthy_threshold: i64,
}

/// What the rule's target pool or backend service says: member addresses, algorithm and
/// health check.
struct Backends {
    addresses: Vec<(String, String)>,
    /// The network tags of the pool's instances (what firewalls target).
    tags: std::collections::BTreeSet<String>,
    algorithm: &'static str,
    check: Option<Check>,
}

fn backends(tx: &Tx<'_>, project: &Project, rule: &ForwardingRule) -> Option<Backends> {
    if let Some(service) = &rule.spec.backend_service {
        return service_backends(tx, project, service);
    }
    let (scope, name) = target_pool_key(rule.spec.target.as_deref()?)?;
    let pool = TargetPool::get_at(tx, &scope, &name)?;
    let (addresses, tags) = instance_addresses(tx, project, &pool.spec.instances);
    let algorithm = if pool.spec.session_affinity == "NONE" {
        "ROUND_ROBIN"
    } else {
        "SOURCE_IP"
    };
    let check = pool
        .spec
        .health_checks
        .as_ref()
        .and_then(|a| a.first())
        .and_then(|link| HttpHealthCheck::get_at(tx, "global", m::last_segment(link)))
        .map(|hc| Check {
            kind: "HTTP",
            port: hc.spec.port,
            request_path: Some(hc.spec.request_path),
            check_interval_sec: hc.spec.check_interval_sec,
            timeout_sec: hc.spec.timeout_sec,
            healthy_threshold: hc.spec.healthy_threshold,
            unhealthy_threshold: hc.spec.unhealthy_threshold,
        });
    Some(Backends {
        addresses,
        tags,
        algorithm,
        check,
    })
}

/// The backends of an internal rule: its backend service's instance groups' instances.
fn service_backends(tx: &Tx<'_>, project: &Project, service: &str) -> Option<Backends> {
    let (scope, name) = backend_service_key(service)?;
    let bs = BackendService::get_at(tx, &scope, &name)?;
    let mut instances = Vec::new();
    for b in &bs.spec.backends {
        let Some((scope, name)) = instance_group_key(&b.group) else {
            continue;
        };
        if let Some(g) = InstanceGroup::get_at(tx, &scope, &name) {
            instances.extend(g.spec.instances);
        }
    }
    let (addresses, tags) = instance_addresses(tx, project, &instances);
    let algorithm = if bs.spec.session_affinity == "NONE" {
        "ROUND_ROBIN"
    } else {
        "SOURCE_IP"
    };
    let check = bs
        .spec
        .health_checks
        .first()
        .and_then(|link| HealthCheck::get_at(tx, "global", m::last_segment(link)))
        .and_then(|hc| {
            let probe = hc.spec.probe()?.clone();
            Some(Check {
                kind: if hc.spec.kind == "HTTP" {
                    "HTTP"
                } else {
                    "TCP"
                },
                port: probe.port.unwrap_or(80),
                request_path: probe.request_path.filter(|_| hc.spec.kind == "HTTP"),
                check_interval_sec: hc.spec.check_interval_sec,
                timeout_sec: hc.spec.timeout_sec,
                healthy_threshold: hc.spec.healthy_threshold,
                unhealthy_threshold: hc.spec.unhealthy_threshold,
            })
        });
    Some(Backends {
        addresses,
        tags,
        algorithm,
        check,
    })
}

/// The `(name, networkIP)` and the network tags of the instances `links` name.
fn instance_addresses(
    tx: &Tx<'_>,
    project: &Project,
    links: &[String],
) -> (Vec<(String, String)>, std::collections::BTreeSet<String>) {
    let mut addresses = Vec::new();
    let mut tags = std::collections::BTreeSet::new();
    for link in links {
        let Some((zone, name)) = instance_ref(link) else {
            continue;
        };
        if let Ok(server) = find_instance(tx, project, &zone, &name) {
            tags.extend(server.tags.iter().cloned());
            if let Some(ip) = server_ports(tx, &server.meta.id)
                .first()
                .and_then(|p| p.fixed_ips.first().map(|f| f.ip_address.clone()))
            {
                addresses.push((server.name.clone(), ip));
            }
        }
    }
    (addresses, tags)
}

/// The source ranges the project's firewalls let reach `protocol`/`port` on instances with
/// `tags`: the listener's `allowed_cidrs`. None allows it: nobody gets in (GCE's implied
/// deny-ingress). Enabled `INGRESS` rules with `allowed` count (a rule without `targetTags`
/// applies to every instance; one with only `sourceTags` admits no outside address); `denied`
/// rules and priorities are not modelled.
fn allowed_sources(
    tx: &Tx<'_>,
    project: &Project,
    tags: &std::collections::BTreeSet<String>,
    protocol: &str,
    port: u16,
) -> Vec<String> {
    let mut sources = std::collections::BTreeSet::new();
    for fw in Firewall::list_in(tx, &project.id) {
        let f = &fw.spec;
        let targets = f.target_tags.as_deref().unwrap_or_default();
        let applies = targets.is_empty() || targets.iter().any(|t| tags.contains(t));
        let allows = f.allowed.iter().flatten().any(|r| r.admits(protocol, port));
        if !(f.is_enabled_ingress() && applies && allows) {
            continue;
        }
        match &f.source_ranges {
            Some(ranges) => sources.extend(ranges.iter().cloned()),
            None if f.source_tags.is_none() => {
                sources.insert("0.0.0.0/0".to_owned());
            }
            None => {}
        }
    }
    sources.into_iter().collect()
}

fn common(project_id: &str, name: &str) -> Common {
    let mut c = Common::new(project_id);
    c.name = name.to_owned();
    c.description = MARK.to_owned();
    c
}

fn put<T: Record>(tx: &mut Tx<'_>, record: &T) -> Result<(), ApiError> {
    record.put(tx)?;
    Ok(())
}

/// A health check's count or seconds, within 1..=`max` (`default` when below 0).
fn num(value: i64, default: u64, max: u64) -> u64 {
    u64::try_from(value).unwrap_or(default).clamp(1, max)
}

/// Brings the rule's Octavia load balancer in line with the rule, its target pool and health
/// check (creating it the first time). A rule whose target is not a target pool forwards
/// nothing.
pub(crate) fn sync(
    tx: &mut Tx<'_>,
    cloud: &Cloud,
    project: &Project,
    rule: &ForwardingRule,
) -> Result<(), ApiError> {
    let Some(backends) = backends(tx, project, rule) else {
        return remove(tx, project, rule);
    };
    let ports = ports_of(rule)?;
    let protocol = match rule.spec.ip_protocol.as_str() {
        "UDP" => "UDP",
        _ => "TCP",
    };
    let name = lb_name(rule);
    let mut lb = match find_lb(tx, &project.id, &name) {
        Some(lb) => lb,
        None => {
            let used: Vec<String> = tx
                .list::<LoadBalancer>(LOADBALANCERS)
                .into_iter()
                .map(|l| l.vip_address)
                .collect();
            // An internal rule's address is the VIP (taken from the pool when the rule was
            // inserted); an external one's is a floating IP forwarding to a new VIP.
            let vip = if internal(rule) {
                rule.spec.ip_address.clone()
            } else {
                cloud
                    .config
                    .lb_vip_pool
                    .allocate(&used)
                    .ok_or_else(|| invalid("No more addresses in the local cloud's VIP pool"))?
                    .to_string()
            };
            let common = common(&project.id, &name);
            let subnets = tx.list::<Subnet>(SUBNETS);
            let subnet = match &rule.spec.subnetwork {
                Some(sub) => subnets.into_iter().find(|s| s.name == m::last_segment(sub)),
                None => find_network(tx, rule.spec.network.as_deref().unwrap_or("default"))
                    .and_then(|n| subnets.into_iter().find(|s| s.network_id == n.meta.id)),
            };
            let (port_id, subnet_id, network_id) = match subnet {
                Some(s) => {
                    let p = create_vip_port(tx, &common.meta.id, &project.id, &s, &vip)?;
                    (p.meta.id, Some(s.meta.id), Some(s.network_id))
                }
                None => {
                    return Err(invalid(
                        "No network for the forwarding rule's load balancer",
                    ))
                }
            };
            LoadBalancer {
                common,
                vip_address: vip,
                vip_port_id: port_id,
                vip_subnet_id: subnet_id,
                vip_network_id: network_id,
                vip_qos_policy_id: None,
                provider: "amphora".into(),
                flavor_id: None,
                availability_zone: None,
            }
        }
    };
    lb.common.touch();
    put(tx, &lb)?;
    let lb_id = lb.common.meta.id.clone();
    // Listeners (and their pools) of ports the rule no longer has go.
    for l in listeners_of(tx, &lb_id) {
        if !ports.contains(&l.protocol_port) || l.protocol != protocol {
            if let Some(pool_id) = &l.default_pool_id {
                crate::api::loadbalancer::delete_pool(tx, pool_id);
            }
            tx.delete(LISTENERS, l.id());
        }
    }
    for port in &ports {
        let sources = allowed_sources(tx, project, &backends.tags, protocol, *port);
        let existing = listeners_of(tx, &lb_id)
            .into_iter()
            .find(|l| l.protocol_port == *port);
        if let Some(mut l) = existing.clone() {
            if l.allowed_cidrs.as_ref() != Some(&sources) {
                l.allowed_cidrs = Some(sources.clone());
                l.common.touch();
                put(tx, &l)?;
            }
        }
        let pool_id = match existing.and_then(|l| l.default_pool_id) {
            Some(id) => id,
            None => {
                let pool = Pool {
                    common: common(&project.id, &format!("{name}-{port}")),
                    loadbalancers: Ref::to(&lb_id),
                    protocol: protocol.into(),
                    lb_algorithm: backends.algorithm.into(),
                    session_persistence: None,
                    tls_enabled: false,
                    tls_container_ref: None,
                    ca_tls_container_ref: None,
                    crl_container_ref: None,
                };
                let timeouts: BTreeMap<&str, i64> = LISTENER_TIMEOUTS.into_iter().collect();
                let t = |k: &str| timeouts.get(k).copied().unwrap_or(0);
                let listener = Listener {
                    common: common(&project.id, &format!("{name}-{port}")),
                    loadbalancers: Ref::to(&lb_id),
                    protocol: protocol.into(),
                    protocol_port: *port,
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
                put(tx, &pool)?;
                put(tx, &listener)?;
                pool.id().to_owned()
            }
        };
        let check_port = backends
            .check
            .as_ref()
            .and_then(|c| u16::try_from(c.port).ok());
        let is_http = backends.check.as_ref().is_some_and(|c| c.kind == "HTTP");
        // Members: one per instance, at the same port.
        let members = members_of(tx, &pool_id);
        for mem in &members {
            let wanted = backends.addresses.iter().any(|(_, ip)| *ip == mem.address)
                && mem.monitor_port == check_port;
            if !wanted {
                tx.delete(MEMBERS, mem.id());
            }
        }
        let members = members_of(tx, &pool_id);
        for (instance, ip) in &backends.addresses {
            if members.iter().any(|mem| mem.address == *ip) {
                continue;
            }
            put(
                tx,
                &Member {
                    common: common(&project.id, instance),
                    pool_id: pool_id.clone(),
                    address: ip.clone(),
                    protocol_port: *port,
                    weight: 1,
                    backup: false,
                    subnet_id: None,
                    monitor_address: None,
                    monitor_port: check_port,
                },
            )?;
        }
        // The health monitor, from the target pool's first HTTP health check.
        for mon in monitors_of(tx, &pool_id) {
            tx.delete(MONITORS, mon.id());
        }
        if let Some(check) = &backends.check {
            let unhealthy = num(check.unhealthy_threshold, 2, 10);
            let healthy = num(check.healthy_threshold, 2, 10);
            put(
                tx,
                &HealthMonitor {
                    common: common(&project.id, &format!("{name}-{port}")),
                    pools: Ref::to(&pool_id),
                    kind: check.kind.into(),
                    delay: num(check.check_interval_sec, 5, 300) as u32,
                    timeout: num(check.timeout_sec, 5, 300) as u32,
                    max_retries: healthy as u8,
                    max_retries_down: unhealthy as u8,
                    http_method: is_http.then(|| "GET".into()),
                    url_path: check.request_path.clone().filter(|_| is_http),
                    expected_codes: is_http.then(|| "200".into()),
                    http_version: None,
                    domain_name: None,
                },
            )?;
        }
    }
    // The rule's external address forwards to the VIP.
    let address = rule.spec.ip_address.as_str();
    for mut fip in tx.list::<FloatingIp>(FLOATING_IPS) {
        if fip.floating_ip_address == address && fip.port_id.as_deref() != Some(&lb.vip_port_id) {
            fip.port_id = Some(lb.vip_port_id.clone());
            fip.fixed_ip_address = Some(lb.vip_address.clone());
            fip.meta.touch();
            tx.put(FLOATING_IPS, &fip.meta.id.clone(), &fip)?;
        }
    }
    Ok(())
}

/// Whether the rule is an internal one (its address is its load balancer's VIP).
fn internal(rule: &ForwardingRule) -> bool {
    rule.spec.load_balancing_scheme == "INTERNAL"
}

/// Removes the rule's Octavia load balancer (its listeners close; its address stops
/// forwarding).
pub(crate) fn remove(
    tx: &mut Tx<'_>,
    project: &Project,
    rule: &ForwardingRule,
) -> Result<(), ApiError> {
    let Some(lb) = find_lb(tx, &project.id, &lb_name(rule)) else {
        return Ok(());
    };
    let lb_id = lb.common.meta.id.clone();
    crate::api::loadbalancer::delete_tree(tx, &lb_id)
}

/// Re-syncs the forwarding rules of the project that `which` picks (all when a firewall
/// changed, those that target a pool when the pool changed).
pub(crate) fn sync_rules(
    tx: &mut Tx<'_>,
    cloud: &Cloud,
    project: &Project,
    which: impl Fn(&ForwardingRule) -> bool,
) -> Result<(), ApiError> {
    for rule in ForwardingRule::list_in(tx, &project.id) {
        if which(&rule) {
            sync(tx, cloud, project, &rule)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::gce::forwarding_rule::ForwardingRuleSpec;

    fn rule(fields: Value) -> ForwardingRule {
        let mut spec = json!({
            "target": "t", "IPAddress": "1.2.3.4", "IPProtocol": "TCP",
            "loadBalancingScheme": "EXTERNAL", "networkTier": "PREMIUM",
        });
        if let (Some(s), Some(f)) = (spec.as_object_mut(), fields.as_object()) {
            s.extend(f.clone());
        }
        let spec: ForwardingRuleSpec = serde_json::from_value(spec).unwrap();
        ForwardingRule::new("p", "r".into(), "regions/us-central1".into(), spec)
    }

    #[test]
    fn port_ranges_and_lists() {
        assert_eq!(
            ports_of(&rule(json!({"portRange": "80-82"}))).unwrap(),
            [80, 81, 82]
        );
        assert_eq!(ports_of(&rule(json!({"portRange": "80"}))).unwrap(), [80]);
        assert_eq!(
            ports_of(&rule(json!({"ports": ["53", "5353"]}))).unwrap(),
            [53, 5353]
        );
        assert!(ports_of(&rule(json!({"portRange": "1-65535"}))).is_err());
        assert!(ports_of(&rule(json!({"portRange": "90-80"}))).is_err());
        assert!(ports_of(&rule(json!({"portRange": "x"}))).is_err());
        assert_eq!(lb_name(&rule(json!({}))), "gce-us-central1-r");
    }
}
