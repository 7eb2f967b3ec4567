//! Photon Controller records: the tasks its changes answer with. Tenants, projects, VMs and
//! persistent disks are the local cloud's own records (Keystone's domain and projects, Nova's
//! servers, Cinder's volumes), shown by the Photon dialect; only a task has no counterpart.
//! Upstream equivalent: Photon Controller's `TaskEntity` (its `StepEntity` is one step here).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{impl_record, Meta};

pub(crate) const PHOTON_TASKS: &str = "photon_tasks";

/// What a failed task's step reports (Photon's `ApiError`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StepError {
    pub code: String,
    pub message: String,
}

/// One change and how it ended. The change is made in the transaction that records its task,
/// so a task is `COMPLETED` (or `ERROR`, the change not made) once stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Task {
    #[serde(flatten)]
    pub meta: Meta,
    /// `CREATE_DISK`, `DELETE_DISK`, `ATTACH_DISK`, `DETACH_DISK`.
    pub operation: String,
    /// `COMPLETED` or `ERROR`.
    pub state: String,
    /// The entity the task is about: its ID and kind (`persistent-disk`, `vm`).
    pub entity_id: String,
    pub entity_kind: String,
    /// Set when the task failed: the step's error.
    #[serde(default)]
    pub error: Option<StepError>,
    /// What the task returns besides its entity (none of the stored ones do yet).
    #[serde(default)]
    pub resource_properties: Option<Value>,
}

impl_record!(Task: PHOTON_TASKS, ("task", "items", "Task"), "TaskNotFound");
