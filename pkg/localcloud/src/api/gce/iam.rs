//! IAM's service-account keys (`/iam/v1/projects/{project}/serviceAccounts/{email}/keys`, as
//! `https://iam.googleapis.com/v1/...`): `keys.create` makes an RSA 2048 key pair, keeps the
//! public half ([`ServiceAccountKey`]) and answers the key file (`privateKeyData`: base64 of
//! the JSON a client reads, its `token_uri` this cloud's token endpoint); `keys.list` shows
//! the keys of an account, without key material. A service account exists by its keys: any
//! email may be given (`-` as the project takes the project from an
//! `…@<project>.iam.gserviceaccount.com` email). Upstream equivalent: IAM's
//! `projects.serviceAccounts.keys`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

use super::super::{iso, new_hex_id, now, reply, ApiError, Cloud};
use super::oauth2::token_url;
use super::{invalid, Project, Reply};
use crate::model::gce::service_account_key::ServiceAccountKey;
use crate::model::{Meta, Record as _};

/// Where the IAM routes live.
pub(crate) const IAM_PREFIX: &str = "/iam/v1";

/// The project of a path: by name, or (`-`) the one an IAM email names.
fn project_of(cloud: &Cloud, project: &str, email: &str) -> Result<Project, ApiError> {
    let name = if project == "-" {
        email
            .split_once('@')
            .and_then(|(_, domain)| domain.strip_suffix(".iam.gserviceaccount.com"))
            .ok_or_else(|| {
                invalid(format!(
                    "projects/-: the project cannot be told from {email}"
                ))
            })?
    } else {
        project
    };
    cloud.store.read(|r| Project::find(r, name))
}

fn check_email(email: &str) -> Result<(), ApiError> {
    let ok = email.len() <= 254
        && email.split_once('@').is_some_and(|(user, domain)| {
            !user.is_empty()
                && !domain.is_empty()
                && email
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "@.-_+".contains(c))
        });
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "Invalid service account email: {}",
            email.chars().take(100).collect::<String>()
        )))
    }
}

fn key_view(k: &ServiceAccountKey) -> Value {
    json!({
        "name": format!("projects/{}/serviceAccounts/{}/keys/{}", k.project_name, k.email, k.meta.id),
        "validAfterTime": k.meta.created_at,
        "validBeforeTime": "9999-12-31T23:59:59Z",
        "keyAlgorithm": "KEY_ALG_RSA_2048",
        "keyOrigin": "GOOGLE_PROVIDED",
        "keyType": "USER_MANAGED",
    })
}

/// The key file a client reads (`gcloud iam service-accounts keys create` writes it).
pub(crate) fn key_file(cloud: &Cloud, k: &ServiceAccountKey, private_key_pem: &str) -> Value {
    json!({
        "type": "service_account",
        "project_id": k.project_name,
        "private_key_id": k.meta.id,
        "private_key": private_key_pem,
        "client_email": k.email,
        "client_id": crate::model::gce::numeric_id(&k.email).to_string(),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_url(cloud),
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
    })
}

/// `keys.create`.
async fn create(
    State(cloud): State<Arc<Cloud>>,
    Path(p): Path<BTreeMap<String, String>>,
    body: Bytes,
) -> Reply {
    let (project, email) = (
        p.get("project").map_or("", String::as_str),
        p.get("email").map_or("", String::as_str),
    );
    check_email(email)?;
    let project = project_of(&cloud, project, email)?;
    if !body.is_empty() {
        let b: Value =
            serde_json::from_slice(&body).map_err(|_| invalid("Invalid JSON payload received."))?;
        match b["privateKeyType"].as_str() {
            None | Some("TYPE_GOOGLE_CREDENTIALS_FILE" | "TYPE_UNSPECIFIED") => {}
            Some(_) => {
                return Err(invalid(
                    "Only privateKeyType TYPE_GOOGLE_CREDENTIALS_FILE is supported.",
                ))
            }
        }
        match b["keyAlgorithm"].as_str() {
            None | Some("KEY_ALG_RSA_2048" | "KEY_ALG_UNSPECIFIED") => {}
            Some(_) => return Err(invalid("Only keyAlgorithm KEY_ALG_RSA_2048 is supported.")),
        }
    }
    // Prime search is CPU work: off the async threads.
    let pair = tokio::task::spawn_blocking(super::rsa_key::generate)
        .await
        .map_err(|e| ApiError::internal(format!("key generation failed: {e}")))?
        .map_err(ApiError::internal)?;
    let mut meta = Meta::new(project.id.clone());
    // Google's key IDs are 40 hex digits.
    meta.id = format!("{}{}", new_hex_id(), &new_hex_id()[..8]);
    let key = ServiceAccountKey {
        meta,
        email: email.to_owned(),
        project_name: project.name.clone(),
        public_key: STANDARD.encode(&pair.public_key),
    };
    let stored = key.clone();
    cloud
        .write(move |tx| {
            stored.put(tx)?;
            Ok(())
        })
        .await?;
    tracing::info!(email = %key.email, key = %key.meta.id, at = %iso(now()), "gce service account key created");
    let file = key_file(&cloud, &key, &pair.pem());
    let mut view = key_view(&key);
    view["privateKeyType"] = json!("TYPE_GOOGLE_CREDENTIALS_FILE");
    view["privateKeyData"] = json!(STANDARD.encode(file.to_string()));
    Ok(reply(StatusCode::OK, view))
}

/// `keys.list`.
async fn list(State(cloud): State<Arc<Cloud>>, Path(p): Path<BTreeMap<String, String>>) -> Reply {
    let (project, email) = (
        p.get("project").map_or("", String::as_str),
        p.get("email").map_or("", String::as_str),
    );
    let project = project_of(&cloud, project, email)?;
    let keys: Vec<Value> = cloud.store.read(|r| {
        crate::store::Read::list::<ServiceAccountKey>(r, ServiceAccountKey::TABLE)
            .into_iter()
            .filter(|k| k.email == email && k.meta.project_id == project.id)
            .map(|k| key_view(&k))
            .collect()
    });
    Ok(reply(StatusCode::OK, json!({ "keys": keys })))
}

pub(crate) fn routes() -> axum::Router<Arc<Cloud>> {
    axum::Router::new().route(
        &format!("{IAM_PREFIX}/projects/{{project}}/serviceAccounts/{{email}}/keys"),
        axum::routing::get(list).post(create),
    )
}
