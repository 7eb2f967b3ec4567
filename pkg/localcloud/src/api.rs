//! The OpenStack HTTP API on one port, with DevStack's path prefixes: `/identity` (Keystone),
//! `/compute/v2.1` (Nova), `/network/v2.0` (Neutron), `/volume/v3/{project}` (Cinder). This
//! module holds what the services share: the error formats of each service, token checks,
//! microversion negotiation, `limit`/`marker` pagination and request-body parsing that answers
//! malformed input with the service's 400 instead of failing.

pub(crate) mod aws;
pub(crate) mod azure;
pub(crate) mod cloudstack;
pub(crate) mod compute;
pub(crate) mod gce;
pub(crate) mod identity;
pub(crate) mod image;
pub(crate) mod loadbalancer;
pub(crate) mod mesos;
pub(crate) mod network;
pub(crate) mod ovirt;
pub(crate) mod photon;
#[cfg(test)]
mod proptests;
mod records;
pub(crate) mod requests;
pub(crate) mod volume;
mod zones;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Deserialize as _;
use serde_json::{json, Value};

use crate::config::ServerConfig;
use crate::faults::Faults;
pub use crate::http::Service;
pub(crate) use crate::http::{ApiError, Formatted};
use crate::store::Store;
pub(crate) use crate::time::{iso, new_hex_id, new_id, now};

/// What every handler shares.
pub(crate) struct Cloud {
    pub store: Arc<Store>,
    pub config: ServerConfig,
    /// Where clients reach the API, e.g. `http://127.0.0.1:8800`.
    pub base_url: String,
    pub faults: Faults,
    /// The load-balancer data plane (listeners, health monitors, metrics).
    pub dataplane: Arc<crate::dataplane::DataPlane>,
    /// Requests answered, for `/metrics`.
    pub requests: requests::RequestCounter,
    /// Volumes' files and loop devices, following every committed write.
    pub backing: Arc<crate::backing::Backing>,
}

pub(crate) type Ctx = State<Arc<Cloud>>;

impl Cloud {
    /// Runs a store transaction on a blocking thread (it `fsync`s), then brings the volumes'
    /// backing in line with what it committed, before the caller answers.
    pub async fn write<R, F>(self: &Arc<Self>, f: F) -> Result<R, ApiError>
    where
        R: Send + 'static,
        F: FnOnce(&mut crate::store::Tx<'_>) -> Result<R, ApiError> + Send + 'static,
    {
        let store = self.store.clone();
        let backing = self.backing.clone();
        tokio::task::spawn_blocking(move || {
            let (out, changes) = store.write_changes(f)?;
            backing.follow(&store, &changes);
            Ok(out)
        })
        .await
        .map_err(|e| ApiError::internal(format!("store task failed: {e}")))?
    }
}

/// The caller, as established by the token (inserted by [`require_token`]).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub user_id: String,
    /// Empty for an unscoped token.
    pub project_id: String,
    /// The trust of a trust-scoped token.
    pub trust_id: Option<String>,
}

/// Renders an [`ApiError`] (or any bare error status, such as an unknown path) as `service`
/// would: Nova/Cinder `{"itemNotFound": {"code", "message"}}`, Neutron `{"NeutronError": ...}`,
/// Keystone `{"error": {"code", "title", "message"}}`, Compute Engine
/// `{"error": {"code", "message", "errors": [{"message", "domain", "reason"}]}}`.
pub(crate) fn error_body(service: Service, e: &ApiError) -> Value {
    let code = e.status.as_u16();
    match service {
        Service::Gce => gce::error_body(e),
        Service::Azure => azure::error_body(e),
        Service::Photon => photon::error_body(e),
        Service::CloudStack => cloudstack::error_body(e),
        Service::Network => {
            json!({"NeutronError": {"type": e.kind, "message": e.message, "detail": ""}})
        }
        Service::LoadBalancer => json!({
            "faultcode": if code >= 500 { "Server" } else { "Client" },
            "faultstring": e.message,
            "debuginfo": null,
        }),
        Service::Identity
        | Service::Metadata
        | Service::Image
        | Service::Mesos
        | Service::Ovirt => {
            json!({"error": {
                "code": code,
                "title": e.status.canonical_reason().unwrap_or("Error"),
                "message": e.message,
            }})
        }
        Service::Compute | Service::Volume => {
            let key = match code {
                400 => "badRequest",
                401 => "unauthorized",
                403 => "forbidden",
                404 => "itemNotFound",
                405 => "HTTPMethodNotAllowed",
                406 => "notAcceptable",
                409 => "conflictingRequest",
                413 | 429 => "overLimit",
                _ => "computeFault",
            };
            json!({ key: {"code": code, "message": e.message} })
        }
    }
}

/// Middleware: gives every error response of `service` its OpenStack body.
pub(crate) async fn format_errors(service: Service, req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<Formatted>().is_some()
    {
        return response;
    }
    let error = match response.extensions().get::<ApiError>() {
        Some(e) => e.clone(),
        // Our handlers always attach an ApiError; anything else is axum's own answer
        // (unknown path, wrong method, ...) with a plain-text body.
        None if status == StatusCode::METHOD_NOT_ALLOWED => ApiError::new(
            status,
            "HTTPMethodNotAllowed",
            "The method is not allowed for this resource.",
        ),
        None => ApiError::new(
            status,
            "HTTPNotFound",
            status.canonical_reason().unwrap_or("error").to_string(),
        ),
    };
    let (mut parts, _) = response.into_parts();
    let body = error_body(service, &error);
    parts.extensions.remove::<ApiError>();
    parts.extensions.insert(Formatted);
    parts.headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    if status == StatusCode::UNAUTHORIZED
        && !matches!(
            service,
            Service::Identity
                | Service::Gce
                | Service::Azure
                | Service::Mesos
                | Service::Ovirt
                | Service::Photon
                | Service::CloudStack
        )
    {
        parts.headers.insert(
            "www-authenticate",
            HeaderValue::from_static("Keystone uri=\"/identity/v3\""),
        );
    }
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// Middleware: rejects requests without a valid, unexpired token with 401.
pub(crate) async fn require_token(State(cloud): Ctx, mut req: Request, next: Next) -> Response {
    match authenticate(&cloud, &req) {
        Some(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        None => ApiError::unauthorized().into_response(),
    }
}

/// Middleware of the project-scoped services (Nova, Neutron, Cinder, Glance, Octavia): as
/// [`require_token`], and an unscoped token is refused with 403, as their policies refuse a
/// token without a project.
pub(crate) async fn require_scoped_token(
    State(cloud): Ctx,
    mut req: Request,
    next: Next,
) -> Response {
    match authenticate(&cloud, &req) {
        Some(caller) if caller.project_id.is_empty() => ApiError::forbidden(
            "You are not authorized to perform the requested action: an unscoped token cannot be used here; authenticate with a project scope.",
        )
        .into_response(),
        Some(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        None => ApiError::unauthorized().into_response(),
    }
}

/// The caller of a request, from its `X-Auth-Token`.
fn authenticate(cloud: &Cloud, req: &Request) -> Option<Caller> {
    let token = req.headers().get("x-auth-token")?.to_str().ok()?;
    identity::check_token(cloud, token)
}

/// A negotiated microversion (`2.1` is `Microversion(2, 1)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Microversion(pub u32, pub u32);

impl std::fmt::Display for Microversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

fn parse_microversion(s: &str) -> Option<Microversion> {
    let (major, minor) = s.trim().split_once('.')?;
    Some(Microversion(major.parse().ok()?, minor.parse().ok()?))
}

/// Which microversions a service speaks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Microversions {
    pub service: &'static str,
    pub min: Microversion,
    pub max: Microversion,
    /// The pre-`OpenStack-API-Version` header (Nova's `X-OpenStack-Nova-API-Version`).
    pub legacy_header: Option<&'static str>,
}

/// Middleware: reads `OpenStack-API-Version: <service> X.Y` (or the legacy header), answers
/// 406 outside the supported range, and echoes the version used.
pub(crate) async fn negotiate_microversion(
    versions: Microversions,
    mut req: Request,
    next: Next,
) -> Response {
    let mut requested: Option<String> = None;
    for value in req.headers().get_all("openstack-api-version") {
        let Ok(value) = value.to_str() else { continue };
        for part in value.split(',') {
            let mut words = part.split_whitespace();
            if words
                .next()
                .is_some_and(|s| s.eq_ignore_ascii_case(versions.service))
            {
                requested = words.next().map(str::to_owned);
            }
        }
    }
    if requested.is_none() {
        if let Some(legacy) = versions.legacy_header {
            requested = req
                .headers()
                .get(legacy)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
        }
    }
    let version = match requested.as_deref() {
        None => versions.min,
        Some(s) if s.eq_ignore_ascii_case("latest") => versions.max,
        Some(s) => match parse_microversion(s) {
            None => {
                return ApiError::bad_request(format!("Invalid API version request {s:?}"))
                    .into_response()
            }
            Some(v) if v < versions.min || v > versions.max => {
                return ApiError::new(
                    StatusCode::NOT_ACCEPTABLE,
                    "HTTPNotAcceptable",
                    format!(
                        "Version {v} is not supported by the API. Minimum is {} and maximum is {}.",
                        versions.min, versions.max
                    ),
                )
                .into_response()
            }
            Some(v) => v,
        },
    };
    req.extensions_mut().insert(version);
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("{} {version}", versions.service)) {
        headers.insert("openstack-api-version", v);
    }
    if let Some(legacy) = versions.legacy_header {
        if let Ok(v) = HeaderValue::from_str(&version.to_string()) {
            headers.insert(legacy, v);
        }
    }
    headers.insert("vary", HeaderValue::from_static("OpenStack-API-Version"));
    response
}

/// Decodes a JSON body, answering 400 in the service's words when it is not what is expected
/// (malformed JSON, a missing required field, an unknown field where OpenStack rejects them).
pub(crate) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "The request body is empty; a JSON object is required.",
        ));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("Malformed request body: {e}")))?;
    from_value(value).map_err(|(path, e)| {
        ApiError::bad_request(format!("Invalid input for field/attribute {path}: {e}"))
    })
}

/// Decodes `value`, telling which field failed (`server.networks[0].uuid`) as the services'
/// schema errors do.
pub(crate) fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // An unknown or missing field is named by serde itself, one level down.
        (path, inner)
    })
}

/// For `Option<Option<T>>` body fields: absent → `None`, `null` → `Some(None)` (serde alone
/// folds both into `None`, losing "set this to null").
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Query parameters in order, repeated keys kept (Neutron's `?id=a&id=b`).
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct Params(pub Vec<(String, String)>);

impl Params {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// One page of `items` (already in list order, each with an `"id"`), and the `next` link when
/// the page is full, as `<collection>_links`.
pub(crate) fn paginate(
    items: Vec<Value>,
    params: &Params,
    base_url: &str,
    uri: &Uri,
    max_limit: usize,
) -> Result<(Vec<Value>, Option<Value>), ApiError> {
    let limit = match params.get("limit") {
        None => None,
        Some(s) => match s.parse::<usize>() {
            Ok(n) => Some(n.min(max_limit)),
            Err(_) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid limit {s:?}: must be a non-negative integer"
                )))
            }
        },
    };
    let start = match params.get("marker") {
        None => 0,
        Some(marker) => match items.iter().position(|v| v["id"] == marker) {
            Some(i) => i + 1,
            None => {
                return Err(ApiError::bad_request(format!(
                    "marker [{marker}] not found"
                )))
            }
        },
    };
    let limit = limit.unwrap_or(max_limit);
    let total = items.len();
    let page: Vec<Value> = items.into_iter().skip(start).take(limit).collect();
    let more = limit > 0 && page.len() == limit && start.saturating_add(limit) < total;
    let next = if more {
        let last = page
            .last()
            .and_then(|v| v["id"].as_str())
            .unwrap_or_default();
        let mut query: Vec<String> = params
            .0
            .iter()
            .filter(|(k, _)| k != "marker" && k != "limit")
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        query.push(format!("limit={limit}"));
        query.push(format!("marker={}", encode(last)));
        Some(
            json!([{"rel": "next", "href": format!("{base_url}{}?{}", uri.path(), query.join("&"))}]),
        )
    } else {
        None
    };
    Ok((page, next))
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Wraps a list page as OpenStack does: `{"servers": [...], "servers_links": [...]}`.
pub(crate) fn list_body(collection: &str, page: Vec<Value>, next: Option<Value>) -> Value {
    let mut body = serde_json::Map::new();
    body.insert(collection.to_owned(), Value::Array(page));
    if let Some(next) = next {
        body.insert(format!("{collection}_links"), next);
    }
    Value::Object(body)
}

/// JSON response with a status.
pub(crate) fn reply(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// Sorts newest first, ties by ID (Nova's and Cinder's default list order).
pub(crate) fn newest_first(items: &mut [Value], created_key: &str) {
    items.sort_by(|a, b| {
        b[created_key]
            .as_str()
            .cmp(&a[created_key].as_str())
            .then_with(|| a["id"].as_str().cmp(&b["id"].as_str()))
    });
}

/// Generic equality filters on list views, as Neutron applies them: `?name=x&status=ACTIVE`;
/// a key given twice matches either value. Keys in `skip` are not filters.
pub(crate) fn matches_filters(view: &Value, params: &Params, skip: &[&str]) -> bool {
    let mut by_key: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (k, v) in &params.0 {
        if !skip.contains(&k.as_str()) {
            by_key.entry(k.as_str()).or_default().push(v.as_str());
        }
    }
    by_key.iter().all(|(key, wanted)| {
        let field = &view[*key];
        wanted.iter().any(|w| match field {
            Value::Null => false,
            Value::String(s) => s == w,
            Value::Bool(b) => w.eq_ignore_ascii_case(if *b { "true" } else { "false" }),
            Value::Number(n) => n.to_string() == *w,
            // `fixed_ips=ip_address=127.1.0.3`, `fixed_ips=subnet_id=...`
            Value::Array(items) => match w.split_once('=') {
                Some((k, v)) => items.iter().any(|i| i[k].as_str() == Some(v)),
                None => items.iter().any(|i| i.as_str() == Some(*w)),
            },
            Value::Object(_) => false,
        })
    })
}

/// Keeps only `fields` (Neutron's `?fields=id&fields=name`) when any are asked for.
pub(crate) fn select_fields(view: Value, params: &Params) -> Value {
    let fields = params.all("fields");
    if fields.is_empty() {
        return view;
    }
    match view {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| fields.contains(&k.as_str()))
                .collect(),
        ),
        other => other,
    }
}

/// The whole API router.
pub(crate) fn router(cloud: Arc<Cloud>) -> Router {
    let router = Router::new()
        .route("/", axum::routing::get(root))
        .merge(identity::router(cloud.clone()))
        .merge(compute::router(cloud.clone()))
        .merge(network::router(cloud.clone()))
        .merge(volume::router(cloud.clone()))
        .merge(image::router(cloud.clone()))
        .merge(loadbalancer::router(cloud.clone()))
        .merge(gce::router(cloud.clone()))
        .merge(azure::router(cloud.clone()))
        .merge(mesos::router(cloud.clone()))
        .merge(ovirt::router(cloud.clone()))
        .merge(photon::router(cloud.clone()))
        .merge(cloudstack::router(cloud.clone()))
        .route("/metrics", axum::routing::get(metrics))
        .fallback(unknown_path)
        .layer(axum::middleware::from_fn(refuse_control_characters))
        .with_state(cloud.clone());
    counted(router, &cloud, None)
}

/// The metadata listener's router: [`crate::metadata`]'s documents with the metadata service's
/// error format and fault injection, counted as `metadata` requests.
pub(crate) fn metadata_router(cloud: Arc<Cloud>) -> Router {
    let documents = crate::metadata::router(Arc::new(crate::metadata::Cloud {
        store: cloud.store.clone(),
        base_url: cloud.base_url.clone(),
        identity: Arc::new(azure::entra::ManagedIdentityTokens(cloud.clone())),
        gce_tokens: Arc::new(gce::oauth2::DefaultServiceAccountTokens(cloud.clone())),
    }));
    let router = service_layers(documents, &cloud, Service::Metadata);
    counted(router, &cloud, Some(Service::Metadata))
}

/// Counts every request `router` answers, by `service` (`None`: by path) ([`requests`]).
fn counted(router: Router, cloud: &Arc<Cloud>, service: Option<Service>) -> Router {
    router.layer(axum::middleware::from_fn_with_state(
        cloud.clone(),
        move |State(cloud): Ctx, req, next| async move {
            requests::observe(&cloud.requests, service, req, next).await
        },
    ))
}

/// Whether a request path, once percent-decoded, holds a control character (`%0D%0A`, `%00`,
/// `%7F`): no resource name or ID of any service has one, and echoing one into an error,
/// a log line or a `Location` would let a client forge lines.
pub(crate) fn has_control_characters(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        b.is_ascii_control()
            || (b == b'%'
                && bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .is_some_and(|c| c.is_ascii_control()))
    })
}

/// Middleware: a path with a control character is a 400 in the service's format before any
/// handler sees it.
async fn refuse_control_characters(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !has_control_characters(path) {
        return next.run(req).await;
    }
    let service = requests::service_of(path).unwrap_or(Service::Compute);
    let error = ApiError::bad_request("Malformed request url: the path holds a control character");
    let mut response = reply(StatusCode::BAD_REQUEST, error_body(service, &error));
    response.extensions_mut().insert(Formatted);
    response
}

async fn unknown_path(uri: Uri) -> Response {
    let path = uri.path();
    let service = requests::service_of(path).unwrap_or(Service::Compute);
    let error = ApiError::not_found(
        "HTTPNotFound",
        format!("The resource could not be found: {path}"),
    );
    let mut response = reply(StatusCode::NOT_FOUND, error_body(service, &error));
    response.extensions_mut().insert(Formatted);
    response
}

async fn root(State(cloud): Ctx) -> Response {
    let b = &cloud.base_url;
    reply(
        StatusCode::OK,
        json!({
            "name": "hypercloud local-cloud",
            "identity": format!("{b}/identity/v3"),
            "compute": format!("{b}/compute/v2.1"),
            "network": format!("{b}/network/v2.0"),
            "volume": format!("{b}/volume/v3"),
            "image": format!("{b}/image/v2"),
            "load-balancer": format!("{b}/load-balancer/v2"),
            "gce": format!("{b}/compute/v1"),
            "azure": format!("{b}/subscriptions"),
            "mesos": format!("{b}/state"),
            "ovirt": format!("{b}/ovirt-engine/api"),
            "photon": format!("{b}/v1/status"),
            "cloudstack": format!("{b}/client/api"),
            "metrics": format!("{b}/metrics"),
        }),
    )
}

/// The local cloud's metrics (requests answered, the load-balancer data plane's), Prometheus
/// text format.
async fn metrics(State(cloud): Ctx) -> Response {
    let mut text = cloud.requests.render();
    text.push_str(&cloud.dataplane.metrics());
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// What every service's router does the same way.
pub(crate) trait Routes {
    /// GET `path` and `path/` with `handler` (version documents answer both).
    fn get_with_slash<H: axum::handler::Handler<T, Arc<Cloud>>, T: 'static>(
        self,
        path: &str,
        handler: H,
    ) -> Self;

    /// Every route so far needs a project-scoped token ([`require_scoped_token`]).
    fn scoped(self, cloud: &Arc<Cloud>) -> Self;
}

impl Routes for Router<Arc<Cloud>> {
    fn get_with_slash<H: axum::handler::Handler<T, Arc<Cloud>>, T: 'static>(
        self,
        path: &str,
        handler: H,
    ) -> Self {
        let get = axum::routing::get;
        self.route(path, get(handler.clone()))
            .route(&format!("{path}/"), get(handler))
    }

    fn scoped(self, cloud: &Arc<Cloud>) -> Self {
        self.route_layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            require_scoped_token,
        ))
    }
}

/// The standard layers of one service's router: errors in its format (outermost), fault
/// injection, then the service's own layers.
pub(crate) fn service_layers<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    cloud: &Arc<Cloud>,
    service: Service,
) -> Router<S> {
    let faults = cloud.faults.clone();
    router
        .layer(axum::middleware::from_fn(move |req, next| {
            let faults = faults.clone();
            async move { faults.apply(service, req, next).await }
        }))
        .layer(axum::middleware::from_fn(move |req, next| {
            format_errors(service, req, next)
        }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_in_paths_are_found_encoded_or_not() {
        for bad in ["/a%0d%0ab", "/a%0A", "/x%00", "/x%7f", "/x%1F/y", "/a\rb"] {
            assert!(has_control_characters(bad), "{bad}");
        }
        for good in [
            "/compute/v2.1/servers",
            "/a%20b",
            "/a%2Fb",
            "/100%",
            "/a%0",
            "/a%zz",
        ] {
            assert!(!has_control_characters(good), "{good}");
        }
    }

    #[test]
    fn filters_match_strings_bools_and_fixed_ips() {
        let view =
            json!({"name": "a", "admin_state_up": true, "fixed_ips": [{"ip_address": "10.0.0.3"}]});
        let p = |q: &[(&str, &str)]| {
            Params(
                q.iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
            )
        };
        assert!(matches_filters(
            &view,
            &p(&[("name", "a"), ("admin_state_up", "True")]),
            &[]
        ));
        assert!(matches_filters(
            &view,
            &p(&[("name", "b"), ("name", "a")]),
            &[]
        ));
        assert!(!matches_filters(&view, &p(&[("name", "b")]), &[]));
        assert!(matches_filters(
            &view,
            &p(&[("fixed_ips", "ip_address=10.0.0.3")]),
            &[]
        ));
        assert!(!matches_filters(
            &view,
            &p(&[("fixed_ips", "ip_address=10.0.0.4")]),
            &[]
        ));
        assert!(matches_filters(&view, &p(&[("limit", "1")]), &["limit"]));
    }
}
