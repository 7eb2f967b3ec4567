//! A forwarding rule (`compute#forwardingRule`, regional): an external address and ports that
//! forward to a target pool. Upstream equivalent: Compute Engine's `ForwardingRule`.

use serde::{Deserialize, Serialize};

use super::{Object, Spec};
use crate::model::Names;

/// A stored forwarding rule.
pub(crate) type ForwardingRule = Object<ForwardingRuleSpec>;

/// A forwarding rule's fields (`target` as a full link).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ForwardingRuleSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub target: String,
    #[serde(rename = "IPAddress")]
    pub ip_address: String,
    #[serde(rename = "IPProtocol")]
    pub ip_protocol: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_range: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_ports: Option<bool>,
    pub load_balancing_scheme: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    pub network_tier: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_global_access: Option<bool>,
}

impl Spec for ForwardingRuleSpec {
    const COLLECTION: &'static str = "forwardingRules";
    const KIND: &'static str = "compute#forwardingRule";
    const TABLE: &'static str = "gce_forwardingRules";
    const NAMES: Names = Names {
        one: "forwardingRule",
        many: "forwardingRules",
        title: "Forwarding rule",
    };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Record;
    use crate::store::Store;

    #[test]
    fn stored_and_shown_with_gce_names() {
        let spec: ForwardingRuleSpec = serde_json::from_value(serde_json::json!({
            "target": "https://h/compute/v1/projects/p/regions/r/targetPools/tp",
            "IPAddress": "172.24.4.20", "IPProtocol": "TCP", "portRange": "80-81",
            "loadBalancingScheme": "EXTERNAL", "networkTier": "PREMIUM",
        }))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let rule = ForwardingRule::new("p", "fr".into(), "regions/r".into(), spec);
        store.write(|tx| rule.put(tx)).unwrap();
        let got = store.read(|v| ForwardingRule::list_in(v, "p"));
        assert_eq!(got, [rule]);
        let f = got[0].fields();
        assert_eq!(f["IPAddress"], "172.24.4.20");
        assert_eq!(f["portRange"], "80-81");
        assert!(!f.contains_key("ports") && !f.contains_key("allPorts"));
    }
}
