//! A target pool (`compute#targetPool`, regional): the instances a forwarding rule sends to,
//! with at most one legacy HTTP health check. Upstream equivalent: Compute Engine's
//! `TargetPool`.

use serde::{Deserialize, Serialize};
use serde_json::Number;

use super::scoped_ref;

/// A target pool's fields (`instances` and `healthChecks` as full links).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TargetPoolSpec {
    pub description: Option<String>,
    pub instances: Vec<String>,
    pub health_checks: Option<Vec<String>>,
    pub session_affinity: String,
    /// Kept as given (`1` stays `1`, not `1.0`).
    pub failover_ratio: Option<Number>,
    pub backup_pool: Option<String>,
}

resource! {
    /// A stored target pool.
    TargetPool = Object<TargetPoolSpec>,
    one: "targetPool", many: "targetPools", title: "Target pool"
}

/// `(scope, name)` of a target pool reference (`.../regions/r/targetPools/p`).
pub(crate) fn target_pool_key(reference: &str) -> Option<(String, String)> {
    let (region, name) = scoped_ref(reference, "regions", "targetPools")?;
    (!name.is_empty()).then(|| (format!("regions/{region}"), name.to_owned()))
}
