//! The HTTP side: Keystone v3 authentication (password or application credential) with the
//! token cached until shortly before it expires and renewed on a 401, endpoint discovery from
//! the catalog (interface and region), and bounded retries with exponential backoff on 5xx, 429
//! (honouring `Retry-After`) and connection errors. Every failure becomes
//! [`hypercloud_cloudprovider::Error::Cloud`] with the operation, status and request ID.
//! Upstream equivalent: gophercloud's `ProviderClient` with `openstack.AuthenticatedClient`.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hypercloud_cloudprovider::http_body::{self, excerpt, excerpt_str, LIST_LIMIT};
use hypercloud_cloudprovider::http_client::{ClientIdentity, HttpClientConfig};
use hypercloud_cloudprovider::pager::Pager;
use hypercloud_cloudprovider::retry::{retryable_status, Attempt, RetryPolicy};
use hypercloud_cloudprovider::{Error, Result};
use reqwest::Method;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::{Config, Global, Secret};

/// The OpenStack services this provider talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Service {
    Compute,
    Network,
    Volume,
    LoadBalancer,
}

impl Service {
    fn catalog_types(self) -> &'static [&'static str] {
        match self {
            Service::Compute => &["compute"],
            Service::Network => &["network"],
            Service::Volume => &["block-storage", "volumev3", "volume"],
            Service::LoadBalancer => &["load-balancer"],
        }
    }

    /// The API's name in errors (`nova`, `neutron`, `cinder`, `octavia`).
    fn api_name(self) -> &'static str {
        match self {
            Service::Compute => "nova",
            Service::Network => "neutron",
            Service::Volume => "cinder",
            Service::LoadBalancer => "octavia",
        }
    }
}

struct Session {
    /// The [`Identity`] generation the token was issued for.
    generation: u64,
    token: Secret,
    expires: Instant,
    compute: Option<String>,
    network: Option<String>,
    volume: Option<String>,
    load_balancer: Option<String>,
}

impl Session {
    fn endpoint(&self, service: Service) -> Option<&str> {
        match service {
            Service::Compute => self.compute.as_deref(),
            Service::Network => self.network.as_deref(),
            Service::Volume => self.volume.as_deref(),
            Service::LoadBalancer => self.load_balancer.as_deref(),
        }
    }
}

/// A successful answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub body: Value,
}

/// Who the client authenticates as: the config's `[Global]`, replaced when a followed
/// credentials Secret changes ([`Identity::replace`]); a token issued for an older
/// generation is not used again.
#[derive(Debug)]
pub(crate) struct Identity {
    global: std::sync::RwLock<Arc<Global>>,
    generation: AtomicU64,
}

impl Identity {
    fn new(global: Global) -> Self {
        Identity {
            global: std::sync::RwLock::new(Arc::new(global)),
            generation: AtomicU64::new(0),
        }
    }

    /// The credentials in use.
    pub fn current(&self) -> Arc<Global> {
        self.global
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Uses `global` from the next request on: the cached token is dropped.
    pub fn replace(&self, global: Global) {
        *self.global.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(global);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether credentials were replaced since start (a region is fixed from then on).
    pub fn generation_replaced(&self) -> bool {
        self.generation() > 0
    }
}

/// An authenticated OpenStack client shared by every capability.
pub(crate) struct Client {
    http: reqwest::Client,
    provider: String,
    config: Arc<Config>,
    identity: Arc<Identity>,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    calls: AtomicU64,
    /// Whether the last catalog had a `load-balancer` (Octavia) endpoint.
    has_load_balancer: std::sync::atomic::AtomicBool,
}

/// Renew tokens this long before Keystone says they expire.
const TOKEN_MARGIN: Duration = Duration::from_secs(60);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Connecting to an OpenStack endpoint (never longer than `[Hypercloud] request-timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest token lifetime believed (Keystone's default is 1h); a longer `expires_at` is
/// clamped to it, with a warning, so a wrong clock or a hostile answer cannot pin a token.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Nova 2.47 puts the flavor's name in the server, saving a flavor look-up per server.
const COMPUTE_MICROVERSION: &str = "2.47";

impl Client {
    pub fn new(provider: &str, config: Arc<Config>) -> Result<Self, crate::Error> {
        let http = HttpClientConfig::new(config.tuning.request_timeout, CONNECT_TIMEOUT)
            .user_agent(concat!("hypercloud-openstack/", env!("CARGO_PKG_VERSION")))
            .insecure(config.global.tls_insecure)
            .ca_file("[Global] ca-file", config.global.ca_file.as_deref())
            .client_identity(
                config
                    .global
                    .cert_file
                    .clone()
                    .zip(config.global.key_file.clone())
                    .map(|(cert_file, key_file)| ClientIdentity {
                        cert_key: "[Global] cert-file".into(),
                        cert_file,
                        key_key: "[Global] key-file".into(),
                        key_file,
                    }),
            )
            .build()?;
        Ok(Client {
            http,
            provider: provider.into(),
            identity: Arc::new(Identity::new(config.global.clone())),
            config,
            session: tokio::sync::Mutex::new(None),
            calls: AtomicU64::new(0),
            has_load_balancer: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// HTTP requests sent so far (every attempt, Keystone included).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Whether the catalog (seen when authenticating) has a `load-balancer` endpoint.
    pub fn has_load_balancer(&self) -> bool {
        self.has_load_balancer.load(Ordering::Relaxed)
    }

    /// The region of the credentials in use (`[Global] region`).
    pub fn region(&self) -> String {
        self.identity.current().region.clone().unwrap_or_default()
    }

    /// Who the client authenticates as, shared with whatever replaces the credentials.
    pub fn identity(&self) -> Arc<Identity> {
        self.identity.clone()
    }

    pub fn error(
        &self,
        operation: &str,
        status: Option<u16>,
        request_id: Option<String>,
        message: String,
    ) -> Error {
        Error::Cloud {
            provider: self.provider.clone(),
            operation: operation.into(),
            status,
            request_id,
            source: Box::new(hypercloud_cloudprovider::Message(message)),
        }
    }

    /// Authenticates now (start-up check); the token is cached.
    pub async fn authenticate(&self) -> Result<()> {
        self.session().await.map(drop)
    }

    async fn session(&self) -> Result<Arc<Session>> {
        let mut slot = self.session.lock().await;
        if let Some(s) = slot.as_ref() {
            if s.expires > Instant::now() && s.generation == self.identity.generation() {
                return Ok(s.clone());
            }
        }
        let session = Arc::new(self.issue_token().await?);
        *slot = Some(session.clone());
        Ok(session)
    }

    async fn forget(&self, stale: &Arc<Session>) {
        let mut slot = self.session.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, stale)) {
            *slot = None;
        }
    }

    fn auth_body(g: &Global) -> (Value, String) {
        let domain = |id: &Option<String>, name: &Option<String>| match (id, name) {
            (Some(id), _) => json!({"id": id}),
            (None, Some(name)) => json!({"name": name}),
            (None, None) => match (&g.domain_id, &g.domain_name) {
                (Some(id), _) => json!({"id": id}),
                (None, Some(name)) => json!({"name": name}),
                (None, None) => json!({"id": "default"}),
            },
        };
        let user = match (&g.user_id, &g.username) {
            (Some(id), _) => json!({"id": id}),
            (None, name) => {
                json!({"name": name, "domain": domain(&g.user_domain_id, &g.user_domain_name)})
            }
        };
        let who = g.username.clone().or(g.user_id.clone()).unwrap_or_default();
        if let Some(trust) = &g.trust_id {
            // OCCM: the trustee's ID and password when given, else the user's, and the
            // trust as the scope (its project and roles come with it).
            let mut user = match (&g.trustee_id, &g.user_id) {
                (Some(id), _) | (None, Some(id)) => json!({"id": id}),
                (None, None) => user,
            };
            let password = g.trustee_password.as_ref().or(g.password.as_ref());
            user["password"] = json!(password.map(Secret::expose).unwrap_or_default());
            let trustee = g.trustee_id.clone().unwrap_or(who);
            return (
                json!({"auth": {
                    "identity": {"methods": ["password"], "password": {"user": user}},
                    "scope": {"OS-TRUST:trust": {"id": trust}},
                }}),
                format!("trustee {trustee:?}, trust {trust:?}"),
            );
        }
        if g.application_credential_id.is_some() || g.application_credential_name.is_some() {
            let secret = g
                .application_credential_secret
                .as_ref()
                .map(Secret::expose)
                .unwrap_or_default();
            let cred = match &g.application_credential_id {
                Some(id) => json!({"id": id, "secret": secret}),
                None => {
                    json!({"name": g.application_credential_name, "user": user, "secret": secret})
                }
            };
            let label = g
                .application_credential_id
                .clone()
                .or(g.application_credential_name.clone())
                .unwrap_or_default();
            return (
                json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": cred}}}),
                format!("application credential {label}"),
            );
        }
        let mut user = user;
        user["password"] = json!(g.password.as_ref().map(Secret::expose).unwrap_or_default());
        let mut body =
            json!({"auth": {"identity": {"methods": ["password"], "password": {"user": user}}}});
        let scope = match (&g.project_id, &g.project_name) {
            (Some(id), _) => Some(json!({"project": {"id": id}})),
            (None, Some(name)) => Some(
                json!({"project": {"name": name, "domain": domain(&g.project_domain_id, &g.project_domain_name)}}),
            ),
            (None, None) => None,
        };
        if let Some(scope) = scope {
            body["auth"]["scope"] = scope;
        }
        let project = g
            .project_name
            .clone()
            .or(g.project_id.clone())
            .unwrap_or_default();
        (body, format!("user {who:?}, project {project:?}"))
    }

    /// Keystone v2.0's body (Rackspace's identity): the API key when given, else the password;
    /// the tenant by ID or name.
    fn auth_body_v2(g: &Global) -> (Value, String) {
        let who = g.username.clone().unwrap_or_default();
        let mut auth = match &g.api_key {
            Some(key) => {
                json!({"RAX-KSKEY:apiKeyCredentials": {"username": who, "apiKey": key.expose()}})
            }
            None => json!({"passwordCredentials": {"username": who,
                "password": g.password.as_ref().map(Secret::expose).unwrap_or_default()}}),
        };
        if let Some(id) = &g.project_id {
            auth["tenantId"] = json!(id);
        } else if let Some(name) = &g.project_name {
            auth["tenantName"] = json!(name);
        }
        let how = if g.api_key.is_some() {
            "API key"
        } else {
            "password"
        };
        (json!({ "auth": auth }), format!("user {who:?} by {how}"))
    }

    /// A v2.0 `access` as the v3 token's parts: the token, its lifetime and a catalog in v3's
    /// shape (`interface`, `region`, `url` per endpoint), so one lookup serves both.
    fn v2_session_parts(value: &Value) -> Option<(String, Duration, Vec<Value>)> {
        let access = &value["access"];
        let token = access["token"]["id"].as_str()?.to_owned();
        let expires = access["token"]["expires"].as_str().and_then(keystone_time);
        let issued = access["token"]["issued_at"]
            .as_str()
            .and_then(keystone_time);
        let lifetime = match (issued, expires) {
            (Some(i), Some(e)) if e > i => Duration::from_secs(e - i),
            _ => Duration::from_secs(3600),
        };
        let catalog = access["serviceCatalog"]
            .as_array()
            .map(|services| {
                services
                    .iter()
                    .map(|s| {
                        let endpoints: Vec<Value> = s["endpoints"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .flat_map(|e| {
                                [("public", "publicURL"), ("internal", "internalURL"), ("admin", "adminURL")]
                                    .into_iter()
                                    .filter_map(|(interface, key)| {
                                        let url = e[key].as_str()?;
                                        Some(json!({"interface": interface, "region": e["region"], "url": url}))
                                    })
                                    .collect::<Vec<_>>()
                            })
                            .collect();
                        json!({"type": s["type"], "name": s["name"], "endpoints": endpoints})
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some((token, lifetime, catalog))
    }

    async fn issue_token(&self) -> Result<Session> {
        let generation = self.identity.generation();
        let identity = self.identity.current();
        let v2 = identity.identity_v2();
        let (body, who) = if v2 {
            Self::auth_body_v2(&identity)
        } else {
            Self::auth_body(&identity)
        };
        let keystone = identity.keystone_url();
        let url = if v2 {
            format!("{keystone}/tokens")
        } else {
            format!("{keystone}/auth/tokens")
        };
        let operation = "authenticate with Keystone";
        let (status, headers, text) = self
            .send_with_retries(operation, || self.http.post(&url).json(&body))
            .await?;
        let value = parse_body(text);
        let request_id = request_id(&headers);
        if status == 401 || status == 403 {
            return Err(self.error(
                operation,
                Some(status),
                request_id,
                format!(
                    "Keystone at {keystone} rejected the credentials ({who}) from {}: {}",
                    self.credentials_origin(),
                    message(&value)
                ),
            ));
        }
        if !(200..300).contains(&status) {
            return Err(self.error(operation, Some(status), request_id, message(&value)));
        }
        let (token, lifetime, catalog) = if v2 {
            Self::v2_session_parts(&value).ok_or_else(|| {
                self.error(
                    operation,
                    Some(status),
                    request_id.clone(),
                    "Keystone v2.0 sent no access.token.id".into(),
                )
            })?
        } else {
            self.v3_session_parts(&headers, &value, status, request_id)?
        };
        if lifetime > MAX_TOKEN_LIFETIME {
            tracing::warn!(provider = %self.provider, lifetime_secs = lifetime.as_secs(), max_secs = MAX_TOKEN_LIFETIME.as_secs(), "token lifetime from Keystone clamped");
        }
        let lifetime = lifetime.min(MAX_TOKEN_LIFETIME);
        let lifetime = lifetime.checked_sub(TOKEN_MARGIN).unwrap_or(lifetime / 2);
        let find = |service: Service| self.endpoint(&catalog, service, identity.region.as_deref());
        let session = Session {
            generation,
            token: Secret::new(token),
            expires: Instant::now() + lifetime,
            compute: find(Service::Compute),
            network: find(Service::Network).map(|u| {
                if u.ends_with("/v2.0") {
                    u
                } else {
                    format!("{u}/v2.0")
                }
            }),
            volume: find(Service::Volume),
            load_balancer: find(Service::LoadBalancer),
        };
        self.has_load_balancer
            .store(session.load_balancer.is_some(), Ordering::Relaxed);
        tracing::debug!(provider = %self.provider, %who, lifetime_secs = lifetime.as_secs(), "authenticated with Keystone");
        Ok(session)
    }

    /// A v3 answer's token (the `X-Subject-Token` header), lifetime and catalog.
    fn v3_session_parts(
        &self,
        headers: &reqwest::header::HeaderMap,
        value: &Value,
        status: u16,
        request_id: Option<String>,
    ) -> Result<(String, Duration, Vec<Value>)> {
        let operation = "authenticate with Keystone";
        let token = headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                self.error(
                    operation,
                    Some(status),
                    request_id.clone(),
                    "Keystone sent no X-Subject-Token".into(),
                )
            })?;
        let t = &value["token"];
        let lifetime = match (
            t["issued_at"].as_str().and_then(keystone_time),
            t["expires_at"].as_str().and_then(keystone_time),
        ) {
            (Some(i), Some(e)) if e > i => Duration::from_secs(e - i),
            _ => Duration::from_secs(3600),
        };
        let catalog = t["catalog"].as_array().cloned().unwrap_or_default();
        Ok((token, lifetime, catalog))
    }

    /// Where the credentials come from, for messages: the credentials Secret, else the
    /// config file.
    fn credentials_origin(&self) -> String {
        match self.config.credentials_secret() {
            Some(secret) => format!("the Secret {secret}"),
            None => self.config.origin.clone(),
        }
    }

    fn endpoint(
        &self,
        catalog: &[Value],
        service: Service,
        region: Option<&str>,
    ) -> Option<String> {
        let interface = self
            .config
            .global
            .interface
            .as_deref()
            .unwrap_or("public")
            .trim_end_matches("URL");
        for kind in service.catalog_types() {
            for entry in catalog.iter().filter(|e| e["type"] == *kind) {
                let endpoints = entry["endpoints"].as_array().cloned().unwrap_or_default();
                let found = endpoints.iter().find(|e| {
                    e["interface"] == interface
                        && region.is_none_or(|r| e["region_id"] == r || e["region"] == r)
                });
                if let Some(url) = found.and_then(|e| e["url"].as_str()) {
                    return Some(url.trim_end_matches('/').to_owned());
                }
            }
        }
        None
    }

    /// Sends one request, retrying on 5xx/429/connection errors (the shared
    /// [`RetryPolicy`]: `[Hypercloud] max-attempts`, `retry-base-delay` doubling up to 5 s,
    /// `Retry-After` of a 429/503 honoured up to `max-retry-after`); gives back whatever came.
    async fn send_with_retries(
        &self,
        operation: &str,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(u16, reqwest::header::HeaderMap, String)> {
        let tuning = &self.config.tuning;
        let policy = RetryPolicy {
            attempts: tuning.max_attempts.max(1),
            first_delay: tuning.retry_base_delay,
            max_delay: MAX_BACKOFF,
            max_retry_after: tuning.max_retry_after,
        };
        let attempt = |_| {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let request = build().header("accept", "application/json");
            async move {
                let started = Instant::now();
                match request.send().await {
                    Err(e) => Attempt::Again {
                        outcome: Err(e),
                        retry_after: None,
                    },
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        if !retryable_status(status) {
                            return Attempt::Done(Ok((resp, started)));
                        }
                        let retry_after = retry_after(resp.headers(), tuning.max_retry_after)
                            .filter(|_| status == 429 || status == 503);
                        Attempt::Again {
                            outcome: Ok((resp, started)),
                            retry_after,
                        }
                    }
                }
            }
        };
        let retrying = |outcome: &std::result::Result<
            (reqwest::Response, Instant),
            reqwest::Error,
        >,
                        attempt: u32,
                        delay: Duration| match outcome {
            Err(e) => {
                tracing::warn!(provider = %self.provider, operation, attempt, error = %hypercloud_cloudprovider::Chain(e), ?delay, "request failed; retrying")
            }
            Ok((resp, _)) => {
                tracing::warn!(provider = %self.provider, operation, attempt, status = resp.status().as_u16(), request_id = ?request_id(resp.headers()), ?delay, "cloud answered with an error; retrying")
            }
        };
        let retried = policy.run(attempt, retrying).await;
        let attempts = retried.attempts;
        let (resp, started) = retried.outcome.map_err(|e| {
            self.error(
                operation,
                None,
                None,
                format!(
                    "{} (after {attempts} attempts)",
                    hypercloud_cloudprovider::Chain(&e)
                ),
            )
        })?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = self.body(operation, status, &headers, resp).await?;
        tracing::trace!(provider = %self.provider, operation, status, elapsed_ms = started.elapsed().as_millis() as u64, "cloud call");
        if retryable_status(status) {
            return Err(self.error(
                operation,
                Some(status),
                request_id(&headers),
                format!("{} (after {attempts} attempts)", message(&parse_body(text))),
            ));
        }
        Ok((status, headers, text))
    }

    /// The text of an answer: a success's whole body, at most [`LIST_LIMIT`] bytes (a page
    /// of a list); of any other answer, the first [`ERROR_PREFIX_LIMIT`](http_body) bytes.
    async fn body(
        &self,
        operation: &str,
        status: u16,
        headers: &reqwest::header::HeaderMap,
        resp: reqwest::Response,
    ) -> Result<String> {
        if !(200..300).contains(&status) {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(resp)).await;
            return Ok(String::from_utf8_lossy(&prefix).into_owned());
        }
        let bytes = http_body::read_limited(
            reqwest::Body::from(resp),
            LIST_LIMIT,
            &format!("OpenStack {}", self.provider),
            operation,
        )
        .await
        .map_err(|e| {
            self.error(
                operation,
                Some(status),
                request_id(headers),
                hypercloud_cloudprovider::Chain(&e).to_string(),
            )
        })?;
        String::from_utf8(bytes).map_err(|e| {
            self.error(
                operation,
                Some(status),
                request_id(headers),
                format!("the answer is not UTF-8: {}", excerpt(e.as_bytes())),
            )
        })
    }

    /// Calls `path` (relative to the service endpoint, or an absolute URL from a `next` link);
    /// non-2xx answers are errors. A 401 renews the token once and tries again.
    pub async fn request(
        &self,
        service: Service,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &str,
    ) -> Result<Reply> {
        let text = self
            .request_text(service, method, path, body, operation)
            .await?;
        Ok(Reply {
            body: parse_body(text),
        })
    }

    /// [`Client::request`], answering the body's text unparsed (the caller parses it into the
    /// types it needs instead of a generic JSON tree).
    pub async fn request_text(
        &self,
        service: Service,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &str,
    ) -> Result<String> {
        let mut renewed = false;
        loop {
            let session = self.session().await?;
            let url = if path.starts_with("http://") || path.starts_with("https://") {
                path.to_owned()
            } else {
                let base = session.endpoint(service).ok_or_else(|| {
                    self.error(
                        operation,
                        None,
                        None,
                        format!(
                            "the Keystone catalog has no {} endpoint with interface {} in region {}",
                            service.catalog_types().join("/"),
                            self.config.global.interface.as_deref().unwrap_or("public"),
                            self.identity.current().region.as_deref().unwrap_or("(any)")
                        ),
                    )
                })?;
                format!("{base}{path}")
            };
            let build = || {
                let mut req = self
                    .http
                    .request(method.clone(), &url)
                    .header("x-auth-token", session.token.expose());
                if service == Service::Compute {
                    req = req
                        .header(
                            "openstack-api-version",
                            format!("compute {COMPUTE_MICROVERSION}"),
                        )
                        .header("x-openstack-nova-api-version", COMPUTE_MICROVERSION);
                }
                if let Some(b) = body {
                    req = req.json(b);
                }
                req
            };
            let (status, headers, text) = self.send_with_retries(operation, build).await?;
            if status == 401 && !renewed {
                tracing::info!(provider = %self.provider, operation, "token rejected; authenticating again");
                self.forget(&session).await;
                renewed = true;
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(self.error(
                    operation,
                    Some(status),
                    request_id(&headers),
                    message(&parse_body(text)),
                ));
            }
            return Ok(text);
        }
    }

    /// GETs a collection, following `<key>_links` `next` pages.
    pub async fn list(
        &self,
        service: Service,
        path: &str,
        key: &str,
        operation: &str,
    ) -> Result<Vec<Value>> {
        self.list_typed(service, path, key, operation).await
    }

    /// [`Client::list`] parsed straight into `T`: each page's text becomes its items without a
    /// generic JSON tree in between (a page of 1000 servers is megabytes of JSON).
    pub async fn list_typed<T: DeserializeOwned>(
        &self,
        service: Service,
        path: &str,
        key: &str,
        operation: &str,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let mut next = Some(path.to_owned());
        let mut pager = Pager::new(service.api_name(), operation);
        while let Some(p) = next.take() {
            let text = self
                .request_text(service, Method::GET, &p, None, operation)
                .await?;
            let page = parse_page::<T>(&text, key).map_err(|e| {
                self.error(
                    operation,
                    None,
                    None,
                    format!(
                        "unexpected answer from {}: {}",
                        excerpt_str(&p),
                        excerpt_str(&e.to_string())
                    ),
                )
            })?;
            out.extend(page.items);
            // A `next` link seen before (repeated, alternating) or pages without end.
            next = pager
                .next(page.next.as_deref())
                .map_err(|e| self.error(operation, None, None, e.to_string()))?;
        }
        Ok(out)
    }
}

/// One page of a collection: its items and the `next` link.
struct Page<T> {
    items: Vec<T>,
    next: Option<String>,
}

/// A collection page `{"<key>": [...], "<key>_links": [{"rel": "next", "href": ...}], ...}`;
/// other members are skipped unparsed. An empty body is an empty last page.
fn parse_page<T: DeserializeOwned>(text: &str, key: &str) -> serde_json::Result<Page<T>> {
    if text.trim().is_empty() {
        return Ok(Page {
            items: Vec::new(),
            next: None,
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let page = PageSeed::<T> {
        key,
        links_key: format!("{key}_links"),
        item: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(page)
}

struct PageSeed<'k, T> {
    key: &'k str,
    links_key: String,
    item: PhantomData<T>,
}

#[derive(Deserialize)]
struct Link {
    rel: Option<String>,
    href: Option<String>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Page<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "an object with {:?}", self.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Page<T>, A::Error> {
        let mut page = Page {
            items: Vec::new(),
            next: None,
        };
        while let Some(k) = map.next_key::<String>()? {
            if k == self.key {
                page.items = map.next_value::<Option<Vec<T>>>()?.unwrap_or_default();
            } else if k == self.links_key {
                let links = map.next_value::<Option<Vec<Link>>>()?.unwrap_or_default();
                page.next = links
                    .into_iter()
                    .find(|l| l.rel.as_deref() == Some("next"))
                    .and_then(|l| l.href);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(page)
    }
}

/// An answer's body as JSON: `null` when empty, the text as a string when it is not JSON.
fn parse_body(text: String) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }
}

/// Whether `e` is the cloud saying 404.
pub(crate) fn is_not_found(e: &Error) -> bool {
    matches!(
        e,
        Error::Cloud {
            status: Some(404),
            ..
        }
    )
}

fn request_id(headers: &reqwest::header::HeaderMap) -> Option<String> {
    [
        "x-openstack-request-id",
        "x-compute-request-id",
        "x-request-id",
    ]
    .iter()
    .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
    .map(excerpt_str)
}

/// The `Retry-After` of an answer (RFC 9110: delay-seconds or an HTTP date), at most `max`
/// (`[Hypercloud] max-retry-after`, itself at most [`MAX_RETRY_AFTER`]). Garbage, negative
/// or NaN values give `None` (the caller backs off on its own); a value above the maximum
/// (huge numbers, infinity, far-future dates) is clamped and logged.
fn retry_after(headers: &reqwest::header::HeaderMap, max: Duration) -> Option<Duration> {
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let secs = parse_retry_after(v, now)?;
    if secs > max.as_secs_f64() {
        tracing::warn!(
            retry_after = v,
            max_secs = max.as_secs_f64(),
            "Retry-After clamped to the maximum honoured"
        );
    }
    Some(Duration::from_secs_f64(secs.min(max.as_secs_f64())))
}

/// Seconds to wait for a `Retry-After` value at `now` (seconds since the epoch): a finite,
/// non-negative number, or an HTTP date (past dates wait 0). Unclamped.
fn parse_retry_after(v: &str, now: u64) -> Option<f64> {
    if let Ok(secs) = v.parse::<f64>() {
        // +inf (`1e400`) is merely huge: clamped by the caller. NaN and negatives are not waits.
        return (secs >= 0.0).then_some(secs);
    }
    // IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT` (the weekday is not checked, as Go's
    // http.ParseTime does not either).
    let (_weekday, date) = v.split_once(", ")?;
    let at = jiff::fmt::strtime::parse("%d %b %Y %H:%M:%S GMT", date)
        .ok()?
        .to_datetime()
        .ok()?;
    let at = utc_seconds(at).unwrap_or(0);
    Some(at.saturating_sub(now) as f64)
}

/// The message of an OpenStack error body, whatever the service's format, as an excerpt
/// (`{"itemNotFound": {"message": ..}}`, `{"NeutronError": {..}}`, `{"error": {..}}`).
fn message(body: &Value) -> String {
    match body {
        Value::Object(map) => {
            if let Some(m) = map.get("message").and_then(Value::as_str) {
                return excerpt_str(m);
            }
            for v in map.values() {
                if let Some(m) = v.get("message").and_then(Value::as_str) {
                    return excerpt_str(m);
                }
            }
            excerpt_str(&body.to_string())
        }
        Value::String(s) => excerpt_str(s),
        Value::Null => "(empty body)".into(),
        other => excerpt_str(&other.to_string()),
    }
}

/// Seconds since the epoch of Keystone's `2026-11-22T22:30:00.000000Z` (RFC 3339; before
/// the epoch or not a time: `None`).
fn keystone_time(s: &str) -> Option<u64> {
    match s.parse::<jiff::Timestamp>() {
        Ok(at) => u64::try_from(at.as_second()).ok(),
        // Without an offset, UTC (as Keystone means it).
        Err(_) => utc_seconds(s.parse().ok()?),
    }
}

/// Seconds since the epoch of a UTC civil time. Civil arithmetic, as jiff's timestamps end a
/// day before the calendar does (`31 Dec 9999` is still a time to clamp, not garbage).
fn utc_seconds(at: jiff::civil::DateTime) -> Option<u64> {
    let since = at.duration_since(jiff::civil::date(1970, 1, 1).at(0, 0, 0, 0));
    u64::try_from(since.as_secs()).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::MAX_RETRY_AFTER;

    #[test]
    fn keystone_times() {
        assert_eq!(keystone_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            keystone_time("2026-11-22T22:30:00.000000Z"),
            Some(1_795_386_600)
        );
        assert_eq!(keystone_time("garbage"), None);
    }

    #[test]
    fn request_ids_and_retry_after_from_headers() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(request_id(&h), None);
        h.insert("x-compute-request-id", "req-nova".parse().unwrap());
        assert_eq!(request_id(&h).as_deref(), Some("req-nova"));
        h.insert("x-openstack-request-id", "req-1".parse().unwrap());
        assert_eq!(request_id(&h).as_deref(), Some("req-1"));
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(
            retry_after(&h, MAX_RETRY_AFTER),
            Some(Duration::from_secs(2))
        );
        h.insert("retry-after", "86400".parse().unwrap());
        assert_eq!(retry_after(&h, MAX_RETRY_AFTER), Some(MAX_RETRY_AFTER));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(
            retry_after(&h, MAX_RETRY_AFTER),
            Some(Duration::ZERO),
            "a past date"
        );
        for absurd in [
            "1e300",
            "1e400",
            "inf",
            "18446744073709551616",
            "Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            h.insert("retry-after", absurd.parse().unwrap());
            assert_eq!(
                retry_after(&h, MAX_RETRY_AFTER),
                Some(MAX_RETRY_AFTER),
                "{absurd}"
            );
        }
        for garbage in [
            "-1",
            "NaN",
            "-inf",
            "soon",
            "",
            "Wed, 99 Foo 2015 07:28:00 GMT",
        ] {
            h.insert("retry-after", garbage.parse().unwrap());
            assert_eq!(retry_after(&h, MAX_RETRY_AFTER), None, "{garbage}");
        }
    }

    #[test]
    fn http_dates_count_from_now() {
        let now = keystone_time("2026-11-22T22:30:00Z").unwrap();
        assert_eq!(
            parse_retry_after("Sun, 22 Nov 2026 22:30:30 GMT", now),
            Some(30.0)
        );
        assert_eq!(
            parse_retry_after("Sun, 22 Nov 2026 22:29:00 GMT", now),
            Some(0.0)
        );
        assert_eq!(
            parse_retry_after("Sun, 22 Nov 2026 22:30:30 CET", now),
            None
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Retry-After values as a misbehaving cloud sends them: numbers of every size and
        /// sign, specials, HTTP dates with any field, and arbitrary text.
        fn retry_after_value() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<f64>().prop_map(|f| f.to_string()),
                any::<i64>().prop_map(|i| i.to_string()),
                any::<u128>().prop_map(|i| i.to_string()),
                (
                    0u32..40,
                    0u32..14,
                    any::<i64>(),
                    0i64..100,
                    0i64..100,
                    0i64..100
                )
                    .prop_map(|(d, m, y, hh, mm, ss)| format!(
                        "Mon, {d:02} {} {y} {hh:02}:{mm:02}:{ss:02} GMT",
                        ["Jan", "Feb", "Dec", "Foo"][(m % 4) as usize]
                    )),
                "[ -~]{0,40}",
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// Never panics; never waits longer than the documented maximum.
            #[test]
            fn retry_after_is_bounded(v in retry_after_value()) {
                let mut h = reqwest::header::HeaderMap::new();
                if let Ok(value) = v.parse() {
                    h.insert("retry-after", value);
                    if let Some(d) = retry_after(&h, MAX_RETRY_AFTER) {
                        prop_assert!(d <= MAX_RETRY_AFTER);
                    }
                }
            }

            /// Keystone times with any numbers in any field: a time or `None`, no overflow.
            #[test]
            fn keystone_time_never_overflows(
                y in any::<i64>(), m in any::<i64>(), d in any::<i64>(),
                hh in any::<i64>(), mm in any::<i64>(), ss in any::<i64>(),
            ) {
                let _ = keystone_time(&format!("{y}-{m}-{d}T{hh}:{mm}:{ss}.000000Z"));
            }
        }
    }

    #[test]
    fn pages_parse_into_their_items_and_next_link() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Item {
            id: String,
        }
        let text = r#"{"servers": [{"id": "a", "big": {"x": [1, 2]}}, {"id": "b"}],
            "servers_links": [{"rel": "self", "href": "s"}, {"rel": "next", "href": "n"}],
            "other": {"servers": []}}"#;
        let page = parse_page::<Item>(text, "servers").expect("page");
        assert_eq!(
            page.items,
            vec![Item { id: "a".into() }, Item { id: "b".into() }]
        );
        assert_eq!(page.next.as_deref(), Some("n"));
        // The last page: no links; null items; an empty body.
        let page = parse_page::<Item>(r#"{"servers": null}"#, "servers").expect("page");
        assert!(page.items.is_empty() && page.next.is_none());
        let page = parse_page::<Item>("", "servers").expect("page");
        assert!(page.items.is_empty() && page.next.is_none());
        // Answers that are not a page are errors that say why, not empty lists.
        for bad in [
            r#""oops""#,
            "<html>",
            r#"{"servers": {"id": "a"}}"#,
            r#"{"servers": [{}]}"#,
            "{} {}",
        ] {
            assert!(parse_page::<Item>(bad, "servers").is_err(), "{bad}");
        }
    }

    #[test]
    fn messages_of_every_format() {
        assert_eq!(
            message(&json!({"itemNotFound": {"message": "gone", "code": 404}})),
            "gone"
        );
        assert_eq!(
            message(&json!({"NeutronError": {"message": "nope"}})),
            "nope"
        );
        assert_eq!(message(&json!({"error": {"message": "denied"}})), "denied");
        assert_eq!(message(&Value::Null), "(empty body)");
    }
}
