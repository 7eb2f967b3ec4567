//! Forwarding rules, stored and shown, against the store without HTTP.

use super::stored;
use crate::model::gce::forwarding_rule::*;

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
