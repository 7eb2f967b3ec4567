//! The oVirt dialect: the engine's REST API over the local cloud's servers, in the two shapes
//! clients used.
//!
//! - **v3** (`/api`, the legacy in-tree provider's): `GET /api/vms?search=...` and
//!   `/api/vms/{id}` with HTTP basic authentication, XML, each VM with `status/state` and
//!   `guest_info` (`fqdn`, `ips/ip@address`) as the guest agent reported them.
//! - **v4** (`/ovirt-engine/api`, what ovirt-engine-sdk-python 4 speaks): a bearer token from
//!   the SSO endpoint (`POST /ovirt-engine/sso/oauth/token`, `grant_type=password`,
//!   `scope=ovirt-app-api`; errors as its JSON `{"error_code", "error"}`), or basic
//!   authentication; `GET /ovirt-engine/api` (the entry point), `/vms?search=&max=`,
//!   `/vms/{id}`, `/vms/{id}/reporteddevices` (the guest's NICs and IPs), XML by default and
//!   JSON with `Accept: application/json`; `POST /ovirt-engine/services/sso-logout`.
//!
//! Each Nova server is a VM: its ID, its name, `up` when `ACTIVE` and `down` when `SHUTOFF`,
//! memory and CPUs from the flavor, the fully qualified domain name the guest reports
//! (`ovirt-fqdn` metadata, else the server's host name) and its fixed IPs as the guest's.
//! Users are the local cloud's (Keystone's) users: `admin@internal` is the user `admin` with
//! its password; an SSO token is a Keystone token, so it expires and is revoked as one.
//!
//! Search (`search=`) takes what oVirt's search language takes for VMs, within `name`,
//! `status`, `fqdn`, `id` and `tag` (a server tag), `=`/`!=`, `*` wildcards, terms joined by
//! `and`, an optional `vms:` prefix; anything else is a 400 fault naming it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hypercloud_cloudprovider::xml::escape as esc;
use serde_json::{json, Value};

use super::identity::{self, users, Authenticated};
use super::{iso, service_layers, Cloud, Ctx, Formatted, Params, Service};
use crate::api::compute::{Related, Server, SERVERS};
use crate::model::compute::{ACTIVE, SHUTOFF};
use crate::store::Read;

/// The engine version the entry point reports.
const ENGINE_VERSION: (u32, u32, u32) = (4, 5, 5);
/// Server metadata that sets the FQDN the guest agent reports.
pub(crate) const FQDN_KEY: &str = "ovirt-fqdn";

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let router = Router::new()
        .route("/api", get(entry_v3))
        .route("/api/vms", get(list_v3))
        .route("/api/vms/{id}", get(one_v3))
        .route("/ovirt-engine/sso/oauth/token", post(sso_token))
        .route("/ovirt-engine/services/sso-logout", post(sso_logout))
        .route("/ovirt-engine/api", get(entry_v4))
        .route("/ovirt-engine/api/vms", get(list_v4))
        .route("/ovirt-engine/api/vms/{id}", get(one_v4))
        .route(
            "/ovirt-engine/api/vms/{id}/reporteddevices",
            get(devices_v4),
        );
    service_layers(router, &cloud, Service::Ovirt)
}

// ------------------------------------------------------------------ answers

fn xml(status: StatusCode, body: String) -> Response {
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "application/xml;charset=UTF-8")],
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n{body}"),
    )
        .into_response();
    r.extensions_mut().insert(Formatted);
    r
}

fn json_reply(status: StatusCode, body: Value) -> Response {
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    r.extensions_mut().insert(Formatted);
    r
}

/// The engine's fault: `<fault><reason/><detail/></fault>` (JSON when asked for).
fn fault(status: StatusCode, reason: &str, detail: &str, as_json: bool) -> Response {
    if as_json {
        return json_reply(status, json!({"reason": reason, "detail": detail}));
    }
    xml(
        status,
        format!(
            "<fault><reason>{}</reason><detail>{}</detail></fault>",
            esc(reason),
            esc(detail)
        ),
    )
}

fn unauthorized() -> Response {
    let mut r = fault(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "Authentication is required: a bearer token from /ovirt-engine/sso/oauth/token or HTTP basic authentication",
        false,
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"RESTAPI\""),
    );
    r
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json") && !a.contains("xml"))
}

// ------------------------------------------------------------------ users and tokens

/// Whether the request carries a live SSO (Keystone) token or a user's basic credentials.
fn authenticated(cloud: &Cloud, headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    if let Some(token) = value.strip_prefix("Bearer ") {
        return identity::check_token(cloud, token.trim()).is_some();
    }
    let Some(encoded) = value.strip_prefix("Basic ") else {
        return false;
    };
    use base64::Engine as _;
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
        return false;
    };
    let Ok(text) = String::from_utf8(decoded) else {
        return false;
    };
    text.split_once(':')
        .is_some_and(|(login, password)| users::by_login(cloud, login, password).is_some())
}

/// The SSO token endpoint (form body): a Keystone token of the user, in the user's project.
async fn sso_token(State(cloud): Ctx, body: Bytes) -> Response {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let field = |k: &str| {
        form.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let sso_error = |status: StatusCode, code: &str, message: String| {
        json_reply(status, json!({"error_code": code, "error": message}))
    };
    if field("grant_type") != Some("password") {
        return sso_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!(
                "The grant type {:?} is not supported here: use password",
                field("grant_type").unwrap_or_default()
            ),
        );
    }
    let (Some(login), Some(password)) = (field("username"), field("password")) else {
        return sso_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "The request is missing username or password".into(),
        );
    };
    let Some(user) = users::by_login(&cloud, login, password) else {
        return sso_error(
            StatusCode::BAD_REQUEST,
            "access_denied",
            format!("Cannot authenticate user '{login}': The username or password is incorrect.."),
        );
    };
    let project = user.default_project_id.clone();
    let token = match identity::store_token(
        &cloud,
        Authenticated::by_password(user, project),
        vec!["password".into()],
    )
    .await
    {
        Ok(t) => t,
        Err(e) => return sso_error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", e.message),
    };
    json_reply(
        StatusCode::OK,
        json!({
            "access_token": token.id,
            "scope": field("scope").unwrap_or("ovirt-app-api"),
            "exp": (token.expires_at.saturating_mul(1000)).to_string(),
            "token_type": "bearer",
        }),
    )
}

/// The SDK's logout: the token is left to expire (revocation is Keystone's, not modelled here).
async fn sso_logout() -> Response {
    json_reply(StatusCode::OK, json!({}))
}

// ------------------------------------------------------------------ VMs

/// A server as a VM.
struct Vm {
    id: String,
    name: String,
    description: String,
    status: &'static str,
    fqdn: String,
    ips: Vec<(String, &'static str)>,
    macs: Vec<String>,
    memory: u64,
    cpus: u32,
    created: String,
    tags: Vec<String>,
}

fn vm_of(server: &Server, rel: &Related) -> Vm {
    let ports = rel.ports(&server.meta.id);
    let ips = ports
        .iter()
        .flat_map(|p| p.fixed_ips.iter())
        .map(|f| {
            let version = if f.ip_address.contains(':') {
                "v6"
            } else {
                "v4"
            };
            (f.ip_address.clone(), version)
        })
        .collect();
    let flavor = server.flavor();
    Vm {
        id: server.meta.id.clone(),
        name: server.name.clone(),
        description: server.description.clone().unwrap_or_default(),
        status: match server.status.as_str() {
            ACTIVE => "up",
            SHUTOFF => "down",
            _ => "wait_for_launch",
        },
        fqdn: server
            .metadata
            .get(FQDN_KEY)
            .cloned()
            .unwrap_or_else(|| server.hostname()),
        ips,
        macs: ports.iter().map(|p| p.mac_address.clone()).collect(),
        memory: flavor.map_or(512, |f| u64::from(f.ram_mb)) * 1024 * 1024,
        cpus: flavor.map_or(1, |f| f.vcpus),
        created: server.meta.created_at.clone(),
        tags: server.tags.clone(),
    }
}

/// oVirt's search for VMs; `Err` names what is not understood.
fn search_matches(query: &str, vm: &Vm) -> Result<bool, String> {
    let mut q = query.trim();
    if let Some((prefix, rest)) = q.split_once(':') {
        if prefix.trim().eq_ignore_ascii_case("vms") || prefix.trim().eq_ignore_ascii_case("vm") {
            q = rest.trim();
        } else {
            return Err(format!(
                "the search is for {prefix:?}; here only VMs are searched"
            ));
        }
    }
    if q.is_empty() {
        return Ok(true);
    }
    let lower = q.to_ascii_lowercase();
    let mut terms = Vec::new();
    let mut start = 0;
    for (i, _) in lower.match_indices(" and ") {
        terms.push(&q[start..i]);
        start = i + 5;
    }
    terms.push(&q[start..]);
    for term in terms {
        let (field, negate, value) = if let Some((f, v)) = term.split_once("!=") {
            (f, true, v)
        } else if let Some((f, v)) = term.split_once('=') {
            (f, false, v)
        } else {
            return Err(format!("{:?} is not field=value", term.trim()));
        };
        let value = value.trim().trim_matches('"');
        let field = field.trim().to_ascii_lowercase();
        let hit = match field.as_str() {
            "name" => wildcard(value, &vm.name),
            "status" => wildcard(value, vm.status),
            "fqdn" => wildcard(value, &vm.fqdn),
            "id" => wildcard(value, &vm.id),
            "tag" => vm.tags.iter().any(|t| wildcard(value, t)),
            other => {
                return Err(format!(
                "unknown field {other:?}; the VM search here knows name, status, fqdn, id and tag"
            ))
            }
        };
        if hit == negate {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `*` matches any run of characters; case-insensitive, as oVirt's search.
fn wildcard(pattern: &str, text: &str) -> bool {
    let p = pattern.to_ascii_lowercase();
    let t = text.to_ascii_lowercase();
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == t;
    }
    let mut rest = t.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else if let Some(at) = rest.find(part) {
            rest = &rest[at + part.len()..];
        } else {
            return false;
        }
    }
    true
}

/// The VMs `search` selects, at most `max`, in creation order; `Err` is a 400 fault's detail.
fn select(cloud: &Cloud, params: &Params) -> Result<Vec<Vm>, String> {
    let max = match params.get("max") {
        None => usize::MAX,
        Some(m) => match m.parse::<i64>() {
            Ok(n) if n < 0 => usize::MAX,
            Ok(n) => usize::try_from(n).unwrap_or(usize::MAX),
            Err(_) => return Err(format!("max {m:?} is not a number")),
        },
    };
    let search = params.get("search").unwrap_or_default();
    cloud.store.read(|r| {
        let rel = Related::load(r);
        let mut servers = r.list::<Server>(SERVERS);
        servers.sort_by_key(|s| s.index);
        let mut out = Vec::new();
        for s in &servers {
            let vm = vm_of(s, &rel);
            if search_matches(search, &vm)? {
                out.push(vm);
            }
        }
        out.truncate(max);
        Ok(out)
    })
}

fn find(cloud: &Cloud, id: &str) -> Option<Vm> {
    cloud.store.read(|r| {
        let rel = Related::load(r);
        r.get::<Server>(SERVERS, id).map(|s| vm_of(&s, &rel))
    })
}

// ------------------------------------------------------------------ v3

fn vm_v3(vm: &Vm) -> String {
    let ips: String = vm
        .ips
        .iter()
        .map(|(ip, _)| format!("<ip address=\"{}\"/>", esc(ip)))
        .collect();
    format!(
        "<vm href=\"/api/vms/{id}\" id=\"{id}\"><name>{name}</name><description>{desc}</description>\
         <status><state>{state}</state></status><memory>{mem}</memory>\
         <guest_info><ips>{ips}</ips><fqdn>{fqdn}</fqdn></guest_info></vm>",
        id = esc(&vm.id),
        name = esc(&vm.name),
        desc = esc(&vm.description),
        state = vm.status,
        mem = vm.memory,
        fqdn = esc(&vm.fqdn),
    )
}

async fn entry_v3(State(cloud): Ctx, headers: HeaderMap) -> Response {
    if !authenticated(&cloud, &headers) {
        return unauthorized();
    }
    let (major, minor, build) = ENGINE_VERSION;
    xml(
        StatusCode::OK,
        format!(
            "<api><link href=\"/api/vms\" rel=\"vms\"/><link href=\"/api/vms?search={{query}}\" rel=\"vms/search\"/>\
             <product_info><name>oVirt Engine</name><vendor>ovirt.org</vendor>\
             <version major=\"{major}\" minor=\"{minor}\" build=\"{build}\" revision=\"0\"/></product_info></api>"
        ),
    )
}

async fn list_v3(State(cloud): Ctx, headers: HeaderMap, Query(params): Query<Params>) -> Response {
    if !authenticated(&cloud, &headers) {
        return unauthorized();
    }
    match select(&cloud, &params) {
        Ok(vms) => xml(
            StatusCode::OK,
            format!("<vms>{}</vms>", vms.iter().map(vm_v3).collect::<String>()),
        ),
        Err(detail) => fault(StatusCode::BAD_REQUEST, "Operation Failed", &detail, false),
    }
}

async fn one_v3(State(cloud): Ctx, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !authenticated(&cloud, &headers) {
        return unauthorized();
    }
    match find(&cloud, &id) {
        Some(vm) => xml(StatusCode::OK, vm_v3(&vm)),
        None => fault(
            StatusCode::NOT_FOUND,
            "Resource Not Found",
            "Entity not found: VM",
            false,
        ),
    }
}

// ------------------------------------------------------------------ v4

const V4: &str = "/ovirt-engine/api";

fn vm_v4_xml(vm: &Vm) -> String {
    let created = iso_millis(&vm.created);
    format!(
        "<vm href=\"{V4}/vms/{id}\" id=\"{id}\"><actions/><name>{name}</name><description>{desc}</description>\
         <link href=\"{V4}/vms/{id}/reporteddevices\" rel=\"reporteddevices\"/>\
         <cpu><architecture>x86_64</architecture><topology><cores>1</cores><sockets>{cpus}</sockets><threads>1</threads></topology></cpu>\
         <creation_time>{created}</creation_time><memory>{mem}</memory><type>server</type>\
         <fqdn>{fqdn}</fqdn><status>{status}</status><stateless>false</stateless></vm>",
        id = esc(&vm.id),
        name = esc(&vm.name),
        desc = esc(&vm.description),
        cpus = vm.cpus,
        mem = vm.memory,
        fqdn = esc(&vm.fqdn),
        status = vm.status,
    )
}

fn vm_v4_json(vm: &Vm) -> Value {
    json!({
        "href": format!("{V4}/vms/{}", vm.id), "id": vm.id, "name": vm.name,
        "description": vm.description, "status": vm.status, "fqdn": vm.fqdn,
        "memory": vm.memory.to_string(), "type": "server", "stateless": "false",
        "creation_time": crate::time::epoch_millis(&vm.created),
        "cpu": {"architecture": "x86_64", "topology": {"cores": "1", "sockets": vm.cpus.to_string(), "threads": "1"}},
        "link": [{"href": format!("{V4}/vms/{}/reporteddevices", vm.id), "rel": "reporteddevices"}],
    })
}

/// `2026-11-28T12:00:00Z` → `2026-11-28T12:00:00.000Z` (the engine's dateTime with millis).
fn iso_millis(stored: &str) -> String {
    match stored.strip_suffix('Z') {
        Some(base) if !base.contains('.') => format!("{base}.000Z"),
        _ => stored.to_owned(),
    }
}

async fn entry_v4(State(cloud): Ctx, headers: HeaderMap) -> Response {
    if !authenticated(&cloud, &headers) {
        return unauthorized();
    }
    let (major, minor, build) = ENGINE_VERSION;
    let full = format!("{major}.{minor}.{build}");
    if wants_json(&headers) {
        return json_reply(
            StatusCode::OK,
            json!({"link": [{"href": format!("{V4}/vms"), "rel": "vms"}],
                   "product_info": {"name": "oVirt Engine", "vendor": "ovirt.org",
                     "version": {"build": build.to_string(), "full_version": full, "major": major.to_string(), "minor": minor.to_string(), "revision": "0"}},
                   "time": iso(crate::api::now())}),
        );
    }
    xml(
        StatusCode::OK,
        format!(
            "<api><link href=\"{V4}/vms\" rel=\"vms\"/><link href=\"{V4}/vms?search={{query}}\" rel=\"vms/search\"/>\
             <product_info><name>oVirt Engine</name><vendor>ovirt.org</vendor>\
             <version><build>{build}</build><full_version>{full}</full_version><major>{major}</major><minor>{minor}</minor><revision>0</revision></version>\
             </product_info><time>{}</time></api>",
            iso_millis(&iso(crate::api::now()))
        ),
    )
}

async fn list_v4(State(cloud): Ctx, headers: HeaderMap, Query(params): Query<Params>) -> Response {
    if !authenticated(&cloud, &headers) {
        return unauthorized();
    }
    let json = wants_json(&headers);
    match select(&cloud, &params) {
        Ok(vms) if json => json_reply(
            StatusCode::OK,
            json!({"vm": vms.iter().map(vm_v4_json).collect::<Vec<_>>()}),
        ),
        Ok(vms) => xml(
            StatusCode::OK,
            format!(
                "<vms>{}</vms>",
                vms.iter().map(vm_v4_xml).collect::<String>()
            ),
        ),
        Err(detail) => fault(StatusCode::BAD_REQUEST, "Operation Failed", &detail, json),
    }
}

async fn one_v4(State(cloud): Ctx, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !authenticated(&cloud, &headers) {
        return unauthorized();
    }
    let json = wants_json(&headers);
    match find(&cloud, &id) {
        Some(vm) if json => json_reply(StatusCode::OK, vm_v4_json(&vm)),
        Some(vm) => xml(StatusCode::OK, vm_v4_xml(&vm)),
        None => fault(
            StatusCode::NOT_FOUND,
            "Resource Not Found",
            "Entity not found: VM",
            json,
        ),
    }
}

async fn devices_v4(State(cloud): Ctx, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !authenticated(&cloud, &headers) {
        return unauthorized();
    }
    let json = wants_json(&headers);
    let Some(vm) = find(&cloud, &id) else {
        return fault(
            StatusCode::NOT_FOUND,
            "Resource Not Found",
            "Entity not found: VM",
            json,
        );
    };
    // One reported NIC with every address, as a guest with one interface reports them.
    let dev_id = format!("{}-eth0", vm.id);
    if json {
        let ips: Vec<Value> = vm
            .ips
            .iter()
            .map(|(ip, v)| json!({"address": ip, "version": v}))
            .collect();
        return json_reply(
            StatusCode::OK,
            json!({"reported_device": [{"id": dev_id, "name": "eth0", "type": "network",
                "description": "guest reported data", "ips": {"ip": ips},
                "mac": {"address": vm.macs.first().cloned().unwrap_or_default()},
                "vm": {"href": format!("{V4}/vms/{}", vm.id), "id": vm.id}}]}),
        );
    }
    let ips: String = vm
        .ips
        .iter()
        .map(|(ip, v)| {
            format!(
                "<ip><address>{}</address><version>{v}</version></ip>",
                esc(ip)
            )
        })
        .collect();
    xml(
        StatusCode::OK,
        format!(
            "<reported_devices><reported_device href=\"{V4}/vms/{vid}/reporteddevices/{did}\" id=\"{did}\">\
             <description>guest reported data</description><name>eth0</name><ips>{ips}</ips>\
             <mac><address>{mac}</address></mac><type>network</type>\
             <vm href=\"{V4}/vms/{vid}\" id=\"{vid}\"/></reported_device></reported_devices>",
            vid = esc(&vm.id),
            did = esc(&dev_id),
            mac = esc(vm.macs.first().map_or("", String::as_str)),
        ),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vm(name: &str, status: &'static str, tags: &[&str]) -> Vm {
        Vm {
            id: "1111-2222".into(),
            name: name.into(),
            description: String::new(),
            status,
            fqdn: format!("{name}.example.com"),
            ips: vec![],
            macs: vec![],
            memory: 0,
            cpus: 1,
            created: String::new(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn search_as_ovirt_searches_vms() {
        let k8s = vm("k8s-node-1", "up", &["kubernetes"]);
        for (q, want) in [
            ("", true),
            ("name=k8s-node-1", true),
            ("Vms: name=k8s-*", true),
            ("name=K8S-NODE-*", true),
            ("name=*node*", true),
            ("name=db*", false),
            ("status=up and tag=kubernetes", true),
            ("status=down and tag=kubernetes", false),
            ("name!=k8s-node-1", false),
            ("fqdn=*.example.com", true),
            ("tag=other", false),
        ] {
            assert_eq!(search_matches(q, &k8s).unwrap(), want, "{q}");
        }
        assert!(search_matches("cluster=x", &k8s)
            .unwrap_err()
            .contains("unknown field \"cluster\""));
        assert!(search_matches("Hosts: name=x", &k8s).is_err());
        assert!(search_matches("name", &k8s)
            .unwrap_err()
            .contains("field=value"));
    }

    #[test]
    fn engine_dates() {
        assert_eq!(
            iso_millis("2026-11-28T12:00:00Z"),
            "2026-11-28T12:00:00.000Z"
        );
    }
}
