//! Users beside the seeded one: `POST/GET /v3/users`, `GET/DELETE /v3/users/{id}`, and the
//! self-service `POST /v3/users/{id}/password` (the original password proves the caller, as in
//! Keystone; the user's tokens are revoked). A user created here has a password of its own,
//! kept as a salted SHA-256; the seeded user's is the server's `--password` until changed.
//! They exist for trusts (a trustee is another user) and for rotating a password.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::revoke_tokens_where;
use crate::api::{new_hex_id, parse_body, reply, ApiError, Caller, Cloud, Ctx};
use crate::defaults;
use crate::model::identity::{Project, User, PROJECTS, USERS};
use crate::store::Read;

/// The routes that need a token.
pub(super) fn protected() -> Router<std::sync::Arc<Cloud>> {
    Router::new()
        .route("/identity/v3/users", get(list_users).post(create_user))
        .route(
            "/identity/v3/users/{user_id}",
            get(get_user).delete(delete_user),
        )
        .route("/identity/v3/domains", get(list_domains))
        .route("/identity/v3/domains/{id}", get(get_domain))
}

/// The one domain (`Default`), for clients that look users' domains up.
fn domain_view(cloud: &Cloud) -> Value {
    json!({
        "id": defaults::DOMAIN_ID, "name": defaults::DOMAIN, "enabled": true,
        "description": "The default domain", "tags": [], "options": {},
        "links": {"self": format!("{}/identity/v3/domains/{}", cloud.base_url, defaults::DOMAIN_ID)},
    })
}

async fn list_domains(
    State(cloud): Ctx,
    axum::extract::Query(q): axum::extract::Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    let views: Vec<Value> = [domain_view(&cloud)]
        .into_iter()
        .filter(|d| q.get("name").is_none_or(|n| d["name"] == n.as_str()))
        .collect();
    reply(
        StatusCode::OK,
        json!({"domains": views, "links": {"next": null, "previous": null}}),
    )
}

async fn get_domain(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    if id != defaults::DOMAIN_ID && id != defaults::DOMAIN {
        return Err(ApiError::not_found(
            "DomainNotFound",
            format!("Could not find domain: {id}."),
        ));
    }
    Ok(reply(
        StatusCode::OK,
        json!({"domain": domain_view(&cloud)}),
    ))
}

/// The routes Keystone serves without a token.
pub(super) fn public() -> Router<std::sync::Arc<Cloud>> {
    Router::new().route(
        "/identity/v3/users/{user_id}/password",
        post(change_password),
    )
}

/// The salted digest a password is kept as.
pub(crate) fn digest(user_id: &str, password: &str) -> String {
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{user_id}\0{password}").as_bytes(),
    );
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `password` is `user`'s: its own, else the server's `--password`.
pub(crate) fn password_matches(cloud: &Cloud, user: &User, password: &str) -> bool {
    match &user.password_sha256 {
        Some(d) => *d == digest(&user.id, password),
        None => password == cloud.config.password,
    }
}

/// The user name of a login: `admin@internal` → `admin`.
fn login_name(login: &str) -> &str {
    login.rsplit_once('@').map_or(login, |(user, _)| user)
}

/// The local cloud's user a dialect's login names, when `password` is theirs. A login may carry
/// a realm or profile after `@` (oVirt's `admin@internal`, Lightwave's
/// `administrator@photon.local`): only the user name before it is looked up, because every user
/// here is in the one domain.
pub(crate) fn by_login(cloud: &Cloud, login: &str, password: &str) -> Option<User> {
    let name = login_name(login);
    let user = cloud
        .store
        .read(|v| v.list::<User>(USERS))
        .into_iter()
        .find(|u| u.name == name)?;
    password_matches(cloud, &user, password).then_some(user)
}

fn view(cloud: &Cloud, u: &User) -> Value {
    json!({
        "id": u.id, "name": u.name, "domain_id": u.domain_id,
        "default_project_id": u.default_project_id, "enabled": true,
        "password_expires_at": null, "options": {},
        "links": {"self": format!("{}/identity/v3/users/{}", cloud.base_url, u.id)},
    })
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("UserNotFound", format!("Could not find user: {id}."))
}

#[derive(Deserialize)]
struct CreateBody {
    user: CreateUser,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // accepted because Keystone accepts them, not modelled
struct CreateUser {
    name: String,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    domain_id: Option<String>,
    #[serde(default)]
    default_project_id: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    options: Option<Value>,
}

async fn create_user(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: CreateBody = parse_body(&body)?;
    let req = req.user;
    if req.name.trim().is_empty() || req.name.len() > 255 {
        return Err(ApiError::bad_request(
            "Invalid input for field 'name': the name must be 1 to 255 characters.",
        ));
    }
    if let Some(d) = req
        .domain_id
        .as_deref()
        .filter(|d| *d != defaults::DOMAIN_ID)
    {
        return Err(ApiError::not_found(
            "DomainNotFound",
            format!("Could not find domain: {d}."),
        ));
    }
    if req.enabled == Some(false) {
        return Err(ApiError::bad_request(
            "enabled = false is not supported by the local cloud",
        ));
    }
    let project = req
        .default_project_id
        .clone()
        .unwrap_or(caller.project_id.clone());
    if !project.is_empty()
        && cloud
            .store
            .read(|v| v.get::<Project>(PROJECTS, &project))
            .is_none()
    {
        return Err(ApiError::not_found(
            "ProjectNotFound",
            format!("Could not find project: {project}."),
        ));
    }
    let id = new_hex_id();
    let user = User {
        password_sha256: req.password.as_deref().map(|p| digest(&id, p)),
        id,
        name: req.name,
        domain_id: defaults::DOMAIN_ID.into(),
        default_project_id: project,
    };
    let stored = user.clone();
    cloud
        .write(move |tx| {
            if tx.list::<User>(USERS).iter().any(|u| u.name == stored.name) {
                return Err(ApiError::conflict(
                    "Conflict",
                    format!(
                        "Conflict occurred attempting to store user - Duplicate entry found with name {} at domain ID {}.",
                        stored.name,
                        defaults::DOMAIN_ID
                    ),
                ));
            }
            tx.put(USERS, &stored.id, &stored)?;
            Ok(())
        })
        .await?;
    Ok(reply(
        StatusCode::CREATED,
        json!({"user": view(&cloud, &user)}),
    ))
}

async fn list_users(
    State(cloud): Ctx,
    axum::extract::Query(q): axum::extract::Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    let users = cloud.store.read(|v| v.list::<User>(USERS));
    let views: Vec<Value> = users
        .iter()
        .filter(|u| q.get("name").is_none_or(|n| *n == u.name))
        .map(|u| view(&cloud, u))
        .collect();
    reply(
        StatusCode::OK,
        json!({"users": views, "links": {"next": null, "previous": null}}),
    )
}

async fn get_user(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let u = cloud
        .store
        .read(|v| v.get::<User>(USERS, &id))
        .ok_or_else(|| not_found(&id))?;
    Ok(reply(StatusCode::OK, json!({"user": view(&cloud, &u)})))
}

async fn delete_user(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if caller.user_id == id {
        return Err(ApiError::forbidden(
            "The local cloud does not let a user delete itself.",
        ));
    }
    cloud
        .write(move |tx| {
            if tx.get::<User>(USERS, &id).is_none() {
                return Err(not_found(&id));
            }
            tx.delete(USERS, &id);
            // Its tokens, application credentials and trusts go with it, as in Keystone.
            revoke_tokens_where(tx, |t| t.user_id == id);
            super::trusts::delete_of_user(tx, &id);
            super::app_creds::delete_app_creds_of(tx, &id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
struct PasswordBody {
    user: PasswordChange,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PasswordChange {
    original_password: String,
    password: String,
}

async fn change_password(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: PasswordBody = parse_body(&body)?;
    let req = req.user;
    let user = cloud
        .store
        .read(|v| v.get::<User>(USERS, &id))
        .ok_or_else(ApiError::unauthorized)?;
    if !password_matches(&cloud, &user, &req.original_password) {
        return Err(ApiError::unauthorized());
    }
    if req.password.is_empty() {
        return Err(ApiError::bad_request(
            "Invalid input for field 'password': the password must not be empty.",
        ));
    }
    let digest = digest(&user.id, &req.password);
    cloud
        .write(move |tx| {
            let mut u = tx
                .get::<User>(USERS, &id)
                .ok_or_else(ApiError::unauthorized)?;
            u.password_sha256 = Some(digest);
            tx.put(USERS, &id, &u)?;
            // Keystone revokes the user's tokens when the password changes.
            revoke_tokens_where(tx, |t| t.user_id == id);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn logins_name_users_before_their_realm() {
        assert_eq!(super::login_name("admin@internal"), "admin");
        assert_eq!(
            super::login_name("administrator@photon.local"),
            "administrator"
        );
        assert_eq!(super::login_name("a@b@c"), "a@b");
        assert_eq!(super::login_name("admin"), "admin");
    }
}
