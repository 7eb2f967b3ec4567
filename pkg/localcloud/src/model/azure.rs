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

/// The table of Resource Manager resources (networks, NICs, VMs, disks, ...).
pub(crate) const ARM_RESOURCES: &str = "azure_resources";

/// A Resource Manager resource of a resource group: what ARM shows of it that the record
/// behind it (a Neutron network or port, a Nova server, a Cinder volume) does not hold. Its
/// `properties` keep what the client asked, as ARM echoes it; what the cloud decides
/// (addresses, states) is read from the backing record when it is shown. Child resources that
/// ARM also shows inline (subnets, security rules, routes) live in their parent's
/// `properties`; `children` maps a child's name (lower case) to the record behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ArmResource {
    #[serde(flatten)]
    pub meta: Meta,
    /// The resource group's name as it was created.
    pub group: String,
    /// `Microsoft.Network/virtualNetworks`.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    /// `{project}/{group}/{type}`, lower case: what a list by group reads through the index.
    pub scope: String,
    pub location: String,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// `W/"<uuid>"`, new on every change.
    pub etag: String,
    #[serde(default)]
    pub sku: Option<serde_json::Value>,
    #[serde(default)]
    pub zones: Vec<String>,
    /// The ID of the record behind it, if any.
    #[serde(default)]
    pub backing: Option<String>,
    #[serde(default)]
    pub children: BTreeMap<String, String>,
    /// What the dialect knows of the resource that neither the backing record nor the
    /// client's properties hold (a stopped VM's `deallocated`).
    #[serde(default)]
    pub status: Option<String>,
    pub properties: serde_json::Value,
}

/// Where a resource of `project_id` is stored: `{project}/{group}/{type}/{name}`, lower case.
pub(crate) fn resource_key(project_id: &str, group: &str, kind: &str, name: &str) -> String {
    format!(
        "{}/{name}",
        resource_scope(project_id, group, kind),
        name = name.to_lowercase()
    )
}

/// The list scope of a group's resources of one type.
pub(crate) fn resource_scope(project_id: &str, group: &str, kind: &str) -> String {
    format!(
        "{project_id}/{}/{}",
        group.to_lowercase(),
        kind.to_lowercase()
    )
}

impl_record!(ArmResource: ARM_RESOURCES, ("resource", "value", "Resource"), "ResourceNotFound",
    &["id", "name", "project_id", "scope", "backing", "type"];
    fn key(&self) -> Cow<'_, str> {
        Cow::Owned(resource_key(&self.meta.project_id, &self.group, &self.kind, &self.name))
    }
);

/// The place of VM `vm` among the VMs `members` of its availability set, which decides its
/// fault and update domains (the place modulo the set's counts): creation order, by the Nova
/// server behind each (its `index`; a VM without one goes last), the same on every read. The
/// VM's `instanceView` and the instance metadata service both ask this.
pub(crate) fn place_in_set(
    r: &impl crate::store::Read,
    vm: &ArmResource,
    members: &[ArmResource],
) -> u64 {
    let order = |m: &ArmResource| {
        m.backing
            .as_ref()
            .and_then(|id| r.get::<super::compute::Server>(super::compute::SERVERS, id))
            .map_or(u64::MAX, |s| s.index)
    };
    let mut keyed: Vec<(u64, &str)> = members
        .iter()
        .map(|m| (order(m), m.meta.id.as_str()))
        .collect();
    keyed.sort();
    keyed
        .iter()
        .position(|(_, id)| *id == vm.meta.id)
        .unwrap_or(0) as u64
}
