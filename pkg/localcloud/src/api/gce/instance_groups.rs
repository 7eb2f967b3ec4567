//! Unmanaged instance groups (zonal): `addInstances`/`removeInstances` change the members
//! (instances of the group's zone, each existing), `listInstances` lists them; the forwarding
//! rules whose backend services send to a group follow its members.

use super::forwarding;
use super::operations::{change, Done};
use super::resource::{check_instance, find, scope_of, Collection, Fields, Insert, Ty, Where};
use super::*;
use crate::model::gce::instance_group::{InstanceGroup, InstanceGroupSpec};
use crate::model::gce::{instance_ref, Spec};
use crate::model::Record;

impl Collection for InstanceGroupSpec {
    const PLACE: Where = Where::Zonal;
    const OPTIONAL: Fields = &[
        ("network", Ty::Str),
        ("subnetwork", Ty::Str),
        ("namedPorts", Ty::Objects),
    ];

    fn defaults() -> Value {
        json!({})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        // Members come by addInstances only.
        new.fields.insert("instances".into(), json!([]));
        Ok(())
    }
}

/// `instanceGroups/{name}/addInstances`, `removeInstances` and `listInstances`.
pub(super) async fn action(
    State(cloud): Ctx,
    Path(mut p): Params_,
    Query(q): ListQuery,
    body: Bytes,
) -> Reply {
    let b: Value = if body.is_empty() {
        json!({})
    } else {
        parse_body(&body)?
    };
    p.insert("collection".into(), InstanceGroupSpec::COLLECTION.into());
    let action = param(&p, "action").to_owned();
    if action == "listInstances" {
        return read(&cloud, &p, |r, s| {
            let scope = scope_of(r, s.cloud, s.project, &p)?;
            let o: InstanceGroup = find(r, s.project, &scope, param(&p, "name"))?;
            let items = o
                .spec
                .instances
                .iter()
                .map(|i| json!({"instance": i, "status": "RUNNING"}))
                .collect();
            s.list_reply(
                "compute#instanceGroupsListInstances",
                &format!("{scope}/instanceGroups/{}/listInstances", o.name),
                items,
                &q,
            )
        });
    }
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let (cloud, project) = (s.cloud, s.project);
        let scope = scope_of(tx, cloud, project, &p)?;
        let name = param(&p, "name");
        let mut o: InstanceGroup = find(tx, project, &scope, name)?;
        if !["addInstances", "removeInstances"].contains(&action.as_str()) {
            return Err(project.not_found(&format!("{scope}/instanceGroups/{name}/{action}")));
        }
        let asked = b["instances"].as_array().cloned().unwrap_or_default();
        if asked.is_empty() {
            return Err(required("instances"));
        }
        let zone = scope.trim_start_matches("zones/");
        let mut current = o.spec.instances.clone();
        for i in asked {
            let r = i["instance"]
                .as_str()
                .ok_or_else(|| required("instances[].instance"))?;
            let (at, iname) = instance_ref(r)
                .ok_or_else(|| invalid(format!("Invalid value for field 'instance': '{r}'.")))?;
            if at != zone {
                return Err(invalid(format!(
                    "Invalid value for field 'instance': '{r}'. The instance is not in the group's zone {zone}."
                )));
            }
            let link = s.link(&format!("zones/{at}/instances/{iname}"));
            if action == "addInstances" {
                check_instance(tx, s, r)?;
                if current.contains(&link) {
                    return Err(invalid(format!(
                        "The resource '{link}' is already a member of '{}'",
                        project.path(&format!("{scope}/instanceGroups/{name}"))
                    )));
                }
                current.push(link);
            } else if current.contains(&link) {
                current.retain(|c| c != &link);
            } else {
                return Err(invalid(format!(
                    "The resource '{link}' is not a member of '{}'",
                    project.path(&format!("{scope}/instanceGroups/{name}"))
                )));
            }
        }
        o.spec.instances = current;
        o.meta.touch();
        o.put(tx)?;
        let done = Done::of(
            scope,
            action.as_str(),
            InstanceGroupSpec::COLLECTION,
            &o.name,
            m::numeric_id(&o.meta.id),
        );
        forwarding::sync_rules(tx, cloud, project, |rule| {
            rule.spec.backend_service.is_some()
        })?;
        Ok(done)
    })
    .await
}
