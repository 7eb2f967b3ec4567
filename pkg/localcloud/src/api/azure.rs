//! The Azure dialect: Microsoft Entra's token endpoint ([`entra`]) and Azure Resource Manager
//! under `/subscriptions`, on the same listener, state and records as the OpenStack services.
//! Azure's clients send bearer tokens only over TLS, so the dialect is for a cloud served with
//! `--tls-cert-file`. A subscription is a Keystone project (its ID the project's in GUID form),
//! the tenant is the one domain ([`defaults::AZURE_TENANT_ID`]), the one location is the
//! cloud's region in ARM's spelling (`RegionOne` → `regionone`). Every ARM request needs an
//! `api-version` (any value: Microsoft's clients each send their own) and an Entra access
//! token; errors use ARM's body (`{"error": {"code", "message"}}`). What Microsoft's clients
//! send and need is in `docs/azure-clients.md`. Upstream equivalent: `management.azure.com`
//! and `login.microsoftonline.com`.

pub(crate) mod arm;
mod compute;
pub(crate) mod entra;
mod network;
mod resource_groups;
mod resources;

use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{json, Value};

use super::{reply, service_layers, ApiError, Caller, Cloud, Ctx, Params, Service};
use crate::defaults;
use crate::model::azure::Operation;
use crate::model::identity::{Project, PROJECTS};
use crate::model::{Meta, Record};
use crate::store::Read;

/// The body of an error, as Resource Manager writes it (`kind` is ARM's error code).
pub(crate) fn error_body(e: &ApiError) -> Value {
    json!({"error": {"code": e.kind, "message": e.message}})
}

/// `hex` (a Keystone ID, 32 hex digits) in GUID form; other IDs as they are.
pub(crate) fn guid(hex: &str) -> String {
    uuid::Uuid::try_parse(hex).map_or_else(|_| hex.to_owned(), |u| u.hyphenated().to_string())
}

/// A GUID (or a Keystone ID) as Keystone stores it: lower case, no hyphens.
pub(crate) fn unguid(id: &str) -> String {
    id.chars()
        .filter(|c| *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The cloud's one location, as ARM spells locations (lower case, no spaces).
pub(crate) fn location(cloud: &Cloud) -> String {
    normalise_location(&cloud.config.region)
}

/// A location as ARM compares them (`West Europe` is `westeurope`).
pub(crate) fn normalise_location(l: &str) -> String {
    l.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let arm = Router::new()
        .route("/subscriptions", get(list_subscriptions))
        .route("/subscriptions/{subscription}", get(get_subscription))
        .route(
            "/subscriptions/{subscription}/operationresults/{operation}",
            get(operation_result),
        )
        .merge(resource_groups::router())
        .merge(resources::router())
        .route_layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            require_bearer,
        ))
        .route("/metadata/endpoints", get(cloud_metadata))
        // `az cloud register --endpoint-resource-manager https://host/` asks for
        // `https://host//metadata/endpoints`; ARM answers it.
        .route("//metadata/endpoints", get(cloud_metadata))
        .route_layer(axum::middleware::from_fn(require_api_version));
    service_layers(arm.merge(entra::router()), &cloud, Service::Azure)
}

/// Every Resource Manager request names the API version it speaks.
async fn require_api_version(req: Request, next: Next) -> Response {
    let given = req.uri().query().is_some_and(|q| {
        q.split('&').any(|kv| {
            kv.strip_prefix("api-version=")
                .is_some_and(|v| !v.is_empty())
        })
    });
    if !given {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
        .into_response();
    }
    next.run(req).await
}

/// Resource Manager takes Entra access tokens (`Authorization: Bearer`), from this cloud's
/// token endpoint and not expired or revoked.
async fn require_bearer(State(cloud): Ctx, mut req: Request, next: Next) -> Response {
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let refused = |code: &'static str, message: String| {
        let mut r = ApiError::new(StatusCode::UNAUTHORIZED, code, message.clone()).into_response();
        let challenge = format!(
            "Bearer authorization_uri=\"{}/{}\", error=\"invalid_token\", error_description=\"{}\"",
            cloud.base_url,
            defaults::AZURE_TENANT_ID,
            message.replace('"', "'")
        );
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert("www-authenticate", v);
        }
        r
    };
    let Some(header) = header else {
        return refused(
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.".into(),
        );
    };
    let Some(token) = header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
    else {
        return refused(
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is provided in an invalid format."
                .into(),
        );
    };
    match entra::caller(&cloud, token.trim()) {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err((code, message)) => refused(code, message),
    }
}

/// The caller's subscription when `subscription` names it; ARM's 404 otherwise (a
/// subscription of another project is not the caller's to see).
pub(crate) fn subscription_of(
    cloud: &Cloud,
    caller: &Caller,
    subscription: &str,
) -> Result<Project, ApiError> {
    let not_found = || {
        ApiError::not_found(
            "SubscriptionNotFound",
            format!("The subscription '{subscription}' could not be found."),
        )
    };
    if caller.project_id.is_empty() || unguid(subscription) != caller.project_id {
        return Err(not_found());
    }
    cloud
        .store
        .read(|v| v.get::<Project>(PROJECTS, &caller.project_id))
        .ok_or_else(not_found)
}

fn subscription_body(p: &Project) -> Value {
    let id = guid(&p.id);
    json!({
        "id": format!("/subscriptions/{id}"),
        "authorizationSource": "RoleBased",
        "managedByTenants": [],
        "subscriptionId": id,
        "tenantId": defaults::AZURE_TENANT_ID,
        "displayName": p.name,
        "state": "Enabled",
        "subscriptionPolicies": {
            "locationPlacementId": "Public_2014-09-01",
            "quotaId": "PayAsYouGo_2014-09-01",
            "spendingLimit": "Off",
        },
    })
}

async fn list_subscriptions(State(cloud): Ctx, Extension(caller): Extension<Caller>) -> Response {
    let project = cloud
        .store
        .read(|v| v.get::<Project>(PROJECTS, &caller.project_id));
    let value: Vec<Value> = project.iter().map(subscription_body).collect();
    let count = value.len();
    reply(
        StatusCode::OK,
        json!({"value": value, "count": {"type": "Total", "value": count}}),
    )
}

async fn get_subscription(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(subscription): Path<String>,
) -> Result<Response, ApiError> {
    let p = subscription_of(&cloud, &caller, &subscription)?;
    Ok(reply(StatusCode::OK, subscription_body(&p)))
}

/// Cloud metadata (`az cloud register --endpoint-resource-manager` reads it): where to log
/// in, which audience tokens are for.
async fn cloud_metadata(State(cloud): Ctx) -> Response {
    let base = &cloud.base_url;
    reply(
        StatusCode::OK,
        json!({
            "name": "HypercloudLocal",
            "portal": base,
            "resourceManager": format!("{base}/"),
            "authentication": {
                "loginEndpoint": base,
                "audiences": ["https://management.core.windows.net/", "https://management.azure.com/"],
                "tenant": "common",
                "identityProvider": "AAD",
            },
            "media": base,
            "graphAudience": "https://graph.windows.net/",
            "graph": "https://graph.windows.net/",
            "microsoftGraphResourceId": "https://graph.microsoft.com/",
            "suffixes": {},
        }),
    )
}

/// Records a finished operation of the caller's project; its `Location` URL (with
/// `api-version`, followed as given).
pub(crate) fn finished_operation(
    tx: &mut crate::store::Tx<'_>,
    cloud: &Cloud,
    project_id: &str,
    api_version: &str,
) -> Result<String, ApiError> {
    let now = super::now();
    // Operations are polled within seconds; an hour-old one is forgotten.
    for old in Operation::list(tx)
        .into_iter()
        .filter(|o| o.started + 3600 < now)
    {
        Operation::delete(tx, old.id());
    }
    let op = Operation {
        meta: Meta::new(project_id),
        status: "Succeeded".into(),
        error: None,
        started: now,
    };
    op.put(tx)?;
    Ok(format!(
        "{}/subscriptions/{}/operationresults/{}?api-version={api_version}",
        cloud.base_url,
        guid(project_id),
        op.id()
    ))
}

/// A `Location` poll: 200 once the operation has succeeded (it has when it is made), its
/// error when it failed.
async fn operation_result(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((subscription, operation)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    let op = cloud
        .store
        .read(|v| Operation::get(v, &operation))
        .filter(|o| o.meta.project_id == caller.project_id)
        .ok_or_else(|| {
            ApiError::not_found(
                "OperationNotFound",
                format!("The operation '{operation}' could not be found."),
            )
        })?;
    match (op.status.as_str(), op.error) {
        ("Succeeded", _) => Ok(StatusCode::OK.into_response()),
        (_, Some((code, message))) => Ok(reply(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": code, "message": message}}),
        )),
        (status, None) => Ok(reply(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": status, "message": format!("The operation ended {status}.")}}),
        )),
    }
}

/// The `api-version` a request was made with (checked present by [`require_api_version`]).
pub(crate) fn api_version(q: &Params) -> String {
    q.get("api-version").unwrap_or_default().to_owned()
}

/// What list handlers take: `api-version` and ARM's paging.
pub(crate) type ArmQuery = Query<Params>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystone_ids_and_guids_convert_both_ways() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(guid(hex), "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(unguid(&guid(hex)), hex);
        assert_eq!(unguid("01234567-89AB-CDEF-0123-456789ABCDEF"), hex);
        assert_eq!(guid("not-hex"), "not-hex");
        assert_eq!(normalise_location("West Europe"), "westeurope");
    }
}
