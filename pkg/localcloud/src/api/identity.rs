//! Identity v3 (Keystone): version discovery, password, application-credential and
//! trust-scoped authentication with `X-Subject-Token`, token validation and revocation, the
//! service catalog, application credentials, users ([`users`]) and trusts (`trusts`). One
//! domain (`Default`), one user and one project are seeded; tokens are stored, so they survive
//! a restart until they expire.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{
    iso, new_hex_id, now, parse_body, reply, require_token, service_layers, ApiError, Caller,
    Cloud, Ctx, Routes, Service,
};
use crate::defaults;
pub(crate) use crate::model::identity::{Project, User, PROJECTS, USERS};
use crate::store::{Read, Tx};

mod app_creds;
mod trusts;
pub(crate) mod users;
mod v2;

pub(crate) const TOKENS: &str = "tokens";
pub(crate) const APP_CREDS: &str = "application_credentials";

/// A stored token: Keystone's, and the one behind each Entra access token (`api/azure`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Token {
    pub id: String,
    pub user_id: String,
    pub project_id: String,
    methods: Vec<String>,
    pub issued_at: u64,
    pub expires_at: u64,
    audit_id: String,
    #[serde(default)]
    application_credential_id: Option<String>,
    /// The trust a trust-scoped token was issued through (`trusts`).
    #[serde(default)]
    pub trust_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct AppCred {
    id: String,
    name: String,
    user_id: String,
    project_id: String,
    // Kept in clear text: the local cloud is a single-user test cloud whose state directory is
    // private to its owner; do not reuse these secrets anywhere.
    secret: String,
    description: Option<String>,
    expires_at: Option<u64>,
    unrestricted: bool,
}

/// Seeds the domain's user and project on first start.
pub(crate) fn seed(tx: &mut Tx<'_>, config: &crate::ServerConfig) -> Result<(), ApiError> {
    let project = match tx
        .list::<Project>(PROJECTS)
        .into_iter()
        .find(|p| p.name == config.project)
    {
        Some(p) => p,
        None => {
            let p = Project {
                id: new_hex_id(),
                name: config.project.clone(),
                domain_id: defaults::DOMAIN_ID.into(),
            };
            tx.put(PROJECTS, &p.id, &p)?;
            p
        }
    };
    if !tx.list::<User>(USERS).iter().any(|u| u.name == config.user) {
        let u = User {
            id: new_hex_id(),
            name: config.user.clone(),
            domain_id: defaults::DOMAIN_ID.into(),
            default_project_id: project.id,
            password_sha256: None,
        };
        tx.put(USERS, &u.id, &u)?;
    }
    Ok(())
}

/// The caller a token stands for, when it exists and has not expired.
pub(crate) fn check_token(cloud: &Cloud, token: &str) -> Option<Caller> {
    let token: Token = cloud.store.read(|v| v.get(TOKENS, token))?;
    (token.expires_at > now()).then_some(Caller {
        user_id: token.user_id,
        project_id: token.project_id,
        trust_id: token.trust_id,
    })
}

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let protected = Router::new()
        .route("/identity/v3/auth/catalog", get(catalog_only))
        .route("/identity/v3/auth/projects", get(list_projects))
        .route("/identity/v3/projects", get(list_projects))
        .route("/identity/v3/projects/{id}", get(get_project))
        .merge(app_creds::routes())
        .merge(users::protected())
        .merge(trusts::protected())
        .route_layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            require_token,
        ));
    let public = Router::new()
        .get_with_slash("/identity", versions)
        .get_with_slash("/identity/v3", version)
        .route(
            "/identity/v3/auth/tokens",
            get(validate_token)
                .head(validate_token)
                .post(issue_token)
                .delete(revoke_token),
        )
        .merge(users::public())
        .merge(v2::routes());
    service_layers(public.merge(protected), &cloud, Service::Identity)
}

fn version_doc(cloud: &Cloud) -> Value {
    json!({
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{}/identity/v3/", cloud.base_url)}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    })
}

async fn versions(State(cloud): Ctx) -> Response {
    reply(
        StatusCode::MULTIPLE_CHOICES,
        json!({"versions": {"values": [version_doc(&cloud), v2::version_doc(&cloud)]}}),
    )
}

async fn version(State(cloud): Ctx) -> Response {
    reply(StatusCode::OK, json!({"version": version_doc(&cloud)}))
}

/// The service catalog: every API this cloud serves, for `project_id`.
pub(crate) fn catalog(cloud: &Cloud, project_id: &str) -> Value {
    let b = &cloud.base_url;
    let region = &cloud.config.region;
    let services = [
        ("identity", "keystone", format!("{b}/identity")),
        ("compute", "nova", format!("{b}/compute/v2.1")),
        ("network", "neutron", format!("{b}/network")),
        (
            "block-storage",
            "cinder",
            format!("{b}/volume/v3/{project_id}"),
        ),
        (
            "volumev3",
            "cinderv3",
            format!("{b}/volume/v3/{project_id}"),
        ),
        ("image", "glance", format!("{b}/image")),
        ("load-balancer", "octavia", format!("{b}/load-balancer")),
    ];
    Value::Array(
        services
            .iter()
            .map(|(kind, name, url)| {
                let endpoints: Vec<Value> = ["public", "internal", "admin"]
                    .iter()
                    .map(|interface| {
                        json!({
                            "id": format!("{name}-{interface}"),
                            "interface": interface,
                            "region": region,
                            "region_id": region,
                            "url": url,
                        })
                    })
                    .collect();
                json!({"id": name, "type": kind, "name": name, "endpoints": endpoints})
            })
            .collect(),
    )
}

fn token_body(cloud: &Cloud, token: &Token, with_catalog: bool) -> Result<Value, ApiError> {
    let (user, project) = cloud.store.read(|v| {
        (
            v.get::<User>(USERS, &token.user_id),
            v.get::<Project>(PROJECTS, &token.project_id),
        )
    });
    let Some(user) = user else {
        return Err(ApiError::not_found(
            "TokenNotFound",
            "Could not find token.",
        ));
    };
    if project.is_none() && !token.project_id.is_empty() {
        return Err(ApiError::not_found(
            "TokenNotFound",
            "Could not find token.",
        ));
    }
    let domain = json!({"id": defaults::DOMAIN_ID, "name": defaults::DOMAIN});
    let mut body = json!({
        "methods": token.methods,
        "user": {"id": user.id, "name": user.name, "domain": domain, "password_expires_at": null},
        "audit_ids": [token.audit_id],
        "issued_at": fmt_keystone_time(token.issued_at),
        "expires_at": fmt_keystone_time(token.expires_at),
    });
    // An unscoped token has no project, roles or catalog, as in Keystone.
    let Some(project) = project else {
        return Ok(json!({"token": body}));
    };
    body["project"] = json!({"id": project.id, "name": project.name, "domain": domain});
    body["is_domain"] = json!(false);
    body["roles"] = json!([
        {"id": "admin", "name": "admin"},
        {"id": "member", "name": "member"},
        {"id": "reader", "name": "reader"},
    ]);
    if let Some(id) = &token.trust_id {
        let trust = trusts::live(cloud, id)
            .ok_or_else(|| ApiError::not_found("TokenNotFound", "Could not find token."))?;
        body["roles"] = trust.role_refs();
        body["OS-TRUST:trust"] = trust.token_block();
    }
    if let Some(id) = &token.application_credential_id {
        body["application_credential"] = json!({"id": id, "restricted": true});
    }
    if with_catalog {
        body["catalog"] = catalog(cloud, &project.id);
    }
    Ok(json!({"token": body}))
}

/// Keystone's `2026-11-22T22:30:00.000000Z`.
fn fmt_keystone_time(secs: u64) -> String {
    iso(secs).replace('Z', ".000000Z")
}

fn missing(what: &str, within: &str) -> ApiError {
    ApiError::bad_request(format!("Expecting to find {what} in {within}. The server could not comply with the request since it is either malformed or otherwise incorrect."))
}

fn find_user(cloud: &Cloud, user: &Value) -> Result<Option<User>, ApiError> {
    let users = cloud.store.read(|v| v.list::<User>(USERS));
    if let Some(id) = user["id"].as_str() {
        return Ok(users.into_iter().find(|u| u.id == id));
    }
    let Some(name) = user["name"].as_str() else {
        return Err(missing("id or name", "user"));
    };
    let domain = &user["domain"];
    if domain.is_null() {
        return Err(missing("domain", "user"));
    }
    if !domain_matches(domain) {
        return Ok(None);
    }
    Ok(users.into_iter().find(|u| u.name == name))
}

fn domain_matches(domain: &Value) -> bool {
    domain["id"].as_str() == Some(defaults::DOMAIN_ID)
        || domain["name"].as_str() == Some(defaults::DOMAIN)
}

async fn issue_token(State(cloud): Ctx, body: Bytes) -> Result<Response, ApiError> {
    let req: Value = parse_body(&body)?;
    let identity = &req["auth"]["identity"];
    if identity.is_null() {
        return Err(missing("identity", "auth"));
    }
    let methods: Vec<String> = identity["methods"]
        .as_array()
        .ok_or_else(|| missing("methods", "identity"))?
        .iter()
        .filter_map(|m| m.as_str().map(str::to_owned))
        .collect();
    let denied = ApiError::unauthorized;
    let who = if methods.iter().any(|m| m == "password") {
        let user = &identity["password"]["user"];
        if user.is_null() {
            return Err(missing("user", "password"));
        }
        let Some(password) = user["password"].as_str() else {
            return Err(missing("password", "user"));
        };
        let Some(found) = find_user(&cloud, user)? else {
            return Err(denied());
        };
        if !users::password_matches(&cloud, &found, password) {
            return Err(denied());
        }
        let scope = &req["auth"]["scope"];
        match scope.get("OS-TRUST:trust") {
            Some(t) => by_trust(&cloud, found, t)?,
            None => {
                let project_id = scoped_project(&cloud, scope, &found)?;
                Authenticated::by_password(found, project_id)
            }
        }
    } else if methods.iter().any(|m| m == "application_credential") {
        let ac = &identity["application_credential"];
        let Some(secret) = ac["secret"].as_str() else {
            return Err(missing("secret", "application_credential"));
        };
        let creds = cloud.store.read(|v| v.list::<AppCred>(APP_CREDS));
        let found = if let Some(id) = ac["id"].as_str() {
            creds.into_iter().find(|c| c.id == id)
        } else if let Some(name) = ac["name"].as_str() {
            let user = find_user(&cloud, &ac["user"])?.ok_or_else(denied)?;
            creds
                .into_iter()
                .find(|c| c.name == name && c.user_id == user.id)
        } else {
            return Err(missing("id or name", "application_credential"));
        };
        let cred = found.ok_or_else(denied)?;
        accept_app_credential(&cloud, cred, secret).map_err(|_| denied())?
    } else {
        return Err(denied());
    };
    let token = store_token(&cloud, who, methods).await?;
    let body = token_body(&cloud, &token, true)?;
    let mut response = reply(StatusCode::CREATED, body);
    if let Ok(v) = HeaderValue::from_str(&token.id) {
        response.headers_mut().insert("x-subject-token", v);
    }
    Ok(response)
}

/// Why an application credential was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CredentialRefused {
    /// No credential has that ID.
    Unknown,
    /// The secret is not its secret.
    WrongSecret,
    /// It has expired.
    Expired,
}

/// Who a token is issued to: a user in a project, and the application credential it was got
/// with, if any (its expiry bounds the token's).
pub(crate) struct Authenticated {
    pub user: User,
    pub project_id: String,
    /// The credential's ID and expiry.
    credential: Option<(String, Option<u64>)>,
    /// The trust of a trust-scoped token.
    trust: Option<trusts::Trust>,
}

impl Authenticated {
    /// `user`, authenticated by password, in `project_id`.
    pub(crate) fn by_password(user: User, project_id: String) -> Self {
        Self {
            user,
            project_id,
            credential: None,
            trust: None,
        }
    }
}

/// A trust-scoped authentication: `trustee` (who proved its password) asks for the trust
/// named in `scope` (`{"id": ...}`); it must be that trust's trustee.
fn by_trust(cloud: &Cloud, trustee: User, scope: &Value) -> Result<Authenticated, ApiError> {
    let Some(id) = scope["id"].as_str() else {
        return Err(missing("id", "OS-TRUST:trust"));
    };
    let trust = trusts::live(cloud, id).ok_or_else(ApiError::unauthorized)?;
    if trust.trustee_user_id != trustee.id {
        return Err(ApiError::forbidden("User is not a trustee."));
    }
    let user = if trust.impersonation {
        cloud
            .store
            .read(|v| v.get::<User>(USERS, &trust.trustor_user_id))
            .ok_or_else(ApiError::unauthorized)?
    } else {
        trustee
    };
    Ok(Authenticated {
        user,
        project_id: trust.project_id.clone(),
        credential: None,
        trust: Some(trust),
    })
}

/// The user and project application credential `cred` stands for, when `secret` is its secret
/// and it has not expired.
fn accept_app_credential(
    cloud: &Cloud,
    cred: AppCred,
    secret: &str,
) -> Result<Authenticated, CredentialRefused> {
    if cred.secret != secret {
        return Err(CredentialRefused::WrongSecret);
    }
    if cred.expires_at.is_some_and(|e| e <= now()) {
        return Err(CredentialRefused::Expired);
    }
    let user = cloud
        .store
        .read(|v| v.get::<User>(USERS, &cred.user_id))
        .ok_or(CredentialRefused::Unknown)?;
    Ok(Authenticated {
        user,
        project_id: cred.project_id,
        credential: Some((cred.id, cred.expires_at)),
        trust: None,
    })
}

/// [`accept_app_credential`] for the credential with ID `id`.
pub(crate) fn app_credential_owner(
    cloud: &Cloud,
    id: &str,
    secret: &str,
) -> Result<Authenticated, CredentialRefused> {
    let cred = cloud
        .store
        .read(|v| v.get::<AppCred>(APP_CREDS, id))
        .ok_or(CredentialRefused::Unknown)?;
    accept_app_credential(cloud, cred, secret)
}

/// The user and project application credential `id` stands for, when it has not expired, for
/// a client that proved itself otherwise than by the secret (Entra's certificate credentials,
/// whose certificate the caller has checked).
pub(crate) fn app_credential_holder(
    cloud: &Cloud,
    id: &str,
) -> Result<Authenticated, CredentialRefused> {
    let cred = cloud
        .store
        .read(|v| v.get::<AppCred>(APP_CREDS, id))
        .ok_or(CredentialRefused::Unknown)?;
    let secret = cred.secret.clone();
    accept_app_credential(cloud, cred, &secret)
}

/// Issues and stores a token for `who`, got with `methods`.
pub(crate) async fn store_token(
    cloud: &Arc<Cloud>,
    who: Authenticated,
    methods: Vec<String>,
) -> Result<Token, ApiError> {
    let issued_at = now();
    let mut expires_at = issued_at.saturating_add(cloud.config.token_ttl.as_secs());
    let (app_cred, cred_expiry) = who.credential.unzip();
    if let Some(e) = cred_expiry.flatten() {
        expires_at = expires_at.min(e);
    }
    if let Some(e) = who.trust.as_ref().and_then(|t| t.expires_at) {
        expires_at = expires_at.min(e);
    }
    let token = Token {
        id: format!("{}{}", new_hex_id(), new_hex_id()),
        user_id: who.user.id,
        project_id: who.project_id,
        methods,
        issued_at,
        expires_at,
        audit_id: new_hex_id()[..22].to_owned(),
        application_credential_id: app_cred,
        trust_id: who.trust.map(|t| t.id),
    };
    let stored = token.clone();
    cloud
        .write(move |tx| {
            // Forget tokens that expired a while ago, so the table stays small.
            let stale: Vec<String> = tx
                .list::<Token>(TOKENS)
                .into_iter()
                .filter(|t| t.expires_at + 3600 < issued_at)
                .map(|t| t.id)
                .collect();
            for id in stale {
                tx.delete(TOKENS, &id);
            }
            tx.put(TOKENS, &stored.id, &stored)?;
            Ok(())
        })
        .await?;
    Ok(token)
}

/// The project a password authentication is scoped to: the one asked for, else the user's
/// default project; `"scope": "unscoped"` asks for an unscoped token (empty project).
fn scoped_project(cloud: &Cloud, scope: &Value, user: &User) -> Result<String, ApiError> {
    if scope.is_null() {
        return Ok(user.default_project_id.clone());
    }
    if scope.as_str() == Some("unscoped") {
        return Ok(String::new());
    }
    let project = &scope["project"];
    if project.is_null() {
        return Err(ApiError::unauthorized());
    }
    let projects = cloud.store.read(|v| v.list::<Project>(PROJECTS));
    let found = if let Some(id) = project["id"].as_str() {
        projects.into_iter().find(|p| p.id == id)
    } else if let Some(name) = project["name"].as_str() {
        if !domain_matches(&project["domain"]) {
            return Err(ApiError::unauthorized());
        }
        projects.into_iter().find(|p| p.name == name)
    } else {
        return Err(missing("id or name", "project"));
    };
    found.map(|p| p.id).ok_or_else(ApiError::unauthorized)
}

fn subject(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn caller_token(cloud: &Cloud, headers: &HeaderMap) -> Result<Caller, ApiError> {
    headers
        .get("x-auth-token")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| check_token(cloud, t))
        .ok_or_else(ApiError::unauthorized)
}

fn live_token(cloud: &Cloud, id: &str) -> Result<Token, ApiError> {
    cloud
        .store
        .read(|v| v.get::<Token>(TOKENS, id))
        .filter(|t| t.expires_at > now())
        .ok_or_else(|| ApiError::not_found("TokenNotFound", format!("Could not find token: {id}.")))
}

async fn validate_token(State(cloud): Ctx, headers: HeaderMap) -> Result<Response, ApiError> {
    caller_token(&cloud, &headers)?;
    let id = subject(&headers).ok_or_else(|| missing("X-Subject-Token", "headers"))?;
    let token = live_token(&cloud, &id)?;
    let mut response = reply(StatusCode::OK, token_body(&cloud, &token, true)?);
    if let Ok(v) = HeaderValue::from_str(&token.id) {
        response.headers_mut().insert("x-subject-token", v);
    }
    Ok(response)
}

async fn revoke_token(State(cloud): Ctx, headers: HeaderMap) -> Result<Response, ApiError> {
    caller_token(&cloud, &headers)?;
    let id = subject(&headers).ok_or_else(|| missing("X-Subject-Token", "headers"))?;
    live_token(&cloud, &id)?;
    cloud
        .write(move |tx| {
            tx.delete(TOKENS, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn catalog_only(State(cloud): Ctx, Extension(caller): Extension<Caller>) -> Response {
    reply(
        StatusCode::OK,
        json!({"catalog": catalog(&cloud, &caller.project_id), "links": {"self": format!("{}/identity/v3/auth/catalog", cloud.base_url)}}),
    )
}

fn project_view(cloud: &Cloud, p: &Project) -> Value {
    json!({
        "id": p.id, "name": p.name, "domain_id": p.domain_id, "enabled": true,
        "description": "", "is_domain": false, "parent_id": p.domain_id, "tags": [],
        "links": {"self": format!("{}/identity/v3/projects/{}", cloud.base_url, p.id)},
    })
}

async fn list_projects(State(cloud): Ctx) -> Response {
    let projects = cloud.store.read(|v| v.list::<Project>(PROJECTS));
    let views: Vec<Value> = projects.iter().map(|p| project_view(&cloud, p)).collect();
    reply(
        StatusCode::OK,
        json!({"projects": views, "links": {"next": null, "previous": null}}),
    )
}

async fn get_project(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let p = cloud
        .store
        .read(|v| v.get::<Project>(PROJECTS, &id))
        .ok_or_else(|| {
            ApiError::not_found("ProjectNotFound", format!("Could not find project: {id}."))
        })?;
    Ok(reply(
        StatusCode::OK,
        json!({"project": project_view(&cloud, &p)}),
    ))
}

/// Deletes the stored tokens `revoked` says so of.
fn revoke_tokens_where(tx: &mut Tx<'_>, revoked: impl Fn(&Token) -> bool) {
    let ids: Vec<String> = tx
        .list::<Token>(TOKENS)
        .into_iter()
        .filter(|t| revoked(t))
        .map(|t| t.id)
        .collect();
    for id in ids {
        tx.delete(TOKENS, &id);
    }
}
