//! Routes (global): exactly one next hop; a `nextHopInstance` must name an instance;
//! `destRange` must be a CIDR range.

use super::instances::find_instance;
use super::resource::{check_cidr, Collection, Fields, Insert, Ty, Where, MANY, PRIORITY};
use super::*;
use crate::model::gce::instance_ref;
use crate::model::gce::route::RouteSpec;

impl Collection for RouteSpec {
    const PLACE: Where = Where::Global;
    const REQUIRED: Fields = &[("network", Ty::Str), ("destRange", Ty::Str)];
    const OPTIONAL: Fields = &[
        ("nextHopInstance", Ty::Str),
        ("nextHopIp", Ty::Str),
        ("nextHopGateway", Ty::Str),
        ("nextHopNetwork", Ty::Str),
        ("priority", PRIORITY),
        ("tags", Ty::Strs(MANY)),
    ];

    fn defaults() -> Value {
        json!({"priority": 1000, "routeType": "STATIC", "routeStatus": "ACTIVE"})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        let hops = [
            "nextHopInstance",
            "nextHopIp",
            "nextHopGateway",
            "nextHopNetwork",
        ];
        if hops.iter().filter(|h| new.fields.contains_key(**h)).count() != 1 {
            return Err(invalid("Exactly one of nextHopInstance, nextHopIp, nextHopGateway, nextHopNetwork must be specified"));
        }
        if let Some(Value::String(inst)) = new.fields.get("nextHopInstance") {
            let (zone, name) = instance_ref(inst).ok_or_else(|| {
                invalid(format!(
                    "Invalid value for field 'resource.nextHopInstance': '{inst}'."
                ))
            })?;
            find_instance(new.tx, new.s.project, &zone, &name).map_err(|e| {
                invalid(format!(
                    "Invalid value for field 'resource.nextHopInstance': '{inst}'. {}",
                    e.message
                ))
            })?;
        }
        check_cidr("destRange", new.fields.get("destRange"))
    }
}
