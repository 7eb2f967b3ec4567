//! A project's `commonInstanceMetadata`: key/value items every instance of the project sees
//! under `project/attributes/`, keyed by the Keystone project ID. Upstream equivalent: Compute
//! Engine's `Project.commonInstanceMetadata`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{Meta, Names, Record};
use crate::store::Read;

/// A project's metadata items, stored once set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProjectMetadata {
    #[serde(flatten)]
    pub meta: Meta,
    pub items: BTreeMap<String, String>,
}

impl Record for ProjectMetadata {
    const TABLE: &'static str = "gce_project_metadata";
    const NAMES: Names = Names {
        one: "commonInstanceMetadata",
        many: "commonInstanceMetadata",
        title: "Project metadata",
    };
    const NOT_FOUND: &'static str = "notFound";

    fn meta(&self) -> &Meta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }

    /// One per project: keyed by the Keystone project ID.
    fn key(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.meta.project_id)
    }
}

impl ProjectMetadata {
    /// `items` as the metadata of `project_id`: the stored record changed, or a new one.
    pub fn set(r: &impl Read, project_id: &str, items: BTreeMap<String, String>) -> Self {
        match Self::get(r, project_id) {
            Some(mut md) => {
                md.items = items;
                md.meta.touch();
                md
            }
            None => ProjectMetadata {
                meta: Meta::new(project_id),
                items,
            },
        }
    }
}

/// The project's `commonInstanceMetadata` items (also what each instance's metadata server
/// shows under `project/attributes/`); none set: no items.
pub(crate) fn common_metadata(r: &impl Read, project_id: &str) -> BTreeMap<String, String> {
    ProjectMetadata::get(r, project_id)
        .map(|md| md.items)
        .unwrap_or_default()
}
