//! Firewalls (global): exactly one of `allowed` and `denied`, CIDR ranges, protocols and port
//! ranges checked; every change re-syncs the project's forwarding rules, whose listeners
//! enforce them.

use super::body::{json_kind, known_fields, object, opt_list, opt_str};
use super::forwarding;
use super::resource::{check_cidr, one_of, Collection, Fields, Insert, Ty, Where, MANY, PRIORITY};
use super::*;
use crate::model::gce::firewall::{parse_port_range, FirewallSpec};
use crate::model::gce::Object;

impl Collection for FirewallSpec {
    const PLACE: Where = Where::Global;
    const OPTIONAL: Fields = &[
        ("network", Ty::Str),
        ("allowed", Ty::Objects),
        ("denied", Ty::Objects),
        ("sourceRanges", Ty::Strs(MANY)),
        ("sourceTags", Ty::Strs(MANY)),
        ("targetTags", Ty::Strs(MANY)),
        ("destinationRanges", Ty::Strs(MANY)),
        ("direction", Ty::Str),
        ("priority", PRIORITY),
        ("disabled", Ty::Bool),
        ("logConfig", Ty::Object),
        ("sourceServiceAccounts", Ty::Strs(MANY)),
        ("targetServiceAccounts", Ty::Strs(MANY)),
    ];

    fn defaults() -> Value {
        json!({"network": "global/networks/default", "direction": "INGRESS", "priority": 1000, "disabled": false})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        if new.fields.contains_key("allowed") == new.fields.contains_key("denied") {
            return Err(invalid(
                "Exactly one of 'allowed' or 'denied' must be specified",
            ));
        }
        for key in ["sourceRanges", "destinationRanges"] {
            if let Some(Value::Array(ranges)) = new.fields.get(key) {
                for r in ranges {
                    check_cidr(key, Some(r))?;
                }
            }
        }
        one_of(new.fields, "direction", &["INGRESS", "EGRESS"])?;
        for key in ["allowed", "denied"] {
            if let Some(Value::Array(rules)) = new.fields.get(key) {
                for (i, rule) in rules.iter().enumerate() {
                    check_firewall_rule(&format!("{key}[{i}]"), rule)?;
                }
            }
        }
        Ok(())
    }

    fn inserted(tx: &mut Tx<'_>, s: &Scope<'_>, _o: &Object<Self>) -> Result<(), ApiError> {
        forwarding::sync_rules(tx, s.cloud, s.project, |_| true)
    }

    fn deleted(tx: &mut Tx<'_>, s: &Scope<'_>, _o: &Object<Self>) -> Result<(), ApiError> {
        forwarding::sync_rules(tx, s.cloud, s.project, |_| true)
    }
}

/// One `allowed`/`denied` entry of a firewall: `IPProtocol` (a name or a number 0..=255) and
/// `ports`, which only TCP, UDP and SCTP take.
fn check_firewall_rule(at: &str, rule: &Value) -> Result<(), ApiError> {
    let o = object(rule, &format!("resource.{at}"))?;
    known_fields(o, &format!("resource.{at}"), &["IPProtocol", "ports"])?;
    let proto = opt_str(o, "IPProtocol", &format!("resource.{at}.IPProtocol"))?
        .ok_or_else(|| required(&format!("resource.{at}.IPProtocol")))?;
    let named = ["tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"];
    let lower = proto.to_ascii_lowercase();
    if !named.contains(&lower.as_str()) && proto.parse::<u8>().is_err() {
        return Err(invalid(format!(
            "Invalid value for field 'resource.{at}.IPProtocol': '{}'. Must be a protocol name or number.",
            proto.escape_default()
        )));
    }
    let ports = opt_list(o, "ports", &format!("resource.{at}.ports"))?;
    if !ports.is_empty() && !["tcp", "udp", "sctp", "6", "17", "132"].contains(&lower.as_str()) {
        return Err(invalid(format!(
            "Invalid value for field 'resource.{at}.ports': ports are only allowed for tcp, udp and sctp."
        )));
    }
    for (i, p) in ports.iter().enumerate() {
        let ok = p.as_str().and_then(parse_port_range).is_some();
        if !ok {
            return Err(invalid(format!(
                "Invalid value for field 'resource.{at}.ports[{i}]': {}. Must be a port or a range of ports within 1-65535, low before high.",
                p.as_str().map_or_else(|| json_kind(p).to_owned(), |s| format!("'{}'", s.escape_default()))
            )));
        }
    }
    Ok(())
}
