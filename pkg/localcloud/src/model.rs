//! Typed records of the local cloud, shared by the API handlers and the data plane. [`Meta`] is
//! what every stored OpenStack resource has in common (ID, owning project, timestamps,
//! revision) and is flattened into each record, so a record is stamped when created
//! ([`Meta::new`]) and on every change ([`Meta::touch`]) in one way for every service.
//! Every kind of record implements [`Record`]. [`octavia`] holds the Load Balancer v2 records. Upstream equivalent: the SQLAlchemy models
//! of each service (`neutron.db.models_v2`, `octavia.db.models`) with their `standard_attr`
//! mix-in (`created_at`, `updated_at`, `revision_number`).

pub(crate) mod azure;
pub(crate) mod cloudstack;
pub(crate) mod compute;
pub(crate) mod config_drive;
pub(crate) mod gce;
pub(crate) mod identity;
pub(crate) mod network;
pub(crate) mod octavia;
pub(crate) mod photon;
mod record;
pub(crate) mod volume;

pub(crate) use record::{impl_record, Names, NotFound, Record};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::time::{iso, new_id, now};

/// The fields every stored resource has. Flattened into records, so the stored and shown JSON
/// keeps them at the top level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub id: String,
    pub project_id: String,
    /// `created`/`updated` are how Nova records were stored before this type existed.
    #[serde(alias = "created")]
    pub created_at: String,
    #[serde(alias = "updated")]
    pub updated_at: String,
    /// Neutron shows it; Octavia and Cinder keep it unseen. Records written before it existed
    /// read as 0.
    #[serde(default)]
    pub revision_number: u64,
}

impl Meta {
    /// A new resource of `project_id`: fresh UUID, created and updated now, revision 1.
    pub fn new(project_id: impl Into<String>) -> Self {
        let t = iso(now());
        Meta {
            id: new_id(),
            project_id: project_id.into(),
            created_at: t.clone(),
            updated_at: t,
            revision_number: 1,
        }
    }

    /// Records a change: updated now, next revision.
    pub fn touch(&mut self) {
        self.updated_at = iso(now());
        self.revision_number += 1;
    }

    /// Adds Neutron's standard attributes (`tenant_id`, `project_id`, timestamps,
    /// `revision_number`, `tags`) to a resource's view.
    pub fn neutron_view(&self, mut view: Value) -> Value {
        if let Some(o) = view.as_object_mut() {
            o.insert("tenant_id".into(), json!(self.project_id));
            o.insert("project_id".into(), json!(self.project_id));
            o.insert("created_at".into(), json!(self.created_at));
            o.insert("updated_at".into(), json!(self.updated_at));
            o.insert("revision_number".into(), json!(self.revision_number));
            o.insert("tags".into(), json!([]));
        }
        view
    }
}

#[cfg(test)]
mod tests;
