//! Azure Resource Manager records: resource groups (a subscription's folders; a subscription
//! is a Keystone project, its ID the project's in GUID form) and the operations that
//! long-running requests are polled through. Upstream equivalent: ARM's
//! `Microsoft.Resources/resourceGroups` and its operation results.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{impl_record, Meta};

/// The resource groups' table.
pub(crate) const RESOURCE_GROUPS: &str = "azure_resource_groups";
/// The operations' table.
pub(crate) const OPERATIONS: &str = "azure_operations";

/// A resource group. Its name keeps the case it was created with; ARM finds it whatever the
/// case asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ResourceGroup {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub location: String,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    #[serde(default)]
    pub managed_by: Option<String>,
}

/// Where a group of `project_id` called `name` (any case) is stored.
pub(crate) fn group_key(project_id: &str, name: &str) -> String {
    format!("{project_id}/{}", name.to_lowercase())
}

impl_record!(ResourceGroup: RESOURCE_GROUPS, ("resourceGroup", "value", "Resource group"), "ResourceGroupNotFound";
    fn key(&self) -> Cow<'_, str> {
        Cow::Owned(group_key(&self.meta.project_id, &self.name))
    }
);

/// A long-running operation, as its `Location` or `Azure-AsyncOperation` URL reports it. The
/// local cloud commits before it answers, so an operation has ended when it is made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Operation {
    #[serde(flatten)]
    pub meta: Meta,
    /// `Succeeded`, `Failed` or `Canceled`.
    pub status: String,
    /// The error of a failed one: (code, message).
    #[serde(default)]
    pub error: Option<(String, String)>,
    /// When it was made, seconds since the epoch (old ones are forgotten).
    pub started: u64,
}

impl_record!(Operation: OPERATIONS, ("operation", "value", "Operation"), "OperationNotFound");
