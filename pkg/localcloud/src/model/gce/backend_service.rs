//! A regional backend service (`compute#backendService`): the instance groups an internal
//! forwarding rule sends to, how (`protocol`, `sessionAffinity`) and the health check that
//! decides which instances get traffic. Upstream equivalent: Compute Engine's
//! `BackendService` (`regionBackendServices`).

use serde::{Deserialize, Serialize};

use super::scoped_ref;

/// One backend: an instance group (a full link).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Backend {
    pub group: String,
    pub balancing_mode: Option<String>,
    pub failover: Option<bool>,
    pub description: Option<String>,
}

/// A backend service's fields (`healthChecks` as full links).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BackendServiceSpec {
    pub description: Option<String>,
    #[serde(default)]
    pub backends: Vec<Backend>,
    #[serde(default)]
    pub health_checks: Vec<String>,
    pub load_balancing_scheme: String,
    pub protocol: String,
    pub session_affinity: String,
    pub timeout_sec: i64,
    pub network: Option<String>,
    pub connection_draining: Option<serde_json::Value>,
}

resource! {
    /// A stored backend service.
    BackendService = Object<BackendServiceSpec>,
    one: "backendService", many: "backendServices", title: "Backend service",
    shown: BackendServiceSpec::shown
}

impl BackendServiceSpec {
    /// The fields as GCE shows them: with the fingerprint an update may quote.
    pub(crate) fn shown(fields: &mut serde_json::Map<String, serde_json::Value>) {
        let print = super::fingerprint(&serde_json::Value::Object(fields.clone()));
        fields.insert("fingerprint".into(), serde_json::json!(print));
    }
}

/// `(scope, name)` of a regional backend service reference
/// (`.../regions/r/backendServices/b`).
pub(crate) fn backend_service_key(reference: &str) -> Option<(String, String)> {
    let (region, name) = scoped_ref(reference, "regions", "backendServices")?;
    (!name.is_empty()).then(|| (format!("regions/{region}"), name.to_owned()))
}
