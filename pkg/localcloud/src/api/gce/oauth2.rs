//! Google's OAuth2 token endpoint for service-account keys (`POST /token`, as
//! `https://oauth2.googleapis.com/token`): the RFC 7523 `jwt-bearer` grant, where the
//! assertion is a JWT signed RS256 with a key IAM issued here ([`super::iam`]), found by its
//! header's `kid`, else by `iss` (the service account's email). `iss` must be the key's
//! service account, `aud` this endpoint's URL or one of Google's token URLs (google-auth always
//! sends `https://oauth2.googleapis.com/token`, whatever the key file's `token_uri`; Go's
//! oauth2 sends the `token_uri`), `iat`/`exp` within five minutes of now and at
//! most an hour apart, and a `scope` given. Refusals have Google's shape
//! (`{"error": "invalid_grant", "error_description": ...}`, HTTP 400). The access token is a
//! Keystone token of the cloud's user in the key's project, of the cloud's token lifetime
//! (`--token-ttl`), so it expires and is checked as every other token here. The module also
//! holds the check of the GCE dialect's requests when the cloud requires tokens
//! (`--gce-require-tokens`): a token of this endpoint, or a self-signed JWT as Google's API
//! clients send it with a key file (AIP-4111: signed by an issued key, `iss` = `sub` = its
//! account, an `aud` or a `scope`, at most an hour, checked as assertions are).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::super::identity::{self, Authenticated, User, USERS};
use super::super::{now, ApiError, Cloud, Ctx, Formatted};
use crate::model::gce::service_account_key::ServiceAccountKey;
use crate::model::Record as _;
use crate::store::Read;

/// The token endpoint's path.
pub(crate) const TOKEN_PATH: &str = "/token";
/// The grant of a signed assertion (RFC 7523).
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The clock skew allowed either way.
const SKEW_SECS: i64 = 300;
/// The longest an assertion may live.
const MAX_LIFETIME_SECS: i64 = 3600;
/// The longest assertion read.
const MAX_LEN: usize = 16 * 1024;
/// Google's token URLs, which Google accepts as `aud` too (google-auth sends the first).
const GOOGLE_AUDIENCES: [&str; 3] = [
    "https://oauth2.googleapis.com/token",
    "https://www.googleapis.com/oauth2/v4/token",
    "https://accounts.google.com/o/oauth2/token",
];

/// The token endpoint's URL: the `aud` assertions must name, and a key file's `token_uri`.
pub(crate) fn token_url(cloud: &Cloud) -> String {
    format!("{}{TOKEN_PATH}", cloud.base_url)
}

/// Why a grant was refused, as Google words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub error: &'static str,
    pub description: String,
}

fn refuse(error: &'static str, description: impl Into<String>) -> Refusal {
    Refusal {
        error,
        description: description.into(),
    }
}

fn invalid_grant(description: impl Into<String>) -> Refusal {
    refuse("invalid_grant", description)
}

/// A short, printable excerpt of what a client sent.
fn excerpt(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(100).collect()
}

/// A parsed assertion, not yet trusted.
#[derive(Debug)]
struct Assertion {
    kid: Option<String>,
    claims: Map<String, Value>,
    signed: String,
    signature: Vec<u8>,
}

fn json_part(part: &str, what: &str) -> Result<Map<String, Value>, Refusal> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| invalid_grant(format!("Invalid JWT: the {what} is not base64url.")))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(invalid_grant(format!(
            "Invalid JWT: the {what} is not a JSON object."
        ))),
    }
}

impl Assertion {
    fn parse(jwt: &str) -> Result<Self, Refusal> {
        if jwt.len() > MAX_LEN {
            return Err(invalid_grant("Invalid JWT: too long."));
        }
        let mut parts = jwt.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid_grant(
                "Invalid JWT: a JWT has three dot-separated parts.",
            ));
        };
        let header = json_part(h, "header")?;
        if header.get("alg").and_then(Value::as_str) != Some("RS256") {
            return Err(invalid_grant(
                "Invalid JWT: the algorithm (alg) must be RS256.",
            ));
        }
        let claims = json_part(c, "claim set")?;
        let signature = URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(|_| invalid_grant("Invalid JWT Signature."))?;
        Ok(Assertion {
            kid: header.get("kid").and_then(Value::as_str).map(str::to_owned),
            claims,
            signed: format!("{h}.{c}"),
            signature,
        })
    }

    fn claim(&self, name: &str) -> Option<&str> {
        self.claims.get(name).and_then(Value::as_str)
    }

    fn verifies_with(&self, key: &ServiceAccountKey) -> bool {
        let Ok(public) = STANDARD.decode(&key.public_key) else {
            return false;
        };
        ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            public,
        )
        .verify(self.signed.as_bytes(), &self.signature)
        .is_ok()
    }

    /// The times: `iat`/`exp` within the skew of now, at most an hour apart.
    fn times_ok(&self, now: i64) -> bool {
        let time = |name: &str| self.claims.get(name).and_then(Value::as_i64);
        match (time("iat"), time("exp")) {
            (Some(iat), Some(exp)) => {
                exp > iat
                    && exp - iat <= MAX_LIFETIME_SECS
                    && iat <= now + SKEW_SECS
                    && exp >= now - SKEW_SECS
            }
            _ => false,
        }
    }

    /// The claims of a self-signed JWT used as an access token (AIP-4111).
    fn check_self_signed(&self, key: &ServiceAccountKey, now: i64) -> Result<(), Refusal> {
        let account = Some(key.email.as_str());
        if self.claim("iss") != account
            || self
                .claims
                .get("sub")
                .is_some_and(|s| s.as_str() != account)
        {
            return Err(invalid_grant(
                "iss and sub must be the service account of the signing key",
            ));
        }
        if !self.times_ok(now) {
            return Err(invalid_grant(
                "the JWT is expired, not yet valid or lives longer than an hour",
            ));
        }
        let named = |c: &str| {
            self.claims.get(c).is_some_and(|v| match v {
                Value::String(s) => !s.trim().is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => false,
            })
        };
        if !named("aud") && !named("scope") {
            return Err(invalid_grant(
                "the JWT names neither an audience nor a scope",
            ));
        }
        Ok(())
    }

    /// The claims Google checks: `iss`, `aud`, the times and a scope.
    fn check_claims(
        &self,
        key: &ServiceAccountKey,
        audience: &str,
        now: i64,
    ) -> Result<(), Refusal> {
        if self.claim("iss") != Some(key.email.as_str()) {
            return Err(invalid_grant(
                "Invalid JWT: the issuer (iss) is not the service account of the signing key.",
            ));
        }
        let accepted = |a: &str| a == audience || GOOGLE_AUDIENCES.contains(&a);
        let aud_ok = match self.claims.get("aud") {
            Some(Value::String(a)) => accepted(a),
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).any(accepted),
            _ => false,
        };
        if !aud_ok {
            return Err(invalid_grant(format!(
                "Invalid JWT: Failed audience check. The right audience is {audience}"
            )));
        }
        if !self.times_ok(now) {
            return Err(invalid_grant("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."));
        }
        if self.claim("scope").is_none_or(|s| s.trim().is_empty()) {
            return Err(refuse(
                "invalid_scope",
                "Invalid OAuth scope or ID token audience provided.",
            ));
        }
        Ok(())
    }
}

/// The key that signed `a`: the one its `kid` names, else any key of its `iss`.
fn signing_key(r: &impl Read, a: &Assertion) -> Result<ServiceAccountKey, Refusal> {
    let mut candidates: Vec<ServiceAccountKey> = Vec::new();
    if let Some(k) = a
        .kid
        .as_deref()
        .and_then(|kid| ServiceAccountKey::get(r, kid))
    {
        candidates.push(k);
    } else if let Some(iss) = a.claim("iss") {
        candidates = r
            .list::<ServiceAccountKey>(ServiceAccountKey::TABLE)
            .into_iter()
            .filter(|k| k.email == iss)
            .collect();
    }
    if candidates.is_empty() {
        return Err(invalid_grant("Invalid grant: account not found"));
    }
    candidates
        .into_iter()
        .find(|k| a.verifies_with(k))
        .ok_or_else(|| invalid_grant("Invalid JWT Signature."))
}

/// Checks a token request's form; the key it authenticates.
pub(crate) fn check_grant(
    r: &impl Read,
    form: &[(String, String)],
    audience: &str,
    now: i64,
) -> Result<ServiceAccountKey, Refusal> {
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    match field("grant_type") {
        Some(JWT_BEARER) => {}
        Some(other) => {
            return Err(refuse(
                "unsupported_grant_type",
                format!("Invalid grant_type: {}", excerpt(other)),
            ))
        }
        None => {
            return Err(refuse(
                "invalid_request",
                "Missing required parameter: grant_type",
            ))
        }
    }
    let jwt = field("assertion")
        .ok_or_else(|| refuse("invalid_request", "Missing required parameter: assertion"))?;
    let a = Assertion::parse(jwt)?;
    let key = signing_key(r, &a)?;
    a.check_claims(&key, audience, now)?;
    Ok(key)
}

/// Whether `jwt` is a self-signed JWT of an issued key that may be used as an access token.
pub(crate) fn self_signed_ok(r: &impl Read, jwt: &str, now: i64) -> bool {
    Assertion::parse(jwt)
        .and_then(|a| {
            let key = signing_key(r, &a)?;
            a.check_self_signed(&key, now)
        })
        .is_ok()
}

fn oauth_error(status: StatusCode, r: &Refusal) -> Response {
    let mut resp = (
        status,
        axum::Json(json!({"error": r.error, "error_description": r.description})),
    )
        .into_response();
    resp.extensions_mut().insert(Formatted);
    resp
}

/// `POST /token`.
pub(crate) async fn token(State(cloud): Ctx, body: Bytes) -> Response {
    let form: Vec<(String, String)> = match serde_urlencoded::from_bytes(&body) {
        Ok(f) => f,
        Err(_) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                &refuse("invalid_request", "The request body is not form-encoded."),
            )
        }
    };
    let audience = token_url(&cloud);
    let now_secs = i64::try_from(now()).unwrap_or(i64::MAX);
    let checked = cloud.store.read(|r| {
        let key = check_grant(r, &form, &audience, now_secs)?;
        let user = r
            .list::<User>(USERS)
            .into_iter()
            .find(|u| u.name == cloud.config.user)
            .ok_or_else(|| invalid_grant("Invalid grant: the cloud has no user"))?;
        Ok::<_, Refusal>((key, user))
    });
    let (key, user) = match checked {
        Ok(k) => k,
        Err(r) => return oauth_error(StatusCode::BAD_REQUEST, &r),
    };
    let issued = identity::store_token(
        &cloud,
        Authenticated::by_password(user, key.meta.project_id.clone()),
        vec!["gce-service-account".into()],
    )
    .await;
    match issued {
        Ok(t) => {
            tracing::info!(email = %key.email, key = %key.meta.id, "gce access token issued");
            axum::Json(json!({
                "access_token": t.id,
                "expires_in": t.expires_at.saturating_sub(t.issued_at),
                "token_type": "Bearer",
            }))
            .into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// The issuer of the metadata server's default service account tokens (handed to it, see
/// [`crate::metadata::ServiceAccountTokens`]): Keystone tokens of the instance's owner in its
/// project, as this endpoint issues them.
pub(crate) struct DefaultServiceAccountTokens(pub Arc<Cloud>);

impl crate::metadata::ServiceAccountTokens for DefaultServiceAccountTokens {
    fn issue(&self, user_id: String, project_id: String) -> crate::metadata::Issuing<'_> {
        Box::pin(async move {
            let cloud = &self.0;
            let user = cloud
                .store
                .read(|v| v.get::<User>(USERS, &user_id))
                .ok_or_else(|| {
                    ApiError::not_found(
                        "notFound",
                        format!("The instance's owner {user_id} no longer exists."),
                    )
                })?;
            let t = identity::store_token(
                cloud,
                Authenticated::by_password(user, project_id),
                vec!["gce-metadata".into()],
            )
            .await?;
            Ok(crate::metadata::IdentityToken {
                access_token: t.id,
                issued_at: t.issued_at,
                expires_at: t.expires_at,
            })
        })
    }
}

/// Middleware of the GCE dialect when the cloud requires tokens: a live token (this
/// endpoint's, or any Keystone token) as `Authorization: Bearer` or `X-Auth-Token`, else
/// Google's 401.
pub(crate) async fn require_token(
    State(cloud): State<Arc<Cloud>>,
    req: Request,
    next: Next,
) -> Response {
    if !cloud.config.gce_require_tokens {
        return next.run(req).await;
    }
    let headers = req.headers();
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    let token = bearer.or_else(|| headers.get("x-auth-token").and_then(|v| v.to_str().ok()));
    let error = match token {
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "required",
            "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        ),
        Some(t) if identity::check_token(&cloud, t.trim()).is_some() => {
            return next.run(req).await
        }
        Some(t)
            if t.matches('.').count() == 2 && {
                let now_secs = i64::try_from(now()).unwrap_or(i64::MAX);
                cloud.store.read(|r| self_signed_ok(r, t.trim(), now_secs))
            } =>
        {
            return next.run(req).await
        }
        Some(_) => ApiError::new(StatusCode::UNAUTHORIZED, "authError", "Invalid Credentials"),
    };
    let mut resp = error.into_response();
    resp.headers_mut().insert(
        "www-authenticate",
        HeaderValue::from_static("Bearer realm=\"https://accounts.google.com/\""),
    );
    resp
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Meta;

    const AUD: &str = "http://127.0.0.1:8800/token";

    fn key_and_signer() -> (ServiceAccountKey, ring::signature::RsaKeyPair) {
        let k = super::super::rsa_key::generate().unwrap();
        let mut meta = Meta::new("p1");
        meta.id = "kid1".into();
        (
            ServiceAccountKey {
                meta,
                email: "sa@demo.iam.gserviceaccount.com".into(),
                project_name: "demo".into(),
                public_key: STANDARD.encode(&k.public_key),
            },
            ring::signature::RsaKeyPair::from_pkcs8(&k.pkcs8).unwrap(),
        )
    }

    fn jwt(signer: &ring::signature::RsaKeyPair, header: Value, claims: Value) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut sig = vec![0; signer.public().modulus_len()];
        signer
            .sign(
                &ring::signature::RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                input.as_bytes(),
                &mut sig,
            )
            .unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    fn claims(now: i64) -> Value {
        json!({"iss": "sa@demo.iam.gserviceaccount.com", "aud": AUD, "iat": now, "exp": now + 3600,
               "scope": "https://www.googleapis.com/auth/cloud-platform"})
    }

    #[test]
    fn assertions_are_checked_as_google_checks_them() {
        let (key, signer) = key_and_signer();
        let now = 1_800_000_000;
        let check = |jwt: &str| {
            let a = Assertion::parse(jwt)?;
            if !a.verifies_with(&key) {
                return Err(invalid_grant("Invalid JWT Signature."));
            }
            a.check_claims(&key, AUD, now)
        };
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": "kid1"});
        assert_eq!(check(&jwt(&signer, header.clone(), claims(now))), Ok(()));
        // google-auth's audience, whatever the key file's token_uri.
        let mut c = claims(now);
        c["aud"] = json!("https://oauth2.googleapis.com/token");
        assert_eq!(check(&jwt(&signer, header.clone(), c)), Ok(()));
        // Within the skew either way; beyond it, refused.
        assert_eq!(
            check(&jwt(&signer, header.clone(), claims(now + 200))),
            Ok(())
        );
        assert_eq!(
            check(&jwt(&signer, header.clone(), claims(now - 3800))),
            Ok(())
        );
        for (what, c) in [
            ("future", claims(now + 400)),
            ("expired", claims(now - 4000)),
            ("too long", {
                let mut c = claims(now);
                c["exp"] = json!(now + 7200);
                c
            }),
            ("wrong aud", {
                let mut c = claims(now);
                c["aud"] = json!("https://example.com/token");
                c
            }),
            ("wrong iss", {
                let mut c = claims(now);
                c["iss"] = json!("other@demo.iam.gserviceaccount.com");
                c
            }),
        ] {
            let r = check(&jwt(&signer, header.clone(), c)).unwrap_err();
            assert_eq!(r.error, "invalid_grant", "{what}");
        }
        let mut c = claims(now);
        c.as_object_mut().unwrap().remove("scope");
        assert_eq!(
            check(&jwt(&signer, header.clone(), c)).unwrap_err().error,
            "invalid_scope"
        );
        // Another key's signature, or a tampered claim set.
        let (_, other) = key_and_signer();
        let r = check(&jwt(&other, header.clone(), claims(now))).unwrap_err();
        assert_eq!(r.description, "Invalid JWT Signature.");
        let good = jwt(&signer, header.clone(), claims(now));
        let mut parts: Vec<&str> = good.split('.').collect();
        let mut c = claims(now);
        c["iss"] = json!("sa@demo.iam.gserviceaccount.com ");
        let tampered_claims = URL_SAFE_NO_PAD.encode(c.to_string());
        parts[1] = &tampered_claims;
        assert_eq!(
            check(&parts.join(".")).unwrap_err().description,
            "Invalid JWT Signature."
        );
        // A self-signed JWT (AIP-4111), as google-auth makes for API clients.
        let self_signed = |c: Value| {
            let a = Assertion::parse(&jwt(&signer, header.clone(), c)).unwrap();
            assert!(a.verifies_with(&key));
            a.check_self_signed(&key, now)
        };
        let sa = "sa@demo.iam.gserviceaccount.com";
        let ok = json!({"iss": sa, "sub": sa, "iat": now, "exp": now + 3600, "scope": "x"});
        assert_eq!(self_signed(ok.clone()), Ok(()));
        let mut aud = ok.clone();
        aud.as_object_mut().unwrap().remove("scope");
        aud["aud"] = json!("https://compute.googleapis.com/");
        assert_eq!(self_signed(aud.clone()), Ok(()));
        aud.as_object_mut().unwrap().remove("aud");
        assert!(self_signed(aud).is_err(), "neither aud nor scope");
        let mut other = ok.clone();
        other["sub"] = json!("other@demo.iam.gserviceaccount.com");
        assert!(self_signed(other).is_err());
        let mut long = ok;
        long["exp"] = json!(now + 7200);
        assert!(self_signed(long).is_err());
        let hs = json!({"alg": "HS256", "typ": "JWT"});
        assert!(check(&jwt(&signer, hs, claims(now))).is_err());
    }
}
