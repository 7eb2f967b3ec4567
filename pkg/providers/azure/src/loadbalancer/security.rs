//! The Service's rules in the cluster's network security group (config `securityGroupName`
//! in `securityGroupResourceGroup`), as upstream v1.20's `reconcileSecurityGroup`: one
//! `Allow`/`Inbound` rule per port and source, named `<prefix>-<PROTOCOL>-<port>-<source>`
//! (`/` as `_`), sources `spec.loadBalancerSourceRanges` (or the generic annotation) else
//! `Internet` (none for an internal load balancer open to all, as upstream), destination the
//! frontend's address and the Service port, priorities the lowest free from 500 (below 4096,
//! counting every rule of the group). With `azure-shared-securityrule` the rules are
//! `shared-<PROTOCOL>-<port>-<source>`, their destinations the addresses of every Service
//! sharing them. With floating IP off (newer upstream) packets reach the nodes' own addresses
//! at the NodePort, so the rule opens the NodePort to the pool members' addresses. The local
//! cloud enforces the members' NIC and subnet groups on the load balancer's traffic at the
//! backend port. Nothing is sent when nothing changed.

use crate::error::{Error, Result};
use crate::models::{NetworkSecurityGroup, SecurityRule};

use super::names::{owned, security_rule_name};
use super::spec::Spec;

/// The lowest priority the provider gives.
const FIRST_PRIORITY: i32 = 500;
/// The first priority it does not give.
const PRIORITY_END: i32 = 4096;

/// The shared rules' name prefix.
const SHARED: &str = "shared-";

/// The rules `spec` wants, its frontend being at `ip` and its pool members at `members`.
pub(super) fn wanted_rules(spec: &Spec, ip: &str, members: &[String]) -> Vec<SecurityRule> {
    let destinations: Vec<String> = if spec.floating_ip {
        vec![ip.to_owned()]
    } else {
        members.to_vec()
    };
    if destinations.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for r in &spec.rules {
        let port = if spec.floating_ip {
            r.port
        } else {
            r.backend_port
        };
        for source in &spec.sources {
            let mut rule = SecurityRule {
                name: Some(security_rule_name(
                    &spec.prefix,
                    spec.shared_rule,
                    r.k8s_protocol,
                    r.port,
                    source,
                )),
                ..Default::default()
            };
            let p = &mut rule.properties;
            p.protocol = Some(r.protocol.into());
            p.source_port_range = Some("*".into());
            p.destination_port_range = Some(port.to_string());
            p.source_address_prefix = Some(source.clone());
            if destinations.len() == 1 && !spec.shared_rule {
                p.destination_address_prefix = destinations.first().cloned();
            } else {
                p.destination_address_prefixes.clone_from(&destinations);
            }
            p.access = Some("Allow".into());
            p.direction = Some("Inbound".into());
            out.push(rule);
        }
    }
    out
}

/// A rule's destinations, one list whichever field holds them, sorted.
fn destinations(rule: &SecurityRule) -> Vec<String> {
    let p = &rule.properties;
    let mut all: Vec<String> = p
        .destination_address_prefixes
        .iter()
        .chain(p.destination_address_prefix.iter())
        .cloned()
        .collect();
    all.sort();
    all.dedup();
    all
}

fn same_rule(have: &SecurityRule, want: &SecurityRule) -> bool {
    let (h, w) = (&have.properties, &want.properties);
    let lower = |v: &Option<String>| v.as_deref().map(str::to_lowercase);
    lower(&h.protocol) == lower(&w.protocol)
        && h.source_port_range == w.source_port_range
        && h.destination_port_range == w.destination_port_range
        && h.source_address_prefix == w.source_address_prefix
        && destinations(have) == destinations(want)
        && lower(&h.access) == lower(&w.access)
        && lower(&h.direction) == lower(&w.direction)
}

fn same_name(a: Option<&str>, b: Option<&str>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a.eq_ignore_ascii_case(b))
}

/// The lowest free priority from 500 (upstream's `getNextAvailablePriority`).
fn next_priority(rules: &[SecurityRule], service: &str) -> Result<i32> {
    (FIRST_PRIORITY..PRIORITY_END)
        .find(|p| !rules.iter().any(|r| r.properties.priority == Some(*p)))
        .ok_or_else(|| Error::LoadBalancer {
            service: service.into(),
            message: format!(
                "no security rule priority from {FIRST_PRIORITY} to {} is free",
                PRIORITY_END - 1
            ),
        })
}

/// Brings the group's rules of the Service (prefix `spec_prefix`) to `want` (empty: none),
/// shared or not; `ip` is the Service's address in the shared rules (unknown: they are left
/// as they are). Whether anything changed.
pub(super) fn reconcile(
    nsg: &mut NetworkSecurityGroup,
    prefix: &str,
    service: &str,
    ip: Option<&str>,
    want: &[SecurityRule],
) -> Result<bool> {
    let shared_want: Vec<&SecurityRule> = want
        .iter()
        .filter(|w| owned(w.name.as_deref(), SHARED))
        .collect();
    let own_want: Vec<&SecurityRule> = want
        .iter()
        .filter(|w| !owned(w.name.as_deref(), SHARED))
        .collect();
    let rules = &mut nsg.properties.security_rules;
    let before = rules.clone();
    // The Service's own rules: kept when the same, else replaced at the same priority.
    let mut kept = Vec::new();
    let mut freed = Vec::new();
    rules.retain(|r| {
        if !owned(r.name.as_deref(), prefix) {
            return true;
        }
        let same_named = own_want
            .iter()
            .find(|w| same_name(w.name.as_deref(), r.name.as_deref()));
        match same_named {
            Some(w) if same_rule(r, w) => {
                kept.push(r.name.clone());
                true
            }
            Some(_) => {
                freed.push((r.name.clone(), r.properties.priority));
                false
            }
            None => false,
        }
    });
    for w in own_want {
        if kept
            .iter()
            .any(|k| same_name(k.as_deref(), w.name.as_deref()))
        {
            continue;
        }
        let mut rule = w.clone();
        rule.properties.priority = match freed
            .iter()
            .find(|(n, _)| same_name(n.as_deref(), w.name.as_deref()))
            .and_then(|(_, p)| *p)
        {
            Some(p) => Some(p),
            None => Some(next_priority(rules, service)?),
        };
        rules.push(rule);
    }
    // Shared rules: the Service's address in those it wants, out of the others.
    if let Some(ip) = ip {
        let mut present = Vec::new();
        for r in rules
            .iter_mut()
            .filter(|r| owned(r.name.as_deref(), SHARED))
        {
            let mut dests = destinations(r);
            let wanted = shared_want
                .iter()
                .any(|w| same_name(w.name.as_deref(), r.name.as_deref()));
            if wanted {
                present.push(r.name.clone());
                if !dests.iter().any(|d| d == ip) {
                    dests.push(ip.to_owned());
                }
            } else {
                dests.retain(|d| d != ip);
            }
            dests.sort();
            dests.dedup();
            if dests != r.properties.destination_address_prefixes
                || r.properties.destination_address_prefix.is_some()
            {
                r.properties.destination_address_prefix = None;
                r.properties.destination_address_prefixes = dests;
            }
        }
        rules.retain(|r| {
            !owned(r.name.as_deref(), SHARED)
                || !r.properties.destination_address_prefixes.is_empty()
        });
        for w in shared_want {
            if present
                .iter()
                .any(|k| same_name(k.as_deref(), w.name.as_deref()))
            {
                continue;
            }
            let mut rule = w.clone();
            rule.properties.priority = Some(next_priority(rules, service)?);
            rules.push(rule);
        }
    }
    Ok(*rules != before)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::Config;
    use k8s_openapi::api::core::v1::Service;
    use serde_json::{json, Value};

    fn spec(uid: &str, annotations: Value, extra: Value) -> Spec {
        let c = Config::parse(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientId": "c", "aadClientSecret": "x"}"#,
            "azure.json",
        )
        .unwrap();
        let mut spec = json!({"ports": [{"port": 80, "nodePort": 30080}]});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let svc: Service =
            serde_json::from_value(json!({"metadata": {"name": uid, "namespace": "ns",
            "uid": uid, "annotations": annotations}, "spec": spec}))
            .unwrap();
        super::super::spec::spec_of(&c, &svc).unwrap()
    }

    fn foreign(name: &str, priority: i32) -> SecurityRule {
        let mut r = SecurityRule {
            name: Some(name.into()),
            ..Default::default()
        };
        r.properties.priority = Some(priority);
        r
    }

    #[test]
    fn rules_are_named_prioritised_and_removed_as_upstream() {
        let s = spec(
            "one",
            json!({}),
            json!({"loadBalancerSourceRanges": ["10.0.0.0/8", "127.0.0.0/8"]}),
        );
        let mut nsg = NetworkSecurityGroup::default();
        nsg.properties.security_rules.push(foreign("ssh", 500));
        let want = wanted_rules(&s, "127.24.4.2", &[]);
        assert!(reconcile(&mut nsg, &s.prefix, &s.service, Some("127.24.4.2"), &want).unwrap());
        let rules = &nsg.properties.security_rules;
        let named: Vec<_> = rules
            .iter()
            .map(|r| (r.name.clone().unwrap(), r.properties.priority.unwrap()))
            .collect();
        assert_eq!(
            named,
            [
                ("ssh".into(), 500),
                ("aone-TCP-80-10.0.0.0_8".into(), 501),
                ("aone-TCP-80-127.0.0.0_8".into(), 502)
            ]
        );
        let p = &rules[1].properties;
        assert_eq!(
            (
                p.destination_port_range.as_deref(),
                p.destination_address_prefix.as_deref(),
                p.source_address_prefix.as_deref()
            ),
            (Some("80"), Some("127.24.4.2"), Some("10.0.0.0/8"))
        );
        assert!(!reconcile(&mut nsg, &s.prefix, &s.service, Some("127.24.4.2"), &want).unwrap());
        // Floating IP off: the NodePort, to the members.
        let off = spec(
            "one",
            json!({"service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip": "true"}),
            json!({}),
        );
        let want = wanted_rules(
            &off,
            "127.24.4.2",
            &["127.5.1.4".into(), "127.5.1.5".into()],
        );
        assert_eq!(want.len(), 1);
        assert_eq!(
            want[0].properties.destination_port_range.as_deref(),
            Some("30080")
        );
        assert_eq!(
            want[0].properties.destination_address_prefixes,
            ["127.5.1.4", "127.5.1.5"]
        );
        assert!(reconcile(
            &mut nsg,
            &off.prefix,
            &off.service,
            Some("127.24.4.2"),
            &want
        )
        .unwrap());
        assert_eq!(nsg.properties.security_rules.len(), 2);
        assert_eq!(
            nsg.properties.security_rules[1].properties.priority,
            Some(501)
        );
        assert!(
            wanted_rules(&off, "127.24.4.2", &[]).is_empty(),
            "no members, nothing to open"
        );
        // Deleting removes the Service's own rules only.
        assert!(reconcile(&mut nsg, &off.prefix, &off.service, None, &[]).unwrap());
        assert_eq!(nsg.properties.security_rules, [foreign("ssh", 500)]);
    }

    #[test]
    fn shared_rules_hold_every_services_address() {
        let shared = json!({"service.beta.kubernetes.io/azure-shared-securityrule": "true"});
        let (a, b) = (
            spec("aa", shared.clone(), json!({})),
            spec("bb", shared, json!({})),
        );
        let mut nsg = NetworkSecurityGroup::default();
        let wa = wanted_rules(&a, "127.24.4.2", &[]);
        assert_eq!(wa[0].name.as_deref(), Some("shared-TCP-80-Internet"));
        assert!(reconcile(&mut nsg, &a.prefix, &a.service, Some("127.24.4.2"), &wa).unwrap());
        let wb = wanted_rules(&b, "127.24.4.3", &[]);
        assert!(reconcile(&mut nsg, &b.prefix, &b.service, Some("127.24.4.3"), &wb).unwrap());
        assert_eq!(nsg.properties.security_rules.len(), 1);
        assert_eq!(
            nsg.properties.security_rules[0]
                .properties
                .destination_address_prefixes,
            ["127.24.4.2", "127.24.4.3"]
        );
        assert!(reconcile(&mut nsg, &a.prefix, &a.service, Some("127.24.4.2"), &[]).unwrap());
        assert_eq!(
            nsg.properties.security_rules[0]
                .properties
                .destination_address_prefixes,
            ["127.24.4.3"]
        );
        assert!(reconcile(&mut nsg, &b.prefix, &b.service, Some("127.24.4.3"), &[]).unwrap());
        assert!(
            nsg.properties.security_rules.is_empty(),
            "the last address takes the rule"
        );
    }

    #[test]
    fn priorities_run_out_at_4096() {
        let rules: Vec<SecurityRule> = (500..4096).map(|p| foreign(&format!("r{p}"), p)).collect();
        assert!(next_priority(&rules, "ns/web")
            .unwrap_err()
            .to_string()
            .contains("4095"));
        assert_eq!(next_priority(&rules[1..], "ns/web").unwrap(), 500);
    }
}
