//! Regional backend services: the instance groups (`backends[].group`, each existing) an
//! internal forwarding rule sends to, one health check (which must exist), `protocol` TCP or
//! UDP and a session affinity. The local cloud carries `INTERNAL` ones only (an external
//! backend service is GCE's newer network load balancer, which it does not model). Updated in
//! place (`PUT`, `PATCH`): the forwarding rules using it follow.

use super::forwarding;
use super::resource::{
    find, full_link, one_of, string_list, Collection, Fields, Insert, Ty, Where,
};
use super::*;
use crate::model::gce::backend_service::BackendServiceSpec;
use crate::model::gce::health_check::HealthCheckSpec;
use crate::model::gce::instance_group::{instance_group_key, InstanceGroupSpec};
use crate::model::gce::{Object, Spec};

/// The fields of a backend GCE takes that the local cloud keeps.
const BACKEND_FIELDS: &[&str] = &["group", "balancingMode", "failover", "description"];

impl Collection for BackendServiceSpec {
    const PLACE: Where = Where::Regional;
    const OPTIONAL: Fields = &[
        ("backends", Ty::Objects),
        // An internal backend service takes exactly one health check.
        ("healthChecks", Ty::Strs(1)),
        ("loadBalancingScheme", Ty::Str),
        ("protocol", Ty::Str),
        ("sessionAffinity", Ty::Str),
        ("timeoutSec", Ty::Int(1, 86_400)),
        ("network", Ty::Str),
        ("connectionDraining", Ty::Object),
    ];
    const UPDATABLE: bool = true;

    fn defaults() -> Value {
        json!({"loadBalancingScheme": "INTERNAL", "protocol": "TCP", "sessionAffinity": "NONE", "timeoutSec": 30})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        if new
            .fields
            .get("loadBalancingScheme")
            .and_then(Value::as_str)
            != Some("INTERNAL")
        {
            return Err(invalid(
                "Invalid value for field 'resource.loadBalancingScheme': the local cloud carries INTERNAL backend services only.",
            ));
        }
        one_of(new.fields, "protocol", &["TCP", "UDP"])?;
        one_of(
            new.fields,
            "sessionAffinity",
            &[
                "NONE",
                "CLIENT_IP",
                "CLIENT_IP_PROTO",
                "CLIENT_IP_PORT_PROTO",
            ],
        )?;
        let checks = string_list(new.fields, "healthChecks");
        if checks.is_empty() {
            return Err(invalid(
                "Invalid value for field 'resource.healthChecks': an INTERNAL backend service needs a health check.",
            ));
        }
        let mut links = Vec::new();
        for hc in checks {
            find::<HealthCheckSpec>(new.tx, new.s.project, "global", m::last_segment(&hc))?;
            links.push(json!(full_link(new.s, &hc)));
        }
        new.fields.insert("healthChecks".into(), json!(links));
        let backends = match new.fields.get("backends") {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        let mut out = Vec::new();
        let mut groups = std::collections::BTreeSet::new();
        for (i, b) in backends.into_iter().enumerate() {
            let Value::Object(mut b) = b else { continue };
            if let Some(k) = b.keys().find(|k| !BACKEND_FIELDS.contains(&k.as_str())) {
                return Err(invalid(format!(
                    "Invalid JSON payload received. Unknown name \"{k}\" at 'resource.backends[{i}]': Cannot find field."
                )));
            }
            let group = b
                .get("group")
                .and_then(Value::as_str)
                .ok_or_else(|| required(&format!("resource.backends[{i}].group")))?;
            let (scope, name) = instance_group_key(group).ok_or_else(|| {
                invalid(format!(
                    "Invalid value for field 'resource.backends[{i}].group': '{}'. Must be an instance group.",
                    group.escape_default()
                ))
            })?;
            find::<InstanceGroupSpec>(new.tx, new.s.project, &scope, &name)?;
            let link = full_link(new.s, group);
            if !groups.insert(link.clone()) {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.backends[{i}].group': '{link}'. Backend groups must be unique."
                )));
            }
            b.insert("group".into(), json!(link));
            // An internal backend service balances connections.
            match b.get("balancingMode").and_then(Value::as_str) {
                None => {
                    b.insert("balancingMode".into(), json!("CONNECTION"));
                }
                Some("CONNECTION") => {}
                Some(other) => {
                    return Err(invalid(format!(
                        "Invalid value for field 'resource.backends[{i}].balancingMode': '{}'. INTERNAL backend services balance CONNECTION.",
                        other.escape_default()
                    )))
                }
            }
            out.push(Value::Object(b));
        }
        new.fields.insert("backends".into(), json!(out));
        Ok(())
    }

    fn inserted(tx: &mut Tx<'_>, s: &Scope<'_>, o: &Object<Self>) -> Result<(), ApiError> {
        Self::updated(tx, s, o)
    }

    fn updated(tx: &mut Tx<'_>, s: &Scope<'_>, o: &Object<Self>) -> Result<(), ApiError> {
        let link = s.link(&format!("{}/{}/{}", o.scope, Self::COLLECTION, o.name));
        forwarding::sync_rules(tx, s.cloud, s.project, |r| {
            r.spec.backend_service.as_deref() == Some(link.as_str())
        })
    }
}
