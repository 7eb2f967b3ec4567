//! Availability zones as Nova and Cinder share them: the zones the cloud has (configured at
//! start, stored in their own table, `nova` when none), the check of a requested zone and the
//! `os-availability-zone` body both services answer with.

use serde_json::{json, Value};

use super::ApiError;
use crate::defaults;
use crate::store::Read;

/// The store table of the zones (`{"name": ...}` each).
pub(crate) const ZONES: &str = "availability_zones";

/// The zones, sorted; the default zone when none is stored (GCE's zones too).
pub(crate) fn known_zones(r: &impl Read) -> Vec<String> {
    let mut zones: Vec<String> = r
        .list::<Value>(ZONES)
        .into_iter()
        .filter_map(|z| z["name"].as_str().map(str::to_owned))
        .collect();
    if zones.is_empty() {
        zones.push(defaults::AVAILABILITY_ZONE.into());
    }
    zones.sort();
    zones
}

/// Checks a zone name against the configured zones.
pub(crate) fn check_zone(r: &impl Read, zone: Option<String>) -> Result<String, ApiError> {
    let zones = known_zones(r);
    match zone {
        None => Ok(zones
            .iter()
            .find(|z| *z == defaults::AVAILABILITY_ZONE)
            .unwrap_or(&zones[0])
            .clone()),
        Some(z) if zones.contains(&z) => Ok(z),
        Some(z) => Err(ApiError::bad_request(format!(
            "The requested availability zone is not available: {z} (known: {})",
            zones.join(", ")
        ))),
    }
}

/// `{"availabilityZoneInfo": [{"zoneName": "nova", "zoneState": {"available": true}, "hosts": null}]}`
pub(crate) fn zones_body(r: &impl Read) -> Value {
    let zones: Vec<Value> = known_zones(r)
        .into_iter()
        .map(|z| json!({"zoneName": z, "zoneState": {"available": true}, "hosts": null}))
        .collect();
    json!({"availabilityZoneInfo": zones})
}
