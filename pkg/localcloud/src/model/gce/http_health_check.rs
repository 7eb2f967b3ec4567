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
