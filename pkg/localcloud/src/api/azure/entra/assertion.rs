//! Client assertions (RFC 7523 `jwt-bearer`), as Entra checks them for certificate
//! credentials: a JWT signed RS256 (or PS256, which raw MSAL sends) with the key of a
//! certificate registered for the client, found by the header's `x5t` (base64url SHA-1 of the
//! certificate, padded as MSAL pads it) or `x5t#S256`; `iss` and `sub` the client ID, `aud` the
//! token endpoint, `exp` in the future and `nbf`/`iat` not (MSAL sends float times and no
//! `nbf`), each with five minutes of clock skew. What azure-identity sends is recorded in
//! `docs/azure-clients.md`. Each refusal carries Entra's `AADSTS` code.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

use super::certificates::{hex_upper, ClientCertificate};

/// `client_assertion_type` of a JWT assertion.
pub(crate) const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The longest assertion read (MSAL's, with an `x5c` chain, is a few kilobytes).
const MAX_LEN: usize = 16 * 1024;
/// The clock skew allowed either way, as Entra allows.
pub(crate) const SKEW_SECS: f64 = 300.0;
/// The latest time a claim may name (the last second of year 9999), so times stay exact.
const MAX_TIME: f64 = 253_402_300_799.0;

/// Why an assertion was refused: Entra's error, code and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub error: &'static str,
    pub code: u32,
    pub description: String,
}

fn malformed(why: impl std::fmt::Display) -> Refusal {
    Refusal {
        error: "invalid_request",
        code: 50027,
        description: format!("JWT token is invalid or malformed: {why}."),
    }
}

fn invalid_client(code: u32, description: String) -> Refusal {
    Refusal {
        error: "invalid_client",
        code,
        description,
    }
}

/// A short, printable excerpt of what a client sent, for an error description.
fn excerpt(s: &str) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).take(100).collect();
    if s.chars().count() > 100 {
        format!("{clean}...")
    } else {
        clean
    }
}

/// The signature algorithm of an assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alg {
    Rs256,
    Ps256,
}

/// Which certificate signed it, as the header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Thumbprint {
    Sha1(Vec<u8>),
    Sha256(Vec<u8>),
}

/// A parsed assertion, not yet trusted.
#[derive(Debug, Clone)]
pub(crate) struct Assertion {
    pub alg: Alg,
    pub thumbprint: Thumbprint,
    claims: Map<String, Value>,
    /// `header.claims` as sent: what the signature covers.
    signed: String,
    signature: Vec<u8>,
}

/// base64url, with or without `=` padding (MSAL pads `x5t`, not the JWT's parts).
fn b64url(s: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok()
}

fn json_object(part: &str, what: &str) -> Result<Map<String, Value>, Refusal> {
    let bytes = b64url(part).ok_or_else(|| malformed(format!("the {what} is not base64url")))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(malformed(format!("the {what} is not a JSON object"))),
    }
}

impl Assertion {
    /// Parses `header.claims.signature`; malformed ones are AADSTS50027.
    pub(crate) fn parse(jwt: &str) -> Result<Self, Refusal> {
        if jwt.len() > MAX_LEN {
            return Err(malformed(format!("longer than {MAX_LEN} bytes")));
        }
        let mut parts = jwt.split('.');
        let (Some(header_part), Some(claims_part), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("a JWT has three dot-separated parts"));
        };
        let h = json_object(header_part, "header")?;
        let claims = json_object(claims_part, "claims")?;
        let alg = match h.get("alg").and_then(Value::as_str) {
            Some("RS256") => Alg::Rs256,
            Some("PS256") => Alg::Ps256,
            Some(other) => {
                return Err(malformed(format!(
                    "alg '{}' is not supported for client assertions (RS256, PS256)",
                    excerpt(other)
                )))
            }
            None => return Err(malformed("the header has no alg")),
        };
        let digest = |name: &str| -> Result<Option<Vec<u8>>, Refusal> {
            h.get(name)
                .map(|v| {
                    v.as_str()
                        .and_then(b64url)
                        .ok_or_else(|| malformed(format!("{name} is not base64url")))
                })
                .transpose()
        };
        let thumbprint = match (digest("x5t")?, digest("x5t#S256")?) {
            (Some(d), _) if d.len() == 20 => Thumbprint::Sha1(d),
            (_, Some(d)) if d.len() == 32 => Thumbprint::Sha256(d),
            (Some(_), _) | (_, Some(_)) => {
                return Err(malformed(
                    "x5t is not a SHA-1 (or x5t#S256 a SHA-256) digest",
                ))
            }
            (None, None) => {
                return Err(malformed(
                    "the header names no certificate (x5t or x5t#S256)",
                ))
            }
        };
        let signature =
            b64url(signature).ok_or_else(|| malformed("the signature is not base64url"))?;
        Ok(Assertion {
            alg,
            thumbprint,
            claims,
            signed: format!("{header_part}.{claims_part}"),
            signature,
        })
    }

    /// Whether the header names `cert`.
    pub(crate) fn names(&self, cert: &ClientCertificate) -> bool {
        match &self.thumbprint {
            Thumbprint::Sha1(d) => *d == cert.sha1,
            Thumbprint::Sha256(d) => *d == cert.sha256,
        }
    }

    /// The thumbprint the header names, in hex, for an error description.
    pub(crate) fn thumbprint_hex(&self) -> String {
        match &self.thumbprint {
            Thumbprint::Sha1(d) | Thumbprint::Sha256(d) => hex_upper(d),
        }
    }

    /// Checks the signature with `cert`'s key, and that `cert` is valid `now`.
    pub(crate) fn verify_with(&self, cert: &ClientCertificate, now: i64) -> Result<(), Refusal> {
        let alg: &'static dyn ring::signature::VerificationAlgorithm = match self.alg {
            Alg::Rs256 => &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            Alg::Ps256 => &ring::signature::RSA_PSS_2048_8192_SHA256,
        };
        ring::signature::UnparsedPublicKey::new(alg, &cert.rsa_public_key)
            .verify(self.signed.as_bytes(), &self.signature)
            .map_err(|_| {
                invalid_client(
                    700027,
                    "Client assertion failed signature validation. [Reason - The signature does not match the registered certificate's key.]".into(),
                )
            })?;
        if now < cert.not_before || now > cert.not_after {
            return Err(invalid_client(
                700027,
                format!(
                    "Client assertion contains an invalid signature. [Reason - The key used is expired or not yet valid (certificate valid {} to {}), Thumbprint of key used by client: '{}']",
                    crate::time::iso(u64::try_from(cert.not_before).unwrap_or(0)),
                    crate::time::iso(u64::try_from(cert.not_after).unwrap_or(0)),
                    cert.thumbprint()
                ),
            ));
        }
        Ok(())
    }

    /// Checks the claims: `iss` and `sub` are `client_id` (in either of its forms), `aud` is
    /// one of `audiences`, and `now` (seconds since the epoch) lies within `nbf`/`iat` and
    /// `exp`, give or take [`SKEW_SECS`].
    pub(crate) fn check_claims(
        &self,
        client_id: &str,
        audiences: &[String],
        now: f64,
    ) -> Result<(), Refusal> {
        let same_client = |claim: &str| {
            self.claims
                .get(claim)
                .and_then(Value::as_str)
                .is_some_and(|v| super::super::unguid(v) == super::super::unguid(client_id))
        };
        if !same_client("iss") || !same_client("sub") {
            return Err(invalid_client(
                700021,
                "Client assertion application identifier doesn't match 'client_id' parameter (its iss and sub must be the client ID).".into(),
            ));
        }
        let aud: Vec<&str> = match self.claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !aud.iter().any(|a| audiences.iter().any(|want| want == a)) {
            return Err(invalid_client(
                700023,
                format!(
                    "Client assertion audience claim does not match Realm issuer: aud is '{}', the token endpoint is '{}'.",
                    excerpt(&aud.join(" ")),
                    audiences.first().map_or("", String::as_str)
                ),
            ));
        }
        let time = |claim: &str| -> Result<Option<f64>, Refusal> {
            match self.claims.get(claim) {
                None => Ok(None),
                Some(v) => v
                    .as_f64()
                    .filter(|t| t.is_finite() && (0.0..=MAX_TIME).contains(t))
                    .map(Some)
                    .ok_or_else(|| {
                        malformed(format!(
                            "{claim} is not a time in seconds since the epoch (0 to {MAX_TIME})"
                        ))
                    }),
            }
        };
        let exp = time("exp")?.ok_or_else(|| malformed("the claims have no exp"))?;
        let starts = [time("nbf")?, time("iat")?];
        let not_yet = starts.iter().flatten().any(|t| *t > now + SKEW_SECS);
        if exp + SKEW_SECS <= now || not_yet {
            // Both in range, so exact as whole seconds.
            let iso = |t: f64| crate::time::iso(t as u64);
            return Err(invalid_client(
                700024,
                format!(
                    "Client assertion is not within its valid time range. Current time: {}, expiry time of assertion {}.",
                    iso(now.clamp(0.0, MAX_TIME)),
                    iso(exp)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const CLIENT: &str = "0123456789abcdef0123456789abcdef";
    const AUD: &str = "https://127.0.0.1:8443/t/oauth2/v2.0/token";

    fn jwt(header: Value, claims: Value) -> String {
        format!(
            "{}.{}.c2ln",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        )
    }

    fn header() -> Value {
        // MSAL's x5t keeps its `=` padding.
        json!({"alg": "RS256", "typ": "JWT", "x5t": "AroHEAfd0td4OHe-emQ1QQQPqyc="})
    }

    fn claims(now: f64) -> Value {
        json!({"aud": AUD, "iss": "01234567-89ab-cdef-0123-456789abcdef", "sub": CLIENT,
               "exp": now + 600.25, "iat": now + 0.25, "jti": "x"})
    }

    fn check(header: Value, claims: Value, now: f64) -> Result<(), Refusal> {
        Assertion::parse(&jwt(header, claims))?.check_claims(CLIENT, &[AUD.to_owned()], now)
    }

    #[test]
    fn msals_assertion_parses_and_its_claims_pass() {
        let now = 1_795_837_728.0;
        let a = Assertion::parse(&jwt(header(), claims(now))).unwrap();
        assert_eq!(a.alg, Alg::Rs256);
        assert_eq!(
            a.thumbprint_hex(),
            "02BA071007DDD2D7783877BE7A643541040FAB27"
        );
        assert!(a.check_claims(CLIENT, &[AUD.to_owned()], now).is_ok());
        let ps =
            json!({"alg": "PS256", "typ": "JWT", "x5t#S256": URL_SAFE_NO_PAD.encode([7u8; 32])});
        let a = Assertion::parse(&jwt(ps, claims(now))).unwrap();
        assert_eq!(
            (a.alg, a.thumbprint),
            (Alg::Ps256, Thumbprint::Sha256(vec![7; 32]))
        );
    }

    #[test]
    fn every_refusal_has_its_code() {
        let now = 1_795_837_728.0;
        let code = |r: Result<(), Refusal>| r.unwrap_err().code;
        for bad in ["x.y", "a.b.c.d", "!!.e30.c2ln", &"a".repeat(MAX_LEN + 1)] {
            assert_eq!(Assertion::parse(bad).unwrap_err().code, 50027, "{bad}");
        }
        let mut h = header();
        h["alg"] = json!("HS256");
        assert_eq!(code(check(h, claims(now), now)), 50027);
        let mut h = header();
        h.as_object_mut().unwrap().remove("x5t");
        assert_eq!(code(check(h, claims(now), now)), 50027);
        let mut h = header();
        h["x5t"] = json!("c2hvcnQ");
        assert_eq!(code(check(h, claims(now), now)), 50027);
        let mut c = claims(now);
        c["sub"] = json!("someone-else");
        assert_eq!(code(check(header(), c, now)), 700021);
        let mut c = claims(now);
        c.as_object_mut().unwrap().remove("iss");
        assert_eq!(code(check(header(), c, now)), 700021);
        let mut c = claims(now);
        c["aud"] = json!("https://login.microsoftonline.com/t/oauth2/v2.0/token");
        let r = check(header(), c, now).unwrap_err();
        assert_eq!(r.code, 700023);
        assert!(r.description.contains(AUD), "{}", r.description);
        let mut c = claims(now);
        c["aud"] = json!(["other", AUD]);
        assert!(check(header(), c, now).is_ok(), "aud may be a list");
        // Expired, beyond the skew; not yet valid; within the skew either way.
        assert_eq!(code(check(header(), claims(now - 1000.0), now)), 700024);
        assert_eq!(code(check(header(), claims(now + 400.0), now)), 700024);
        assert!(check(header(), claims(now - 800.0), now).is_ok());
        assert!(check(header(), claims(now + 200.0), now).is_ok());
        for exp in [json!(null), json!("soon"), json!(-1), json!(1e300)] {
            let mut c = claims(now);
            c["exp"] = exp.clone();
            assert_eq!(code(check(header(), c, now)), 50027, "{exp}");
        }
        let mut c = claims(now);
        c.as_object_mut().unwrap().remove("exp");
        assert_eq!(code(check(header(), c, now)), 50027);
    }

    #[test]
    fn excerpts_are_short_and_printable() {
        assert_eq!(excerpt("a\nb\u{1b}[31m"), "ab[31m");
        assert_eq!(excerpt(&"x".repeat(300)).len(), 103);
    }
}
