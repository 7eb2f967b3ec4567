//! Compute Engine v1 (the GCE dialect) under `/compute/v1/projects/{project}`, on the same
//! listener, state and records as the OpenStack services (see [`crate::model::gce`] for how
//! GCE resources map onto them). Projects are the Keystone projects, by name; zones are the
//! availability zones, the one region is the cloud's region. Mutations answer with an
//! Operation that is already `DONE` (the store commits before the answer), kept so that
//! `operations.get`/`wait` work. Errors use GCE's body (`{"error": {"code", "message",
//! "errors": [{"message", "domain", "reason"}]}}`); lists take `filter`, `maxResults`,
//! `pageToken` and `orderBy`. Requests are not authenticated (Google's clients are driven with
//! anonymous credentials). Upstream equivalent: `compute.googleapis.com/compute/v1`.

pub(crate) mod collections;
mod disks;
pub(crate) mod forwarding;
pub(crate) mod instances;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use super::compute::ZONES;
use super::identity::{self, PROJECTS, USERS};
use super::{parse_body, reply, service_layers, ApiError, Cloud, Ctx, Params, Service};
use crate::defaults::FLAVORS;
use crate::model::gce::{self as m, GceObject, PREFIX};
use crate::model::Meta;
use crate::store::{Read, Tx};

/// Project metadata (`commonInstanceMetadata`), by Keystone project ID.
pub(crate) const PROJECT_METADATA: &str = "gce_project_metadata";
/// Operations, by `<scope>/<name>`.
const OPERATIONS: &str = "gce_operations";

/// Path parameters of every route, by name (`project`, `zone`, `name`, ...).
type Params_ = Path<BTreeMap<String, String>>;

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

/// The `name` of an insert's body: required, and checked by [`check_name`].
pub(crate) fn resource_name(b: &Map<String, Value>) -> Result<String, ApiError> {
    let name = b
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| required("resource.name"))?;
    check_name(name)?;
    Ok(name.to_owned())
}

/// Checks a resource name against GCE's rule (RFC 1035 label, up to 63 characters).
pub(crate) fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'"
        )))
    }
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
}

/// The zones, sorted.
pub(crate) fn zones(r: &impl Read) -> Vec<String> {
    let mut zones: Vec<String> = r
        .list::<Value>(ZONES)
        .into_iter()
        .filter_map(|z| z["name"].as_str().map(str::to_owned))
        .collect();
    if zones.is_empty() {
        zones.push(crate::defaults::AVAILABILITY_ZONE.into());
    }
    zones.sort();
    zones
}

pub(crate) fn check_zone(r: &impl Read, project: &Project, zone: &str) -> Result<(), ApiError> {
    if zones(r).iter().any(|z| z == zone) {
        Ok(())
    } else {
        Err(not_found(&format!(
            "projects/{}/zones/{zone}",
            project.name
        )))
    }
}

pub(crate) fn check_region(cloud: &Cloud, project: &Project, region: &str) -> Result<(), ApiError> {
    if region == cloud.config.region {
        Ok(())
    } else {
        Err(not_found(&format!(
            "projects/{}/regions/{region}",
            project.name
        )))
    }
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

// ---------------------------------------------------------------------------------------------
// Lists

/// One step of a `filter`: a field path and how its value must compare.
#[derive(Debug)]
enum Clause {
    /// `field = value`, `field != value` (literal; `*` matches anything).
    Equals(Vec<String>, String, bool),
    /// `field eq re`, `field ne re` (RE2, matched against the whole value).
    Regex(Vec<String>, regex::Regex, bool),
}

fn parse_filter(filter: &str) -> Result<Vec<Clause>, ApiError> {
    let bad = || {
        invalid(format!(
            "Invalid value for field 'filter': '{filter}'. Invalid list filter expression."
        ))
    };
    let f = filter.trim();
    if f.is_empty() {
        return Ok(Vec::new());
    }
    let unquote = |s: &str| s.trim().trim_matches('"').to_owned();
    let path = |s: &str| -> Vec<String> { s.trim().split('.').map(str::to_owned).collect() };
    // Clauses: top-level parenthesised groups (`(a eq x) (b = "y")`), else ` AND `-joined.
    let mut parts: Vec<String> = Vec::new();
    if f.starts_with('(') {
        let mut depth = 0usize;
        let mut current = String::new();
        for c in f.chars() {
            match c {
                '(' if depth == 0 => depth = 1,
                '(' => {
                    depth += 1;
                    current.push(c);
                }
                ')' if depth == 1 => {
                    depth = 0;
                    parts.push(std::mem::take(&mut current));
                }
                ')' if depth > 1 => {
                    depth -= 1;
                    current.push(c);
                }
                ')' => return Err(bad()),
                c if depth > 0 => current.push(c),
                c if c.is_whitespace() => {}
                _ => {
                    // Only `AND` may stand between groups.
                    current.push(c);
                    if current == "AND" {
                        current.clear();
                    } else if !"AND".starts_with(current.as_str()) {
                        return Err(bad());
                    }
                }
            }
        }
        if depth != 0 || !current.is_empty() {
            return Err(bad());
        }
    } else {
        parts = f.split(" AND ").map(str::to_owned).collect();
    }
    let mut clauses = Vec::new();
    for part in parts {
        // The regular-expression form: `name eq (a|b)`, `name ne x.*`.
        let regex_form = [(" eq ", false), (" ne ", true)]
            .into_iter()
            .find_map(|(op, negate)| part.split_once(op).map(|(a, b)| (a, b, negate)));
        if let Some((field, re, negate)) = regex_form {
            let re = regex::Regex::new(&format!("^(?:{})$", unquote(re))).map_err(|_| bad())?;
            clauses.push(Clause::Regex(path(field), re, negate));
            continue;
        }
        let (field, value, negate) = if let Some((a, b)) = part.split_once("!=") {
            (a, b, true)
        } else if let Some((a, b)) = part.split_once('=') {
            (a, b, false)
        } else {
            return Err(bad());
        };
        if field.trim().is_empty() {
            return Err(bad());
        }
        clauses.push(Clause::Equals(path(field), unquote(value), negate));
    }
    Ok(clauses)
}

fn field_text(view: &Value, path: &[String]) -> Option<String> {
    let mut v = view;
    for key in path {
        v = v.get(key)?;
    }
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => other.to_string(),
    })
}

fn matches(view: &Value, clauses: &[Clause]) -> bool {
    clauses.iter().all(|c| match c {
        Clause::Equals(path, want, negate) => {
            let got = field_text(view, path);
            let eq = want == "*" && got.is_some() || got.as_deref() == Some(want.as_str());
            eq != *negate
        }
        Clause::Regex(path, re, negate) => {
            let got = field_text(view, path).unwrap_or_default();
            re.is_match(&got) != *negate
        }
    })
}

/// Filters, orders and pages `items`; returns the page and the next page token.
pub(crate) fn page(
    mut items: Vec<Value>,
    params: &Params,
) -> Result<(Vec<Value>, Option<String>), ApiError> {
    let clauses = parse_filter(params.get("filter").unwrap_or_default())?;
    items.retain(|v| matches(v, &clauses));
    match params.get("orderBy").map(str::trim) {
        None | Some("") | Some("name") => items.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str())),
        Some("creationTimestamp desc") => items.sort_by(|a, b| {
            b["creationTimestamp"]
                .as_str()
                .cmp(&a["creationTimestamp"].as_str())
                .then_with(|| a["name"].as_str().cmp(&b["name"].as_str()))
        }),
        Some(other) => {
            return Err(invalid(format!(
                "Invalid value for field 'orderBy': '{other}'. Only 'name' and 'creationTimestamp desc' are supported."
            )))
        }
    }
    let max = match params.get("maxResults") {
        None => 500,
        Some(s) => match s.parse::<usize>() {
            Ok(n) if n <= 500 => n,
            _ => {
                return Err(invalid(format!(
                    "Invalid value for field 'maxResults': '{s}'. Must be less than or equal to 500"
                )))
            }
        },
    };
    let max = if max == 0 { 500 } else { max };
    let start = match params.get("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .map_err(|_| invalid(format!("Invalid value for field 'pageToken': '{t}'.")))?,
    };
    let total = items.len();
    let page: Vec<Value> = items.into_iter().skip(start).take(max).collect();
    let next = (start.saturating_add(max) < total).then(|| (start + max).to_string());
    Ok((page, next))
}

/// A list response: `{"kind": "compute#<x>List", "id", "items", "selfLink", "nextPageToken"}`.
pub(crate) fn list_reply(
    kind: &str,
    id: String,
    self_link: String,
    items: Vec<Value>,
    params: &Params,
) -> Result<Response, ApiError> {
    let (page, next) = page(items, params)?;
    let mut body = json!({"kind": kind, "id": id, "items": page, "selfLink": self_link});
    if let Some(next) = next {
        body["nextPageToken"] = json!(next);
    }
    Ok(reply(StatusCode::OK, body))
}

// ---------------------------------------------------------------------------------------------
// Operations

/// What a change did, as its Operation records it.
pub(crate) struct Done {
    /// `zones/z`, `regions/r` or `global`.
    pub scope: String,
    /// `insert`, `delete`, `stop`, `setMetadata`, ...
    pub op_type: String,
    /// The target's path under the project (`zones/z/instances/n`; empty: the project).
    pub target: String,
    pub target_id: u64,
}

/// Every change of the dialect (insert, delete, stop, setMetadata, addInstance, ...) is made
/// here: `change` runs in one write transaction with the request's project and says what it
/// did; its Operation is recorded in the same transaction, so it is already `DONE` when
/// answered, and the answer is that Operation, as Compute Engine answers a change.
pub(crate) async fn change<F>(
    cloud: &Arc<Cloud>,
    project: String,
    change: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(&mut Tx<'_>, &Scope<'_>) -> Result<Done, ApiError> + Send + 'static,
{
    let cloud2 = cloud.clone();
    let (project, op) = cloud
        .write(move |tx| {
            let project = Project::find(tx, &project)?;
            let s = Scope {
                cloud: &cloud2,
                project: &project,
            };
            let done = change(tx, &s)?;
            let op = record_operation(tx, &s, done)?;
            Ok((project, op))
        })
        .await?;
    Ok(operation_reply(
        &Scope {
            cloud,
            project: &project,
        },
        &op,
    ))
}

/// Records a finished operation (the change it describes is in the same transaction).
fn record_operation(tx: &mut Tx<'_>, s: &Scope<'_>, spec: Done) -> Result<GceObject, ApiError> {
    let meta = Meta::new(s.project.id.clone());
    let name = format!(
        "operation-{}-{}",
        m::parse_iso(&meta.created_at).unwrap_or(0) * 1000,
        &meta.id.replace('-', "")[..20]
    );
    let (_, user) = user_of(s.cloud, tx);
    let t = m::timestamp(&meta.created_at);
    let mut fields = Map::new();
    fields.insert("operationType".into(), json!(spec.op_type));
    fields.insert(
        "targetLink".into(),
        json!(s.link(&spec.target).trim_end_matches('/')),
    );
    fields.insert("targetId".into(), json!(spec.target_id.to_string()));
    fields.insert("status".into(), json!("DONE"));
    fields.insert("user".into(), json!(user));
    fields.insert("progress".into(), json!(100));
    fields.insert("insertTime".into(), json!(t));
    fields.insert("startTime".into(), json!(t));
    fields.insert("endTime".into(), json!(t));
    let op = GceObject {
        meta,
        name,
        scope: spec.scope,
        fields,
    };
    tx.put(OPERATIONS, &GceObject::key(&op.scope, &op.name), &op)?;
    Ok(op)
}

/// Shows a stored GCE object: its fields plus `kind`, `id`, `name`, `creationTimestamp`,
/// `selfLink` and its `zone`/`region` link.
pub(crate) fn object_view(s: &Scope<'_>, o: &GceObject, kind: &str, collection: &str) -> Value {
    let mut v = Value::Object(o.fields.clone());
    v["kind"] = json!(kind);
    v["id"] = json!(m::numeric_id(&o.meta.id).to_string());
    v["name"] = json!(o.name);
    v["creationTimestamp"] = json!(m::timestamp(&o.meta.created_at));
    v["selfLink"] = json!(s.link(&format!("{}/{collection}/{}", o.scope, o.name)));
    if let Some(zone) = o.scope.strip_prefix("zones/") {
        v["zone"] = json!(s.link(&format!("zones/{zone}")));
    } else if let Some(region) = o.scope.strip_prefix("regions/") {
        v["region"] = json!(s.link(&format!("regions/{region}")));
    }
    v
}

pub(crate) fn operation_reply(s: &Scope<'_>, op: &GceObject) -> Response {
    reply(
        StatusCode::OK,
        object_view(s, op, "compute#operation", "operations"),
    )
}

/// `scope` of an operations route: `zones/z`, `regions/r` or `global`.
fn op_scope(
    cloud: &Cloud,
    r: &impl Read,
    project: &Project,
    p: &BTreeMap<String, String>,
) -> Result<String, ApiError> {
    if let Some(zone) = p.get("zone") {
        check_zone(r, project, zone)?;
        Ok(format!("zones/{zone}"))
    } else if let Some(region) = p.get("region") {
        check_region(cloud, project, region)?;
        Ok(format!("regions/{region}"))
    } else {
        Ok("global".into())
    }
}

async fn get_operation(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let scope = op_scope(&cloud, r, &project, &p)?;
        let name = param(&p, "name");
        let op = r
            .get::<GceObject>(OPERATIONS, &GceObject::key(&scope, name))
            .filter(|o| o.meta.project_id == project.id)
            .ok_or_else(|| {
                not_found(&format!(
                    "projects/{}/{scope}/operations/{name}",
                    project.name
                ))
            })?;
        Ok(operation_reply(
            &Scope {
                cloud: &cloud,
                project: &project,
            },
            &op,
        ))
    })
}

async fn delete_operation(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    let cloud2 = cloud.clone();
    cloud
        .write(move |tx| {
            let project = Project::find(tx, param(&p, "project"))?;
            let scope = op_scope(&cloud2, tx, &project, &p)?;
            let name = param(&p, "name");
            let key = GceObject::key(&scope, name);
            tx.get::<GceObject>(OPERATIONS, &key)
                .filter(|o| o.meta.project_id == project.id)
                .ok_or_else(|| {
                    not_found(&format!(
                        "projects/{}/{scope}/operations/{name}",
                        project.name
                    ))
                })?;
            tx.delete(OPERATIONS, &key);
            Ok(())
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_operations(
    State(cloud): Ctx,
    Path(p): Params_,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let scope = op_scope(&cloud, r, &project, &p)?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        let items = r
            .list::<GceObject>(OPERATIONS)
            .into_iter()
            .filter(|o| o.meta.project_id == project.id && o.scope == scope)
            .map(|o| object_view(&s, &o, "compute#operation", "operations"))
            .collect();
        list_reply(
            "compute#operationList",
            format!("projects/{}/{scope}/operations", project.name),
            s.link(&format!("{scope}/operations")),
            items,
            &params,
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Projects, zones, regions, machine types, networks

/// The project's `commonInstanceMetadata` items (also what each instance's metadata server
/// shows under `project/attributes/`).
pub(crate) fn common_metadata(r: &impl Read, project_id: &str) -> BTreeMap<String, String> {
    r.get::<BTreeMap<String, String>>(PROJECT_METADATA, project_id)
        .unwrap_or_default()
}

async fn get_project(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let s = Scope { cloud: &cloud, project: &project };
        Ok(reply(
            StatusCode::OK,
            json!({
                "kind": "compute#project", "id": project.numeric_id().to_string(), "name": project.name,
                "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"),
                "commonInstanceMetadata": m::metadata_view(&common_metadata(r, &project.id)),
                "quotas": [], "selfLink": s.link("").trim_end_matches('/'),
                "defaultServiceAccount": format!("{}-compute@developer.gserviceaccount.com", project.numeric_id()),
                "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS", "defaultNetworkTier": "PREMIUM",
            }),
        ))
    })
}

/// The JSON object a request body (or one of its fields, `field`) must be: anything else
/// (`null`, a number, a string, a list) is GCE's 400 before anything changes.
pub(crate) fn object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, ApiError> {
    v.as_object().ok_or_else(|| {
        invalid(format!(
            "Invalid value for field '{field}': {}. Must be an object.",
            json_kind(v)
        ))
    })
}

/// Refuses members of `o` that are not in `allowed`, as GCE's JSON parser does.
pub(crate) fn known_fields(
    o: &Map<String, Value>,
    field: &str,
    allowed: &[&str],
) -> Result<(), ApiError> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(invalid(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\" at '{field}': Cannot find field."
        ))),
        None => Ok(()),
    }
}

/// What a JSON value is, for error messages (never the value itself, which may be huge).
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The optional string `key` of `o` (`field` names it in errors): absent and `null` are `None`,
/// another type is a 400.
pub(crate) fn opt_str<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'a str>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(invalid(format!(
            "Invalid value for field '{field}': {}. Must be a string.",
            json_kind(other)
        ))),
    }
}

/// The fingerprint a `set*` call supplies must be the current one: Compute Engine requires it
/// (optimistic locking) and answers 412 `conditionNotMet` when it is missing or stale.
pub(crate) fn check_fingerprint(
    supplied: Option<&str>,
    current: &str,
    what: &str,
) -> Result<(), ApiError> {
    match supplied {
        Some(fp) if fp == current => Ok(()),
        Some(_) => Err(stale_fingerprint(what)),
        None => Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "conditionNotMet",
            format!("Required field '{what}.fingerprint' not specified: the current {what} fingerprint must be supplied."),
        )),
    }
}

/// The most metadata (keys and values together) an instance or project holds.
const MAX_METADATA_BYTES: usize = 512 * 1024;

/// Parses GCE's Metadata (`{"items": [{"key", "value"}], "fingerprint", "kind"}`) at `field`
/// of a body: its items and the fingerprint supplied.
pub(crate) fn parse_metadata(
    v: &Value,
    field: &str,
) -> Result<(BTreeMap<String, String>, Option<String>), ApiError> {
    let o = object(v, field)?;
    known_fields(o, field, &["items", "fingerprint", "kind"])?;
    let mut items = BTreeMap::new();
    let empty = Vec::new();
    let list = match o.get("items") {
        None | Some(Value::Null) => &empty,
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(invalid(format!(
                "Invalid value for field '{field}.items': {}. Must be a list.",
                json_kind(other)
            )))
        }
    };
    let mut total = 0usize;
    for (i, item) in list.iter().enumerate() {
        let at = format!("{field}.items[{i}]");
        let item = object(item, &at)?;
        known_fields(item, &at, &["key", "value"])?;
        let key = opt_str(item, "key", &format!("{at}.key"))?
            .ok_or_else(|| required(&format!("{at}.key")))?;
        let key_ok = !key.is_empty()
            && key.len() <= 128
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !key_ok {
            return Err(invalid(format!(
                "Invalid value for field '{at}.key': '{key}'. Must be a match of regex '[a-zA-Z0-9-_]{{1,128}}'"
            )));
        }
        let value = opt_str(item, "value", &format!("{at}.value"))?.unwrap_or_default();
        if value.len() > 256 * 1024 {
            return Err(invalid(format!(
                "Invalid value for field '{at}.value': longer than 256 KiB"
            )));
        }
        total = total.saturating_add(key.len() + value.len());
        if total > MAX_METADATA_BYTES {
            return Err(invalid(format!(
                "Invalid value for field '{field}': the total size of all keys and values must be less than 512 KiB"
            )));
        }
        if items.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(invalid(format!("Duplicate metadata key '{key}'")));
        }
    }
    let fingerprint = opt_str(o, "fingerprint", &format!("{field}.fingerprint"))?;
    Ok((items, fingerprint.map(str::to_owned)))
}

async fn set_common_metadata(
    State(cloud): Ctx,
    Path(p): Params_,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: Value = parse_body(&body)?;
    let (items, fp) = parse_metadata(&b, "metadata")?;
    change(&cloud, param(&p, "project").to_owned(), move |tx, s| {
        let current = common_metadata(tx, &s.project.id);
        check_fingerprint(fp.as_deref(), &m::fingerprint(&json!(current)), "metadata")?;
        tx.put(PROJECT_METADATA, &s.project.id, &items)?;
        Ok(Done {
            scope: "global".into(),
            op_type: "compute.projects.setCommonInstanceMetadata".into(),
            target: String::new(),
            target_id: s.project.numeric_id(),
        })
    })
    .await
}

fn zone_view(s: &Scope<'_>, zone: &str) -> Value {
    json!({
        "kind": "compute#zone", "id": m::numeric_id(zone).to_string(), "name": zone, "description": zone,
        "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"), "status": "UP",
        "region": s.link(&format!("regions/{}", s.region())), "selfLink": s.link(&format!("zones/{zone}")),
        "availableCpuPlatforms": ["Intel Broadwell"], "supportsPzs": false,
    })
}

async fn list_zones(
    State(cloud): Ctx,
    Path(p): Params_,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        let items = zones(r).iter().map(|z| zone_view(&s, z)).collect();
        list_reply(
            "compute#zoneList",
            format!("projects/{}/zones", project.name),
            s.link("zones"),
            items,
            &params,
        )
    })
}

async fn get_zone(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let zone = param(&p, "zone");
        check_zone(r, &project, zone)?;
        Ok(reply(
            StatusCode::OK,
            zone_view(
                &Scope {
                    cloud: &cloud,
                    project: &project,
                },
                zone,
            ),
        ))
    })
}

fn region_view(s: &Scope<'_>, r: &impl Read) -> Value {
    let region = s.region();
    let zones: Vec<String> = zones(r)
        .iter()
        .map(|z| s.link(&format!("zones/{z}")))
        .collect();
    json!({
        "kind": "compute#region", "id": m::numeric_id(region).to_string(), "name": region, "description": region,
        "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"), "status": "UP", "zones": zones,
        "quotas": [], "selfLink": s.link(&format!("regions/{region}")), "supportsPzs": false,
    })
}

async fn list_regions(
    State(cloud): Ctx,
    Path(p): Params_,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        let items = vec![region_view(&s, r)];
        list_reply(
            "compute#regionList",
            format!("projects/{}/regions", project.name),
            s.link("regions"),
            items,
            &params,
        )
    })
}

async fn get_region(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        check_region(&cloud, &project, param(&p, "region"))?;
        Ok(reply(
            StatusCode::OK,
            region_view(
                &Scope {
                    cloud: &cloud,
                    project: &project,
                },
                r,
            ),
        ))
    })
}

fn machine_type_view(s: &Scope<'_>, zone: &str, f: &crate::defaults::Flavor) -> Value {
    json!({
        "kind": "compute#machineType", "id": m::numeric_id(f.name).to_string(), "name": f.name,
        "description": format!("{} vCPU, {} MB RAM", f.vcpus, f.ram_mb),
        "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"),
        "guestCpus": f.vcpus, "memoryMb": f.ram_mb, "imageSpaceGb": 0, "maximumPersistentDisks": 16,
        "maximumPersistentDisksSizeGb": "65536", "zone": zone, "isSharedCpu": false,
        "selfLink": s.link(&format!("zones/{zone}/machineTypes/{}", f.name)),
    })
}

async fn list_machine_types(
    State(cloud): Ctx,
    Path(p): Params_,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let zone = param(&p, "zone");
        check_zone(r, &project, zone)?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        let items = FLAVORS
            .iter()
            .map(|f| machine_type_view(&s, zone, f))
            .collect();
        list_reply(
            "compute#machineTypeList",
            format!("projects/{}/zones/{zone}/machineTypes", project.name),
            s.link(&format!("zones/{zone}/machineTypes")),
            items,
            &params,
        )
    })
}

async fn get_machine_type(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let zone = param(&p, "zone");
        check_zone(r, &project, zone)?;
        let name = param(&p, "name");
        let f = FLAVORS.iter().find(|f| f.name == name).ok_or_else(|| {
            not_found(&format!(
                "projects/{}/zones/{zone}/machineTypes/{name}",
                project.name
            ))
        })?;
        Ok(reply(
            StatusCode::OK,
            machine_type_view(
                &Scope {
                    cloud: &cloud,
                    project: &project,
                },
                zone,
                f,
            ),
        ))
    })
}

/// The Neutron network a GCE network reference names; `default` is the cloud's default
/// network unless a network is really called so.
pub(crate) fn find_network(r: &impl Read, reference: &str) -> Option<super::network::Network> {
    let name = m::last_segment(reference);
    let networks = r.list::<super::network::Network>(super::network::NETWORKS);
    let by_name = |n: &str| {
        networks
            .iter()
            .find(|x| x.name == n && !x.external)
            .cloned()
    };
    by_name(name).or_else(|| {
        (name == "default")
            .then(|| by_name(crate::defaults::NETWORK))
            .flatten()
    })
}

fn network_view(s: &Scope<'_>, r: &impl Read, n: &super::network::Network) -> Value {
    let subnets: Vec<String> = r
        .list::<super::network::Subnet>(super::network::SUBNETS)
        .into_iter()
        .filter(|x| x.network_id == n.meta.id)
        .map(|x| s.link(&format!("regions/{}/subnetworks/{}", s.region(), x.name)))
        .collect();
    json!({
        "kind": "compute#network", "id": m::numeric_id(&n.meta.id).to_string(), "name": n.name,
        "description": n.description, "creationTimestamp": m::timestamp(&n.meta.created_at),
        "autoCreateSubnetworks": false, "subnetworks": subnets, "mtu": n.mtu,
        "routingConfig": {"routingMode": "REGIONAL"}, "selfLink": s.link(&format!("global/networks/{}", n.name)),
    })
}

async fn list_networks(
    State(cloud): Ctx,
    Path(p): Params_,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let s = Scope {
            cloud: &cloud,
            project: &project,
        };
        let items = r
            .list::<super::network::Network>(super::network::NETWORKS)
            .iter()
            .filter(|n| !n.external)
            .map(|n| network_view(&s, r, n))
            .collect();
        list_reply(
            "compute#networkList",
            format!("projects/{}/global/networks", project.name),
            s.link("global/networks"),
            items,
            &params,
        )
    })
}

async fn get_network(State(cloud): Ctx, Path(p): Params_) -> Result<Response, ApiError> {
    cloud.store.read(|r| {
        let project = Project::find(r, param(&p, "project"))?;
        let name = param(&p, "name");
        let n = find_network(r, name).ok_or_else(|| {
            not_found(&format!("projects/{}/global/networks/{name}", project.name))
        })?;
        Ok(reply(
            StatusCode::OK,
            network_view(
                &Scope {
                    cloud: &cloud,
                    project: &project,
                },
                r,
                &n,
            ),
        ))
    })
}

// ---------------------------------------------------------------------------------------------
// Router

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let p = format!("{PREFIX}/projects/{{project}}");
    let ops = |scope: &str| {
        Router::new()
            .route(&format!("{p}/{scope}/operations"), get(list_operations))
            .route(
                &format!("{p}/{scope}/operations/{{name}}"),
                get(get_operation).delete(delete_operation),
            )
            .route(
                &format!("{p}/{scope}/operations/{{name}}/wait"),
                post(get_operation),
            )
    };
    let router = Router::new()
        .route(&p, get(get_project))
        .route(
            &format!("{p}/setCommonInstanceMetadata"),
            post(set_common_metadata),
        )
        .route(&format!("{p}/zones"), get(list_zones))
        .route(&format!("{p}/zones/{{zone}}"), get(get_zone))
        .route(&format!("{p}/regions"), get(list_regions))
        .route(&format!("{p}/regions/{{region}}"), get(get_region))
        .route(
            &format!("{p}/zones/{{zone}}/machineTypes"),
            get(list_machine_types),
        )
        .route(
            &format!("{p}/zones/{{zone}}/machineTypes/{{name}}"),
            get(get_machine_type),
        )
        .route(&format!("{p}/global/networks"), get(list_networks))
        .route(&format!("{p}/global/networks/{{name}}"), get(get_network))
        .merge(ops("zones/{zone}"))
        .merge(ops("regions/{region}"))
        .merge(ops("global"))
        .merge(instances::routes(&p))
        .merge(disks::routes(&p))
        .merge(collections::routes(&p));
    service_layers(router, &cloud, Service::Gce)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(q: &[(&str, &str)]) -> Params {
        Params(
            q.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        )
    }

    fn names(items: &[Value]) -> Vec<&str> {
        items.iter().map(|v| v["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn filters_by_literal_and_regex() {
        let items = vec![
            json!({"name": "b", "status": "RUNNING", "labels": {"env": "x"}}),
            json!({"name": "a", "status": "TERMINATED"}),
            json!({"name": "c", "status": "RUNNING"}),
        ];
        let (p, _) = page(items.clone(), &params(&[("filter", "status = RUNNING")])).unwrap();
        assert_eq!(names(&p), ["b", "c"]);
        let (p, _) = page(items.clone(), &params(&[("filter", "name eq (a|c)")])).unwrap();
        assert_eq!(names(&p), ["a", "c"]);
        let (p, _) = page(items.clone(), &params(&[("filter", "name ne a")])).unwrap();
        assert_eq!(names(&p), ["b", "c"]);
        let (p, _) = page(
            items.clone(),
            &params(&[("filter", "(status = \"RUNNING\") (labels.env = \"x\")")]),
        )
        .unwrap();
        assert_eq!(names(&p), ["b"]);
        let (p, _) = page(
            items.clone(),
            &params(&[("filter", "(name eq (a|b)) (status eq RUN.*)")]),
        )
        .unwrap();
        assert_eq!(names(&p), ["b"]);
        assert!(page(items.clone(), &params(&[("filter", "(a = b) OR (c = d)")])).is_err());
        assert!(page(items, &params(&[("filter", "nonsense")])).is_err());
    }

    #[test]
    fn pages_with_tokens() {
        let items: Vec<Value> = (0..5).map(|i| json!({"name": format!("n{i}")})).collect();
        let (p, next) = page(items.clone(), &params(&[("maxResults", "2")])).unwrap();
        assert_eq!((names(&p), next.as_deref()), (vec!["n0", "n1"], Some("2")));
        let (p, next) = page(
            items.clone(),
            &params(&[("maxResults", "2"), ("pageToken", "4")]),
        )
        .unwrap();
        assert_eq!((names(&p), next), (vec!["n4"], None));
        assert!(page(items.clone(), &params(&[("maxResults", "501")])).is_err());
        assert!(page(items, &params(&[("orderBy", "zone")])).is_err());
    }

    #[test]
    fn errors_have_gce_reasons() {
        let body = error_body(&not_found("projects/p/zones/z/instances/i"));
        assert_eq!(body["error"]["code"], 404);
        assert_eq!(body["error"]["errors"][0]["reason"], "notFound");
        assert_eq!(body["error"]["errors"][0]["domain"], "global");
        let body = error_body(&ApiError::internal("boom"));
        assert_eq!(body["error"]["errors"][0]["reason"], "internalError");
    }

    #[test]
    fn names_follow_rfc1035() {
        assert!(check_name("node-1").is_ok());
        for bad in ["", "Node", "1node", "node-", "a_b", &"a".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_items_parse_and_reject_bad_keys() {
        let (items, fp) = parse_metadata(
            &json!({"items": [{"key": "ssh-keys", "value": "u:k"}], "fingerprint": "abc"}),
            "metadata",
        )
        .unwrap();
        assert_eq!(items["ssh-keys"], "u:k");
        assert_eq!(fp.as_deref(), Some("abc"));
        let bad = |v: Value| parse_metadata(&v, "metadata").unwrap_err();
        assert!(bad(json!({"items": [{"key": "a b", "value": ""}]}))
            .message
            .contains("metadata.items[0].key"));
        assert!(bad(json!({"items": [{"key": "a"}, {"key": "a"}]}))
            .message
            .contains("Duplicate"));
        // A body of the wrong shape is refused, not read as "no items".
        for v in [
            json!(null),
            json!(7),
            json!("items"),
            json!([]),
            json!(true),
        ] {
            let e = bad(v.clone());
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{v}");
            assert!(e.message.contains("'metadata'"), "{v}: {}", e.message);
        }
        assert!(bad(json!({"items": "x"}))
            .message
            .contains("metadata.items"));
        assert!(bad(json!({"items": [7]}))
            .message
            .contains("metadata.items[0]"));
        assert!(bad(json!({"items": [{"key": "a", "value": 1}]}))
            .message
            .contains("metadata.items[0].value"));
        assert!(bad(json!({"fingerprint": 5}))
            .message
            .contains("fingerprint"));
        assert!(bad(json!({"itemz": []})).message.contains("itemz"));
        let big = "x".repeat(200 * 1024);
        let items: Vec<Value> = (0..3)
            .map(|i| json!({"key": format!("k{i}"), "value": big}))
            .collect();
        assert!(bad(json!({ "items": items })).message.contains("512 KiB"));
    }

    #[test]
    fn fingerprints_are_required_and_must_be_current() {
        assert!(check_fingerprint(Some("a"), "a", "metadata").is_ok());
        for supplied in [None, Some("b")] {
            let e = check_fingerprint(supplied, "a", "metadata").unwrap_err();
            assert_eq!(e.status, StatusCode::PRECONDITION_FAILED);
            assert_eq!(
                error_body(&e)["error"]["errors"][0]["reason"],
                "conditionNotMet"
            );
        }
    }
}
