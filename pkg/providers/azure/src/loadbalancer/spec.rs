//! What a Service asks of its load balancer ([`Spec`]), read and checked before any cloud
//! call: the refused rows of [`SERVICE_SETTINGS`] first, then every value the provider reads
//! (upstream's parsers, stricter: a value it cannot take is refused by the annotation's
//! name instead of ignored).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use hypercloud_cloudprovider::ProviderError as _;
use hypercloud_cloudprovider::{default_load_balancer_name, lb_settings};
use k8s_openapi::api::core::v1::Service;

use crate::config::{Config, LoadBalancerSku};
use crate::error::Error;

use super::names::{rule_name, NAME_MAX};
use super::settings::*;

/// The frontend's kind.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Frontend {
    /// A public IP.
    Public(Public),
    /// A private address on a subnet.
    Internal {
        /// The subnet's name in config `vnetName`.
        subnet: String,
    },
}

/// Where a public frontend's address comes from.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Public {
    /// The public IPs' resource group (the annotation's, else config `resourceGroup`).
    pub resource_group: String,
    /// An existing public IP named by the annotation.
    pub pip_name: Option<String>,
    /// The DNS label: `Some("")` removes it.
    pub dns_label: Option<String>,
    /// Extra tags of the annotation.
    pub tags: BTreeMap<String, String>,
}

/// One load-balancing rule (and its probe), per Service port.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Rule {
    /// The rule's and its probe's name.
    pub name: String,
    /// `Tcp` or `Udp`.
    pub protocol: &'static str,
    /// `TCP` or `UDP`, as Kubernetes spells it (names).
    pub k8s_protocol: &'static str,
    /// The Service port (the frontend port).
    pub port: i32,
    /// Where the load balancer sends: the Service port (floating IP) or the NodePort.
    pub backend_port: i32,
    /// `idleTimeoutInMinutes` (TCP only).
    pub idle_timeout: Option<i32>,
    /// `enableTcpReset` (standard SKU, TCP only).
    pub tcp_reset: Option<bool>,
    /// `disableOutboundSnat` (standard SKU only).
    pub disable_outbound_snat: Option<bool>,
    /// The probe.
    pub probe: Option<Probe>,
}

/// A health probe.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Probe {
    /// `Tcp`, `Http`, `Https`.
    pub protocol: &'static str,
    /// The port probed on the nodes.
    pub port: i32,
    /// The path of `Http`/`Https` probes.
    pub path: Option<String>,
    /// `intervalInSeconds`.
    pub interval: i32,
    /// `numberOfProbes`.
    pub count: i32,
}

/// What a Service asks of its load balancer.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Spec {
    /// `namespace/name`.
    pub service: String,
    /// `a<uid>`: the rule prefix.
    pub prefix: String,
    /// The frontend IP configuration's name.
    pub frontend_name: String,
    /// Public or internal.
    pub frontend: Frontend,
    /// The address asked for (`azure-load-balancer-ipv4`, else `spec.loadBalancerIP`).
    pub ip: Option<String>,
    /// One per Service port.
    pub rules: Vec<Rule>,
    /// Floating IP on the rules (upstream v1.20: always).
    pub floating_ip: bool,
    /// `loadDistribution`.
    pub distribution: &'static str,
    /// The security rules' sources (`Internet`, CIDRs; none for an internal load balancer
    /// open to all, as upstream).
    pub sources: Vec<String>,
    /// `shared-*` security rules.
    pub shared_rule: bool,
}

impl Spec {
    /// Whether the frontend is private.
    pub fn internal(&self) -> bool {
        matches!(self.frontend, Frontend::Internal { .. })
    }
}

/// The value of annotation `key`, if the Service has it.
pub(super) fn annotation<'a>(svc: &'a Service, key: &str) -> Option<&'a str> {
    svc.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// `namespace/name`.
pub(super) fn service_name(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or("default"),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `true`/`false` of a flag annotation.
fn flag(svc: &Service, key: &str, bad: &impl Fn(&str, String) -> Error) -> Result<bool, Error> {
    match annotation(svc, key) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(bad(
            key,
            format!("`{}` is not `true` or `false`", other.escape_default()),
        )),
    }
}

/// An integer annotation within `range`.
fn number(
    svc: &Service,
    key: &str,
    range: std::ops::RangeInclusive<i32>,
    bad: &impl Fn(&str, String) -> Error,
) -> Result<Option<i32>, Error> {
    let Some(v) = annotation(svc, key) else {
        return Ok(None);
    };
    match v.trim().parse::<i32>() {
        Ok(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(bad(
            key,
            format!(
                "`{}` is not a whole number from {} to {}",
                v.escape_default(),
                range.start(),
                range.end()
            ),
        )),
    }
}

/// Whether `s` is an IPv4 CIDR.
fn is_cidr(s: &str) -> bool {
    s.split_once('/').is_some_and(|(ip, bits)| {
        ip.parse::<Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32)
    })
}

/// `a=b,c=d`, as upstream's `ConvertTagsToMap`.
fn tags(v: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, val) = pair.split_once('=')?;
        if k.trim().is_empty() {
            return None;
        }
        out.insert(k.trim().to_owned(), val.trim().to_owned());
    }
    Some(out)
}

/// Reads the Service: the refused rows of [`SERVICE_SETTINGS`] first, then every value.
pub(super) fn spec_of(config: &Config, svc: &Service) -> hypercloud_cloudprovider::Result<Spec> {
    lb_settings::check(crate::PROVIDER_NAME, SERVICE_SETTINGS, svc)?;
    read(config, svc).map_err(Error::into_provider_error)
}

fn read(config: &Config, svc: &Service) -> Result<Spec, Error> {
    let service = service_name(svc);
    let bad = |setting: &str, message: String| Error::ServiceSetting {
        service: service.clone(),
        setting: if setting.starts_with("spec.") {
            setting.to_owned()
        } else {
            format!("annotation {setting}")
        },
        message,
    };
    if let Some(key) = svc
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| k.starts_with(PER_PORT))
    {
        return Err(bad(
            key,
            "per-port load balancer settings are not supported by hypercloud's azure provider"
                .into(),
        ));
    }
    let prefix = default_load_balancer_name(svc);
    let spec = svc.spec.clone().unwrap_or_default();
    let internal = flag(svc, INTERNAL, &bad)?;
    let external_only = [PIP_NAME, PIP_RESOURCE_GROUP, DNS_LABEL, PIP_TAGS];
    let subnet_annotation = annotation(svc, INTERNAL_SUBNET)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    if internal {
        if let Some(key) = external_only
            .into_iter()
            .find(|k| annotation(svc, k).is_some())
        {
            return Err(bad(
                key,
                "it configures public IPs, and this load balancer is internal".into(),
            ));
        }
    } else if annotation(svc, INTERNAL_SUBNET).is_some() {
        return Err(bad(
            INTERNAL_SUBNET,
            "it configures internal load balancers, and this one is public".into(),
        ));
    }
    let frontend = if internal {
        if config.vnet_name.as_deref().unwrap_or_default().is_empty() {
            return Err(bad(
                INTERNAL,
                "an internal load balancer needs config vnetName".into(),
            ));
        }
        let subnet = subnet_annotation
            .or(config.subnet_name.as_deref().filter(|s| !s.is_empty()))
            .ok_or_else(|| {
                bad(
                    INTERNAL,
                    format!("an internal load balancer needs config subnetName or annotation {INTERNAL_SUBNET}"),
                )
            })?;
        Frontend::Internal {
            subnet: subnet.to_owned(),
        }
    } else {
        let pip_tags = match annotation(svc, PIP_TAGS) {
            None => BTreeMap::new(),
            Some(v) => tags(v).ok_or_else(|| {
                bad(
                    PIP_TAGS,
                    format!("`{}` is not `key1=value1,key2=value2`", v.escape_default()),
                )
            })?,
        };
        let non_empty = |key: &str| -> Result<Option<String>, Error> {
            match annotation(svc, key).map(str::trim) {
                None => Ok(None),
                Some("") => Err(bad(key, "it is empty".into())),
                Some(v) => Ok(Some(v.to_owned())),
            }
        };
        Frontend::Public(Public {
            resource_group: non_empty(PIP_RESOURCE_GROUP)?
                .unwrap_or_else(|| config.resource_group.clone()),
            pip_name: non_empty(PIP_NAME)?,
            dns_label: annotation(svc, DNS_LABEL).map(|v| v.trim().to_owned()),
            tags: pip_tags,
        })
    };
    let frontend_name = match (internal, subnet_annotation) {
        (true, Some(subnet)) => format!("{prefix}-{subnet}")
            .chars()
            .take(NAME_MAX)
            .collect(),
        _ => prefix.clone(),
    };
    let ip = match annotation(svc, LB_IPV4) {
        Some(v) => Some((LB_IPV4, v)),
        None => spec
            .load_balancer_ip
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(|v| ("spec.loadBalancerIP", v)),
    };
    let ip = match ip {
        None => None,
        Some((key, v)) => {
            let addr: Ipv4Addr = v.trim().parse().map_err(|_| {
                bad(
                    key,
                    format!("`{}` is not an IPv4 address", v.escape_default()),
                )
            })?;
            Some(addr.to_string())
        }
    };
    let floating_ip = !flag(svc, DISABLE_FLOATING_IP, &bad)?;
    let shared_rule = flag(svc, SHARED_RULE, &bad)?;
    if shared_rule && !floating_ip {
        return Err(bad(
            SHARED_RULE,
            format!("shared security rules hold the Services' addresses; with {DISABLE_FLOATING_IP} the rules open the nodes' addresses instead"),
        ));
    }
    let no_node_ports = spec.allocate_load_balancer_node_ports == Some(false);
    if no_node_ports && !floating_ip {
        return Err(bad(
            "spec.allocateLoadBalancerNodePorts: false",
            format!("with annotation {DISABLE_FLOATING_IP} the backend port is the NodePort"),
        ));
    }
    let local = spec.external_traffic_policy.as_deref() == Some("Local");
    let health_port = match (local, spec.health_check_node_port) {
        (false, _) => None,
        (true, Some(p)) if (1..=65535).contains(&p) => Some(p),
        (true, _) => {
            return Err(bad(
                "spec.healthCheckNodePort",
                "externalTrafficPolicy: Local needs a health check node port".into(),
            ))
        }
    };
    let idle_timeout = number(svc, IDLE_TIMEOUT, 4..=30, &bad)?;
    let no_reset = flag(svc, DISABLE_TCP_RESET, &bad)?;
    let probe_protocol = match annotation(svc, PROBE_PROTOCOL) {
        None => None,
        Some(v) => Some(
            ["Tcp", "Http", "Https"]
                .into_iter()
                .find(|p| p.eq_ignore_ascii_case(v.trim()))
                .ok_or_else(|| {
                    bad(
                        PROBE_PROTOCOL,
                        format!("`{}` is not `Tcp`, `Http` or `Https`", v.escape_default()),
                    )
                })?,
        ),
    };
    let probe_path = match annotation(svc, PROBE_PATH).map(str::trim) {
        Some("") => return Err(bad(PROBE_PATH, "it is empty".into())),
        other => other.unwrap_or("/healthz").to_owned(),
    };
    let interval = number(svc, PROBE_INTERVAL, 5..=300, &bad)?.unwrap_or(5);
    let count = number(svc, PROBE_COUNT, 2..=100, &bad)?.unwrap_or(2);
    if interval * count >= 120 {
        return Err(bad(
            PROBE_COUNT,
            format!("{interval} s × {count} probes is not under 120 s (annotation {PROBE_INTERVAL} × {PROBE_COUNT})"),
        ));
    }
    let standard = config.load_balancer_sku == LoadBalancerSku::Standard;
    let probe_for = |port: i32| {
        let protocol = probe_protocol.unwrap_or("Tcp");
        Probe {
            protocol,
            port,
            path: (protocol != "Tcp").then(|| probe_path.clone()),
            interval,
            count,
        }
    };
    let rule_subnet = if internal { subnet_annotation } else { None };
    let mut rules = Vec::new();
    for p in spec.ports.iter().flatten() {
        let (protocol, k8s_protocol) = match p.protocol.as_deref().unwrap_or("TCP") {
            "TCP" => ("Tcp", "TCP"),
            "UDP" => ("Udp", "UDP"),
            other => {
                return Err(bad(
                    "spec.ports",
                    format!(
                        "protocol {} is not supported (TCP or UDP)",
                        other.escape_default()
                    ),
                ))
            }
        };
        if !(1..=65534).contains(&p.port) {
            return Err(bad(
                "spec.ports",
                format!("port {} is not a frontend port (1 to 65534)", p.port),
            ));
        }
        let node_port = p.node_port.filter(|n| *n > 0);
        let backend_port = if floating_ip {
            p.port
        } else {
            node_port.ok_or_else(|| {
                bad(
                    DISABLE_FLOATING_IP,
                    format!("port {} has no NodePort to send to", p.port),
                )
            })?
        };
        let tcp = protocol == "Tcp";
        let probe = match health_port {
            Some(hc) => Some(Probe {
                protocol: probe_protocol.unwrap_or("Http"),
                path: (probe_protocol != Some("Tcp")).then(|| probe_path.clone()),
                ..probe_for(hc)
            }),
            None if tcp => node_port.map(probe_for),
            None => None,
        };
        rules.push(Rule {
            name: rule_name(&prefix, rule_subnet, k8s_protocol, p.port),
            protocol,
            k8s_protocol,
            port: p.port,
            backend_port,
            idle_timeout: idle_timeout.filter(|_| tcp),
            tcp_reset: (standard && tcp).then_some(!no_reset),
            disable_outbound_snat: standard.then_some(config.disable_outbound_snat),
            probe,
        });
    }
    if rules.is_empty() {
        return Err(bad("spec.ports", "the Service has no ports".into()));
    }
    let ranges: Vec<String> = match spec.load_balancer_source_ranges.filter(|r| !r.is_empty()) {
        Some(r) => r.iter().map(|x| x.trim().to_owned()).collect(),
        None => annotation(svc, SOURCE_RANGES)
            .unwrap_or_default()
            .split(',')
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty())
            .collect(),
    };
    if let Some(r) = ranges.iter().find(|r| !is_cidr(r)) {
        return Err(bad(
            "spec.loadBalancerSourceRanges",
            format!("`{}` is not an IPv4 CIDR", r.escape_default()),
        ));
    }
    let allow_all = ranges.is_empty() || ranges.iter().any(|r| r == "0.0.0.0/0");
    let sources = match (allow_all, internal) {
        (false, _) => ranges,
        (true, false) => vec!["Internet".to_owned()],
        (true, true) => Vec::new(),
    };
    Ok(Spec {
        service,
        frontend_name,
        frontend,
        ip,
        rules,
        floating_ip,
        distribution: if spec.session_affinity.as_deref() == Some("ClientIP") {
            "SourceIP"
        } else {
            "Default"
        },
        sources,
        shared_rule,
        prefix,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn config(extra: &str) -> Config {
        Config::parse(
            &format!(
                r#"{{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "RG", "location": "l",
                "aadClientId": "c", "aadClientSecret": "x", "vnetName": "vnet", "subnetName": "nodes"{extra}}}"#
            ),
            "azure.json",
        )
        .unwrap()
    }

    fn svc(spec: Value, annotations: Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns",
            "uid": "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", "annotations": annotations},
            "spec": spec}))
        .unwrap()
    }

    fn err(config: &Config, s: &Service) -> String {
        hypercloud_cloudprovider::Chain(&spec_of(config, s).unwrap_err()).to_string()
    }

    const PREFIX: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90";

    #[test]
    fn upstream_v1_20_by_default() {
        let c = config(r#", "loadBalancerSku": "standard""#);
        let s = spec_of(
            &c,
            &svc(
                json!({"ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP", "nodePort": 30053}]}),
                json!({}),
            ),
        )
        .unwrap();
        assert_eq!(s.prefix, PREFIX);
        assert_eq!(s.frontend_name, PREFIX);
        assert_eq!(s.rules[0].name, format!("{PREFIX}-TCP-80"));
        assert_eq!(s.rules[1].name, format!("{PREFIX}-UDP-53"));
        // Upstream v1.20: floating IP, backend port = port, a Tcp probe on the NodePort,
        // TCP reset on standard TCP rules, no probe for UDP.
        let r = &s.rules[0];
        assert_eq!(
            (r.backend_port, r.tcp_reset, s.floating_ip),
            (80, Some(true), true)
        );
        assert_eq!(
            r.probe,
            Some(Probe {
                protocol: "Tcp",
                port: 30080,
                path: None,
                interval: 5,
                count: 2
            })
        );
        assert_eq!(
            (s.rules[1].probe.clone(), s.rules[1].tcp_reset),
            (None, None)
        );
        assert_eq!(s.sources, ["Internet"]);
        // An internal subnet annotation names the frontend and the rules, cut to 80.
        let long = "s".repeat(70);
        let s = spec_of(
            &c,
            &svc(
                json!({"ports": [{"port": 80, "nodePort": 30080}]}),
                json!({INTERNAL: "true", INTERNAL_SUBNET: long}),
            ),
        )
        .unwrap();
        assert_eq!(s.frontend_name.len(), 80);
        assert_eq!(s.rules[0].name.len(), 80);
        assert!(s.rules[0].name.ends_with("s-TCP-80"), "{}", s.rules[0].name);
        assert_eq!(s.frontend, Frontend::Internal { subnet: long });
        assert!(
            s.sources.is_empty(),
            "an internal load balancer open to all has no rules"
        );
    }

    #[test]
    fn annotations_and_fields_shape_the_rules() {
        let c = config("");
        let s = spec_of(
            &c,
            &svc(
                json!({"ports": [{"port": 80, "nodePort": 30080}], "externalTrafficPolicy": "Local",
                    "healthCheckNodePort": 32000, "sessionAffinity": "ClientIP",
                    "loadBalancerSourceRanges": ["10.0.0.0/8", "192.168.0.0/16"]}),
                json!({DISABLE_FLOATING_IP: "true", IDLE_TIMEOUT: "15", PROBE_INTERVAL: "10",
                    PROBE_COUNT: "3", PIP_TAGS: "a=b, c=d", DNS_LABEL: "web"}),
            ),
        )
        .unwrap();
        let r = &s.rules[0];
        assert_eq!(
            (r.backend_port, r.idle_timeout, r.tcp_reset),
            (30080, Some(15), None)
        );
        assert_eq!(
            r.probe,
            Some(Probe {
                protocol: "Http",
                port: 32000,
                path: Some("/healthz".into()),
                interval: 10,
                count: 3
            })
        );
        assert_eq!((s.floating_ip, s.distribution), (false, "SourceIP"));
        assert_eq!(s.sources, ["10.0.0.0/8", "192.168.0.0/16"]);
        let Frontend::Public(p) = &s.frontend else {
            panic!("public")
        };
        assert_eq!(p.resource_group, "rg");
        assert_eq!(p.dns_label.as_deref(), Some("web"));
        assert_eq!(p.tags.len(), 2);
        // The address: the ipv4 annotation before the field.
        let s = spec_of(
            &c,
            &svc(
                json!({"ports": [{"port": 80}], "loadBalancerIP": "127.24.4.9"}),
                json!({LB_IPV4: "127.24.4.10"}),
            ),
        )
        .unwrap();
        assert_eq!(s.ip.as_deref(), Some("127.24.4.10"));
        assert!(s.rules[0].probe.is_none(), "no NodePort, no Tcp probe");
        let s = spec_of(
            &c,
            &svc(json!({"ports": [{"port": 80, "nodePort": 30080}]}),
                json!({PROBE_PROTOCOL: "https", PROBE_PATH: "/ready", SOURCE_RANGES: "10.1.0.0/16"})),
        )
        .unwrap();
        assert_eq!(s.rules[0].probe.as_ref().unwrap().protocol, "Https");
        assert_eq!(
            s.rules[0].probe.as_ref().unwrap().path.as_deref(),
            Some("/ready")
        );
        assert_eq!(s.sources, ["10.1.0.0/16"]);
    }

    #[test]
    fn values_it_cannot_take_are_refused_by_name() {
        let c = config("");
        let ports = json!({"ports": [{"port": 80, "nodePort": 30080}]});
        for (annotations, says) in [
            (json!({INTERNAL: "yes"}), INTERNAL),
            (json!({INTERNAL_SUBNET: "other"}), INTERNAL_SUBNET),
            (json!({INTERNAL: "true", PIP_NAME: "mine"}), PIP_NAME),
            (json!({INTERNAL: "true", DNS_LABEL: "web"}), DNS_LABEL),
            (json!({IDLE_TIMEOUT: "31"}), IDLE_TIMEOUT),
            (json!({IDLE_TIMEOUT: "x"}), IDLE_TIMEOUT),
            (json!({PROBE_PROTOCOL: "Udp"}), PROBE_PROTOCOL),
            (json!({PROBE_INTERVAL: "4"}), PROBE_INTERVAL),
            (json!({PROBE_INTERVAL: "60", PROBE_COUNT: "2"}), PROBE_COUNT),
            (json!({PIP_TAGS: "novalue"}), PIP_TAGS),
            (json!({PIP_NAME: " "}), PIP_NAME),
            (
                json!({DISABLE_FLOATING_IP: "true", SHARED_RULE: "true"}),
                SHARED_RULE,
            ),
            (json!({LB_IPV4: "::1"}), LB_IPV4),
            (
                json!({"service.beta.kubernetes.io/port_80_no_lb_rule": "true"}),
                "port_80_no_lb_rule",
            ),
            (json!({MODE: "__auto__"}), MODE),
        ] {
            let e = err(&c, &svc(ports.clone(), annotations.clone()));
            assert!(
                e.contains(says) && e.contains("annotation"),
                "{annotations}: {e}"
            );
        }
        for (spec, says) in [
            (json!({"ports": []}), "no ports"),
            (json!({"ports": [{"port": 80, "protocol": "SCTP"}]}), "SCTP"),
            (
                json!({"ports": [{"port": 80}], "externalTrafficPolicy": "Local"}),
                "spec.healthCheckNodePort",
            ),
            (
                json!({"ports": [{"port": 80}], "loadBalancerSourceRanges": ["10.0.0.0"]}),
                "spec.loadBalancerSourceRanges",
            ),
            (
                json!({"ports": [{"port": 80}], "ipFamilies": ["IPv6"]}),
                "spec.ipFamilies: IPv6",
            ),
        ] {
            let e = err(&c, &svc(spec.clone(), json!({})));
            assert!(e.contains(says), "{spec}: {e}");
        }
        // Floating IP off needs the NodePorts.
        let e = err(
            &c,
            &svc(
                json!({"ports": [{"port": 80}], "allocateLoadBalancerNodePorts": false}),
                json!({DISABLE_FLOATING_IP: "true"}),
            ),
        );
        assert!(
            e.contains("spec.allocateLoadBalancerNodePorts: false"),
            "{e}"
        );
        let e = err(
            &c,
            &svc(
                json!({"ports": [{"port": 80}]}),
                json!({DISABLE_FLOATING_IP: "true"}),
            ),
        );
        assert!(e.contains("no NodePort"), "{e}");
        // An internal load balancer needs its subnet and virtual network.
        let bare = Config {
            subnet_name: None,
            ..config("")
        };
        assert!(err(&bare, &svc(ports.clone(), json!({INTERNAL: "true"}))).contains("subnetName"));
        let no_vnet = Config {
            vnet_name: None,
            ..config("")
        };
        assert!(err(&no_vnet, &svc(ports, json!({INTERNAL: "true"}))).contains("vnetName"));
    }
}
