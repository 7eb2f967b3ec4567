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
