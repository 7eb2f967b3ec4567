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
//! at the NodePort. Internal load balancers (the `Internal` annotation), and every other upstream
//! annotation this provider does not implement, are refused by name ([`SERVICE_SETTINGS`]).

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

/// Every annotation of the legacy provider (v1.20 `gce_annotations.go`), the source-range
/// annotation, and the Service fields a load balancer may be asked for: what this provider
/// does with each ([`hypercloud_cloudprovider::lb_settings`]; the check, the guide's table in
/// docs/guide/gce.md and the tests read it).
pub const SERVICE_SETTINGS: &[LbSetting] = &[
    LbSetting::implemented(Setting::Annotation(ANNOTATION_SOURCE_RANGES), "the firewall's source ranges when `spec.loadBalancerSourceRanges` is empty"),
    LbSetting::refused(Setting::Annotation("networking.gke.io/load-balancer-type"), "`Internal` (the only value upstream reads) asks for an internal load balancer (backend service, ILB forwarding rule), which is not implemented"),
    LbSetting::refused(Setting::Annotation("cloud.google.com/load-balancer-type"), "`Internal` (the only value upstream reads) asks for an internal load balancer (backend service, ILB forwarding rule), which is not implemented"),
    LbSetting::refused(Setting::Annotation("alpha.cloud.google.com/load-balancer-backend-share"), "it configures internal load balancers, which are not implemented"),
    LbSetting::refused(Setting::Annotation("cloud.google.com/load-balancer-backend-share"), "it configures internal load balancers, which are not implemented"),
    LbSetting::refused(Setting::Annotation("networking.gke.io/internal-load-balancer-allow-global-access"), "it configures internal load balancers, which are not implemented"),
    LbSetting::refused(Setting::Annotation("networking.gke.io/internal-load-balancer-subnet"), "it configures internal load balancers, which are not implemented"),
    LbSetting::refused(Setting::Annotation("cloud.google.com/network-tier"), "forwarding rules and addresses get the project's default network tier"),
    LbSetting::refused(Setting::Annotation("cloud.google.com/log-firewall-rules"), "firewall rule logging is not implemented"),
    LbSetting::implemented(Setting::LoadBalancerClass, "the service controller leaves the Service to the class's controller (upstream)"),
    LbSetting::implemented(Setting::ExternalTrafficPolicyLocal, "the Service's own HTTP health check on the health-check node port"),
    LbSetting::implemented(Setting::SessionAffinityClientIp, "the target pool's `sessionAffinity: CLIENT_IP`"),
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
    affinity: &'static str,
}

fn spec_of(cluster: &str, svc: &Service) -> hypercloud_cloudprovider::Result<Spec> {
    let name = default_load_balancer_name(svc);
    let ns = svc.metadata.namespace.as_deref().unwrap_or("default");
    let svc_name = svc.metadata.name.as_deref().unwrap_or_default();
    lb_settings::check(crate::PROVIDER_NAME, SERVICE_SETTINGS, svc)?;
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
    let health_check = match (local, spec.health_check_node_port) {
        (true, Some(p)) => (
            name.clone(),
            u16::try_from(p).unwrap_or(NODE_HEALTH_PORT),
            false,
        ),
        _ => (format!("k8s-{cluster}-node"), NODE_HEALTH_PORT, true),
    };
    Ok(Spec {
        service: format!("{ns}/{svc_name}"),
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
        let spec = spec_of(cluster, svc)?;
        let r = self.resolved().await?;
        let c = &r.compute;
        let region = &r.region;
        let (instances, instance_tags) = self.node_instances(nodes).await?;

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
        let existing = get_opt(c, &rule_rest, "forwardingRules.get").await?;
        let current = existing.filter(|fr| {
            fr["portRange"] == port_range.as_str()
                && fr["IPProtocol"] == spec.protocol.as_str()
                && spec.ip.as_deref().is_none_or(|ip| fr["IPAddress"] == ip)
        });
        let rule = match current {
            Some(fr) => fr,
            None => {
                delete_opt(c, &rule_rest, "forwardingRules.delete").await?;
                let mut body = json!({"name": spec.name, "IPProtocol": spec.protocol, "portRange": port_range,
                    "target": pool_link, "loadBalancingScheme": "EXTERNAL",
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
        let ip = rule["IPAddress"].as_str().unwrap_or_default().to_owned();

        // The firewall: the ports from the source ranges, on the nodes' tags.
        let fw_name = format!("k8s-fw-{}", spec.name);
        let target_tags: Vec<String> = if self.config.global.node_tags.is_empty() {
            instance_tags.into_iter().collect()
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
        Ok(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip),
                ..Default::default()
            }]),
        })
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

    /// The refused rows of `SERVICE_SETTINGS` (ensuring runs the same check first).
    fn check_service(&self, service: &Service) -> hypercloud_cloudprovider::Result<()> {
        lb_settings::check(crate::PROVIDER_NAME, SERVICE_SETTINGS, service)
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

    /// Forwarding rule, firewall, target pool, and the Service's own health check (the shared
    /// node check stays while other Services may use it: GCE refuses to delete it then).
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> hypercloud_cloudprovider::Result<()> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let name = default_load_balancer_name(service);
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
        delete_opt(
            c,
            &format!("regions/{region}/targetPools/{name}"),
            "targetPools.delete",
        )
        .await?;
        for hc in [name.clone(), format!("k8s-{cluster_name}-node")] {
            match delete_opt(
                c,
                &format!("global/httpHealthChecks/{hc}"),
                "httpHealthChecks.delete",
            )
            .await
            {
                Ok(()) => {}
                // Still used by another Service's target pool.
                Err(Error::Api { status: 400, .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
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
        assert!(spec_of("k", &mixed).is_err());
        let internal = svc(
            json!({"ports": [{"port": 80}]}),
            json!({"networking.gke.io/load-balancer-type": "Internal"}),
        );
        let e =
            hypercloud_cloudprovider::Chain(&spec_of("k", &internal).err().unwrap()).to_string();
        assert!(e.contains("annotation networking.gke.io/load-balancer-type is not supported by hypercloud's gce provider: `Internal`"), "{e}");
    }

    #[test]
    fn the_settings_table_is_what_the_check_does() {
        let base = svc(
            json!({"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}),
            json!({"example.com/own": "not ours to judge"}),
        );
        // spec_of is what ensuring runs first: the walk goes through it.
        lb_settings::walk(SERVICE_SETTINGS, &base, |s| spec_of("k", s).map(|_| ())).unwrap();
        let refused = SERVICE_SETTINGS
            .iter()
            .filter(|r| r.support == hypercloud_cloudprovider::Support::Refused)
            .count();
        // The legacy provider's 9 annotations: 1 implemented, 8 refused; and IPv6.
        assert_eq!(refused, 9);
        let ranged = svc(
            json!({"ports": [{"port": 80}]}),
            json!({ANNOTATION_SOURCE_RANGES: "10.0.0.0/8, 192.168.0.0/16"}),
        );
        assert_eq!(
            spec_of("k", &ranged).unwrap().source_ranges,
            vec!["10.0.0.0/8", "192.168.0.0/16"]
        );
    }

    #[test]
    fn lb_settings_doc() {
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/guide/gce.md");
        lb_settings::verify_doc(&doc, SERVICE_SETTINGS).unwrap();
    }
}
