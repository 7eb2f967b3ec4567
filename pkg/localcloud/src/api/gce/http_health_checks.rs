//! Legacy HTTP health checks (global): the timeout may not exceed the interval (and follows a
//! short interval when not given); `requestPath` must be a path.

use super::resource::{Collection, Fields, Insert, Ty, Where};
use super::*;
use crate::model::gce::http_health_check::HttpHealthCheckSpec;

/// A legacy HTTP health check's interval and timeout, in seconds.
const CHECK_SECONDS: Ty = Ty::Int(1, 300);
/// A health check's healthy and unhealthy thresholds.
const THRESHOLD: Ty = Ty::Int(1, 10);

impl Collection for HttpHealthCheckSpec {
    const PLACE: Where = Where::Global;
    const OPTIONAL: Fields = &[
        ("host", Ty::Str),
        ("requestPath", Ty::Str),
        ("port", Ty::Int(1, 65_535)),
        ("checkIntervalSec", CHECK_SECONDS),
        ("timeoutSec", CHECK_SECONDS),
        ("unhealthyThreshold", THRESHOLD),
        ("healthyThreshold", THRESHOLD),
    ];

    fn defaults() -> Value {
        json!({"requestPath": "/", "port": 80, "checkIntervalSec": 5, "timeoutSec": 5, "unhealthyThreshold": 2, "healthyThreshold": 2})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        if !new.given.contains("timeoutSec") {
            if let Some(interval) = new.fields.get("checkIntervalSec").and_then(Value::as_i64) {
                new.fields
                    .insert("timeoutSec".into(), json!(interval.min(5)));
            }
        }
        // A timeout longer than the interval is GCE's 400; when the interval is shorter than
        // the default timeout and no timeout is given, the timeout follows it (above).
        let interval = new
            .fields
            .get("checkIntervalSec")
            .and_then(Value::as_i64)
            .unwrap_or(5);
        let timeout = new
            .fields
            .get("timeoutSec")
            .and_then(Value::as_i64)
            .unwrap_or(5);
        if timeout > interval {
            return Err(invalid(format!(
                "Invalid value for field 'resource.timeoutSec': '{timeout}'. TimeoutSec should be less than or equal to checkIntervalSec ({interval})."
            )));
        }
        let path = new
            .fields
            .get("requestPath")
            .and_then(Value::as_str)
            .unwrap_or("/");
        if !path.starts_with('/') || path.chars().any(char::is_control) {
            return Err(invalid(format!(
                "Invalid value for field 'resource.requestPath': '{}'. Must start with '/' and hold no control characters.",
                path.escape_default()
            )));
        }
        Ok(())
    }
}
