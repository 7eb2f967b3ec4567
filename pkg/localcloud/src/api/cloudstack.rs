//! The CloudStack dialect: Apache CloudStack's query API (`/client/api`, GET query or POST
//! form, `response=json`) as the legacy in-tree `cloudstack` provider (Kubernetes v1.13,
//! go-cloudstack) and apache/cloudstack-kubernetes-provider call it, over the local cloud's
//! records.
//!
//! - **Authentication** ([`sign`]): `apiKey` + `signature` (HMAC-SHA1 of the sorted,
//!   lower-cased parameters with the user's secret key), `signatureVersion=3` + `expires`
//!   refused once past; or `sessionkey`, a Keystone token (CloudStack's session key, as the
//!   operator CLI uses it). Each user's keys derive from its ID and password digest
//!   (`hypercloud local-cloud cloudstack-keys` prints them; `getUserKeys` answers them).
//! - **Records**: the Nova servers of a project are its virtual machines (`Running`,
//!   `Stopped`), the availability zones its zones, Keystone projects its projects, Neutron's
//!   internal networks its guest networks, flavors its service offerings, Cinder volumes its
//!   data disks, floating IPs of the external network its public IP addresses. A request
//!   without `projectid` reads the caller's default project (`projectid=-1`: every project).
//! - **Load balancing** ([`rules`]): load-balancer and firewall rules of a public IP are kept
//!   as an Octavia load balancer (one per public IP, one listener per rule) that the data
//!   plane serves at the public IP; a listener's `allowed_cidrs` are the firewall rules'
//!   CIDRs covering its port.
//! - **Async jobs**: a change answers `{"jobid", "id"}` and is made, with its job, in one
//!   transaction; `queryAsyncJobResult` reads the job done (`jobstatus` 1, the entity as
//!   `jobresult`) or failed (2, `{errorcode, errortext}`) when the state refused it.
//!   [`crate::ServerConfig::cloudstack_stuck_jobs`] keeps every job pending (status 0).
//! - **Answers** are `{"<command>response": {...}}`; a list is `{"count", "<entity>": [...]}`
//!   or `{}` when empty, `page`/`pagesize` cutting it. Errors have the HTTP status of their
//!   `errorcode`: 401 (credentials), 431 (parameters), 432 (unknown command), 530 (internal),
//!   with `cserrorcode` and `errortext`. Parameters a command does not know are ignored, as
//!   CloudStack ignores them; only JSON answers are made (`response=xml` gets JSON too).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};

use super::{identity, service_layers, ApiError, Cloud, Ctx, Formatted, Service};
use crate::model::cloudstack::AsyncJob;
use crate::model::identity::{Project, User, PROJECTS, USERS};
use crate::model::{Meta, Record};
use crate::store::{Read, Tx};
use crate::time::{iso, now};

mod compute;
mod forwarding;
mod rules;
pub(crate) mod sign;
mod volumes;

/// `cserrorcode`s (CloudStack's `CSExceptionErrorCode`).
const CS_GENERIC: u32 = 9999;
const CS_INVALID_PARAMETER: u32 = 4350;
const CS_RUNTIME: u32 = 4250;
const CS_PERMISSION_DENIED: u32 = 4365;

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let r = Router::new().route("/client/api", get(api).post(api));
    service_layers(r, &cloud, Service::CloudStack)
}

/// The body of an error no command answered (fault injection, a wrong method):
/// `{"errorresponse": {...}}`.
pub(crate) fn error_body(e: &ApiError) -> Value {
    let code = e.status.as_u16();
    json!({"errorresponse": {
        "uuidList": [], "errorcode": code, "cserrorcode": cs_code_of(e.kind, code),
        "errortext": e.message,
    }})
}

fn cs_code_of(kind: &str, code: u16) -> u32 {
    kind.parse().unwrap_or(match code {
        431 => CS_INVALID_PARAMETER,
        530 => CS_RUNTIME,
        _ => CS_GENERIC,
    })
}

/// A CloudStack API error: the HTTP status is `errorcode`.
#[derive(Debug, Clone)]
pub(crate) struct CsError {
    pub code: u16,
    pub cs_code: u32,
    pub text: String,
}

impl CsError {
    fn new(code: u16, cs_code: u32, text: impl Into<String>) -> Self {
        CsError {
            code,
            cs_code,
            text: text.into(),
        }
    }

    fn credentials() -> Self {
        CsError::new(
            401,
            CS_GENERIC,
            "unable to verify user credentials and/or request signature",
        )
    }

    /// A parameter's value is wrong (431, `InvalidParameterValueException`).
    pub(crate) fn invalid(text: impl Into<String>) -> Self {
        CsError::new(431, CS_INVALID_PARAMETER, text)
    }

    /// A change refused by the state of things, inside a job (530).
    pub(crate) fn state(text: impl Into<String>) -> Self {
        CsError::new(530, CS_RUNTIME, text)
    }

    fn denied(text: impl Into<String>) -> Self {
        CsError::new(432, CS_PERMISSION_DENIED, text)
    }
}

/// Store and other internal errors, carried through a transaction and back.
impl From<ApiError> for CsError {
    fn from(e: ApiError) -> Self {
        let status = e.status.as_u16();
        if (400..600).contains(&status) && e.kind.parse::<u32>().is_ok() {
            return CsError::new(status, cs_code_of(e.kind, status), e.message);
        }
        if e.status.is_client_error() {
            CsError::invalid(e.message)
        } else {
            CsError::new(530, CS_RUNTIME, e.message)
        }
    }
}

impl From<CsError> for ApiError {
    fn from(e: CsError) -> Self {
        let kind = match e.cs_code {
            CS_INVALID_PARAMETER => "4350",
            CS_RUNTIME => "4250",
            CS_PERMISSION_DENIED => "4365",
            _ => "9999",
        };
        let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError::new(status, kind, e.text)
    }
}

impl From<crate::Error> for CsError {
    fn from(e: crate::Error) -> Self {
        ApiError::from(e).into()
    }
}

impl From<crate::model::NotFound> for CsError {
    fn from(e: crate::model::NotFound) -> Self {
        CsError::invalid(e.message)
    }
}

pub(crate) type CsResult<T> = Result<T, CsError>;

/// One API request: its command, parameters and caller.
pub(crate) struct Req {
    pub command: String,
    params: Vec<(String, String)>,
    pub user: User,
}

impl Req {
    /// A parameter's value (names are case-insensitive; an empty value is no value).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// A parameter the command cannot do without.
    pub fn required(&self, key: &str) -> CsResult<&str> {
        self.get(key).ok_or_else(|| {
            CsError::new(
                431,
                CS_GENERIC,
                format!(
                    "Unable to execute API command {} due to missing parameter {key}",
                    self.command.to_lowercase()
                ),
            )
        })
    }

    /// A parameter that names no entity of its kind.
    pub fn no_entity(&self, key: &str, value: &str) -> CsError {
        CsError::invalid(format!(
            "Unable to execute API command {} due to invalid value. Invalid parameter {key} value={value} due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class.",
            self.command.to_lowercase()
        ))
    }

    /// A whole-number parameter within `range`.
    pub fn number<T>(&self, key: &str, range: std::ops::RangeInclusive<T>) -> CsResult<Option<T>>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display,
    {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.trim().parse::<T>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(CsError::invalid(format!(
                "Unable to execute API command {} due to invalid value. Invalid parameter {key} value={v}: must be a number from {} to {}",
                self.command.to_lowercase(),
                range.start(),
                range.end()
            ))),
        }
    }

    /// A boolean parameter (`true`/`false`), `default` when absent.
    pub fn flag(&self, key: &str, default: bool) -> CsResult<bool> {
        match self.get(key).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(CsError::invalid(format!(
                "Unable to execute API command {} due to invalid value. Invalid parameter {key} value={v}: must be true or false",
                self.command.to_lowercase()
            ))),
        }
    }

    /// The projects a list covers: `projectid` (`-1`: all), else the caller's default project.
    pub fn projects(&self, r: &impl Read) -> CsResult<Option<String>> {
        match self.get("projectid") {
            Some("-1") => Ok(None),
            Some(id) => find_project(r, id)
                .map(|p| Some(p.id))
                .ok_or_else(|| self.no_entity("projectid", id)),
            None => Ok(Some(self.user.default_project_id.clone())),
        }
    }

    /// The project a new entity goes to: `projectid`, else the caller's default project.
    pub fn project(&self, r: &impl Read) -> CsResult<Project> {
        let id = self
            .get("projectid")
            .unwrap_or(&self.user.default_project_id);
        find_project(r, id).ok_or_else(|| self.no_entity("projectid", id))
    }
}

pub(crate) fn find_project(r: &impl Read, id: &str) -> Option<Project> {
    r.list::<Project>(PROJECTS).into_iter().find(|p| p.id == id)
}

/// Whether a record of `project` is in the projects a list covers.
pub(crate) fn covers(projects: &Option<String>, project: &str) -> bool {
    projects.as_deref().is_none_or(|p| p == project)
}

/// A deterministic UUID for an entity the local cloud names but does not number (zones,
/// offerings, the domain).
pub(crate) fn uuid_of(kind: &str, name: &str) -> String {
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("cloudstack\0{kind}\0{name}").as_bytes(),
    );
    let b = d.as_ref();
    let hex: String = b[..16].iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-5{}-a{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// CloudStack's date format (`2026-11-28T12:00:00+0000`) of a stored ISO time.
pub(crate) fn cs_date(stored: &str) -> String {
    let secs = crate::time::parse_iso(stored).unwrap_or_default();
    iso(secs).trim_end_matches('Z').to_owned() + "+0000"
}

/// The one domain (`ROOT`) and the account of a project's entities.
pub(crate) fn ownership(r: &impl Read, project_id: &str) -> Map<String, Value> {
    let project = find_project(r, project_id);
    let mut m = Map::new();
    m.insert("domainid".into(), json!(uuid_of("domain", "ROOT")));
    m.insert("domain".into(), json!("ROOT"));
    m.insert("projectid".into(), json!(project_id));
    m.insert(
        "project".into(),
        json!(project.map(|p| p.name).unwrap_or_default()),
    );
    m.insert("account".into(), json!(crate::defaults::USER));
    m
}

/// A list answer: `count` and the page of `items` under `entity`; `{}` when empty.
pub(crate) fn list(req: &Req, entity: &str, items: Vec<Value>) -> CsResult<Value> {
    let count = items.len();
    let size = req.number::<usize>("pagesize", 1..=100_000)?;
    let page = req.number::<usize>("page", 1..=usize::MAX)?;
    let items: Vec<Value> = match (page, size) {
        (Some(p), Some(s)) => items
            .into_iter()
            .skip((p - 1).saturating_mul(s))
            .take(s)
            .collect(),
        (None, Some(s)) => items.into_iter().take(s).collect(),
        _ => items,
    };
    if count == 0 {
        return Ok(json!({}));
    }
    let mut out = json!({ "count": count });
    if !items.is_empty() {
        out[entity] = json!(items);
    }
    Ok(out)
}

/// Keeps the items whose `field` contains `keyword` (case-insensitive), when asked.
pub(crate) fn keyword(req: &Req, field: &str, items: &mut Vec<Value>) {
    if let Some(k) = req.get("keyword") {
        let k = k.to_lowercase();
        items.retain(|i| {
            i[field]
                .as_str()
                .is_some_and(|v| v.to_lowercase().contains(&k))
        });
    }
}

/// Keeps the items whose `field` is the parameter `param`'s value, when given.
pub(crate) fn filter(req: &Req, param: &str, field: &str, items: &mut Vec<Value>) {
    if let Some(v) = req.get(param) {
        items.retain(|i| match &i[field] {
            Value::String(s) => s.eq_ignore_ascii_case(v),
            Value::Number(n) => n.to_string() == v,
            _ => false,
        });
    }
}

/// How a job's change ended.
pub(crate) enum Outcome {
    /// Made: the job's result (`{"loadbalancer": {...}}`) and the entity's ID.
    Done(Value, Option<String>),
    /// Refused by the state of things, before anything was written: the job fails with this
    /// error.
    Refused(CsError, Option<String>),
}

/// Makes an async command's change and records its job in one transaction (a change checks
/// the state before it writes, so a refused one has written nothing). Answers `{"jobid"}`,
/// with `id` when the command creates the entity `created`.
pub(crate) async fn job<F>(
    cloud: &Arc<Cloud>,
    req: &Req,
    instance_type: &'static str,
    created: Option<String>,
    change: F,
) -> CsResult<Value>
where
    F: FnOnce(&mut Tx<'_>) -> CsResult<Outcome> + Send + 'static,
{
    let command = req.command.clone();
    let user = req.user.clone();
    let job_id = crate::time::new_id();
    let id = job_id.clone();
    cloud
        .write(move |tx| {
            let (status, code, result, instance) = match change(tx)? {
                Outcome::Done(result, instance) => (1, 0, result, instance),
                Outcome::Refused(e, instance) => {
                    tracing::info!(%command, error = %e.text, "CloudStack job failed");
                    (
                        2,
                        e.code,
                        json!({"errorcode": e.code, "cserrorcode": e.cs_code, "errortext": e.text}),
                        instance,
                    )
                }
            };
            let mut meta = Meta::new(user.default_project_id.clone());
            meta.id = id;
            AsyncJob {
                meta,
                command,
                user_id: user.id,
                status,
                result_code: code,
                result,
                instance_type: Some(instance_type.into()),
                instance_id: instance,
            }
            .put(tx)?;
            Ok(())
        })
        .await?;
    let mut answer = json!({ "jobid": job_id });
    if let Some(id) = created {
        answer["id"] = json!(id);
    }
    Ok(answer)
}

/// `queryAsyncJobResult`: the job's status and result.
fn query_job(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let id = req.required("jobid")?;
    let job = cloud
        .store
        .read(|r| AsyncJob::get(r, id))
        .ok_or_else(|| req.no_entity("jobid", id))?;
    let mut view = json!({
        "jobid": job.meta.id, "accountid": uuid_of("account", &job.user_id),
        "userid": job.user_id, "cmd": job.command, "jobprocstatus": 0,
        "jobinstancetype": job.instance_type, "jobinstanceid": job.instance_id,
        "created": cs_date(&job.meta.created_at),
    });
    if cloud.config.cloudstack_stuck_jobs {
        view["jobstatus"] = json!(0);
        view["jobresultcode"] = json!(0);
        return Ok(view);
    }
    view["jobstatus"] = json!(job.status);
    view["jobresultcode"] = json!(job.result_code);
    view["jobresulttype"] = json!("object");
    view["jobresult"] = job.result;
    view["completed"] = json!(cs_date(&job.meta.updated_at));
    Ok(view)
}

// ------------------------------------------------------------------ requests

/// `/client/api`: the query's and a POST form's parameters, authenticated, dispatched.
async fn api(State(cloud): Ctx, RawQuery(query): RawQuery, body: Bytes) -> Response {
    let mut params: Vec<(String, String)> =
        serde_urlencoded::from_str(query.as_deref().unwrap_or_default()).unwrap_or_default();
    if !body.is_empty() {
        params.extend(
            serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body).unwrap_or_default(),
        );
    }
    let command = params
        .iter()
        .find(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let key = format!("{}response", command.to_lowercase());
    let answer = match authenticate(&cloud, &params) {
        Err(e) => Err(e),
        Ok(user) => {
            let req = Req {
                command,
                params,
                user,
            };
            dispatch(&cloud, &req).await
        }
    };
    let (status, body) = match answer {
        Ok(v) => (StatusCode::OK, json!({ key: v })),
        Err(e) => {
            tracing::debug!(%key, code = e.code, text = %e.text, "CloudStack API error");
            (
                StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                json!({ key: {
                    "uuidList": [], "errorcode": e.code, "cserrorcode": e.cs_code,
                    "errortext": e.text,
                }}),
            )
        }
    };
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    r.extensions_mut().insert(Formatted);
    r
}

fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

/// The user a request is from: its signature by the user's keys, or its session key (a
/// Keystone token).
fn authenticate(cloud: &Cloud, params: &[(String, String)]) -> CsResult<User> {
    let users = cloud.store.read(|r| r.list::<User>(USERS));
    if let Some(session) = param(params, "sessionkey") {
        let caller = identity::check_token(cloud, session).ok_or_else(CsError::credentials)?;
        return users
            .into_iter()
            .find(|u| u.id == caller.user_id)
            .ok_or_else(CsError::credentials);
    }
    let (Some(api_key), Some(signature)) = (param(params, "apikey"), param(params, "signature"))
    else {
        return Err(CsError::credentials());
    };
    let (user, secret) = users
        .into_iter()
        .find_map(|u| {
            let (a, s) = sign::keys(cloud, &u);
            (a == api_key).then_some((u, s))
        })
        .ok_or_else(CsError::credentials)?;
    if param(params, "signatureversion") == Some("3") {
        if let Some(why) = sign::expired(param(params, "expires"), now()) {
            tracing::debug!(user = %user.name, %why, "CloudStack request refused");
            return Err(CsError::credentials());
        }
    }
    if !sign::verify(params, signature, &secret) {
        tracing::debug!(user = %user.name, "CloudStack request signature does not verify");
        return Err(CsError::credentials());
    }
    Ok(user)
}

async fn dispatch(cloud: &Arc<Cloud>, req: &Req) -> CsResult<Value> {
    let read = |f: fn(&Cloud, &Req) -> CsResult<Value>| f(cloud, req);
    match req.command.as_str() {
        "listZones" => read(compute::list_zones),
        "listProjects" => read(compute::list_projects),
        "listVirtualMachines" => read(compute::list_virtual_machines),
        "listNetworks" => read(compute::list_networks),
        "listServiceOfferings" => read(compute::list_service_offerings),
        "listDiskOfferings" => read(compute::list_disk_offerings),
        "listUsers" => read(list_users),
        "getUserKeys" => read(get_user_keys),
        "queryAsyncJobResult" => read(query_job),
        "listPublicIpAddresses" => read(rules::list_public_ip_addresses),
        "listLoadBalancerRules" => read(rules::list_load_balancer_rules),
        "listLoadBalancerRuleInstances" => read(rules::list_load_balancer_rule_instances),
        "listFirewallRules" => read(rules::list_firewall_rules),
        "listVolumes" => read(volumes::list_volumes),
        "associateIpAddress" => rules::associate_ip_address(cloud, req).await,
        "disassociateIpAddress" => rules::disassociate_ip_address(cloud, req).await,
        "createLoadBalancerRule" => rules::create_load_balancer_rule(cloud, req).await,
        "deleteLoadBalancerRule" => rules::delete_load_balancer_rule(cloud, req).await,
        "assignToLoadBalancerRule" => rules::assign(cloud, req, true).await,
        "removeFromLoadBalancerRule" => rules::assign(cloud, req, false).await,
        "createFirewallRule" => rules::create_firewall_rule(cloud, req).await,
        "deleteFirewallRule" => rules::delete_firewall_rule(cloud, req).await,
        "createVolume" => volumes::create_volume(cloud, req).await,
        "attachVolume" => volumes::attach_volume(cloud, req).await,
        "detachVolume" => volumes::detach_volume(cloud, req).await,
        "resizeVolume" => volumes::resize_volume(cloud, req).await,
        "deleteVolume" => volumes::delete_volume(cloud, req).await,
        "" => Err(CsError::invalid(
            "Unable to execute API command due to missing parameter command",
        )),
        _ => Err(CsError::new(
            432,
            CS_GENERIC,
            "The given command does not exist or it is not available for user",
        )),
    }
}

// ------------------------------------------------------------------ users and keys

fn user_view(cloud: &Cloud, u: &User, with_keys: bool) -> Value {
    let mut v = json!({
        "id": u.id, "username": u.name, "account": u.name, "accounttype": 1,
        "accountid": uuid_of("account", &u.id), "roletype": "Admin",
        "domainid": uuid_of("domain", "ROOT"), "domain": "ROOT", "state": "enabled",
        "firstname": u.name, "lastname": u.name, "email": format!("{}@local-cloud", u.name),
    });
    if with_keys {
        v["apikey"] = json!(sign::keys(cloud, u).0);
    }
    v
}

/// Whether `caller` may read `user`'s keys: its own, or any when it is the cloud's admin.
fn may_read_keys(cloud: &Cloud, caller: &User, user: &User) -> bool {
    caller.id == user.id || caller.name == cloud.config.user
}

/// `listUsers` (`id`, `username`): the users, with their API keys where the caller may read
/// them.
fn list_users(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let users = cloud.store.read(|r| r.list::<User>(USERS));
    let mut items: Vec<Value> = users
        .iter()
        .map(|u| user_view(cloud, u, may_read_keys(cloud, &req.user, u)))
        .collect();
    filter(req, "id", "id", &mut items);
    filter(req, "username", "username", &mut items);
    keyword(req, "username", &mut items);
    list(req, "user", items)
}

/// `getUserKeys` (`id`): `{"userkeys": {"apikey", "secretkey"}}`.
fn get_user_keys(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let id = req.required("id")?;
    let user = cloud
        .store
        .read(|r| r.list::<User>(USERS))
        .into_iter()
        .find(|u| u.id == id)
        .ok_or_else(|| req.no_entity("id", id))?;
    if !may_read_keys(cloud, &req.user, &user) {
        return Err(CsError::denied(
            "The caller is not authorized to read the keys of another user",
        ));
    }
    let (apikey, secretkey) = sign::keys(cloud, &user);
    Ok(json!({"userkeys": {"apikey": apikey, "secretkey": secretkey}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_uuids_are_stable_and_shaped_as_uuids() {
        let a = uuid_of("zone", "nova");
        assert_eq!(a, uuid_of("zone", "nova"));
        assert_ne!(a, uuid_of("zone", "nova2"));
        assert!(uuid::Uuid::parse_str(&a).is_ok(), "{a}");
    }

    #[test]
    fn errors_keep_their_codes_through_a_transaction() {
        let e = CsError::invalid("bad");
        let back = CsError::from(ApiError::from(e));
        assert_eq!((back.code, back.cs_code), (431, CS_INVALID_PARAMETER));
        let e = CsError::from(ApiError::internal("disk full"));
        assert_eq!(e.code, 530);
    }
}
