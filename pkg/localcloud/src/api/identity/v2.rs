//! Keystone v2.0 as Rackspace's identity service spoke it (`/identity/v2.0`): the legacy
//! `rackspace` provider (gophercloud's `rackspace.AuthenticatedClient`) and the `rackspaceauth`
//! keystoneauth plugin sign in here.
//!
//! - `POST /identity/v2.0/tokens` with `passwordCredentials` (`username`, `password`) or
//!   Rackspace's `RAX-KSKEY:apiKeyCredentials` (`username`, `apiKey`), optionally `tenantId` or
//!   `tenantName` (the user's default project otherwise): a token of the same store as v3's, and
//!   `access` with the token, the user and its roles, and the service catalog as Rackspace
//!   returned it (`cloudServersOpenStack`, `cloudBlockStorage`, `cloudNetworks`,
//!   `cloudLoadBalancers`... each with `region`, `publicURL`, `internalURL`, `tenantId`).
//! - `GET /identity/v2.0/tokens/{id}` validates a token (`X-Auth-Token` of a live token).
//! - `GET /identity/v2.0/users/{id}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials`: the
//!   user's API key, to that user's own token, as Rackspace showed it in its control panel.
//!
//! A user's API key is derived from its ID and its current password (so changing the password
//! gives a new key, as Rackspace's key reset did). Errors are v2's
//! `{"unauthorized": {"code": 401, "message"}}` and `{"badRequest": {...}}`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use super::{check_token, store_token, users, Authenticated, Caller, Token, TOKENS};
use crate::api::{reply, Cloud, Ctx, Formatted, Routes};
use crate::defaults;
use crate::model::identity::{Project, User, PROJECTS, USERS};
use crate::store::Read;

/// The v2.0 routes (none behind the v3 token middleware: each checks what it needs).
pub(super) fn routes() -> Router<std::sync::Arc<Cloud>> {
    Router::new()
        .get_with_slash("/identity/v2.0", version)
        .route("/identity/v2.0/tokens", post(issue))
        .route("/identity/v2.0/tokens/{id}", get(validate))
        .route(
            "/identity/v2.0/users/{id}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials",
            get(api_key_of),
        )
}

/// A v2 error body, final.
fn fault(status: StatusCode, message: impl Into<String>) -> Response {
    let key = match status.as_u16() {
        400 => "badRequest",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "itemNotFound",
        _ => "identityFault",
    };
    let mut r = reply(
        status,
        json!({ key: {"code": status.as_u16(), "message": message.into()} }),
    );
    r.extensions_mut().insert(Formatted);
    r
}

pub(crate) fn version_doc(cloud: &Cloud) -> Value {
    json!({
        "id": "v2.0",
        "status": "deprecated",
        "updated": "2014-04-17T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{}/identity/v2.0/", cloud.base_url)}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v2.0+json"}],
    })
}

async fn version(State(cloud): Ctx) -> Response {
    reply(StatusCode::OK, json!({"version": version_doc(&cloud)}))
}

/// The user's API key: derived from its ID and its current password.
pub(crate) fn api_key(cloud: &Cloud, user: &User) -> String {
    let secret = user
        .password_sha256
        .clone()
        .unwrap_or_else(|| users::digest(&user.id, &cloud.config.password));
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("RAX-KSKEY\0{}\0{secret}", user.id).as_bytes(),
    );
    d.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn user_named(cloud: &Cloud, name: &str) -> Option<User> {
    cloud
        .store
        .read(|v| v.list::<User>(USERS))
        .into_iter()
        .find(|u| u.name == name)
}

/// The catalog as Rackspace's identity returned it: service names of its own, one endpoint per
/// region with `publicURL`/`internalURL`, the tenant in each.
fn catalog(cloud: &Cloud, project_id: &str) -> Value {
    let b = &cloud.base_url;
    let region = &cloud.config.region;
    let services = [
        (
            "compute",
            "cloudServersOpenStack",
            format!("{b}/compute/v2.1"),
        ),
        (
            "volume",
            "cloudBlockStorage",
            format!("{b}/volume/v3/{project_id}"),
        ),
        ("network", "cloudNetworks", format!("{b}/network")),
        ("image", "cloudImages", format!("{b}/image")),
        (
            "rax:load-balancer",
            "cloudLoadBalancers",
            format!("{b}/load-balancer"),
        ),
        ("identity", "keystone", format!("{b}/identity/v2.0")),
    ];
    Value::Array(
        services
            .iter()
            .map(|(kind, name, url)| {
                json!({"name": name, "type": kind, "endpoints": [{
                    "region": region, "tenantId": project_id,
                    "publicURL": url, "internalURL": url,
                }]})
            })
            .collect(),
    )
}

fn v2_time(secs: u64) -> String {
    crate::time::iso(secs).replace('Z', ".000Z")
}

fn access(
    cloud: &Cloud,
    token: &Token,
    user: &User,
    project: &Project,
    with_catalog: bool,
) -> Value {
    let mut access = json!({
        "token": {
            "id": token.id,
            "issued_at": v2_time(token.issued_at),
            "expires": v2_time(token.expires_at),
            "tenant": {"id": project.id, "name": project.name},
            "RAX-AUTH:authenticatedBy": token.methods,
        },
        "user": {
            "id": user.id, "name": user.name,
            "RAX-AUTH:defaultRegion": cloud.config.region,
            "roles": [
                {"id": "admin", "name": "admin"},
                {"id": "member", "name": "compute:default", "tenantId": project.id},
            ],
        },
    });
    if with_catalog {
        access["serviceCatalog"] = catalog(cloud, &project.id);
    }
    json!({ "access": access })
}

/// `POST /identity/v2.0/tokens`.
async fn issue(State(cloud): Ctx, body: Bytes) -> Response {
    let Ok(b) = serde_json::from_slice::<Value>(&body) else {
        return fault(StatusCode::BAD_REQUEST, "Invalid json request body");
    };
    let auth = &b["auth"];
    if !auth.is_object() {
        return fault(StatusCode::BAD_REQUEST, "Expecting auth");
    }
    let (user, method) = if let Some(p) = auth.get("passwordCredentials") {
        let (Some(name), Some(password)) = (p["username"].as_str(), p["password"].as_str()) else {
            return fault(
                StatusCode::BAD_REQUEST,
                "passwordCredentials needs username and password",
            );
        };
        let user = users::by_login(&cloud, name, password);
        if user.is_none() {
            return fault(
                StatusCode::UNAUTHORIZED,
                "Unable to authenticate user with credentials provided.",
            );
        }
        (user, "PASSWORD")
    } else if let Some(k) = auth.get("RAX-KSKEY:apiKeyCredentials") {
        let (Some(name), Some(key)) = (k["username"].as_str(), k["apiKey"].as_str()) else {
            return fault(
                StatusCode::BAD_REQUEST,
                "RAX-KSKEY:apiKeyCredentials needs username and apiKey",
            );
        };
        let user = user_named(&cloud, name).filter(|u| {
            let want = api_key(&cloud, u);
            // Constant-time enough for a test cloud: compare all bytes.
            want.len() == key.len()
                && want
                    .bytes()
                    .zip(key.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        });
        if user.is_none() {
            return fault(StatusCode::UNAUTHORIZED, "Username or api key is invalid.");
        }
        (user, "APIKEY")
    } else {
        return fault(
            StatusCode::BAD_REQUEST,
            "Invalid request: auth takes passwordCredentials or RAX-KSKEY:apiKeyCredentials here (tokens and other methods are not served)",
        );
    };
    let Some(user) = user else {
        return fault(StatusCode::UNAUTHORIZED, "Unable to authenticate user.");
    };
    let projects = cloud.store.read(|v| v.list::<Project>(PROJECTS));
    let wanted = match (auth["tenantId"].as_str(), auth["tenantName"].as_str()) {
        (Some(id), _) => projects.iter().find(|p| p.id == id),
        (None, Some(name)) => projects.iter().find(|p| p.name == name),
        (None, None) => projects.iter().find(|p| p.id == user.default_project_id),
    };
    let Some(project) = wanted
        .filter(|p| p.domain_id == defaults::DOMAIN_ID)
        .cloned()
    else {
        return fault(
            StatusCode::UNAUTHORIZED,
            format!(
                "Tenant {} is not one of the user's tenants.",
                auth["tenantId"]
                    .as_str()
                    .or(auth["tenantName"].as_str())
                    .unwrap_or_default()
            ),
        );
    };
    let token = match store_token(
        &cloud,
        Authenticated::by_password(user.clone(), project.id.clone()),
        vec![method.into()],
    )
    .await
    {
        Ok(t) => t,
        Err(e) => return fault(StatusCode::INTERNAL_SERVER_ERROR, e.message),
    };
    reply(
        StatusCode::OK,
        access(&cloud, &token, &user, &project, true),
    )
}

fn caller_token(cloud: &Cloud, headers: &HeaderMap) -> Option<Caller> {
    let t = headers.get("x-auth-token")?.to_str().ok()?;
    check_token(cloud, t)
}

/// `GET /identity/v2.0/tokens/{id}`: the token's `access`, without the catalog.
async fn validate(State(cloud): Ctx, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if caller_token(&cloud, &headers).is_none() {
        return fault(StatusCode::UNAUTHORIZED, "No valid token provided.");
    }
    let found = cloud.store.read(|v| {
        let token: Token = v.get(TOKENS, &id)?;
        let user: User = v.get(USERS, &token.user_id)?;
        let project: Project = v.get(PROJECTS, &token.project_id)?;
        Some((token, user, project))
    });
    match found {
        Some((token, user, project)) if token.expires_at > crate::time::now() => reply(
            StatusCode::OK,
            access(&cloud, &token, &user, &project, false),
        ),
        _ => fault(StatusCode::NOT_FOUND, "Token not found."),
    }
}

/// `GET /identity/v2.0/users/{id}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials`.
async fn api_key_of(State(cloud): Ctx, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Some(caller) = caller_token(&cloud, &headers) else {
        return fault(StatusCode::UNAUTHORIZED, "No valid token provided.");
    };
    if caller.user_id != id {
        return fault(
            StatusCode::FORBIDDEN,
            "Not authorized: a user reads only its own API key.",
        );
    }
    let Some(user) = cloud.store.read(|v| v.get::<User>(USERS, &id)) else {
        return fault(StatusCode::NOT_FOUND, format!("User {id} not found."));
    };
    reply(
        StatusCode::OK,
        json!({"RAX-KSKEY:apiKeyCredentials": {"username": user.name, "apiKey": api_key(&cloud, &user)}}),
    )
}
