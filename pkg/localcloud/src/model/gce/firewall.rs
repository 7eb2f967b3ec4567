//! A firewall rule (`compute#firewall`, global): which sources may reach which ports of which
//! instances (by network tag). Upstream equivalent: Compute Engine's `Firewall`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A firewall's fields.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FirewallSpec {
    pub description: Option<String>,
    pub network: String,
    pub allowed: Option<Vec<Rule>>,
    pub denied: Option<Vec<Rule>>,
    pub source_ranges: Option<Vec<String>>,
    pub source_tags: Option<Vec<String>>,
    pub target_tags: Option<Vec<String>>,
    pub destination_ranges: Option<Vec<String>>,
    pub direction: String,
    pub priority: i64,
    pub disabled: bool,
    pub log_config: Option<Map<String, Value>>,
    pub source_service_accounts: Option<Vec<String>>,
    pub target_service_accounts: Option<Vec<String>>,
}

/// One `allowed`/`denied` entry: a protocol (name or number) and, for TCP, UDP and SCTP,
/// ports and port ranges (`80`, `8000-8100`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Rule {
    #[serde(rename = "IPProtocol")]
    pub ip_protocol: String,
    /// `ports: null` as given stays `null` when shown (`Some(None)`), as the untyped
    /// record kept it; absent stays absent.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub ports: Option<Option<Vec<String>>>,
}

/// A field that is present, even as `null`.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

resource! {
    /// A stored firewall.
    Firewall = Object<FirewallSpec>,
    one: "firewall", many: "firewalls", title: "Firewall"
}

impl FirewallSpec {
    /// An enabled ingress rule (what the data plane enforces).
    pub fn is_enabled_ingress(&self) -> bool {
        !self.disabled && self.direction == "INGRESS"
    }
}

impl Rule {
    /// Whether the rule admits `protocol` (`TCP`, `UDP`) to `port`.
    pub fn admits(&self, protocol: &str, port: u16) -> bool {
        let proto = self.ip_protocol.to_ascii_lowercase();
        let proto_ok = proto == "all"
            || proto == protocol.to_ascii_lowercase()
            || (proto == "6" && protocol == "TCP")
            || (proto == "17" && protocol == "UDP");
        let ports = self.ports.clone().flatten().unwrap_or_default();
        proto_ok && (ports.is_empty() || ports.iter().any(|p| port_matches(p, port)))
    }
}

/// A port or port range of a firewall rule: `80` or `8000-8100`, within 1..=65535, low ≤ high.
pub(crate) fn parse_port_range(entry: &str) -> Option<(u16, u16)> {
    let (a, b) = entry.split_once('-').unwrap_or((entry, entry));
    let (a, b) = (a.parse::<u16>().ok()?, b.parse::<u16>().ok()?);
    (a >= 1 && a <= b).then_some((a, b))
}

/// Whether a firewall's `ports` entry (`80`, `8000-8100`) holds `port`.
pub(crate) fn port_matches(entry: &str, port: u16) -> bool {
    parse_port_range(entry).is_some_and(|(a, b)| (a..=b).contains(&port))
}
