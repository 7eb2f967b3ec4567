//! A Service's parts of the cluster's load balancer, as upstream v1.20's
//! `reconcileLoadBalancer` edits them in memory before one PUT: the backend pool (named after
//! the cluster), the Service's frontend, and a rule and probe per port; a part is the
//! Service's when its name starts with the rule prefix (`serviceOwnsRule`). Parts that are
//! already as wanted are left as ARM shows them, so an unchanged Service sends no PUT.

use crate::models::{
    BackendAddressPool, FrontendIpConfiguration, LoadBalancer, LoadBalancingRule, Probe, Reference,
};

use super::names::owned;
use super::spec::Spec;

/// `<lb>/<collection>/<name>`.
pub(super) fn child_id(lb_id: &str, collection: &str, name: &str) -> String {
    format!("{lb_id}/{collection}/{name}")
}

fn same_id(a: Option<&Reference>, b: Option<&Reference>) -> bool {
    let id = |r: Option<&Reference>| r.and_then(|r| r.id.as_deref()).map(str::to_lowercase);
    id(a) == id(b)
}

fn same_name(a: Option<&str>, b: &str) -> bool {
    a.is_some_and(|a| a.eq_ignore_ascii_case(b))
}

/// What the Service wants on the load balancer.
pub(super) struct Wanted {
    /// The pool's name (the cluster's).
    pub pool: String,
    pub frontend: FrontendIpConfiguration,
    pub probes: Vec<Probe>,
    pub rules: Vec<LoadBalancingRule>,
}

/// The frontend, rules and probes of `spec` on the load balancer `lb_id`, whose frontend
/// is `frontend` (a public IP's or a subnet's) and backend pool `pool`.
pub(super) fn wanted(
    spec: &Spec,
    lb_id: &str,
    pool: &str,
    frontend: FrontendIpConfiguration,
) -> Wanted {
    let pool_id = child_id(lb_id, "backendAddressPools", pool);
    let frontend_id = child_id(lb_id, "frontendIPConfigurations", &spec.frontend_name);
    let mut probes = Vec::new();
    let mut rules = Vec::new();
    for r in &spec.rules {
        let mut rule = LoadBalancingRule {
            name: Some(r.name.clone()),
            ..Default::default()
        };
        if let Some(p) = &r.probe {
            let mut probe = Probe {
                name: Some(r.name.clone()),
                ..Default::default()
            };
            probe.properties.protocol = Some(p.protocol.into());
            probe.properties.port = Some(p.port);
            probe.properties.request_path.clone_from(&p.path);
            probe.properties.interval_in_seconds = Some(p.interval);
            probe.properties.number_of_probes = Some(p.count);
            probes.push(probe);
            rule.properties.probe = Some(Reference::to(child_id(lb_id, "probes", &r.name)));
        }
        let rp = &mut rule.properties;
        rp.frontend_ip_configuration = Some(Reference::to(frontend_id.clone()));
        rp.backend_address_pool = Some(Reference::to(pool_id.clone()));
        rp.protocol = Some(r.protocol.into());
        rp.frontend_port = Some(r.port);
        rp.backend_port = Some(r.backend_port);
        rp.enable_floating_ip = Some(spec.floating_ip);
        rp.load_distribution = Some(spec.distribution.into());
        rp.idle_timeout_in_minutes = r.idle_timeout;
        rp.enable_tcp_reset = r.tcp_reset;
        rp.disable_outbound_snat = r.disable_outbound_snat;
        rules.push(rule);
    }
    Wanted {
        pool: pool.to_owned(),
        frontend,
        probes,
        rules,
    }
}

/// Whether an existing frontend is the wanted one (upstream compares the public IP, or the
/// subnet and a static address).
fn same_frontend(have: &FrontendIpConfiguration, want: &FrontendIpConfiguration) -> bool {
    let (h, w) = (&have.properties, &want.properties);
    if w.public_ip_address.is_some() {
        return same_id(h.public_ip_address.as_ref(), w.public_ip_address.as_ref());
    }
    let method = |m: &Option<String>| m.as_deref().unwrap_or("Dynamic").to_lowercase();
    same_id(h.subnet.as_ref(), w.subnet.as_ref())
        && h.public_ip_address.is_none()
        && method(&h.private_ip_allocation_method) == method(&w.private_ip_allocation_method)
        && (method(&w.private_ip_allocation_method) != "static"
            || h.private_ip_address == w.private_ip_address)
}

/// Probes by name, protocol, port, interval, count and path.
fn same_probe(have: &Probe, want: &Probe) -> bool {
    let (h, w) = (&have.properties, &want.properties);
    let proto = |p: &Option<String>| p.as_deref().map(str::to_lowercase);
    proto(&h.protocol) == proto(&w.protocol)
        && h.port == w.port
        && h.interval_in_seconds == w.interval_in_seconds
        && h.number_of_probes == w.number_of_probes
        && h.request_path == w.request_path
}

/// Rules as upstream's `equalLoadBalancingRulePropertiesFormat`: protocol, frontend, pool,
/// probe, distribution, ports, floating IP, and the options set on the wanted rule.
fn same_rule(have: &LoadBalancingRule, want: &LoadBalancingRule) -> bool {
    let (h, w) = (&have.properties, &want.properties);
    let lower = |p: &Option<String>| p.as_deref().map(str::to_lowercase);
    let set_and_same = |h: Option<bool>, w: Option<bool>| w.is_none_or(|w| h.unwrap_or(false) == w);
    lower(&h.protocol) == lower(&w.protocol)
        && same_id(
            h.frontend_ip_configuration.as_ref(),
            w.frontend_ip_configuration.as_ref(),
        )
        && same_id(
            h.backend_address_pool.as_ref(),
            w.backend_address_pool.as_ref(),
        )
        && same_id(h.probe.as_ref(), w.probe.as_ref())
        && lower(&h.load_distribution) == lower(&w.load_distribution)
        && h.frontend_port == w.frontend_port
        && h.backend_port == w.backend_port
        && h.enable_floating_ip.unwrap_or(false) == w.enable_floating_ip.unwrap_or(false)
        && set_and_same(h.enable_tcp_reset, w.enable_tcp_reset)
        && set_and_same(h.disable_outbound_snat, w.disable_outbound_snat)
        && w.idle_timeout_in_minutes
            .is_none_or(|t| h.idle_timeout_in_minutes == Some(t))
}

/// Keeps the owned items of `list` that are wanted and the same, removes the other owned
/// ones, and adds what is missing; whether anything changed.
fn converge<T: Clone>(
    list: &mut Vec<T>,
    want: &[T],
    prefix: &str,
    name: impl Fn(&T) -> Option<&str>,
    same: impl Fn(&T, &T) -> bool,
) -> bool {
    let before = list.len();
    let mut kept = Vec::new();
    list.retain(|item| {
        if !owned(name(item), prefix) {
            return true;
        }
        let keep = want
            .iter()
            .any(|w| same_name(name(item), name(w).unwrap_or_default()) && same(item, w));
        if keep {
            kept.push(name(item).unwrap_or_default().to_lowercase());
        }
        keep
    });
    let mut dirty = list.len() != before;
    for w in want {
        let n = name(w).unwrap_or_default().to_lowercase();
        if !kept.contains(&n) {
            list.push(w.clone());
            dirty = true;
        }
    }
    dirty
}

/// Puts the Service's parts on `lb` (in memory): the pool, its frontend, rules and probes;
/// whether anything changed.
pub(super) fn put_parts(lb: &mut LoadBalancer, prefix: &str, want: &Wanted) -> bool {
    let p = &mut lb.properties;
    let mut dirty = false;
    if !p
        .backend_address_pools
        .iter()
        .any(|b| same_name(b.name.as_deref(), &want.pool))
    {
        p.backend_address_pools.push(BackendAddressPool {
            name: Some(want.pool.clone()),
            ..Default::default()
        });
        dirty = true;
    }
    dirty |= converge(
        &mut p.frontend_ip_configurations,
        std::slice::from_ref(&want.frontend),
        prefix,
        |f| f.name.as_deref(),
        same_frontend,
    );
    dirty |= converge(
        &mut p.probes,
        &want.probes,
        prefix,
        |x| x.name.as_deref(),
        same_probe,
    );
    dirty |= converge(
        &mut p.load_balancing_rules,
        &want.rules,
        prefix,
        |x| x.name.as_deref(),
        same_rule,
    );
    dirty
}

/// Takes the Service's frontend, rules and probes off `lb` (in memory); whether it had any.
pub(super) fn remove_parts(lb: &mut LoadBalancer, prefix: &str) -> bool {
    let p = &mut lb.properties;
    let before = (
        p.frontend_ip_configurations.len(),
        p.load_balancing_rules.len(),
        p.probes.len(),
    );
    p.frontend_ip_configurations
        .retain(|f| !owned(f.name.as_deref(), prefix));
    p.load_balancing_rules
        .retain(|r| !owned(r.name.as_deref(), prefix));
    p.probes.retain(|r| !owned(r.name.as_deref(), prefix));
    before
        != (
            p.frontend_ip_configurations.len(),
            p.load_balancing_rules.len(),
            p.probes.len(),
        )
}

/// The Service's frontend on `lb`, if it has one.
pub(super) fn own_frontend<'a>(
    lb: &'a LoadBalancer,
    prefix: &str,
) -> Option<&'a FrontendIpConfiguration> {
    lb.properties
        .frontend_ip_configurations
        .iter()
        .find(|f| owned(f.name.as_deref(), prefix))
}

/// Whether `lb` has any part of the Service.
pub(super) fn has_parts(lb: &LoadBalancer, prefix: &str) -> bool {
    let p = &lb.properties;
    own_frontend(lb, prefix).is_some()
        || p.load_balancing_rules
            .iter()
            .any(|r| owned(r.name.as_deref(), prefix))
        || p.probes.iter().any(|r| owned(r.name.as_deref(), prefix))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::Config;
    use k8s_openapi::api::core::v1::Service;
    use serde_json::json;

    const LB: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes";

    fn spec(uid: &str, port: i32) -> Spec {
        let c = Config::parse(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientId": "c", "aadClientSecret": "x", "loadBalancerSku": "standard"}"#,
            "azure.json",
        )
        .unwrap();
        let svc: Service =
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns",
            "uid": uid}, "spec": {"ports": [{"port": port, "nodePort": 30000 + port}]}}))
            .unwrap();
        super::super::spec::spec_of(&c, &svc).unwrap()
    }

    fn frontend(name: &str, pip: &str) -> FrontendIpConfiguration {
        let mut f = FrontendIpConfiguration {
            name: Some(name.into()),
            ..Default::default()
        };
        f.properties.public_ip_address = Some(Reference::to(pip));
        f
    }

    #[test]
    fn parts_converge_and_leave_other_services_alone() {
        let (a, b) = (spec("aaaa", 80), spec("bbbb", 443));
        let mut lb = LoadBalancer::default();
        let want_a = wanted(&a, LB, "kubernetes", frontend(&a.frontend_name, "/pip/a"));
        assert!(put_parts(&mut lb, &a.prefix, &want_a));
        assert!(
            !put_parts(&mut lb, &a.prefix, &want_a),
            "nothing changes the second time"
        );
        let want_b = wanted(&b, LB, "kubernetes", frontend(&b.frontend_name, "/pip/b"));
        assert!(put_parts(&mut lb, &b.prefix, &want_b));
        let p = &lb.properties;
        assert_eq!(
            (
                p.backend_address_pools.len(),
                p.frontend_ip_configurations.len(),
                p.load_balancing_rules.len(),
                p.probes.len()
            ),
            (1, 2, 2, 2)
        );
        let rule = &p.load_balancing_rules[0].properties;
        assert_eq!(
            rule.probe.as_ref().unwrap().id.as_deref(),
            Some(&*format!("{LB}/probes/aaaaa-TCP-80"))
        );
        assert_eq!(
            (
                rule.frontend_port,
                rule.backend_port,
                rule.enable_floating_ip
            ),
            (Some(80), Some(80), Some(true))
        );
        // As ARM shows it (case, defaults filled in): still the same.
        let mut shown = lb.clone();
        let r = &mut shown.properties.load_balancing_rules[0];
        r.properties.idle_timeout_in_minutes = Some(4);
        r.properties.frontend_ip_configuration.as_mut().unwrap().id = Some(format!(
            "{}/frontendIPConfigurations/aaaaa",
            LB.to_uppercase()
        ));
        assert!(!put_parts(&mut shown, &a.prefix, &want_a));
        // Another public IP replaces the frontend in place.
        let moved = wanted(
            &a,
            LB,
            "kubernetes",
            frontend(&a.frontend_name, "/pip/other"),
        );
        assert!(put_parts(&mut lb, &a.prefix, &moved));
        assert_eq!(lb.properties.frontend_ip_configurations.len(), 2);
        assert!(has_parts(&lb, &a.prefix));
        assert!(remove_parts(&mut lb, &a.prefix));
        assert!(!has_parts(&lb, &a.prefix));
        assert!(has_parts(&lb, &b.prefix));
        assert_eq!(
            lb.properties.backend_address_pools.len(),
            1,
            "the pool stays"
        );
        assert!(!remove_parts(&mut lb, &a.prefix));
    }
}
