//! Addresses, stored and shown, against the store without HTTP.

use super::stored;
use crate::model::gce::address::*;
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
