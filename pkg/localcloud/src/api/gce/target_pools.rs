//! Target pools (regional): instances and at most one HTTP health check, each of which must
//! exist; `addInstance`/`removeInstance` change the instances, and the forwarding rules that
//! target the pool follow.

use super::forwarding;
use super::operations::{change, Done};
use super::resource::{
    check_instance, find, full_link, one_of, scope_of, string_list, which, Collection, Fields,
    Insert, Ty, Where, Which,
};
use super::*;
use crate::model::gce::http_health_check::HttpHealthCheckSpec;
use crate::model::gce::target_pool::{TargetPool, TargetPoolSpec};
use crate::model::gce::{instance_ref, Spec};
use crate::model::Record;

impl Collection for TargetPoolSpec {
    const PLACE: Where = Where::Regional;
    const OPTIONAL: Fields = &[
        ("instances", Ty::Strs(1000)),
        // GCE takes at most one legacy HTTP health check per pool.
        ("healthChecks", Ty::Strs(1)),
        ("sessionAffinity", Ty::Str),
        ("failoverRatio", Ty::Float(0.0, 1.0)),
        ("backupPool", Ty::Str),
    ];

    fn defaults() -> Value {
        json!({"sessionAffinity": "NONE"})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        one_of(
            new.fields,
            "sessionAffinity",
            &["NONE", "CLIENT_IP", "CLIENT_IP_PROTO"],
        )?;
        // References must name what exists, as GCE answers 404 for a missing one.
        for hc in string_list(new.fields, "healthChecks") {
            let name = m::last_segment(&hc);
            find::<HttpHealthCheckSpec>(new.tx, new.s.project, "global", name)?;
        }
        if let Some(Value::String(backup)) = new.fields.get("backupPool") {
            find::<TargetPoolSpec>(new.tx, new.s.project, new.scope, m::last_segment(backup))?;
        }
        let list = new.fields.get("instances").cloned().unwrap_or(json!([]));
        let list = list.as_array().cloned().unwrap_or_default();
        let mut out = Vec::new();
        for i in list {
            let r = i
                .as_str()
                .ok_or_else(|| invalid("Invalid value for field 'resource.instances'"))?;
            out.push(json!(check_instance(new.tx, new.s, r)?));
        }
        new.fields.insert("instances".into(), json!(out));
        if let Some(Value::Array(hcs)) = new.fields.get("healthChecks").cloned() {
            let links: Vec<Value> = hcs
                .iter()
                .filter_map(Value::as_str)
                .map(|h| json!(full_link(new.s, h)))
                .collect();
            new.fields.insert("healthChecks".into(), json!(links));
        }
        Ok(())
    }
}

/// `targetPools/{name}/addInstance` and `removeInstance` (any other action of any collection
/// is GCE's 404).
pub(super) async fn action(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Value = parse_body(&body)?;
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let (cloud, project) = (s.cloud, s.project);
        let scope = scope_of(tx, cloud, project, &p)?;
        let collection = param(&p, "collection");
        let Some(kind) = which(&p) else {
            return Err(project.not_found(&format!("{scope}/{collection}")));
        };
        let action = param(&p, "action");
        if kind != Which::TargetPools || !["addInstance", "removeInstance"].contains(&action) {
            let name = param(&p, "name");
            return Err(project.not_found(&format!("{scope}/{collection}/{name}/{action}")));
        }
        let mut o: TargetPool = find(tx, project, &scope, param(&p, "name"))?;
        let mut current = o.spec.instances.clone();
        let asked = b["instances"].as_array().cloned().unwrap_or_default();
        if asked.is_empty() {
            return Err(required("instances"));
        }
        for i in asked {
            let r = i["instance"]
                .as_str()
                .ok_or_else(|| required("instances[].instance"))?;
            let (zone, name) = instance_ref(r)
                .ok_or_else(|| invalid(format!("Invalid value for field 'instance': '{r}'.")))?;
            let link = s.link(&format!("zones/{zone}/instances/{name}"));
            if action == "addInstance" {
                check_instance(tx, s, r)?;
                if !current.contains(&link) {
                    current.push(link);
                }
            } else {
                current.retain(|c| c != &link);
            }
        }
        o.spec.instances = current;
        o.meta.touch();
        o.put(tx)?;
        let done = Done::of(
            scope,
            action,
            TargetPoolSpec::COLLECTION,
            &o.name,
            m::numeric_id(&o.meta.id),
        );
        let link = s.link(&done.target);
        forwarding::sync_rules(tx, cloud, project, |rule| {
            rule.spec.target.as_deref() == Some(link.as_str())
        })?;
        Ok(done)
    })
    .await
}
