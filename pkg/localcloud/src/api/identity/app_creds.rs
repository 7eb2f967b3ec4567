//! Application credentials (`/v3/users/{user_id}/application_credentials`): a user creates,
//! lists, shows and deletes its own; deleting one revokes the tokens issued with it, as in
//! Keystone. Authentication with them is the parent module's.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{fmt_keystone_time, revoke_tokens_where, AppCred, APP_CREDS};
use crate::api::{new_hex_id, parse_body, reply, ApiError, Caller, Cloud, Ctx};
use crate::store::{Read, Tx};

pub(super) fn routes() -> Router<std::sync::Arc<Cloud>> {
    Router::new()
        .route(
            "/identity/v3/users/{user_id}/application_credentials",
            get(list_app_creds).post(create_app_cred),
        )
        .route(
            "/identity/v3/users/{user_id}/application_credentials/{id}",
            get(get_app_cred).delete(delete_app_cred),
        )
}

fn app_cred_view(c: &AppCred, with_secret: bool) -> Value {
    let mut v = json!({
        "id": c.id, "name": c.name, "user_id": c.user_id, "project_id": c.project_id,
        "description": c.description, "expires_at": c.expires_at.map(fmt_keystone_time),
        "unrestricted": c.unrestricted, "roles": [{"id": "admin", "name": "admin"}],
        "access_rules": [],
    });
    if with_secret {
        v["secret"] = json!(c.secret);
    }
    v
}

fn own_user(caller: &Caller, user_id: &str) -> Result<(), ApiError> {
    if caller.user_id == user_id {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "You are not authorized to perform the requested action.",
        ))
    }
}

#[derive(Deserialize)]
struct CreateAppCredBody {
    application_credential: CreateAppCred,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct CreateAppCred {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    unrestricted: Option<bool>,
    #[serde(default)]
    roles: Option<Value>,
    #[serde(default)]
    access_rules: Option<Value>,
}

async fn create_app_cred(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(user_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    own_user(&caller, &user_id)?;
    if caller.project_id.is_empty() {
        return Err(ApiError::forbidden(
            "An application credential is bound to a project: authenticate with a project-scoped token to create one.",
        ));
    }
    let req: CreateAppCredBody = parse_body(&body)?;
    let req = req.application_credential;
    if req.expires_at.is_some() {
        return Err(ApiError::bad_request(
            "expires_at is not supported by the local cloud; application credentials do not expire",
        ));
    }
    let cred = AppCred {
        id: new_hex_id(),
        name: req.name,
        user_id,
        project_id: caller.project_id,
        secret: req
            .secret
            .unwrap_or_else(|| format!("{}{}", new_hex_id(), new_hex_id())),
        description: req.description,
        expires_at: None,
        unrestricted: req.unrestricted.unwrap_or(false),
    };
    let stored = cred.clone();
    cloud
        .write(move |tx| {
            if tx
                .list::<AppCred>(APP_CREDS)
                .iter()
                .any(|c| c.user_id == stored.user_id && c.name == stored.name)
            {
                return Err(ApiError::conflict(
                    "Conflict",
                    format!("Conflict occurred attempting to store application_credential - Duplicate name, {}.", stored.name),
                ));
            }
            tx.put(APP_CREDS, &stored.id, &stored)?;
            Ok(())
        })
        .await?;
    Ok(reply(
        StatusCode::CREATED,
        json!({"application_credential": app_cred_view(&cred, true)}),
    ))
}

async fn list_app_creds(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(user_id): Path<String>,
) -> Result<Response, ApiError> {
    own_user(&caller, &user_id)?;
    let creds = cloud.store.read(|v| v.list::<AppCred>(APP_CREDS));
    let views: Vec<Value> = creds
        .iter()
        .filter(|c| c.user_id == user_id)
        .map(|c| app_cred_view(c, false))
        .collect();
    Ok(reply(
        StatusCode::OK,
        json!({"application_credentials": views}),
    ))
}

fn find_app_cred(cloud: &Cloud, user_id: &str, id: &str) -> Result<AppCred, ApiError> {
    cloud
        .store
        .read(|v| v.get::<AppCred>(APP_CREDS, id))
        .filter(|c| c.user_id == user_id)
        .ok_or_else(|| {
            ApiError::not_found(
                "ApplicationCredentialNotFound",
                format!("Could not find application credential: {id}."),
            )
        })
}

async fn get_app_cred(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((user_id, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    own_user(&caller, &user_id)?;
    let c = find_app_cred(&cloud, &user_id, &id)?;
    Ok(reply(
        StatusCode::OK,
        json!({"application_credential": app_cred_view(&c, false)}),
    ))
}

/// Deletes `user_id`'s application credentials (the user is gone).
pub(super) fn delete_app_creds_of(tx: &mut Tx<'_>, user_id: &str) {
    let gone: Vec<String> = tx
        .list::<AppCred>(APP_CREDS)
        .into_iter()
        .filter(|c| c.user_id == user_id)
        .map(|c| c.id)
        .collect();
    for id in gone {
        tx.delete(APP_CREDS, &id);
    }
}

async fn delete_app_cred(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((user_id, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    own_user(&caller, &user_id)?;
    find_app_cred(&cloud, &user_id, &id)?;
    cloud
        .write(move |tx| {
            tx.delete(APP_CREDS, &id);
            // Tokens issued from a deleted credential stop working at once, as in Keystone.
            revoke_tokens_where(tx, |t| {
                t.application_credential_id.as_deref() == Some(id.as_str())
            });
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
