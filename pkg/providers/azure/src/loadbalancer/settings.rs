//! The table of what this provider does with each load balancer setting a Service can ask
//! for ([`SERVICE_SETTINGS`]): upstream v1.20's annotations (`azure_loadbalancer.go` consts),
//! the newer ones of cloud-provider-azure v1.32 (`consts.go`), the generic source-range
//! annotation, and the Service fields of [`hypercloud_cloudprovider::lb_settings`].

use hypercloud_cloudprovider::{LbSetting, Setting};

/// `"true"`: an internal load balancer (`<cluster>-internal`) with a private frontend.
pub(super) const INTERNAL: &str = "service.beta.kubernetes.io/azure-load-balancer-internal";
/// The internal frontend's subnet (else config `subnetName`); also a segment of the names.
pub(super) const INTERNAL_SUBNET: &str =
    "service.beta.kubernetes.io/azure-load-balancer-internal-subnet";
/// Which availability set's load balancer: refused.
pub(super) const MODE: &str = "service.beta.kubernetes.io/azure-load-balancer-mode";
/// The public IP's DNS label.
pub(super) const DNS_LABEL: &str = "service.beta.kubernetes.io/azure-dns-label-name";
/// `"true"`: consolidated `shared-*` security rules.
pub(super) const SHARED_RULE: &str = "service.beta.kubernetes.io/azure-shared-securityrule";
/// The public IP's resource group.
pub(super) const PIP_RESOURCE_GROUP: &str =
    "service.beta.kubernetes.io/azure-load-balancer-resource-group";
/// An existing public IP to use.
pub(super) const PIP_NAME: &str = "service.beta.kubernetes.io/azure-pip-name";
/// Extra tags on the public IP (`a=b,c=d`).
pub(super) const PIP_TAGS: &str = "service.beta.kubernetes.io/azure-pip-tags";
/// TCP rules' idle timeout, minutes.
pub(super) const IDLE_TIMEOUT: &str =
    "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout";
/// `"true"`: no TCP reset on idle (standard SKU).
pub(super) const DISABLE_TCP_RESET: &str =
    "service.beta.kubernetes.io/azure-load-balancer-disable-tcp-reset";
/// The probes' protocol (`Tcp`, `Http`, `Https`).
pub(super) const PROBE_PROTOCOL: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-protocol";
/// The HTTP(S) probes' path.
pub(super) const PROBE_PATH: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-request-path";
/// Seconds between probes.
pub(super) const PROBE_INTERVAL: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-interval";
/// Failed probes before a backend is out.
pub(super) const PROBE_COUNT: &str =
    "service.beta.kubernetes.io/azure-load-balancer-health-probe-num-of-probe";
/// `"true"`: rules without floating IP, the backend port being the NodePort.
pub(super) const DISABLE_FLOATING_IP: &str =
    "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip";
/// The IPv4 address, replacing `spec.loadBalancerIP`.
pub(super) const LB_IPV4: &str = "service.beta.kubernetes.io/azure-load-balancer-ipv4";
/// The generic source ranges, read when `spec.loadBalancerSourceRanges` is empty.
pub(super) const SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
/// Newer upstream's per-port annotations (`port_80_no_lb_rule`, `port_80_health-probe_port`):
/// refused by name, whatever the port.
pub(super) const PER_PORT: &str = "service.beta.kubernetes.io/port_";

/// Every annotation of upstream v1.20 and the newer ones of v1.32, the generic source-range
/// annotation, and the Service fields a load balancer may be asked for: what this provider
/// does with each ([`hypercloud_cloudprovider::lb_settings`]; the check and the tests read it).
/// The per-port annotations (`service.beta.kubernetes.io/port_<N>_...`) are refused by name
/// too, outside the table (their names are not fixed).
pub const SERVICE_SETTINGS: &[LbSetting] = &[
    LbSetting::implemented(Setting::Annotation(INTERNAL), "`true`: the Service's frontend is on `<cluster>-internal`, with a private address from config `subnetName` in `vnetName`; `false` or absent: public"),
    LbSetting::implemented(Setting::Annotation(INTERNAL_SUBNET), "the internal frontend's subnet in `vnetName`, and a segment of the frontend and rule names, as upstream (refused on a public load balancer)"),
    LbSetting::implemented(Setting::Annotation(PIP_NAME), "an existing public IP (in the public IPs' group) for the frontend; never deleted by the provider (refused on an internal load balancer)"),
    LbSetting::implemented(Setting::Annotation(PIP_RESOURCE_GROUP), "the resource group of the public IP, looked up or made there (refused on an internal load balancer)"),
    LbSetting::implemented(Setting::Annotation(DNS_LABEL), "`dnsSettings.domainNameLabel` of the public IP, tagged `kubernetes-dns-label-service`; empty removes it; a label another Service set is refused (refused on an internal load balancer)"),
    LbSetting::implemented(Setting::Annotation(PIP_TAGS), "`a=b,c=d`: tags added to the public IP (refused on an internal load balancer)"),
    LbSetting::implemented(Setting::Annotation(IDLE_TIMEOUT), "minutes, 4 to 30: `idleTimeoutInMinutes` of the TCP rules"),
    LbSetting::implemented(Setting::Annotation(DISABLE_TCP_RESET), "`true`: `enableTcpReset: false` on standard SKU TCP rules (newer upstream; v1.20 ignored it); basic rules have no reset"),
    LbSetting::implemented(Setting::Annotation(PROBE_PROTOCOL), "`Tcp`, `Http` or `Https`: the probes' protocol"),
    LbSetting::implemented(Setting::Annotation(PROBE_PATH), "the `Http`/`Https` probes' path (default `/healthz`); unused by `Tcp` probes"),
    LbSetting::implemented(Setting::Annotation(PROBE_INTERVAL), "seconds between probes, at least 5 (default 5), interval × count under 120 (newer upstream)"),
    LbSetting::implemented(Setting::Annotation(PROBE_COUNT), "failed probes before a backend is out, at least 2 (default 2) (newer upstream)"),
    LbSetting::implemented(Setting::Annotation(DISABLE_FLOATING_IP), "`true`: `enableFloatingIP: false` and the backend port is the NodePort, the security rules opening the NodePorts to the nodes' addresses (newer upstream); the local cloud's data plane, a proxy to member:backendPort, reaches a node's NodePort only so"),
    LbSetting::implemented(Setting::Annotation(SHARED_RULE), "`true`: consolidated security rules `shared-<PROTOCOL>-<port>-<source>` whose destinations are the Services' addresses (refused with floating IP off)"),
    LbSetting::implemented(Setting::Annotation(LB_IPV4), "the frontend's IPv4 address, as `spec.loadBalancerIP` (newer upstream; read first)"),
    LbSetting::implemented(Setting::Annotation(SOURCE_RANGES), "the security rules' sources when `spec.loadBalancerSourceRanges` is empty"),
    LbSetting::refused(Setting::Annotation(MODE), "selecting an availability set's load balancer is not implemented: one load balancer per cluster"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pip-ip-tags"), "public IP ipTags are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-allowed-service-tags"), "service tags as security rule sources are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-load-balancer-mixed-protocols"), "rules for the other protocol are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-load-balancer-enable-high-availability-ports"), "HA ports (protocol `All`) are not implemented, and the local cloud refuses them"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-load-balancer-ipv6"), "IPv6 frontends are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pip-name-ipv6"), "IPv6 frontends are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pip-prefix-id"), "public IP prefixes are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pip-prefix-id-ipv6"), "public IP prefixes are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-allowed-ip-ranges"), "use `spec.loadBalancerSourceRanges`"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-deny-all-except-load-balancer-source-ranges"), "deny-all security rules are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-additional-public-ips"), "additional public IPs are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-load-balancer-configurations"), "multiple standard load balancers are not implemented: one load balancer per cluster"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-create"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-name"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-ip-configuration-subnet"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-ip-configuration-ip-address-count"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-ip-configuration-ip-address"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-fqdns"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-proxy-protocol"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-visibility"), "private link services are not implemented"),
    LbSetting::refused(Setting::Annotation("service.beta.kubernetes.io/azure-pls-auto-approval"), "private link services are not implemented"),
    LbSetting::implemented(Setting::LoadBalancerClass, "the service controller leaves the Service to the class's controller (upstream)"),
    LbSetting::implemented(Setting::ExternalTrafficPolicyLocal, "an `Http` probe (or the protocol annotation's) of `/healthz` on `spec.healthCheckNodePort` per rule"),
    LbSetting::implemented(Setting::SessionAffinityClientIp, "the rules' `loadDistribution: SourceIP`"),
    LbSetting::refused(Setting::IpFamilyIpv6, "IPv6 frontends and pools are not implemented"),
    LbSetting::implemented(Setting::NoNodePorts, "with floating IP (the default) the backend port is the Service port, and `Tcp` probes, which need a NodePort, are left out; refused with `azure-disable-load-balancer-floating-ip`"),
    LbSetting::implemented(Setting::LoadBalancerIp, "public: the existing public IP of that address in the public IPs' group; internal: the frontend's static private address (on the local cloud, an address of its VIP pool)"),
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::Config;
    use hypercloud_cloudprovider::{lb_settings, Support};
    use k8s_openapi::api::core::v1::Service;
    use serde_json::json;

    /// A value each implemented annotation accepts where the shared walk's generic sample
    /// (`value`) is not one, and the internal annotation for the internal-only one.
    fn azure_sample(s: &Service) -> Service {
        let mut s = s.clone();
        let a = s.metadata.annotations.get_or_insert_with(Default::default);
        for (key, sample) in [
            (DISABLE_TCP_RESET, "true"),
            (PROBE_PROTOCOL, "Http"),
            (PROBE_PATH, "/healthz"),
            (PROBE_COUNT, "2"),
            (DISABLE_FLOATING_IP, "true"),
            (SHARED_RULE, "true"),
            (PIP_TAGS, "a=b"),
            (LB_IPV4, "127.24.4.10"),
        ] {
            if let Some(v) = a.get_mut(key) {
                *v = sample.into();
            }
        }
        if a.contains_key(INTERNAL_SUBNET) {
            a.insert(INTERNAL.into(), "true".into());
        }
        s
    }

    #[test]
    fn the_settings_table_is_what_the_check_does() {
        let c = Config::parse(
            r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
                "aadClientId": "c", "aadClientSecret": "x", "vnetName": "vnet", "subnetName": "nodes"}"#,
            "azure.json",
        )
        .unwrap();
        let base: Service =
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns",
            "uid": "1234", "annotations": {"example.com/own": "not ours to judge"}},
            "spec": {"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}}))
            .unwrap();
        // What ensuring runs first (`spec_of`): the walk goes through it.
        lb_settings::walk(SERVICE_SETTINGS, &base, |s| {
            super::super::spec::spec_of(&c, &azure_sample(s)).map(drop)
        })
        .unwrap();
        let implemented = SERVICE_SETTINGS
            .iter()
            .filter(|r| r.support == Support::Implemented)
            .count();
        assert_eq!((implemented, SERVICE_SETTINGS.len()), (21, 44));
    }

    #[test]
    fn lb_settings_doc() {
        let doc = hypercloud_testenv::repo_root().join("docs/guide/azure.md");
        hypercloud_cloudprovider::lb_settings::verify_doc(&doc, SERVICE_SETTINGS).unwrap();
    }
}
