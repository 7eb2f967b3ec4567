//! A reserved external address (`compute#address`, regional), held by a floating IP of the
//! external network without a port. Upstream equivalent: Compute Engine's `Address`.

use serde::{Deserialize, Serialize};

use super::{Object, Spec};
use crate::model::Names;

/// A stored address.
pub(crate) type Address = Object<AddressSpec>;

/// An address's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AddressSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The IPv4 address (the one asked for, or the one taken).
    pub address: String,
    pub address_type: String,
    pub network_tier: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_length: Option<i64>,
}

impl Spec for AddressSpec {
    const COLLECTION: &'static str = "addresses";
    const KIND: &'static str = "compute#address";
    const TABLE: &'static str = "gce_addresses";
    const NAMES: Names = Names {
        one: "address",
        many: "addresses",
        title: "Address",
    };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Record;
    use crate::store::Store;

    #[test]
    fn stored_per_region_and_shown_with_gce_names() {
        let spec: AddressSpec = serde_json::from_value(serde_json::json!({
            "address": "172.24.4.10", "addressType": "EXTERNAL", "networkTier": "PREMIUM",
            "status": "RESERVED",
        }))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = Address::new("p", "a".into(), "regions/r1".into(), spec);
        store.write(|tx| a.put(tx)).unwrap();
        store.read(|v| {
            assert!(Address::get_at(v, "regions/r2", "a").is_none());
            let got = Address::get_at(v, "regions/r1", "a").unwrap();
            assert_eq!(got.key(), "regions/r1/a");
            assert_eq!(got.fields()["addressType"], "EXTERNAL");
            assert!(!got.fields().contains_key("prefixLength"));
        });
    }
}
