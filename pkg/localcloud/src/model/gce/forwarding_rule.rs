//! A forwarding rule (`compute#forwardingRule`, regional): an external address and ports that
//! forward to a target pool, or an internal one forwarding to a backend service. Upstream
//! equivalent: Compute Engine's `ForwardingRule`.

use serde::{Deserialize, Serialize};

/// A forwarding rule's fields (`target`, `backendService` as full links).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ForwardingRuleSpec {
    pub description: Option<String>,
    pub target: Option<String>,
    #[serde(rename = "IPAddress")]
    pub ip_address: String,
    #[serde(rename = "IPProtocol")]
    pub ip_protocol: String,
    pub port_range: Option<String>,
    pub ports: Option<Vec<String>>,
    pub all_ports: Option<bool>,
    pub load_balancing_scheme: String,
    pub network: Option<String>,
    pub subnetwork: Option<String>,
    pub network_tier: String,
    pub backend_service: Option<String>,
    pub allow_global_access: Option<bool>,
}

resource! {
    /// A stored forwarding rule.
    ForwardingRule = Object<ForwardingRuleSpec>,
    one: "forwardingRule", many: "forwardingRules", title: "Forwarding rule"
}
