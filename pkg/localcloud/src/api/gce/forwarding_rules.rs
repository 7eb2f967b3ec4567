//! Forwarding rules (regional): a target pool as `target`, TCP or UDP, an external address
//! (reserved or taken); each is carried by an Octavia load balancer ([`super::forwarding`]).

use super::addresses::wanted_ipv4;
use super::forwarding;
use super::resource::{find, one_of, reserve_address, Collection, Fields, Insert, Ty, Where};
use super::*;
use crate::model::gce::forwarding_rule::ForwardingRuleSpec;
use crate::model::gce::target_pool::{target_pool_key, TargetPoolSpec};
use crate::model::gce::Object;

impl Collection for ForwardingRuleSpec {
    const PLACE: Where = Where::Regional;
    const REQUIRED: Fields = &[("target", Ty::Str)];
    const OPTIONAL: Fields = &[
        ("IPAddress", Ty::Str),
        ("IPProtocol", Ty::Str),
        ("portRange", Ty::Str),
        // GCE takes up to five ports in `ports`.
        ("ports", Ty::Strs(5)),
        ("allPorts", Ty::Bool),
        ("loadBalancingScheme", Ty::Str),
        ("network", Ty::Str),
        ("subnetwork", Ty::Str),
        ("networkTier", Ty::Str),
        ("backendService", Ty::Str),
        ("allowGlobalAccess", Ty::Bool),
    ];

    fn defaults() -> Value {
        json!({"IPProtocol": "TCP", "loadBalancingScheme": "EXTERNAL", "networkTier": "PREMIUM"})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        let wanted = wanted_ipv4(new.fields, "IPAddress")?;
        one_of(new.fields, "IPProtocol", &["TCP", "UDP"])?;
        let target = new
            .fields
            .get("target")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match target_pool_key(target) {
            Some((pool_scope, name)) => {
                find::<TargetPoolSpec>(new.tx, new.s.project, &pool_scope, &name)?;
            }
            None => {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.target': '{}'. Must be a target pool.",
                    target.escape_default()
                )))
            }
        }
        let address = reserve_address(new.tx, new.s, new.scope, wanted)?;
        new.fields.insert("IPAddress".into(), json!(address));
        Ok(())
    }

    fn inserted(tx: &mut Tx<'_>, s: &Scope<'_>, o: &Object<Self>) -> Result<(), ApiError> {
        forwarding::sync(tx, s.cloud, s.project, o)
    }

    fn deleting(tx: &mut Tx<'_>, s: &Scope<'_>, o: &Object<Self>) -> Result<(), ApiError> {
        forwarding::remove(tx, s.project, o)
    }
}
