//! Microsoft Entra, as much as a service principal needs: the tenant's OpenID configuration
//! (`/{tenant}/v2.0/.well-known/openid-configuration`) and its token endpoint
//! (`/{tenant}/oauth2/v2.0/token`, the client-credentials grant with a client secret or a
//! client assertion). A client is a Keystone application credential (client ID its ID, in GUID
//! form or not; secret its secret) or the cloud's user (client ID the user's ID, secret the
//! password). A client proves itself with a certificate ([`assertion`]) once the operator has
//! registered the certificate for it ([`certificates`]). The access token is a JWT (HS256, the
//! cloud's own key) standing for a stored Keystone token, so it expires and is revoked as that
//! token is; Resource Manager accepts nothing else. The Azure metadata service's managed
//! identity tokens come from the same signer ([`ManagedIdentityTokens`]). Errors are Entra's
//! (`{"error", "error_description": "AADSTS...", "error_codes"}`).

mod assertion;
pub(crate) mod certificates;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::{guid, unguid};
use crate::api::identity::{self, Authenticated, CredentialRefused, User, USERS};
use crate::api::{new_hex_id, now, reply, Caller, Cloud, Ctx, Formatted};
use crate::defaults;
use crate::store::Read;

/// Where the signing key is kept.
const KEYS: &str = "azure_keys";
const SIGNING_KEY: &str = "access-token-hs256";

pub(super) fn router() -> Router<Arc<Cloud>> {
    Router::new()
        .route(
            "/{tenant}/v2.0/.well-known/openid-configuration",
            get(openid_configuration),
        )
        .route("/{tenant}/oauth2/v2.0/token", post(token))
}

/// An Entra error answer, left as it is by the service's error formatting.
fn entra_error(status: StatusCode, error: &str, code: u32, description: &str) -> Response {
    let now = crate::api::iso(now());
    let mut r = reply(
        status,
        json!({
            "error": error,
            "error_description": format!("AADSTS{code}: {description}"),
            "error_codes": [code],
            "timestamp": now,
            "trace_id": uuid::Uuid::new_v4().to_string(),
            "correlation_id": uuid::Uuid::new_v4().to_string(),
        }),
    );
    r.extensions_mut().insert(Formatted);
    r
}

fn unknown_tenant(tenant: &str) -> Response {
    entra_error(
        StatusCode::BAD_REQUEST,
        "invalid_request",
        90002,
        &format!("Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud."),
    )
}

fn tenant_known(tenant: &str) -> bool {
    tenant.eq_ignore_ascii_case(defaults::AZURE_TENANT_ID)
}

async fn openid_configuration(State(cloud): Ctx, Path(tenant): Path<String>) -> Response {
    if !tenant_known(&tenant) {
        return unknown_tenant(&tenant);
    }
    let base = format!("{}/{}", cloud.base_url, defaults::AZURE_TENANT_ID);
    reply(
        StatusCode::OK,
        json!({
            "token_endpoint": format!("{base}/oauth2/v2.0/token"),
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic", "private_key_jwt"],
            "jwks_uri": format!("{base}/discovery/v2.0/keys"),
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "issuer": format!("{base}/v2.0"),
            "request_uri_parameter_supported": false,
            "authorization_endpoint": format!("{base}/oauth2/v2.0/authorize"),
            "end_session_endpoint": format!("{base}/oauth2/v2.0/logout"),
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "tid", "oid"],
            "tenant_region_scope": null,
            "cloud_instance_name": "hypercloud.local",
        }),
    )
}

/// The client a token request authenticates (a user or an application credential), and the
/// Keystone method that stands for.
fn authenticate(
    cloud: &Cloud,
    client_id: &str,
    secret: &str,
) -> Result<(Authenticated, &'static str), Box<Response>> {
    let id = unguid(client_id);
    let invalid_secret = || {
        entra_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            7000215,
            "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.",
        )
    };
    match identity::app_credential_owner(cloud, &id, secret) {
        Ok(who) => return Ok((who, "application_credential")),
        Err(CredentialRefused::WrongSecret) => return Err(Box::new(invalid_secret())),
        Err(CredentialRefused::Expired) => {
            return Err(Box::new(entra_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                7000222,
                &format!("The provided client secret keys for app '{client_id}' are expired."),
            )))
        }
        Err(CredentialRefused::Unknown) => {}
    }
    match cloud.store.read(|v| v.get::<User>(USERS, &id)) {
        Some(user) if identity::users::password_matches(cloud, &user, secret) => {
            let project_id = user.default_project_id.clone();
            Ok((Authenticated::by_password(user, project_id), "password"))
        }
        Some(_) => Err(Box::new(invalid_secret())),
        None => Err(Box::new(unknown_client(client_id))),
    }
}

/// The resource a `.default` scope asks for (`https://management.azure.com/.default` →
/// `https://management.azure.com`; az's `https://management.core.windows.net//.default` →
/// `https://management.core.windows.net/`).
fn audience(scope: &str) -> Option<String> {
    scope
        .split_whitespace()
        .find_map(|s| s.strip_suffix("/.default"))
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
}

async fn token(State(cloud): Ctx, Path(tenant): Path<String>, body: Bytes) -> Response {
    if !tenant_known(&tenant) {
        return unknown_tenant(&tenant);
    }
    let form: Vec<(String, String)> = match serde_urlencoded::from_bytes(&body) {
        Ok(f) => f,
        Err(e) => {
            return entra_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                900144,
                &format!("The request body must be application/x-www-form-urlencoded: {e}"),
            )
        }
    };
    let field = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let missing = |name: &str| {
        entra_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            900144,
            &format!("The request body must contain the following parameter: '{name}'."),
        )
    };
    let Some(grant) = field("grant_type") else {
        return missing("grant_type");
    };
    if grant != "client_credentials" {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            70003,
            &format!("The app requested an unsupported grant type '{grant}'; the local cloud issues tokens for client_credentials only."),
        );
    }
    let Some(client_id) = field("client_id") else {
        return missing("client_id");
    };
    let Some(scope) = field("scope") else {
        return missing("scope");
    };
    let Some(aud) = audience(scope) else {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            1002012,
            &format!("The provided value for scope {scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI)."),
        );
    };
    let proved = if let Some(jwt) = field("client_assertion") {
        match field("client_assertion_type") {
            Some(assertion::JWT_BEARER) => by_certificate(&cloud, &tenant, client_id, jwt),
            Some(other) => {
                return entra_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    900144,
                    &format!("The provided value for the input parameter 'client_assertion_type' is not valid: '{}'. Expected '{}'.", other.chars().filter(|c| !c.is_control()).take(100).collect::<String>(), assertion::JWT_BEARER),
                )
            }
            None => return missing("client_assertion_type"),
        }
    } else if let Some(secret) = field("client_secret") {
        authenticate(&cloud, client_id, secret)
    } else {
        return entra_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            7000218,
            "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
        );
    };
    let (who, method) = match proved {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let grant = Grant {
        who,
        methods: vec![method.to_owned()],
        audience: aud,
        app_id: client_id.to_owned(),
        extra: Map::new(),
    };
    match issue(&cloud, grant).await {
        Ok(t) => {
            let expires_in = t.expires_at.saturating_sub(now());
            reply(
                StatusCode::OK,
                json!({
                    "token_type": "Bearer",
                    "expires_in": expires_in,
                    "ext_expires_in": expires_in,
                    "access_token": t.access_token,
                }),
            )
        }
        Err(e) => e.into_response(),
    }
}

/// What an access token is issued for.
struct Grant {
    who: Authenticated,
    /// The Keystone methods the stored token records.
    methods: Vec<String>,
    /// `aud`: the resource (`https://management.azure.com`).
    audience: String,
    /// `appid`: the client ID as the client gave it.
    app_id: String,
    /// More claims (a managed identity's `xms_mirid`).
    extra: Map<String, Value>,
}

/// An issued access token.
struct Issued {
    access_token: String,
    issued_at: u64,
    expires_at: u64,
}

/// Stores the Keystone token an access token stands for and signs the access token: the
/// token endpoint's and the metadata service's one way of issuing.
async fn issue(cloud: &Arc<Cloud>, grant: Grant) -> Result<Issued, crate::api::ApiError> {
    let user = guid(&grant.who.user.id);
    let stored = identity::store_token(cloud, grant.who, grant.methods).await?;
    let mut claims = json!({
        "aud": grant.audience,
        "iss": format!("{}/{}/v2.0", cloud.base_url, defaults::AZURE_TENANT_ID),
        "iat": stored.issued_at,
        "nbf": stored.issued_at,
        "exp": stored.expires_at,
        "tid": defaults::AZURE_TENANT_ID,
        "oid": user,
        "sub": user,
        "appid": grant.app_id,
        "idtyp": "app",
        "ver": "1.0",
        "jti": stored.id,
    });
    if let Some(c) = claims.as_object_mut() {
        c.extend(grant.extra);
    }
    Ok(Issued {
        access_token: sign(cloud, &claims).await?,
        issued_at: stored.issued_at,
        expires_at: stored.expires_at,
    })
}

/// Issues the Azure VMs' managed identity tokens for the metadata service: tokens of the VM's
/// owner in its project, from the same signer as the token endpoint's, so Resource Manager
/// takes them.
pub(crate) struct ManagedIdentityTokens(pub Arc<Cloud>);

impl crate::metadata::ManagedIdentity for ManagedIdentityTokens {
    fn issue(&self, request: crate::metadata::IdentityRequest) -> crate::metadata::Issuing<'_> {
        Box::pin(async move {
            let cloud = &self.0;
            let user = cloud
                .store
                .read(|v| v.get::<User>(USERS, &request.user_id))
                .ok_or_else(|| {
                    crate::api::ApiError::not_found(
                        "IdentityNotFound",
                        format!("The VM's owner {} no longer exists.", request.user_id),
                    )
                })?;
            let mut extra = Map::new();
            extra.insert("xms_mirid".into(), json!(request.resource_id));
            let grant = Grant {
                who: Authenticated::by_password(user, request.project_id),
                methods: vec!["managed_identity".to_owned()],
                audience: request.resource,
                app_id: request.client_id,
                extra,
            };
            let t = issue(cloud, grant).await?;
            Ok(crate::metadata::IdentityToken {
                access_token: t.access_token,
                issued_at: t.issued_at,
                expires_at: t.expires_at,
            })
        })
    }
}

/// The client a client assertion authenticates: the client must exist, the certificate the
/// assertion names be registered for it and valid, its key have signed the assertion, and the
/// claims be the client's, for this token endpoint, and current.
fn by_certificate(
    cloud: &Cloud,
    tenant: &str,
    client_id: &str,
    jwt: &str,
) -> Result<(Authenticated, &'static str), Box<Response>> {
    let refused = |r: assertion::Refusal| {
        let status = if r.error == "invalid_client" {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::BAD_REQUEST
        };
        Box::new(entra_error(status, r.error, r.code, &r.description))
    };
    let a = assertion::Assertion::parse(jwt).map_err(refused)?;
    let id = unguid(client_id);
    let who = match identity::app_credential_holder(cloud, &id) {
        Ok(who) => (who, "application_credential"),
        Err(CredentialRefused::Expired) => {
            return Err(Box::new(entra_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                700027,
                &format!("Client assertion contains an invalid signature. [Reason - The key used is expired: the application credential '{client_id}' has expired.]"),
            )))
        }
        Err(_) => match cloud.store.read(|v| v.get::<User>(USERS, &id)) {
            Some(user) => {
                let project_id = user.default_project_id.clone();
                (Authenticated::by_password(user, project_id), "x509")
            }
            None => return Err(Box::new(unknown_client(client_id))),
        },
    };
    let registered = certificates::registered(&cloud.config.state_dir, client_id)
        .map_err(|e| Box::new(crate::api::ApiError::from(e).into_response()))?;
    let Some(cert) = registered.iter().find(|c| a.names(c)) else {
        return Err(Box::new(entra_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            700027,
            &format!("The certificate with identifier used to sign the client assertion is not registered on application. [Reason - The key was not found., Thumbprint of key used by client: '{}'; register it with `hypercloud local-cloud entra-certificate add {client_id} CERT.pem`]", a.thumbprint_hex()),
        )));
    };
    let now_secs = i64::try_from(now()).unwrap_or(i64::MAX);
    a.verify_with(cert, now_secs).map_err(refused)?;
    let endpoint = |t: &str| format!("{}/{t}/oauth2/v2.0/token", cloud.base_url);
    let audiences = [endpoint(defaults::AZURE_TENANT_ID), endpoint(tenant)];
    let precise_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    a.check_claims(client_id, &audiences, precise_now)
        .map_err(refused)?;
    Ok(who)
}

fn unknown_client(client_id: &str) -> Response {
    entra_error(
        StatusCode::BAD_REQUEST,
        "unauthorized_client",
        700016,
        &format!(
            "Application with identifier '{client_id}' was not found in the directory '{}'.",
            defaults::AZURE_TENANT_ID
        ),
    )
}

/// The cloud's token-signing key, made on first use.
async fn signing_key(cloud: &Arc<Cloud>) -> Result<ring::hmac::Key, crate::api::ApiError> {
    if let Some(key) = stored_key(cloud) {
        return Ok(key);
    }
    let key = cloud
        .write(|tx| {
            if let Some(k) = tx.get::<String>(KEYS, SIGNING_KEY) {
                return Ok(k);
            }
            let k = format!("{}{}", new_hex_id(), new_hex_id());
            tx.put(KEYS, SIGNING_KEY, &k)?;
            Ok(k)
        })
        .await?;
    Ok(hmac_key(&key))
}

fn hmac_key(key: &str) -> ring::hmac::Key {
    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes())
}

/// The signing key, once made.
fn stored_key(cloud: &Cloud) -> Option<ring::hmac::Key> {
    let key: String = cloud.store.read(|v| v.get(KEYS, SIGNING_KEY))?;
    Some(hmac_key(&key))
}

async fn sign(cloud: &Arc<Cloud>, claims: &Value) -> Result<String, crate::api::ApiError> {
    let key = signing_key(cloud).await?;
    let header = json!({"typ": "JWT", "alg": "HS256", "kid": "hypercloud-local"});
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let tag = ring::hmac::sign(&key, signed.as_bytes());
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref())))
}

/// The caller an access token stands for, or ARM's error code and message.
pub(super) fn caller(cloud: &Cloud, token: &str) -> Result<Caller, (&'static str, String)> {
    let invalid = || {
        (
            "InvalidAuthenticationToken",
            "The access token is invalid.".to_owned(),
        )
    };
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    let key = stored_key(cloud).ok_or_else(invalid)?;
    let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|_| invalid())?;
    ring::hmac::verify(&key, format!("{header}.{claims}").as_bytes(), &sig)
        .map_err(|_| invalid())?;
    let claims: Value = URL_SAFE_NO_PAD
        .decode(claims)
        .ok()
        .and_then(|c| serde_json::from_slice(&c).ok())
        .ok_or_else(invalid)?;
    let exp = claims["exp"].as_u64().ok_or_else(invalid)?;
    let now = now();
    if exp <= now {
        return Err((
            "ExpiredAuthenticationToken",
            format!(
                "The access token expiry UTC time '{}' is earlier than current UTC time '{}'.",
                crate::api::iso(exp),
                crate::api::iso(now)
            ),
        ));
    }
    let jti = claims["jti"].as_str().ok_or_else(invalid)?;
    identity::check_token(cloud, jti).ok_or_else(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_scope_names_its_audience() {
        assert_eq!(
            audience("https://management.azure.com/.default").as_deref(),
            Some("https://management.azure.com")
        );
        assert_eq!(
            audience("https://management.core.windows.net//.default").as_deref(),
            Some("https://management.core.windows.net/")
        );
        assert_eq!(audience("openid profile"), None);
        assert_eq!(audience("/.default"), None);
    }
}
