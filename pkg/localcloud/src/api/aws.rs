//! How an AWS load balancer held by moto carries traffic here (`local-cloud serve
//! --follow-aws-elb`): moto keeps classic ELBs and NLBs as records only, so a follower polls
//! it (`poll`, with the AWS SDK: what a real client reads with `describe-load-balancers`) and
//! keeps one Octavia load balancer of this cloud in step with each, so the existing data plane
//! (listeners, proxying, health probes) does the work, as the GCE dialect does for forwarding
//! rules. The Octavia load balancer is named after the ELB's DNS name, with a VIP from the VIP
//! pool; `<state-dir>/aws-elb-hosts` maps each DNS name to its VIP (hosts-file lines, for
//! `curl --resolve` or a resolver). One listener per ELB listener port: classic `TCP`/`SSL`
//! listeners and NLB `TCP`/`TLS` ones proxy TCP, `HTTP`/`HTTPS` ones add `X-Forwarded-For`,
//! `-Port`, `-Proto` as an ELB does (TLS is not terminated: moto holds no certificate key, so
//! `SSL`/`HTTPS`/`TLS` listeners carry plain TCP/HTTP); NLB `UDP` listeners proxy UDP. Members
//! are the registered instances at their private address, mapped by `--follow-aws-address-map`
//! (moto's VPC addresses are not on this machine), on the instance port (classic) or target
//! port (NLB); a classic ELB's `ProxyProtocolPolicyType` policy on the instance port sends a
//! PROXY v1 header. The health check (classic `HealthCheck.Target` `TCP:port`, `HTTP:port/path`;
//! NLB target group `HealthCheckProtocol`/`Port`/`Path`) becomes the pool's monitor, with the
//! interval, timeout and thresholds; SSL/HTTPS checks are TCP connects (no TLS handshake).
// Without the follower (feature aws-follow) only the flags' types are used.
#![cfg_attr(not(feature = "aws-follow"), allow(dead_code))]

#[cfg(feature = "aws-follow")]
pub(crate) mod poll;

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::network::{create_vip_port, Subnet, SUBNETS};
use super::{ApiError, Cloud};
#[cfg(feature = "aws-follow")]
pub(crate) use crate::aws_follow::{map_address, AwsFollow};
use crate::model::identity::{Project, PROJECTS};
use crate::model::network::{Network, NETWORKS};
use crate::model::octavia::{
    listeners_of, members_of, monitors_of, Common, HealthMonitor, Listener, ListenerTls,
    LoadBalancer, Member, Pool, Record, Ref, LISTENERS, LISTENER_TIMEOUTS, LOADBALANCERS, MEMBERS,
    MONITORS, POOLS,
};
use crate::store::{Read, Tx};

/// The description of the Octavia objects this module makes.
pub(crate) const MARK: &str = "AWS load balancer (followed)";
/// The file in the state directory that maps DNS names to VIPs.
pub const HOSTS_FILE: &str = "aws-elb-hosts";

/// One load balancer as moto describes it, in the terms the data plane needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Followed {
    pub dns_name: String,
    pub listeners: Vec<FollowedListener>,
}

/// A backend: (instance ID, address, port).
pub(crate) type Backend = (String, String, u16);

/// One listener: its port, the Octavia protocol that carries it, its backends and check.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FollowedListener {
    pub port: u16,
    /// `TCP`, `HTTP` or `UDP`.
    pub protocol: &'static str,
    pub proxy_protocol: bool,
    pub backends: Vec<Backend>,
    pub check: Option<Check>,
}

/// A health check: kind (`TCP` or `HTTP`), port (none: the traffic port), path and timing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Check {
    pub kind: &'static str,
    pub port: Option<u16>,
    pub path: String,
    pub interval: u32,
    pub timeout: u32,
    pub healthy: u8,
    pub unhealthy: u8,
}

impl Check {
    /// From AWS's numbers, clamped to what Octavia records hold (AWS's own ranges are narrower).
    pub(crate) fn new(
        kind: &'static str,
        port: Option<u16>,
        path: String,
        [interval, timeout, healthy, unhealthy]: [i32; 4],
    ) -> Check {
        let n = |v: i32, max: u32| u32::try_from(v).unwrap_or(1).clamp(1, max);
        Check {
            kind,
            port,
            path,
            interval: n(interval, 300),
            timeout: n(timeout, 300),
            healthy: n(healthy, 10) as u8,
            unhealthy: n(unhealthy, 10) as u8,
        }
    }

    fn matches(&self, hm: &HealthMonitor) -> bool {
        hm.kind == self.kind
            && hm.delay == self.interval
            && hm.timeout == self.timeout
            && hm.max_retries == self.healthy
            && hm.max_retries_down == self.unhealthy
            && (self.kind != "HTTP" || hm.url_path.as_deref() == Some(self.path.as_str()))
    }
}

fn common(project_id: &str, name: &str) -> Common {
    let mut c = Common::new(project_id);
    c.name = name.to_owned();
    c.description = MARK.to_owned();
    c
}

fn followed_lbs(r: &impl Read) -> Vec<LoadBalancer> {
    r.list::<LoadBalancer>(LOADBALANCERS)
        .into_iter()
        .filter(|l| l.common.description == MARK)
        .collect()
}

/// The project that owns the followed load balancers: the cloud's configured one.
fn project_id(r: &impl Read, cloud: &Cloud) -> Result<String, ApiError> {
    r.list::<Project>(PROJECTS)
        .into_iter()
        .find(|p| p.name == cloud.config.project)
        .map(|p| p.id)
        .ok_or_else(|| ApiError::internal("the local cloud has no project for AWS load balancers"))
}

/// Makes the followed Octavia load balancers match `wanted` (creating, changing, deleting);
/// returns the DNS name → VIP pairs.
pub(crate) fn sync(
    tx: &mut Tx<'_>,
    cloud: &Cloud,
    wanted: &[Followed],
) -> Result<BTreeMap<String, String>, ApiError> {
    for lb in followed_lbs(tx) {
        if !wanted.iter().any(|w| w.dns_name == lb.common.name) {
            remove(tx, &lb)?;
        }
    }
    let project = project_id(tx, cloud)?;
    let mut hosts = BTreeMap::new();
    for w in wanted {
        let lb = sync_one(tx, cloud, &project, w)?;
        hosts.insert(w.dns_name.clone(), lb.vip_address);
    }
    Ok(hosts)
}

fn sync_one(
    tx: &mut Tx<'_>,
    cloud: &Cloud,
    project: &str,
    w: &Followed,
) -> Result<LoadBalancer, ApiError> {
    let lb = match followed_lbs(tx)
        .into_iter()
        .find(|l| l.common.name == w.dns_name)
    {
        Some(lb) => lb,
        None => create_lb(tx, cloud, project, &w.dns_name)?,
    };
    let lb_id = lb.id().to_owned();
    // Listeners whose port or protocol went away (with their pools).
    for l in listeners_of(tx, &lb_id) {
        let keep = w.listeners.iter().any(|f| {
            f.port == l.protocol_port
                && f.protocol == l.protocol
                && l.default_pool_id.as_deref().is_some_and(|p| {
                    tx.get::<Pool>(POOLS, p)
                        .is_some_and(|p| p.protocol == pool_protocol(f))
                })
        });
        if !keep {
            if let Some(pool) = &l.default_pool_id {
                crate::api::loadbalancer::delete_pool(tx, pool);
            }
            tx.delete(LISTENERS, l.id());
        }
    }
    for f in &w.listeners {
        let existing = listeners_of(tx, &lb_id)
            .into_iter()
            .find(|l| l.protocol_port == f.port);
        let pool_id = match existing.and_then(|l| l.default_pool_id) {
            Some(p) => p,
            None => create_listener(tx, project, &lb_id, &w.dns_name, f)?,
        };
        sync_members(tx, project, &pool_id, f)?;
    }
    Ok(lb)
}

fn pool_protocol(f: &FollowedListener) -> &'static str {
    if f.proxy_protocol {
        "PROXY"
    } else {
        f.protocol
    }
}

fn create_lb(
    tx: &mut Tx<'_>,
    cloud: &Cloud,
    project: &str,
    dns_name: &str,
) -> Result<LoadBalancer, ApiError> {
    let used: Vec<String> = tx
        .list::<LoadBalancer>(LOADBALANCERS)
        .into_iter()
        .map(|l| l.vip_address)
        .collect();
    let vip = cloud
        .config
        .lb_vip_pool
        .allocate(&used)
        .ok_or_else(|| ApiError::internal("no more addresses in the local cloud's VIP pool"))?
        .to_string();
    let common = common(project, dns_name);
    // The VIP port goes on the default network, as an Octavia client's would.
    let subnet = tx
        .list::<Network>(NETWORKS)
        .into_iter()
        .find(|n| n.name == crate::defaults::NETWORK)
        .and_then(|n| {
            tx.list::<Subnet>(SUBNETS)
                .into_iter()
                .find(|s| s.network_id == n.meta.id)
        })
        .ok_or_else(|| ApiError::internal("no network for the AWS load balancer's VIP"))?;
    let port = create_vip_port(tx, &common.meta.id, project, &subnet, &vip)?;
    let lb = LoadBalancer {
        common,
        vip_address: vip,
        vip_port_id: port.meta.id,
        vip_subnet_id: Some(subnet.meta.id),
        vip_network_id: Some(subnet.network_id),
        vip_qos_policy_id: None,
        provider: "amphora".into(),
        flavor_id: None,
        availability_zone: None,
    };
    lb.put(tx)?;
    Ok(lb)
}

/// Creates a listener and its pool; returns the pool's ID.
fn create_listener(
    tx: &mut Tx<'_>,
    project: &str,
    lb_id: &str,
    dns_name: &str,
    f: &FollowedListener,
) -> Result<String, ApiError> {
    let name = format!("{dns_name}-{}", f.port);
    let pool = Pool {
        common: common(project, &name),
        loadbalancers: Ref::to(lb_id),
        protocol: pool_protocol(f).into(),
        lb_algorithm: "ROUND_ROBIN".into(),
        session_persistence: None,
        tls_enabled: false,
        tls_container_ref: None,
        ca_tls_container_ref: None,
        crl_container_ref: None,
    };
    let timeouts: BTreeMap<&str, i64> = LISTENER_TIMEOUTS.into_iter().collect();
    let t = |k: &str| timeouts.get(k).copied().unwrap_or(0);
    // An ELB's HTTP listener adds these three headers.
    let insert_headers = if f.protocol == "HTTP" {
        ["X-Forwarded-For", "X-Forwarded-Port", "X-Forwarded-Proto"]
            .into_iter()
            .map(|h| (h.to_owned(), "true".to_owned()))
            .collect()
    } else {
        BTreeMap::new()
    };
    let listener = Listener {
        common: common(project, &name),
        loadbalancers: Ref::to(lb_id),
        protocol: f.protocol.into(),
        protocol_port: f.port,
        default_pool_id: Some(pool.id().to_owned()),
        connection_limit: -1,
        timeout_client_data: t("timeout_client_data"),
        timeout_member_connect: t("timeout_member_connect"),
        timeout_member_data: t("timeout_member_data"),
        timeout_tcp_inspect: t("timeout_tcp_inspect"),
        insert_headers,
        allowed_cidrs: None,
        default_tls_container_ref: None,
        sni_container_refs: Vec::new(),
        l7policies: Vec::new(),
        tls: ListenerTls::default(),
    };
    pool.put(tx)?;
    listener.put(tx)?;
    Ok(pool.id().to_owned())
}

/// Members (one per registered instance) and the monitor of one listener's pool.
fn sync_members(
    tx: &mut Tx<'_>,
    project: &str,
    pool_id: &str,
    f: &FollowedListener,
) -> Result<(), ApiError> {
    let check_port = f.check.as_ref().and_then(|c| c.port);
    let members = members_of(tx, pool_id);
    for m in &members {
        let wanted = f.backends.iter().any(|(_, ip, port)| {
            *ip == m.address && *port == m.protocol_port && m.monitor_port == check_port
        });
        if !wanted {
            tx.delete(MEMBERS, m.id());
        }
    }
    let members = members_of(tx, pool_id);
    for (instance, ip, port) in &f.backends {
        if members
            .iter()
            .any(|m| m.address == *ip && m.protocol_port == *port)
        {
            continue;
        }
        if ip.parse::<IpAddr>().is_err() {
            continue;
        }
        Member {
            common: common(project, instance),
            pool_id: pool_id.to_owned(),
            address: ip.clone(),
            protocol_port: *port,
            weight: 1,
            backup: false,
            subnet_id: None,
            monitor_address: None,
            monitor_port: check_port,
        }
        .put(tx)?;
    }
    let monitors = monitors_of(tx, pool_id);
    let same = match (&f.check, monitors.as_slice()) {
        (None, []) => true,
        (Some(c), [hm]) => c.matches(hm),
        _ => false,
    };
    if same {
        return Ok(());
    }
    for hm in monitors {
        tx.delete(MONITORS, hm.id());
    }
    if let Some(c) = &f.check {
        HealthMonitor {
            common: common(project, &format!("{pool_id}-check")),
            pools: Ref::to(pool_id),
            kind: c.kind.into(),
            delay: c.interval,
            timeout: c.timeout,
            max_retries: c.healthy,
            max_retries_down: c.unhealthy,
            http_method: Some("GET".into()),
            url_path: Some(c.path.clone()),
            expected_codes: Some("200".into()),
            http_version: None,
            domain_name: None,
        }
        .put(tx)?;
    }
    Ok(())
}

/// Removes a followed load balancer: its listeners close.
fn remove(tx: &mut Tx<'_>, lb: &LoadBalancer) -> Result<(), ApiError> {
    let lb_id = lb.id().to_owned();
    crate::api::loadbalancer::delete_tree(tx, &lb_id)
}

/// `<state-dir>/aws-elb-hosts`: one `VIP DNS-NAME` line per followed load balancer.
pub(crate) fn hosts_file(hosts: &BTreeMap<String, String>) -> String {
    let mut out = String::from(
        "# local-cloud --follow-aws-elb: the VIP each AWS load balancer's DNS name is served on\n",
    );
    for (name, vip) in hosts {
        out.push_str(&format!("{vip} {name}\n"));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::aws_follow::{map_address, AddressMap};

    #[test]
    fn address_maps_parse_check_and_apply() {
        let m: AddressMap = "10.0.0.0/16=127.10.0.0/16".parse().unwrap();
        assert_eq!(
            m.apply("10.0.1.7".parse().unwrap()),
            Some("127.10.1.7".parse().unwrap())
        );
        assert_eq!(m.apply("10.1.1.7".parse().unwrap()), None);
        assert_eq!(map_address(&[m], "10.0.200.3"), "127.10.200.3".to_owned());
        assert_eq!(map_address(&[m], "192.168.0.1"), "192.168.0.1".to_owned());
        for bad in [
            "10.0.0.0/16",
            "10.0.0.0/16=127.10.0.0/24",
            "10.0.0.0/16=10.1.0.0/16",
            "10.0.0.0/7=127.0.0.0/7",
            "10.0.0.0/33=127.0.0.0/33",
            "x/16=127.0.0.0/16",
            "10.0.0.0=127.0.0.0",
        ] {
            assert!(bad.parse::<AddressMap>().is_err(), "{bad}");
        }
    }

    #[test]
    fn checks_clamp_aws_numbers() {
        let c = Check::new("TCP", Some(80), "/".into(), [-1, 1000, 0, 99]);
        assert_eq!(
            (c.interval, c.timeout, c.healthy, c.unhealthy),
            (1, 300, 1, 10)
        );
    }
}
