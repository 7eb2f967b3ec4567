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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::gce::fixture::stored;
    use crate::model::Record;

    #[test]
    fn references_name_a_regional_pool() {
        assert_eq!(
            target_pool_key("https://h/compute/v1/projects/p/regions/r/targetPools/tp"),
            Some(("regions/r".into(), "tp".into()))
        );
        assert_eq!(target_pool_key("global/targetPools/tp"), None);
        assert_eq!(target_pool_key("regions/r/targetPools/"), None);
    }

    #[test]
    fn stored_with_instances_and_ratio_as_given() {
        let fields = serde_json::json!({
            "instances": ["https://h/zones/z/instances/a"], "sessionAffinity": "NONE",
            "failoverRatio": 1,
        });
        let (_dir, store, mut tp) = stored::<TargetPoolSpec>("p", "tp", "regions/r", fields);
        tp.spec.instances.clear();
        tp.meta.touch();
        store.write(|tx| tp.put(tx)).unwrap();
        let got = store
            .read(|v| TargetPool::get_at(v, "regions/r", "tp"))
            .unwrap();
        assert!(got.spec.instances.is_empty());
        assert_eq!(got.meta.revision_number, 2);
        assert_eq!(
            serde_json::to_string(&got.fields()["failoverRatio"]).unwrap(),
            "1"
        );
    }
}
