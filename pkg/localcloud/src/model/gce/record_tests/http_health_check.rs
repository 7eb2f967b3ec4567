//! HTTP health checks, stored and shown, against the store without HTTP.

use super::stored;
use crate::model::gce::http_health_check::*;

#[test]
fn stored_and_shown_with_gce_names() {
    let fields = serde_json::json!({
        "requestPath": "/healthz", "port": 10256, "checkIntervalSec": 8, "timeoutSec": 1,
        "unhealthyThreshold": 3, "healthyThreshold": 1,
    });
    let (_dir, store, _) = stored::<HttpHealthCheckSpec>("p", "hc", "global", fields);
    let got = store
        .read(|v| HttpHealthCheck::get_at(v, "global", "hc"))
        .unwrap();
    assert_eq!(got.spec.port, 10256);
    let f = got.fields();
    assert_eq!(f["requestPath"], "/healthz");
    assert_eq!(f["checkIntervalSec"], 8);
    assert!(!f.contains_key("host"));
}
