//! A legacy HTTP health check (`compute#httpHealthCheck`, global), what target pools probe
//! their instances with. Upstream equivalent: Compute Engine's `HttpHealthCheck`.

use serde::{Deserialize, Serialize};

/// An HTTP health check's fields (every one but `description` and `host` defaulted).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HttpHealthCheckSpec {
    pub description: Option<String>,
    pub host: Option<String>,
    pub request_path: String,
    pub port: i64,
    pub check_interval_sec: i64,
    pub timeout_sec: i64,
    pub unhealthy_threshold: i64,
    pub healthy_threshold: i64,
}

resource! {
    /// A stored HTTP health check.
    HttpHealthCheck = Object<HttpHealthCheckSpec>,
    one: "httpHealthCheck", many: "httpHealthChecks", title: "HTTP health check"
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::gce::fixture::stored;

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
}
