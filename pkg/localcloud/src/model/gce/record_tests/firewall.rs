//! Firewalls and their rules, stored and shown, against the store without HTTP.

use serde_json::Value;

use super::{spec, store_with};
use crate::model::gce::firewall::*;

/// A firewall's fields: `v` over the defaults.
fn firewall(v: Value) -> FirewallSpec {
    let mut base = serde_json::json!({
        "network": "n", "direction": "INGRESS", "priority": 1000, "disabled": false,
    });
    if let (Some(b), Some(extra)) = (base.as_object_mut(), v.as_object()) {
        b.extend(extra.clone());
    }
    spec(base)
}

#[test]
fn firewall_ports_match_singles_and_ranges() {
    assert!(port_matches("80", 80));
    assert!(port_matches("8000-8100", 8080));
    assert!(!port_matches("8000-8100", 80));
    assert!(!port_matches("x", 80));
    assert_eq!(parse_port_range("90-80"), None);
    assert_eq!(parse_port_range("0"), None);
}

#[test]
fn rules_admit_by_protocol_and_port() {
    let f = firewall(
        serde_json::json!({"allowed": [{"IPProtocol": "tcp", "ports": ["80"]}, {"IPProtocol": "17"}]}),
    );
    let rules = f.allowed.clone().unwrap();
    assert!(rules[0].admits("TCP", 80));
    assert!(!rules[0].admits("TCP", 81));
    assert!(!rules[0].admits("UDP", 80));
    assert!(rules[1].admits("UDP", 53));
    assert!(f.is_enabled_ingress());
    assert!(!firewall(serde_json::json!({"disabled": true})).is_enabled_ingress());
}

#[test]
fn null_ports_stay_null_and_absent_ones_absent() {
    let f = firewall(
        serde_json::json!({"allowed": [{"IPProtocol": "tcp", "ports": null}, {"IPProtocol": "udp"}]}),
    );
    let shown = serde_json::to_value(&f.allowed).unwrap();
    assert_eq!(
        shown,
        serde_json::json!([{"IPProtocol": "tcp", "ports": null}, {"IPProtocol": "udp"}])
    );
    assert!(f.allowed.unwrap()[0].admits("TCP", 1));
}

#[test]
fn stored_and_shown_with_gce_names() {
    let f = Firewall::new(
        "p",
        "fw".into(),
        "global".into(),
        firewall(
            serde_json::json!({"allowed": [{"IPProtocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]}),
        ),
    );
    let (_dir, store) = store_with(&f);
    let got = store
        .read(|v| Firewall::get_in(v, "p", "global", "fw"))
        .unwrap();
    assert_eq!(got, f);
    let fields = got.fields();
    assert_eq!(
        fields["allowed"],
        serde_json::json!([{"IPProtocol": "tcp"}])
    );
    assert_eq!(fields["sourceRanges"], serde_json::json!(["0.0.0.0/0"]));
    assert!(!fields.contains_key("targetTags"));
}
