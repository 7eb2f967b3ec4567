//! An operation (`compute#operation`, zonal, regional or global): the record of one change,
//! already `DONE` when answered. Upstream equivalent: Compute Engine's `Operation`.

use serde::{Deserialize, Serialize};

/// An operation's fields.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OperationSpec {
    /// `insert`, `delete`, `stop`, `setMetadata`, ...
    pub operation_type: String,
    pub target_link: String,
    /// The target's numeric ID, as a string (GCE's uint64).
    pub target_id: String,
    pub status: String,
    pub user: String,
    pub progress: i64,
    pub insert_time: String,
    pub start_time: String,
    pub end_time: String,
}

resource! {
    /// A stored operation.
    Operation = Object<OperationSpec>,
    one: "operation", many: "operations", title: "Operation"
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::gce::fixture::store_with;

    #[test]
    fn stored_per_scope_and_shown_with_gce_names() {
        let t = "2026-11-22T13:30:00.000-08:00".to_owned();
        let spec = OperationSpec {
            operation_type: "insert".into(),
            target_link: "https://h/x".into(),
            target_id: "7".into(),
            status: "DONE".into(),
            user: "u@local-cloud".into(),
            progress: 100,
            insert_time: t.clone(),
            start_time: t.clone(),
            end_time: t,
        };
        let op = Operation::new("p", "operation-1".into(), "zones/z".into(), spec);
        let (_dir, store) = store_with(&op);
        store.read(|v| {
            assert!(Operation::get_in(v, "p", "global", "operation-1").is_none());
            let got = Operation::get_in(v, "p", "zones/z", "operation-1").unwrap();
            let f = got.fields();
            assert_eq!(f["operationType"], "insert");
            assert_eq!(f["targetId"], "7");
            assert_eq!(f["progress"], 100);
        });
    }
}
