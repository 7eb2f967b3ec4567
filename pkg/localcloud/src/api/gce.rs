//! Compute Engine v1 (the GCE dialect) under `/compute/v1/projects/{project}`, on the same
//! listener, state and records as the OpenStack services (see [`crate::model::gce`] for how
//! GCE resources map onto them). Projects are the Keystone projects, by name; zones are the
//! availability zones, the one region is the cloud's region. Mutations answer with an
//! Operation that is already `DONE` (the store commits before the answer), kept so that
//! `operations.get`/`wait` work. Errors use GCE's body (`{"error": {"code", "message",
//! "errors": [{"message", "domain", "reason"}]}}`); lists take `filter`, `maxResults`,
//! `pageToken` and `orderBy`. Requests are not authenticated (Google's clients are driven with
//! anonymous credentials) unless the cloud is started with `--gce-require-tokens`; then each
//! needs a token of the OAuth2 endpoint ([`oauth2`], `POST /token`, which takes assertions
//! signed with keys of IAM's `keys.create`, [`iam`]) or a Keystone token. Upstream
//! equivalent: `compute.googleapis.com/compute/v1`, `oauth2.googleapis.com/token` and
//! `iam.googleapis.com/v1/projects/*/serviceAccounts/*/keys`.

mod addresses;
mod attached_disks;
mod backend_services;
mod body;
mod collections;
mod disks;
mod firewalls;
mod forwarding;
mod forwarding_rules;
mod health_checks;
mod http_health_checks;
mod iam;
mod instance_groups;
pub(crate) mod instances;
mod list;
mod networks;
pub(crate) mod oauth2;
mod operations;
mod project;
mod resource;
mod routes;
mod rsa_key;
mod target_pools;
mod zones;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use super::identity::{self, PROJECTS, USERS};
use super::{parse_body, reply, service_layers, ApiError, Cloud, Ctx, Params, Service};
use crate::api::compute::{Server, SERVERS};
use crate::model::gce::{self as m, PREFIX};
use crate::model::Meta;
use crate::store::{Read, Tx, View};

/// Path parameters of every route, by name (`project`, `zone`, `name`, ...).
type Params_ = Path<BTreeMap<String, String>>;
/// The query of a list: `filter`, `maxResults`, `pageToken`, `orderBy`.
type ListQuery = Query<Params>;
/// What a handler answers.
type Reply = Result<Response, ApiError>;

/// GCE's error reasons by status, for errors that carry none of their own.
fn reason_of(e: &ApiError) -> &'static str {
    if e.kind.starts_with(|c: char| c.is_ascii_lowercase()) {
        return e.kind;
    }
    match e.status.as_u16() {
        400 => "badRequest",
        401 => "required",
        403 => "forbidden",
        404 => "notFound",
        405 => "httpMethodNotAllowed",
        409 => "conflict",
        412 => "conditionNotMet",
        429 => "rateLimitExceeded",
        503 => "backendError",
        _ => "internalError",
    }
}

/// The body of an error, as Compute Engine writes it.
pub(crate) fn error_body(e: &ApiError) -> Value {
    json!({"error": {
        "code": e.status.as_u16(),
        "message": e.message,
        "errors": [{"message": e.message, "domain": "global", "reason": reason_of(e)}],
    }})
}

pub(crate) fn not_found(path: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "notFound",
        format!("The resource '{path}' was not found"),
    )
}

pub(crate) fn already_exists(path: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "alreadyExists",
        format!("The resource '{path}' already exists"),
    )
}

pub(crate) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid", message)
}

pub(crate) fn required(field: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "required",
        format!("Required field '{field}' not specified"),
    )
}

/// A fingerprint that does not match: GCE's 412.
pub(crate) fn stale_fingerprint(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::PRECONDITION_FAILED,
        "conditionNotMet",
        format!("Supplied fingerprint does not match current {what} fingerprint."),
    )
}

/// The project of a request: a Keystone project, by name.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    pub name: String,
    /// The Keystone project ID (the `project_id` of its records).
    pub id: String,
}

impl Project {
    pub fn find(r: &impl Read, name: &str) -> Result<Project, ApiError> {
        r.list::<identity::Project>(PROJECTS)
            .into_iter()
            .find(|p| p.name == name)
            .map(|p| Project {
                name: p.name,
                id: p.id,
            })
            .ok_or_else(|| not_found(&format!("projects/{name}")))
    }

    pub fn numeric_id(&self) -> u64 {
        m::numeric_id(&self.id)
    }

    /// The path of `rest` within the project, as messages name it (`projects/p/zones/z`).
    pub fn path(&self, rest: &str) -> String {
        format!("projects/{}/{rest}", self.name)
    }

    /// GCE's 404 for `rest` within the project.
    pub fn not_found(&self, rest: &str) -> ApiError {
        not_found(&self.path(rest))
    }
}

/// What a handler needs to show resources: where the API is and the project.
pub(crate) struct Scope<'a> {
    pub cloud: &'a Cloud,
    pub project: &'a Project,
}

impl Scope<'_> {
    /// The URL of `rest` within the project (`zones/z/instances/i`).
    pub fn link(&self, rest: &str) -> String {
        format!(
            "{}{PREFIX}/projects/{}/{rest}",
            self.cloud.base_url, self.project.name
        )
    }

    /// The region every zone belongs to.
    pub fn region(&self) -> &str {
        &self.cloud.config.region
    }

    /// The list `kind` of `items` at `rest` within the project (`zones/z/disks`): the page
    /// `params` ask for.
    pub fn list_reply(
        &self,
        kind: &str,
        rest: &str,
        items: Vec<Value>,
        params: &Params,
    ) -> Result<Response, ApiError> {
        list::list_reply(
            kind,
            self.project.path(rest),
            self.link(rest),
            items,
            params,
        )
    }
}

/// The answer to a get: the resource's view.
pub(crate) fn ok(view: Value) -> Result<Response, ApiError> {
    Ok(reply(StatusCode::OK, view))
}

/// Reads the store for a request: `f` gets the view and the scope of the project the path
/// names (a 404 when there is none).
pub(crate) fn read<T>(
    cloud: &Cloud,
    p: &BTreeMap<String, String>,
    f: impl FnOnce(&View<'_>, &Scope<'_>) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(p, "project"))?;
        f(
            r,
            &Scope {
                cloud,
                project: &project,
            },
        )
    })
}

/// The list `kind` of the zonal `collection` (`disks`) in the path's zone: `items` makes
/// the views of the zone's resources.
pub(crate) fn list_zonal(
    cloud: &Cloud,
    p: &BTreeMap<String, String>,
    q: &Params,
    (kind, collection): (&str, &str),
    items: impl FnOnce(&View<'_>, &Scope<'_>, &str) -> Vec<Value>,
) -> Reply {
    read_zonal(cloud, p, |r, s, zone| {
        let items = items(r, s, zone);
        s.list_reply(kind, &format!("zones/{zone}/{collection}"), items, q)
    })
}

/// [`read`] for a path under `zones/{zone}`: the zone is checked too, and handed to `f`.
pub(crate) fn read_zonal<T>(
    cloud: &Cloud,
    p: &BTreeMap<String, String>,
    f: impl FnOnce(&View<'_>, &Scope<'_>, &str) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    read(cloud, p, |r, s| {
        let zone = param(p, "zone");
        check_zone(r, s.project, zone)?;
        f(r, s, zone)
    })
}

pub(crate) use super::zones::known_zones as zones;

pub(crate) fn check_zone(r: &impl Read, project: &Project, zone: &str) -> Result<(), ApiError> {
    if zones(r).iter().any(|z| z == zone) {
        Ok(())
    } else {
        Err(project.not_found(&format!("zones/{zone}")))
    }
}

pub(crate) fn check_region(cloud: &Cloud, project: &Project, region: &str) -> Result<(), ApiError> {
    if region == cloud.config.region {
        Ok(())
    } else {
        Err(project.not_found(&format!("regions/{region}")))
    }
}

/// The instance (Nova server) of the project called `name` in `zone`; GCE's 404 when there is
/// none. Here, below the collections, because instances and what attaches to them (disks,
/// routes, target pools) all look instances up.
pub(crate) fn find_instance(
    r: &impl Read,
    project: &Project,
    zone: &str,
    name: &str,
) -> Result<Server, ApiError> {
    let mut found: Vec<Server> = r
        .list::<Server>(SERVERS)
        .into_iter()
        .filter(|s| {
            s.meta.project_id == project.id && s.availability_zone == zone && s.name == name
        })
        .collect();
    found.sort_by_key(|s| s.index);
    found
        .into_iter()
        .next()
        .ok_or_else(|| project.not_found(&format!("zones/{zone}/instances/{name}")))
}

/// The user operations are attributed to: the cloud's configured user.
pub(crate) fn user_of(cloud: &Cloud, r: &impl Read) -> (String, String) {
    let id = r
        .list::<identity::User>(USERS)
        .into_iter()
        .find(|u| u.name == cloud.config.user)
        .map(|u| u.id)
        .unwrap_or_default();
    (id, format!("{}@local-cloud", cloud.config.user))
}

fn param<'a>(p: &'a BTreeMap<String, String>, key: &str) -> &'a str {
    p.get(key).map_or("", String::as_str)
}

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let p = format!("{PREFIX}/projects/{{project}}");
    let router = Router::new()
        .merge(project::routes(&p))
        .merge(zones::routes(&p))
        .merge(networks::routes(&p))
        .merge(operations::routes(&p))
        .merge(instances::routes(&p))
        .merge(disks::routes(&p))
        .merge(collections::routes(&p))
        .merge(iam::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            oauth2::require_token,
        ))
        // Getting a token needs none.
        .route(oauth2::TOKEN_PATH, post(oauth2::token));
    service_layers(router, &cloud, Service::Gce)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_gce_reasons() {
        let body = error_body(&not_found("projects/p/zones/z/instances/i"));
        assert_eq!(body["error"]["code"], 404);
        assert_eq!(body["error"]["errors"][0]["reason"], "notFound");
        assert_eq!(body["error"]["errors"][0]["domain"], "global");
        let body = error_body(&ApiError::internal("boom"));
        assert_eq!(body["error"]["errors"][0]["reason"], "internalError");
    }
}
