//! A legacy HTTP health check (`compute#httpHealthCheck`, global), what target pools probe
//! their instances with. Upstream equivalent: Compute Engine's `HttpHealthCheck`.

use serde::{Deserialize, Serialize};

use super::{Object, Spec};
use crate::model::Names;

/// A stored HTTP health check.
pub(crate) type HttpHealthCheck = Object<HttpHealthCheckSpec>;

/// An HTTP health check's fields (every one but `description` and `host` defaulted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HttpHealthCheckSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub request_path: String,
    pub port: i64,
    pub check_interval_sec: i64,
    pub timeout_sec: i64,
    pub unhealthy_threshold: i64,
    pub healthy_threshold: i64,
}

impl Spec for HttpHealthCheckSpec {
    const COLLECTION: &'static str = "httpHealthChecks";
    const KIND: &'static str = "compute#httpHealthCheck";
    const TABLE: &'static str = "gce_httpHealthChecks";
    const NAMES: Names = Names {
        one: "httpHealthCheck",
        many: "httpHealthChecks",
        title: "HTTP health check",
    };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Record;
    use crate::store::Store;

    #[test]
    fn stored_and_shown_with_gce_names() {
        let spec: HttpHealthCheckSpec = serde_json::from_value(serde_json::json!({
            "requestPath": "/healthz", "port": 10256, "checkIntervalSec": 8, "timeoutSec": 1,
            "unhealthyThreshold": 3, "healthyThreshold": 1,
        }))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let hc = HttpHealthCheck::new("p", "hc".into(), "global".into(), spec);
        store.write(|tx| hc.put(tx)).unwrap();
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
