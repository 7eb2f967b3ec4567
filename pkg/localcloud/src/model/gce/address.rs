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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::gce::fixture::stored;
    use crate::model::Record;

    #[test]
    fn stored_per_region_and_shown_with_gce_names() {
        let fields = serde_json::json!({
            "address": "172.24.4.10", "addressType": "EXTERNAL", "networkTier": "PREMIUM",
            "status": "RESERVED",
        });
        let (_dir, store, _) = stored::<AddressSpec>("p", "a", "regions/r1", fields);
        store.read(|v| {
            assert!(Address::get_at(v, "regions/r2", "a").is_none());
            let got = Address::get_at(v, "regions/r1", "a").unwrap();
            assert_eq!(got.key(), "regions/r1/a");
            assert_eq!(got.fields()["addressType"], "EXTERNAL");
            assert!(!got.fields().contains_key("prefixLength"));
        });
    }
}
