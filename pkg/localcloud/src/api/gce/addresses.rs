//! Addresses (regional): an IPv4 address reserved from the external network (the one asked
//! for, or a free one), held until the address is deleted.

use super::resource::{one_of, reserve_address, Collection, Fields, Insert, Ty, Where};
use super::*;
use crate::model::gce::address::AddressSpec;

impl Collection for AddressSpec {
    const PLACE: Where = Where::Regional;
    const OPTIONAL: Fields = &[
        ("address", Ty::Str),
        ("addressType", Ty::Str),
        ("networkTier", Ty::Str),
        ("purpose", Ty::Str),
        ("subnetwork", Ty::Str),
        ("network", Ty::Str),
        ("ipVersion", Ty::Str),
        ("prefixLength", Ty::Int(0, 128)),
    ];

    fn defaults() -> Value {
        json!({"addressType": "EXTERNAL", "networkTier": "PREMIUM", "status": "RESERVED"})
    }

    fn prepare(new: Insert<'_, '_>) -> Result<(), ApiError> {
        one_of(new.fields, "networkTier", &["PREMIUM", "STANDARD"])?;
        let wanted = wanted_ipv4(new.fields, "address")?;
        let address = reserve_address(new.tx, new.s, new.scope, wanted)?;
        new.fields.insert("address".into(), json!(address));
        Ok(())
    }
}

/// The IPv4 address the field `key` asks for, if any.
pub(super) fn wanted_ipv4(
    fields: &Map<String, Value>,
    key: &str,
) -> Result<Option<String>, ApiError> {
    let wanted = fields.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(w) = &wanted {
        if w.parse::<std::net::Ipv4Addr>().is_err() {
            return Err(invalid(format!(
                "Invalid value for field 'resource.{key}': '{}'. Must be an IPv4 address.",
                w.escape_default()
            )));
        }
    }
    Ok(wanted)
}
