//! Compute Engine's view of the local cloud's records. Instances are the Nova servers, their
//! `networkIP` a Neutron port's fixed IP, their `natIP` a floating IP, their metadata the
//! server's metadata; zones are the availability zones and the region is the cloud's region.
//! What GCE has and OpenStack has not is stored as an [`Object`] of a typed resource, one
//! module each: [`route`], [`firewall`], [`http_health_check`], [`address`], [`target_pool`],
//! [`forwarding_rule`], [`health_check`], [`instance_group`], [`backend_service`],
//! [`operation`] and [`project_metadata`]; IAM's [`service_account_key`]. This module holds what every
//! GCE view shares: numeric IDs, timestamps in GCE's form, fingerprints, resource URLs and
//! references. Upstream equivalent: the resource types of the Compute Engine v1 API.

/// Declares a GCE resource: the stored record (`$record`, an [`Object`] of `$spec`) and the
/// [`Spec`] of its fields from what messages call it: its collection is `many`, its kind
/// `compute#<one>` and its table `gce_<many>`; `shown` names what turns its stored fields into
/// the ones GCE shows, when they differ.
macro_rules! resource {
    ($(#[$attr:meta])* $record:ident = Object<$spec:ty>,
     one: $one:literal, many: $many:literal, title: $title:literal
     $(, shown: $shown:path)?) => {
        $(#[$attr])*
        pub(crate) type $record = $crate::model::gce::Object<$spec>;

        impl $crate::model::gce::Spec for $spec {
            const COLLECTION: &'static str = $many;
            const KIND: &'static str = concat!("compute#", $one);
            const TABLE: &'static str = concat!("gce_", $many);
            const NAMES: $crate::model::Names = $crate::model::Names {
                one: $one,
                many: $many,
                title: $title,
            };
            $(fn shown(fields: &mut serde_json::Map<String, serde_json::Value>) {
                $shown(fields)
            })?
        }
    };
}

pub(crate) mod address;
pub(crate) mod backend_service;
pub(crate) mod firewall;
pub(crate) mod forwarding_rule;
pub(crate) mod health_check;
pub(crate) mod http_health_check;
pub(crate) mod instance_group;
pub(crate) mod operation;
pub(crate) mod project_metadata;
pub(crate) mod route;
pub(crate) mod service_account_key;
pub(crate) mod target_pool;

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Meta, Names, NotFound, Record};
use crate::store::{Read, Tx};

/// The API path prefix (`https://compute.googleapis.com/compute/v1`).
pub(crate) const PREFIX: &str = "/compute/v1";

/// The fields of one kind of GCE resource as GCE shows and takes them (camelCase), without
/// `id`, `kind`, `name`, `creationTimestamp`, `selfLink` and `zone`/`region` (derived when
/// shown from the [`Object`] around them).
pub(crate) trait Spec: Serialize + DeserializeOwned + Clone + Send + 'static {
    /// The path segment of its collection (`routes`).
    const COLLECTION: &'static str;
    /// `compute#route`
    const KIND: &'static str;
    /// The store table (`gce_routes`).
    const TABLE: &'static str;
    /// What messages call it (`many` is the collection).
    const NAMES: Names;
    /// Turns the stored fields into the ones GCE shows (most show as stored).
    fn shown(_fields: &mut Map<String, Value>) {}
}

/// A stored GCE resource: the common [`Meta`], its name and scope and its typed fields. Its
/// key is `<scope>/<name>` (names are unique per scope).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Object<S> {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    /// `global`, `regions/<r>` or `zones/<z>`.
    pub scope: String,
    pub spec: S,
}

/// The key of a resource within its table: scope and name.
pub(crate) fn key(scope: &str, name: &str) -> String {
    format!("{scope}/{name}")
}

impl<S: Spec> Record for Object<S> {
    const TABLE: &'static str = S::TABLE;
    const NAMES: Names = S::NAMES;
    const NOT_FOUND: &'static str = "notFound";

    fn meta(&self) -> &Meta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }

    fn key(&self) -> Cow<'_, str> {
        Cow::Owned(key(&self.scope, &self.name))
    }

    /// GCE's wording; the API names the project too, as it knows it.
    fn not_found(key: &str) -> NotFound {
        NotFound {
            kind: Self::NOT_FOUND,
            message: format!("The resource '{}/{key}' was not found", S::COLLECTION),
        }
    }
}

impl<S: Spec> Object<S> {
    pub fn new(project_id: impl Into<String>, name: String, scope: String, spec: S) -> Self {
        Object {
            meta: Meta::new(project_id),
            name,
            scope,
            spec,
        }
    }

    /// The resource of `scope` called `name`, of any project.
    pub fn get_at(r: &impl Read, scope: &str, name: &str) -> Option<Self> {
        Self::get(r, &key(scope, name))
    }

    /// The resource of `scope` called `name` in the project `project_id`.
    pub fn get_in(r: &impl Read, project_id: &str, scope: &str, name: &str) -> Option<Self> {
        Self::get_at(r, scope, name).filter(|o| o.meta.project_id == project_id)
    }

    /// Every resource of the kind in the project `project_id`.
    pub fn list_in(r: &impl Read, project_id: &str) -> Vec<Self> {
        Self::list(r)
            .into_iter()
            .filter(|o| o.meta.project_id == project_id)
            .collect()
    }

    /// Deletes the resource; whether it was stored.
    pub fn remove(&self, tx: &mut Tx<'_>) -> bool {
        Self::delete(tx, &self.key())
    }

    /// The resource's own fields as GCE shows them.
    pub fn fields(&self) -> Map<String, Value> {
        match serde_json::to_value(&self.spec) {
            Ok(Value::Object(fields)) => fields,
            _ => Map::new(),
        }
    }
}

/// GCE's instance status of a Nova server status.
pub(crate) fn gce_status(nova: &str) -> &'static str {
    match nova {
        "ACTIVE" => "RUNNING",
        "SHUTOFF" => "TERMINATED",
        "BUILD" => "PROVISIONING",
        "PAUSED" | "SUSPENDED" => "SUSPENDED",
        _ => "TERMINATED",
    }
}

/// `(zone, name)` of an instance reference (`.../zones/z/instances/n`).
pub(crate) fn instance_ref(reference: &str) -> Option<(String, String)> {
    let (zone, name) = scoped_ref(reference, "zones", "instances")?;
    Some((zone.to_owned(), name.to_owned()))
}

/// The scope (`z` of `zones/z`, with `scopes` `zones`) and name of a reference to a resource
/// of `collection` (`.../<scopes>/<scope>/<collection>/<name>`).
pub(crate) fn scoped_ref<'a>(
    reference: &'a str,
    scopes: &str,
    collection: &str,
) -> Option<(&'a str, &'a str)> {
    let parts: Vec<&str> = reference.trim_end_matches('/').split('/').collect();
    let i = parts.iter().rposition(|p| *p == collection)?;
    let (scope, name) = (parts.get(i.checked_sub(1)?)?, parts.get(i + 1)?);
    (i >= 2 && parts[i - 2] == scopes).then_some((scope, name))
}

/// The numeric ID GCE shows (a uint64, as a string in JSON), derived from a record's UUID so
/// it is stable and needs no counter. Kept below 2^63 for clients that read it as signed.
pub(crate) fn numeric_id(uuid: &str) -> u64 {
    let h = uuid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h >> 1
}

pub(crate) use crate::time::parse_iso;

/// The offset GCE's API servers write timestamps in: US Pacific standard time, all year.
const PACIFIC: jiff::tz::Offset = jiff::tz::offset(-8);

/// GCE's timestamp form: RFC 3339 with milliseconds and the offset of the zone the API
/// servers keep (US Pacific; written as standard time, -08:00, all year), e.g.
/// `2026-11-22T13:30:00.000-08:00`. Clients that assume `Z` break on it, as on GCE. What does
/// not parse shows as the epoch.
pub(crate) fn timestamp(iso: &str) -> String {
    let secs = parse_iso(iso).unwrap_or(0);
    // Before 08:00 UTC of 1970-01-01 shows as that instant, as the seconds are unsigned.
    let secs = i64::try_from(secs).unwrap_or(i64::MAX).max(8 * 3600);
    let t = jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    t.to_zoned(jiff::tz::TimeZone::fixed(PACIFIC))
        .strftime("%Y-%m-%dT%H:%M:%S.000-08:00")
        .to_string()
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

/// The record tests of each resource (one file each), against the store without HTTP.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod record_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parse_iso_inverts_iso() {
        for (secs, iso) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_795_378_245, "2026-11-22T20:10:45Z"),
            (4_102_444_800, "2100-01-01T00:00:00Z"),
        ] {
            assert_eq!(parse_iso(iso), Some(secs));
        }
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
    fn instance_references_parse() {
        assert_eq!(
            instance_ref("https://h/compute/v1/projects/p/zones/z1/instances/n1"),
            Some(("z1".into(), "n1".into()))
        );
        assert_eq!(
            instance_ref("zones/z/instances/n"),
            Some(("z".into(), "n".into()))
        );
        assert_eq!(instance_ref("instances/n"), None);
        assert_eq!(instance_ref("n"), None);
    }

    #[test]
    fn numeric_ids_are_stable_and_distinct() {
        assert_eq!(numeric_id("a"), numeric_id("a"));
        assert_ne!(numeric_id("a"), numeric_id("b"));
        assert!(numeric_id("a") < 1 << 63);
    }
}
