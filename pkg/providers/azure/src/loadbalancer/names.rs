//! The names upstream v1.20 gives the parts of a Service's load balancer
//! (`azure_standard.go`: `getAzureLoadBalancerName`, `getDefaultFrontendIPConfigName`,
//! `getLoadBalancerRuleName`, `getPublicIPName`, `getSecurityRuleName`, `serviceOwnsRule`).

use crate::config::Config;

/// The load balancer's name (`getAzureLoadBalancerName` with one load balancer per cluster):
/// config `loadBalancerName`, else the cluster's, `-internal` added for the internal one.
pub(super) fn lb_name(config: &Config, cluster: &str, internal: bool) -> String {
    let base = config
        .load_balancer_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(cluster);
    if internal {
        format!("{base}-internal")
    } else {
        base.to_owned()
    }
}

/// The public IP the provider makes for a Service: `<cluster>-<prefix>`.
pub(super) fn pip_name(cluster: &str, prefix: &str) -> String {
    format!("{cluster}-{prefix}")
}

/// The most an Azure name of a frontend or rule holds.
pub(super) const NAME_MAX: usize = 80;

/// The rule (and probe) name: `<prefix>-<PROTOCOL>-<port>`, or with an internal subnet
/// annotation `<prefix>-<subnet>-<PROTOCOL>-<port>`, the subnet cut to keep 80 characters.
pub(super) fn rule_name(prefix: &str, subnet: Option<&str>, protocol: &str, port: i32) -> String {
    let plain = format!("{prefix}-{protocol}-{port}");
    let Some(subnet) = subnet else {
        return plain;
    };
    let room = NAME_MAX.saturating_sub(plain.len() + 1);
    let segment: String = subnet.chars().take(room).collect();
    format!("{prefix}-{segment}-{protocol}-{port}")
}

/// A security rule's name: `<prefix>-<PROTOCOL>-<port>-<source>` (`/` as `_`), or
/// `shared-<PROTOCOL>-<port>-<source>`.
pub(super) fn security_rule_name(
    prefix: &str,
    shared: bool,
    protocol: &str,
    port: i32,
    source: &str,
) -> String {
    let head = if shared { "shared" } else { prefix };
    format!("{head}-{protocol}-{port}-{}", source.replace('/', "_"))
}

/// Whether `name` belongs to the Service of `prefix` (upstream's case-insensitive prefix test).
pub(super) fn owned(name: Option<&str>, prefix: &str) -> bool {
    name.is_some_and(|n| {
        n.len() >= prefix.len()
            && n.is_char_boundary(prefix.len())
            && n[..prefix.len()].eq_ignore_ascii_case(prefix)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PREFIX: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90";

    #[test]
    fn names_are_upstreams() {
        let c = Config::parse(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientId": "c", "aadClientSecret": "x"}"#,
            "azure.json",
        )
        .unwrap();
        assert_eq!(lb_name(&c, "kubernetes", false), "kubernetes");
        assert_eq!(lb_name(&c, "kubernetes", true), "kubernetes-internal");
        let named = Config {
            load_balancer_name: Some("kube-lb".into()),
            ..c
        };
        assert_eq!(lb_name(&named, "kubernetes", true), "kube-lb-internal");
        assert_eq!(
            pip_name("kubernetes", PREFIX),
            format!("kubernetes-{PREFIX}")
        );
        assert_eq!(
            rule_name(PREFIX, None, "TCP", 80),
            format!("{PREFIX}-TCP-80")
        );
        let cut = rule_name(PREFIX, Some(&"s".repeat(70)), "UDP", 53);
        assert_eq!(cut.len(), NAME_MAX);
        assert!(cut.ends_with("s-UDP-53"), "{cut}");
        assert_eq!(
            security_rule_name(PREFIX, false, "TCP", 443, "10.0.0.0/8"),
            format!("{PREFIX}-TCP-443-10.0.0.0_8")
        );
        assert_eq!(
            security_rule_name(PREFIX, true, "UDP", 53, "Internet"),
            "shared-UDP-53-Internet"
        );
        assert!(owned(
            Some(&format!("{}-TCP-80", PREFIX.to_uppercase())),
            PREFIX
        ));
        assert!(!owned(Some("a1b2-TCP-80"), PREFIX));
        assert!(!owned(None, PREFIX));
    }
}
