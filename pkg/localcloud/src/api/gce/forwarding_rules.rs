//! Forwarding rules (regional), each carried by an Octavia load balancer
//! ([`super::forwarding`]): `EXTERNAL` ones send to a target pool (`target`) from an external
//! address (reserved or taken) in the rule's network tier (a reserved address's tier must be
//! the rule's); `INTERNAL` ones send to a regional backend service of the same protocol
//! (`backendService`) at up to five `ports`, from an internal address of the local cloud's
//! VIP pool (a loopback address; the one asked for when it is free), in a subnetwork (a
//! Neutron subnet by name; the network's first by default), optionally reachable from every
//! region (`allowGlobalAccess`, kept: the local cloud has one region).

use super::addresses::wanted_ipv4;
use super::forwarding;
use super::resource::{
    find, full_link, one_of, reserve_address, Collection, Fields, Insert, Ty, Where,
};
use super::*;
use crate::api::network::{Subnet, SUBNETS};
use crate::model::gce::address::Address;
use crate::model::gce::backend_service::{backend_service_key, BackendServiceSpec};
use crate::model::gce::forwarding_rule::ForwardingRuleSpec;
use crate::model::gce::target_pool::{target_pool_key, TargetPoolSpec};
use crate::model::gce::Object;
use crate::model::octavia::{LoadBalancer, LOADBALANCERS};

impl Collection for ForwardingRuleSpec {
    const PLACE: Where = Where::Regional;
    const OPTIONAL: Fields = &[
        ("target", Ty::Str),
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
        one_of(new.fields, "loadBalancingScheme", &["EXTERNAL", "INTERNAL"])?;
        one_of(new.fields, "networkTier", &["PREMIUM", "STANDARD"])?;
        if new
            .fields
            .get("loadBalancingScheme")
            .and_then(Value::as_str)
            == Some("INTERNAL")
        {
            return prepare_internal(new, wanted);
        }
        for field in ["backendService", "allowGlobalAccess", "subnetwork"] {
            if new.fields.contains_key(field) {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.{field}': only INTERNAL forwarding rules take it in the local cloud."
                )));
            }
        }
        let target = new
            .fields
            .get("target")
            .and_then(Value::as_str)
            .ok_or_else(|| required("resource.target"))?;
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
        if let Some(w) = &wanted {
            let tier = new.fields.get("networkTier").and_then(Value::as_str);
            let reserved = Address::list_in(new.tx, &new.s.project.id)
                .into_iter()
                .find(|a| a.scope == new.scope && a.spec.address == *w);
            if let Some(a) = reserved.filter(|a| Some(a.spec.network_tier.as_str()) != tier) {
                return Err(invalid(format!(
                    "The network tier of specified IP address is {}, that of forwarding rule must be the same.",
                    a.spec.network_tier
                )));
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

/// An `INTERNAL` rule's checks and completions: its backend service, ports, subnetwork and
/// address.
fn prepare_internal(new: Insert<'_, '_>, wanted: Option<String>) -> Result<(), ApiError> {
    for field in ["target", "portRange"] {
        if new.fields.contains_key(field) {
            return Err(invalid(format!(
                "Invalid value for field 'resource.{field}': an INTERNAL forwarding rule takes backendService and ports."
            )));
        }
    }
    if new.fields.get("networkTier").and_then(Value::as_str) != Some("PREMIUM") {
        return Err(invalid(
            "Invalid value for field 'resource.networkTier': INTERNAL forwarding rules are PREMIUM.",
        ));
    }
    if new.fields.get("allPorts") == Some(&json!(true)) {
        return Err(invalid(
            "Invalid value for field 'resource.allPorts': the local cloud forwards the ports listed in 'ports'.",
        ));
    }
    if new
        .fields
        .get("ports")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        return Err(required("resource.ports"));
    }
    let service = new
        .fields
        .get("backendService")
        .and_then(Value::as_str)
        .ok_or_else(|| required("resource.backendService"))?
        .to_owned();
    let (scope, name) = backend_service_key(&service).ok_or_else(|| {
        invalid(format!(
            "Invalid value for field 'resource.backendService': '{}'. Must be a regional backend service.",
            service.escape_default()
        ))
    })?;
    let bs = find::<BackendServiceSpec>(new.tx, new.s.project, &scope, &name)?;
    let protocol = new.fields.get("IPProtocol").and_then(Value::as_str);
    if protocol != Some(bs.spec.protocol.as_str()) {
        return Err(invalid(format!(
            "Invalid value for field 'resource.IPProtocol': the backend service's protocol is {}.",
            bs.spec.protocol
        )));
    }
    new.fields
        .insert("backendService".into(), json!(full_link(new.s, &service)));
    if let Some(sub) = new.fields.get("subnetwork").and_then(Value::as_str) {
        let name = m::last_segment(sub);
        if !new
            .tx
            .list::<Subnet>(SUBNETS)
            .iter()
            .any(|x| x.name == name)
        {
            return Err(invalid(format!(
                "Invalid value for field 'resource.subnetwork': '{}'. The referenced subnetwork resource cannot be found.",
                sub.escape_default()
            )));
        }
    }
    let pool = &new.s.cloud.config.lb_vip_pool;
    let used: Vec<String> = new
        .tx
        .list::<LoadBalancer>(LOADBALANCERS)
        .into_iter()
        .map(|l| l.vip_address)
        .collect();
    let address = match wanted {
        Some(w) => {
            let ip: std::net::IpAddr = w
                .parse()
                .map_err(|_| invalid("Invalid value for field 'resource.IPAddress'"))?;
            if let Some(why) = pool.refuse(ip) {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.IPAddress': '{w}' {why}."
                )));
            }
            if used.contains(&w) {
                return Err(invalid(format!(
                    "IP address '{w}' is already being used by another resource."
                )));
            }
            w
        }
        None => pool
            .allocate(&used)
            .ok_or_else(|| invalid("No more addresses in the local cloud's VIP pool"))?
            .to_string(),
    };
    new.fields.insert("IPAddress".into(), json!(address));
    Ok(())
}
