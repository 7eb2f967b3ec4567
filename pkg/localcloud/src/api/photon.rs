//! The Photon Controller dialect: the REST API (`/v1`) of VMware's Photon Controller as its Go
//! SDK (`photon-controller-go-sdk`, the revision Kubernetes v1.6-v1.13 vendored) and the
//! in-tree `photon` provider called it, over the local cloud's records.
//!
//! - **Tenants and projects**: the one Keystone domain is the one tenant (`Default`); its
//!   projects are the tenant's projects. `GET /v1/tenants`, `/v1/tenants/{id}`,
//!   `/v1/tenants/{id}/projects`, `/v1/projects/{id}`, each list taking `?name=`.
//! - **VMs**: a project's Nova servers (`GET /v1/projects/{id}/vms`, `/v1/vms/{id}`), `STARTED`
//!   when `ACTIVE`, `STOPPED` when `SHUTOFF`, with their attached disks. Their networks come
//!   as the SDK's `GetNetworks` reads them: `GET /v1/vms/{id}/subnets` (and the older
//!   `/networks`) answers a finished task whose `resourceProperties.networkConnections` hold
//!   each port's MAC and IP (`-` while the VM is not running, as the guest tools reported).
//! - **Persistent disks**: the project's Cinder volumes (`kind: persistent-disk`, the volume
//!   type as the flavor, the size as `capacityGb`, `DETACHED`/`ATTACHED`, `vms`).
//!   `POST /v1/projects/{id}/disks` (a `DiskCreateSpec`), `GET /v1/projects/{id}/disks`,
//!   `GET`/`DELETE /v1/disks/{id}`, `POST /v1/vms/{id}/attach_disk` and `detach_disk`
//!   (`{"diskId"}`).
//! - **Tasks**: every change answers `201` with its task (`QUEUED`), made and recorded in one
//!   transaction; `GET /v1/tasks/{id}` then reads it `COMPLETED`, or `ERROR` with the failed
//!   step's errors when the change could not be made (a disk attached elsewhere, a disk still
//!   attached when deleted), as the SDK's `Tasks.Wait` polls it.
//! - **Lists** are pages: `?pageSize=N` cuts one and `nextPageLink` names the next, which the
//!   SDK follows; without `pageSize` a list is one page.
//! - **Authentication**: off unless `--photon-require-tokens`. `GET /v1/status` and
//!   `/v1/auth` (and the later `/v1/system/status`, `/v1/system/auth`) need no token; `/v1/auth`
//!   says whether tokens are needed and where Lightwave's token endpoint is
//!   (`POST /openidconnect/token[/{tenant}]`, a password grant of a local-cloud user, e.g.
//!   `admin@photon.local`, answering a Keystone token as its access token). With tokens
//!   required, every other `/v1` request needs `Authorization: Bearer`.
//!
//! Errors are Photon's `{"code", "message", "data"}` (`VmNotFound`, `DiskNotFound`,
//! `InvalidEntity`, `MissingAuthToken`, ...).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use super::identity::{self, users, Authenticated};
use super::{parse_body, reply, service_layers, ApiError, Cloud, Ctx, Formatted, Params, Service};
use crate::api::compute::{Related, Server, SERVERS};
use crate::api::volume::{self, Volume, VOLUMES};
use crate::defaults;
use crate::model::compute::{ACTIVE, SHUTOFF};
use crate::model::identity::{Project, PROJECTS};
use crate::model::photon::{StepError, Task};
use crate::model::{Meta, Record};
use crate::store::{Read, Tx};
use crate::time::epoch_millis;

mod disks;

/// The kind of a persistent disk, in specs and views.
const DISK_KIND: &str = "persistent-disk";
/// The longest name Photon takes for an entity.
const MAX_NAME: usize = 63;

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let open = Router::new()
        .route("/v1/status", get(status))
        .route("/v1/system/status", get(status))
        .route("/v1/auth", get(auth_info))
        .route("/v1/system/auth", get(auth_info))
        .route("/openidconnect/token", post(token))
        .route("/openidconnect/token/{tenant}", post(token));
    let guarded = Router::new()
        .route("/v1/tenants", get(tenants))
        .route("/v1/tenants/{id}", get(tenant))
        .route("/v1/tenants/{id}/projects", get(projects))
        .route("/v1/projects/{id}", get(project))
        .route("/v1/projects/{id}/vms", get(project_vms))
        .route(
            "/v1/projects/{id}/disks",
            get(disks::project_disks).post(disks::create_disk),
        )
        .route("/v1/vms/{id}", get(vm))
        .route("/v1/vms/{id}/subnets", get(vm_networks))
        .route("/v1/vms/{id}/networks", get(vm_networks))
        .route("/v1/vms/{id}/attach_disk", post(disks::attach_disk))
        .route("/v1/vms/{id}/detach_disk", post(disks::detach_disk))
        .route(
            "/v1/disks/{id}",
            get(disks::disk).delete(disks::delete_disk),
        )
        .route("/v1/tasks/{id}", get(task))
        .layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            require_token,
        ));
    service_layers(open.merge(guarded), &cloud, Service::Photon)
}

/// Photon's error body: `{"code", "message", "data"}`; the code is the error's kind when it
/// has one, else the one Photon gives the status.
pub(crate) fn error_body(e: &ApiError) -> Value {
    let code = if e.kind.is_empty() {
        match e.status.as_u16() {
            400 => "InvalidEntity",
            401 => "InvalidAuthToken",
            403 => "AccessForbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "InvalidEntityState",
            _ => "InternalError",
        }
    } else {
        e.kind
    };
    json!({"code": code, "message": e.message, "data": {}})
}

fn photon_error(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(status, code, message)
}

// ------------------------------------------------------------------ authentication

/// Middleware of every `/v1` route but status and auth: a live token when tokens are required.
async fn require_token(State(cloud): Ctx, req: Request, next: Next) -> Response {
    if !cloud.config.photon_require_tokens {
        return next.run(req).await;
    }
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match bearer {
        None => photon_error(
            StatusCode::UNAUTHORIZED,
            "MissingAuthToken",
            "Authentication is enabled: a bearer token from Lightwave (POST /openidconnect/token, see GET /v1/auth) is required",
        )
        .into_response(),
        Some(t) if identity::check_token(&cloud, t).is_none() => photon_error(
            StatusCode::UNAUTHORIZED,
            "ExpiredAuthToken",
            "The bearer token is not valid or has expired: get a new one from POST /openidconnect/token",
        )
        .into_response(),
        Some(_) => next.run(req).await,
    }
}

async fn status() -> Response {
    reply(
        StatusCode::OK,
        json!({"status": "READY", "components": [
            {"component": "PHOTON_CONTROLLER", "status": "READY", "message": ""},
        ]}),
    )
}

/// `AuthInfo`: whether tokens are needed and where the token endpoint (this server) listens.
async fn auth_info(State(cloud): Ctx) -> Response {
    if !cloud.config.photon_require_tokens {
        return reply(StatusCode::OK, json!({"enabled": false}));
    }
    let url = host_port(&cloud.base_url);
    reply(
        StatusCode::OK,
        json!({"enabled": true, "endpoint": url.0, "port": url.1}),
    )
}

/// The host and port of `http(s)://host:port`, as `AuthInfo` gives them (443 when absent).
fn host_port(base_url: &str) -> (String, u16) {
    let rest = base_url
        .split_once("://")
        .map_or(base_url, |(_, r)| r)
        .trim_end_matches('/');
    let authority = rest.split('/').next().unwrap_or(rest);
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => (
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port.parse().unwrap_or(443),
        ),
        _ => (authority.to_owned(), 443),
    }
}

/// Lightwave's token endpoint: a password grant (form body) of a local-cloud user.
async fn token(State(cloud): Ctx, body: Bytes) -> Response {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let field = |k: &str| {
        form.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    // Lightwave's OAuth error body, final (not Photon's `ApiError`).
    let oidc_error = |status: StatusCode, error: &str, description: String| {
        let mut r = reply(
            status,
            json!({"error": error, "error_description": description}),
        );
        r.extensions_mut().insert(Formatted);
        r
    };
    if field("grant_type") != Some("password") {
        return oidc_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!(
                "grant_type {:?} is not supported here: use password",
                field("grant_type").unwrap_or_default()
            ),
        );
    }
    let (Some(login), Some(password)) = (field("username"), field("password")) else {
        return oidc_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "username and password are required".into(),
        );
    };
    let Some(user) = users::by_login(&cloud, login, password) else {
        return oidc_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            format!(
                "unauthorized: the password of {login:?} is incorrect or the user does not exist"
            ),
        );
    };
    let project = user.default_project_id.clone();
    let issued = match identity::store_token(
        &cloud,
        Authenticated::by_password(user, project),
        vec!["password".into()],
    )
    .await
    {
        Ok(t) => t,
        Err(e) => return oidc_error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", e.message),
    };
    let expires_in = issued.expires_at.saturating_sub(crate::time::now());
    reply(
        StatusCode::OK,
        json!({
            "access_token": issued.id,
            "expires_in": expires_in,
            "token_type": "Bearer",
            "id_token": issued.id,
            "scope": field("scope").unwrap_or("openid"),
        }),
    )
}

// ------------------------------------------------------------------ lists

/// One page of `items`: `pageSize` cuts it, `pageLink` (the offset `nextPageLink` wrote) says
/// where it starts; the `name` filter applies before paging.
fn page(path: &str, params: &Params, items: Vec<Value>) -> Result<Response, ApiError> {
    let items: Vec<Value> = match params.get("name") {
        Some(n) => items
            .into_iter()
            .filter(|i| i["name"].as_str() == Some(n))
            .collect(),
        None => items,
    };
    let start = match params.get("pageLink") {
        None => 0,
        Some(l) => l.parse::<usize>().map_err(|_| {
            photon_error(
                StatusCode::NOT_FOUND,
                "PageExpired",
                format!("page link {l:?} is not one this server gave"),
            )
        })?,
    };
    let size = match params.get("pageSize") {
        None => usize::MAX,
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=1000).contains(&n) => n,
            _ => {
                return Err(photon_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidPageSize",
                    format!("The page size '{s}' is not between '1' and '1000'"),
                ))
            }
        },
    };
    let total = items.len();
    let end = start.saturating_add(size).min(total);
    let next = (end < total).then(|| {
        let name = params
            .get("name")
            .and_then(|n| serde_urlencoded::to_string([("name", n)]).ok())
            .map(|q| format!("&{q}"))
            .unwrap_or_default();
        format!("{path}?pageSize={size}&pageLink={end}{name}")
    });
    let previous = (start > 0 && size != usize::MAX).then(|| {
        format!(
            "{path}?pageSize={size}&pageLink={}",
            start.saturating_sub(size)
        )
    });
    let items: Vec<Value> = items
        .into_iter()
        .skip(start.min(total))
        .take(end.saturating_sub(start))
        .collect();
    Ok(reply(
        StatusCode::OK,
        json!({"items": items, "nextPageLink": next, "previousPageLink": previous}),
    ))
}

// ------------------------------------------------------------------ tenants and projects

fn tenant_view(cloud: &Cloud) -> Value {
    json!({
        "id": defaults::DOMAIN_ID, "name": defaults::DOMAIN, "kind": "tenant",
        "selfLink": format!("{}/v1/tenants/{}", cloud.base_url, defaults::DOMAIN_ID),
        "tags": [], "securityGroups": [], "projects": [], "resourceTickets": [],
    })
}

fn tenant_of(id: &str) -> Result<(), ApiError> {
    if id == defaults::DOMAIN_ID || id == defaults::DOMAIN {
        Ok(())
    } else {
        Err(photon_error(
            StatusCode::NOT_FOUND,
            "TenantNotFound",
            format!("Tenant {id} not found"),
        ))
    }
}

fn project_view(cloud: &Cloud, p: &Project) -> Value {
    json!({
        "id": p.id, "name": p.name, "kind": "project", "tags": [],
        "selfLink": format!("{}/v1/projects/{}", cloud.base_url, p.id),
        "resourceTicket": {"tenantTicketId": "", "tenantTicketName": "", "limits": [], "usage": []},
        "securityGroups": [],
    })
}

fn find_project(r: &impl Read, id: &str) -> Result<Project, ApiError> {
    r.list::<Project>(PROJECTS)
        .into_iter()
        .find(|p| p.id == id && p.domain_id == defaults::DOMAIN_ID)
        .ok_or_else(|| {
            photon_error(
                StatusCode::NOT_FOUND,
                "ProjectNotFound",
                format!("Project {id} not found"),
            )
        })
}

async fn tenants(State(cloud): Ctx, Query(params): Query<Params>) -> Result<Response, ApiError> {
    page("/v1/tenants", &params, vec![tenant_view(&cloud)])
}

async fn tenant(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    tenant_of(&id)?;
    Ok(reply(StatusCode::OK, tenant_view(&cloud)))
}

async fn projects(
    State(cloud): Ctx,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    tenant_of(&id)?;
    let items = cloud.store.read(|r| {
        r.list::<Project>(PROJECTS)
            .iter()
            .filter(|p| p.domain_id == defaults::DOMAIN_ID)
            .map(|p| project_view(&cloud, p))
            .collect()
    });
    page(&format!("/v1/tenants/{id}/projects"), &params, items)
}

async fn project(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let p = cloud.store.read(|r| find_project(r, &id))?;
    Ok(reply(StatusCode::OK, project_view(&cloud, &p)))
}

// ------------------------------------------------------------------ VMs

/// Photon's VM state of a Nova status.
fn vm_state(nova: &str) -> &'static str {
    match nova {
        ACTIVE => "STARTED",
        SHUTOFF => "STOPPED",
        "BUILD" => "CREATING",
        "SUSPENDED" | "PAUSED" => "SUSPENDED",
        _ => "ERROR",
    }
}

fn disk_state(v: &Volume) -> &'static str {
    match v.status.as_str() {
        volume::CREATING => "CREATING",
        volume::AVAILABLE => "DETACHED",
        volume::IN_USE | volume::ATTACHING | volume::DETACHING | volume::EXTENDING => {
            if v.attachments.is_empty() {
                "DETACHED"
            } else {
                "ATTACHED"
            }
        }
        _ => "ERROR",
    }
}

fn vm_view(cloud: &Cloud, s: &Server, rel: &Related) -> Value {
    let disks: Vec<Value> = rel
        .volumes(&s.meta.id)
        .iter()
        .map(|v| {
            json!({"id": v.meta.id, "name": v.name, "kind": DISK_KIND, "flavor": v.volume_type,
                   "capacityGb": v.size, "bootDisk": false, "state": disk_state(v)})
        })
        .collect();
    json!({
        "id": s.meta.id, "name": s.name, "kind": "vm", "state": vm_state(&s.status),
        "flavor": s.flavor().map_or(s.flavor_id.as_str(), |f| f.name),
        "sourceImageId": s.image_id, "attachedDisks": disks, "attachedIsos": [],
        "tags": s.tags, "metadata": s.metadata, "cost": [],
        "selfLink": format!("{}/v1/vms/{}", cloud.base_url, s.meta.id),
    })
}

fn vm_not_found(id: &str) -> ApiError {
    photon_error(
        StatusCode::NOT_FOUND,
        "VmNotFound",
        format!("VM {id} not found"),
    )
}

fn find_vm(r: &impl Read, id: &str) -> Result<Server, ApiError> {
    r.get::<Server>(SERVERS, id).ok_or_else(|| vm_not_found(id))
}

async fn project_vms(
    State(cloud): Ctx,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let items = cloud.store.read(|r| {
        find_project(r, &id)?;
        let rel = Related::load(r);
        let mut servers: Vec<Server> = r
            .list::<Server>(SERVERS)
            .into_iter()
            .filter(|s| s.meta.project_id == id)
            .collect();
        servers.sort_by_key(|s| s.index);
        Ok::<_, ApiError>(servers.iter().map(|s| vm_view(&cloud, s, &rel)).collect())
    })?;
    page(&format!("/v1/projects/{id}/vms"), &params, items)
}

async fn vm(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let view = cloud.store.read(|r| {
        let s = find_vm(r, &id)?;
        Ok::<_, ApiError>(vm_view(&cloud, &s, &Related::load(r)))
    })?;
    Ok(reply(StatusCode::OK, view))
}

/// `GetNetworks`: a finished task (not stored: its ID is the VM's, with `-networks`) whose
/// resource properties are the VM's connections; `GET /v1/tasks/{vm}-networks` reads it again.
async fn vm_networks(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let task = cloud.store.read(|r| networks_task(&cloud, r, &id))?;
    Ok(reply(StatusCode::OK, task))
}

const NETWORKS_TASK_SUFFIX: &str = "-networks";

fn networks_task(cloud: &Cloud, r: &impl Read, vm_id: &str) -> Result<Value, ApiError> {
    let s = find_vm(r, vm_id)?;
    let rel = Related::load(r);
    let running = s.status == ACTIVE;
    let connections: Vec<Value> = rel
        .ports(&s.meta.id)
        .iter()
        .flat_map(|p| {
            let ips: Vec<&str> = p.fixed_ips.iter().map(|f| f.ip_address.as_str()).collect();
            let ips = if ips.is_empty() { vec!["-"] } else { ips };
            ips.into_iter()
                .map(|ip| {
                    json!({
                        "network": rel.network_name(&p.network_id),
                        "macAddress": p.mac_address,
                        "ipAddress": if running { ip } else { "-" },
                        "netmask": "-",
                        "isConnected": if running { "True" } else { "False" },
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let at = epoch_millis(&s.meta.updated_at);
    Ok(task_view(
        cloud,
        &format!("{}{NETWORKS_TASK_SUFFIX}", s.meta.id),
        "GET_NETWORKS",
        "COMPLETED",
        (&s.meta.id, "vm"),
        at,
        None,
        Some(json!({"networkConnections": connections})),
    ))
}

// ------------------------------------------------------------------ tasks

#[allow(clippy::too_many_arguments)]
fn task_view(
    cloud: &Cloud,
    id: &str,
    operation: &str,
    state: &str,
    (entity_id, entity_kind): (&str, &str),
    at: u64,
    error: Option<&StepError>,
    properties: Option<Value>,
) -> Value {
    let errors: Vec<Value> = error
        .iter()
        .map(|e| json!({"code": e.code, "message": e.message, "data": {}}))
        .collect();
    let mut view = json!({
        "id": id, "kind": "task", "operation": operation, "state": state,
        "queuedTime": at, "startedTime": at, "endTime": at,
        "entity": {"id": entity_id, "kind": entity_kind},
        "selfLink": format!("{}/v1/tasks/{id}", cloud.base_url),
        "steps": [{
            "sequence": 0, "operation": operation, "state": state,
            "queuedTime": at, "startedTime": at, "endTime": at,
            "errors": errors, "warnings": [], "options": {},
        }],
    });
    if let Some(p) = properties {
        view["resourceProperties"] = p;
    }
    view
}

fn stored_task_view(cloud: &Cloud, t: &Task) -> Value {
    task_view(
        cloud,
        &t.meta.id,
        &t.operation,
        &t.state,
        (&t.entity_id, &t.entity_kind),
        epoch_millis(&t.meta.created_at),
        t.error.as_ref(),
        t.resource_properties.clone(),
    )
}

async fn task(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let view = cloud.store.read(|r| {
        if let Some(vm_id) = id.strip_suffix(NETWORKS_TASK_SUFFIX) {
            if r.get::<Server>(SERVERS, vm_id).is_some() {
                return networks_task(&cloud, r, vm_id);
            }
        }
        Task::get(r, &id)
            .map(|t| stored_task_view(&cloud, &t))
            .ok_or_else(|| {
                photon_error(
                    StatusCode::NOT_FOUND,
                    "TaskNotFound",
                    format!("Task {id} not found"),
                )
            })
    })?;
    Ok(reply(StatusCode::OK, view))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_info_names_the_host_and_port_of_the_base_url() {
        assert_eq!(
            host_port("http://127.0.0.1:8774"),
            ("127.0.0.1".to_owned(), 8774)
        );
        assert_eq!(host_port("https://[::1]:9000/"), ("::1".to_owned(), 9000));
        assert_eq!(
            host_port("https://cloud.example"),
            ("cloud.example".to_owned(), 443)
        );
    }

    #[test]
    fn nova_states_read_as_photon_vm_states() {
        assert_eq!(vm_state(ACTIVE), "STARTED");
        assert_eq!(vm_state(SHUTOFF), "STOPPED");
        assert_eq!(vm_state("BUILD"), "CREATING");
        assert_eq!(vm_state("ERROR"), "ERROR");
    }
}
