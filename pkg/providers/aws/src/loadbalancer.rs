//! Load balancers for `type: LoadBalancer` Services: a classic ELB by default, an NLB (ELBv2,
//! type network) with `service.beta.kubernetes.io/aws-load-balancer-type: nlb`. Both are named
//! `a` + the Service UID without dashes (32 characters), tagged with the cluster tag and
//! `kubernetes.io/service-name`, placed in the subnets `aws-load-balancer-subnets` names, else
//! the cluster's subnets (tagged `kubernetes.io/cluster/<ID>`, one per zone; else the nodes'
//! subnets), an NLB's addresses from `eip-allocations`/`private-ipv4-addresses`, internal with
//! `service.beta.kubernetes.io/aws-load-balancer-internal`, and report their DNS name as the
//! ingress hostname.
//!
//! Classic ELB: one TCP listener per port (port → NodePort), a TCP health check on the first
//! NodePort (HTTP `/healthz` on the health-check NodePort with `externalTrafficPolicy: Local`),
//! the node instances registered, a security group `k8s-elb-<name>` admitting each port (and
//! ICMP fragmentation-needed) from `loadBalancerSourceRanges` (default `0.0.0.0/0`), unless
//! `[Global] ElbSecurityGroup` names a shared one or `security-groups` the Service's own (plus
//! `extra-security-groups`), and the nodes' security groups admitting
//! the ELB's group unless `DisableSecurityGroupIngress`; the annotations for extra tags, idle
//! timeout, connection draining, cross-zone balancing, health-check tuning, the PROXY
//! protocol and SSL/HTTPS/HTTP listeners read as upstream ([`classic_options`]; refused on an
//! NLB). NLB: one listener and target group
//! (`k8s-<hash>`, instance targets on the NodePort) per port, and node security group rules for
//! the source ranges (`kubernetes.io/rule/nlb/client=<name>`) and for health checks from the
//! VPC (`kubernetes.io/rule/nlb/health=<name>`). Every ensure converges what exists to what
//! the Service asks; delete removes every resource it made, security groups and rules
//! included. Upstream equivalent: legacy `aws.go` `EnsureLoadBalancer` and
//! `aws_loadbalancer.go`; cloud-provider-aws keeps the same names and tags.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, IpPermission, IpRange, UserIdGroupPair};
use aws_sdk_elasticloadbalancing::types as elb;
use aws_sdk_elasticloadbalancingv2::types as elbv2;
use hypercloud_cloudprovider::lb_webhook::{admit_service_lb, SERVICE_LB_ANNOTATIONS};
use hypercloud_cloudprovider::wait::{poll_until, Backoff, Poll, WaitError};
use hypercloud_cloudprovider::{
    default_load_balancer_name, lb_settings, Error, LbSetting, LoadBalancer, Result, Setting,
    WebhookSpec, Webhooks,
};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;

use crate::error::{absent, cloud, code, sdk};
use crate::instances::{parse_provider_id, InstanceInfo};
use crate::{Aws, CLUSTER_TAG_PREFIX};

/// `nlb` for an NLB; `external`/`nlb-ip` belong to the AWS Load Balancer Controller.
pub const ANNOTATION_TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-type";
/// Any value but `false`: an internal load balancer.
pub const ANNOTATION_INTERNAL: &str = "service.beta.kubernetes.io/aws-load-balancer-internal";
/// Comma-separated CIDRs, used when `spec.loadBalancerSourceRanges` is empty.
pub const ANNOTATION_SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
/// `k=v,k2=v2`: extra tags on the ELB.
pub const ANNOTATION_TAGS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags";
/// `true`: connection draining on the ELB.
pub const ANNOTATION_DRAINING: &str =
    "service.beta.kubernetes.io/aws-load-balancer-connection-draining-enabled";
/// Seconds of connection draining.
pub const ANNOTATION_DRAINING_TIMEOUT: &str =
    "service.beta.kubernetes.io/aws-load-balancer-connection-draining-timeout";
/// Seconds an idle connection stays open.
pub const ANNOTATION_IDLE_TIMEOUT: &str =
    "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout";
/// `true`: cross-zone load balancing.
pub const ANNOTATION_CROSS_ZONE: &str =
    "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled";
/// Successful checks before an instance is healthy.
pub const ANNOTATION_HC_HEALTHY: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold";
/// Failed checks before an instance is unhealthy.
pub const ANNOTATION_HC_UNHEALTHY: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold";
/// Seconds a check may take.
pub const ANNOTATION_HC_TIMEOUT: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-timeout";
/// Seconds between checks.
pub const ANNOTATION_HC_INTERVAL: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval";
/// `TCP`, `SSL`, `HTTP` or `HTTPS`: the health check's protocol.
pub const ANNOTATION_HC_PROTOCOL: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol";
/// `traffic-port` or a port number: the health check's port.
pub const ANNOTATION_HC_PORT: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-port";
/// The path of an HTTP or HTTPS health check.
pub const ANNOTATION_HC_PATH: &str =
    "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path";
/// `k=v,k2=v2,k3` (a bare key or `k=`: the label present with any value): only Nodes with
/// every one of these labels are backends.
pub const ANNOTATION_TARGET_NODE_LABELS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-target-node-labels";
/// `instance` or `ip` (the AWS Load Balancer Controller's; upstream's in-tree provider reads
/// none and registers instances): the kind of NLB targets.
pub const ANNOTATION_NLB_TARGET_TYPE: &str =
    "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type";
/// A certificate ARN: TLS listeners.
pub const ANNOTATION_SSL_CERT: &str = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert";
/// `*` or port numbers and names: the listeners that use the certificate.
pub const ANNOTATION_SSL_PORTS: &str = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports";
/// `http`, `https`, `ssl` or `tcp`: the protocol towards the backends.
pub const ANNOTATION_BACKEND_PROTOCOL: &str =
    "service.beta.kubernetes.io/aws-load-balancer-backend-protocol";
/// `*`: the PROXY protocol towards every backend.
pub const ANNOTATION_PROXY_PROTOCOL: &str =
    "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol";
/// Subnet IDs (`subnet-…`) or `Name` tags, comma-separated: the load balancer's subnets.
pub const ANNOTATION_SUBNETS: &str = "service.beta.kubernetes.io/aws-load-balancer-subnets";
/// Security group IDs that replace the provider's own group on a classic ELB.
pub const ANNOTATION_SECURITY_GROUPS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-security-groups";
/// Security group IDs added beside the classic ELB's own (or replaced) groups.
pub const ANNOTATION_EXTRA_SECURITY_GROUPS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups";
/// Elastic IP allocation IDs, one per subnet: an internet-facing NLB's addresses.
pub const ANNOTATION_EIP_ALLOCATIONS: &str =
    "service.beta.kubernetes.io/aws-load-balancer-eip-allocations";
/// IPv4 addresses, one per subnet and inside it: an internal NLB's addresses.
pub const ANNOTATION_PRIVATE_IPV4: &str =
    "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses";
/// The ELB policy enabling the PROXY protocol (upstream's name).
const PROXY_PROTOCOL_POLICY: &str = "k8s-proxyprotocol-enabled";
/// The tag naming the Service a load balancer (or target group, security group) belongs to.
pub const TAG_SERVICE_NAME: &str = "kubernetes.io/service-name";

/// Every `service.beta.kubernetes.io/aws-load-balancer-*` annotation of upstream
/// (cloud-provider-aws `pkg/providers/v1/aws.go`, a superset of the legacy v1.20 provider's),
/// the source-range annotation, and the Service fields a load balancer may be asked for: what
/// this provider does with each ([`hypercloud_cloudprovider::lb_settings`]; the check, the
/// guide's table in docs/guide/aws.md and the tests read it).
pub const SERVICE_SETTINGS: &[LbSetting] = &[
    LbSetting::implemented(Setting::Annotation(ANNOTATION_TYPE), "`nlb`: an NLB; `external` and `nlb-ip` are left to the AWS Load Balancer Controller (no check, no load balancer); anything else: a classic ELB"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_INTERNAL), "any value but `false`: an internal load balancer in the internal-elb subnets"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SOURCE_RANGES), "the CIDRs admitted when `spec.loadBalancerSourceRanges` is empty"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/aws-load-balancer-access-log-emit-interval"), "access logs are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/aws-load-balancer-access-log-enabled"), "access logs are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-name"), "access logs are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/aws-load-balancer-access-log-s3-bucket-prefix"), "access logs are not implemented"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_TAGS), "`k=v,k2=v2` (a bare `k` is an empty value): tags added to the ELB on create and update (AddTags); keys removed from the annotation stay on the ELB, as upstream; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_BACKEND_PROTOCOL), "`http`, `https`, `ssl` or `tcp` as upstream: with `ssl-cert`, HTTPS listeners for `http`/`https` and SSL for `ssl`/`tcp` with that instance protocol; without, `http` makes HTTP listeners, `tcp` is the default, and `https`/`ssl` are refused (they need a certificate); classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_DRAINING), "`true`/`false` (Go's ParseBool), default off: ModifyLoadBalancerAttributes when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_DRAINING_TIMEOUT), "seconds 1–3600, default 300: ModifyLoadBalancerAttributes when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_IDLE_TIMEOUT), "seconds 1–4000, default 60: ModifyLoadBalancerAttributes when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_CROSS_ZONE), "`true`/`false`, default off: ModifyLoadBalancerAttributes when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_EIP_ALLOCATIONS), "`eipalloc-…` IDs, one per subnet in order (upstream's createSubnetMappings: SubnetMappings AllocationId on CreateLoadBalancer; other addresses on an NLB that reports them make a new NLB); internet-facing NLB only, a count other than the subnets' is refused"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_EXTRA_SECURITY_GROUPS), "`sg-…` IDs added after the ELB's own group (or the `security-groups` ones), as upstream's buildELBSecurityGroupList; given no rules; classic ELB only (on an NLB upstream reads security groups only in its opt-in NLB security-group mode, not implemented here)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HC_HEALTHY), "2–10, default 2: ConfigureHealthCheck when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HC_INTERVAL), "seconds 5–300, default 10, above the timeout (checked here when both are given, else by ELB): ConfigureHealthCheck when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HC_PATH), "the path of an `HTTP`/`HTTPS` check (default `/`, `/healthz` with `externalTrafficPolicy: Local`); with a `TCP`/`SSL` check it is refused (upstream drops it): ConfigureHealthCheck when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HC_PORT), "`traffic-port` (the first node port, also with `externalTrafficPolicy: Local`, as upstream) or 1–65535: the port of the check target; ConfigureHealthCheck when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HC_PROTOCOL), "`TCP`, `SSL`, `HTTP` or `HTTPS` (any case): the protocol of the check target (default TCP, HTTP with `externalTrafficPolicy: Local`); ConfigureHealthCheck when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HC_TIMEOUT), "seconds 2–60, default 5, below the interval (checked here when both are given, else by ELB): ConfigureHealthCheck when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_HC_UNHEALTHY), "2–10, default 6: ConfigureHealthCheck when the ELB differs; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_PRIVATE_IPV4), "IPv4 addresses, one per subnet in order and inside its CIDR: SubnetMappings PrivateIPv4Address on CreateLoadBalancer (other addresses on an NLB that reports them make a new NLB); internal NLB only, a count other than the subnets' is refused"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_NLB_TARGET_TYPE), "`instance`: the nodes' instances at the node ports, what this provider registers on an NLB and a classic ELB alike; `ip` (pod IPs as targets) is refused by name: IP targets are not implemented"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_PROXY_PROTOCOL), "`*` (the only value upstream takes): the policy `k8s-proxyprotocol-enabled` (CreateLoadBalancerPolicy) on every node port (SetLoadBalancerPoliciesForBackendServer), taken off again without the annotation; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SECURITY_GROUPS), "`sg-…` IDs that replace the ELB's own group (none is made; a former one is deleted); the nodes admit the first; given no rules, as upstream's bring-your-own groups; classic ELB only (on an NLB upstream reads them only in its opt-in NLB security-group mode, not implemented here)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SSL_CERT), "a certificate ARN (ELB checks it): SSL listeners to TCP backends (HTTPS with `backend-protocol`) with that certificate on the `ssl-ports` (default all); a changed certificate or protocol replaces the listener; classic ELB only"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"), "TLS listeners use ELB's default negotiation policy; choosing one is not implemented"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SSL_PORTS), "`*` or a comma-separated list of the Service's port numbers and names: which listeners use `ssl-cert`; a list entry naming no port of the Service, or the annotation without `ssl-cert`, is refused; classic ELB only"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SUBNETS), "subnet IDs or `Name` tags (in the VPC), as upstream's resolveSubnetNameOrIDs: the ELB's or NLB's subnets instead of the discovered ones; an entry that finds no subnet, or several, is an error naming the annotation"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"), "NLB target groups keep AWS's default attributes"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_TARGET_NODE_LABELS), "`k=v,k2=v2,k3` (a bare key or `k=` matches any value): only Nodes with all of these labels are registered, as upstream's filterTargetNodes; an entry with an empty key is refused; classic ELB and NLB"),
    LbSetting::implemented(Setting::LoadBalancerClass, "the service controller leaves the Service to the class's controller (upstream)"),
    LbSetting::implemented(Setting::ExternalTrafficPolicyLocal, "the health check is HTTP `/healthz` on the health-check node port (the `healthcheck-*` annotations may change its protocol, port and path)"),
    LbSetting::refused(Setting::SessionAffinityClientIp, "classic ELB stickiness needs HTTP listeners and NLB stickiness is not implemented"),
    LbSetting::refused(Setting::IpFamilyIpv6, "load balancers are IPv4 (dual-stack ELBs are not implemented)"),
    LbSetting::refused(Setting::NoNodePorts, "backends are the node instances at the Service's node ports"),
    LbSetting::refused(Setting::LoadBalancerIp, "ELB and NLB addresses are AWS-assigned (upstream ignored the field)"),
];

// Classic ELB health check, as upstream's defaults.
/// Deleting a load balancer's security group is retried while EC2 says the balancer's network
/// interfaces still use it (they go within a minute or two of the balancer).
const GROUP_RELEASE: Backoff = Backoff::new(
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(15),
    std::time::Duration::from_secs(180),
);
const HC_HEALTHY: i32 = 2;
const HC_UNHEALTHY: i32 = 6;
const HC_TIMEOUT: i32 = 5;
const HC_INTERVAL: i32 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Classic,
    Nlb,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Port {
    port: i32,
    node_port: i32,
    protocol: String,
    /// Lower case, as upstream matches `ssl-ports` names.
    name: String,
}

/// What a Service asks for.
#[derive(Clone, Debug)]
struct Spec {
    kind: Kind,
    name: String,
    service: String,
    internal: bool,
    ports: Vec<Port>,
    source_ranges: Vec<String>,
    health_check_node_port: Option<i32>,
    placement: Placement,
    classic: ClassicOptions,
}

/// Where a load balancer sits and which addresses an NLB takes (upstream's
/// `getLoadBalancerSubnets` and `createSubnetMappings`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Placement {
    /// `subnets`, in the annotation's order; `None`: the discovered subnets.
    subnets: Option<Vec<String>>,
    /// `eip-allocations`, paired in order with the subnets.
    eip_allocations: Vec<String>,
    /// `private-ipv4-addresses`, paired in order with the subnets.
    private_ips: Vec<std::net::Ipv4Addr>,
}

/// What a Service's annotations ask of a classic ELB beyond its listeners: upstream's
/// defaults when an annotation is absent (legacy `aws.go` `EnsureLoadBalancer`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ClassicOptions {
    /// Extra tags (the cluster and service-name tags win over them).
    tags: BTreeMap<String, String>,
    attributes: Attributes,
    health: HealthTuning,
    check: CheckTarget,
    proxy_protocol: bool,
    tls: Tls,
    /// `security-groups`: replace the provider's own group (upstream's BYO groups).
    security_groups: Vec<String>,
    /// `extra-security-groups`: added after the own (or replacing) groups.
    extra_security_groups: Vec<String>,
}

impl ClassicOptions {
    /// The ELB's groups: `own` (the provider's group) unless `security-groups` replaces it,
    /// then the extra groups; no group twice. The first is the one the nodes admit
    /// (upstream's `buildELBSecurityGroupList` and `sortELBSecurityGroupList`).
    fn groups(&self, own: Option<&str>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let first: Vec<&str> = if self.security_groups.is_empty() {
            own.into_iter().collect()
        } else {
            self.security_groups.iter().map(String::as_str).collect()
        };
        for g in first
            .into_iter()
            .chain(self.extra_security_groups.iter().map(String::as_str))
        {
            if !out.iter().any(|o| o == g) {
                out.push(g.to_owned());
            }
        }
        out
    }
}

/// Listener protocols (upstream's `buildListener`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tls {
    cert: Option<String>,
    /// `None`: every port (`*` or no annotation).
    ssl_ports: Option<(BTreeSet<i32>, BTreeSet<String>)>,
    /// `backend-protocol`, as given.
    backend: Option<String>,
}

impl Tls {
    /// (protocol, instance protocol, certificate) of the listener for `p`.
    fn listener(&self, p: &Port) -> (&'static str, &'static str, Option<&str>) {
        let tls_port = self.ssl_ports.as_ref().is_none_or(|(numbers, names)| {
            numbers.contains(&p.port) || (!p.name.is_empty() && names.contains(&p.name))
        });
        match (&self.cert, self.backend.as_deref()) {
            (Some(cert), backend) if tls_port => match backend {
                Some("http") => ("HTTPS", "HTTP", Some(cert)),
                Some("https") => ("HTTPS", "HTTPS", Some(cert)),
                Some("ssl") => ("SSL", "SSL", Some(cert)),
                _ => ("SSL", "TCP", Some(cert)),
            },
            (_, Some("http")) => ("HTTP", "HTTP", None),
            _ => ("TCP", "TCP", None),
        }
    }
}

/// The TLS annotations, checked against the Service's ports.
fn tls_of(svc: &Service) -> Result<Tls> {
    let mut tls = Tls::default();
    if let Some(v) = annotation(svc, ANNOTATION_BACKEND_PROTOCOL) {
        if !matches!(v, "http" | "https" | "ssl" | "tcp") {
            return Err(bad_value(
                ANNOTATION_BACKEND_PROTOCOL,
                v,
                "is not one of http, https, ssl, tcp",
            ));
        }
        tls.backend = Some(v.to_owned());
    }
    if let Some(v) = annotation(svc, ANNOTATION_SSL_CERT).filter(|v| !v.is_empty()) {
        tls.cert = Some(v.to_owned());
    }
    if tls.cert.is_none() {
        if let Some(b @ ("https" | "ssl")) = tls.backend.as_deref() {
            return Err(bad_value(
                ANNOTATION_BACKEND_PROTOCOL,
                b,
                &format!("needs {ANNOTATION_SSL_CERT}"),
            ));
        }
    }
    if let Some(v) = annotation(svc, ANNOTATION_SSL_PORTS) {
        if tls.cert.is_none() {
            return Err(bad_value(
                ANNOTATION_SSL_PORTS,
                v,
                &format!("needs {ANNOTATION_SSL_CERT}"),
            ));
        }
        if !v.is_empty() && v != "*" {
            let ports = svc
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_ref())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let mut numbers = BTreeSet::new();
            let mut names = BTreeSet::new();
            for item in v.split(',') {
                let item = item.trim();
                match item.parse::<i32>() {
                    Ok(n) if ports.iter().any(|p| p.port == n) => {
                        numbers.insert(n);
                    }
                    Err(_)
                        if ports.iter().any(|p| {
                            p.name
                                .as_deref()
                                .is_some_and(|n| n.eq_ignore_ascii_case(item))
                        }) =>
                    {
                        names.insert(item.to_ascii_lowercase());
                    }
                    _ => {
                        return Err(bad_value(
                            ANNOTATION_SSL_PORTS,
                            v,
                            &format!("names {item:?}, no port of the Service"),
                        ))
                    }
                }
            }
            tls.ssl_ports = Some((numbers, names));
        }
    }
    Ok(tls)
}

/// The ELB attributes this provider owns (access logs stay as they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Attributes {
    idle_timeout: i32,
    draining: bool,
    draining_timeout: i32,
    cross_zone: bool,
}

impl Default for Attributes {
    fn default() -> Self {
        Attributes {
            idle_timeout: 60,
            draining: false,
            draining_timeout: 300,
            cross_zone: false,
        }
    }
}

/// What the `healthcheck-protocol`/`-port`/`-path` annotations ask for (upstream's
/// `ensureLoadBalancerHealthCheck` overrides).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct CheckTarget {
    /// Upper case.
    protocol: Option<String>,
    /// `Some(None)`: `traffic-port`.
    port: Option<Option<i32>>,
    path: Option<String>,
}

/// The classic ELB's `HealthCheck.Target`: upstream's base (TCP on the first node port, or
/// HTTP `/healthz` on the health-check node port with `externalTrafficPolicy: Local`), then
/// the annotations' protocol, port (`traffic-port`: the first node port) and path (HTTP and
/// HTTPS only, default `/`).
fn check_target(
    first_node_port: i32,
    health_check_node_port: Option<i32>,
    c: &CheckTarget,
) -> String {
    let (base_protocol, mut port, base_path) = match health_check_node_port {
        Some(p) => ("HTTP", p, "/healthz"),
        None => ("TCP", first_node_port, ""),
    };
    let protocol = c.protocol.as_deref().unwrap_or(base_protocol);
    match c.port {
        Some(Some(p)) => port = p,
        Some(None) => port = first_node_port,
        None => {}
    }
    let path = match protocol {
        "HTTP" | "HTTPS" => {
            c.path
                .as_deref()
                .unwrap_or(if base_path.is_empty() { "/" } else { base_path })
        }
        _ => "",
    };
    format!("{protocol}:{port}{path}")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HealthTuning {
    healthy: i32,
    unhealthy: i32,
    timeout: i32,
    interval: i32,
}

impl Default for HealthTuning {
    fn default() -> Self {
        HealthTuning {
            healthy: HC_HEALTHY,
            unhealthy: HC_UNHEALTHY,
            timeout: HC_TIMEOUT,
            interval: HC_INTERVAL,
        }
    }
}

/// An annotation whose value this provider cannot use, named with the value.
fn bad_value(key: &str, value: &str, what: &str) -> Error {
    let mut shown: String = value.chars().take(64).collect();
    if shown.len() < value.len() {
        shown.push('…');
    }
    cloud(
        "read Service annotations",
        format!("annotation {key}: {shown:?} {what}"),
    )
}

/// Upstream's `splitCommaSeparatedString`: items trimmed, empty ones skipped.
fn comma_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect()
}

/// `prefix` followed by 1–64 ASCII letters and digits (an EC2 resource ID).
fn resource_id(value: &str, prefix: &str) -> bool {
    value.strip_prefix(prefix).is_some_and(|rest| {
        (1..=64).contains(&rest.len()) && rest.chars().all(|c| c.is_ascii_alphanumeric())
    })
}

/// A comma-separated annotation ([`comma_list`]): at least one entry (`none` says of what),
/// each read by `parse` (its `Err` says what is wrong with the entry), none twice.
fn annotation_list<T>(
    key: &str,
    value: &str,
    none: &str,
    parse: impl Fn(&str) -> std::result::Result<T, String>,
) -> Result<Vec<T>> {
    let items = comma_list(value);
    if items.is_empty() {
        return Err(bad_value(key, value, &format!("names no {none}")));
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for item in items {
        let v =
            parse(item).map_err(|why| bad_value(key, value, &format!("has {item:?}, {why}")))?;
        if seen.contains(&item) {
            return Err(bad_value(key, value, &format!("names {item} twice")));
        }
        seen.push(item);
        out.push(v);
    }
    Ok(out)
}

/// A list of EC2 IDs with `prefix`: none twice, at least one.
fn id_list(key: &str, value: &str, prefix: &str, what: &str) -> Result<Vec<String>> {
    annotation_list(key, value, what, |item| {
        if resource_id(item, prefix) {
            Ok(item.to_owned())
        } else {
            Err(format!("which is not a {what} ID ({prefix}…)"))
        }
    })
}

/// The `subnets`, `eip-allocations` and `private-ipv4-addresses` annotations, checked as far
/// as the Service alone tells (the webhook reads this too): the addresses only on an NLB of
/// the right scheme, one per subnet when the subnets are named.
fn placement_of(svc: &Service) -> Result<Placement> {
    let nlb = annotation(svc, ANNOTATION_TYPE) == Some("nlb");
    let internal = annotation(svc, ANNOTATION_INTERNAL).is_some_and(|v| v != "false");
    let mut p = Placement::default();
    if let Some(v) = annotation(svc, ANNOTATION_SUBNETS) {
        p.subnets = Some(annotation_list(ANNOTATION_SUBNETS, v, "subnet", |item| {
            // A subnet ID, else the value of a `Name` tag (at most 256 characters).
            let ok = if item.starts_with("subnet-") {
                resource_id(item, "subnet-")
            } else {
                item.chars().count() <= 256 && !item.chars().any(char::is_control)
            };
            ok.then(|| item.to_owned())
                .ok_or_else(|| "neither a subnet ID nor a Name tag".to_owned())
        })?);
    }
    let nlb_only = |key: &str, why: &'static str| Error::UnsupportedServiceSetting {
        provider: "aws".into(),
        setting: format!("annotation {key} without aws-load-balancer-type: nlb"),
        why,
    };
    if let Some(v) = annotation(svc, ANNOTATION_EIP_ALLOCATIONS) {
        if !nlb {
            return Err(nlb_only(
                ANNOTATION_EIP_ALLOCATIONS,
                "Elastic IP allocations are for NLBs (upstream reads them on NLBs only)",
            ));
        }
        if internal {
            return Err(Error::UnsupportedServiceSetting {
                provider: "aws".into(),
                setting: format!("annotation {ANNOTATION_EIP_ALLOCATIONS} with {ANNOTATION_INTERNAL}"),
                why: "Elastic IPs are for internet-facing NLBs; an internal NLB takes private-ipv4-addresses",
            });
        }
        p.eip_allocations = id_list(
            ANNOTATION_EIP_ALLOCATIONS,
            v,
            "eipalloc-",
            "Elastic IP allocation",
        )?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_PRIVATE_IPV4) {
        if !nlb {
            return Err(nlb_only(
                ANNOTATION_PRIVATE_IPV4,
                "private IPv4 addresses are for NLBs (upstream reads them on NLBs only)",
            ));
        }
        if !internal {
            return Err(Error::UnsupportedServiceSetting {
                provider: "aws".into(),
                setting: format!(
                    "annotation {ANNOTATION_PRIVATE_IPV4} without {ANNOTATION_INTERNAL}"
                ),
                why: "private addresses are for internal NLBs; an internet-facing NLB takes eip-allocations",
            });
        }
        p.private_ips = annotation_list(ANNOTATION_PRIVATE_IPV4, v, "address", |item| {
            item.parse::<std::net::Ipv4Addr>()
                .map_err(|_| "which is not an IPv4 address".to_owned())
        })?;
    }
    if let Some(subnets) = &p.subnets {
        p.check_counts(subnets.len())?;
    }
    Ok(p)
}

impl Placement {
    /// One address per subnet, as upstream demands (`Must have same number of ...`).
    fn check_counts(&self, subnets: usize) -> Result<()> {
        for (key, n) in [
            (ANNOTATION_EIP_ALLOCATIONS, self.eip_allocations.len()),
            (ANNOTATION_PRIVATE_IPV4, self.private_ips.len()),
        ] {
            if n != 0 && n != subnets {
                return Err(cloud(
                    "read Service annotations",
                    format!("annotation {key} has {n} entries for {subnets} subnets; give one per subnet"),
                ));
            }
        }
        Ok(())
    }

    /// The NLB's subnet mappings: each subnet with its allocation or address, paired in order
    /// (upstream's `createSubnetMappings`); `cidrs` are the subnets' CIDR blocks (by ID),
    /// which each private address must lie in.
    fn mappings(
        &self,
        subnets: &[String],
        cidrs: &BTreeMap<String, String>,
    ) -> Result<Vec<elbv2::SubnetMapping>> {
        self.check_counts(subnets.len())?;
        let mut out = Vec::new();
        for (i, id) in subnets.iter().enumerate() {
            let ip = self.private_ips.get(i);
            if let Some(ip) = ip {
                let cidr = cidrs.get(id).map(String::as_str).unwrap_or_default();
                if !ipv4_in_cidr(*ip, cidr) {
                    return Err(cloud(
                        "read Service annotations",
                        format!("annotation {ANNOTATION_PRIVATE_IPV4}: {ip} is not inside subnet {id} ({cidr})"),
                    ));
                }
            }
            out.push(
                elbv2::SubnetMapping::builder()
                    .subnet_id(id)
                    .set_allocation_id(self.eip_allocations.get(i).cloned())
                    .set_private_ipv4_address(ip.map(ToString::to_string))
                    .build(),
            );
        }
        Ok(out)
    }

    fn addresses(&self) -> bool {
        !self.eip_allocations.is_empty() || !self.private_ips.is_empty()
    }
}

/// The classic ELB's own security group's name (upstream's `k8s-elb-<name>`).
fn elb_group_name(spec: &Spec) -> String {
    format!("k8s-elb-{}", spec.name)
}

/// Whether `ip` lies in the IPv4 CIDR block `cidr` (false for anything else).
fn ipv4_in_cidr(ip: std::net::Ipv4Addr, cidr: &str) -> bool {
    cidr.parse::<ipnet::Ipv4Net>()
        .is_ok_and(|net| net.contains(&ip))
}

/// Whether the NLB reports addresses other than the mappings ask for (a subnet of both whose
/// reported allocation or private address differs). Addresses the API does not report
/// (moto reports none) cannot be compared and count as the same.
fn addresses_differ(lb: &elbv2::LoadBalancer, want: &[elbv2::SubnetMapping]) -> bool {
    lb.availability_zones().iter().any(|z| {
        let Some(m) = want.iter().find(|m| m.subnet_id() == z.subnet_id()) else {
            return false;
        };
        z.load_balancer_addresses().iter().any(|a| {
            (m.allocation_id().is_some()
                && a.allocation_id().is_some()
                && a.allocation_id() != m.allocation_id())
                || (m.private_ipv4_address().is_some()
                    && a.private_ipv4_address().is_some()
                    && a.private_ipv4_address() != m.private_ipv4_address())
        })
    })
}

/// Go's `strconv.ParseBool`, which upstream reads these flags with.
fn go_bool(key: &str, value: &str) -> Result<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(bad_value(key, value, "is not a boolean")),
    }
}

fn ranged(key: &str, value: &str, range: std::ops::RangeInclusive<i32>) -> Result<i32> {
    match value.parse::<i32>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(bad_value(
            key,
            value,
            &format!(
                "is not a whole number from {} to {}",
                range.start(),
                range.end()
            ),
        )),
    }
}

/// Upstream's `getKeyValuePropertiesFromAnnotation`: `k=v,k2=v2`, a bare `k` an empty
/// value, empty items skipped; ELB's limits on keys (1–128 characters, no `aws:`) and values
/// (256).
fn parse_tags(value: &str) -> Result<BTreeMap<String, String>> {
    let mut tags = BTreeMap::new();
    for item in value.trim().split(',') {
        let mut kv = item.trim().split('=');
        let key = kv.next().unwrap_or_default();
        let val = kv.next().unwrap_or_default();
        if key.is_empty() {
            continue;
        }
        if key.chars().count() > 128 || key.starts_with("aws:") {
            return Err(bad_value(
                ANNOTATION_TAGS,
                value,
                &format!("has tag key {key:?}: keys are at most 128 characters and do not start with aws:"),
            ));
        }
        if val.chars().count() > 256 {
            return Err(bad_value(
                ANNOTATION_TAGS,
                value,
                &format!("has a value longer than 256 characters for tag {key:?}"),
            ));
        }
        tags.insert(key.to_owned(), val.to_owned());
    }
    Ok(tags)
}

/// The classic ELB options a Service asks for; a bad value is an error naming the
/// annotation (the webhook and `ensure` both read it through `check_settings`).
fn classic_options(svc: &Service) -> Result<ClassicOptions> {
    let mut o = ClassicOptions {
        tls: tls_of(svc)?,
        ..ClassicOptions::default()
    };
    if let Some(v) = annotation(svc, ANNOTATION_TAGS) {
        o.tags = parse_tags(v)?;
    }
    // Empty lists are no groups, as upstream's getSGListFromAnnotation reads them.
    if let Some(v) =
        annotation(svc, ANNOTATION_SECURITY_GROUPS).filter(|v| !comma_list(v).is_empty())
    {
        o.security_groups = id_list(ANNOTATION_SECURITY_GROUPS, v, "sg-", "security group")?;
    }
    if let Some(v) =
        annotation(svc, ANNOTATION_EXTRA_SECURITY_GROUPS).filter(|v| !comma_list(v).is_empty())
    {
        o.extra_security_groups =
            id_list(ANNOTATION_EXTRA_SECURITY_GROUPS, v, "sg-", "security group")?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_PROXY_PROTOCOL) {
        if v != "*" {
            return Err(bad_value(
                ANNOTATION_PROXY_PROTOCOL,
                v,
                "is not `*`, the only value supported",
            ));
        }
        o.proxy_protocol = true;
    }
    let a = &mut o.attributes;
    if let Some(v) = annotation(svc, ANNOTATION_DRAINING) {
        a.draining = go_bool(ANNOTATION_DRAINING, v)?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_DRAINING_TIMEOUT) {
        a.draining_timeout = ranged(ANNOTATION_DRAINING_TIMEOUT, v, 1..=3600)?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_IDLE_TIMEOUT) {
        a.idle_timeout = ranged(ANNOTATION_IDLE_TIMEOUT, v, 1..=4000)?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_CROSS_ZONE) {
        a.cross_zone = go_bool(ANNOTATION_CROSS_ZONE, v)?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_HC_PROTOCOL) {
        let p = v.to_ascii_uppercase();
        if !matches!(p.as_str(), "TCP" | "SSL" | "HTTP" | "HTTPS") {
            return Err(bad_value(
                ANNOTATION_HC_PROTOCOL,
                v,
                "is not TCP, SSL, HTTP or HTTPS",
            ));
        }
        o.check.protocol = Some(p);
    }
    if let Some(v) = annotation(svc, ANNOTATION_HC_PORT) {
        o.check.port = Some(if v == "traffic-port" {
            None
        } else {
            Some(ranged(ANNOTATION_HC_PORT, v, 1..=65535)?)
        });
    }
    if let Some(v) = annotation(svc, ANNOTATION_HC_PATH) {
        let http = match &o.check.protocol {
            Some(p) => p.starts_with("HTTP"),
            None => {
                svc.spec
                    .as_ref()
                    .and_then(|s| s.external_traffic_policy.as_deref())
                    == Some("Local")
            }
        };
        if !http {
            return Err(bad_value(
                ANNOTATION_HC_PATH,
                v,
                "is for HTTP and HTTPS health checks; this Service's is TCP or SSL",
            ));
        }
        if !v.starts_with('/') || v.len() > 1024 || v.chars().any(|c| c.is_control() || c == ' ') {
            return Err(bad_value(
                ANNOTATION_HC_PATH,
                v,
                "is not an absolute URL path (a '/' first, no spaces or control characters, at most 1024 bytes)",
            ));
        }
        o.check.path = Some(v.to_owned());
    }
    let h = &mut o.health;
    if let Some(v) = annotation(svc, ANNOTATION_HC_HEALTHY) {
        h.healthy = ranged(ANNOTATION_HC_HEALTHY, v, 2..=10)?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_HC_UNHEALTHY) {
        h.unhealthy = ranged(ANNOTATION_HC_UNHEALTHY, v, 2..=10)?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_HC_TIMEOUT) {
        h.timeout = ranged(ANNOTATION_HC_TIMEOUT, v, 2..=60)?;
    }
    if let Some(v) = annotation(svc, ANNOTATION_HC_INTERVAL) {
        h.interval = ranged(ANNOTATION_HC_INTERVAL, v, 5..=300)?;
    }
    // Only when both are asked for: with one, the other is the default, and ELB itself
    // answers a timeout not below the interval.
    if annotation(svc, ANNOTATION_HC_TIMEOUT).is_some()
        && annotation(svc, ANNOTATION_HC_INTERVAL).is_some()
        && h.timeout >= h.interval
    {
        return Err(bad_value(
            ANNOTATION_HC_TIMEOUT,
            &h.timeout.to_string(),
            &format!("is not below {ANNOTATION_HC_INTERVAL} ({})", h.interval),
        ));
    }
    Ok(o)
}

fn annotation<'a>(svc: &'a Service, key: &str) -> Option<&'a str> {
    svc.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn spec_of(svc: &Service) -> Result<Spec> {
    let kind = match annotation(svc, ANNOTATION_TYPE).unwrap_or_default() {
        "nlb" => Kind::Nlb,
        "external" | "nlb-ip" => return Err(Error::ImplementedElsewhere),
        _ => Kind::Classic,
    };
    let service = format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or("default"),
        svc.metadata.name.as_deref().unwrap_or_default()
    );
    let s = svc.spec.clone().unwrap_or_default();
    let mut ports = Vec::new();
    for p in s.ports.unwrap_or_default() {
        let protocol = p
            .protocol
            .unwrap_or_else(|| "TCP".into())
            .to_ascii_uppercase();
        if kind == Kind::Classic && protocol != "TCP" {
            return Err(cloud(
                "EnsureLoadBalancer",
                format!("{service}: protocol {protocol} is not supported by classic ELBs (only TCP); use an NLB"),
            ));
        }
        if !matches!(protocol.as_str(), "TCP" | "UDP") {
            return Err(cloud(
                "EnsureLoadBalancer",
                format!("{service}: protocol {protocol} is not supported"),
            ));
        }
        let node_port = p.node_port.filter(|n| *n > 0).ok_or_else(|| {
            cloud(
                "EnsureLoadBalancer",
                format!("{service}: port {} has no nodePort yet", p.port),
            )
        })?;
        ports.push(Port {
            port: p.port,
            node_port,
            protocol,
            name: p.name.unwrap_or_default().to_ascii_lowercase(),
        });
    }
    if ports.is_empty() {
        return Err(cloud("EnsureLoadBalancer", format!("{service}: no ports")));
    }
    ports.sort();
    let mut source_ranges: Vec<String> = s.load_balancer_source_ranges.unwrap_or_default();
    if source_ranges.is_empty() {
        source_ranges = annotation(svc, ANNOTATION_SOURCE_RANGES)
            .unwrap_or_default()
            .split(',')
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty())
            .collect();
    }
    for r in &source_ranges {
        if !valid_cidr(r) {
            return Err(cloud(
                "EnsureLoadBalancer",
                format!("{service}: source range {r:?} is not a CIDR"),
            ));
        }
    }
    if source_ranges.is_empty() {
        source_ranges.push("0.0.0.0/0".into());
    }
    source_ranges.sort();
    source_ranges.dedup();
    let internal = annotation(svc, ANNOTATION_INTERNAL).is_some_and(|v| v != "false");
    let health_check_node_port = (s.external_traffic_policy.as_deref() == Some("Local"))
        .then_some(s.health_check_node_port)
        .flatten()
        .filter(|p| *p > 0);
    Ok(Spec {
        kind,
        name: default_load_balancer_name(svc),
        service,
        internal,
        ports,
        source_ranges,
        health_check_node_port,
        placement: placement_of(svc)?,
        classic: classic_options(svc)?,
    })
}

/// The refused rows of [`SERVICE_SETTINGS`]; a Service of the AWS Load Balancer Controller
/// (`aws-load-balancer-type: external` or `nlb-ip`) is its to judge.
fn check_settings(service: &Service) -> Result<()> {
    if matches!(
        annotation(service, ANNOTATION_TYPE),
        Some("external" | "nlb-ip")
    ) {
        return Ok(());
    }
    lb_settings::check("aws", SERVICE_SETTINGS, service)?;
    if annotation(service, ANNOTATION_TYPE) == Some("nlb") {
        if let Some(key) = CLASSIC_ONLY
            .iter()
            .find(|k| annotation(service, k).is_some())
        {
            return Err(Error::UnsupportedServiceSetting {
                provider: "aws".into(),
                setting: format!("annotation {key} with aws-load-balancer-type: nlb"),
                why: "this annotation is implemented for classic ELBs only",
            });
        }
    }
    target_node_labels(service)?;
    match annotation(service, ANNOTATION_NLB_TARGET_TYPE) {
        None | Some("instance") => {}
        Some("ip") => return Err(Error::UnsupportedServiceSetting {
            provider: "aws".into(),
            setting: format!("annotation {ANNOTATION_NLB_TARGET_TYPE}: ip"),
            why:
                "targets are the nodes' instances at the node ports; IP targets are not implemented",
        }),
        Some(v) => {
            return Err(bad_value(
                ANNOTATION_NLB_TARGET_TYPE,
                v,
                "is not `instance` (or `ip`, which is not implemented)",
            ))
        }
    }
    placement_of(service)?;
    classic_options(service).map(|_| ())
}

/// The labels `target-node-labels` asks for (upstream's `getKeyValuePropertiesFromAnnotation`:
/// `k=v`, `k=` and `k`; `None` as a value: any). Upstream skips an entry with an empty key;
/// here it is refused.
fn target_node_labels(service: &Service) -> Result<BTreeMap<String, Option<String>>> {
    let mut out = BTreeMap::new();
    let Some(v) = annotation(service, ANNOTATION_TARGET_NODE_LABELS) else {
        return Ok(out);
    };
    for entry in v.trim().split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (key, value) = match entry.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim()).filter(|v| !v.is_empty())),
            None => (entry, None),
        };
        if key.is_empty() {
            return Err(bad_value(
                ANNOTATION_TARGET_NODE_LABELS,
                v,
                &format!("has the entry {entry:?} with an empty label key"),
            ));
        }
        out.insert(key.to_owned(), value.map(str::to_owned));
    }
    Ok(out)
}

/// The Nodes that carry every label `target-node-labels` asks for (all without it).
fn target_nodes(service: &Service, nodes: &[Node]) -> Result<Vec<Node>> {
    let wanted = target_node_labels(service)?;
    Ok(nodes
        .iter()
        .filter(|n| {
            let labels = n.metadata.labels.as_ref();
            wanted.iter().all(|(k, v)| {
                labels
                    .and_then(|l| l.get(k))
                    .is_some_and(|have| v.as_ref().is_none_or(|v| v == have))
            })
        })
        .cloned()
        .collect())
}

/// The annotations implemented for classic ELBs and refused on an NLB.
const CLASSIC_ONLY: &[&str] = &[
    ANNOTATION_TAGS,
    ANNOTATION_DRAINING,
    ANNOTATION_DRAINING_TIMEOUT,
    ANNOTATION_IDLE_TIMEOUT,
    ANNOTATION_CROSS_ZONE,
    ANNOTATION_HC_HEALTHY,
    ANNOTATION_HC_UNHEALTHY,
    ANNOTATION_HC_TIMEOUT,
    ANNOTATION_HC_INTERVAL,
    ANNOTATION_HC_PROTOCOL,
    ANNOTATION_HC_PORT,
    ANNOTATION_HC_PATH,
    ANNOTATION_PROXY_PROTOCOL,
    ANNOTATION_SSL_CERT,
    ANNOTATION_SSL_PORTS,
    ANNOTATION_BACKEND_PROTOCOL,
    ANNOTATION_SECURITY_GROUPS,
    ANNOTATION_EXTRA_SECURITY_GROUPS,
];

fn valid_cidr(s: &str) -> bool {
    let Some((ip, len)) = s.split_once('/') else {
        return false;
    };
    match (ip.parse::<std::net::IpAddr>(), len.parse::<u8>()) {
        (Ok(std::net::IpAddr::V4(_)), Ok(l)) => l <= 32,
        (Ok(std::net::IpAddr::V6(_)), Ok(l)) => l <= 128,
        _ => false,
    }
}

fn status(dns: Option<&str>) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: dns.filter(|d| !d.is_empty()).map(|d| {
            vec![LoadBalancerIngress {
                hostname: Some(d.to_owned()),
                ..Default::default()
            }]
        }),
    }
}

/// A security group rule flattened: (protocol, from, to, CIDR or source group).
type Rule = (String, i32, i32, String);

fn rules_of(perms: &[IpPermission]) -> BTreeSet<Rule> {
    let mut out = BTreeSet::new();
    for p in perms {
        let proto = p.ip_protocol().unwrap_or_default().to_owned();
        let (from, to) = (p.from_port().unwrap_or(-1), p.to_port().unwrap_or(-1));
        for r in p.ip_ranges() {
            out.insert((
                proto.clone(),
                from,
                to,
                r.cidr_ip().unwrap_or_default().to_owned(),
            ));
        }
        for g in p.user_id_group_pairs() {
            out.insert((
                proto.clone(),
                from,
                to,
                g.group_id().unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

fn permission(rule: &Rule, description: Option<&str>) -> IpPermission {
    let (proto, from, to, source) = rule;
    let mut b = IpPermission::builder().ip_protocol(proto);
    if proto != "-1" {
        b = b.from_port(*from).to_port(*to);
    }
    if source.starts_with("sg-") {
        b.user_id_group_pairs(
            UserIdGroupPair::builder()
                .group_id(source)
                .set_description(description.map(str::to_owned))
                .build(),
        )
        .build()
    } else {
        b.ip_ranges(
            IpRange::builder()
                .cidr_ip(source)
                .set_description(description.map(str::to_owned))
                .build(),
        )
        .build()
    }
}

fn elb_tags(tags: &BTreeMap<String, String>, op: &str) -> Result<Vec<elb::Tag>> {
    tags.iter()
        .map(|(k, v)| {
            elb::Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| cloud(op, e.to_string()))
        })
        .collect()
}

/// Target group name: `k8s-` + a hash of the Service, port, protocol and NodePort (a port
/// change makes a new group, as upstream), 32 characters at most.
fn target_group_name(spec: &Spec, p: &Port) -> String {
    let key = format!(
        "{}|{}|{}|{}|{}",
        spec.name, spec.service, p.port, p.protocol, p.node_port
    );
    // FNV-1a: stable across builds and platforms.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("k8s-{}-{:016x}", p.port, h)
}

impl Aws {
    async fn cluster_tag(&self) -> Result<Option<(String, String)>> {
        Ok(self
            .session()
            .await?
            .cluster
            .as_ref()
            .map(|c| (format!("{CLUSTER_TAG_PREFIX}{}", c.id), "owned".to_owned())))
    }

    /// The instances behind `nodes` (by provider ID, else by name), live ones only.
    async fn node_instances(&self, nodes: &[Node]) -> Result<Vec<InstanceInfo>> {
        let mut out: Vec<InstanceInfo> = Vec::new();
        for n in nodes {
            let found = match n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
                Some(id) if !id.is_empty() => {
                    parse_provider_id(id)?;
                    self.instance_by_provider_id(id).await
                }
                _ => {
                    self.instance_by_node_name(n.metadata.name.as_deref().unwrap_or_default())
                        .await
                }
            };
            match found {
                Ok(i) if !i.terminated() => {
                    if !out.iter().any(|o| o.id == i.id) {
                        out.push(i)
                    }
                }
                Ok(_) | Err(Error::InstanceNotFound) => {
                    tracing::warn!(node = ?n.metadata.name, "no running instance for node; not a load balancer backend")
                }
                Err(e) => return Err(e),
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn vpc_of(&self, instances: &[InstanceInfo]) -> Result<String> {
        if let Some(v) = &self.config.global.vpc {
            return Ok(v.clone());
        }
        if let Some(i) = instances.iter().find(|i| !i.vpc_id.is_empty()) {
            return Ok(i.vpc_id.clone());
        }
        let all = self.all_instances().await?;
        all.iter()
            .find(|i| !i.vpc_id.is_empty())
            .map(|i| i.vpc_id.clone())
            .ok_or_else(|| {
                cloud(
                    "EnsureLoadBalancer",
                    "cannot tell the cluster's VPC: set [Global] VPC",
                )
            })
    }

    /// The load balancer's subnets: those the `subnets` annotation names, else discovered
    /// (upstream's `getLoadBalancerSubnets`).
    async fn lb_subnets(
        &self,
        vpc: &str,
        spec: &Spec,
        instances: &[InstanceInfo],
    ) -> Result<Vec<String>> {
        match &spec.placement.subnets {
            Some(named) => self.resolve_subnets(vpc, named).await,
            None => self.discover_subnets(vpc, spec.internal, instances).await,
        }
    }

    /// The subnets the annotation names, in its order: an ID as it is, anything else by its
    /// `Name` tag in the VPC (upstream's `resolveSubnetNameOrIDs`, which fails unless every
    /// entry finds exactly one subnet); one DescribeSubnets per kind of entry.
    async fn resolve_subnets(&self, vpc: &str, named: &[String]) -> Result<Vec<String>> {
        let s = self.session().await?;
        let value = named.join(",");
        let (ids, names): (Vec<&String>, Vec<&String>) =
            named.iter().partition(|n| n.starts_with("subnet-"));
        let mut found: Vec<aws_sdk_ec2::types::Subnet> = Vec::new();
        if !ids.is_empty() {
            match s
                .ec2
                .describe_subnets()
                .set_subnet_ids(Some(ids.iter().map(|i| (*i).clone()).collect()))
                .send()
                .await
                .map_err(|e| sdk("DescribeSubnets", e))
            {
                Ok(r) => found.extend(r.subnets().iter().cloned()),
                Err(e) if code(&e) == Some("InvalidSubnetID.NotFound") => {
                    return Err(bad_value(
                        ANNOTATION_SUBNETS,
                        &value,
                        "names a subnet ID that does not exist (InvalidSubnetID.NotFound)",
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        if !names.is_empty() {
            let reply = s
                .ec2
                .describe_subnets()
                .filters(
                    Filter::builder()
                        .name("tag:Name")
                        .set_values(Some(names.iter().map(|n| (*n).clone()).collect()))
                        .build(),
                )
                .filters(Filter::builder().name("vpc-id").values(vpc).build())
                .send()
                .await
                .map_err(|e| sdk("DescribeSubnets", e))?;
            found.extend(reply.subnets().iter().cloned());
        }
        let mut out = Vec::new();
        for entry in named {
            let matching: Vec<&str> = found
                .iter()
                .filter(|sn| {
                    if entry.starts_with("subnet-") {
                        sn.subnet_id() == Some(entry.as_str())
                    } else {
                        sn.tags()
                            .iter()
                            .any(|t| t.key() == Some("Name") && t.value() == Some(entry.as_str()))
                    }
                })
                .filter_map(|sn| sn.subnet_id())
                .collect();
            match matching.as_slice() {
                [one] if !out.iter().any(|o| o == one) => out.push((*one).to_owned()),
                [one] => {
                    return Err(bad_value(
                        ANNOTATION_SUBNETS,
                        &value,
                        &format!("names subnet {one} twice"),
                    ))
                }
                [] => {
                    return Err(bad_value(
                        ANNOTATION_SUBNETS,
                        &value,
                        &format!("has {entry:?}, which names no subnet of {vpc}"),
                    ))
                }
                many => {
                    return Err(bad_value(
                        ANNOTATION_SUBNETS,
                        &value,
                        &format!("has {entry:?}, the Name of {} subnets", many.len()),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The CIDR blocks of `subnets`, by ID (one DescribeSubnets).
    async fn subnet_cidrs(&self, subnets: &[String]) -> Result<BTreeMap<String, String>> {
        let s = self.session().await?;
        let reply = s
            .ec2
            .describe_subnets()
            .set_subnet_ids(Some(subnets.to_vec()))
            .send()
            .await
            .map_err(|e| sdk("DescribeSubnets", e))?;
        Ok(reply
            .subnets()
            .iter()
            .filter_map(|sn| Some((sn.subnet_id()?.to_owned(), sn.cidr_block()?.to_owned())))
            .collect())
    }

    /// One subnet per zone: the cluster-tagged subnets of the VPC (preferring the role tag
    /// for the scheme), else the nodes' subnets.
    async fn discover_subnets(
        &self,
        vpc: &str,
        internal: bool,
        instances: &[InstanceInfo],
    ) -> Result<Vec<String>> {
        let s = self.session().await?;
        let mut filters = vec![Filter::builder().name("vpc-id").values(vpc).build()];
        filters.extend(Self::cluster_filters(s.cluster.as_ref()));
        let reply = s
            .ec2
            .describe_subnets()
            .set_filters(Some(filters))
            .send()
            .await
            .map_err(|e| sdk("DescribeSubnets", e))?;
        let role = if internal {
            "kubernetes.io/role/internal-elb"
        } else {
            "kubernetes.io/role/elb"
        };
        let mut by_zone: BTreeMap<String, (bool, String)> = BTreeMap::new();
        for sn in reply.subnets() {
            let (Some(id), Some(zone)) = (sn.subnet_id(), sn.availability_zone()) else {
                continue;
            };
            let has_role = sn.tags().iter().any(|t| t.key() == Some(role));
            let better = match by_zone.get(zone) {
                None => true,
                Some((r, cur)) => {
                    (has_role, std::cmp::Reverse(id)) > (*r, std::cmp::Reverse(cur.as_str()))
                }
            };
            if better {
                by_zone.insert(zone.to_owned(), (has_role, id.to_owned()));
            }
        }
        let mut subnets: Vec<String> = by_zone.into_values().map(|(_, id)| id).collect();
        if subnets.is_empty() {
            subnets = instances
                .iter()
                .map(|i| i.subnet_id.clone())
                .filter(|s| !s.is_empty())
                .collect();
            subnets.sort();
            subnets.dedup();
        }
        if subnets.is_empty() {
            return Err(cloud("EnsureLoadBalancer", "could not find any suitable subnets for the load balancer (tag them kubernetes.io/cluster/<ID>)"));
        }
        subnets.sort();
        Ok(subnets)
    }

    // ------------------------------------------------------------ security groups

    async fn find_group(
        &self,
        name: &str,
        vpc: Option<&str>,
    ) -> Result<Option<aws_sdk_ec2::types::SecurityGroup>> {
        let s = self.session().await?;
        let mut filters = vec![Filter::builder().name("group-name").values(name).build()];
        if let Some(v) = vpc {
            filters.push(Filter::builder().name("vpc-id").values(v).build());
        }
        let reply = s
            .ec2
            .describe_security_groups()
            .set_filters(Some(filters))
            .send()
            .await
            .map_err(|e| sdk("DescribeSecurityGroups", e))?;
        Ok(reply.security_groups().first().cloned())
    }

    async fn group_by_id(&self, id: &str) -> Result<Option<aws_sdk_ec2::types::SecurityGroup>> {
        let s = self.session().await?;
        match s
            .ec2
            .describe_security_groups()
            .group_ids(id)
            .send()
            .await
            .map_err(|e| sdk("DescribeSecurityGroups", e))
        {
            Ok(r) => Ok(r.security_groups().first().cloned()),
            Err(e) if code(&e) == Some("InvalidGroup.NotFound") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Makes the group's ingress exactly `want` (rules this provider manages).
    async fn sync_ingress(
        &self,
        group: &str,
        have: BTreeSet<Rule>,
        want: BTreeSet<Rule>,
        description: Option<&str>,
    ) -> Result<()> {
        let s = self.session().await?;
        let add: Vec<IpPermission> = want
            .difference(&have)
            .map(|r| permission(r, description))
            .collect();
        let remove: Vec<IpPermission> = have
            .difference(&want)
            .map(|r| permission(r, None))
            .collect();
        if !add.is_empty() {
            s.ec2
                .authorize_security_group_ingress()
                .group_id(group)
                .set_ip_permissions(Some(add))
                .send()
                .await
                .map_err(|e| sdk("AuthorizeSecurityGroupIngress", e))?;
        }
        if !remove.is_empty() {
            s.ec2
                .revoke_security_group_ingress()
                .group_id(group)
                .set_ip_permissions(Some(remove))
                .send()
                .await
                .map_err(|e| sdk("RevokeSecurityGroupIngress", e))?;
        }
        Ok(())
    }

    /// Takes away the nodes' rules that admit `group`.
    async fn unadmit(&self, group: &str) -> Result<()> {
        self.sync_node_rules(&[], BTreeSet::new, |r, _| r.3 == group, None)
            .await
    }

    /// The classic ELB's own group, created when missing, its ingress converged.
    async fn ensure_elb_group(&self, spec: &Spec, vpc: &str) -> Result<String> {
        if let Some(shared) = &self.config.global.elb_security_group {
            return Ok(shared.clone());
        }
        let s = self.session().await?;
        let name = elb_group_name(spec);
        let group = match self.find_group(&name, Some(vpc)).await? {
            Some(g) => g,
            None => {
                let id = s
                    .ec2
                    .create_security_group()
                    .group_name(&name)
                    .description(format!(
                        "Security group for Kubernetes ELB {} ({})",
                        spec.name, spec.service
                    ))
                    .vpc_id(vpc)
                    .send()
                    .await
                    .map_err(|e| sdk("CreateSecurityGroup", e))?
                    .group_id()
                    .map(str::to_owned)
                    .ok_or_else(|| cloud("CreateSecurityGroup", "no group ID in the answer"))?;
                let mut tags = vec![aws_sdk_ec2::types::Tag::builder()
                    .key(TAG_SERVICE_NAME)
                    .value(&spec.service)
                    .build()];
                if let Some((k, v)) = self.cluster_tag().await? {
                    tags.push(aws_sdk_ec2::types::Tag::builder().key(k).value(v).build());
                }
                s.ec2
                    .create_tags()
                    .resources(&id)
                    .set_tags(Some(tags))
                    .send()
                    .await
                    .map_err(|e| sdk("CreateTags", e))?;
                self.group_by_id(&id)
                    .await?
                    .ok_or_else(|| cloud("DescribeSecurityGroups", format!("{id} vanished")))?
            }
        };
        let id = group.group_id().unwrap_or_default().to_owned();
        let mut want = BTreeSet::new();
        for cidr in &spec.source_ranges {
            for p in &spec.ports {
                want.insert(("tcp".to_owned(), p.port, p.port, cidr.clone()));
            }
            // Path MTU discovery (ICMP type 3, code 4), as upstream.
            if !cidr.contains(':') {
                want.insert(("icmp".to_owned(), 3, 4, cidr.clone()));
            }
        }
        self.sync_ingress(&id, rules_of(group.ip_permissions()), want, None)
            .await?;
        Ok(id)
    }

    /// The group of each instance that load balancer rules go to: its only group, or the one
    /// tagged for the cluster.
    async fn node_groups(&self, instances: &[InstanceInfo]) -> Result<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        let cluster_tag = self.cluster_tag().await?.map(|(k, _)| k);
        for i in instances {
            match i.security_groups.as_slice() {
                [] => tracing::warn!(instance = %i.id, "instance has no security group"),
                [(id, _)] => {
                    out.insert(id.clone());
                }
                many => {
                    let mut tagged = Vec::new();
                    for (id, _) in many {
                        if let Some(g) = self.group_by_id(id).await? {
                            if g.tags().iter().any(|t| t.key() == cluster_tag.as_deref()) {
                                tagged.push(id.clone());
                            }
                        }
                    }
                    match tagged.as_slice() {
                        [one] => {
                            out.insert(one.clone());
                        }
                        _ => {
                            tracing::warn!(instance = %i.id, tagged = tagged.len(), "instance has several security groups and not exactly one tagged for the cluster; no load balancer rule added")
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Rules from `source` (a group, or CIDRs with `description`) on the groups of `members`,
    /// and none on the other cluster instances' groups.
    async fn sync_node_rules(
        &self,
        members: &[InstanceInfo],
        want_for: impl Fn() -> BTreeSet<Rule>,
        owns: impl Fn(&Rule, Option<&str>) -> bool,
        description: Option<&str>,
    ) -> Result<()> {
        if self.config.global.disable_security_group_ingress {
            return Ok(());
        }
        let all = self.all_instances().await?;
        let live: Vec<InstanceInfo> = all.iter().filter(|i| !i.terminated()).cloned().collect();
        let member_groups = self.node_groups(members).await?;
        let mut all_groups = self.node_groups(&live).await?;
        all_groups.extend(member_groups.iter().cloned());
        for g in all_groups {
            let Some(group) = self.group_by_id(&g).await? else {
                continue;
            };
            let mut have = BTreeSet::new();
            for p in group.ip_permissions() {
                for r in rules_of(std::slice::from_ref(p)) {
                    let desc = p
                        .ip_ranges()
                        .iter()
                        .find(|x| x.cidr_ip() == Some(r.3.as_str()))
                        .and_then(|x| x.description())
                        .or_else(|| {
                            p.user_id_group_pairs()
                                .iter()
                                .find(|x| x.group_id() == Some(r.3.as_str()))
                                .and_then(|x| x.description())
                        });
                    if owns(&r, desc) {
                        have.insert(r);
                    }
                }
            }
            let want = if member_groups.contains(&g) {
                want_for()
            } else {
                BTreeSet::new()
            };
            self.sync_ingress(&g, have, want, description).await?;
        }
        Ok(())
    }

    async fn delete_group(&self, id: &str) -> Result<()> {
        let s = self.session().await?;
        let deleted = poll_until(GROUP_RELEASE, || async {
            match s
                .ec2
                .delete_security_group()
                .group_id(id)
                .send()
                .await
                .map_err(|e| sdk("DeleteSecurityGroup", e))
            {
                Ok(_) => Ok(Poll::Ready(())),
                Err(e) if code(&e) == Some("InvalidGroup.NotFound") => Ok(Poll::Ready(())),
                // The load balancer's interfaces may still hold it for a while.
                Err(e) if code(&e) == Some("DependencyViolation") => {
                    Ok(Poll::Pending("in use (DependencyViolation)".into()))
                }
                Err(e) => Err(e),
            }
        })
        .await;
        match deleted {
            Ok(()) => Ok(()),
            Err(WaitError::Failed(e)) => Err(e),
            Err(WaitError::TimedOut(t)) => Err(crate::error::cloud(
                "DeleteSecurityGroup",
                format!("security group {id} {t}"),
            )),
        }
    }

    // ------------------------------------------------------------ classic ELB

    async fn describe_elb(&self, name: &str) -> Result<Option<elb::LoadBalancerDescription>> {
        let s = self.session().await?;
        let r = s
            .elb
            .describe_load_balancers()
            .load_balancer_names(name)
            .send()
            .await;
        let r = absent(
            r.map_err(|e| sdk("DescribeLoadBalancers", e)),
            &["LoadBalancerNotFound"],
        )?;
        Ok(r.and_then(|r| r.load_balancer_descriptions().first().cloned()))
    }

    async fn ensure_classic(&self, spec: &Spec, nodes: &[Node]) -> Result<LoadBalancerStatus> {
        let s = self.session().await?;
        let instances = self.node_instances(nodes).await?;
        let vpc = self.vpc_of(&instances).await?;
        let subnets = self.lb_subnets(&vpc, spec, &instances).await?;
        // The provider's own group unless `security-groups` replaces it (then it is neither
        // made nor given rules, as upstream's bring-your-own groups).
        let own = if spec.classic.security_groups.is_empty() {
            Some(self.ensure_elb_group(spec, &vpc).await?)
        } else {
            None
        };
        let groups = spec.classic.groups(own.as_deref());
        let group = groups
            .first()
            .cloned()
            .ok_or_else(|| cloud("EnsureLoadBalancer", "no security group for the ELB"))?;
        let scheme = if spec.internal {
            "internal"
        } else {
            "internet-facing"
        };
        let listeners: Vec<elb::Listener> = spec
            .ports
            .iter()
            .map(|p| {
                let (protocol, instance_protocol, cert) = spec.classic.tls.listener(p);
                elb::Listener::builder()
                    .protocol(protocol)
                    .load_balancer_port(p.port)
                    .instance_protocol(instance_protocol)
                    .instance_port(p.node_port)
                    .set_ssl_certificate_id(cert.map(str::to_owned))
                    .build()
                    .map_err(|e| cloud("CreateLoadBalancer", e.to_string()))
            })
            .collect::<Result<_>>()?;
        let mut existing = self.describe_elb(&spec.name).await?;
        if let Some(lb) = &existing {
            if lb.scheme().unwrap_or("internet-facing") != scheme {
                tracing::info!(lb = %spec.name, "scheme changed; recreating the ELB");
                s.elb
                    .delete_load_balancer()
                    .load_balancer_name(&spec.name)
                    .send()
                    .await
                    .map_err(|e| sdk("DeleteLoadBalancer", e))?;
                existing = None;
            }
        }
        let lb = match existing {
            None => {
                let tags = elb_tags(&self.classic_tags(spec).await?, "CreateLoadBalancer")?;
                let mut req = s
                    .elb
                    .create_load_balancer()
                    .load_balancer_name(&spec.name)
                    .set_listeners(Some(listeners.clone()))
                    .set_subnets(Some(subnets.clone()))
                    .set_security_groups(Some(groups.clone()))
                    .set_tags(Some(tags));
                if spec.internal {
                    req = req.scheme("internal");
                }
                req.send().await.map_err(|e| sdk("CreateLoadBalancer", e))?;
                tracing::info!(lb = %spec.name, service = %spec.service, "created classic ELB");
                self.describe_elb(&spec.name).await?.ok_or_else(|| {
                    cloud(
                        "DescribeLoadBalancers",
                        format!("ELB {} vanished after creation", spec.name),
                    )
                })?
            }
            Some(lb) => {
                self.converge_classic(spec, &lb, &listeners, &subnets, &groups)
                    .await?;
                self.converge_classic_tags(spec).await?;
                lb
            }
        };
        self.converge_classic_attributes(spec).await?;
        self.converge_proxy_protocol(spec, &lb).await?;
        // Health check.
        let target = check_target(
            spec.ports[0].node_port,
            spec.health_check_node_port,
            &spec.classic.check,
        );
        let tune = spec.classic.health;
        let hc_ok = lb.health_check().is_some_and(|h| {
            h.target() == target
                && h.interval() == tune.interval
                && h.timeout() == tune.timeout
                && h.healthy_threshold() == tune.healthy
                && h.unhealthy_threshold() == tune.unhealthy
        });
        if !hc_ok {
            let hc = elb::HealthCheck::builder()
                .target(&target)
                .interval(tune.interval)
                .timeout(tune.timeout)
                .healthy_threshold(tune.healthy)
                .unhealthy_threshold(tune.unhealthy)
                .build()
                .map_err(|e| cloud("ConfigureHealthCheck", e.to_string()))?;
            s.elb
                .configure_health_check()
                .load_balancer_name(&spec.name)
                .health_check(hc)
                .send()
                .await
                .map_err(|e| sdk("ConfigureHealthCheck", e))?;
        }
        // Instances.
        let have: BTreeSet<String> = lb
            .instances()
            .iter()
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect();
        let want: BTreeSet<String> = instances.iter().map(|i| i.id.clone()).collect();
        let add: Vec<elb::Instance> = want
            .difference(&have)
            .map(|id| elb::Instance::builder().instance_id(id).build())
            .collect();
        let remove: Vec<elb::Instance> = have
            .difference(&want)
            .map(|id| elb::Instance::builder().instance_id(id).build())
            .collect();
        if !add.is_empty() {
            s.elb
                .register_instances_with_load_balancer()
                .load_balancer_name(&spec.name)
                .set_instances(Some(add))
                .send()
                .await
                .map_err(|e| sdk("RegisterInstancesWithLoadBalancer", e))?;
        }
        if !remove.is_empty() {
            s.elb
                .deregister_instances_from_load_balancer()
                .load_balancer_name(&spec.name)
                .set_instances(Some(remove))
                .send()
                .await
                .map_err(|e| sdk("DeregisterInstancesFromLoadBalancer", e))?;
        }
        // The nodes admit the ELB's group.
        let g = group.clone();
        self.sync_node_rules(
            &instances,
            || BTreeSet::from([("-1".to_owned(), -1, -1, g.clone())]),
            |r, _| r.3 == group,
            None,
        )
        .await?;
        if own.is_none() && self.config.global.elb_security_group.is_none() {
            // The Service switched to its own groups: the provider's group goes.
            if let Some(id) = self
                .find_group(&elb_group_name(spec), Some(&vpc))
                .await?
                .and_then(|g| g.group_id().map(str::to_owned))
            {
                self.unadmit(&id).await?;
                self.delete_group(&id).await?;
            }
        }
        Ok(status(lb.dns_name()))
    }

    /// Every tag the ELB carries: the annotation's, then the service-name and cluster tags
    /// (which win).
    async fn classic_tags(&self, spec: &Spec) -> Result<BTreeMap<String, String>> {
        let mut tags = spec.classic.tags.clone();
        tags.insert(TAG_SERVICE_NAME.to_owned(), spec.service.clone());
        if let Some((k, v)) = self.cluster_tag().await? {
            tags.insert(k, v);
        }
        Ok(tags)
    }

    /// Adds the annotation's tags an existing ELB lacks or holds with another value; keys
    /// dropped from the annotation stay, as upstream (they may be someone else's). One
    /// DescribeTags only when the annotation asks for tags.
    async fn converge_classic_tags(&self, spec: &Spec) -> Result<()> {
        if spec.classic.tags.is_empty() {
            return Ok(());
        }
        let s = self.session().await?;
        let reply = s
            .elb
            .describe_tags()
            .load_balancer_names(&spec.name)
            .send()
            .await
            .map_err(|e| sdk("DescribeTags", e))?;
        let have: BTreeMap<&str, &str> = reply
            .tag_descriptions()
            .iter()
            .flat_map(|d| d.tags())
            .map(|t| (t.key(), t.value().unwrap_or_default()))
            .collect();
        let want = self.classic_tags(spec).await?;
        let missing: BTreeMap<String, String> = want
            .into_iter()
            .filter(|(k, v)| have.get(k.as_str()) != Some(&v.as_str()))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        s.elb
            .add_tags()
            .load_balancer_names(&spec.name)
            .set_tags(Some(elb_tags(&missing, "AddTags")?))
            .send()
            .await
            .map_err(|e| sdk("AddTags", e))?;
        Ok(())
    }

    /// The PROXY protocol policy on exactly the node ports when the Service asks for it, on
    /// none otherwise; read from the ELB's description (no extra request when nothing
    /// changes).
    async fn converge_proxy_protocol(
        &self,
        spec: &Spec,
        lb: &elb::LoadBalancerDescription,
    ) -> Result<()> {
        let s = self.session().await?;
        let want = spec.classic.proxy_protocol;
        let defined = lb.policies().is_some_and(|p| {
            p.other_policies()
                .iter()
                .any(|n| n == PROXY_PROTOCOL_POLICY)
        });
        if want && !defined {
            s.elb
                .create_load_balancer_policy()
                .load_balancer_name(&spec.name)
                .policy_name(PROXY_PROTOCOL_POLICY)
                .policy_type_name("ProxyProtocolPolicyType")
                .policy_attributes(
                    elb::PolicyAttribute::builder()
                        .attribute_name("ProxyProtocol")
                        .attribute_value("true")
                        .build(),
                )
                .send()
                .await
                .map_err(|e| sdk("CreateLoadBalancerPolicy", e))?;
        }
        let mut have: BTreeMap<i32, bool> = BTreeMap::new();
        for b in lb.backend_server_descriptions() {
            if let Some(port) = b.instance_port() {
                have.insert(
                    port,
                    b.policy_names().iter().any(|n| n == PROXY_PROTOCOL_POLICY),
                );
            }
        }
        let mut ports: BTreeSet<i32> = spec.ports.iter().map(|p| p.node_port).collect();
        ports.extend(have.keys().copied());
        for port in ports {
            let on = want && spec.ports.iter().any(|p| p.node_port == port);
            if have.get(&port).copied().unwrap_or(false) == on {
                continue;
            }
            s.elb
                .set_load_balancer_policies_for_backend_server()
                .load_balancer_name(&spec.name)
                .instance_port(port)
                .set_policy_names(Some(if on {
                    vec![PROXY_PROTOCOL_POLICY.to_owned()]
                } else {
                    Vec::new()
                }))
                .send()
                .await
                .map_err(|e| sdk("SetLoadBalancerPoliciesForBackendServer", e))?;
        }
        Ok(())
    }

    /// Idle timeout, connection draining and cross-zone balancing as the Service asks (upstream's
    /// defaults otherwise): one DescribeLoadBalancerAttributes, and a
    /// ModifyLoadBalancerAttributes when the ELB differs.
    async fn converge_classic_attributes(&self, spec: &Spec) -> Result<()> {
        let s = self.session().await?;
        let reply = s
            .elb
            .describe_load_balancer_attributes()
            .load_balancer_name(&spec.name)
            .send()
            .await
            .map_err(|e| sdk("DescribeLoadBalancerAttributes", e))?;
        let a = reply.load_balancer_attributes();
        let have = Attributes {
            idle_timeout: a
                .and_then(|a| a.connection_settings())
                .map_or(60, |c| c.idle_timeout()),
            draining: a
                .and_then(|a| a.connection_draining())
                .is_some_and(|d| d.enabled()),
            draining_timeout: a
                .and_then(|a| a.connection_draining())
                .and_then(|d| d.timeout())
                .unwrap_or(300),
            cross_zone: a
                .and_then(|a| a.cross_zone_load_balancing())
                .is_some_and(|c| c.enabled()),
        };
        let want = spec.classic.attributes;
        if have == want {
            return Ok(());
        }
        let op = "ModifyLoadBalancerAttributes";
        let attributes = elb::LoadBalancerAttributes::builder()
            .connection_settings(
                elb::ConnectionSettings::builder()
                    .idle_timeout(want.idle_timeout)
                    .build()
                    .map_err(|e| cloud(op, e.to_string()))?,
            )
            .connection_draining(
                elb::ConnectionDraining::builder()
                    .enabled(want.draining)
                    .timeout(want.draining_timeout)
                    .build(),
            )
            .cross_zone_load_balancing(
                elb::CrossZoneLoadBalancing::builder()
                    .enabled(want.cross_zone)
                    .build(),
            )
            .build();
        s.elb
            .modify_load_balancer_attributes()
            .load_balancer_name(&spec.name)
            .load_balancer_attributes(attributes)
            .send()
            .await
            .map_err(|e| sdk(op, e))?;
        Ok(())
    }

    async fn converge_classic(
        &self,
        spec: &Spec,
        lb: &elb::LoadBalancerDescription,
        listeners: &[elb::Listener],
        subnets: &[String],
        groups: &[String],
    ) -> Result<()> {
        let s = self.session().await?;
        let key = |l: &elb::Listener| {
            (
                l.load_balancer_port(),
                l.protocol().to_ascii_uppercase(),
                l.instance_port(),
                l.instance_protocol().unwrap_or("TCP").to_ascii_uppercase(),
                l.ssl_certificate_id().unwrap_or_default().to_owned(),
            )
        };
        let have: Vec<elb::Listener> = lb
            .listener_descriptions()
            .iter()
            .filter_map(|d| d.listener().cloned())
            .collect();
        let want_keys: BTreeSet<_> = listeners.iter().map(key).collect();
        let have_keys: BTreeSet<_> = have.iter().map(key).collect();
        let stale: Vec<i32> = have
            .iter()
            .filter(|l| !want_keys.contains(&key(l)))
            .map(|l| l.load_balancer_port())
            .collect();
        let missing: Vec<elb::Listener> = listeners
            .iter()
            .filter(|l| !have_keys.contains(&key(l)))
            .cloned()
            .collect();
        if !stale.is_empty() {
            s.elb
                .delete_load_balancer_listeners()
                .load_balancer_name(&spec.name)
                .set_load_balancer_ports(Some(stale))
                .send()
                .await
                .map_err(|e| sdk("DeleteLoadBalancerListeners", e))?;
        }
        if !missing.is_empty() {
            s.elb
                .create_load_balancer_listeners()
                .load_balancer_name(&spec.name)
                .set_listeners(Some(missing))
                .send()
                .await
                .map_err(|e| sdk("CreateLoadBalancerListeners", e))?;
        }
        let have: BTreeSet<String> = lb.subnets().iter().cloned().collect();
        let want: BTreeSet<String> = subnets.iter().cloned().collect();
        let attach: Vec<String> = want.difference(&have).cloned().collect();
        let detach: Vec<String> = have.difference(&want).cloned().collect();
        if !attach.is_empty() {
            s.elb
                .attach_load_balancer_to_subnets()
                .load_balancer_name(&spec.name)
                .set_subnets(Some(attach))
                .send()
                .await
                .map_err(|e| sdk("AttachLoadBalancerToSubnets", e))?;
        }
        if !detach.is_empty() {
            s.elb
                .detach_load_balancer_from_subnets()
                .load_balancer_name(&spec.name)
                .set_subnets(Some(detach))
                .send()
                .await
                .map_err(|e| sdk("DetachLoadBalancerFromSubnets", e))?;
        }
        let have: BTreeSet<&String> = lb.security_groups().iter().collect();
        if have != groups.iter().collect() {
            s.elb
                .apply_security_groups_to_load_balancer()
                .load_balancer_name(&spec.name)
                .set_security_groups(Some(groups.to_vec()))
                .send()
                .await
                .map_err(|e| sdk("ApplySecurityGroupsToLoadBalancer", e))?;
        }
        Ok(())
    }

    async fn delete_classic(&self, spec: &Spec) -> Result<()> {
        let s = self.session().await?;
        let lb = self.describe_elb(&spec.name).await?;
        let own_group = match &self.config.global.elb_security_group {
            Some(_) => None,
            None => self.find_group(&elb_group_name(spec), None).await?,
        };
        let group_ids: BTreeSet<String> = lb
            .as_ref()
            .map(|l| l.security_groups().iter().cloned().collect())
            .unwrap_or_default();
        if let Some(g) = own_group.as_ref().and_then(|g| g.group_id()) {
            // No node admits the ELB's group any more.
            self.unadmit(g).await?;
        } else if let Some(g) = spec.classic.security_groups.first() {
            // The Service's own groups: only the first was admitted by the nodes.
            self.unadmit(g).await?;
        } else if self.config.global.elb_security_group.is_none() {
            for g in &group_ids {
                self.unadmit(g).await?;
            }
        }
        if lb.is_some() {
            s.elb
                .delete_load_balancer()
                .load_balancer_name(&spec.name)
                .send()
                .await
                .map_err(|e| sdk("DeleteLoadBalancer", e))?;
            tracing::info!(lb = %spec.name, "deleted classic ELB");
        }
        if let Some(id) = own_group.as_ref().and_then(|g| g.group_id()) {
            self.delete_group(id).await?;
        }
        Ok(())
    }

    // ------------------------------------------------------------ NLB

    async fn describe_nlb(&self, name: &str) -> Result<Option<elbv2::LoadBalancer>> {
        let s = self.session().await?;
        let r = s.elbv2.describe_load_balancers().names(name).send().await;
        let r = absent(
            r.map_err(|e| sdk("DescribeLoadBalancers", e)),
            &["LoadBalancerNotFound"],
        )?;
        Ok(r.and_then(|r| r.load_balancers().first().cloned()))
    }

    /// The ARNs of a load balancer's target groups: those the API lists for it, and those
    /// its listeners forward to (some implementations do not list a group that a modified
    /// listener points at; none listed at all may answer `TargetGroupNotFound`).
    async fn lb_target_groups(&self, arn: &str) -> Result<BTreeSet<String>> {
        let s = self.session().await?;
        let mut out = BTreeSet::new();
        match s
            .elbv2
            .describe_target_groups()
            .load_balancer_arn(arn)
            .send()
            .await
            .map_err(|e| sdk("DescribeTargetGroups", e))
        {
            Ok(r) => out.extend(
                r.target_groups()
                    .iter()
                    .filter_map(|g| g.target_group_arn().map(str::to_owned)),
            ),
            Err(e) if code(&e) == Some("TargetGroupNotFound") => {}
            Err(e) => return Err(e),
        }
        let listeners = s
            .elbv2
            .describe_listeners()
            .load_balancer_arn(arn)
            .send()
            .await
            .map_err(|e| sdk("DescribeListeners", e))?;
        for l in listeners.listeners() {
            out.extend(
                l.default_actions()
                    .iter()
                    .filter_map(|a| a.target_group_arn().map(str::to_owned)),
            );
        }
        Ok(out)
    }

    fn v2_tags(&self, spec: &Spec, cluster: Option<(String, String)>) -> Vec<elbv2::Tag> {
        let mut tags = vec![elbv2::Tag::builder()
            .key(TAG_SERVICE_NAME)
            .value(&spec.service)
            .build()];
        if let Some((k, v)) = cluster {
            tags.push(elbv2::Tag::builder().key(k).value(v).build());
        }
        tags
    }

    async fn ensure_nlb(&self, spec: &Spec, nodes: &[Node]) -> Result<LoadBalancerStatus> {
        let s = self.session().await?;
        let instances = self.node_instances(nodes).await?;
        let vpc = self.vpc_of(&instances).await?;
        let subnets = self.lb_subnets(&vpc, spec, &instances).await?;
        let scheme = if spec.internal {
            elbv2::LoadBalancerSchemeEnum::Internal
        } else {
            elbv2::LoadBalancerSchemeEnum::InternetFacing
        };
        let cidrs = if spec.placement.private_ips.is_empty() {
            BTreeMap::new()
        } else {
            self.subnet_cidrs(&subnets).await?
        };
        let mappings = spec.placement.mappings(&subnets, &cidrs)?;
        let cluster = self.cluster_tag().await?;
        let mut existing = self.describe_nlb(&spec.name).await?;
        if let Some(lb) = &existing {
            // An NLB's addresses are fixed at creation: other ones need a new NLB.
            if lb.scheme() != Some(&scheme) || addresses_differ(lb, &mappings) {
                tracing::info!(lb = %spec.name, "scheme or addresses changed; recreating the NLB");
                self.delete_nlb(spec).await?;
                existing = None;
            }
        }
        let lb =
            match existing {
                Some(lb) => lb,
                None => {
                    let reply = s
                        .elbv2
                        .create_load_balancer()
                        .name(&spec.name)
                        .r#type(elbv2::LoadBalancerTypeEnum::Network)
                        .scheme(scheme)
                        .set_subnet_mappings(Some(mappings.clone()))
                        .set_tags(Some(self.v2_tags(spec, cluster.clone())))
                        .send()
                        .await
                        .map_err(|e| sdk("CreateLoadBalancer", e))?;
                    tracing::info!(lb = %spec.name, service = %spec.service, "created NLB");
                    reply.load_balancers().first().cloned().ok_or_else(|| {
                        cloud("CreateLoadBalancer", "no load balancer in the answer")
                    })?
                }
            };
        let arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
        let have_subnets: BTreeSet<String> = lb
            .availability_zones()
            .iter()
            .filter_map(|z| z.subnet_id().map(str::to_owned))
            .collect();
        if !have_subnets.is_empty() && have_subnets != subnets.iter().cloned().collect() {
            let mut req = s.elbv2.set_subnets().load_balancer_arn(&arn);
            req = if spec.placement.addresses() {
                req.set_subnet_mappings(Some(mappings.clone()))
            } else {
                req.set_subnets(Some(subnets.clone()))
            };
            req.send().await.map_err(|e| sdk("SetSubnets", e))?;
        }
        let listeners = s
            .elbv2
            .describe_listeners()
            .load_balancer_arn(&arn)
            .send()
            .await
            .map_err(|e| sdk("DescribeListeners", e))?;
        let groups = self.lb_target_groups(&arn).await?;
        let mut keep_groups = BTreeSet::new();
        for p in &spec.ports {
            let tg_name = target_group_name(spec, p);
            let protocol = elbv2::ProtocolEnum::from(p.protocol.as_str());
            let tg_arn = {
                {
                    let found = match s
                        .elbv2
                        .describe_target_groups()
                        .names(&tg_name)
                        .send()
                        .await
                        .map_err(|e| sdk("DescribeTargetGroups", e))
                    {
                        Ok(r) => r
                            .target_groups()
                            .first()
                            .and_then(|g| g.target_group_arn())
                            .map(str::to_owned),
                        Err(e) if code(&e) == Some("TargetGroupNotFound") => None,
                        Err(e) => return Err(e),
                    };
                    match found {
                        Some(a) => a,
                        None => s
                            .elbv2
                            .create_target_group()
                            .name(&tg_name)
                            .protocol(protocol.clone())
                            .port(p.node_port)
                            .vpc_id(&vpc)
                            .target_type(elbv2::TargetTypeEnum::Instance)
                            .health_check_protocol(elbv2::ProtocolEnum::Tcp)
                            .health_check_port("traffic-port")
                            .set_tags(Some(self.v2_tags(spec, cluster.clone())))
                            .send()
                            .await
                            .map_err(|e| sdk("CreateTargetGroup", e))?
                            .target_groups()
                            .first()
                            .and_then(|g| g.target_group_arn())
                            .map(str::to_owned)
                            .ok_or_else(|| {
                                cloud("CreateTargetGroup", "no target group in the answer")
                            })?,
                    }
                }
            };
            keep_groups.insert(tg_arn.clone());
            let action = elbv2::Action::builder()
                .r#type(elbv2::ActionTypeEnum::Forward)
                .target_group_arn(&tg_arn)
                .build();
            match listeners
                .listeners()
                .iter()
                .find(|l| l.port() == Some(p.port))
            {
                None => {
                    s.elbv2
                        .create_listener()
                        .load_balancer_arn(&arn)
                        .protocol(protocol)
                        .port(p.port)
                        .default_actions(action)
                        .send()
                        .await
                        .map_err(|e| sdk("CreateListener", e))?;
                }
                Some(l) => {
                    let same = l.protocol() == Some(&protocol)
                        && l.default_actions()
                            .iter()
                            .any(|a| a.target_group_arn() == Some(tg_arn.as_str()));
                    if !same {
                        s.elbv2
                            .modify_listener()
                            .listener_arn(l.listener_arn().unwrap_or_default())
                            .protocol(protocol)
                            .port(p.port)
                            .default_actions(action)
                            .send()
                            .await
                            .map_err(|e| sdk("ModifyListener", e))?;
                    }
                }
            }
            // Targets.
            let health = s
                .elbv2
                .describe_target_health()
                .target_group_arn(&tg_arn)
                .send()
                .await
                .map_err(|e| sdk("DescribeTargetHealth", e))?;
            let have: BTreeSet<String> = health
                .target_health_descriptions()
                .iter()
                .filter_map(|d| d.target().and_then(|t| t.id().map(str::to_owned)))
                .collect();
            let want: BTreeSet<String> = instances.iter().map(|i| i.id.clone()).collect();
            let add: Vec<elbv2::TargetDescription> = want
                .difference(&have)
                .map(|id| {
                    elbv2::TargetDescription::builder()
                        .id(id)
                        .port(p.node_port)
                        .build()
                })
                .collect();
            let remove: Vec<elbv2::TargetDescription> = have
                .difference(&want)
                .map(|id| {
                    elbv2::TargetDescription::builder()
                        .id(id)
                        .port(p.node_port)
                        .build()
                })
                .collect();
            if !add.is_empty() {
                s.elbv2
                    .register_targets()
                    .target_group_arn(&tg_arn)
                    .set_targets(Some(add))
                    .send()
                    .await
                    .map_err(|e| sdk("RegisterTargets", e))?;
            }
            if !remove.is_empty() {
                s.elbv2
                    .deregister_targets()
                    .target_group_arn(&tg_arn)
                    .set_targets(Some(remove))
                    .send()
                    .await
                    .map_err(|e| sdk("DeregisterTargets", e))?;
            }
        }
        // Listeners and target groups of ports the Service no longer has.
        let want_ports: BTreeSet<i32> = spec.ports.iter().map(|p| p.port).collect();
        for l in listeners.listeners() {
            if l.port().is_some_and(|p| !want_ports.contains(&p)) {
                s.elbv2
                    .delete_listener()
                    .listener_arn(l.listener_arn().unwrap_or_default())
                    .send()
                    .await
                    .map_err(|e| sdk("DeleteListener", e))?;
            }
        }
        for a in &groups {
            if !keep_groups.contains(a) {
                s.elbv2
                    .delete_target_group()
                    .target_group_arn(a)
                    .send()
                    .await
                    .map_err(|e| sdk("DeleteTargetGroup", e))?;
            }
        }
        // Node security groups: clients on the NodePorts, health checks from the VPC.
        let vpc_cidr = s
            .ec2
            .describe_vpcs()
            .vpc_ids(&vpc)
            .send()
            .await
            .map_err(|e| sdk("DescribeVpcs", e))?
            .vpcs()
            .first()
            .and_then(|v| v.cidr_block())
            .map(str::to_owned);
        let client = format!("kubernetes.io/rule/nlb/client={}", spec.name);
        let health = format!("kubernetes.io/rule/nlb/health={}", spec.name);
        let client_rules: BTreeSet<Rule> = spec
            .ports
            .iter()
            .flat_map(|p| {
                spec.source_ranges.iter().map(move |c| {
                    (
                        p.protocol.to_ascii_lowercase(),
                        p.node_port,
                        p.node_port,
                        c.clone(),
                    )
                })
            })
            .collect();
        self.sync_node_rules(
            &instances,
            || client_rules.clone(),
            |_, d| d == Some(client.as_str()),
            Some(&client),
        )
        .await?;
        let health_rules: BTreeSet<Rule> = match &vpc_cidr {
            Some(c) => spec
                .ports
                .iter()
                .map(|p| ("tcp".to_owned(), p.node_port, p.node_port, c.clone()))
                .collect(),
            None => BTreeSet::new(),
        };
        self.sync_node_rules(
            &instances,
            || health_rules.clone(),
            |_, d| d == Some(health.as_str()),
            Some(&health),
        )
        .await?;
        Ok(status(lb.dns_name()))
    }

    async fn delete_nlb(&self, spec: &Spec) -> Result<()> {
        let s = self.session().await?;
        let client = format!("kubernetes.io/rule/nlb/client={}", spec.name);
        let health = format!("kubernetes.io/rule/nlb/health={}", spec.name);
        self.sync_node_rules(&[], BTreeSet::new, |_, d| d == Some(client.as_str()), None)
            .await?;
        self.sync_node_rules(&[], BTreeSet::new, |_, d| d == Some(health.as_str()), None)
            .await?;
        let Some(lb) = self.describe_nlb(&spec.name).await? else {
            return Ok(());
        };
        let arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
        let groups = self.lb_target_groups(&arn).await?;
        s.elbv2
            .delete_load_balancer()
            .load_balancer_arn(&arn)
            .send()
            .await
            .map_err(|e| sdk("DeleteLoadBalancer", e))?;
        for a in &groups {
            {
                match s
                    .elbv2
                    .delete_target_group()
                    .target_group_arn(a)
                    .send()
                    .await
                    .map_err(|e| sdk("DeleteTargetGroup", e))
                {
                    Ok(_) => {}
                    Err(e) if code(&e) == Some("TargetGroupNotFound") => {}
                    Err(e) => return Err(e),
                }
            }
        }
        tracing::info!(lb = %spec.name, "deleted NLB");
        Ok(())
    }
}

#[async_trait]
impl LoadBalancer for Aws {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let spec = match spec_of(service) {
            Ok(s) => s,
            Err(Error::ImplementedElsewhere) => return Err(Error::ImplementedElsewhere),
            // A Service whose ports are not ready yet still may have a load balancer by name.
            Err(_) => Spec {
                kind: if annotation(service, ANNOTATION_TYPE) == Some("nlb") {
                    Kind::Nlb
                } else {
                    Kind::Classic
                },
                name: default_load_balancer_name(service),
                service: String::new(),
                internal: false,
                ports: Vec::new(),
                source_ranges: Vec::new(),
                health_check_node_port: None,
                placement: Placement::default(),
                classic: ClassicOptions::default(),
            },
        };
        Ok(match spec.kind {
            Kind::Classic => self
                .describe_elb(&spec.name)
                .await?
                .map(|lb| status(lb.dns_name())),
            Kind::Nlb => self
                .describe_nlb(&spec.name)
                .await?
                .map(|lb| status(lb.dns_name())),
        })
    }

    fn check_service(&self, service: &Service) -> Result<()> {
        check_settings(service)
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        self.check_service(service)?;
        let spec = spec_of(service)?;
        let nodes = target_nodes(service, nodes)?;
        match spec.kind {
            Kind::Classic => self.ensure_classic(&spec, &nodes).await,
            Kind::Nlb => self.ensure_nlb(&spec, &nodes).await,
        }
    }

    /// The same convergence as ensure: the node set, and whatever else drifted.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        self.ensure_load_balancer(cluster_name, service, nodes)
            .await
            .map(|_| ())
    }

    /// Deletes whichever kind exists under the name (the annotation may have changed).
    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        if matches!(spec_of(service), Err(Error::ImplementedElsewhere)) {
            return Err(Error::ImplementedElsewhere);
        }
        let spec = Spec {
            kind: Kind::Classic,
            name: default_load_balancer_name(service),
            service: String::new(),
            internal: false,
            ports: Vec::new(),
            source_ranges: Vec::new(),
            health_check_node_port: None,
            placement: Placement::default(),
            // The Service's own groups, when it names them: the nodes' rules for the first go.
            classic: classic_options(service).unwrap_or_default(),
        };
        self.delete_classic(&spec).await?;
        self.delete_nlb(&spec).await
    }
}

/// hypercloud's own `service-lb-annotations` webhook (the kit's, the same on every provider
/// with load balancers), deciding with [`LoadBalancer::check_service`].
#[async_trait]
impl Webhooks for Aws {
    fn webhooks(&self) -> Vec<WebhookSpec> {
        vec![SERVICE_LB_ANNOTATIONS]
    }

    async fn admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse> {
        admit_service_lb(self, webhook, request)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(annotations: serde_json::Value, spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708", "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn spec_as_upstream() {
        let s = spec_of(&svc(
            json!({ANNOTATION_INTERNAL: "true"}),
            json!({"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080}], "loadBalancerSourceRanges": ["10.0.0.0/8"]}),
        ))
        .unwrap();
        assert_eq!(s.kind, Kind::Classic);
        assert_eq!(s.name, "a3f2a1b4c5d6e7f8091a2b3c4d5e6f70");
        assert!(s.internal);
        assert_eq!(s.source_ranges, vec!["10.0.0.0/8"]);
        assert_eq!(s.service, "ns/web");
        let s = spec_of(&svc(
            json!({ANNOTATION_TYPE: "nlb", ANNOTATION_SOURCE_RANGES: "1.2.3.0/24, 5.6.7.8/32"}),
            json!({"ports": [{"port": 53, "nodePort": 30053, "protocol": "UDP"}]}),
        ))
        .unwrap();
        assert_eq!(s.kind, Kind::Nlb);
        assert!(!s.internal);
        assert_eq!(s.source_ranges, vec!["1.2.3.0/24", "5.6.7.8/32"]);
        let s = spec_of(&svc(
            json!({}),
            json!({"ports": [{"port": 80, "nodePort": 30080}]}),
        ))
        .unwrap();
        assert_eq!(s.source_ranges, vec!["0.0.0.0/0"]);
        assert!(matches!(
            spec_of(&svc(json!({ANNOTATION_TYPE: "external"}), json!({}))),
            Err(Error::ImplementedElsewhere)
        ));
        for bad in [
            json!({"ports": [{"port": 53, "nodePort": 30053, "protocol": "UDP"}]}),
            json!({"ports": [{"port": 80}]}),
            json!({"ports": []}),
            json!({"ports": [{"port": 80, "nodePort": 30080}], "loadBalancerSourceRanges": ["nope"]}),
        ] {
            assert!(spec_of(&svc(json!({}), bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn target_group_names_fit_and_follow_ports() {
        let s = spec_of(&svc(
            json!({ANNOTATION_TYPE: "nlb"}),
            json!({"ports": [{"port": 80, "nodePort": 30080}]}),
        ))
        .unwrap();
        let a = target_group_name(&s, &s.ports[0]);
        assert!(a.len() <= 32, "{a}");
        let moved = Port {
            node_port: 30081,
            ..s.ports[0].clone()
        };
        assert_ne!(a, target_group_name(&s, &moved));
        assert_eq!(a, target_group_name(&s, &s.ports[0]));
    }

    #[test]
    fn the_settings_table_is_what_the_check_does() {
        let base = svc(
            json!({"example.com/own": "not ours to judge"}),
            json!({"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}),
        );
        let check = check_settings;
        // ssl-ports needs ssl-cert, and the walk asks for one annotation at a time: every
        // other row on the plain base, ssl-ports (with the Service fields) on a base with a
        // certificate.
        // healthcheck-path likewise needs an HTTP check: walked on a base asking for one.
        let ssl_ports = Setting::Annotation(ANNOTATION_SSL_PORTS);
        let hc_path = Setting::Annotation(ANNOTATION_HC_PATH);
        // eip-allocations and private-ipv4-addresses need an NLB of their scheme: walked on
        // bases asking for one.
        let eip = Setting::Annotation(ANNOTATION_EIP_ALLOCATIONS);
        let private = Setting::Annotation(ANNOTATION_PRIVATE_IPV4);
        for (row, base_annotations) in [
            (eip, json!({ANNOTATION_TYPE: "nlb"})),
            (
                private,
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_INTERNAL: "true"}),
            ),
        ] {
            let rows: Vec<LbSetting> = SERVICE_SETTINGS
                .iter()
                .filter(|r| r.setting == row || !matches!(r.setting, Setting::Annotation(_)))
                .cloned()
                .collect();
            let nlb = svc(
                base_annotations,
                json!({"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}),
            );
            lb_settings::walk(&rows, &nlb, check).unwrap();
        }
        let (with, without): (Vec<LbSetting>, Vec<LbSetting>) = SERVICE_SETTINGS
            .iter()
            .filter(|r| r.setting != hc_path && r.setting != eip && r.setting != private)
            .cloned()
            .partition(|r| r.setting == ssl_ports);
        let path_rows: Vec<LbSetting> = SERVICE_SETTINGS
            .iter()
            .filter(|r| r.setting == hc_path || !matches!(r.setting, Setting::Annotation(_)))
            .cloned()
            .collect();
        let with_http_check = svc(
            json!({ANNOTATION_HC_PROTOCOL: "HTTP"}),
            json!({"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}),
        );
        lb_settings::walk(&path_rows, &with_http_check, check).unwrap();
        let fields: Vec<LbSetting> = without
            .iter()
            .filter(|r| !matches!(r.setting, Setting::Annotation(_)))
            .cloned()
            .collect();
        lb_settings::walk(&without, &base, check).unwrap();
        let with_cert = svc(
            json!({ANNOTATION_SSL_CERT: "arn:aws:acm:us-east-1:123456789012:certificate/1"}),
            json!({"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}),
        );
        lb_settings::walk(&[with, fields].concat(), &with_cert, check).unwrap();
        let refused = SERVICE_SETTINGS
            .iter()
            .filter(|r| r.support == hypercloud_cloudprovider::Support::Refused)
            .count();
        // Upstream's 30 aws-load-balancer-* annotations: 24 implemented, 6 refused; the AWS
        // Load Balancer Controller's nlb-target-type (`instance` implemented); and 4 Service
        // fields refused.
        assert_eq!(refused, 10);
        let policy = svc(
            json!({"service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy": "ELBSecurityPolicy-2016-08"}),
            json!({"ports": [{"port": 443, "nodePort": 30443}]}),
        );
        assert_eq!(
            check(&policy).unwrap_err().to_string(),
            "annotation service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy is not supported by hypercloud's aws provider: TLS listeners use ELB's default negotiation policy; choosing one is not implemented"
        );
        // The AWS Load Balancer Controller's Services are its own.
        let theirs = svc(
            json!({ANNOTATION_TYPE: "external", "service.beta.kubernetes.io/aws-load-balancer-ssl-cert": "arn"}),
            json!({"ports": [{"port": 443, "nodePort": 30443}]}),
        );
        assert!(check(&theirs).is_ok());
    }

    #[test]
    fn classic_options_as_upstream_and_bad_values_refused_by_name() {
        let ports = json!({"ports": [{"port": 80, "nodePort": 30080}]});
        let o = classic_options(&svc(json!({}), ports.clone())).unwrap();
        assert_eq!(o, ClassicOptions::default());
        assert_eq!(o.attributes.draining_timeout, 300);
        let o = classic_options(&svc(
            json!({
                ANNOTATION_TAGS: " team=web, bare ,,cost=1=2",
                ANNOTATION_DRAINING: "T",
                ANNOTATION_DRAINING_TIMEOUT: "45",
                ANNOTATION_IDLE_TIMEOUT: "4000",
                ANNOTATION_CROSS_ZONE: "1",
                ANNOTATION_HC_HEALTHY: "3",
                ANNOTATION_HC_UNHEALTHY: "10",
                ANNOTATION_HC_TIMEOUT: "4",
                ANNOTATION_HC_INTERVAL: "30",
                ANNOTATION_PROXY_PROTOCOL: "*",
            }),
            ports.clone(),
        ))
        .unwrap();
        assert_eq!(
            o.tags,
            BTreeMap::from([
                ("team".to_owned(), "web".to_owned()),
                ("bare".to_owned(), String::new()),
                ("cost".to_owned(), "1".to_owned()),
            ])
        );
        assert_eq!(
            o.attributes,
            Attributes {
                idle_timeout: 4000,
                draining: true,
                draining_timeout: 45,
                cross_zone: true
            }
        );
        assert!(o.proxy_protocol);
        assert_eq!(
            o.health,
            HealthTuning {
                healthy: 3,
                unhealthy: 10,
                timeout: 4,
                interval: 30
            }
        );
        for (key, value) in [
            (ANNOTATION_DRAINING, "yes"),
            (ANNOTATION_DRAINING_TIMEOUT, "0"),
            (ANNOTATION_IDLE_TIMEOUT, "4001"),
            (ANNOTATION_CROSS_ZONE, "on"),
            (ANNOTATION_HC_HEALTHY, "1"),
            (ANNOTATION_HC_UNHEALTHY, "11"),
            (ANNOTATION_HC_TIMEOUT, "61"),
            (ANNOTATION_HC_INTERVAL, "4"),
            (ANNOTATION_HC_INTERVAL, "ten"),
            (ANNOTATION_TAGS, "aws:owner=me"),
            (ANNOTATION_PROXY_PROTOCOL, "true"),
        ] {
            let e = check_settings(&svc(json!({ key: value }), ports.clone())).unwrap_err();
            let m = hypercloud_cloudprovider::Chain(&e).to_string();
            assert!(m.contains(key) && m.contains(value), "{key}={value}: {m}");
        }
        let e = check_settings(&svc(
            json!({ANNOTATION_HC_TIMEOUT: "30", ANNOTATION_HC_INTERVAL: "30"}),
            ports.clone(),
        ))
        .unwrap_err();
        let m = hypercloud_cloudprovider::Chain(&e).to_string();
        assert!(m.contains(ANNOTATION_HC_TIMEOUT), "{m}");
        // Classic only: an NLB asking for one is refused by name.
        let e = check_settings(&svc(
            json!({ANNOTATION_TYPE: "nlb", ANNOTATION_IDLE_TIMEOUT: "30"}),
            ports,
        ))
        .unwrap_err();
        assert!(
            hypercloud_cloudprovider::Chain(&e)
                .to_string()
                .contains(&format!("annotation {ANNOTATION_IDLE_TIMEOUT} with aws-load-balancer-type: nlb is not supported")),
            "{e}"
        );
    }

    #[test]
    fn target_nodes_as_upstream_filter_target_nodes() {
        let node = |labels: serde_json::Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap()
        };
        let ports = json!({"ports": [{"port": 80, "nodePort": 30080}]});
        let picked = |annotation: Option<&str>, labels: serde_json::Value| {
            let a = annotation.map_or(json!({}), |v| json!({ANNOTATION_TARGET_NODE_LABELS: v}));
            target_nodes(&svc(a, ports.clone()), &[node(labels)])
                .unwrap()
                .len()
                == 1
        };
        // Upstream's cases (aws_loadbalancer_test.go TestFilterTargetNodes).
        assert!(picked(None, json!({"k1": "v1"})));
        assert!(picked(Some("k1=v1,k2=v2"), json!({"k1": "v1", "k2": "v2"})));
        assert!(picked(Some("k1,k2"), json!({"k1": "v1", "k2": "v2"})));
        assert!(!picked(Some("k1=v1,k2"), json!({"k1": "v1"})));
        assert!(!picked(Some("k3=v3"), json!({"k1": "v1", "k2": "v2"})));
        assert!(picked(
            Some(" k1= , k2 = v2 "),
            json!({"k1": "x", "k2": "v2"})
        ));
        assert!(!picked(Some("k1=v1"), json!({})));
        for (value, said) in [("ip", "is not supported"), ("pod", "is not `instance`")] {
            let e = check_settings(&svc(
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_NLB_TARGET_TYPE: value}),
                ports.clone(),
            ))
            .unwrap_err();
            let m = hypercloud_cloudprovider::Chain(&e).to_string();
            assert!(
                m.contains(ANNOTATION_NLB_TARGET_TYPE) && m.contains(said),
                "{m}"
            );
        }
        let e = check_settings(&svc(
            json!({ANNOTATION_TARGET_NODE_LABELS: "k1=v1,=v2"}),
            ports,
        ))
        .unwrap_err();
        let m = hypercloud_cloudprovider::Chain(&e).to_string();
        assert!(m.contains(ANNOTATION_TARGET_NODE_LABELS), "{m}");
    }

    #[test]
    fn health_check_target_as_upstream() {
        let c =
            |protocol: Option<&str>, port: Option<Option<i32>>, path: Option<&str>| CheckTarget {
                protocol: protocol.map(str::to_owned),
                port,
                path: path.map(str::to_owned),
            };
        assert_eq!(check_target(30080, None, &c(None, None, None)), "TCP:30080");
        assert_eq!(
            check_target(30080, Some(31000), &c(None, None, None)),
            "HTTP:31000/healthz"
        );
        assert_eq!(
            check_target(
                30080,
                None,
                &c(Some("HTTP"), Some(Some(10256)), Some("/readyz"))
            ),
            "HTTP:10256/readyz"
        );
        assert_eq!(
            check_target(30080, None, &c(Some("HTTPS"), None, None)),
            "HTTPS:30080/"
        );
        // traffic-port with externalTrafficPolicy: Local is the first node port (upstream).
        assert_eq!(
            check_target(30080, Some(31000), &c(None, Some(None), None)),
            "HTTP:30080/healthz"
        );
        assert_eq!(
            check_target(30080, Some(31000), &c(Some("TCP"), None, None)),
            "TCP:31000"
        );
        let ports = json!({"ports": [{"port": 80, "nodePort": 30080}]});
        for (annotations, key) in [
            (
                json!({ANNOTATION_HC_PROTOCOL: "udp"}),
                ANNOTATION_HC_PROTOCOL,
            ),
            (json!({ANNOTATION_HC_PORT: "0"}), ANNOTATION_HC_PORT),
            (json!({ANNOTATION_HC_PORT: "65536"}), ANNOTATION_HC_PORT),
            (json!({ANNOTATION_HC_PATH: "/x"}), ANNOTATION_HC_PATH),
            (
                json!({ANNOTATION_HC_PROTOCOL: "ssl", ANNOTATION_HC_PATH: "/x"}),
                ANNOTATION_HC_PATH,
            ),
            (
                json!({ANNOTATION_HC_PROTOCOL: "http", ANNOTATION_HC_PATH: "x"}),
                ANNOTATION_HC_PATH,
            ),
            (
                json!({ANNOTATION_HC_PROTOCOL: "http", ANNOTATION_HC_PATH: "/a b"}),
                ANNOTATION_HC_PATH,
            ),
        ] {
            let e = check_settings(&svc(annotations.clone(), ports.clone())).unwrap_err();
            let m = hypercloud_cloudprovider::Chain(&e).to_string();
            assert!(m.contains(key), "{annotations}: {m}");
        }
        let s = spec_of(&svc(
            json!({ANNOTATION_HC_PROTOCOL: "http", ANNOTATION_HC_PORT: "traffic-port", ANNOTATION_HC_PATH: "/ok"}),
            ports,
        ))
        .unwrap();
        assert_eq!(check_target(30080, None, &s.classic.check), "HTTP:30080/ok");
    }

    #[test]
    fn listeners_as_upstream_build_listener() {
        let ports = json!({"ports": [
            {"name": "HTTP", "port": 80, "nodePort": 30080},
            {"name": "https", "port": 443, "nodePort": 30443},
            {"name": "admin", "port": 8443, "nodePort": 30843},
        ]});
        let arn = "arn:aws:acm:us-east-1:123456789012:certificate/1";
        let listeners = |annotations: serde_json::Value| {
            let s = spec_of(&svc(annotations, ports.clone())).unwrap();
            s.ports
                .iter()
                .map(|p| {
                    let (a, b, c) = s.classic.tls.listener(p);
                    (p.port, a, b, c.is_some())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            listeners(json!({})),
            vec![
                (80, "TCP", "TCP", false),
                (443, "TCP", "TCP", false),
                (8443, "TCP", "TCP", false)
            ]
        );
        assert_eq!(
            listeners(json!({ANNOTATION_SSL_CERT: arn})),
            vec![
                (80, "SSL", "TCP", true),
                (443, "SSL", "TCP", true),
                (8443, "SSL", "TCP", true)
            ]
        );
        assert_eq!(
            listeners(
                json!({ANNOTATION_SSL_CERT: arn, ANNOTATION_SSL_PORTS: "https,8443", ANNOTATION_BACKEND_PROTOCOL: "http"})
            ),
            vec![
                (80, "HTTP", "HTTP", false),
                (443, "HTTPS", "HTTP", true),
                (8443, "HTTPS", "HTTP", true)
            ]
        );
        assert_eq!(
            listeners(
                json!({ANNOTATION_SSL_CERT: arn, ANNOTATION_SSL_PORTS: "http", ANNOTATION_BACKEND_PROTOCOL: "ssl"})
            )[0],
            (80, "SSL", "SSL", true)
        );
        for (a, m) in [
            (json!({ANNOTATION_BACKEND_PROTOCOL: "https"}), "needs"),
            (
                json!({ANNOTATION_BACKEND_PROTOCOL: "HTTP"}),
                "is not one of",
            ),
            (json!({ANNOTATION_SSL_PORTS: "*"}), "needs"),
            (
                json!({ANNOTATION_SSL_CERT: arn, ANNOTATION_SSL_PORTS: "443,9999"}),
                "\"9999\", no port",
            ),
            (
                json!({ANNOTATION_SSL_CERT: arn, ANNOTATION_TYPE: "nlb"}),
                "nlb is not supported",
            ),
        ] {
            let e = check_settings(&svc(a.clone(), ports.clone())).unwrap_err();
            let e = hypercloud_cloudprovider::Chain(&e).to_string();
            assert!(e.contains(m), "{a}: {e}");
        }
    }

    #[test]
    fn placement_as_upstream_and_bad_values_refused_by_name() {
        let ports = json!({"ports": [{"port": 80, "nodePort": 30080}]});
        let p = placement_of(&svc(json!({}), ports.clone())).unwrap();
        assert_eq!(p, Placement::default());
        let p = placement_of(&svc(
            json!({ANNOTATION_TYPE: "nlb", ANNOTATION_SUBNETS: " subnet-0b, public-a ,", ANNOTATION_EIP_ALLOCATIONS: "eipalloc-1,eipalloc-2"}),
            ports.clone(),
        ))
        .unwrap();
        assert_eq!(
            p.subnets,
            Some(vec!["subnet-0b".to_owned(), "public-a".to_owned()])
        );
        assert_eq!(p.eip_allocations, ["eipalloc-1", "eipalloc-2"]);
        let p = placement_of(&svc(
            json!({ANNOTATION_TYPE: "nlb", ANNOTATION_INTERNAL: "true", ANNOTATION_PRIVATE_IPV4: "10.0.1.10, 10.0.2.10"}),
            ports.clone(),
        ))
        .unwrap();
        assert_eq!(
            p.private_ips,
            [
                std::net::Ipv4Addr::new(10, 0, 1, 10),
                std::net::Ipv4Addr::new(10, 0, 2, 10)
            ]
        );
        for (a, m) in [
            (json!({ANNOTATION_SUBNETS: " , "}), "names no subnet"),
            (json!({ANNOTATION_SUBNETS: "subnet-a,subnet-a"}), "names subnet-a twice"),
            (json!({ANNOTATION_SUBNETS: "subnet-!"}), "neither a subnet ID"),
            (
                json!({ANNOTATION_EIP_ALLOCATIONS: "eipalloc-1"}),
                "eip-allocations without aws-load-balancer-type: nlb is not supported",
            ),
            (
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_INTERNAL: "true", ANNOTATION_EIP_ALLOCATIONS: "eipalloc-1"}),
                "eip-allocations with service.beta.kubernetes.io/aws-load-balancer-internal is not supported",
            ),
            (
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_EIP_ALLOCATIONS: "1.2.3.4"}),
                "not a Elastic IP allocation ID",
            ),
            (
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_SUBNETS: "subnet-a,subnet-b", ANNOTATION_EIP_ALLOCATIONS: "eipalloc-1"}),
                "eip-allocations has 1 entries for 2 subnets",
            ),
            (
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_PRIVATE_IPV4: "10.0.0.1"}),
                "private-ipv4-addresses without service.beta.kubernetes.io/aws-load-balancer-internal is not supported",
            ),
            (
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_INTERNAL: "true", ANNOTATION_PRIVATE_IPV4: "10.0.0.256"}),
                "not an IPv4 address",
            ),
            (
                json!({ANNOTATION_PRIVATE_IPV4: "10.0.0.1", ANNOTATION_INTERNAL: "true"}),
                "private-ipv4-addresses without aws-load-balancer-type: nlb is not supported",
            ),
            (
                json!({ANNOTATION_TYPE: "nlb", ANNOTATION_SECURITY_GROUPS: "sg-1"}),
                "security-groups with aws-load-balancer-type: nlb is not supported",
            ),
            (json!({ANNOTATION_SECURITY_GROUPS: "sg-1,web"}), "\"web\", which is not a security group ID"),
            (json!({ANNOTATION_EXTRA_SECURITY_GROUPS: "sg-1,sg-1"}), "names sg-1 twice"),
        ] {
            let e = check_settings(&svc(a.clone(), ports.clone())).unwrap_err();
            let e = hypercloud_cloudprovider::Chain(&e).to_string();
            assert!(e.contains(m), "{a}: {e}");
        }
    }

    #[test]
    fn security_groups_as_upstream() {
        let ports = json!({"ports": [{"port": 80, "nodePort": 30080}]});
        let o = classic_options(&svc(json!({}), ports.clone())).unwrap();
        assert_eq!(o.groups(Some("sg-own")), ["sg-own"]);
        let o = classic_options(&svc(
            json!({ANNOTATION_EXTRA_SECURITY_GROUPS: "sg-x, sg-own,"}),
            ports.clone(),
        ))
        .unwrap();
        assert_eq!(o.groups(Some("sg-own")), ["sg-own", "sg-x"]);
        let o = classic_options(&svc(
            json!({ANNOTATION_SECURITY_GROUPS: "sg-b,sg-a", ANNOTATION_EXTRA_SECURITY_GROUPS: "sg-x,sg-a"}),
            ports.clone(),
        ))
        .unwrap();
        assert_eq!(o.groups(None), ["sg-b", "sg-a", "sg-x"]);
        // Empty lists are no groups (upstream's getSGListFromAnnotation).
        let o = classic_options(&svc(
            json!({ANNOTATION_SECURITY_GROUPS: " , ", ANNOTATION_EXTRA_SECURITY_GROUPS: ""}),
            ports,
        ))
        .unwrap();
        assert_eq!(o.groups(Some("sg-own")), ["sg-own"]);
    }

    /// What CreateLoadBalancer (and SetSubnets) send as SubnetMappings.
    #[test]
    fn subnet_mappings_pair_addresses_with_subnets_in_order() {
        let subnets = ["subnet-b".to_owned(), "subnet-a".to_owned()];
        let cidrs = BTreeMap::from([
            ("subnet-a".to_owned(), "10.0.1.0/24".to_owned()),
            ("subnet-b".to_owned(), "10.0.2.0/24".to_owned()),
        ]);
        let plain = Placement::default().mappings(&subnets, &cidrs).unwrap();
        assert_eq!(
            plain,
            [
                elbv2::SubnetMapping::builder()
                    .subnet_id("subnet-b")
                    .build(),
                elbv2::SubnetMapping::builder()
                    .subnet_id("subnet-a")
                    .build()
            ]
        );
        let eips = Placement {
            eip_allocations: vec!["eipalloc-1".into(), "eipalloc-2".into()],
            ..Placement::default()
        };
        assert_eq!(
            eips.mappings(&subnets, &cidrs).unwrap(),
            [
                elbv2::SubnetMapping::builder()
                    .subnet_id("subnet-b")
                    .allocation_id("eipalloc-1")
                    .build(),
                elbv2::SubnetMapping::builder()
                    .subnet_id("subnet-a")
                    .allocation_id("eipalloc-2")
                    .build()
            ]
        );
        let e = eips.mappings(&subnets[..1], &cidrs).unwrap_err();
        assert!(
            hypercloud_cloudprovider::Chain(&e)
                .to_string()
                .contains("eip-allocations has 2 entries for 1 subnets"),
            "{e}"
        );
        let ips = Placement {
            private_ips: vec![
                std::net::Ipv4Addr::new(10, 0, 2, 7),
                std::net::Ipv4Addr::new(10, 0, 1, 7),
            ],
            ..Placement::default()
        };
        let m = ips.mappings(&subnets, &cidrs).unwrap();
        assert_eq!(
            m.iter()
                .map(|m| (m.subnet_id(), m.private_ipv4_address(), m.allocation_id()))
                .collect::<Vec<_>>(),
            [
                (Some("subnet-b"), Some("10.0.2.7"), None),
                (Some("subnet-a"), Some("10.0.1.7"), None)
            ]
        );
        let swapped = Placement {
            private_ips: vec![
                std::net::Ipv4Addr::new(10, 0, 1, 7),
                std::net::Ipv4Addr::new(10, 0, 2, 7),
            ],
            ..Placement::default()
        };
        let e = swapped.mappings(&subnets, &cidrs).unwrap_err();
        assert!(
            hypercloud_cloudprovider::Chain(&e)
                .to_string()
                .contains("10.0.1.7 is not inside subnet subnet-b (10.0.2.0/24)"),
            "{e}"
        );
    }

    #[test]
    fn cidr_membership_and_reported_addresses() {
        let ip = std::net::Ipv4Addr::new(10, 0, 1, 255);
        assert!(ipv4_in_cidr(ip, "10.0.1.0/24"));
        assert!(ipv4_in_cidr(ip, "0.0.0.0/0"));
        assert!(!ipv4_in_cidr(ip, "10.0.2.0/24"));
        assert!(!ipv4_in_cidr(ip, "10.0.1.0/33"));
        assert!(!ipv4_in_cidr(ip, "nonsense"));
        let want = [elbv2::SubnetMapping::builder()
            .subnet_id("subnet-a")
            .allocation_id("eipalloc-1")
            .build()];
        let lb = |alloc: Option<&str>| {
            elbv2::LoadBalancer::builder()
                .availability_zones(
                    elbv2::AvailabilityZone::builder()
                        .subnet_id("subnet-a")
                        .set_load_balancer_addresses(alloc.map(|a| {
                            vec![elbv2::LoadBalancerAddress::builder()
                                .allocation_id(a)
                                .build()]
                        }))
                        .build(),
                )
                .build()
        };
        assert!(!addresses_differ(&lb(None), &want), "moto reports none");
        assert!(!addresses_differ(&lb(Some("eipalloc-1")), &want));
        assert!(addresses_differ(&lb(Some("eipalloc-9")), &want));
    }

    #[test]
    fn lb_settings_doc() {
        let doc = hypercloud_testenv::repo_root().join("docs/guide/aws.md");
        lb_settings::verify_doc(&doc, SERVICE_SETTINGS).unwrap();
    }
}
