//! Health checks (global, the non-legacy kind backend services use): `TCP` or `HTTP`, each
//! with its probe object (`tcpHealthCheck`, `httpHealthCheck`) whose port defaults to 80; the
//! timeout may not exceed the interval. Updated in place (`PUT`, `PATCH`): the forwarding
//! rules follow.

use super::forwarding;
use super::resource::{Collection, Fields, Insert, Ty, Where};
use super::*;
use crate::model::gce::health_check::HealthCheckSpec;
use crate::model::gce::Object;

/// A health check's interval and timeout, in seconds.
const CHECK_SECONDS: Ty = Ty::Int(1, 300);
/// A health check's healthy and unhealthy thresholds.
const THRESHOLD: Ty = Ty::Int(1, 10);
/// The probe types the data plane probes with (GCE has SSL, HTTPS, HTTP2 and GRPC too).
const TYPES: &[(&str, &str)] = &[("TCP", "tcpHealthCheck"), ("HTTP", "httpHealthCheck")];
/// The fields of a probe object GCE takes (`port` an integer, the others strings).
const PROBE_FIELDS: &[&str] = &[
    "port",
    "portName",
    "portSpecification",
    "host",
    "requestPath",
    "request",
    "response",
    "proxyHeader",
];

impl Collection for HealthCheckSpec {
    const PLACE: Where = Where::Global;
    const REQUIRED: Fields = &[("type", Ty::Str)];
    const OPTIONAL: Fields = &[
        ("checkIntervalSec", CHECK_SECONDS),
        ("timeoutSec", CHECK_SECONDS),
        ("unhealthyThreshold", THRESHOLD),
        ("healthyThreshold", THRESHOLD),
        ("tcpHealthCheck", Ty::Object),
        ("httpHealthCheck", Ty::Object),
    ];
    const UPDATABLE: bool = true;

    fn defaults() -> Value {
        json!({"checkIntervalSec": 5, "timeoutSec": 5, "unhealthyThreshold": 2, "healthyThreshold": 2})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        let kind = new
            .fields
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some((_, field)) = TYPES.iter().find(|(t, _)| *t == kind) else {
            return Err(invalid(format!(
                "Invalid value for field 'resource.type': '{}'. The local cloud probes TCP and HTTP.",
                kind.escape_default()
            )));
        };
        // The probe object of another type is GCE's 400.
        for (_, other) in TYPES.iter().filter(|(_, f)| f != field) {
            if new.fields.contains_key(*other) {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.{other}': the health check's type is {kind}."
                )));
            }
        }
        let mut probe = match new.fields.get(*field) {
            Some(Value::Object(o)) => o.clone(),
            _ => Map::new(),
        };
        for (key, v) in &probe {
            let ok = match key.as_str() {
                "port" => v.as_i64().is_some_and(|p| (1..=65_535).contains(&p)),
                k if PROBE_FIELDS.contains(&k) => v.is_string(),
                _ => {
                    return Err(invalid(format!(
                        "Invalid JSON payload received. Unknown name \"{key}\" at 'resource.{field}': Cannot find field."
                    )))
                }
            };
            if !ok {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.{field}.{key}': {v}."
                )));
            }
        }
        probe.entry("port").or_insert(json!(80));
        probe.entry("proxyHeader").or_insert(json!("NONE"));
        if kind == "HTTP" {
            let path = probe
                .entry("requestPath")
                .or_insert(json!("/"))
                .as_str()
                .unwrap_or("/");
            if !path.starts_with('/') || path.chars().any(char::is_control) {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.httpHealthCheck.requestPath': '{}'. Must start with '/' and hold no control characters.",
                    path.escape_default()
                )));
            }
        }
        new.fields.insert((*field).into(), Value::Object(probe));
        let interval = new.fields.get("checkIntervalSec").and_then(Value::as_i64);
        let timeout = new.fields.get("timeoutSec").and_then(Value::as_i64);
        if let (Some(interval), Some(timeout)) = (interval, timeout) {
            if timeout > interval {
                return Err(invalid(format!(
                    "Invalid value for field 'resource.timeoutSec': '{timeout}'. TimeoutSec should be less than or equal to checkIntervalSec ({interval})."
                )));
            }
        }
        Ok(())
    }

    fn updated(tx: &mut Tx<'_>, s: &Scope<'_>, _o: &Object<Self>) -> Result<(), ApiError> {
        forwarding::sync_rules(tx, s.cloud, s.project, |r| r.spec.backend_service.is_some())
    }
}
