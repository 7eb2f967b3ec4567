//! Time and identifiers as every record and service writes them: seconds since the epoch,
//! RFC 3339 UTC timestamps (`2026-11-22T21:30:00Z`, the form records store; each dialect
//! reshapes it when shown) and new resource IDs. Below [`crate::model`], so records stamp
//! themselves without the API.

use std::time::{SystemTime, UNIX_EPOCH};

use jiff::Timestamp;

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `2026-11-22T21:30:00Z`; instants past what the calendar holds (year 9999) are its last
/// second.
pub(crate) fn iso(secs: u64) -> String {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| Timestamp::from_second(s).ok())
        .unwrap_or(Timestamp::MAX);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The seconds of a stored timestamp (the inverse of [`iso`]); `None` when it does not parse.
pub(crate) fn parse_iso(s: &str) -> Option<u64> {
    let t: Timestamp = s.parse().ok()?;
    u64::try_from(t.as_second()).ok()
}

/// Epoch milliseconds of a stored timestamp, as the oVirt and Photon dialects write dates; what
/// does not parse is the epoch.
pub(crate) fn epoch_millis(stored: &str) -> u64 {
    parse_iso(stored).map_or(0, |s| s.saturating_mul(1000))
}

/// A new resource ID (UUID, as Nova/Neutron/Cinder use).
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A new Keystone-style ID (32 hex digits).
pub(crate) fn new_hex_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_formats_known_instants() {
        assert_eq!(iso(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso(1_795_378_245), "2026-11-22T20:10:45Z");
        assert!(iso(u64::MAX).starts_with("9999-12-"));
    }

    #[test]
    fn ids_are_uuids_and_hex() {
        assert_eq!(new_id().len(), 36);
        assert_eq!(new_hex_id().len(), 32);
    }
}
