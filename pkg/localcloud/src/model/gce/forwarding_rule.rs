//! A forwarding rule (`compute#forwardingRule`, regional): an external address and ports that
//! forward to a target pool. Upstream equivalent: Compute Engine's `ForwardingRule`.

use serde::{Deserialize, Serialize};

/// A forwarding rule's fields (`target` as a full link).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ForwardingRuleSpec {
    pub description: Option<String>,
    pub target: String,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::gce::fixture::stored;

    #[test]
    fn stored_and_shown_with_gce_names() {
        let fields = serde_json::json!({
            "target": "https://h/compute/v1/projects/p/regions/r/targetPools/tp",
            "IPAddress": "172.24.4.20", "IPProtocol": "TCP", "portRange": "80-81",
            "loadBalancingScheme": "EXTERNAL", "networkTier": "PREMIUM",
        });
        let (_dir, store, rule) = stored::<ForwardingRuleSpec>("p", "fr", "regions/r", fields);
        let got = store.read(|v| ForwardingRule::list_in(v, "p"));
        assert_eq!(got, [rule]);
        let f = got[0].fields();
        assert_eq!(f["IPAddress"], "172.24.4.20");
        assert_eq!(f["portRange"], "80-81");
        assert!(!f.contains_key("ports") && !f.contains_key("allPorts"));
    }
}
