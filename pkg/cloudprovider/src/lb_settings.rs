//! What a provider's load balancers do with each setting a `type: LoadBalancer` Service can ask
//! for: upstream's annotations for that cloud (the legacy in-tree provider's and the external
//! provider's) and the Service fields a load balancer honours or not (`loadBalancerClass`,
//! `externalTrafficPolicy`, `sessionAffinity`, `ipFamilies`, `allocateLoadBalancerNodePorts`,
//! `loadBalancerIP`). Each provider keeps one table of [`LbSetting`]s; the load balancer's
//! check ([`crate::LoadBalancer::check_service`], run by `ensure_load_balancer` before any
//! cloud call and by the `service-lb-annotations` webhook, [`crate::webhook`]), the guide's
//! table ([`markdown_table`]) and the tests all read it, so a Service asking for something the
//! provider cannot do is refused by the setting's name instead of silently getting a plain
//! load balancer. Upstream has no equivalent: its providers ignore what they do not read.
//! Annotations outside the table (another controller's, the user's own) are not judged.

use k8s_openapi::api::core::v1::Service;

use crate::{Error, Result};

/// One thing a Service can ask of its load balancer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The annotation of this name, with any value.
    Annotation(&'static str),
    /// `spec.loadBalancerClass` set: the service controller leaves the Service to the
    /// class's controller (upstream), so no provider ever sees it.
    LoadBalancerClass,
    /// `spec.externalTrafficPolicy: Local`.
    ExternalTrafficPolicyLocal,
    /// `spec.sessionAffinity: ClientIP`.
    SessionAffinityClientIp,
    /// `IPv6` among `spec.ipFamilies`.
    IpFamilyIpv6,
    /// `spec.allocateLoadBalancerNodePorts: false`.
    NoNodePorts,
    /// `spec.loadBalancerIP` set.
    LoadBalancerIp,
}

/// The Service fields every provider's table must have a row for.
pub const SPEC_SETTINGS: [Setting; 6] = [
    Setting::LoadBalancerClass,
    Setting::ExternalTrafficPolicyLocal,
    Setting::SessionAffinityClientIp,
    Setting::IpFamilyIpv6,
    Setting::NoNodePorts,
    Setting::LoadBalancerIp,
];

impl Setting {
    /// The setting as the docs and the messages name it (`annotation <name>` for an
    /// annotation).
    pub fn describe(&self) -> String {
        match self {
            Setting::Annotation(name) => format!("annotation {name}"),
            other => other.name().to_owned(),
        }
    }

    /// The annotation's name, or the field with the value that asks for something.
    pub fn name(&self) -> &'static str {
        match self {
            Setting::Annotation(name) => name,
            Setting::LoadBalancerClass => "spec.loadBalancerClass",
            Setting::ExternalTrafficPolicyLocal => "spec.externalTrafficPolicy: Local",
            Setting::SessionAffinityClientIp => "spec.sessionAffinity: ClientIP",
            Setting::IpFamilyIpv6 => "spec.ipFamilies: IPv6",
            Setting::NoNodePorts => "spec.allocateLoadBalancerNodePorts: false",
            Setting::LoadBalancerIp => "spec.loadBalancerIP",
        }
    }

    /// Whether the Service asks for this setting.
    pub fn asked_by(&self, service: &Service) -> bool {
        let spec = service.spec.as_ref();
        match self {
            Setting::Annotation(name) => service
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(*name)),
            Setting::LoadBalancerClass => {
                spec.and_then(|s| s.load_balancer_class.as_ref()).is_some()
            }
            Setting::ExternalTrafficPolicyLocal => {
                spec.and_then(|s| s.external_traffic_policy.as_deref()) == Some("Local")
            }
            Setting::SessionAffinityClientIp => {
                spec.and_then(|s| s.session_affinity.as_deref()) == Some("ClientIP")
            }
            Setting::IpFamilyIpv6 => spec
                .and_then(|s| s.ip_families.as_ref())
                .is_some_and(|f| f.iter().any(|f| f == "IPv6")),
            Setting::NoNodePorts => {
                spec.and_then(|s| s.allocate_load_balancer_node_ports) == Some(false)
            }
            Setting::LoadBalancerIp => spec
                .and_then(|s| s.load_balancer_ip.as_deref())
                .is_some_and(|ip| !ip.is_empty()),
        }
    }
}

/// Whether the provider does what the setting asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Read and honoured (the row says how).
    Implemented,
    /// Refused by name: the webhook denies the Service, `ensure_load_balancer` fails before
    /// any cloud call.
    Refused,
}

/// One row of a provider's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbSetting {
    /// What the Service asks.
    pub setting: Setting,
    /// What the provider does with it.
    pub support: Support,
    /// How it is implemented, or why it is refused (one sentence, no final period).
    pub why: &'static str,
}

impl LbSetting {
    /// A row for an implemented setting.
    pub const fn implemented(setting: Setting, why: &'static str) -> Self {
        LbSetting {
            setting,
            support: Support::Implemented,
            why,
        }
    }

    /// A row for a refused setting.
    pub const fn refused(setting: Setting, why: &'static str) -> Self {
        LbSetting {
            setting,
            support: Support::Refused,
            why,
        }
    }
}

/// The first refused setting of `table` the Service asks for, as the error that names it
/// (`annotation X is not supported by hypercloud's aws provider: why`).
pub fn check(provider: &str, table: &[LbSetting], service: &Service) -> Result<()> {
    match table
        .iter()
        .find(|row| row.support == Support::Refused && row.setting.asked_by(service))
    {
        None => Ok(()),
        Some(row) => Err(Error::UnsupportedServiceSetting {
            provider: provider.to_owned(),
            setting: row.setting.describe(),
            why: row.why,
        }),
    }
}

/// The guide's table of `table` (one row per setting, in table order), between the markers
/// [`DOC_BEGIN`] and [`DOC_END`].
pub fn markdown_table(table: &[LbSetting]) -> String {
    let mut out = String::from("| setting | hypercloud | how, or why not |\n|---|---|---|\n");
    for row in table {
        let support = match row.support {
            Support::Implemented => "implemented",
            Support::Refused => "**refused**",
        };
        out.push_str(&format!(
            "| `{}` | {support} | {} |\n",
            row.setting.name(),
            row.why
        ));
    }
    out
}

/// The line before a generated table in a guide page.
pub const DOC_BEGIN: &str = "<!-- lb-settings: generated from the provider's table; HYPERCLOUD_UPDATE_GOLDEN=1 cargo test lb_settings_doc rewrites it -->";
/// The line after it.
pub const DOC_END: &str = "<!-- lb-settings end -->";

/// Compares the generated table in the page at `path` with `table`; with
/// `HYPERCLOUD_UPDATE_GOLDEN` set, rewrites it instead. `Err` says what differs. For the
/// providers' unit tests.
pub fn verify_doc(path: &std::path::Path, table: &[LbSetting]) -> std::result::Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (Some(begin), Some(end)) = (text.find(DOC_BEGIN), text.find(DOC_END)) else {
        return Err(format!(
            "{}: no generated table ({DOC_BEGIN} ... {DOC_END})",
            path.display()
        ));
    };
    let start = begin + DOC_BEGIN.len() + 1;
    if start > end {
        return Err(format!("{}: markers out of order", path.display()));
    }
    let want = markdown_table(table);
    if text[start..end] == want {
        return Ok(());
    }
    if std::env::var_os("HYPERCLOUD_UPDATE_GOLDEN").is_some() {
        let updated = format!("{}{want}{}", &text[..start], &text[end..]);
        return std::fs::write(path, updated).map_err(|e| format!("{}: {e}", path.display()));
    }
    Err(format!(
        "{}: the load balancer settings table differs from the provider's; rerun with HYPERCLOUD_UPDATE_GOLDEN=1\nwant:\n{want}",
        path.display()
    ))
}

/// Checks that a provider's table has a row for every field of [`SPEC_SETTINGS`], at most
/// one row per setting, and that every refused setting is refused by `check` by name and every
/// implemented one is not: the walk each provider's unit test runs over its whole table,
/// with `base` a Service that asks for nothing and passes. `Err` names what is wrong.
pub fn walk(
    table: &[LbSetting],
    base: &Service,
    check: impl Fn(&Service) -> Result<()>,
) -> std::result::Result<(), String> {
    for field in SPEC_SETTINGS {
        if !table.iter().any(|r| r.setting == field) {
            return Err(format!("no row for {}", field.name()));
        }
    }
    for (i, row) in table.iter().enumerate() {
        if table[..i].iter().any(|r| r.setting == row.setting) {
            return Err(format!("two rows for {}", row.setting.name()));
        }
    }
    check(base).map_err(|e| format!("the base Service is refused: {}", crate::Chain(&e)))?;
    for row in table {
        if row.setting == Setting::LoadBalancerClass {
            // Never reaches a provider (the service controller and the webhook skip it).
            continue;
        }
        let service = asking(base, row.setting);
        if !row.setting.asked_by(&service) {
            return Err(format!("{} not asked", row.setting.name()));
        }
        match (row.support, check(&service)) {
            (Support::Implemented, Err(e)) => {
                return Err(format!(
                    "implemented {} refused: {}",
                    row.setting.name(),
                    crate::Chain(&e)
                ))
            }
            (Support::Refused, Ok(())) => {
                return Err(format!("refused {} accepted", row.setting.name()))
            }
            (Support::Refused, Err(e)) => {
                let message = crate::Chain(&e).to_string();
                if !message.contains(&format!("{} is not supported", row.setting.describe())) {
                    return Err(format!(
                        "{} refused without its name: {message}",
                        row.setting.name()
                    ));
                }
            }
            (Support::Implemented, Ok(())) => {}
        }
    }
    Ok(())
}

/// `base` asking for `setting` with a value the provider parses when it implements it.
fn asking(base: &Service, setting: Setting) -> Service {
    let mut s = base.clone();
    let spec = s.spec.get_or_insert_with(Default::default);
    match setting {
        Setting::Annotation(name) => {
            s.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(name.to_owned(), sample_value(name).to_owned());
        }
        Setting::LoadBalancerClass => spec.load_balancer_class = Some("example.com/lb".into()),
        Setting::ExternalTrafficPolicyLocal => {
            spec.external_traffic_policy = Some("Local".into());
            spec.health_check_node_port = Some(30999);
        }
        Setting::SessionAffinityClientIp => spec.session_affinity = Some("ClientIP".into()),
        Setting::IpFamilyIpv6 => spec.ip_families = Some(vec!["IPv6".into()]),
        Setting::NoNodePorts => spec.allocate_load_balancer_node_ports = Some(false),
        Setting::LoadBalancerIp => spec.load_balancer_ip = Some("203.0.113.10".into()),
    }
    s
}

/// A value an implemented annotation of this name accepts (numbers for counts and timeouts,
/// booleans for flags, CIDRs for source ranges).
fn sample_value(name: &str) -> &'static str {
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.contains("source-ranges") {
        "10.0.0.0/8"
    } else if last.contains("internal")
        || last.starts_with("enable-")
        || last.starts_with("keep-")
        || last.ends_with("-enabled")
        || last == "x-forwarded-for"
        || last == "proxy-protocol"
    {
        "true"
    } else if last.contains("timeout")
        || last.contains("limit")
        || last.contains("delay")
        || last.contains("retries")
        || last.contains("interval")
        || last.contains("threshold")
    {
        "10"
    } else if last == "aws-load-balancer-type" {
        "nlb"
    } else if last == "load-balancer-type" {
        // gce: the one value upstream reads.
        "Internal"
    } else if last == "load-balancer-backend-share" {
        "true"
    } else if last == "network-tier" {
        "Premium"
    } else if last == "aws-load-balancer-proxy-protocol" || last == "aws-load-balancer-ssl-ports" {
        // Upstream's aws provider takes `*` only (every port, for ssl-ports).
        "*"
    } else if last == "aws-load-balancer-backend-protocol" {
        "http"
    } else if last == "aws-load-balancer-healthcheck-protocol" {
        "HTTP"
    } else if last == "aws-load-balancer-healthcheck-port" {
        "traffic-port"
    } else if last == "aws-load-balancer-healthcheck-path" {
        "/healthz"
    } else if last == "aws-load-balancer-nlb-target-type" {
        "instance"
    } else if last.ends_with("security-groups") {
        "sg-0123456789abcdef0"
    } else if last == "aws-load-balancer-eip-allocations" {
        "eipalloc-0123456789abcdef0"
    } else if last == "aws-load-balancer-private-ipv4-addresses" {
        "10.0.1.10"
    } else {
        "value"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TABLE: &[LbSetting] = &[
        LbSetting::implemented(Setting::Annotation("example.com/ok"), "read"),
        LbSetting::refused(Setting::Annotation("example.com/tls"), "no TLS listeners"),
        LbSetting::implemented(Setting::LoadBalancerClass, "skipped"),
        LbSetting::implemented(Setting::ExternalTrafficPolicyLocal, "health check"),
        LbSetting::refused(Setting::SessionAffinityClientIp, "no stickiness"),
        LbSetting::refused(Setting::IpFamilyIpv6, "IPv4 only"),
        LbSetting::refused(Setting::NoNodePorts, "members are node ports"),
        LbSetting::implemented(Setting::LoadBalancerIp, "the address"),
    ];

    fn base() -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "annotations": {"example.com/other": "x"}},
            "spec": {"type": "LoadBalancer", "ipFamilies": ["IPv4"], "ports": [{"port": 80}]}
        }))
        .expect("service")
    }

    #[test]
    fn refused_settings_are_named_and_others_pass() {
        assert!(check("demo", TABLE, &base()).is_ok());
        let err = check(
            "demo",
            TABLE,
            &asking(&base(), Setting::Annotation("example.com/tls")),
        )
        .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "annotation example.com/tls is not supported by hypercloud's demo provider: no TLS listeners"
        );
        let err =
            check("demo", TABLE, &asking(&base(), Setting::NoNodePorts)).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "spec.allocateLoadBalancerNodePorts: false is not supported by hypercloud's demo provider: members are node ports"
        );
        walk(TABLE, &base(), |s| check("demo", TABLE, s)).expect("walk");
    }

    #[test]
    fn the_walk_fails_on_a_table_the_check_does_not_follow() {
        // A check that accepts everything: the walk must notice.
        let e = walk(TABLE, &base(), |_| Ok(())).expect_err("walk fails");
        assert!(e.contains("refused example.com/tls accepted"), "{e}");
        let missing = &TABLE[..2];
        assert!(walk(missing, &base(), |s| check("demo", missing, s))
            .expect_err("no field rows")
            .contains("no row for spec.loadBalancerClass"));
    }

    #[test]
    fn the_markdown_table_has_a_row_per_setting() {
        let md = markdown_table(TABLE);
        assert_eq!(md.lines().count(), TABLE.len() + 2);
        assert!(
            md.contains("| `example.com/tls` | **refused** | no TLS listeners |"),
            "{md}"
        );
        assert!(
            md.contains("| `spec.ipFamilies: IPv6` | **refused** | IPv4 only |"),
            "{md}"
        );
    }
}
