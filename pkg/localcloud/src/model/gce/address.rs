//! A reserved external address (`compute#address`, regional), held by a floating IP of the
//! external network without a port. Upstream equivalent: Compute Engine's `Address`.

use serde::{Deserialize, Serialize};

/// An address's fields.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AddressSpec {
    pub description: Option<String>,
    /// The IPv4 address (the one asked for, or the one taken).
    pub address: String,
    pub address_type: String,
    pub network_tier: String,
    pub status: String,
    pub purpose: Option<String>,
    pub subnetwork: Option<String>,
    pub network: Option<String>,
    pub ip_version: Option<String>,
    pub prefix_length: Option<i64>,
}

resource! {
    /// A stored address.
    Address = Object<AddressSpec>,
    one: "address", many: "addresses", title: "Address"
}
