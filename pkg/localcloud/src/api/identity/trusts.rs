//! Trusts (Keystone's `OS-TRUST` extension): a trustor delegates its role on a project to a
//! trustee, who then authenticates with its own password and the scope
//! `{"OS-TRUST:trust": {"id": ...}}` to get a trust-scoped token: the trust's project, its
//! roles, the trustor as the token's user when the trust impersonates, else the trustee, and
//! the `OS-TRUST:trust` block in the token body. Only the trustor creates and deletes a trust;
//! deleting one (or a user of it) revokes the tokens issued through it.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{fmt_keystone_time, revoke_tokens_where, Token};
use crate::api::{new_hex_id, now, parse_body, reply, ApiError, Caller, Cloud, Ctx};
use crate::model::identity::{User, USERS};
use crate::store::{Read, Tx};

pub(crate) const TRUSTS: &str = "trusts";

/// The roles a trust may delegate: those every token of the local cloud carries.
const ROLES: [&str; 3] = ["admin", "member", "reader"];

/// A stored trust.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Trust {
    pub id: String,
    pub trustor_user_id: String,
    pub trustee_user_id: String,
    pub project_id: String,
    pub impersonation: bool,
    pub roles: Vec<String>,
    pub expires_at: Option<u64>,
}

impl Trust {
    /// The block of a trust-scoped token's body.
    pub(crate) fn token_block(&self) -> Value {
        json!({
            "id": self.id,
            "impersonation": self.impersonation,
            "trustee_user": {"id": self.trustee_user_id},
            "trustor_user": {"id": self.trustor_user_id},
        })
    }

    /// Its roles as a token lists them.
    pub(crate) fn role_refs(&self) -> Value {
        Value::Array(
            self.roles
                .iter()
                .map(|r| json!({"id": r, "name": r}))
                .collect(),
        )
    }
}

pub(super) fn protected() -> Router<std::sync::Arc<Cloud>> {
    Router::new()
        .route(
            "/identity/v3/OS-TRUST/trusts",
            get(list_trusts).post(create_trust),
        )
        .route(
            "/identity/v3/OS-TRUST/trusts/{id}",
            get(get_trust).delete(delete_trust),
        )
        .route("/identity/v3/roles", get(list_roles))
        .route("/identity/v3/roles/{id}", get(get_role))
}

/// The roles (id = name), for clients that look a trust's roles up by name.
fn role_view(cloud: &Cloud, name: &str) -> Value {
    json!({
        "id": name, "name": name, "domain_id": null, "description": null, "options": {},
        "links": {"self": format!("{}/identity/v3/roles/{name}", cloud.base_url)},
    })
}

async fn list_roles(
    State(cloud): Ctx,
    Query(q): Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    let views: Vec<Value> = ROLES
        .iter()
        .filter(|r| q.get("name").is_none_or(|n| n == *r))
        .map(|r| role_view(&cloud, r))
        .collect();
    reply(
        StatusCode::OK,
        json!({"roles": views, "links": {"next": null, "previous": null}}),
    )
}

async fn get_role(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let r = ROLES.iter().find(|r| **r == id).ok_or_else(|| {
        ApiError::not_found("RoleNotFound", format!("Could not find role: {id}."))
    })?;
    Ok(reply(StatusCode::OK, json!({"role": role_view(&cloud, r)})))
}

fn view(cloud: &Cloud, t: &Trust) -> Value {
    json!({
        "id": t.id,
        "trustor_user_id": t.trustor_user_id,
        "trustee_user_id": t.trustee_user_id,
        "project_id": t.project_id,
        "impersonation": t.impersonation,
        "expires_at": t.expires_at.map(fmt_keystone_time),
        "remaining_uses": null,
        "redelegation_count": 0,
        "roles": t.role_refs(),
        "roles_links": {"self": null, "previous": null, "next": null},
        "links": {"self": format!("{}/identity/v3/OS-TRUST/trusts/{}", cloud.base_url, t.id)},
    })
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("TrustNotFound", format!("Could not find trust: {id}."))
}

/// The trust `id`, when it exists and has not expired.
pub(crate) fn live(cloud: &Cloud, id: &str) -> Option<Trust> {
    cloud
        .store
        .read(|v| v.get::<Trust>(TRUSTS, id))
        .filter(|t| t.expires_at.is_none_or(|e| e > now()))
}

#[derive(Deserialize)]
struct CreateBody {
    trust: CreateTrust,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTrust {
    trustor_user_id: String,
    trustee_user_id: String,
    #[serde(default)]
    project_id: Option<String>,
    impersonation: bool,
    #[serde(default)]
    roles: Vec<Value>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    remaining_uses: Option<Value>,
    #[serde(default)]
    allow_redelegation: Option<bool>,
}

async fn create_trust(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: CreateBody = parse_body(&body)?;
    let req = req.trust;
    if req.trustor_user_id != caller.user_id {
        return Err(ApiError::forbidden(
            "The authenticated user should match the trustor.",
        ));
    }
    if caller.trust_id.is_some() {
        return Err(ApiError::forbidden(
            "A trust-scoped token cannot create trusts (redelegation is not supported by the local cloud).",
        ));
    }
    if req.remaining_uses.as_ref().is_some_and(|v| !v.is_null())
        || req.allow_redelegation == Some(true)
    {
        return Err(ApiError::bad_request(
            "remaining_uses and allow_redelegation are not supported by the local cloud",
        ));
    }
    if cloud
        .store
        .read(|v| v.get::<User>(USERS, &req.trustee_user_id))
        .is_none()
    {
        return Err(ApiError::not_found(
            "UserNotFound",
            format!("Could not find user: {}.", req.trustee_user_id),
        ));
    }
    let project_id = req.project_id.unwrap_or_default();
    if project_id.is_empty() || project_id != caller.project_id {
        return Err(ApiError::forbidden(format!(
            "The trustor can only delegate roles on the project its token is scoped to ({}).",
            caller.project_id
        )));
    }
    let mut roles = Vec::new();
    for r in &req.roles {
        let name = r["name"].as_str().or(r["id"].as_str()).unwrap_or_default();
        if !ROLES.contains(&name) {
            return Err(ApiError::not_found(
                "RoleNotFound",
                format!("Could not find role: {name}."),
            ));
        }
        roles.push(name.to_owned());
    }
    if roles.is_empty() {
        return Err(ApiError::bad_request(
            "At least one role should be specified.",
        ));
    }
    let expires_at = match req.expires_at.as_deref() {
        None => None,
        Some(s) => Some(parse_time(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid input for field 'expires_at': {s:?} is not a time like 2026-12-01T00:00:00Z."
            ))
        })?),
    };
    let trust = Trust {
        id: new_hex_id(),
        trustor_user_id: req.trustor_user_id,
        trustee_user_id: req.trustee_user_id,
        project_id,
        impersonation: req.impersonation,
        roles,
        expires_at,
    };
    let stored = trust.clone();
    cloud
        .write(move |tx| {
            tx.put(TRUSTS, &stored.id, &stored)?;
            Ok(())
        })
        .await?;
    Ok(reply(
        StatusCode::CREATED,
        json!({"trust": view(&cloud, &trust)}),
    ))
}

/// Keystone's `2026-12-01T00:00:00Z` or `...00.000000Z`, in seconds.
fn parse_time(s: &str) -> Option<u64> {
    let t: jiff::Timestamp = s.parse().ok()?;
    u64::try_from(t.as_second()).ok()
}

async fn list_trusts(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Query(q): Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    let trusts = cloud.store.read(|v| v.list::<Trust>(TRUSTS));
    let views: Vec<Value> = trusts
        .iter()
        .filter(|t| t.trustor_user_id == caller.user_id || t.trustee_user_id == caller.user_id)
        .filter(|t| {
            q.get("trustor_user_id")
                .is_none_or(|u| *u == t.trustor_user_id)
        })
        .filter(|t| {
            q.get("trustee_user_id")
                .is_none_or(|u| *u == t.trustee_user_id)
        })
        .map(|t| view(&cloud, t))
        .collect();
    reply(
        StatusCode::OK,
        json!({"trusts": views, "links": {"next": null, "previous": null}}),
    )
}

async fn get_trust(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let t = live(&cloud, &id)
        .filter(|t| t.trustor_user_id == caller.user_id || t.trustee_user_id == caller.user_id)
        .ok_or_else(|| not_found(&id))?;
    Ok(reply(StatusCode::OK, json!({"trust": view(&cloud, &t)})))
}

async fn delete_trust(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let t = cloud
        .store
        .read(|v| v.get::<Trust>(TRUSTS, &id))
        .ok_or_else(|| not_found(&id))?;
    if t.trustor_user_id != caller.user_id {
        return Err(ApiError::forbidden("Only the trustor may delete a trust."));
    }
    cloud
        .write(move |tx| {
            tx.delete(TRUSTS, &id);
            revoke_tokens_where(tx, |tok| tok.trust_id.as_deref() == Some(id.as_str()));
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Deletes the trusts `user_id` is a party to, and the tokens issued through them.
pub(super) fn delete_of_user(tx: &mut Tx<'_>, user_id: &str) {
    let gone: Vec<String> = tx
        .list::<Trust>(TRUSTS)
        .into_iter()
        .filter(|t| t.trustor_user_id == user_id || t.trustee_user_id == user_id)
        .map(|t| t.id)
        .collect();
    for id in &gone {
        tx.delete(TRUSTS, id);
    }
    revoke_tokens_where(tx, |t: &Token| {
        t.trust_id.as_ref().is_some_and(|id| gone.contains(id))
    });
}
