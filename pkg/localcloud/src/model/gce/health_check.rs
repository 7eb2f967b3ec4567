//! A health check (`compute#healthCheck`, global), the kind backend services probe their
//! instances with: `TCP` (connect) or `HTTP` (a GET answered 200). Upstream equivalent:
//! Compute Engine's `HealthCheck` (not the legacy `HttpHealthCheck` of target pools).

use serde::{Deserialize, Serialize};

/// The probe of one type (`tcpHealthCheck`, `httpHealthCheck`).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Probe {
    pub port: Option<i64>,
    pub port_name: Option<String>,
    pub port_specification: Option<String>,
    pub host: Option<String>,
    pub request_path: Option<String>,
    pub request: Option<String>,
    pub response: Option<String>,
    pub proxy_header: Option<String>,
}

/// A health check's fields (the probe of its `type` is set, the other absent).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HealthCheckSpec {
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub check_interval_sec: i64,
    pub timeout_sec: i64,
    pub healthy_threshold: i64,
    pub unhealthy_threshold: i64,
    pub tcp_health_check: Option<Probe>,
    pub http_health_check: Option<Probe>,
}

resource! {
    /// A stored health check.
    HealthCheck = Object<HealthCheckSpec>,
    one: "healthCheck", many: "healthChecks", title: "Health check"
}

impl HealthCheckSpec {
    /// The probe of the check's type.
    pub(crate) fn probe(&self) -> Option<&Probe> {
        match self.kind.as_str() {
            "HTTP" => self.http_health_check.as_ref(),
            "TCP" => self.tcp_health_check.as_ref(),
            _ => None,
        }
    }
}
