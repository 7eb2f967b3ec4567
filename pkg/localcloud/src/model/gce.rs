//! Compute Engine's view of the local cloud's records. Instances are the Nova servers
//! ([`crate::api::compute::Server`]), their `networkIP` a Neutron port's fixed IP, their
//! `natIP` a floating IP, their metadata the server's metadata; zones are the availability
//! zones and the region is the cloud's region. What GCE has and OpenStack has not (routes,
//! firewalls, target pools, forwarding rules, addresses, HTTP health checks, operations,
//! project metadata) is stored as [`GceObject`]s: the resource's own JSON fields plus the
//! common [`Meta`]. This module holds what every GCE view shares: numeric IDs, timestamps in
//! GCE's form, fingerprints and resource URLs. Upstream equivalent: the resource types of the
//! Compute Engine v1 API.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Meta;

/// The API path prefix (`https://compute.googleapis.com/compute/v1`).
pub(crate) const PREFIX: &str = "/compute/v1";

/// A GCE resource without an OpenStack counterpart.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GceObject {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    /// `global`, `regions/<r>` or `zones/<z>`.
    pub scope: String,
    /// The resource's fields as GCE shows them, without `id`, `kind`, `name`,
    /// `creationTimestamp` and `selfLink` (derived when shown).
    pub fields: Map<String, Value>,
}

impl GceObject {
    /// The table of a collection (`routes` → `gce_routes`).
    pub fn table(collection: &str) -> String {
        format!("gce_{collection}")
    }

    /// The key within its table: scope and name (names are unique per scope).
    pub fn key(scope: &str, name: &str) -> String {
        format!("{scope}/{name}")
    }
}

/// The numeric ID GCE shows (a uint64, as a string in JSON), derived from a record's UUID so
/// it is stable and needs no counter. Kept below 2^63 for clients that read it as signed.
pub(crate) fn numeric_id(uuid: &str) -> u64 {
    let h = uuid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h >> 1
}

/// Seconds since the epoch of `2026-11-22T21:30:00Z` (the form [`crate::time::iso`] writes).
pub(crate) fn parse_iso(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), the inverse of `iso`.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

/// GCE's timestamp form: RFC 3339 with milliseconds and the offset of the zone the API
/// servers keep (US Pacific; written as standard time, -08:00, all year), e.g.
/// `2026-11-22T13:30:00.000-08:00`. Clients that assume `Z` break on it, as on GCE.
pub(crate) fn timestamp(iso: &str) -> String {
    let secs = parse_iso(iso).unwrap_or(0);
    let local = crate::time::iso(secs.saturating_sub(8 * 3600));
    format!("{}.000-08:00", local.trim_end_matches('Z'))
}

/// A fingerprint (GCE's optimistic-lock token): base64 of 8 bytes of a hash of `value`.
pub(crate) fn fingerprint(value: &Value) -> String {
    let h = numeric_id(&value.to_string()).to_be_bytes();
    base64(&h)
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The last path segment of a resource reference: GCE accepts a full URL, a partial one
/// (`zones/z/machineTypes/m`) or a bare name wherever it takes a reference.
pub(crate) fn last_segment(reference: &str) -> &str {
    reference
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(reference)
}

/// Metadata items `[{"key", "value"}]` as GCE shows them, with their fingerprint.
pub(crate) fn metadata_view(items: &std::collections::BTreeMap<String, String>) -> Value {
    let list: Vec<Value> = items
        .iter()
        .map(|(k, v)| serde_json::json!({"key": k, "value": v}))
        .collect();
    let mut view = serde_json::json!({
        "kind": "compute#metadata",
        "fingerprint": fingerprint(&serde_json::json!(items)),
    });
    if !list.is_empty() {
        view["items"] = Value::Array(list);
    }
    view
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parse_iso_inverts_iso() {
        for secs in [0, 951_782_400, 1_795_378_245, 4_102_444_800] {
            assert_eq!(parse_iso(&crate::time::iso(secs)), Some(secs));
        }
        assert_eq!(parse_iso("2026-13-01T00:00:00Z"), None);
        assert_eq!(parse_iso("nonsense"), None);
    }

    #[test]
    fn timestamps_have_millis_and_an_offset() {
        assert_eq!(
            timestamp("2026-11-22T21:30:05Z"),
            "2026-11-22T13:30:05.000-08:00"
        );
        assert_eq!(
            timestamp("2026-11-22T03:00:00Z"),
            "2026-11-21T19:00:00.000-08:00"
        );
    }

    #[test]
    fn base64_pads_as_rfc4648() {
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(fingerprint(&serde_json::json!({})).len(), 12);
    }

    #[test]
    fn references_resolve_to_names() {
        assert_eq!(
            last_segment("https://x/compute/v1/projects/p/zones/z/machineTypes/m1.small"),
            "m1.small"
        );
        assert_eq!(last_segment("global/networks/private"), "private");
        assert_eq!(last_segment("private"), "private");
    }

    #[test]
    fn numeric_ids_are_stable_and_distinct() {
        assert_eq!(numeric_id("a"), numeric_id("a"));
        assert_ne!(numeric_id("a"), numeric_id("b"));
        assert!(numeric_id("a") < 1 << 63);
    }
}
