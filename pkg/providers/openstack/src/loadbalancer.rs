//! Service load balancers on Octavia (Load Balancer v2), as upstream cloud-provider-openstack
//! `pkg/openstack/loadbalancer.go` (OCCM, the external layout) and the legacy in-tree
//! `openstack_loadbalancer.go` (kubernetes v1.20) do it (behaviour only):
//!
//! * one Octavia load balancer per Service. Its name depends on the [`Layout`]: in-tree it is
//!   upstream's default name (`a` + the Service UID without dashes, cut to 32), external it is
//!   OCCM's `kube_service_<cluster>_<namespace>_<name>`. External, the load balancer is found
//!   by the Service's `loadbalancer.openstack.org/load-balancer-id` annotation when present,
//!   else by name, else by the legacy in-tree name, so a load balancer the in-tree provider
//!   created is adopted (tagged with the new name, as OCCM v1.34 does; not renamed) instead
//!   of a second one being created. External, the provider writes the id and the address back
//!   to the Service's annotations (`load-balancer-id`, `load-balancer-address`) with its
//!   Kubernetes client, as OCCM's service patcher; the in-tree provider wrote none;
//! * its VIP is on the Service's `loadbalancer.openstack.org/subnet-id` (or `network-id`)
//!   annotation, else `[LoadBalancer] subnet-id`, else `network-id`, else the subnet holding a
//!   node's member address (OCCM), else the subnet named `private` or `private-subnet` (the
//!   local cloud's), else the first subnet;
//! * one listener per Service port (TCP or UDP on the port, `HTTP` inserting
//!   `X-Forwarded-For` with `x-forwarded-for`; connection limit and timeouts
//!   from the Service's annotations; external, `allowed_cidrs` from
//!   `loadBalancerSourceRanges`, which in-tree is an error), one pool per listener
//!   (`PROXY`/`PROXYV2` with `proxy-protocol`; `SOURCE_IP` persistence with `sessionAffinity:
//!   ClientIP`; `lb-method` or the annotation, default `ROUND_ROBIN`) whose members are every node's
//!   (with `node-selector`, every selected node's) first InternalIP at the port's `nodePort`
//!   (on `member-subnet-id` when set), and with `create-monitor` (or
//!   `enable-health-monitor`) a health monitor per pool (`monitor-*` or `health-monitor-*`;
//!   with `externalTrafficPolicy: Local` an HTTP monitor on the health-check node port).
//!   Children are named as each layout's upstream names them: `listener_<lbname>_<index>`
//!   in-tree, `listener_<index>_<lbname>` external (likewise `pool_`, `monitor_`);
//! * a floating IP on the VIP's Neutron port when the Service is not internal and a floating
//!   network is configured (`floating-network-id`, the annotation of the same name) or
//!   `spec.loadBalancerIP` names one (`OpenStack::ensure_floating_ip` has the steps). It is
//!   the ingress IP reported; otherwise the VIP is;
//! * with `[LoadBalancer] manage-security-groups`, a Neutron security group per load balancer
//!   opening the node ports to it, on the member nodes' ports (`security_group`, as OCCM);
//! * Octavia refuses changes while the load balancer is `PENDING_*`, so every mutation is
//!   followed by a bounded wait for `ACTIVE`;
//! * ensuring again converges (listeners, pools, members, monitors added or removed) without
//!   recreating; deleting releases the floating IP (unless `keep-floatingip`), is a cascade
//!   delete and succeeds when the load balancer is gone.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hypercloud_cloudprovider::wait::{poll_until, Backoff, Poll, WaitError};
use hypercloud_cloudprovider::wellknown::parse_go_bool;
use hypercloud_cloudprovider::{
    default_load_balancer_name, lb_settings, Error, Layout, LbSetting, LoadBalancer, Result,
    Setting,
};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::{is_not_found, Service as Api};
use crate::OpenStack;

mod security_group;

/// The load balancer's Octavia id, written by the external provider and read back first.
pub const ANNOTATION_LOAD_BALANCER_ID: &str = "loadbalancer.openstack.org/load-balancer-id";
/// The ingress address, written beside the id (OCCM).
pub const ANNOTATION_LOAD_BALANCER_ADDRESS: &str =
    "loadbalancer.openstack.org/load-balancer-address";
/// `"true"`: no floating IP (and one attached earlier is released).
pub const ANNOTATION_INTERNAL: &str = "service.beta.kubernetes.io/openstack-internal-load-balancer";
/// The external network floating IPs come from, over `[LoadBalancer] floating-network-id`.
pub const ANNOTATION_FLOATING_NETWORK_ID: &str = "loadbalancer.openstack.org/floating-network-id";
/// The subnet of that network, over `[LoadBalancer] floating-subnet-id`.
pub const ANNOTATION_FLOATING_SUBNET_ID: &str = "loadbalancer.openstack.org/floating-subnet-id";
/// `"true"`: deleting the load balancer (or turning it internal) leaves the floating IP.
pub const ANNOTATION_KEEP_FLOATING_IP: &str = "loadbalancer.openstack.org/keep-floatingip";

/// The VIP's subnet, over `[LoadBalancer] subnet-id` (read when the load balancer is created).
pub const ANNOTATION_SUBNET_ID: &str = "loadbalancer.openstack.org/subnet-id";
/// The VIP's network, over `[LoadBalancer] network-id` (likewise).
pub const ANNOTATION_NETWORK_ID: &str = "loadbalancer.openstack.org/network-id";
/// A hostname reported as the ingress instead of the address (OCCM).
pub const ANNOTATION_HOSTNAME: &str = "loadbalancer.openstack.org/hostname";
/// The pool's algorithm (`ROUND_ROBIN`, `LEAST_CONNECTIONS`, `SOURCE_IP`, ...), over `lb-method`.
pub const ANNOTATION_LB_METHOD: &str = "loadbalancer.openstack.org/lb-method";
/// The listeners' `connection_limit` (default -1, unlimited).
pub const ANNOTATION_CONNECTION_LIMIT: &str = "loadbalancer.openstack.org/connection-limit";
/// Listener timeouts in milliseconds, by Octavia field (OCCM's defaults are Octavia's).
pub const ANNOTATION_TIMEOUTS: [(&str, &str, i64); 4] = [
    (
        "loadbalancer.openstack.org/timeout-client-data",
        "timeout_client_data",
        50_000,
    ),
    (
        "loadbalancer.openstack.org/timeout-member-connect",
        "timeout_member_connect",
        5_000,
    ),
    (
        "loadbalancer.openstack.org/timeout-member-data",
        "timeout_member_data",
        50_000,
    ),
    (
        "loadbalancer.openstack.org/timeout-tcp-inspect",
        "timeout_tcp_inspect",
        0,
    ),
];
/// `"true"`/`"false"`: a health monitor per pool, over `create-monitor`.
pub const ANNOTATION_ENABLE_HEALTH_MONITOR: &str =
    "loadbalancer.openstack.org/enable-health-monitor";
/// Health monitor settings in whole seconds / counts, over `monitor-*`.
pub const ANNOTATION_HEALTH_MONITOR_DELAY: &str = "loadbalancer.openstack.org/health-monitor-delay";
pub const ANNOTATION_HEALTH_MONITOR_TIMEOUT: &str =
    "loadbalancer.openstack.org/health-monitor-timeout";
pub const ANNOTATION_HEALTH_MONITOR_MAX_RETRIES: &str =
    "loadbalancer.openstack.org/health-monitor-max-retries";
pub const ANNOTATION_HEALTH_MONITOR_MAX_RETRIES_DOWN: &str =
    "loadbalancer.openstack.org/health-monitor-max-retries-down";

/// `true`/`v1`: the pools speak PROXY protocol v1 (`PROXY`), `v2`: v2 (`PROXYV2`), so
/// members see the client's address (OCCM).
pub const ANNOTATION_PROXY_PROTOCOL: &str = "loadbalancer.openstack.org/proxy-protocol";
/// `true`: the listeners are `HTTP` and insert `X-Forwarded-For` (OCCM's `keepClientIP`).
pub const ANNOTATION_X_FORWARDED_FOR: &str = "loadbalancer.openstack.org/x-forwarded-for";

/// The members' subnet (OCCM: over `[LoadBalancer] member-subnet-id`, which is not read here).
pub const ANNOTATION_MEMBER_SUBNET_ID: &str = "loadbalancer.openstack.org/member-subnet-id";
/// `key=value,key2=,key3`: only nodes with all these labels are members (an empty or absent
/// value: the label with any value), as OCCM's `StringToMap` and `filterNodes`.
pub const ANNOTATION_NODE_SELECTOR: &str = "loadbalancer.openstack.org/node-selector";

/// The load balancer's Octavia availability zone (read when it is created; Octavia cannot
/// move a load balancer).
pub const ANNOTATION_AVAILABILITY_ZONE: &str = "loadbalancer.openstack.org/availability-zone";

/// The load balancer's Octavia flavor (read when it is created; Octavia cannot change a
/// load balancer's flavor), over `[LoadBalancer] flavor-id`.
pub const ANNOTATION_FLAVOR_ID: &str = "loadbalancer.openstack.org/flavor-id";

/// An existing Neutron port the load balancer's VIP adopts (read when it is created).
pub const ANNOTATION_PORT_ID: &str = "loadbalancer.openstack.org/port-id";

/// Every `loadbalancer.openstack.org/*` annotation of OCCM (`pkg/openstack/loadbalancer.go`),
/// the internal and source-range annotations, and the Service fields a load balancer may be
/// asked for: what this provider does with each ([`hypercloud_cloudprovider::lb_settings`];
/// the check, the guide's table in docs/openstack-provider.md and the tests read it).
pub const SERVICE_SETTINGS: &[LbSetting] = &[
    LbSetting::implemented(Setting::Annotation(ANNOTATION_INTERNAL), "`true`: no floating IP (one attached earlier is released)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SOURCE_RANGES), "the listeners' `allowed_cidrs` when `spec.loadBalancerSourceRanges` is empty (external layout; in-tree a restriction is an error)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_CONNECTION_LIMIT), "the listeners' `connection_limit`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_FLOATING_NETWORK_ID), "the network floating IPs come from, over `[LoadBalancer] floating-network-id`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_FLOATING_SUBNET_ID), "the subnet of that network, over `[LoadBalancer] floating-subnet-id`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_KEEP_FLOATING_IP), "`true`: deleting the load balancer leaves the floating IP"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_LB_METHOD), "the pools' algorithm, over `[LoadBalancer] lb-method`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SUBNET_ID), "the VIP's subnet, over `[LoadBalancer] subnet-id`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_NETWORK_ID), "the VIP's network, over `[LoadBalancer] network-id`"),
    LbSetting::implemented(Setting::Annotation("loadbalancer.openstack.org/timeout-client-data"), "the listeners' `timeout_client_data` (ms)"),
    LbSetting::implemented(Setting::Annotation("loadbalancer.openstack.org/timeout-member-connect"), "the listeners' `timeout_member_connect` (ms)"),
    LbSetting::implemented(Setting::Annotation("loadbalancer.openstack.org/timeout-member-data"), "the listeners' `timeout_member_data` (ms)"),
    LbSetting::implemented(Setting::Annotation("loadbalancer.openstack.org/timeout-tcp-inspect"), "the listeners' `timeout_tcp_inspect` (ms)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_ENABLE_HEALTH_MONITOR), "a health monitor per pool, over `[LoadBalancer] create-monitor`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HEALTH_MONITOR_DELAY), "the monitors' delay (s), over `monitor-delay`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HEALTH_MONITOR_TIMEOUT), "the monitors' timeout (s), over `monitor-timeout`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HEALTH_MONITOR_MAX_RETRIES), "the monitors' `max_retries`, over `monitor-max-retries`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HEALTH_MONITOR_MAX_RETRIES_DOWN), "the monitors' `max_retries_down`, over `monitor-max-retries-down`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HOSTNAME), "reported as the ingress hostname instead of the address"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_LOAD_BALANCER_ADDRESS), "written by the provider (external layout), as OCCM"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_LOAD_BALANCER_ID), "external layout: the load balancer is found by it (and written to it); the in-tree provider never read it. Naming another Service's (or a user's) load balancer shares it as OCCM does: this Service's listeners, tagged with its name, beside the others' on distinct ports; at most `[LoadBalancer] max-shared-lb` Services; not internal; only the owner attaches a floating IP; deleting a Service takes only its listeners until the last one goes"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_NODE_SELECTOR), "`key=value,key2`: only the nodes with those labels are members (OCCM's parsing)"),
    LbSetting::refused(Setting::Annotation("loadbalancer.openstack.org/floating-subnet"), "choosing the floating subnet by name is not implemented (use floating-subnet-id)"),
    LbSetting::refused(Setting::Annotation("loadbalancer.openstack.org/floating-subnet-tags"), "choosing the floating subnet by tags is not implemented (use floating-subnet-id)"),
    LbSetting::refused(Setting::Annotation("loadbalancer.openstack.org/class"), "`[LoadBalancerClass]` sections are not implemented"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_PORT_ID), "the load balancer's `vip_port_id` when it is created: the VIP adopts that Neutron port (and its address)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_PROXY_PROTOCOL), "`true`/`v1`: `PROXY` pools, `v2`: `PROXYV2` pools (TCP ports; not with `x-forwarded-for`); members get the client's address in a PROXY header"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_MEMBER_SUBNET_ID), "the members' `subnet_id` (members on another subnet are replaced)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_X_FORWARDED_FOR), "`true`: `HTTP` listeners and pools with `insert_headers: {X-Forwarded-For: \"true\"}` (TCP ports)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_FLAVOR_ID), "the load balancer's `flavor_id` when it is created, over `[LoadBalancer] flavor-id` (Octavia's 400 for an unknown or disabled flavor fails the sync)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_AVAILABILITY_ZONE), "the load balancer's `availability_zone` when it is created, over `[LoadBalancer] availability-zone` (Octavia's 400 for an unknown zone fails the sync)"),
    LbSetting::refused(Setting::Annotation("loadbalancer.openstack.org/default-tls-container-ref"), "TERMINATED_HTTPS listeners (Barbican certificates) are not implemented"),
    LbSetting::implemented(Setting::LoadBalancerClass, "the service controller leaves the Service to the class's controller (upstream)"),
    LbSetting::implemented(Setting::ExternalTrafficPolicyLocal, "with a health monitor, an HTTP monitor on the health-check node port"),
    LbSetting::implemented(Setting::SessionAffinityClientIp, "the pools' `session_persistence: {type: SOURCE_IP}` (OCCM)"),
    LbSetting::refused(Setting::IpFamilyIpv6, "VIPs and members are IPv4"),
    LbSetting::refused(Setting::NoNodePorts, "members are the nodes at the Service's node ports"),
    LbSetting::implemented(Setting::LoadBalancerIp, "the floating IP of that address (created when a floating network is configured)"),
];

/// OCCM's name prefix; a load balancer named so was created by an external provider.
const SERVICE_PREFIX: &str = "kube_service_";
/// OCCM's floating IP description prefix: only such floating IPs are OCCM's to delete.
const FIP_DESCRIPTION: &str = "Floating IP for Kubernetes external service";

/// How a Service's load balancer and its children are named in this provider's layout:
/// the one place that knows the in-tree and external naming.
struct Naming {
    layout: Layout,
    /// The load balancer's name in this layout.
    lb: String,
    /// External only: the in-tree name, looked up when no load balancer has `lb`.
    legacy: Option<String>,
}

impl Naming {
    fn new(layout: Layout, cluster_name: &str, service: &Service) -> Self {
        match layout {
            Layout::InTree => Naming {
                layout,
                lb: default_load_balancer_name(service),
                legacy: None,
            },
            Layout::External => Naming {
                layout,
                lb: cut_255(format!(
                    "{SERVICE_PREFIX}{cluster_name}_{}_{}",
                    service.metadata.namespace.as_deref().unwrap_or("default"),
                    service.metadata.name.as_deref().unwrap_or_default()
                )),
                legacy: Some(default_load_balancer_name(service)),
            },
        }
    }

    /// `listener`, `pool` or `monitor` number `index`.
    fn child(&self, kind: &str, index: usize) -> String {
        match self.layout {
            Layout::InTree => format!("{kind}_{}_{index}", self.lb),
            Layout::External => cut_255(format!("{kind}_{index}_{}", self.lb)),
        }
    }

    /// Whether a load balancer of this name is this Service's to delete: its own name, or
    /// (external) the legacy name, which carries the Service's UID.
    fn owns(&self, name: &str) -> bool {
        name == self.lb || self.legacy.as_deref() == Some(name)
    }
}

/// At most 255 bytes, on a character boundary (Octavia's name limit, OCCM's `CutString255`).
fn cut_255(mut s: String) -> String {
    if s.len() > 255 {
        let mut cut = 255;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// The tags of an Octavia object.
fn lb_tags(v: &Value) -> Vec<&str> {
    v["tags"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The Service's annotation `key` trimmed, if set and not empty.
fn non_empty(service: &Service, key: &str) -> Option<String> {
    annotation(service, key)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The Service's annotation `key`, if set.
fn annotation<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    service
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// What the Service's annotations ask of its listeners, pools and monitors, over
/// `[LoadBalancer]` (OCCM's `serviceConfig`).
#[derive(Clone, Debug, PartialEq)]
struct Settings {
    /// The pool algorithm.
    method: String,
    /// Listener fields: `connection_limit` and the four timeouts, as Octavia names them.
    listener: Vec<(&'static str, i64)>,
    /// `None`: no health monitor.
    monitor: Option<Monitor>,
    /// With a monitor and `externalTrafficPolicy: Local`: the health-check node port, which
    /// the monitor probes (`HTTP GET /healthz`, kube-proxy's answer) on each member.
    health_check_node_port: Option<i64>,
    /// The listeners' `allowed_cidrs` from `loadBalancerSourceRanges` (or the
    /// `service.beta.kubernetes.io/load-balancer-source-ranges` annotation); `None`: allow all.
    allowed_cidrs: Option<Vec<String>>,
    /// `proxy-protocol`: the TCP ports' pool protocol, `PROXY` or `PROXYV2`.
    proxy_protocol: Option<&'static str>,
    /// `x-forwarded-for`: the TCP ports' listeners are `HTTP` and insert the header.
    forwarded_for: bool,
    /// `sessionAffinity: ClientIP`: the pools' `session_persistence` is `SOURCE_IP`.
    source_ip_persistence: bool,
    /// `member-subnet-id`: the members' `subnet_id`.
    member_subnet_id: Option<String>,
    /// `node-selector`: only nodes with these labels (a `None` value: any value) are members.
    node_selector: Vec<(String, Option<String>)>,
    /// The Octavia flavor of a new load balancer.
    flavor_id: Option<String>,
    /// The Octavia availability zone of a new load balancer.
    availability_zone: Option<String>,
}

impl Settings {
    /// The listener protocol for a Service port of `protocol` (OCCM's `getListenerProtocol`).
    fn listener_protocol<'a>(&self, protocol: &'a str) -> &'a str {
        if self.forwarded_for && protocol == "TCP" {
            "HTTP"
        } else {
            protocol
        }
    }

    /// The pool protocol for a Service port of `protocol` (OCCM's `buildPoolCreateOpt`).
    fn pool_protocol<'a>(&self, protocol: &'a str) -> &'a str {
        match self.proxy_protocol {
            Some(p) if protocol == "TCP" => p,
            _ => self.listener_protocol(protocol),
        }
    }

    /// The pools' `session_persistence`.
    fn session_persistence(&self) -> Value {
        if self.source_ip_persistence {
            json!({"type": "SOURCE_IP"})
        } else {
            Value::Null
        }
    }
}

/// The annotation Kubernetes reads when `spec.loadBalancerSourceRanges` is empty.
const ANNOTATION_SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// `spec.loadBalancerSourceRanges`, else the annotation (comma-separated), canonicalised
/// (`10.1.2.3/8` → `10.0.0.0/8`); `None` when empty or allowing everything (upstream
/// `GetLoadBalancerSourceRanges`). An entry that is not a CIDR is an error naming the field.
fn source_ranges(service: &Service) -> std::result::Result<Option<Vec<String>>, String> {
    let spec: Vec<String> = service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.clone())
        .unwrap_or_default();
    let (field, items) = if spec.is_empty() {
        let v = annotation(service, ANNOTATION_SOURCE_RANGES).unwrap_or_default();
        (
            ANNOTATION_SOURCE_RANGES,
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    } else {
        ("spec.loadBalancerSourceRanges", spec)
    };
    let mut out = Vec::new();
    for item in &items {
        let cidr = canonical_cidr(item)
            .ok_or_else(|| format!("{field}: {item:?} is not an IP range like 10.0.0.0/24"))?;
        if !out.contains(&cidr) {
            out.push(cidr);
        }
    }
    if out.is_empty() || out.iter().any(|c| c == "0.0.0.0/0" || c == "::/0") {
        return Ok(None);
    }
    out.sort();
    Ok(Some(out))
}

/// `addr/prefix` with the host bits cleared, or `None` when it is not a CIDR.
fn canonical_cidr(s: &str) -> Option<String> {
    let (addr, prefix) = s.trim().split_once('/')?;
    let prefix: u32 = prefix.parse().ok()?;
    match addr.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(a) if prefix <= 32 => {
            let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            Some(format!(
                "{}/{prefix}",
                std::net::Ipv4Addr::from(u32::from(a) & mask)
            ))
        }
        std::net::IpAddr::V6(a) if prefix <= 128 => {
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            Some(format!(
                "{}/{prefix}",
                std::net::Ipv6Addr::from(u128::from(a) & mask)
            ))
        }
        _ => None,
    }
}

/// Whether `ip` lies in `cidr` (both parsed; anything unparsable is no).
fn cidr_contains(cidr: &str, ip: &str) -> bool {
    let (Some(net), Ok(ip)) = (canonical_cidr(cidr), ip.parse::<std::net::IpAddr>()) else {
        return false;
    };
    let prefix = net.split_once('/').map_or("", |(_, p)| p);
    canonical_cidr(&format!("{ip}/{prefix}")).is_some_and(|own| own == net)
}

/// A listener's `allowed_cidrs` as [`source_ranges`] says it: `None` for null, empty or
/// allow-all.
fn current_cidrs(listener: &Value) -> Option<Vec<String>> {
    let mut list: Vec<String> = listener["allowed_cidrs"]
        .as_array()?
        .iter()
        .filter_map(|c| c.as_str().and_then(canonical_cidr))
        .collect();
    if list.is_empty() || list.iter().any(|c| c == "0.0.0.0/0" || c == "::/0") {
        return None;
    }
    list.sort();
    list.dedup();
    Some(list)
}

/// Health monitor settings, in Octavia's units (seconds, counts).
#[derive(Clone, Debug, PartialEq)]
struct Monitor {
    delay: i64,
    timeout: i64,
    max_retries: i64,
    max_retries_down: i64,
}

/// What the Service's annotations and spec ask of its floating IP, over `[LoadBalancer]`.
#[derive(Debug, Default, PartialEq)]
struct FloatingIpWish {
    internal: bool,
    network_id: Option<String>,
    subnet_id: Option<String>,
    /// `spec.loadBalancerIP`: the floating IP address wanted (or, internal, the VIP).
    address: Option<String>,
    keep: bool,
}

/// The pause before the first poll of a wait for `ACTIVE`: every such wait follows a write
/// (or a load balancer seen `PENDING_*`), and Octavia never answers a write `ACTIVE`, so a
/// poll right away would only read the pending status (the local cloud's data plane settles
/// within milliseconds).
const FIRST_POLL: Duration = Duration::from_millis(50);

/// How long to wait for the load balancer to leave `PENDING_*`.
/// Waiting for a load balancer to become `ACTIVE` or go: Octavia builds amphorae in a minute
/// or two; polls start fast (the local cloud is immediate) and back off to 2 s.
const ACTIVE_WAIT: Backoff =
    Backoff::new(FIRST_POLL, Duration::from_secs(2), Duration::from_secs(120));
const LBAAS: &str = "/v2/lbaas";

/// What an ensure converged, kept for the next ensure of the same load balancer. Writing the
/// `load-balancer-id` annotation makes the service controller sync the Service again (an
/// annotation change is an update, upstream's `needsUpdate`), and that ensure asks for exactly
/// what the last one made: it reuses this instead of reading the listeners, pools, members and
/// floating IP again. Used once, within [`CONVERGED_TTL`], and only while the load balancer
/// is `ACTIVE` with the `updated_at` this ensure saw last (Octavia stamps the load balancer on
/// every change to it or to its listeners, pools, members and monitors).
#[derive(Debug)]
pub(crate) struct Converged {
    /// What was wanted: names, ports, settings, floating IP wish and member addresses.
    wanted: String,
    updated_at: String,
    address: String,
    at: Instant,
}

/// How long a [`Converged`] stays usable: the sync it is for follows within milliseconds.
const CONVERGED_TTL: Duration = Duration::from_secs(30);

/// What `get_load_balancer` found, kept for the deletion the service controller runs right
/// after it (upstream's `processLoadBalancerDelete` asks whether the load balancer exists,
/// then deletes it): the load balancer and the floating IP on its VIP port are not read a
/// second time. Used once, within [`LOOKED_TTL`]; a deletion that finds the cloud changed
/// meanwhile fails (a conflict) or finds it gone, and the controller's retry reads afresh.
#[derive(Debug)]
pub(crate) struct Looked {
    lb: Value,
    floating_ip: Option<Value>,
    at: Instant,
}

/// How long a [`Looked`] stays usable: the deletion follows within milliseconds.
const LOOKED_TTL: Duration = Duration::from_secs(5);

impl Looked {
    /// What the look-up went by: the load balancer's name and the id annotation (the Service
    /// may point its annotation elsewhere between two calls).
    fn key(naming: &Naming, service: &Service) -> String {
        format!(
            "{} {}",
            naming.lb,
            annotation(service, ANNOTATION_LOAD_BALANCER_ID).unwrap_or_default()
        )
    }
}

impl Converged {
    /// Everything [`OpenStack::converge`] and [`OpenStack::ensure_floating_ip`] read.
    fn wanted(
        naming: &Naming,
        ports: &[Port],
        settings: &Settings,
        wish: &FloatingIpWish,
        nodes: &[Node],
    ) -> String {
        let members: BTreeSet<String> = nodes.iter().filter_map(member_address).collect();
        format!(
            "{:?}",
            (&naming.lb, naming.layout, ports, settings, wish, members)
        )
    }
}

/// One pool member: address, protocol port, monitor port, subnet.
type MemberKey = (String, i64, Option<i64>, Option<String>);

/// One wanted listener: protocol, port, node port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Port {
    protocol: String,
    port: i32,
    node_port: i32,
}

impl OpenStack {
    fn looked(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, Looked>> {
        // As `converged`: each use is one insert or remove.
        self.looked.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn converged(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, Converged>> {
        // A panic elsewhere cannot leave the map half-written: each use is one insert or remove.
        self.converged.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The address the last ensure of load balancer `id` (now `lb`) converged to, when it
    /// wanted `wanted` too and nothing changed since (see [`Converged`]); taken, so used once.
    fn reuse_converged(&self, id: &str, lb: &Value, wanted: &str) -> Option<String> {
        let last = self.converged().remove(id)?;
        (last.wanted == wanted
            && last.at.elapsed() < CONVERGED_TTL
            && lb["provisioning_status"] == "ACTIVE"
            && lb["updated_at"].as_str() == Some(last.updated_at.as_str()))
        .then(|| {
            tracing::debug!(
                id,
                "load balancer as the last ensure left it; not read again"
            );
            last.address
        })
    }

    /// Keeps what an ensure converged load balancer `id` (`lb`, `ACTIVE`) to, for the next.
    fn remember_converged(&self, id: &str, lb: &Value, wanted: String, address: &str) {
        let Some(updated_at) = lb["updated_at"].as_str().filter(|u| !u.is_empty()) else {
            return;
        };
        let mut map = self.converged();
        // Memos whose sync never came (the Service was deleted meanwhile) go here.
        map.retain(|_, c| c.at.elapsed() < CONVERGED_TTL);
        map.insert(
            id.to_owned(),
            Converged {
                wanted,
                updated_at: updated_at.to_owned(),
                address: address.to_owned(),
                at: Instant::now(),
            },
        );
    }

    /// Adoption (a legacy-named load balancer) or sharing (an annotated one): OCCM adds the
    /// Service's name to the load balancer's tags and leaves the name alone; done last, after
    /// the listeners and the floating IP, so a Service that failed to join a shared load
    /// balancer is not counted among its sharers. Returns the load balancer as it is after.
    async fn adopt(&self, naming: &Naming, id: &str, lb: Value) -> Result<Value> {
        if naming.layout != Layout::External {
            return Ok(lb);
        }
        let name = &naming.lb;
        let mut list: Vec<Value> = lb["tags"].as_array().cloned().unwrap_or_default();
        if list.iter().any(|t| t == name.as_str()) {
            return Ok(lb);
        }
        list.push(name.clone().into());
        self.lb_call(
            Method::PUT,
            &format!("/loadbalancers/{id}"),
            Some(&json!({"loadbalancer": {"tags": list}})),
            "tag load balancer",
        )
        .await?;
        let lb = self.wait_active(id).await?;
        tracing::info!(lb = %name, id, "load balancer tagged with the Service's name");
        Ok(lb)
    }

    fn lb_error(&self, operation: &str, message: impl Into<String>) -> Error {
        Error::cloud(&self.name, operation, message)
    }

    async fn lb_call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &str,
    ) -> Result<Value> {
        Ok(self
            .client
            .request(
                Api::LoadBalancer,
                method,
                &format!("{LBAAS}{path}"),
                body,
                operation,
            )
            .await?
            .body)
    }

    async fn lb_list(&self, path: &str, key: &str, operation: &str) -> Result<Vec<Value>> {
        self.client
            .list(Api::LoadBalancer, &format!("{LBAAS}{path}"), key, operation)
            .await
    }

    async fn find_lb(&self, name: &str) -> Result<Option<Value>> {
        let found: Vec<Value> = self
            .lb_list(
                &format!("/loadbalancers?name={}", encode(name)),
                "loadbalancers",
                "find load balancer",
            )
            .await?
            .into_iter()
            .filter(|l| l["name"] == name)
            .collect();
        if found.len() > 1 {
            return Err(self.lb_error(
                "find load balancer",
                format!("{} load balancers are named {name}", found.len()),
            ));
        }
        Ok(found.into_iter().next())
    }

    fn naming(&self, cluster_name: &str, service: &Service) -> Naming {
        Naming::new(self.layout, cluster_name, service)
    }

    /// The Service's load balancer: external, by its id annotation when set (`None` when
    /// that id is gone), else by name, else by the legacy in-tree name; in-tree, by name.
    async fn lookup(&self, naming: &Naming, service: &Service) -> Result<Option<Value>> {
        if naming.layout == Layout::External {
            if let Some(id) = annotation(service, ANNOTATION_LOAD_BALANCER_ID) {
                return match self
                    .lb_call(
                        Method::GET,
                        &format!("/loadbalancers/{}", encode(id)),
                        None,
                        "get load balancer",
                    )
                    .await
                {
                    Ok(v) => Ok(Some(v["loadbalancer"].clone())),
                    Err(e) if is_not_found(&e) => Ok(None),
                    Err(e) => Err(e),
                };
            }
        }
        let Some(legacy) = &naming.legacy else {
            return self.find_lb(&naming.lb).await;
        };
        // Both names at once: a new Service (the common case) needs both answers, and one
        // round trip instead of two is a good part of its create on a busy cloud. A Service
        // found by its name without its id annotation (rare: the annotation is written with
        // the load balancer) pays the legacy look-up it would otherwise skip.
        let (current, old) = tokio::join!(self.find_lb(&naming.lb), self.find_lb(legacy));
        if let Some(lb) = current? {
            return Ok(Some(lb));
        }
        let found = old?;
        if let Some(lb) = &found {
            tracing::info!(lb = %legacy, id = ?lb["id"].as_str(), adopted_as = %naming.lb, "found the load balancer under its legacy in-tree name; adopting it");
        }
        Ok(found)
    }

    /// May this Service share `lb`, a load balancer found by its `load-balancer-id`
    /// annotation? Its own (by name) always; another's (another Service's, or one made outside
    /// Kubernetes) as OCCM allows it: at most `[LoadBalancer] max-shared-lb` Services on it
    /// (counted by their `kube_service_` tags), and never an internal Service (it could be
    /// exposed when the owner is external). A refusal names the annotation.
    fn check_share(&self, naming: &Naming, lb: &Value, internal: bool) -> Result<()> {
        if naming.owns(lb["name"].as_str().unwrap_or_default()) {
            return Ok(());
        }
        let id = lb["id"].as_str().unwrap_or_default();
        let tags = lb_tags(lb);
        let sharing = tags
            .iter()
            .filter(|t| t.starts_with(SERVICE_PREFIX))
            .count();
        let max = self.config.load_balancer.max_shared_lb() as usize;
        if !tags.contains(&naming.lb.as_str()) && sharing + 1 > max {
            return Err(self.lb_error(
                "ensure load balancer",
                format!("annotation {ANNOTATION_LOAD_BALANCER_ID}: load balancer {id} is already shared by {sharing} Services ([LoadBalancer] max-shared-lb = {max})"),
            ));
        }
        if internal {
            return Err(self.lb_error(
                "ensure load balancer",
                format!("annotation {ANNOTATION_LOAD_BALANCER_ID}: an internal Service cannot share load balancer {id} (OCCM refuses it too: the owner could expose it)"),
            ));
        }
        Ok(())
    }

    /// A Service leaves a load balancer it shares with other Services (or that was made
    /// outside Kubernetes), as OCCM's delete does then: its own listeners (tagged with its
    /// name) and their pools are deleted and its tag is taken off the load balancer, which
    /// stays with its floating IP.
    async fn leave_shared(&self, lb: &Value, naming: &Naming) -> Result<()> {
        let id = lb["id"].as_str().unwrap_or_default();
        if lb["provisioning_status"]
            .as_str()
            .is_some_and(|s| s.starts_with("PENDING_"))
        {
            self.wait_active(id).await?;
        }
        let listeners = self
            .lb_list(
                &format!("/listeners?loadbalancer_id={id}"),
                "listeners",
                "list listeners",
            )
            .await?;
        let pools = self
            .lb_list(
                &format!("/pools?loadbalancer_id={id}"),
                "pools",
                "list pools",
            )
            .await?;
        for l in listeners
            .iter()
            .filter(|l| lb_tags(l).contains(&naming.lb.as_str()))
        {
            if let Some(listener) = l["id"].as_str() {
                self.delete_listener(id, listener, &pools).await?;
            }
        }
        let tags = lb_tags(lb);
        if tags.contains(&naming.lb.as_str()) {
            let kept: Vec<&str> = tags.into_iter().filter(|t| *t != naming.lb).collect();
            self.lb_call(
                Method::PUT,
                &format!("/loadbalancers/{id}"),
                Some(&json!({"loadbalancer": {"tags": kept}})),
                "untag load balancer",
            )
            .await?;
            self.wait_active(id).await?;
        }
        tracing::info!(id, lb = ?lb["name"].as_str(), service_lb = %naming.lb, "the Service left a shared load balancer; it stays for the others");
        Ok(())
    }

    /// The floating IP on `port_id`, if any.
    async fn floating_ip_of_port(&self, port_id: &str) -> Result<Option<Value>> {
        self.floating_ip_where("port_id", port_id).await
    }

    /// The floating IP whose `field` is `value` (a Neutron list filter, checked again on the
    /// answer), if the cloud holds one.
    async fn floating_ip_where(&self, field: &str, value: &str) -> Result<Option<Value>> {
        let found = self
            .client
            .list(
                Api::Network,
                &format!("/floatingips?{field}={}", encode(value)),
                "floatingips",
                "list floating IPs",
            )
            .await?;
        Ok(found.into_iter().find(|f| f[field] == value))
    }

    /// The floating IP the Service's status shows, when it may have one: the first ingress
    /// address of a Service that is not internal (a bad annotation: none, the port decides).
    fn status_floating_ip(&self, service: &Service) -> Option<String> {
        if self.floating_ip_wish(service).map_or(true, |w| w.internal) {
            return None;
        }
        let ingress = service
            .status
            .as_ref()?
            .load_balancer
            .as_ref()?
            .ingress
            .as_ref()?;
        let ip = ingress.first()?.ip.as_deref()?;
        ip.parse::<std::net::IpAddr>().ok().map(|a| a.to_string())
    }

    /// What the Service asks of its floating IP; a bad boolean annotation is an error naming it.
    fn floating_ip_wish(&self, service: &Service) -> Result<FloatingIpWish> {
        let c = &self.config.load_balancer;
        let flag = |key: &str| -> Result<bool> {
            match annotation(service, key) {
                None => Ok(false),
                Some(v) => parse_go_bool(v).ok_or_else(|| {
                    self.lb_error(
                        "read Service annotations",
                        format!("annotation {key}: {v:?} is not true or false"),
                    )
                }),
            }
        };
        let non_empty = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(str::to_owned);
        Ok(FloatingIpWish {
            // `internal-lb = true` in cloud.conf forces every Service internal (OCCM).
            internal: c.internal_lb || flag(ANNOTATION_INTERNAL)?,
            network_id: non_empty(annotation(service, ANNOTATION_FLOATING_NETWORK_ID))
                .or_else(|| c.floating_network_id.clone()),
            subnet_id: non_empty(annotation(service, ANNOTATION_FLOATING_SUBNET_ID))
                .or_else(|| c.floating_subnet_id.clone()),
            address: non_empty(
                service
                    .spec
                    .as_ref()
                    .and_then(|s| s.load_balancer_ip.as_deref()),
            ),
            keep: flag(ANNOTATION_KEEP_FLOATING_IP)?,
        })
    }

    /// What ensuring the Service's load balancer would refuse before asking the cloud
    /// anything: a bad `loadbalancer.openstack.org/*` (or internal, source-range) annotation
    /// or source range, with the error the service controller reports in its
    /// `SyncLoadBalancerFailed` Event. The same parsers decide ([`Self::floating_ip_wish`],
    /// [`Self::settings`]), so the admission webhook (`crate::webhook`, through
    /// `LoadBalancer::check_service`) and the controller cannot disagree.
    pub(crate) fn check_service_settings(&self, service: &Service) -> Result<()> {
        self.floating_ip_wish(service)?;
        self.settings(service)?;
        Ok(())
    }

    /// The Service's listener, pool and monitor settings; a bad annotation is an error
    /// naming it.
    fn settings(&self, service: &Service) -> Result<Settings> {
        let c = &self.config.load_balancer;
        let bad = |key: &str, v: &str, what: &str| {
            self.lb_error(
                "read Service annotations",
                format!("annotation {key}: {v:?} is not {what}"),
            )
        };
        let int = |key: &str, default: i64, min: i64, max: i64| -> Result<i64> {
            match annotation(service, key) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| bad(key, v, &format!("an integer from {min} to {max}"))),
            }
        };
        let method = match annotation(service, ANNOTATION_LB_METHOD).filter(|m| !m.is_empty()) {
            Some(m) => m.to_owned(),
            None => c.lb_method.clone().unwrap_or_else(|| "ROUND_ROBIN".into()),
        };
        let mut listener = vec![(
            "connection_limit",
            int(ANNOTATION_CONNECTION_LIMIT, -1, -1, i64::from(i32::MAX))?,
        )];
        for (key, field, default) in ANNOTATION_TIMEOUTS {
            // Octavia: 0 to 365 days in milliseconds.
            listener.push((field, int(key, default, 0, 31_536_000_000)?));
        }
        let enabled = match annotation(service, ANNOTATION_ENABLE_HEALTH_MONITOR) {
            None => c.create_monitor,
            Some(v) => parse_go_bool(v)
                .ok_or_else(|| bad(ANNOTATION_ENABLE_HEALTH_MONITOR, v, "true or false"))?,
        };
        let secs = |d: Option<Duration>, default: u64| d.map_or(default, |d| d.as_secs()) as i64;
        let monitor = if enabled {
            let delay = int(
                ANNOTATION_HEALTH_MONITOR_DELAY,
                secs(c.monitor_delay, 5),
                1,
                86_400,
            )?;
            let timeout = int(
                ANNOTATION_HEALTH_MONITOR_TIMEOUT,
                secs(c.monitor_timeout, 3),
                1,
                86_400,
            )?;
            Some(Monitor {
                delay,
                // Octavia refuses a timeout longer than the delay.
                timeout: timeout.min(delay),
                max_retries: int(
                    ANNOTATION_HEALTH_MONITOR_MAX_RETRIES,
                    i64::from(c.monitor_max_retries.unwrap_or(1)),
                    1,
                    10,
                )?,
                max_retries_down: int(
                    ANNOTATION_HEALTH_MONITOR_MAX_RETRIES_DOWN,
                    i64::from(c.monitor_max_retries_down.unwrap_or(3)),
                    1,
                    10,
                )?,
            })
        } else {
            None
        };
        let allowed_cidrs =
            source_ranges(service).map_err(|m| self.lb_error("read Service source ranges", m))?;
        if allowed_cidrs.is_some() && self.layout == Layout::InTree {
            // The legacy provider enforced source ranges only through the VIP port's security
            // group it managed with manage-security-groups; hypercloud's managed group is
            // OCCM's (node ports only), so in-tree a restriction cannot be honoured.
            return Err(self.lb_error(
                "read Service source ranges",
                "source range restrictions are not supported for in-tree openstack load balancers (the legacy provider's VIP security group is not implemented; the cloud-controller-manager sets the listeners' allowed_cidrs)",
            ));
        }
        let proxy_protocol = proxy_protocol(service)
            .map_err(|v| bad(ANNOTATION_PROXY_PROTOCOL, v, "true, v1, v2 or false"))?;
        let forwarded_for = match annotation(service, ANNOTATION_X_FORWARDED_FOR) {
            None => false,
            Some(v) => parse_go_bool(v)
                .ok_or_else(|| bad(ANNOTATION_X_FORWARDED_FOR, v, "true or false"))?,
        };
        if proxy_protocol.is_some() && forwarded_for {
            return Err(self.lb_error(
                "read Service annotations",
                format!("annotation {ANNOTATION_PROXY_PROTOCOL} and {ANNOTATION_X_FORWARDED_FOR} cannot be used together"),
            ));
        }
        let udp = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .is_some_and(|ports| ports.iter().any(|p| p.protocol.as_deref() == Some("UDP")));
        if udp && (proxy_protocol.is_some() || forwarded_for) {
            let key = if forwarded_for {
                ANNOTATION_X_FORWARDED_FOR
            } else {
                ANNOTATION_PROXY_PROTOCOL
            };
            // Octavia has no UDP listener with HTTP or PROXY pools.
            return Err(self.lb_error(
                "read Service annotations",
                format!("annotation {key} needs TCP ports; the Service has a UDP port"),
            ));
        }
        let source_ip_persistence = service
            .spec
            .as_ref()
            .is_some_and(|s| s.session_affinity.as_deref() == Some("ClientIP"));
        let health_check_node_port = service
            .spec
            .as_ref()
            .filter(|s| monitor.is_some() && s.external_traffic_policy.as_deref() == Some("Local"))
            .and_then(|s| s.health_check_node_port)
            .filter(|p| *p > 0)
            .map(i64::from);
        Ok(Settings {
            method,
            listener,
            monitor,
            health_check_node_port,
            allowed_cidrs,
            proxy_protocol,
            forwarded_for,
            source_ip_persistence,
            member_subnet_id: non_empty(service, ANNOTATION_MEMBER_SUBNET_ID)
                .or_else(|| c.member_subnet_id.clone()),
            node_selector: node_selector(
                annotation(service, ANNOTATION_NODE_SELECTOR)
                    .or(c.node_selector.as_deref())
                    .unwrap_or_default(),
            ),
            flavor_id: non_empty(service, ANNOTATION_FLAVOR_ID).or_else(|| c.flavor_id.clone()),
            availability_zone: non_empty(service, ANNOTATION_AVAILABILITY_ZONE)
                .or_else(|| c.availability_zone.clone()),
        })
    }

    /// Whether this provider may delete `fip` when it is done with it: in-tree, any floating
    /// IP on the VIP port (as the legacy provider); external, the ones OCCM describes as its
    /// own, and those on a load balancer adopted under its legacy name (the in-tree
    /// provider created them without a description).
    fn may_delete_floating_ip(&self, fip: &Value, lb_name: &str, naming: &Naming) -> bool {
        naming.layout == Layout::InTree
            || fip["description"]
                .as_str()
                .is_some_and(|d| d.starts_with(FIP_DESCRIPTION))
            || naming.legacy.as_deref() == Some(lb_name)
    }

    /// Releases `fip` when this provider may delete it, else detaches it from the port.
    async fn release_floating_ip(&self, fip: &Value, delete: bool) -> Result<()> {
        let Some(id) = fip["id"].as_str() else {
            return Ok(());
        };
        let path = format!("/floatingips/{}", encode(id));
        let result = if delete {
            self.client
                .request(
                    Api::Network,
                    Method::DELETE,
                    &path,
                    None,
                    "delete floating IP",
                )
                .await
        } else {
            self.client
                .request(
                    Api::Network,
                    Method::PUT,
                    &path,
                    Some(&json!({"floatingip": {"port_id": null}})),
                    "detach floating IP",
                )
                .await
        };
        match result {
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e),
            Ok(_) => {
                tracing::info!(floating_ip = ?fip["floating_ip_address"].as_str(), deleted = delete, "floating IP released");
                Ok(())
            }
        }
    }

    /// The floating IP of a Service's load balancer, as OCCM's `ensureFloatingIP` (the
    /// legacy provider did the same, less the internal switch-over):
    ///
    /// 1. internal: a floating IP on the VIP port is released (deleted when ours and not
    ///    `keep-floatingip`, else detached) and the VIP is the address;
    /// 2. a floating IP already on the VIP port is kept;
    /// 3. `spec.loadBalancerIP` naming an existing, unattached floating IP: it is attached;
    ///    attached elsewhere: an error;
    /// 4. with a floating network: a new floating IP on the VIP port (at
    ///    `spec.loadBalancerIP` when set, in `floating-subnet-id` when set);
    /// 5. otherwise the VIP (OCCM: "forcing to ensure an internal load balancer service").
    ///
    /// `fresh_port`: Octavia made the VIP port in this ensure's create, so no floating IP
    /// can be on it yet and step 2's look-up is skipped.
    #[allow(clippy::too_many_arguments)]
    async fn ensure_floating_ip(
        &self,
        lb: &Value,
        wish: &FloatingIpWish,
        naming: &Naming,
        owner: bool,
        cluster_name: &str,
        service: &Service,
        fresh_port: bool,
    ) -> Result<String> {
        let vip = lb["vip_address"].as_str().unwrap_or_default().to_owned();
        let Some(port_id) = lb["vip_port_id"].as_str().filter(|p| !p.is_empty()) else {
            return Ok(vip);
        };
        let current = if fresh_port {
            None
        } else {
            self.floating_ip_of_port(port_id).await?
        };
        let lb_name = lb["name"].as_str().unwrap_or_default();
        if wish.internal {
            if let Some(fip) = current {
                let delete = !wish.keep && self.may_delete_floating_ip(&fip, lb_name, naming);
                self.release_floating_ip(&fip, delete).await?;
            }
            return Ok(vip);
        }
        if let Some(ip) = current
            .as_ref()
            .and_then(|f| f["floating_ip_address"].as_str())
        {
            return Ok(ip.to_owned());
        }
        if !owner && (wish.network_id.is_some() || wish.address.is_some()) {
            // OCCM: only the owner puts a floating IP on a shared load balancer, or a
            // sharer could expose an internal owner's VIP.
            return Err(self.lb_error(
                "ensure floating IP",
                format!("annotation {ANNOTATION_LOAD_BALANCER_ID}: load balancer {lb_name} has no floating IP, and only the Service that owns it may attach one"),
            ));
        }
        if let Some(address) = &wish.address {
            let existing = self
                .client
                .list(
                    Api::Network,
                    &format!("/floatingips?floating_ip_address={}", encode(address)),
                    "floatingips",
                    "find floating IP",
                )
                .await?;
            if let Some(fip) = existing
                .iter()
                .find(|f| f["floating_ip_address"] == address.as_str())
            {
                if fip["port_id"].as_str().is_some_and(|p| !p.is_empty()) {
                    return Err(self.lb_error(
                        "ensure floating IP",
                        format!("floating IP {address} (spec.loadBalancerIP) is not available: it is attached to another port"),
                    ));
                }
                let id = fip["id"].as_str().unwrap_or_default();
                self.client
                    .request(
                        Api::Network,
                        Method::PUT,
                        &format!("/floatingips/{}", encode(id)),
                        Some(&json!({"floatingip": {"port_id": port_id}})),
                        "attach floating IP",
                    )
                    .await?;
                tracing::info!(floating_ip = %address, port_id, "floating IP attached to the load balancer's VIP port");
                return Ok(address.clone());
            }
        }
        let Some(network) = &wish.network_id else {
            if wish.address.is_some() {
                return Err(self.lb_error(
                    "ensure floating IP",
                    "spec.loadBalancerIP names no existing floating IP, and no floating network is configured to create it in ([LoadBalancer] floating-network-id or the annotation loadbalancer.openstack.org/floating-network-id)",
                ));
            }
            tracing::debug!(lb = %lb_name, "no floating network configured; the VIP is the ingress address");
            return Ok(vip);
        };
        let mut body = json!({"floatingip": {"floating_network_id": network, "port_id": port_id}});
        if naming.layout == Layout::External {
            body["floatingip"]["description"] = format!(
                "{FIP_DESCRIPTION} {}/{} from cluster {cluster_name}",
                service.metadata.namespace.as_deref().unwrap_or("default"),
                service.metadata.name.as_deref().unwrap_or_default()
            )
            .into();
        }
        if let Some(subnet) = &wish.subnet_id {
            body["floatingip"]["subnet_id"] = subnet.clone().into();
        }
        if let Some(address) = &wish.address {
            body["floatingip"]["floating_ip_address"] = address.clone().into();
        }
        let created = self
            .client
            .request(
                Api::Network,
                Method::POST,
                "/floatingips",
                Some(&body),
                "create floating IP",
            )
            .await?;
        let ip = created.body["floatingip"]["floating_ip_address"]
            .as_str()
            .ok_or_else(|| {
                self.lb_error(
                    "create floating IP",
                    "the answer has no floating_ip_address",
                )
            })?
            .to_owned();
        tracing::info!(floating_ip = %ip, port_id, lb = %lb_name, "floating IP created for the load balancer");
        Ok(ip)
    }

    /// External: writes the load balancer's id and address to the Service's annotations
    /// (one merge patch, only when they differ), as OCCM's service patcher. Without a
    /// Kubernetes client (a provider built outside a controller manager) it logs and skips.
    async fn patch_service_annotations(
        &self,
        service: &Service,
        id: &str,
        address: &str,
    ) -> Result<()> {
        if annotation(service, ANNOTATION_LOAD_BALANCER_ID) == Some(id)
            && annotation(service, ANNOTATION_LOAD_BALANCER_ADDRESS) == Some(address)
        {
            return Ok(());
        }
        let Some(client) = self.kube.get() else {
            tracing::debug!(
                id,
                "no Kubernetes client; the load balancer id is not written to the Service"
            );
            return Ok(());
        };
        let (Some(ns), Some(name)) = (
            service.metadata.namespace.as_deref(),
            service.metadata.name.as_deref(),
        ) else {
            return Ok(());
        };
        let api: kube::Api<Service> = kube::Api::namespaced(client.clone(), ns);
        let patch = json!({"metadata": {"annotations": {
            ANNOTATION_LOAD_BALANCER_ID: id,
            ANNOTATION_LOAD_BALANCER_ADDRESS: address,
        }}});
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(|e| {
            self.lb_error(
                "annotate Service",
                format!("writing {ANNOTATION_LOAD_BALANCER_ID}={id} to {ns}/{name}: {e}"),
            )
        })?;
        Ok(())
    }

    /// Polls until the load balancer is `ACTIVE` (after [`FIRST_POLL`], back-off, bounded);
    /// `ERROR` fails.
    async fn wait_active(&self, id: &str) -> Result<Value> {
        let op = "wait for load balancer";
        tokio::time::sleep(FIRST_POLL).await;
        let active = poll_until(ACTIVE_WAIT, || async {
            let lb = self
                .lb_call(Method::GET, &format!("/loadbalancers/{id}"), None, op)
                .await?;
            let status = lb["loadbalancer"]["provisioning_status"]
                .as_str()
                .unwrap_or_default();
            match status {
                "ACTIVE" => Ok(Poll::Ready(lb["loadbalancer"].clone())),
                "ERROR" => Err(self.lb_error(op, format!("load balancer {id} is in ERROR"))),
                s => Ok(Poll::Pending(s.chars().take(32).collect())),
            }
        })
        .await;
        match active {
            Ok(lb) => Ok(lb),
            Err(WaitError::Failed(e)) => Err(e),
            Err(WaitError::TimedOut(t)) => {
                Err(self.lb_error(op, format!("load balancer {id} {t}")))
            }
        }
    }

    /// Polls until the load balancer is gone (back-off, bounded). The first poll is at once:
    /// a cloud may delete synchronously (the local cloud does).
    async fn wait_gone(&self, id: &str) -> Result<()> {
        let op = "wait for load balancer deletion";
        let gone = poll_until(ACTIVE_WAIT, || async {
            match self
                .lb_call(Method::GET, &format!("/loadbalancers/{id}"), None, op)
                .await
            {
                Err(e) if is_not_found(&e) => Ok(Poll::Ready(())),
                Err(e) => Err(e),
                Ok(lb) if lb["loadbalancer"]["provisioning_status"] == "DELETED" => {
                    Ok(Poll::Ready(()))
                }
                Ok(_) => Ok(Poll::Pending("present".into())),
            }
        })
        .await;
        match gone {
            Ok(()) => Ok(()),
            Err(WaitError::Failed(e)) => Err(e),
            Err(WaitError::TimedOut(t)) => {
                Err(self.lb_error(op, format!("load balancer {id} {t}")))
            }
        }
    }

    /// The VIP placement: `vip_subnet_id` or `vip_network_id`.
    async fn vip_placement(
        &self,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(&'static str, String)> {
        let wanted = |key: &str| annotation(service, key).filter(|v| !v.is_empty());
        if let Some(s) = wanted(ANNOTATION_SUBNET_ID) {
            return Ok(("vip_subnet_id", s.to_owned()));
        }
        if let Some(n) = wanted(ANNOTATION_NETWORK_ID) {
            return Ok(("vip_network_id", n.to_owned()));
        }
        let lb = &self.config.load_balancer;
        if let Some(s) = &lb.subnet_id {
            return Ok(("vip_subnet_id", s.clone()));
        }
        if let Some(n) = &lb.network_id {
            return Ok(("vip_network_id", n.clone()));
        }
        let subnets = self
            .client
            .list(Api::Network, "/subnets", "subnets", "list subnets")
            .await?;
        // OCCM's getSubnetIDForLB: the subnet of a node's member address (where the members
        // are), else the local cloud's private subnet, else the first.
        let of_nodes = nodes.iter().filter_map(member_address).find_map(|ip| {
            subnets
                .iter()
                .find(|s| s["cidr"].as_str().is_some_and(|c| cidr_contains(c, &ip)))
        });
        of_nodes
            .or_else(|| {
                subnets
                    .iter()
                    .find(|s| s["name"] == "private" || s["name"] == "private-subnet")
            })
            .or_else(|| subnets.first())
            .and_then(|s| s["id"].as_str())
            .map(|id| ("vip_subnet_id", id.to_owned()))
            .ok_or_else(|| {
                self.lb_error(
                    "choose VIP subnet",
                    "no [LoadBalancer] subnet-id or network-id, and the cloud has no subnet",
                )
            })
    }

    fn wanted_ports(&self, service: &Service) -> Result<Vec<Port>> {
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default();
        if ports.is_empty() {
            return Err(self.lb_error("ensure load balancer", "the Service has no ports"));
        }
        ports
            .iter()
            .map(|p| {
                let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
                if protocol != "TCP" && protocol != "UDP" {
                    return Err(self.lb_error(
                        "ensure load balancer",
                        format!("protocol {protocol} of port {} is not supported", p.port),
                    ));
                }
                let node_port = p.node_port.ok_or_else(|| {
                    self.lb_error(
                        "ensure load balancer",
                        format!("port {} has no nodePort", p.port),
                    )
                })?;
                Ok(Port {
                    protocol,
                    port: p.port,
                    node_port,
                })
            })
            .collect()
    }

    /// The pool members wanted for `node_port`: each node's first InternalIP.
    /// A member is (address, node port, monitor port, subnet): the monitor port is the
    /// Service's health-check node port with `externalTrafficPolicy: Local` (OCCM), the subnet
    /// `member-subnet-id`'s.
    fn wanted_members(
        nodes: &[Node],
        node_port: i32,
        monitor_port: Option<i64>,
        subnet: Option<&str>,
    ) -> BTreeSet<MemberKey> {
        nodes
            .iter()
            .filter_map(|n| {
                let ip = member_address(n);
                if ip.is_none() {
                    tracing::warn!(node = ?n.metadata.name, "node has no InternalIP; not a load balancer member");
                }
                ip
            })
            .map(|ip| (ip, i64::from(node_port), monitor_port, subnet.map(str::to_owned)))
            .collect()
    }

    /// Replaces the pool's members by `wanted` (batch update) when they differ.
    async fn sync_members(
        &self,
        lb_id: &str,
        pool_id: &str,
        wanted: &BTreeSet<MemberKey>,
    ) -> Result<bool> {
        let current: BTreeSet<MemberKey> = self
            .lb_list(
                &format!("/pools/{pool_id}/members"),
                "members",
                "list pool members",
            )
            .await?
            .iter()
            .filter_map(|m| {
                Some((
                    m["address"].as_str()?.to_owned(),
                    m["protocol_port"].as_i64()?,
                    m["monitor_port"].as_i64(),
                    m["subnet_id"].as_str().map(str::to_owned),
                ))
            })
            .collect();
        if &current == wanted {
            return Ok(false);
        }
        let body = |members: &mut dyn Iterator<Item = &MemberKey>| {
            let members: Vec<Value> = members
                .map(|m| {
                    let mut body = member_body(m);
                    // An explicit null clears a monitor port the batch update would keep.
                    body["monitor_port"] = json!(m.2);
                    body
                })
                .collect();
            json!({ "members": members })
        };
        // A member's subnet is immutable and the batch update matches members by address
        // and port: members on another subnet leave first, then come back on the wanted one.
        let moved = |w: &MemberKey| {
            current
                .iter()
                .any(|c| c.0 == w.0 && c.1 == w.1 && c.3 != w.3)
        };
        if wanted.iter().any(moved) {
            let staying = body(&mut wanted.iter().filter(|w| !moved(w)));
            self.lb_call(
                Method::PUT,
                &format!("/pools/{pool_id}/members"),
                Some(&staying),
                "update pool members",
            )
            .await?;
            self.wait_active(lb_id).await?;
        }
        self.lb_call(
            Method::PUT,
            &format!("/pools/{pool_id}/members"),
            Some(&body(&mut wanted.iter())),
            "update pool members",
        )
        .await?;
        self.wait_active(lb_id).await?;
        tracing::info!(
            pool_id,
            members = wanted.len(),
            "load balancer pool members updated"
        );
        Ok(true)
    }

    /// The monitor type for a pool of `protocol`: `HTTP` on the health-check node port with
    /// `externalTrafficPolicy: Local` (TCP pools; OCCM also on UDP where Octavia allows it),
    /// else a connect check.
    fn monitor_type(protocol: &str, settings: &Settings) -> &'static str {
        match (protocol, settings.health_check_node_port) {
            ("UDP", _) => "UDP-CONNECT",
            (_, Some(_)) => "HTTP",
            _ => "TCP",
        }
    }

    fn monitor_body(pool_id: &str, name: &str, kind: &str, m: &Monitor) -> Value {
        let mut body = json!({"healthmonitor": {
            "name": name,
            "pool_id": pool_id,
            "type": kind,
            "delay": m.delay,
            "timeout": m.timeout,
            "max_retries": m.max_retries,
            "max_retries_down": m.max_retries_down,
        }});
        if kind == "HTTP" {
            body["healthmonitor"]["url_path"] = "/healthz".into();
            body["healthmonitor"]["http_method"] = "GET".into();
            body["healthmonitor"]["expected_codes"] = "200".into();
        }
        body
    }

    /// Creates the pool's health monitor and waits for the load balancer.
    async fn create_monitor(
        &self,
        lb_id: &str,
        pool_id: &str,
        name: &str,
        kind: &str,
        m: &Monitor,
    ) -> Result<()> {
        let body = Self::monitor_body(pool_id, name, kind, m);
        self.lb_call(
            Method::POST,
            "/healthmonitors",
            Some(&body),
            "create health monitor",
        )
        .await?;
        self.wait_active(lb_id).await.map(drop)
    }

    /// Deletes `kind/id` and waits for the load balancer.
    async fn delete_child(&self, lb_id: &str, path: &str, operation: &str) -> Result<()> {
        match self.lb_call(Method::DELETE, path, None, operation).await {
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        self.wait_active(lb_id).await.map(drop)
    }

    /// The listener of port `index` as a create sends it (without its load balancer).
    fn listener_body(naming: &Naming, index: usize, p: &Port, settings: &Settings) -> Value {
        let listener_protocol = settings.listener_protocol(&p.protocol);
        let mut body = json!({
            "name": naming.child("listener", index),
            "protocol": listener_protocol,
            "protocol_port": p.port,
        });
        if settings.forwarded_for && listener_protocol == "HTTP" {
            body["insert_headers"] = json!({"X-Forwarded-For": "true"});
        }
        for (field, value) in &settings.listener {
            body[*field] = json!(value);
        }
        if let Some(cidrs) = &settings.allowed_cidrs {
            body["allowed_cidrs"] = json!(cidrs);
        }
        if naming.layout == Layout::External {
            // OCCM tags what it creates with the load balancer's name.
            body["tags"] = json!([naming.lb]);
        }
        body
    }

    /// The pool of port `index` as a create sends it (without its listener).
    fn pool_body(naming: &Naming, index: usize, p: &Port, settings: &Settings) -> Value {
        let mut body = json!({
            "name": naming.child("pool", index),
            "protocol": settings.pool_protocol(&p.protocol),
            "lb_algorithm": settings.method,
        });
        if settings.source_ip_persistence {
            body["session_persistence"] = settings.session_persistence();
        }
        body
    }

    /// The listeners of a single-call create (Octavia's "fully populated load balancer", as
    /// OCCM's `createOctaviaLoadBalancer` sends it): per port its listener with its default
    /// pool, the pool with its members and health monitor; what [`Self::converge`] would make
    /// on an empty load balancer, in one request and one wait.
    fn tree(naming: &Naming, ports: &[Port], nodes: &[Node], settings: &Settings) -> Vec<Value> {
        ports
            .iter()
            .enumerate()
            .map(|(index, p)| {
                let kind = Self::monitor_type(&p.protocol, settings);
                let monitor_port = settings.health_check_node_port.filter(|_| kind == "HTTP");
                let members = Self::wanted_members(
                    nodes,
                    p.node_port,
                    monitor_port,
                    settings.member_subnet_id.as_deref(),
                );
                let mut pool = Self::pool_body(naming, index, p, settings);
                pool["members"] = members.iter().map(member_body).collect();
                if let Some(m) = &settings.monitor {
                    let name = naming.child("monitor", index);
                    let mut hm = Self::monitor_body("", &name, kind, m);
                    if let Some(o) = hm["healthmonitor"].as_object_mut() {
                        o.remove("pool_id");
                    }
                    pool["healthmonitor"] = hm["healthmonitor"].take();
                }
                let mut listener = Self::listener_body(naming, index, p, settings);
                listener["default_pool"] = pool;
                listener
            })
            .collect()
    }

    /// The load balancer's listeners, pools and monitors converge to `ports` and `nodes`;
    /// `true` when it changed anything.
    #[allow(clippy::too_many_arguments)]
    async fn converge(
        &self,
        lb_id: &str,
        naming: &Naming,
        owner: bool,
        ports: &[Port],
        nodes: &[Node],
        settings: &Settings,
        members_only: bool,
    ) -> Result<bool> {
        let mut changed = false;
        let all = self
            .lb_list(
                &format!("/listeners?loadbalancer_id={lb_id}"),
                "listeners",
                "list listeners",
            )
            .await?;
        // On a shared load balancer a Service converges only its own listeners: tagged with
        // its name, or untagged on the load balancer it owns (OCCM). Another Service's
        // listener on a port this one wants is a conflict (OCCM's checkListenerPorts).
        let (listeners, foreign): (Vec<Value>, Vec<Value>) = all.into_iter().partition(|l| {
            let tags = lb_tags(l);
            tags.contains(&naming.lb.as_str()) || (owner && tags.is_empty())
        });
        for p in ports {
            let udp = p.protocol == "UDP";
            if foreign
                .iter()
                .any(|l| l["protocol_port"] == p.port && (l["protocol"] == "UDP") == udp)
            {
                return Err(self.lb_error(
                    "ensure load balancer",
                    format!("annotation {ANNOTATION_LOAD_BALANCER_ID}: port {} of load balancer {lb_id} is another Service's listener", p.port),
                ));
            }
        }
        let pools = self
            .lb_list(
                &format!("/pools?loadbalancer_id={lb_id}"),
                "pools",
                "list pools",
            )
            .await?;
        let method = settings.method.as_str();
        let mut kept = BTreeSet::new();
        // Listeners deleted to free their port for another protocol.
        let mut replaced = BTreeSet::new();
        for (index, p) in ports.iter().enumerate() {
            let listener_protocol = settings.listener_protocol(&p.protocol);
            let pool_protocol = settings.pool_protocol(&p.protocol);
            let existing = listeners
                .iter()
                .find(|l| l["protocol"] == listener_protocol && l["protocol_port"] == p.port);
            if existing.is_none() && !members_only {
                // The port's listener of another protocol (x-forwarded-for switched TCP and
                // HTTP) holds the port: it and its pool go first (OCCM keys listeners by
                // protocol and port, and deletes the ones no port wants).
                let udp = p.protocol == "UDP";
                for old in listeners
                    .iter()
                    .filter(|l| l["protocol_port"] == p.port && (l["protocol"] == "UDP") == udp)
                {
                    let Some(old_id) = old["id"].as_str() else {
                        continue;
                    };
                    self.delete_listener(lb_id, old_id, &pools).await?;
                    changed = true;
                    replaced.insert(old_id.to_owned());
                }
            }
            let listener_id = match existing.and_then(|l| l["id"].as_str()) {
                Some(id) => {
                    let mut fields: serde_json::Map<String, Value> = settings
                        .listener
                        .iter()
                        .filter(|(field, want)| existing.is_some_and(|l| l[*field] != *want))
                        .map(|(field, want)| ((*field).to_owned(), json!(want)))
                        .collect();
                    if let Some(l) = existing.filter(|_| naming.layout == Layout::External) {
                        // OCCM adds its name to the tags of listeners it adopts.
                        let mut tags = l["tags"].as_array().cloned().unwrap_or_default();
                        if !tags.iter().any(|t| t == naming.lb.as_str()) {
                            tags.push(naming.lb.clone().into());
                            fields.insert("tags".into(), Value::Array(tags));
                        }
                    }
                    if let Some(l) = existing.filter(|_| listener_protocol == "HTTP") {
                        // OCCM's update: X-Forwarded-For added or removed, other headers kept.
                        let has = l["insert_headers"]["X-Forwarded-For"] == "true";
                        if has != settings.forwarded_for {
                            let mut headers =
                                l["insert_headers"].as_object().cloned().unwrap_or_default();
                            if settings.forwarded_for {
                                headers.insert("X-Forwarded-For".into(), "true".into());
                            } else {
                                headers.remove("X-Forwarded-For");
                            }
                            fields.insert("insert_headers".into(), Value::Object(headers));
                        }
                    }
                    if existing.is_some_and(|l| current_cidrs(l) != settings.allowed_cidrs) {
                        let open = vec!["0.0.0.0/0".to_owned()];
                        fields.insert(
                            "allowed_cidrs".into(),
                            json!(settings.allowed_cidrs.as_ref().unwrap_or(&open)),
                        );
                    }
                    if !members_only && !fields.is_empty() {
                        self.lb_call(
                            Method::PUT,
                            &format!("/listeners/{id}"),
                            Some(&json!({ "listener": fields })),
                            "update listener",
                        )
                        .await?;
                        self.wait_active(lb_id).await?;
                        changed = true;
                    }
                    id.to_owned()
                }
                None if members_only => continue,
                None => {
                    let mut listener = Self::listener_body(naming, index, p, settings);
                    listener["loadbalancer_id"] = lb_id.into();
                    let body = json!({ "listener": listener });
                    let created = self
                        .lb_call(Method::POST, "/listeners", Some(&body), "create listener")
                        .await?;
                    self.wait_active(lb_id).await?;
                    changed = true;
                    created["listener"]["id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                }
            };
            kept.insert(listener_id.clone());
            let mut pool = pools.iter().find(|pool| {
                pool["listeners"]
                    .as_array()
                    .is_some_and(|ls| ls.iter().any(|l| l["id"] == listener_id.as_str()))
            });
            if let Some(old) = pool.filter(|old| !members_only && old["protocol"] != pool_protocol)
            {
                // A pool's protocol is immutable in Octavia: OCCM deletes the pool (its
                // members and monitor go with it) and creates one of the wanted protocol.
                if let Some(old_id) = old["id"].as_str() {
                    self.delete_child(lb_id, &format!("/pools/{old_id}"), "delete pool")
                        .await?;
                    changed = true;
                    tracing::info!(
                        lb_id,
                        pool = old_id,
                        protocol = pool_protocol,
                        "pool replaced for its protocol"
                    );
                }
                pool = None;
            }
            let (pool_id, monitor_id) = match pool {
                Some(pool) => {
                    let id = pool["id"].as_str().unwrap_or_default().to_owned();
                    let sticky = pool["session_persistence"]["type"] == "SOURCE_IP";
                    if !members_only
                        && (pool["lb_algorithm"] != method
                            || sticky != settings.source_ip_persistence)
                    {
                        let mut update = json!({"lb_algorithm": method});
                        if sticky != settings.source_ip_persistence {
                            update["session_persistence"] = settings.session_persistence();
                        }
                        self.lb_call(
                            Method::PUT,
                            &format!("/pools/{id}"),
                            Some(&json!({ "pool": update })),
                            "update pool",
                        )
                        .await?;
                        self.wait_active(lb_id).await?;
                        changed = true;
                    }
                    let monitor = pool["healthmonitor_id"].as_str().map(str::to_owned);
                    (id, monitor)
                }
                None if members_only => continue,
                None => {
                    let mut pool = Self::pool_body(naming, index, p, settings);
                    pool["listener_id"] = listener_id.clone().into();
                    let body = json!({ "pool": pool });
                    let created = self
                        .lb_call(Method::POST, "/pools", Some(&body), "create pool")
                        .await?;
                    self.wait_active(lb_id).await?;
                    changed = true;
                    (
                        created["pool"]["id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        None,
                    )
                }
            };
            let kind = Self::monitor_type(&p.protocol, settings);
            let monitor_port = settings.health_check_node_port.filter(|_| kind == "HTTP");
            changed |= self
                .sync_members(
                    lb_id,
                    &pool_id,
                    &Self::wanted_members(
                        nodes,
                        p.node_port,
                        monitor_port,
                        settings.member_subnet_id.as_deref(),
                    ),
                )
                .await?;
            if members_only {
                continue;
            }
            match (&settings.monitor, monitor_id) {
                (Some(m), None) => {
                    let name = naming.child("monitor", index);
                    self.create_monitor(lb_id, &pool_id, &name, kind, m).await?;
                    changed = true;
                }
                (Some(m), Some(id)) => {
                    let current = self
                        .lb_call(
                            Method::GET,
                            &format!("/healthmonitors/{id}"),
                            None,
                            "get health monitor",
                        )
                        .await?;
                    let hm = &current["healthmonitor"];
                    if hm["type"] != kind {
                        // Octavia cannot change a monitor's type: a new one replaces it.
                        self.delete_child(
                            lb_id,
                            &format!("/healthmonitors/{id}"),
                            "delete health monitor",
                        )
                        .await?;
                        let name = naming.child("monitor", index);
                        self.create_monitor(lb_id, &pool_id, &name, kind, m).await?;
                        changed = true;
                        continue;
                    }
                    let want = [
                        ("delay", m.delay),
                        ("timeout", m.timeout),
                        ("max_retries", m.max_retries),
                        ("max_retries_down", m.max_retries_down),
                    ];
                    if want.iter().any(|(f, v)| hm[*f] != *v) {
                        let fields: serde_json::Map<String, Value> = want
                            .iter()
                            .map(|(f, v)| ((*f).to_owned(), json!(v)))
                            .collect();
                        self.lb_call(
                            Method::PUT,
                            &format!("/healthmonitors/{id}"),
                            Some(&json!({ "healthmonitor": fields })),
                            "update health monitor",
                        )
                        .await?;
                        self.wait_active(lb_id).await?;
                        changed = true;
                    }
                }
                (None, Some(m)) => {
                    self.delete_child(
                        lb_id,
                        &format!("/healthmonitors/{m}"),
                        "delete health monitor",
                    )
                    .await?;
                    changed = true;
                }
                (None, None) => {}
            }
        }
        if members_only {
            return Ok(changed);
        }
        // Listeners (and their pools) for ports the Service no longer has.
        for l in &listeners {
            let Some(id) = l["id"].as_str() else { continue };
            if kept.contains(id) || replaced.contains(id) {
                continue;
            }
            self.delete_listener(lb_id, id, &pools).await?;
            changed = true;
        }
        Ok(changed)
    }

    /// Deletes listener `id` and the pools of `pools` behind it (gone ones are fine).
    async fn delete_listener(&self, lb_id: &str, id: &str, pools: &[Value]) -> Result<()> {
        for pool in pools.iter().filter(|pool| {
            pool["listeners"]
                .as_array()
                .is_some_and(|ls| ls.iter().any(|x| x["id"] == id))
        }) {
            if let Some(pid) = pool["id"].as_str() {
                self.delete_child(lb_id, &format!("/pools/{pid}"), "delete pool")
                    .await?;
            }
        }
        self.delete_child(lb_id, &format!("/listeners/{id}"), "delete listener")
            .await?;
        tracing::info!(lb_id, listener = id, "obsolete listener deleted");
        Ok(())
    }
}

/// The pool protocol `proxy-protocol` asks for (OCCM's `getProxyProtocolFromServiceAnnotation`,
/// which takes any other value as off and so would accept and ignore a typo: here the value is
/// the error).
fn proxy_protocol(service: &Service) -> std::result::Result<Option<&'static str>, &str> {
    match annotation(service, ANNOTATION_PROXY_PROTOCOL) {
        None | Some("false") | Some("") => Ok(None),
        Some("true") | Some("v1") => Ok(Some("PROXY")),
        Some("v2") => Ok(Some("PROXYV2")),
        Some(v) => Err(v),
    }
}

/// OCCM's `StringToMap`: `key1=val,key2=,key3` → (key, value), an empty value being `None`
/// (the label with any value); empty keys are skipped.
fn node_selector(value: &str) -> Vec<(String, Option<String>)> {
    value
        .trim()
        .split(',')
        .filter_map(|kv| {
            let (k, v) = match kv.trim().split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (kv.trim(), None),
            };
            (!k.is_empty()).then(|| (k.to_owned(), v.filter(|v| !v.is_empty()).map(str::to_owned)))
        })
        .collect()
}

/// The nodes `selector` picks (OCCM's `filterNodes`): all when it is empty, else those
/// having every label (with the value, when one is given).
fn select_nodes(nodes: &[Node], selector: &[(String, Option<String>)]) -> Vec<Node> {
    nodes
        .iter()
        .filter(|n| {
            selector.iter().all(|(k, v)| {
                let label = n.metadata.labels.as_ref().and_then(|l| l.get(k));
                label.is_some_and(|have| v.as_ref().is_none_or(|want| want == have))
            })
        })
        .cloned()
        .collect()
}

/// A node's member address: its first InternalIP.
/// A pool member as a create sends it (a batch update adds an explicit `monitor_port`).
fn member_body((address, port, monitor, subnet): &MemberKey) -> Value {
    let mut m = json!({"address": address, "protocol_port": port});
    if let Some(monitor) = monitor {
        m["monitor_port"] = json!(monitor);
    }
    if let Some(subnet) = subnet {
        m["subnet_id"] = subnet.clone().into();
    }
    m
}

fn member_address(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// The status of `service`'s load balancer at `address`. With PROXY protocol pools the
/// ingress's `ipMode` is `Proxy` (OCCM), so kube-proxy sends in-cluster clients of the address
/// through the load balancer, which adds the header the pods expect, rather than straight to
/// the pods.
fn status_of(address: Option<String>, service: &Service) -> LoadBalancerStatus {
    let proxy = matches!(proxy_protocol(service), Ok(Some(_)));
    LoadBalancerStatus {
        ingress: address.map(|ip| {
            vec![LoadBalancerIngress {
                ip: Some(ip),
                ip_mode: proxy.then(|| "Proxy".to_owned()),
                ..Default::default()
            }]
        }),
    }
}

/// Percent-encodes a query value (names are Kubernetes names plus `_`, but be safe).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[async_trait]
impl LoadBalancer for OpenStack {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let naming = self.naming(cluster_name, service);
        let key = Looked::key(&naming, service);
        // The floating IP the Service's status names is looked up beside the load balancer
        // (a deletion's first step: one round trip instead of two in a row); it counts only if
        // it sits on the load balancer's VIP port, else the port's is looked up after.
        let ingress = self.status_floating_ip(service);
        let by_address = async {
            match &ingress {
                Some(ip) => self.floating_ip_where("floating_ip_address", ip).await,
                None => Ok(None),
            }
        };
        let (lb, by_address) = tokio::join!(self.lookup(&naming, service), by_address);
        let Some(lb) = lb? else {
            self.looked().remove(&key);
            return Ok(None);
        };
        let floating_ip = match lb["vip_port_id"].as_str().filter(|p| !p.is_empty()) {
            Some(port) => match by_address {
                Ok(Some(fip)) if fip["port_id"] == port => Some(fip),
                _ => self.floating_ip_of_port(port).await?,
            },
            None => None,
        };
        // The ingress address: the floating IP on the VIP port when there is one, else the VIP.
        let address = floating_ip
            .as_ref()
            .and_then(|f| f["floating_ip_address"].as_str())
            .or_else(|| lb["vip_address"].as_str())
            .map(str::to_owned);
        let mut looked = self.looked();
        looked.retain(|_, l| l.at.elapsed() < LOOKED_TTL);
        looked.insert(
            key,
            Looked {
                lb,
                floating_ip,
                at: Instant::now(),
            },
        );
        Ok(Some(status_of(address, service)))
    }

    /// In-tree: upstream's default name (`a` + UID); external: OCCM's
    /// `kube_service_<cluster>_<namespace>_<name>`, at most 255 bytes.
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        self.naming(cluster_name, service).lb
    }

    /// The refused rows of `SERVICE_SETTINGS`, then the annotation parsers.
    fn check_service(&self, service: &Service) -> Result<()> {
        lb_settings::check(&self.name, SERVICE_SETTINGS, service)?;
        self.check_service_settings(service)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        self.check_service(service)?;
        let naming = self.naming(cluster_name, service);
        let name = naming.lb.clone();
        let ports = self.wanted_ports(service)?;
        let wish = self.floating_ip_wish(service)?;
        let settings = self.settings(service)?;
        let nodes = &select_nodes(nodes, &settings.node_selector);
        let started = Instant::now();
        let found = self.lookup(&naming, service).await?;
        if found.is_none() && naming.layout == Layout::External {
            if let Some(id) = annotation(service, ANNOTATION_LOAD_BALANCER_ID) {
                // OCCM: "failed to get load balancer"; creating another would orphan the id.
                return Err(self.lb_error(
                    "ensure load balancer",
                    format!("load balancer {id} of annotation {ANNOTATION_LOAD_BALANCER_ID} does not exist"),
                ));
            }
        }
        if let Some(lb) = &found {
            self.check_share(&naming, lb, wish.internal)?;
        }
        let owner = found
            .as_ref()
            .is_none_or(|lb| naming.owns(lb["name"].as_str().unwrap_or_default()));
        let wanted = Converged::wanted(&naming, &ports, &settings, &wish, nodes);
        let serial = self.config.load_balancer.provider_requires_serial_api_calls;
        // Made here: whole (the single-call create) or bare (serial calls follow), and whether
        // Octavia made its VIP port (no floating IP can be on that yet).
        let mut made = None;
        let lb = match found {
            Some(lb) => lb,
            None => {
                let port_id = annotation(service, ANNOTATION_PORT_ID)
                    .map(str::trim)
                    .filter(|p| !p.is_empty());
                let (key, value) = match port_id {
                    // OCCM: the port instead of a subnet or network.
                    Some(port) => ("vip_port_id", port.to_owned()),
                    None => self.vip_placement(service, nodes).await?,
                };
                let description = match naming.layout {
                    Layout::InTree => format!("Kubernetes external service {name}"),
                    Layout::External => format!(
                        "Kubernetes external service {}/{} from cluster {cluster_name}",
                        service.metadata.namespace.as_deref().unwrap_or("default"),
                        service.metadata.name.as_deref().unwrap_or_default()
                    ),
                };
                let mut body = json!({"loadbalancer": {
                    "name": name,
                    "description": description,
                    key: value,
                }});
                if naming.layout == Layout::External {
                    body["loadbalancer"]["tags"] = json!([name]);
                }
                if let Some(p) = &self.config.load_balancer.lb_provider {
                    body["loadbalancer"]["provider"] = p.clone().into();
                }
                if let Some(az) = &settings.availability_zone {
                    body["loadbalancer"]["availability_zone"] = az.clone().into();
                }
                if let Some(flavor) = &settings.flavor_id {
                    body["loadbalancer"]["flavor_id"] = flavor.clone().into();
                }
                // An internal Service's spec.loadBalancerIP is its VIP (both upstreams).
                if let (true, Some(ip)) = (wish.internal, &wish.address) {
                    body["loadbalancer"]["vip_address"] = ip.clone().into();
                }
                if !serial {
                    body["loadbalancer"]["listeners"] =
                        Self::tree(&naming, &ports, nodes, &settings).into();
                }
                let mut created = self
                    .lb_call(
                        Method::POST,
                        "/loadbalancers",
                        Some(&body),
                        "create load balancer",
                    )
                    .await?;
                tracing::info!(lb = %name, id = ?created["loadbalancer"]["id"].as_str(), whole = !serial, "load balancer created");
                made = Some(port_id.is_none());
                created["loadbalancer"].take()
            }
        };
        let id = lb["id"].as_str().unwrap_or_default().to_owned();
        if id.is_empty() {
            return Err(self.lb_error("ensure load balancer", "the load balancer has no id"));
        }
        // The whole tree came with the create: nothing to converge.
        let whole = made.is_some() && !serial;
        // A load balancer found ACTIVE is not asked for again. One just made whole gets its
        // floating IP while Octavia builds it: its VIP port exists from the create's answer on
        // (Neutron binds a floating IP to a port whatever Octavia's state), so the floating IP
        // costs no round trip after the wait.
        let (mut lb, early_address) = if lb["provisioning_status"] == "ACTIVE" {
            (lb, None)
        } else if whole && lb["vip_port_id"].as_str().is_some_and(|p| !p.is_empty()) {
            let (active, address) = tokio::join!(
                self.wait_active(&id),
                self.ensure_floating_ip(
                    &lb,
                    &wish,
                    &naming,
                    owner,
                    cluster_name,
                    service,
                    made == Some(true),
                )
            );
            let active = active?;
            (active, Some(address?))
        } else {
            (self.wait_active(&id).await?, None)
        };
        let address = match made
            .is_none()
            .then(|| self.reuse_converged(&id, &lb, &wanted))
        {
            Some(Some(address)) => address,
            _ => {
                if !whole
                    && self
                        .converge(&id, &naming, owner, &ports, nodes, &settings, false)
                        .await?
                {
                    // Its last change was waited for: ACTIVE now, read for the stamp.
                    lb = self
                        .lb_call(
                            Method::GET,
                            &format!("/loadbalancers/{id}"),
                            None,
                            "get load balancer",
                        )
                        .await?["loadbalancer"]
                        .take();
                }
                let address = match early_address {
                    Some(address) => address,
                    None => {
                        self.ensure_floating_ip(
                            &lb,
                            &wish,
                            &naming,
                            owner,
                            cluster_name,
                            service,
                            made == Some(true),
                        )
                        .await?
                    }
                };
                if made.is_none() {
                    lb = self.adopt(&naming, &id, lb).await?;
                }
                self.remember_converged(&id, &lb, wanted, &address);
                address
            }
        };
        if self.config.load_balancer.manage_security_groups {
            self.ensure_security_group(cluster_name, service, &lb, &ports, nodes)
                .await?;
        }
        if naming.layout == Layout::External {
            self.patch_service_annotations(service, &id, &address)
                .await?;
        }
        tracing::info!(lb = %name, id, address, elapsed_ms = started.elapsed().as_millis() as u64, "load balancer ensured");
        // OCCM's createLoadBalancerStatus: an explicit hostname replaces the address.
        if let Some(hostname) = annotation(service, ANNOTATION_HOSTNAME).filter(|h| !h.is_empty()) {
            return Ok(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    hostname: Some(hostname.to_owned()),
                    ..Default::default()
                }]),
            });
        }
        Ok(status_of(Some(address), service))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        self.check_service(service)?;
        let naming = self.naming(cluster_name, service);
        let ports = self.wanted_ports(service)?;
        let settings = self.settings(service)?;
        let nodes = &select_nodes(nodes, &settings.node_selector);
        let Some(lb) = self.lookup(&naming, service).await? else {
            return Err(self.lb_error(
                "update load balancer",
                format!("load balancer {} does not exist", naming.lb),
            ));
        };
        let owner = naming.owns(lb["name"].as_str().unwrap_or_default());
        let id = lb["id"].as_str().unwrap_or_default().to_owned();
        // The members change: what the last ensure converged no longer holds.
        self.converged().remove(&id);
        if lb["provisioning_status"] != "ACTIVE" {
            self.wait_active(&id).await?;
        }
        self.converge(&id, &naming, owner, &ports, nodes, &settings, true)
            .await?;
        if self.config.load_balancer.manage_security_groups {
            self.ensure_security_group(cluster_name, service, &lb, &ports, nodes)
                .await?;
        }
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let naming = self.naming(cluster_name, service);
        let looked = self
            .looked()
            .remove(&Looked::key(&naming, service))
            .filter(|l| l.at.elapsed() < LOOKED_TTL);
        let (lb, floating_ip) = match looked {
            Some(l) => (l.lb, Some(l.floating_ip)),
            None => match self.lookup(&naming, service).await? {
                Some(lb) => (lb, None),
                None => return self.ensure_security_group_deleted(service).await,
            },
        };
        let id = lb["id"].as_str().unwrap_or_default().to_owned();
        self.converged().remove(&id);
        let lb_name = lb["name"].as_str().unwrap_or_default().to_owned();
        if naming.layout == Layout::External {
            // OCCM: the load balancer goes only when no other Service shares it and a
            // provider made it (its name, or OCCM's prefix: the last of its sharers deletes
            // another Service's load balancer); otherwise this Service only leaves it.
            let others = lb_tags(&lb)
                .iter()
                .any(|t| t.starts_with(SERVICE_PREFIX) && *t != naming.lb);
            let made_by_a_provider = naming.owns(&lb_name) || lb_name.starts_with(SERVICE_PREFIX);
            if others || !made_by_a_provider {
                self.leave_shared(&lb, &naming).await?;
                return self.ensure_security_group_deleted(service).await;
            }
        }
        if lb["provisioning_status"]
            .as_str()
            .is_some_and(|s| s.starts_with("PENDING_") && s != "PENDING_DELETE")
        {
            self.wait_active(&id).await?;
        }
        if lb["provisioning_status"] != "PENDING_DELETE" {
            let wish = self.floating_ip_wish(service)?;
            let floating_ip = match (floating_ip, lb["vip_port_id"].as_str()) {
                (Some(known), _) => known,
                (None, Some(port)) if !port.is_empty() => self.floating_ip_of_port(port).await?,
                (None, _) => None,
            };
            let release = async {
                match floating_ip {
                    Some(fip)
                        if !wish.keep && self.may_delete_floating_ip(&fip, &lb_name, &naming) =>
                    {
                        self.release_floating_ip(&fip, true).await
                    }
                    _ => Ok(()),
                }
            };
            // The floating IP and the load balancer go at once: neither needs the other gone
            // first (Neutron unbinds a floating IP whose port goes).
            let path = format!("/loadbalancers/{id}?cascade=true");
            let delete = self.lb_call(Method::DELETE, &path, None, "delete load balancer");
            let (released, deleted) = tokio::join!(release, delete);
            released?;
            match deleted {
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(e),
                Ok(_) => {}
            }
        }
        // Whatever manage-security-groups says now (OCCM): a group made while it was on must
        // not outlive the load balancer; it goes while Octavia finishes the deletion.
        let (gone, groups) = tokio::join!(
            self.wait_gone(&id),
            self.ensure_security_group_deleted(service)
        );
        gone?;
        tracing::info!(lb = %lb_name, id, "load balancer deleted");
        groups
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn svc(ns: &str, name: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                uid: Some("1b4e28ba-2fa1-11d2-883f-00163e6fbc11".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn names_follow_each_layouts_upstream() {
        let s = svc("shop", "web");
        let in_tree = Naming::new(Layout::InTree, "kubernetes", &s);
        assert_eq!(in_tree.lb, "a1b4e28ba2fa111d2883f00163e6fbc1");
        assert_eq!(in_tree.legacy, None);
        assert_eq!(
            in_tree.child("listener", 1),
            "listener_a1b4e28ba2fa111d2883f00163e6fbc1_1"
        );
        let external = Naming::new(Layout::External, "kubernetes", &s);
        assert_eq!(external.lb, "kube_service_kubernetes_shop_web");
        assert_eq!(external.legacy.as_deref(), Some(in_tree.lb.as_str()));
        assert_eq!(
            external.child("pool", 0),
            "pool_0_kube_service_kubernetes_shop_web"
        );
        assert!(external.owns(&in_tree.lb) && external.owns("kube_service_kubernetes_shop_web"));
        assert!(!in_tree.owns("kube_service_kubernetes_shop_web"));
        let long = svc(&"n".repeat(200), &"m".repeat(200));
        let n = Naming::new(Layout::External, "kubernetes", &long);
        assert_eq!(n.lb.len(), 255);
        assert_eq!(n.child("listener", 3).len(), 255);
    }

    #[test]
    fn source_ranges_as_upstream() {
        let mut s = svc("shop", "web");
        assert_eq!(source_ranges(&s), Ok(None));
        s.metadata.annotations = Some(
            [(
                ANNOTATION_SOURCE_RANGES.to_owned(),
                " 10.1.2.3/8, 192.168.0.0/16 ".to_owned(),
            )]
            .into(),
        );
        assert_eq!(
            source_ranges(&s),
            Ok(Some(vec!["10.0.0.0/8".into(), "192.168.0.0/16".into()]))
        );
        s.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
            load_balancer_source_ranges: Some(vec!["0.0.0.0/0".into()]),
            ..Default::default()
        });
        assert_eq!(source_ranges(&s), Ok(None), "the spec wins and allows all");
        s.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
            load_balancer_source_ranges: Some(vec!["fd00::1/8".into(), "10.0.0.0/33".into()]),
            ..Default::default()
        });
        let e = source_ranges(&s).unwrap_err();
        assert!(
            e.contains("spec.loadBalancerSourceRanges") && e.contains("10.0.0.0/33"),
            "{e}"
        );
        assert_eq!(canonical_cidr("fd00::1/8").as_deref(), Some("fd00::/8"));
        assert_eq!(canonical_cidr("1.2.3.4/0").as_deref(), Some("0.0.0.0/0"));
        assert_eq!(canonical_cidr("1.2.3.4"), None);
    }

    #[test]
    fn cidr_containment() {
        assert!(cidr_contains("127.1.0.0/16", "127.1.0.3"));
        assert!(!cidr_contains("127.1.0.0/16", "127.2.0.3"));
        assert!(cidr_contains("fd00::/64", "fd00::5"));
        assert!(!cidr_contains("fd00::/64", "127.1.0.3"));
        assert!(!cidr_contains("bogus", "127.1.0.3"));
    }

    /// `[LoadBalancer] member-subnet-id`, `node-selector`, `flavor-id` and `availability-zone`
    /// are what a Service gets when its annotation of the same name does not say.
    #[test]
    fn config_keys_are_the_annotations_defaults() {
        let text = "[LoadBalancer]\nmember-subnet-id = sub-1\nnode-selector = role=edge\nflavor-id = f-1\navailability-zone = az-1\nmax-shared-lb = 5\n";
        let mut config = crate::config::Config::parse(text, "test").unwrap();
        config.global = crate::config::local_defaults().global;
        assert_eq!(config.load_balancer.max_shared_lb(), 5);
        assert_eq!(
            crate::config::Config::default()
                .load_balancer
                .max_shared_lb(),
            2
        );
        let cloud = OpenStack::new("local", config, Layout::External).unwrap();
        let s = cloud.settings(&lb_base()).unwrap();
        assert_eq!(s.member_subnet_id.as_deref(), Some("sub-1"));
        assert_eq!(
            s.node_selector,
            [("role".to_owned(), Some("edge".to_owned()))]
        );
        assert_eq!(s.flavor_id.as_deref(), Some("f-1"));
        assert_eq!(s.availability_zone.as_deref(), Some("az-1"));
        let mut svc = lb_base();
        let a = svc.metadata.annotations.as_mut().unwrap();
        for (k, v) in [
            (ANNOTATION_MEMBER_SUBNET_ID, "sub-2"),
            (ANNOTATION_NODE_SELECTOR, "zone"),
            (ANNOTATION_FLAVOR_ID, "f-2"),
            (ANNOTATION_AVAILABILITY_ZONE, "az-2"),
        ] {
            a.insert(k.into(), v.into());
        }
        let s = cloud.settings(&svc).unwrap();
        assert_eq!(s.member_subnet_id.as_deref(), Some("sub-2"));
        assert_eq!(s.node_selector, [("zone".to_owned(), None)]);
        assert_eq!(s.flavor_id.as_deref(), Some("f-2"));
        assert_eq!(s.availability_zone.as_deref(), Some("az-2"));
    }

    #[test]
    fn go_booleans() {
        for t in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(parse_go_bool(t), Some(true));
        }
        for f in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(parse_go_bool(f), Some(false));
        }
        assert_eq!(parse_go_bool("yes"), None);
    }

    fn lb_base() -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "1b4e28ba-2fa1-11d2-883f-00163e6fbc11",
                "annotations": {"example.com/own": "not ours to judge"}},
            "spec": {"type": "LoadBalancer", "ipFamilies": ["IPv4"],
                "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_settings_table_is_what_the_check_does() {
        let cloud = OpenStack::local(None, Layout::External).unwrap();
        lb_settings::walk(SERVICE_SETTINGS, &lb_base(), |s| cloud.check_service(s)).unwrap();
        let refused = SERVICE_SETTINGS
            .iter()
            .filter(|r| r.support == hypercloud_cloudprovider::Support::Refused)
            .count();
        // OCCM's 31 annotations: 27 implemented, 4 refused; and 2 Service fields refused.
        assert_eq!(refused, 6);
        let mut tls = lb_base();
        tls.metadata.annotations.as_mut().unwrap().insert(
            "loadbalancer.openstack.org/default-tls-container-ref".into(),
            "https://barbican/v1/containers/1".into(),
        );
        assert_eq!(
            hypercloud_cloudprovider::Chain(&cloud.check_service(&tls).unwrap_err()).to_string(),
            "annotation loadbalancer.openstack.org/default-tls-container-ref is not supported by hypercloud's local provider: TERMINATED_HTTPS listeners (Barbican certificates) are not implemented"
        );
    }

    #[test]
    fn proxy_protocol_and_x_forwarded_for_choose_protocols_as_occm() {
        let cloud = OpenStack::local(None, Layout::External).unwrap();
        let with = |pairs: &[(&str, &str)]| {
            let mut s = lb_base();
            for (k, v) in pairs {
                s.metadata
                    .annotations
                    .as_mut()
                    .unwrap()
                    .insert((*k).into(), (*v).into());
            }
            s
        };
        let protocols = |svc: &Service| {
            let s = cloud.settings(svc).unwrap();
            (s.listener_protocol("TCP"), s.pool_protocol("TCP"))
        };
        assert_eq!(protocols(&lb_base()), ("TCP", "TCP"));
        for (v, pool) in [("true", "PROXY"), ("v1", "PROXY"), ("v2", "PROXYV2")] {
            assert_eq!(
                protocols(&with(&[(ANNOTATION_PROXY_PROTOCOL, v)])),
                ("TCP", pool)
            );
        }
        assert_eq!(
            protocols(&with(&[(ANNOTATION_PROXY_PROTOCOL, "false")])),
            ("TCP", "TCP")
        );
        assert_eq!(
            protocols(&with(&[(ANNOTATION_X_FORWARDED_FOR, "true")])),
            ("HTTP", "HTTP")
        );
        let refused = |svc: Service| {
            hypercloud_cloudprovider::Chain(&cloud.check_service(&svc).unwrap_err()).to_string()
        };
        assert!(refused(with(&[(ANNOTATION_PROXY_PROTOCOL, "v3")]))
            .contains("annotation loadbalancer.openstack.org/proxy-protocol: \"v3\" is not true, v1, v2 or false"));
        assert!(refused(with(&[(ANNOTATION_X_FORWARDED_FOR, "yes")]))
            .contains("annotation loadbalancer.openstack.org/x-forwarded-for: \"yes\" is not true or false"));
        assert!(refused(with(&[
            (ANNOTATION_PROXY_PROTOCOL, "v2"),
            (ANNOTATION_X_FORWARDED_FOR, "true")
        ]))
        .contains("cannot be used together"));
        let mut udp = with(&[(ANNOTATION_PROXY_PROTOCOL, "v1")]);
        udp.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].protocol = Some("UDP".into());
        assert!(refused(udp).contains("proxy-protocol needs TCP ports"));
    }

    #[test]
    fn node_selectors_parse_and_select_as_occm() {
        assert_eq!(
            node_selector(" role=lb, zone= ,gpu,=x,,"),
            vec![
                ("role".to_owned(), Some("lb".to_owned())),
                ("zone".to_owned(), None),
                ("gpu".to_owned(), None),
            ]
        );
        let labelled = |name: &str, labels: &[(&str, &str)]| {
            let mut n = Node::default();
            n.metadata.name = Some(name.into());
            n.metadata.labels = Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
            n
        };
        let nodes = [
            labelled("a", &[("role", "lb"), ("zone", "1")]),
            labelled("b", &[("role", "web"), ("zone", "2")]),
            labelled("c", &[]),
        ];
        let names = |sel: &str| {
            select_nodes(&nodes, &node_selector(sel))
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(""), ["a", "b", "c"]);
        assert_eq!(names("role=lb"), ["a"]);
        assert_eq!(names("zone"), ["a", "b"]);
        assert_eq!(names("zone=,role=web"), ["b"]);
        assert!(names("role=db").is_empty());
    }

    #[test]
    fn lb_settings_doc() {
        let doc = hypercloud_testenv::repo_root().join("docs/openstack-provider.md");
        lb_settings::verify_doc(&doc, SERVICE_SETTINGS).unwrap();
    }
}
