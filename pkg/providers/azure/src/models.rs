//! The Resource Manager resources the provider reads and writes, typed with serde as ARM's
//! JSON spells them (camelCase, `IP` kept upper-case where Azure writes it). Every struct is
//! lenient as Microsoft's own models are: any field may be missing (`#[serde(default)]`) or
//! `null`, and fields not modelled here are kept (`extra`) and sent back on a PUT, so a
//! read-modify-write does not drop what the provider does not know about. Upstream
//! equivalent: the Azure SDK for Go's `armcompute`/`armnetwork` models.

mod compute;
mod network;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

pub use compute::*;
pub use network::*;

/// `null` read as the type's default (ARM writes `"zones": null`, `"tags": null`).
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Fields not modelled, kept as they came.
pub type Extra = Map<String, Value>;

/// The envelope every ARM resource (and inline child: a subnet, a rule) shares.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    default,
    bound = "P: Serialize + for<'a> Deserialize<'a> + Default"
)]
pub struct Resource<P> {
    /// The resource ID (`/subscriptions/.../providers/Microsoft.Compute/virtualMachines/vm1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Microsoft.Compute/virtualMachines`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The location (`westeurope`); required when a top-level resource is created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Tags.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub tags: BTreeMap<String, String>,
    /// The etag (`W/"..."`), for `If-Match`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// Availability zones (`["1"]`); fixed once made.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// The SKU (`{"name": "Standard"}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sku: Option<Sku>,
    /// What manages it (a disk: the VM it is attached to).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// The resource's properties.
    #[serde(deserialize_with = "nullable")]
    pub properties: P,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A SKU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sku {
    /// `Standard`, `Basic`, `Standard_LRS`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Regional`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A reference to another resource: `{"id": "..."}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Reference {
    /// The resource ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Reference {
    /// A reference to `id`.
    pub fn to(id: impl Into<String>) -> Self {
        Reference {
            id: Some(id.into()),
            extra: Extra::new(),
        }
    }
}

/// A resource group.
pub type ResourceGroup = Resource<ResourceGroupProperties>;

/// A resource group's properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceGroupProperties {
    /// `Succeeded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Fields not modelled.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The last segment of a resource ID (`.../networkInterfaces/nic-1` → `nic-1`).
pub fn name_of(id: &str) -> &str {
    id.trim_end_matches('/').rsplit('/').next().unwrap_or(id)
}

#[cfg(test)]
mod tests;
