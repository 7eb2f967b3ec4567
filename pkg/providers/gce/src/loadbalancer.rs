//! LoadBalancer, as the legacy provider's external (network, target-pool) load balancer
//! (`gce_loadbalancer_external.go`): for a Service named `a<uid>` (upstream's default name), a
//! regional forwarding rule of that name (the Service's `loadBalancerIP` or an ephemeral
//! address; `portRange` from the lowest to the highest Service port; TCP or UDP) targeting a
//! target pool of that name whose instances are the nodes' instances, an HTTP health check
//! (the Service's `healthCheckNodePort` at `/healthz` with `externalTrafficPolicy: Local`, else
//! the shared `k8s-<cluster>-node` check of kube-proxy's port 10256), and a firewall
//! `k8s-fw-<name>` letting `loadBalancerSourceRanges` (default `0.0.0.0/0`) reach the ports on
//! the nodes' tags. Ensuring converges each part; deleting removes them all. Packets reach the
//! instances at the Service port itself (GCE keeps the destination; kube-proxy catches it), not
//! at the NodePort. `cloud.google.com/network-tier` (`Standard`, `Premium`) sets the rule's
//! tier.
//!
//! With `networking.gke.io/load-balancer-type: Internal` (or the older
//! `cloud.google.com/load-balancer-type`), an internal load balancer as the legacy provider's
//! (`gce_loadbalancer_internal.go`): an unmanaged instance group `k8s-ig--<cluster>` per zone
//! holding that zone's nodes, a health check (the shared `k8s-<cluster>-node` on port 10256,
//! or the Service's own on its health-check node port with `externalTrafficPolicy: Local`), a
//! regional backend service `a<uid>` (`INTERNAL`, TCP or UDP, the session affinity) sending to
//! the groups, the same firewall, and a forwarding rule `a<uid>` (`INTERNAL`, the Service's
//! ports, the backend service, the subnetwork of `networking.gke.io/internal-load-balancer-subnet`
//! or `[global] subnetwork-name`, `allowGlobalAccess` from
//! `networking.gke.io/internal-load-balancer-allow-global-access`). Switching a Service between
//! internal and external removes the other kind first, as upstream. With
//! `load-balancer-backend-share: "true"` the backend service is the cluster's shared one
//! ([`backend_service_name`]), deleted with the last rule sending to it. Every other upstream
//! annotation this provider does not implement is refused by name ([`SERVICE_SETTINGS`]).

use std::collections::BTreeSet;

use async_trait::async_trait;
use hypercloud_cloudprovider::lb_webhook::{admit_service_lb, SERVICE_LB_ANNOTATIONS};
use hypercloud_cloudprovider::{
    default_load_balancer_name, lb_settings, LbSetting, LoadBalancer, Setting, WebhookSpec,
    Webhooks,
};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;
use serde_json::{json, Value};

use crate::client::Compute;
use crate::error::{Error, Result};
use crate::instances::instance_name;
use crate::Gce;

/// The Service annotation read when `spec.loadBalancerSourceRanges` is empty.
const ANNOTATION_SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
/// The load balancer type (`Internal`), read before the older [`ANNOTATION_TYPE_OLD`].
const ANNOTATION_TYPE: &str = "networking.gke.io/load-balancer-type";
/// The load balancer type's older name.
const ANNOTATION_TYPE_OLD: &str = "cloud.google.com/load-balancer-type";
/// An internal load balancer's subnetwork (a name in the region).
const ANNOTATION_SUBNET: &str = "networking.gke.io/internal-load-balancer-subnet";
/// Whether an internal load balancer is reachable from every region (`true`, `false`).
const ANNOTATION_GLOBAL_ACCESS: &str =
    "networking.gke.io/internal-load-balancer-allow-global-access";
/// `"true"`: the internal load balancer's backend service is shared with the cluster's other
/// internal Services of the same protocol and session affinity (upstream's
/// `ServiceAnnotationILBBackendShare`), read before its older name
/// [`ANNOTATION_BACKEND_SHARE_OLD`].
const ANNOTATION_BACKEND_SHARE: &str = "alpha.cloud.google.com/load-balancer-backend-share";
/// The older name of [`ANNOTATION_BACKEND_SHARE`] (upstream reads both; either `"true"` shares).
const ANNOTATION_BACKEND_SHARE_OLD: &str = "cloud.google.com/load-balancer-backend-share";
/// The network tier of an external load balancer (`Standard`, `Premium`).
const ANNOTATION_NETWORK_TIER: &str = "cloud.google.com/network-tier";

/// Every annotation of the legacy provider (v1.20 `gce_annotations.go`), the source-range
/// annotation, and the Service fields a load balancer may be asked for: what this provider
/// does with each ([`hypercloud_cloudprovider::lb_settings`]; the check, the guide's table in
/// docs/guide/gce.md and the tests read it).
pub const SERVICE_SETTINGS: &[LbSetting] = &[
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SOURCE_RANGES), "the firewall's source ranges when `spec.loadBalancerSourceRanges` is empty"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_TYPE), "`Internal`: an internal load balancer (instance groups, health check, backend service, `INTERNAL` forwarding rule); any other value is refused"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_TYPE_OLD), "the older name of `networking.gke.io/load-balancer-type`, read when that one is absent"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_BACKEND_SHARE), "`true`: the internal load balancer's backend service is the cluster's shared `k8s-<cluster>-internal-<protocol>-nmv1-<hash of the affinity>`, as upstream's; refused on an external load balancer and with `externalTrafficPolicy: Local`"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_BACKEND_SHARE_OLD), "the older name of `alpha.cloud.google.com/load-balancer-backend-share`; either `true` shares"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_GLOBAL_ACCESS), "`true`: the internal forwarding rule's `allowGlobalAccess` (refused on an external load balancer)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SUBNET), "the internal forwarding rule's subnetwork, in the region (refused on an external load balancer)"),
    LbSetting::implemented(Setting::Annotation(ANNOTATION_NETWORK_TIER), "`Standard` or `Premium`: the external forwarding rule's `networkTier` (a reserved `loadBalancerIP` must be of that tier); an internal rule is `Premium` only"),
    LbSetting::refused(Setting::Annotation("cloud.google.com/log-firewall-rules"), "firewall rule logging is not implemented"),
    LbSetting::implemented(Setting::LoadBalancerClass, "the service controller leaves the Service to the class's controller (upstream)"),
    LbSetting::implemented(Setting::ExternalTrafficPolicyLocal, "the Service's own HTTP health check on the health-check node port"),
    LbSetting::implemented(Setting::SessionAffinityClientIp, "the target pool's (internal: the backend service's) `sessionAffinity: CLIENT_IP`"),
    LbSetting::refused(Setting::IpFamilyIpv6, "forwarding rules are IPv4"),
    LbSetting::implemented(Setting::NoNodePorts, "packets reach the instances at the Service port, not at a node port"),
    LbSetting::implemented(Setting::LoadBalancerIp, "the forwarding rule's address"),
];

/// kube-proxy's health check port and path (the shared node health check).
const NODE_HEALTH_PORT: u16 = 10256;

/// What a Service asks for.
struct Spec {
    name: String,
    service: String,
    protocol: String,
    ports: Vec<u16>,
    ip: Option<String>,
    source_ranges: Vec<String>,
    /// `(name, port, shared)`.
    health_check: (String, u16, bool),
    /// The internal load balancer's backend service: the Service's own (`name`) or, with
    /// `load-balancer-backend-share`, the cluster's shared one ([`backend_service_name`]).
    backend_service: String,
    affinity: &'static str,
    /// The forwarding rule's `networkTier` (`PREMIUM` for internal ones).
    tier: &'static str,
    /// Set for an internal load balancer.
    internal: Option<Internal>,
}

/// What an internal load balancer is asked for besides what every one is.
#[derive(Debug, Clone, PartialEq)]
struct Internal {
    /// The subnetwork's name (the annotation's, else the config's).
    subnet: Option<String>,
    global_access: bool,
}

/// The value of the annotation `key`, if the Service has it.
fn annotation<'a>(svc: &'a Service, key: &str) -> Option<&'a str> {
    svc.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The internal load balancer the Service asks for, if it asks for one (upstream's
/// `GetLoadBalancerAnnotationType`, `...AllowGlobalAccess`, `...Subnet`); the ILB-only
/// annotations on an external load balancer are refused, as they would change nothing.
fn internal_of(
    svc: &Service,
    service: &str,
    default_subnet: Option<&str>,
) -> Result<Option<Internal>> {
    let bad = |annotation, message: String| Error::ServiceAnnotation {
        service: service.to_owned(),
        annotation,
        message,
    };
    let kind = match annotation(svc, ANNOTATION_TYPE) {
        Some(v) => Some((ANNOTATION_TYPE, v)),
        None => annotation(svc, ANNOTATION_TYPE_OLD).map(|v| (ANNOTATION_TYPE_OLD, v)),
    };
    let internal = match kind {
        None => false,
        // Upstream also takes the lowercase spelling.
        Some((_, "Internal" | "internal")) => true,
        Some((name, other)) => {
            return Err(bad(
                name,
                format!(
                    "`{}` is not a load balancer type (`Internal`)",
                    other.escape_default()
                ),
            ))
        }
    };
    let subnet = annotation(svc, ANNOTATION_SUBNET);
    let global = annotation(svc, ANNOTATION_GLOBAL_ACCESS);
    if !internal {
        for (name, given) in [
            (ANNOTATION_SUBNET, subnet),
            (ANNOTATION_GLOBAL_ACCESS, global),
        ] {
            if given.is_some() {
                return Err(bad(
                    name,
                    "it configures internal load balancers, and this one is external".into(),
                ));
            }
        }
        return Ok(None);
    }
    let global_access = match global {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(bad(
                ANNOTATION_GLOBAL_ACCESS,
                format!("`{}` is not `true` or `false`", other.escape_default()),
            ))
        }
    };
    if let Some(s) = subnet {
        let name_ok = !s.is_empty()
            && s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !name_ok {
            return Err(bad(
                ANNOTATION_SUBNET,
                format!("`{}` is not a subnetwork name", s.escape_default()),
            ));
        }
    }
    Ok(Some(Internal {
        subnet: subnet.or(default_subnet).map(str::to_owned),
        global_access,
    }))
}

/// The forwarding rule's network tier (upstream's `GetServiceNetworkTier`: `Standard` or
/// `Premium`, the default); an internal rule is `PREMIUM` only.
fn tier_of(svc: &Service, service: &str, internal: bool) -> Result<&'static str> {
    let tier = match annotation(svc, ANNOTATION_NETWORK_TIER) {
        None | Some("Premium") => "PREMIUM",
        Some("Standard") if !internal => "STANDARD",
        Some("Standard") => {
            return Err(Error::ServiceAnnotation {
                service: service.to_owned(),
                annotation: ANNOTATION_NETWORK_TIER,
                message: "an internal load balancer is `Premium` only".into(),
            })
        }
        Some(other) => {
            return Err(Error::ServiceAnnotation {
                service: service.to_owned(),
                annotation: ANNOTATION_NETWORK_TIER,
                message: format!(
                    "unsupported network tier `{}` (`Standard`, `Premium`)",
                    other.escape_default()
                ),
            })
        }
    };
    Ok(tier)
}

/// Whether the Service asks for a shared backend service (upstream's
/// `GetLoadBalancerAnnotationBackendShare`, either name `"true"`). Upstream takes any other
/// value as `false` and silently gives a `Local` Service its own; here a value other than
/// `true`/`false` is refused by name, as is sharing an external or a `Local` Service's.
fn backend_share_of(svc: &Service, service: &str, internal: bool, local: bool) -> Result<bool> {
    let mut share = false;
    for key in [ANNOTATION_BACKEND_SHARE, ANNOTATION_BACKEND_SHARE_OLD] {
        let bad = |message: String| Error::ServiceAnnotation {
            service: service.to_owned(),
            annotation: key,
            message,
        };
        match annotation(svc, key) {
            None | Some("false") => {}
            Some("true") if !internal => {
                return Err(bad(
                    "a shared backend service is an internal load balancer's; this Service's is external".into(),
                ))
            }
            Some("true") if local => {
                return Err(bad(
                    "a Service with `externalTrafficPolicy: Local` has its own backend service and health check (upstream shares only `Cluster` ones)".into(),
                ))
            }
            Some("true") => share = true,
            Some(other) => {
                return Err(bad(format!(
                    "`{}` is not `true` or `false`",
                    other.escape_default()
                )))
            }
        }
    }
    Ok(share)
}

/// An internal load balancer's backend service name (upstream's `makeBackendServiceName`):
/// the load balancer's own `name`, or when shared `k8s-<cluster>-internal-<protocol>-nmv1-`
/// and the first 16 hex digits of the SHA-1 of the session affinity (`None`, `ClientIP`), so
/// Services asking the same share one.
fn backend_service_name(
    cluster: &str,
    name: &str,
    shared: bool,
    protocol: &str,
    affinity: &str,
) -> String {
    if !shared {
        return name.to_owned();
    }
    use sha1::Digest;
    let digest = sha1::Sha1::digest(affinity.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "k8s-{cluster}-internal-{}-nmv1-{}",
        protocol.to_lowercase(),
        &hex[..16]
    )
}

/// The last segment of a resource link (`.../backendServices/x` → `x`).
fn link_name(link: &str) -> &str {
    link.rsplit('/').next().unwrap_or(link)
}

fn spec_of(
    cluster: &str,
    default_subnet: Option<&str>,
    svc: &Service,
) -> hypercloud_cloudprovider::Result<Spec> {
    let name = default_load_balancer_name(svc);
    let ns = svc.metadata.namespace.as_deref().unwrap_or("default");
    let svc_name = svc.metadata.name.as_deref().unwrap_or_default();
    lb_settings::check(crate::PROVIDER_NAME, SERVICE_SETTINGS, svc)?;
    let service = format!("{ns}/{svc_name}");
    let internal = internal_of(svc, &service, default_subnet)?;
    let tier = tier_of(svc, &service, internal.is_some())?;
    let spec = svc.spec.clone().unwrap_or_default();
    let mut protocols = BTreeSet::new();
    let mut ports = Vec::new();
    for p in spec.ports.unwrap_or_default() {
        protocols.insert(p.protocol.unwrap_or_else(|| "TCP".into()));
        ports.push(u16::try_from(p.port).map_err(|_| {
            Error::Missing(format!(
                "service {ns}/{svc_name}: port {} is out of range",
                p.port
            ))
        })?);
    }
    if ports.is_empty() {
        return Err(Error::Missing(format!("service {ns}/{svc_name} has no ports")).into());
    }
    if protocols.len() > 1 {
        return Err(Error::Missing(format!(
            "service {ns}/{svc_name}: a GCE network load balancer takes one protocol, not {}",
            protocols.into_iter().collect::<Vec<_>>().join(" and ")
        ))
        .into());
    }
    let protocol = protocols.into_iter().next().unwrap_or_else(|| "TCP".into());
    if protocol != "TCP" && protocol != "UDP" {
        return Err(Error::Missing(format!(
            "service {ns}/{svc_name}: protocol {protocol} is not supported (TCP or UDP)"
        ))
        .into());
    }
    let local = spec.external_traffic_policy.as_deref() == Some("Local");
    let share = backend_share_of(svc, &service, internal.is_some(), local)?;
    let backend_service = backend_service_name(
        cluster,
        &name,
        share,
        &protocol,
        spec.session_affinity.as_deref().unwrap_or("None"),
    );
    let health_check = match (local, spec.health_check_node_port) {
        (true, Some(p)) => (
            name.clone(),
            u16::try_from(p).unwrap_or(NODE_HEALTH_PORT),
            false,
        ),
        _ => (format!("k8s-{cluster}-node"), NODE_HEALTH_PORT, true),
    };
    Ok(Spec {
        service,
        tier,
        internal,
        protocol,
        ports,
        ip: spec.load_balancer_ip.filter(|s| !s.is_empty()),
        source_ranges: spec
            .load_balancer_source_ranges
            .filter(|r| !r.is_empty())
            .or_else(|| {
                let annotated: Vec<String> = svc
                    .metadata
                    .annotations
                    .as_ref()?
                    .get(ANNOTATION_SOURCE_RANGES)?
                    .split(',')
                    .map(|r| r.trim().to_owned())
                    .filter(|r| !r.is_empty())
                    .collect();
                (!annotated.is_empty()).then_some(annotated)
            })
            .unwrap_or_else(|| vec!["0.0.0.0/0".into()]),
        health_check,
        backend_service,
        affinity: if spec.session_affinity.as_deref() == Some("ClientIP") {
            "CLIENT_IP"
        } else {
            "NONE"
        },
        name,
    })
}

/// Gets a resource; `None` when it does not exist.
async fn get_opt(c: &Compute, rest: &str, op: &str) -> Result<Option<Value>> {
    match c.get(&c.path(rest), op).await {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Deletes a resource; gone already is fine.
async fn delete_opt(c: &Compute, rest: &str, op: &str) -> Result<()> {
    match c
        .mutate(reqwest::Method::DELETE, &c.path(rest), None, op)
        .await
    {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl Gce {
    /// The instance links of the nodes (nodes without an instance are left out, logged).
    /// The instance links and network tags of the nodes, batched as upstream's
    /// `getInstancesByNames`: one filtered list per managed zone (`name eq (a|b|...)`), not one
    /// call per node. Nodes without an instance are left out (logged).
    async fn node_instances(&self, nodes: &[Node]) -> Result<(Vec<String>, BTreeSet<String>)> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let mut wanted: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .map(|n| instance_name(n).to_owned())
            // GCE names are [a-z0-9-]; anything else is no instance name (and no regex).
            .filter(|n| {
                n.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
            })
            .collect();
        let mut links = Vec::new();
        let mut tags = BTreeSet::new();
        for zone in &r.managed_zones {
            if wanted.is_empty() {
                break;
            }
            let filter = format!(
                "name eq ({})",
                wanted.iter().cloned().collect::<Vec<_>>().join("|")
            );
            let found = c
                .list(
                    &c.path(&format!("zones/{zone}/instances")),
                    &filter,
                    "instances.list",
                )
                .await?;
            for i in found {
                if let Some(name) = i["name"].as_str() {
                    wanted.remove(name);
                }
                if let Some(l) = i["selfLink"].as_str() {
                    links.push(l.to_owned());
                }
                for t in i["tags"]["items"].as_array().into_iter().flatten() {
                    if let Some(t) = t.as_str() {
                        tags.insert(t.to_owned());
                    }
                }
            }
        }
        for missing in &wanted {
            tracing::warn!(node = %missing, "no GCE instance for the node; left out of the target pool");
        }
        links.sort();
        Ok((links, tags))
    }

    async fn ensure(
        &self,
        cluster: &str,
        svc: &Service,
        nodes: &[Node],
    ) -> hypercloud_cloudprovider::Result<LoadBalancerStatus> {
        let spec = spec_of(cluster, self.config.global.subnetwork_name.as_deref(), svc)?;
        let r = self.resolved().await?;
        let c = &r.compute;
        let rule_rest = format!("regions/{}/forwardingRules/{}", r.region, spec.name);
        let existing = get_opt(c, &rule_rest, "forwardingRules.get").await?;
        // A Service switched between internal and external: the other kind goes first (it
        // holds the forwarding rule's name), as upstream's EnsureLoadBalancer.
        let wanted = if spec.internal.is_some() {
            "INTERNAL"
        } else {
            "EXTERNAL"
        };
        let existing = match existing {
            Some(fr) if scheme_of(&fr) != wanted => {
                self.delete_kind(cluster, &spec.name, internal_backend(&fr))
                    .await?;
                None
            }
            other => other,
        };
        let (instances, instance_tags) = self.node_instances(nodes).await?;
        let rule = match &spec.internal {
            Some(internal) => {
                self.ensure_internal(cluster, &spec, internal, &instances, existing)
                    .await?
            }
            None => self.ensure_external(&spec, &instances, existing).await?,
        };
        let ip = rule["IPAddress"].as_str().unwrap_or_default().to_owned();
        self.ensure_firewall(&spec, &ip, &instance_tags).await?;
        Ok(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip),
                ..Default::default()
            }]),
        })
    }

    /// The external load balancer's health check, target pool and forwarding rule (made
    /// again when its address, protocol, ports or tier changed); the rule.
    async fn ensure_external(
        &self,
        spec: &Spec,
        instances: &[String],
        existing: Option<Value>,
    ) -> Result<Value> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let region = &r.region;
        // The health check.
        let (hc_name, hc_port, _) = &spec.health_check;
        let hc_body = json!({"name": hc_name, "port": hc_port, "requestPath": "/healthz",
            "checkIntervalSec": 8, "timeoutSec": 1, "healthyThreshold": 1, "unhealthyThreshold": 3,
            "description": json!({"kubernetes.io/service-name": spec.service}).to_string()});
        match get_opt(
            c,
            &format!("global/httpHealthChecks/{hc_name}"),
            "httpHealthChecks.get",
        )
        .await?
        {
            Some(hc) if hc["port"] == json!(hc_port) => {}
            Some(_) => {
                // A changed port: GCE's update is a PUT; the local dialect has none, so the
                // check is made again once nothing uses it (next pass).
                tracing::info!(health_check = %hc_name, "health check port changed");
            }
            None => {
                c.mutate(
                    reqwest::Method::POST,
                    &c.path("global/httpHealthChecks"),
                    Some(&hc_body),
                    "httpHealthChecks.insert",
                )
                .await?;
            }
        }
        let hc_link = c.url(&c.path(&format!("global/httpHealthChecks/{hc_name}")));

        // The target pool and its instances.
        let pool_rest = format!("regions/{region}/targetPools/{}", spec.name);
        let pool_link = c.url(&c.path(&pool_rest));
        match get_opt(c, &pool_rest, "targetPools.get").await? {
            None => {
                let body = json!({"name": spec.name, "instances": instances, "healthChecks": [hc_link],
                    "sessionAffinity": spec.affinity,
                    "description": json!({"kubernetes.io/service-name": spec.service}).to_string()});
                c.mutate(
                    reqwest::Method::POST,
                    &c.path(&format!("regions/{region}/targetPools")),
                    Some(&body),
                    "targetPools.insert",
                )
                .await?;
            }
            Some(pool) => {
                let have: BTreeSet<String> = pool["instances"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect();
                let want: BTreeSet<String> = instances.iter().cloned().collect();
                let add: Vec<Value> = want
                    .difference(&have)
                    .map(|i| json!({"instance": i}))
                    .collect();
                let remove: Vec<Value> = have
                    .difference(&want)
                    .map(|i| json!({"instance": i}))
                    .collect();
                if !add.is_empty() {
                    c.mutate(
                        reqwest::Method::POST,
                        &c.path(&format!("{pool_rest}/addInstance")),
                        Some(&json!({"instances": add})),
                        "targetPools.addInstance",
                    )
                    .await?;
                }
                if !remove.is_empty() {
                    c.mutate(
                        reqwest::Method::POST,
                        &c.path(&format!("{pool_rest}/removeInstance")),
                        Some(&json!({"instances": remove})),
                        "targetPools.removeInstance",
                    )
                    .await?;
                }
            }
        }

        // The forwarding rule: made again when its address, protocol or ports changed.
        let lo = spec.ports.iter().min().copied().unwrap_or(0);
        let hi = spec.ports.iter().max().copied().unwrap_or(0);
        let port_range = format!("{lo}-{hi}");
        let rule_rest = format!("regions/{region}/forwardingRules/{}", spec.name);
        let current = existing.filter(|fr| {
            fr["portRange"] == port_range.as_str()
                && fr["IPProtocol"] == spec.protocol.as_str()
                && fr["networkTier"].as_str().unwrap_or("PREMIUM") == spec.tier
                && spec.ip.as_deref().is_none_or(|ip| fr["IPAddress"] == ip)
        });
        let rule = match current {
            Some(fr) => fr,
            None => {
                delete_opt(c, &rule_rest, "forwardingRules.delete").await?;
                let mut body = json!({"name": spec.name, "IPProtocol": spec.protocol, "portRange": port_range,
                    "target": pool_link, "loadBalancingScheme": "EXTERNAL", "networkTier": spec.tier,
                    "description": json!({"kubernetes.io/service-name": spec.service}).to_string()});
                if let Some(ip) = &spec.ip {
                    body["IPAddress"] = json!(ip);
                }
                c.mutate(
                    reqwest::Method::POST,
                    &c.path(&format!("regions/{region}/forwardingRules")),
                    Some(&body),
                    "forwardingRules.insert",
                )
                .await?;
                c.get(&c.path(&rule_rest), "forwardingRules.get").await?
            }
        };
        Ok(rule)
    }

    /// The firewall: the Service's ports from the source ranges, on the nodes' tags.
    async fn ensure_firewall(
        &self,
        spec: &Spec,
        ip: &str,
        instance_tags: &BTreeSet<String>,
    ) -> Result<()> {
        let r = self.resolved().await?;
        let c = &r.compute;
        // The firewall: the ports from the source ranges, on the nodes' tags.
        let fw_name = format!("k8s-fw-{}", spec.name);
        let target_tags: Vec<String> = if self.config.global.node_tags.is_empty() {
            instance_tags.iter().cloned().collect()
        } else {
            self.config.global.node_tags.clone()
        };
        let ports: Vec<String> = spec.ports.iter().map(u16::to_string).collect();
        let fw_body = json!({"name": fw_name, "network": c.url(&c.path(&format!("global/networks/{}", r.network))),
            "sourceRanges": spec.source_ranges, "targetTags": target_tags,
            "allowed": [{"IPProtocol": spec.protocol.to_ascii_lowercase(), "ports": ports}],
            "description": json!({"kubernetes.io/service-name": spec.service, "kubernetes.io/service-ip": ip}).to_string()});
        let fw_rest = format!("global/firewalls/{fw_name}");
        let same = get_opt(c, &fw_rest, "firewalls.get")
            .await?
            .is_some_and(|fw| {
                fw["sourceRanges"] == fw_body["sourceRanges"]
                    && fw["allowed"] == fw_body["allowed"]
                    && fw.get("targetTags").unwrap_or(&json!([])) == &fw_body["targetTags"]
            });
        if !same {
            delete_opt(c, &fw_rest, "firewalls.delete").await?;
            c.mutate(
                reqwest::Method::POST,
                &c.path("global/firewalls"),
                Some(&fw_body),
                "firewalls.insert",
            )
            .await?;
        }
        Ok(())
    }

    /// The internal load balancer's instance groups, health check, backend service and
    /// forwarding rule (made again when its address, protocol, ports, backend service,
    /// subnetwork or global access changed); the rule.
    async fn ensure_internal(
        &self,
        cluster: &str,
        spec: &Spec,
        internal: &Internal,
        instances: &[String],
        existing: Option<Value>,
    ) -> Result<Value> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let region = &r.region;
        if spec.ports.len() > MAX_INTERNAL_PORTS {
            return Err(Error::Missing(format!(
                "service {}: an internal load balancer forwards at most {MAX_INTERNAL_PORTS} ports, not {}",
                spec.service,
                spec.ports.len()
            )));
        }
        let description = json!({"kubernetes.io/service-name": spec.service}).to_string();
        let groups = self.ensure_instance_groups(cluster, instances).await?;

        // The health check (HTTP, as upstream's internal one).
        let (hc_name, hc_port, shared) = &spec.health_check;
        let hc_rest = format!("global/healthChecks/{hc_name}");
        let hc_body = json!({"name": hc_name, "type": "HTTP",
            "httpHealthCheck": {"port": hc_port, "requestPath": "/healthz"},
            "checkIntervalSec": 8, "timeoutSec": 1, "healthyThreshold": 1,
            "unhealthyThreshold": if *shared { 3 } else { 2 }, "description": description});
        match get_opt(c, &hc_rest, "healthChecks.get").await? {
            Some(hc) if hc["httpHealthCheck"]["port"] == json!(hc_port) => {}
            Some(_) => {
                c.mutate(
                    reqwest::Method::PUT,
                    &c.path(&hc_rest),
                    Some(&hc_body),
                    "healthChecks.update",
                )
                .await?
            }
            None => {
                c.mutate(
                    reqwest::Method::POST,
                    &c.path("global/healthChecks"),
                    Some(&hc_body),
                    "healthChecks.insert",
                )
                .await?
            }
        }
        let hc_link = c.url(&c.path(&hc_rest));

        // The backend service.
        let shared = spec.backend_service != spec.name;
        let bs_rest = format!("regions/{region}/backendServices/{}", spec.backend_service);
        let bs_link = c.url(&c.path(&bs_rest));
        let backends: Vec<Value> = groups
            .iter()
            .map(|g| json!({"group": g, "balancingMode": "CONNECTION"}))
            .collect();
        // A shared backend service is no one Service's (upstream's empty description).
        let bs_description = if shared {
            String::new()
        } else {
            description.clone()
        };
        let bs_body = json!({"name": spec.backend_service, "loadBalancingScheme": "INTERNAL",
            "protocol": spec.protocol, "sessionAffinity": spec.affinity,
            "healthChecks": [hc_link], "backends": backends, "description": bs_description});
        match get_opt(c, &bs_rest, "regionBackendServices.get").await? {
            Some(bs) => {
                let have: BTreeSet<&str> = bs["backends"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b["group"].as_str())
                    .collect();
                let want: BTreeSet<&str> = groups.iter().map(String::as_str).collect();
                let same = have == want
                    && bs["protocol"] == spec.protocol.as_str()
                    && bs["sessionAffinity"] == spec.affinity
                    && bs["healthChecks"] == json!([hc_link]);
                if !same {
                    c.mutate(
                        reqwest::Method::PUT,
                        &c.path(&bs_rest),
                        Some(&bs_body),
                        "regionBackendServices.update",
                    )
                    .await?;
                }
            }
            None => {
                c.mutate(
                    reqwest::Method::POST,
                    &c.path(&format!("regions/{region}/backendServices")),
                    Some(&bs_body),
                    "regionBackendServices.insert",
                )
                .await?
            }
        }

        // The forwarding rule.
        let ports: Vec<String> = spec.ports.iter().map(u16::to_string).collect();
        let subnet = internal
            .subnet
            .as_ref()
            .map(|s| c.url(&c.path(&format!("regions/{region}/subnetworks/{s}"))));
        let rule_rest = format!("regions/{region}/forwardingRules/{}", spec.name);
        // The backend service the rule sent to before, when it was another (sharing switched).
        let previous = existing
            .as_ref()
            .and_then(|fr| fr["backendService"].as_str())
            .map(|l| link_name(l).to_owned())
            .filter(|b| *b != spec.backend_service);
        let current = existing.filter(|fr| {
            let have: BTreeSet<&str> = fr["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            have == ports.iter().map(String::as_str).collect()
                && fr["IPProtocol"] == spec.protocol.as_str()
                && fr["backendService"] == bs_link.as_str()
                && subnet
                    .as_ref()
                    .is_none_or(|s| fr["subnetwork"] == s.as_str())
                && fr["allowGlobalAccess"].as_bool().unwrap_or(false) == internal.global_access
                && spec.ip.as_deref().is_none_or(|ip| fr["IPAddress"] == ip)
        });
        if let Some(fr) = current {
            return Ok(fr);
        }
        // Made again: it keeps its address unless the Service asks for another.
        let old_ip = get_opt(c, &rule_rest, "forwardingRules.get")
            .await?
            .and_then(|fr| fr["IPAddress"].as_str().map(str::to_owned));
        delete_opt(c, &rule_rest, "forwardingRules.delete").await?;
        let mut body = json!({"name": spec.name, "IPProtocol": spec.protocol, "ports": ports,
            "loadBalancingScheme": "INTERNAL", "backendService": bs_link,
            "network": c.url(&c.path(&format!("global/networks/{}", r.network))),
            "description": description});
        if let Some(ip) = spec.ip.clone().or(old_ip) {
            body["IPAddress"] = json!(ip);
        }
        if let Some(s) = &subnet {
            body["subnetwork"] = json!(s);
        }
        if internal.global_access {
            body["allowGlobalAccess"] = json!(true);
        }
        c.mutate(
            reqwest::Method::POST,
            &c.path(&format!("regions/{region}/forwardingRules")),
            Some(&body),
            "forwardingRules.insert",
        )
        .await?;
        if let Some(old) = previous {
            // As upstream's teardown of the old backend service: gone unless another rule
            // still sends to it (a shared one).
            delete_unused(
                c,
                &format!("regions/{region}/backendServices/{old}"),
                "regionBackendServices.delete",
            )
            .await?;
        }
        c.get(&c.path(&rule_rest), "forwardingRules.get").await
    }

    /// The instance group `k8s-ig--<cluster>` of each managed zone holding that zone's nodes
    /// (upstream's `ensureInternalInstanceGroups`; a zone without nodes gets no group, and its
    /// group, if any, is emptied); the links of the groups with nodes.
    async fn ensure_instance_groups(
        &self,
        cluster: &str,
        instances: &[String],
    ) -> Result<Vec<String>> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let name = instance_group_name(cluster);
        let mut links = Vec::new();
        for zone in &r.managed_zones {
            let want: BTreeSet<String> = instances
                .iter()
                .filter(|l| zone_of(l) == Some(zone.as_str()))
                .cloned()
                .collect();
            let rest = format!("zones/{zone}/instanceGroups/{name}");
            let have: BTreeSet<String> = match get_opt(c, &rest, "instanceGroups.get").await? {
                None if want.is_empty() => continue,
                None => {
                    c.mutate(
                        reqwest::Method::POST,
                        &c.path(&format!("zones/{zone}/instanceGroups")),
                        Some(&json!({"name": name,
                            "network": c.url(&c.path(&format!("global/networks/{}", r.network)))})),
                        "instanceGroups.insert",
                    )
                    .await?;
                    BTreeSet::new()
                }
                Some(_) => list_group_instances(c, &rest).await?,
            };
            for (action, change) in [
                ("addInstances", want.difference(&have)),
                ("removeInstances", have.difference(&want)),
            ] {
                let list: Vec<Value> = change.map(|i| json!({"instance": i})).collect();
                if !list.is_empty() {
                    c.mutate(
                        reqwest::Method::POST,
                        &c.path(&format!("{rest}/{action}")),
                        Some(&json!({"instances": list})),
                        &format!("instanceGroups.{action}"),
                    )
                    .await?;
                }
            }
            if !want.is_empty() {
                links.push(c.url(&c.path(&rest)));
            }
        }
        Ok(links)
    }

    /// Removes one kind of load balancer of the Service (`internal` or external), leaving
    /// what other Services still use (GCE refuses to delete it: a 400).
    async fn delete_kind(&self, cluster: &str, name: &str, internal: Option<&str>) -> Result<()> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let region = &r.region;
        delete_opt(
            c,
            &format!("regions/{region}/forwardingRules/{name}"),
            "forwardingRules.delete",
        )
        .await?;
        delete_opt(
            c,
            &format!("global/firewalls/k8s-fw-{name}"),
            "firewalls.delete",
        )
        .await?;
        let shared_check = format!("k8s-{cluster}-node");
        let Some(backend) = internal else {
            delete_opt(
                c,
                &format!("regions/{region}/targetPools/{name}"),
                "targetPools.delete",
            )
            .await?;
            for hc in [name, &shared_check] {
                delete_unused(
                    c,
                    &format!("global/httpHealthChecks/{hc}"),
                    "httpHealthChecks.delete",
                )
                .await?;
            }
            return Ok(());
        };
        let rest = format!("regions/{region}/backendServices/{backend}");
        if backend == name {
            delete_opt(c, &rest, "regionBackendServices.delete").await?;
        } else {
            // A shared backend service goes with the last rule sending to it.
            delete_unused(c, &rest, "regionBackendServices.delete").await?;
        }
        for hc in [name, &shared_check] {
            delete_unused(
                c,
                &format!("global/healthChecks/{hc}"),
                "healthChecks.delete",
            )
            .await?;
        }
        let group = instance_group_name(cluster);
        for zone in &r.managed_zones {
            delete_unused(
                c,
                &format!("zones/{zone}/instanceGroups/{group}"),
                "instanceGroups.delete",
            )
            .await?;
        }
        Ok(())
    }
}

/// Most ports of an internal forwarding rule (GCE's limit on `ports`).
const MAX_INTERNAL_PORTS: usize = 5;

/// The instance groups of the cluster's internal load balancers (upstream's
/// `makeInstanceGroupName`).
fn instance_group_name(cluster: &str) -> String {
    format!("k8s-ig--{cluster}")
}

/// An internal forwarding rule's backend service name; `None` for an external rule.
fn internal_backend(rule: &Value) -> Option<&str> {
    (scheme_of(rule) == "INTERNAL").then(|| rule["backendService"].as_str().map_or("", link_name))
}

/// A forwarding rule's scheme (`EXTERNAL` when not said).
fn scheme_of(rule: &Value) -> &str {
    rule["loadBalancingScheme"].as_str().unwrap_or("EXTERNAL")
}

/// The zone of an instance link (`.../zones/z/instances/i`).
fn zone_of(link: &str) -> Option<&str> {
    let mut parts = link.rsplit('/');
    let _name = parts.next()?;
    (parts.next()? == "instances").then_some(())?;
    parts.next()
}

/// The instances of an instance group (`instanceGroups.listInstances`, every page).
async fn list_group_instances(c: &Compute, rest: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut pager =
        hypercloud_cloudprovider::pager::Pager::new("compute", "instanceGroups.listInstances");
    let mut token = String::new();
    loop {
        let mut q = vec![("maxResults", "500")];
        if !token.is_empty() {
            q.push(("pageToken", token.as_str()));
        }
        let page = c
            .call(
                reqwest::Method::POST,
                &c.path(&format!("{rest}/listInstances")),
                &q,
                Some(&json!({"instanceState": "ALL"})),
                "instanceGroups.listInstances",
            )
            .await?;
        for i in page["items"].as_array().into_iter().flatten() {
            if let Some(l) = i["instance"].as_str() {
                out.insert(l.to_owned());
            }
        }
        match pager.next(page["nextPageToken"].as_str())? {
            Some(t) => token = t,
            None => return Ok(out),
        }
    }
}

/// Deletes what may still be used by another Service's load balancer: gone already, or in
/// use (GCE's 400), is fine.
async fn delete_unused(c: &Compute, rest: &str, op: &str) -> Result<()> {
    match delete_opt(c, rest, op).await {
        Err(Error::Api { status: 400, .. }) => Ok(()),
        other => other,
    }
}

#[async_trait]
impl LoadBalancer for Gce {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> hypercloud_cloudprovider::Result<Option<LoadBalancerStatus>> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let name = default_load_balancer_name(service);
        let rule = get_opt(
            c,
            &format!("regions/{}/forwardingRules/{name}", r.region),
            "forwardingRules.get",
        )
        .await?;
        Ok(rule.map(|fr| LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: fr["IPAddress"].as_str().map(str::to_owned),
                ..Default::default()
            }]),
        }))
    }

    /// The refused rows of `SERVICE_SETTINGS`, then the annotations' values: what ensuring
    /// runs first (`spec_of`), so the webhook and the controller cannot disagree.
    fn check_service(&self, service: &Service) -> hypercloud_cloudprovider::Result<()> {
        // The names it makes do not matter here, only its refusals.
        spec_of("", self.config.global.subnetwork_name.as_deref(), service).map(drop)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> hypercloud_cloudprovider::Result<LoadBalancerStatus> {
        self.ensure(cluster_name, service, nodes).await
    }

    /// The same convergence as ensure (the node set, and whatever else drifted).
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> hypercloud_cloudprovider::Result<()> {
        self.ensure(cluster_name, service, nodes).await.map(|_| ())
    }

    /// The kind of load balancer the forwarding rule is (or, without one, the Service asks
    /// for): its forwarding rule, firewall, target pool or backend service, and health checks
    /// and instance groups no other Service uses.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> hypercloud_cloudprovider::Result<()> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let name = default_load_balancer_name(service);
        let rule = get_opt(
            c,
            &format!("regions/{}/forwardingRules/{name}", r.region),
            "forwardingRules.get",
        )
        .await?;
        let backend = match &rule {
            Some(fr) => internal_backend(fr).map(str::to_owned),
            // No rule: what the Service asks for (a half-made internal one's parts).
            None => match spec_of(cluster_name, None, service) {
                Ok(spec) if spec.internal.is_some() => Some(spec.backend_service),
                _ => internal_of(service, &name, None)
                    .is_ok_and(|i| i.is_some())
                    .then(|| name.clone()),
            },
        };
        self.delete_kind(cluster_name, &name, backend.as_deref())
            .await?;
        Ok(())
    }
}

/// hypercloud's own `service-lb-annotations` webhook (the kit's, the same on every provider
/// with load balancers), deciding with [`LoadBalancer::check_service`].
#[async_trait]
impl Webhooks for Gce {
    fn webhooks(&self) -> Vec<WebhookSpec> {
        vec![SERVICE_LB_ANNOTATIONS]
    }

    async fn admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest<DynamicObject>,
    ) -> hypercloud_cloudprovider::Result<AdmissionResponse> {
        admit_service_lb(self, webhook, request)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn svc(spec: Value, annotations: Value) -> Service {
        serde_json::from_value(
            json!({"metadata": {"name": "web", "namespace": "ns", "uid": "1234-abcd",
            "annotations": annotations}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn specs_follow_the_service() {
        let s = spec_of(
            "kubernetes",
            None,
            &svc(json!({"ports": [{"port": 443}, {"port": 80}]}), json!({})),
        )
        .unwrap();
        assert_eq!(s.name, "a1234abcd");
        assert_eq!(
            (s.ports.clone(), s.protocol.as_str()),
            (vec![443, 80], "TCP")
        );
        assert_eq!(s.health_check, ("k8s-kubernetes-node".into(), 10256, true));
        assert_eq!(s.source_ranges, ["0.0.0.0/0"]);
        let s = spec_of(
            "k",
            None,
            &svc(
                json!({"ports": [{"port": 53, "protocol": "UDP"}], "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30001, "sessionAffinity": "ClientIP"}),
                json!({}),
            ),
        )
        .unwrap();
        assert_eq!(s.health_check, ("a1234abcd".into(), 30001, false));
        assert_eq!((s.protocol.as_str(), s.affinity), ("UDP", "CLIENT_IP"));
    }

    #[test]
    fn unsupported_services_are_refused_by_name() {
        let mixed = svc(
            json!({"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}),
            json!({}),
        );
        assert!(spec_of("k", None, &mixed).is_err());
        // A shared backend service: internal and `Cluster` only, `true` or `false`.
        let internal = json!({ANNOTATION_TYPE: "Internal", ANNOTATION_BACKEND_SHARE_OLD: "true"});
        for (spec, annotations, says) in [
            (
                json!({"ports": [{"port": 80}]}),
                json!({ANNOTATION_BACKEND_SHARE: "true"}),
                "this Service's is external",
            ),
            (
                json!({"ports": [{"port": 80}], "externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
                internal.clone(),
                "has its own backend service",
            ),
            (
                json!({"ports": [{"port": 80}]}),
                json!({ANNOTATION_TYPE: "Internal", ANNOTATION_BACKEND_SHARE: "yes"}),
                "`yes` is not `true` or `false`",
            ),
        ] {
            let e = hypercloud_cloudprovider::Chain(
                &spec_of("k", None, &svc(spec, annotations)).err().unwrap(),
            )
            .to_string();
            assert!(
                e.contains("load-balancer-backend-share") && e.contains(says),
                "{e}"
            );
        }
        // Services asking the same share one backend service, named as upstream's.
        let tcp = spec_of(
            "k",
            None,
            &svc(json!({"ports": [{"port": 80}]}), internal.clone()),
        )
        .unwrap();
        assert_eq!(
            tcp.backend_service,
            "k8s-k-internal-tcp-nmv1-6eef6648406c333a"
        );
        let sticky = svc(
            json!({"ports": [{"port": 80}], "sessionAffinity": "ClientIP"}),
            internal,
        );
        assert_ne!(
            spec_of("k", None, &sticky).unwrap().backend_service,
            tcp.backend_service
        );
        // Values the provider cannot take are refused by the annotation's name.
        for (k, v) in [
            (ANNOTATION_TYPE, "External"),
            (ANNOTATION_NETWORK_TIER, "Gold"),
            // Internal-only settings on an external load balancer would change nothing.
            (ANNOTATION_GLOBAL_ACCESS, "true"),
            (ANNOTATION_SUBNET, "sub"),
        ] {
            let s = svc(json!({"ports": [{"port": 80}]}), json!({k: v}));
            let e =
                hypercloud_cloudprovider::Chain(&spec_of("k", None, &s).err().unwrap()).to_string();
            assert!(e.contains(&format!("annotation {k}")), "{k}: {e}");
        }
        for (k, v) in [
            (ANNOTATION_NETWORK_TIER, "Standard"),
            (ANNOTATION_GLOBAL_ACCESS, "yes"),
            (ANNOTATION_SUBNET, "Not_A_Name"),
        ] {
            let s = svc(
                json!({"ports": [{"port": 80}]}),
                json!({ANNOTATION_TYPE: "Internal", k: v}),
            );
            let e =
                hypercloud_cloudprovider::Chain(&spec_of("k", None, &s).err().unwrap()).to_string();
            assert!(e.contains(&format!("annotation {k}")), "{k}: {e}");
        }
    }

    #[test]
    fn internal_and_tiers_follow_the_annotations() {
        let ports = json!({"ports": [{"port": 80}]});
        let s = spec_of("k", Some("cfg-sub"), &svc(ports.clone(), json!({}))).unwrap();
        assert_eq!((s.internal, s.tier), (None, "PREMIUM"));
        let s = spec_of(
            "k",
            None,
            &svc(ports.clone(), json!({ANNOTATION_NETWORK_TIER: "Standard"})),
        )
        .unwrap();
        assert_eq!(s.tier, "STANDARD");
        let s = spec_of(
            "k",
            Some("cfg-sub"),
            &svc(ports.clone(), json!({ANNOTATION_TYPE_OLD: "internal"})),
        )
        .unwrap();
        assert_eq!(
            s.internal,
            Some(Internal {
                subnet: Some("cfg-sub".into()),
                global_access: false
            })
        );
        let s = spec_of(
            "k",
            Some("cfg-sub"),
            &svc(
                ports,
                json!({ANNOTATION_TYPE: "Internal", ANNOTATION_TYPE_OLD: "External",
                    ANNOTATION_SUBNET: "ilb", ANNOTATION_GLOBAL_ACCESS: "true",
                    ANNOTATION_NETWORK_TIER: "Premium"}),
            ),
        )
        .unwrap();
        assert_eq!(
            (s.internal, s.tier),
            (
                Some(Internal {
                    subnet: Some("ilb".into()),
                    global_access: true
                }),
                "PREMIUM"
            )
        );
        assert_eq!(
            zone_of("https://h/compute/v1/projects/p/zones/z1/instances/n"),
            Some("z1")
        );
        assert_eq!(zone_of("n"), None);
    }

    #[test]
    fn the_settings_table_is_what_the_check_does() {
        // The walk's Service is an internal one: every implemented row applies to it (the
        // internal-only annotations are refused on external ones, checked above).
        let base = svc(
            json!({"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}),
            json!({"example.com/own": "not ours to judge", ANNOTATION_TYPE: "Internal"}),
        );
        // spec_of is what ensuring runs first: the walk goes through it.
        lb_settings::walk(SERVICE_SETTINGS, &base, |s| {
            spec_of("k", None, s).map(|_| ())
        })
        .unwrap();
        let refused = SERVICE_SETTINGS
            .iter()
            .filter(|r| r.support == hypercloud_cloudprovider::Support::Refused)
            .count();
        // The legacy provider's 9 annotations: 8 implemented, 1 refused; and IPv6.
        assert_eq!(refused, 2);
        let ranged = svc(
            json!({"ports": [{"port": 80}]}),
            json!({ANNOTATION_SOURCE_RANGES: "10.0.0.0/8, 192.168.0.0/16"}),
        );
        assert_eq!(
            spec_of("k", None, &ranged).unwrap().source_ranges,
            vec!["10.0.0.0/8", "192.168.0.0/16"]
        );
    }

    #[test]
    fn lb_settings_doc() {
        let doc = hypercloud_testenv::repo_root().join("docs/guide/gce.md");
        lb_settings::verify_doc(&doc, SERVICE_SETTINGS).unwrap();
    }
}
