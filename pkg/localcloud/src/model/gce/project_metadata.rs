//! A project's `commonInstanceMetadata`: key/value items every instance of the project sees
//! under `project/attributes/`, keyed by the Keystone project ID. Upstream equivalent: Compute
//! Engine's `Project.commonInstanceMetadata`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::{Read, Tx};

/// The table of project metadata, by Keystone project ID.
pub(crate) const TABLE: &str = "gce_project_metadata";

/// A project's metadata items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProjectMetadata {
    pub project_id: String,
    pub items: BTreeMap<String, String>,
}

impl ProjectMetadata {
    /// The metadata of `project_id` (none set: no items).
    pub fn get(r: &impl Read, project_id: &str) -> ProjectMetadata {
        r.get(TABLE, project_id).unwrap_or_else(|| ProjectMetadata {
            project_id: project_id.to_owned(),
            items: BTreeMap::new(),
        })
    }

    pub fn put(&self, tx: &mut Tx<'_>) -> crate::Result<()> {
        tx.put(TABLE, &self.project_id, self)
    }
}

/// The project's `commonInstanceMetadata` items (also what each instance's metadata server
/// shows under `project/attributes/`).
pub(crate) fn common_metadata(r: &impl Read, project_id: &str) -> BTreeMap<String, String> {
    ProjectMetadata::get(r, project_id).items
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn per_project_and_empty_until_set() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.read(|v| common_metadata(v, "p")).is_empty());
        let md = ProjectMetadata {
            project_id: "p".into(),
            items: BTreeMap::from([("ssh-keys".into(), "u:k".into())]),
        };
        store.write(|tx| md.put(tx)).unwrap();
        store.read(|v| {
            assert_eq!(common_metadata(v, "p")["ssh-keys"], "u:k");
            assert!(common_metadata(v, "q").is_empty());
        });
    }
}
