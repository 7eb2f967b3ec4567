//! CloudStack's API keys and request signatures. Each local-cloud user has one key pair,
//! derived from its ID and its current password digest (so a password change revokes it, as
//! regenerating keys does in CloudStack), shown as CloudStack shows keys (86 characters of
//! URL-safe base64). A request is signed as CloudStack's `ApiServer.verifyRequest` checks it:
//! every parameter but `signature`, sorted by name, each `name=value` with the value encoded
//! as Java's `URLEncoder` (then `+` as `%20`), joined by `&`, the whole lower-cased,
//! HMAC-SHA1 with the secret key, base64. Clients encode a few characters differently
//! (Python's `quote` leaves `~`, Go's `QueryEscape` encodes `*`) and some sort by lower-cased
//! name; a signature made any of these ways is taken. `signatureVersion=3` requests carry
//! `expires` (`yyyy-MM-dd'T'HH:mm:ssZ`): a missing, unreadable or past one is refused.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;

use crate::api::identity::users;
use crate::api::Cloud;
use crate::model::identity::User;

/// A user's `(apikey, secretkey)`.
pub(crate) fn keys(cloud: &Cloud, user: &User) -> (String, String) {
    let secret = user
        .password_sha256
        .clone()
        .unwrap_or_else(|| users::digest(&user.id, &cloud.config.password));
    let derive = |label: &str| {
        let mut bytes = Vec::with_capacity(64);
        for half in ["a", "b"] {
            let d = ring::digest::digest(
                &ring::digest::SHA256,
                format!("CloudStack-{label}\0{}\0{secret}\0{half}", user.id).as_bytes(),
            );
            bytes.extend_from_slice(d.as_ref());
        }
        URL_SAFE_NO_PAD.encode(bytes)
    };
    (derive("apikey"), derive("secretkey"))
}

/// How one client family encodes a value: the characters it leaves as they are besides
/// letters and digits.
#[derive(Clone, Copy)]
enum Encoding {
    /// `java.net.URLEncoder` (CloudStack itself): `.`, `-`, `*`, `_`.
    Java,
    /// Python's `quote(s, safe="*")` (`cs`): also `~`.
    Python,
    /// Go's `url.QueryEscape` (go-cloudstack): `.`, `-`, `_`, `~`.
    Go,
}

fn encode(value: &str, how: Encoding) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        let plain = b.is_ascii_alphanumeric()
            || matches!(b, b'.' | b'-' | b'_')
            || (b == b'*' && !matches!(how, Encoding::Go))
            || (b == b'~' && !matches!(how, Encoding::Java));
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The strings a client may have signed for `params` (first value of each name, `signature`
/// left out), lower-cased.
fn signed_strings(params: &[(String, String)]) -> Vec<String> {
    let mut unique: Vec<(&str, &str)> = Vec::new();
    for (k, v) in params {
        if k.eq_ignore_ascii_case("signature") || unique.iter().any(|(u, _)| u == k) {
            continue;
        }
        unique.push((k, v));
    }
    let mut by_name = unique.clone();
    by_name.sort_by(|a, b| a.0.cmp(b.0));
    let mut by_lower = unique;
    by_lower.sort_by_key(|(k, _)| k.to_ascii_lowercase());
    let mut out = Vec::new();
    for order in [&by_name, &by_lower] {
        for how in [Encoding::Java, Encoding::Python, Encoding::Go] {
            let s = order
                .iter()
                .map(|(k, v)| format!("{k}={}", encode(v, how)))
                .collect::<Vec<_>>()
                .join("&")
                .to_lowercase();
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// Whether `signature` (base64 HMAC-SHA1) signs `params` with `secret`.
pub(super) fn verify(params: &[(String, String)], signature: &str, secret: &str) -> bool {
    // A `+` of the base64 sent unencoded in a query reads as a space.
    let Ok(given) = STANDARD.decode(signature.trim().replace(' ', "+")) else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    signed_strings(params)
        .iter()
        .any(|s| ring::hmac::verify(&key, s.as_bytes(), &given).is_ok())
}

/// Why a `signatureVersion=3` request's `expires` refuses it, if it does (`now` in Unix
/// seconds).
pub(super) fn expired(expires: Option<&str>, now: u64) -> Option<String> {
    let Some(e) = expires else {
        return Some("signatureVersion 3 without expires".into());
    };
    let at = jiff::fmt::strtime::parse("%Y-%m-%dT%H:%M:%S%z", e.trim())
        .and_then(|t| t.to_timestamp())
        .map_err(|_| format!("expires {e:?} is not yyyy-MM-dd'T'HH:mm:ssZ"))
        .map(|t| t.as_second());
    match at {
        Err(why) => Some(why),
        Ok(at) if at < i64::try_from(now).unwrap_or(i64::MAX) => {
            Some(format!("the request expired at {e}"))
        }
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(s: &str, secret: &str) -> String {
        let key =
            ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
        STANDARD.encode(ring::hmac::sign(&key, s.as_bytes()).as_ref())
    }

    fn params(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn values_are_encoded_as_each_client_family_does() {
        assert_eq!(encode("a b+c*~/", Encoding::Java), "a%20b%2Bc*%7E%2F");
        assert_eq!(encode("a b+c*~/", Encoding::Python), "a%20b%2Bc*~%2F");
        assert_eq!(encode("a b+c*~/", Encoding::Go), "a%20b%2Bc%2A~%2F");
    }

    #[test]
    fn a_signature_over_the_sorted_lower_cased_string_is_taken() {
        let p = params(&[
            ("command", "listZones"),
            ("apiKey", "KEY"),
            ("response", "json"),
            ("name", "a b"),
        ]);
        let string = "apikey=key&command=listzones&name=a%20b&response=json";
        let good = sign(string, "secret");
        assert!(verify(&p, &good, "secret"));
        assert!(!verify(&p, &good, "other"));
        let mut with_sig = p.clone();
        with_sig.push(("signature".into(), good.clone()));
        assert!(verify(&with_sig, &good, "secret"));
        let mut changed = p;
        changed[3].1 = "a c".into();
        assert!(!verify(&changed, &good, "secret"));
        assert!(!verify(&changed, "not base64!", "secret"));
    }

    #[test]
    fn expiry_is_read_as_cloudstack_writes_it() {
        let at = 1_795_867_200; // 2026-11-28T12:00:00Z
        assert_eq!(expired(Some("2026-11-28T12:00:00+0000"), at - 1), None);
        assert!(expired(Some("2026-11-28T12:00:00+0000"), at + 1).is_some());
        assert_eq!(expired(Some("2026-11-28T13:00:00+0100"), at - 1), None);
        assert!(expired(Some("tomorrow"), at).is_some());
        assert!(expired(None, at).is_some());
    }
}
