//! The Azure Resource Manager client ([`Arm`]): JSON in and out over azure_core's HTTP
//! pipeline (its bearer-token policy with the credential of `azure.json`, its user agent and
//! request IDs), on the workspace's reqwest/rustls transport (`transport`). What is decided
//! here: each call's `api-version` by resource provider ([`api_version`]); retries of 429 and
//! 5xx (and of connection failures) with `cloudProviderBackoff*` and the server's
//! `Retry-After`, through the one retry policy ([`hypercloud_cloudprovider::retry`]; the
//! SDK's own retry is off); the client-side rate limit of `cloudProviderRateLimit*` (one bucket
//! for reads, one for writes: `hypercloud_options::rate_limit::TokenBucket`); bodies read with
//! the limits of [`hypercloud_cloudprovider::http_body`]; ARM's error body into
//! [`Error::NotFound`] / [`Error::Arm`]; long-running operations (`lro`) and `nextLink` lists.
//! Upstream equivalent: cloud-provider-azure's `pkg/azureclients/armclient` with the
//! per-resource clients on top, now the Azure SDK for Go's `arm` runtime.
//!
//! Trust: the extra CA bundle named by `REQUESTS_CA_BUNDLE` (as Microsoft's Python clients and
//! `az` read it), else `SSL_CERT_FILE` (as Go's crypto/x509, so upstream, reads it), is added
//! to the built-in web PKI roots ([`ArmOptions::from_env`]).

mod certificate;
mod credential;
mod imds;
mod lro;
mod options;
mod paths;
mod transport;

pub use options::{new_credential, token_scope, ArmOptions};
use paths::describe;
pub use paths::{
    api_version, COMPUTE_API_VERSION, DISKS_API_VERSION, NETWORK_API_VERSION, RESOURCES_API_VERSION,
};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::{TokenCredential, TokenRequestOptions};
use azure_core::error::ErrorKind;
use azure_core::http::headers::{self, Headers};
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::policies::get_retry_after;
use azure_core::http::{
    ClientOptions, Context, Method, Pipeline, PipelineStreamOptions, Request, RetryOptions, Url,
    UserAgentOptions,
};
use bytes::Bytes;
use hypercloud_cloudprovider::http_body::{self, excerpt, excerpt_str, LIST_LIMIT, OBJECT_LIMIT};
use hypercloud_cloudprovider::pager::Pager;
use hypercloud_cloudprovider::retry::{retryable_status, Attempt, RetryPolicy};
use hypercloud_options::rate_limit::TokenBucket;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{Backoff, Config, Environment, RateLimit};
use crate::error::{Error, Result};
use transport::{StreamBody, Transport};

/// The API Resource Manager is named as in errors and limits.
const API: &str = "Azure Resource Manager";
/// Connecting to ARM, Entra or IMDS.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest honoured `Retry-After` of a throttled or failed call.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Longest pause of `cloudProviderBackoff` between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(120);

/// A successful (2xx) or final error answer, its body read.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Headers,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: &'static str) -> Option<&str> {
        self.headers
            .get_optional_str(&headers::HeaderName::from_static(name))
    }

    /// The server's wish for the next request, from `x-ms-retry-after-ms`, `retry-after-ms`
    /// or `Retry-After` (seconds or an HTTP date); negative is none.
    fn retry_after(&self) -> Option<Duration> {
        get_retry_after(
            &self.headers,
            azure_core::time::OffsetDateTime::now_utc,
            &[
                headers::X_MS_RETRY_AFTER_MS,
                headers::RETRY_AFTER_MS,
                headers::RETRY_AFTER,
            ],
        )
        .and_then(|d| Duration::try_from(d).ok())
    }
}

/// One page of a list.
#[derive(Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
struct Page<T> {
    #[serde(default = "Vec::new", deserialize_with = "crate::models::nullable")]
    value: Vec<T>,
    #[serde(rename = "nextLink", default)]
    next_link: Option<String>,
}

/// The Azure Resource Manager client of one subscription.
pub struct Arm {
    pipeline: Pipeline,
    credential: Arc<dyn TokenCredential>,
    scope: String,
    endpoint: Url,
    subscription_id: String,
    retry: RetryPolicy,
    reads: Option<TokenBucket>,
    writes: Option<TokenBucket>,
    operation_timeout: Duration,
    requests: AtomicU64,
}

impl std::fmt::Debug for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arm")
            .field("endpoint", &self.endpoint.as_str())
            .field("subscription_id", &self.subscription_id)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// `cloudProviderBackoff*` as the shared policy: `retries` attempts, the first pause
/// `duration`, growing to what `exponent` would reach by the last attempt (the shared policy
/// doubles with up to as much again of jitter; `jitter` itself is not read). Without it, one
/// attempt, as upstream.
fn retry_policy(backoff: Option<Backoff>) -> RetryPolicy {
    let Some(b) = backoff else {
        return RetryPolicy {
            max_retry_after: MAX_RETRY_AFTER,
            ..RetryPolicy::new(1, Duration::ZERO, Duration::ZERO)
        };
    };
    let steps = i32::try_from(b.retries.saturating_sub(1)).unwrap_or(i32::MAX);
    let longest = b.duration.as_secs_f64() * b.exponent.powi(steps);
    RetryPolicy {
        max_retry_after: MAX_RETRY_AFTER,
        ..RetryPolicy::new(
            b.retries,
            b.duration,
            Duration::try_from_secs_f64(longest)
                .unwrap_or(MAX_BACKOFF)
                .clamp(b.duration, MAX_BACKOFF.max(b.duration)),
        )
    }
}

fn buckets(limit: Option<RateLimit>) -> (Option<TokenBucket>, Option<TokenBucket>) {
    match limit {
        None => (None, None),
        // The options' bucket takes f32; the config's range (0 to 10000) fits it.
        #[allow(clippy::cast_possible_truncation)]
        Some(r) => (
            Some(TokenBucket::new(r.qps as f32, r.bucket)),
            Some(TokenBucket::new(r.qps_write as f32, r.bucket_write)),
        ),
    }
}

impl Arm {
    /// A client of `config.subscription_id` at the environment's Resource Manager, signed in
    /// with `config.credential`.
    pub fn new(config: &Config, environment: &Environment, options: &ArmOptions) -> Result<Arm> {
        let credential = new_credential(config, environment, options)?;
        Self::with_credential(config, environment, credential, options)
    }

    /// The same with a credential of the caller's (shared between clients, its tokens
    /// cached once).
    pub fn with_credential(
        config: &Config,
        environment: &Environment,
        credential: Arc<dyn TokenCredential>,
        options: &ArmOptions,
    ) -> Result<Arm> {
        let transport = Transport::new(options.http()?, LIST_LIMIT, API).into_sdk();
        Self::build(
            config,
            environment,
            credential,
            transport,
            options.operation_timeout,
        )
    }

    fn build(
        config: &Config,
        environment: &Environment,
        credential: Arc<dyn TokenCredential>,
        transport: azure_core::http::Transport,
        operation_timeout: Duration,
    ) -> Result<Arm> {
        let rm = &environment.resource_manager_endpoint;
        let endpoint = Url::parse(rm).map_err(|e| Error::Endpoint {
            what: "resourceManagerEndpoint",
            url: rm.clone(),
            message: e.to_string(),
        })?;
        if endpoint.scheme() != "https" {
            return Err(Error::Endpoint {
                what: "resourceManagerEndpoint",
                url: rm.clone(),
                message: "bearer tokens are only sent over https".into(),
            });
        }
        let scope = token_scope(environment);
        let options = ClientOptions {
            transport: Some(transport),
            // Retries are this client's (one policy for every provider), not the SDK's.
            retry: RetryOptions::none(),
            user_agent: UserAgentOptions {
                application_id: config.user_agent.clone(),
            },
            ..ClientOptions::default()
        };
        let auth = BearerTokenAuthorizationPolicy::new(credential.clone(), [scope.clone()]);
        let pipeline = Pipeline::new(
            Some(env!("CARGO_PKG_NAME")),
            Some(env!("CARGO_PKG_VERSION")),
            options,
            vec![Arc::new(auth)],
            Vec::new(),
            None,
        );
        let (reads, writes) = buckets(config.rate_limit);
        Ok(Arm {
            pipeline,
            credential,
            scope,
            endpoint,
            subscription_id: config.subscription_id.clone(),
            retry: retry_policy(config.backoff),
            reads,
            writes,
            operation_timeout,
            requests: AtomicU64::new(0),
        })
    }

    /// The subscription.
    pub fn subscription_id(&self) -> &str {
        &self.subscription_id
    }

    /// Requests sent to Resource Manager so far (retries and polls included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// `/subscriptions/{s}/resourceGroups/{group}`.
    pub fn resource_group_id(&self, group: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{group}",
            self.subscription_id
        )
    }

    /// `/subscriptions/{s}/resourceGroups/{group}/providers/{kind}/{name}`, `kind` being
    /// `Microsoft.Compute/virtualMachines`; an empty `name` gives the collection.
    pub fn resource_id(&self, group: &str, kind: &str, name: &str) -> String {
        let collection = format!("{}/providers/{kind}", self.resource_group_id(group));
        if name.is_empty() {
            collection
        } else {
            format!("{collection}/{name}")
        }
    }

    /// Gets a token now (a wrong secret or an unreachable Entra fails here, at start-up,
    /// rather than at the first call).
    pub async fn authenticate(&self) -> Result<()> {
        let scope = self.scope.as_str();
        self.credential
            .get_token(&[scope], Some(TokenRequestOptions::default()))
            .await
            .map(|_| ())
            .map_err(|source| Error::Authenticate {
                operation: "authenticate".into(),
                source,
            })
    }

    /// The URL of `id` (a resource ID or collection path) with its `api-version` and `query`.
    fn url(&self, id: &str, query: &[(&str, &str)], operation: &str) -> Result<Url> {
        let base = self.endpoint.as_str().trim_end_matches('/');
        let path = if id.starts_with('/') {
            id.to_owned()
        } else {
            format!("/{id}")
        };
        let mut url = Url::parse(&format!("{base}{path}")).map_err(|e| Error::Protocol {
            operation: operation.into(),
            message: format!("{} is not a resource path: {e}", excerpt_str(id)),
        })?;
        url.query_pairs_mut()
            .append_pair("api-version", api_version(id))
            .extend_pairs(query);
        Ok(url)
    }

    /// A URL handed out by ARM (`nextLink`, `Azure-AsyncOperation`, `Location`), followed
    /// verbatim, but only over https (it will carry the bearer token).
    fn link(link: &str, what: &str, operation: &str) -> Result<Url> {
        let url = Url::parse(link).map_err(|e| Error::Protocol {
            operation: operation.into(),
            message: format!("{what} {} is not a URL: {e}", excerpt_str(link)),
        })?;
        if url.scheme() != "https" {
            return Err(Error::Protocol {
                operation: operation.into(),
                message: format!(
                    "{what} {} is not https; the bearer token is not sent there",
                    excerpt_str(link)
                ),
            });
        }
        Ok(url)
    }

    async fn throttle(&self, write: bool) {
        let bucket = if write { &self.writes } else { &self.reads };
        let Some(bucket) = bucket else { return };
        while let Err(wait) = bucket.try_take() {
            tokio::time::sleep(wait).await;
        }
    }

    /// One call, retried while worth it: the answer if it is 2xx, else ARM's error.
    async fn send(
        &self,
        method: Method,
        url: &Url,
        body: Option<Bytes>,
        operation: &str,
        limit: u64,
    ) -> Result<Answer> {
        let write = !matches!(method, Method::Get | Method::Head);
        let retried = self
            .retry
            .run(
                |_| self.attempt(method, url, body.clone(), operation, limit, write),
                |outcome, attempt, pause| match outcome {
                    Ok(a) => tracing::warn!(
                        operation,
                        status = a.status,
                        attempt,
                        ?pause,
                        "Azure Resource Manager call retried"
                    ),
                    Err(e) => tracing::warn!(
                        operation,
                        error = %hypercloud_cloudprovider::Chain(e),
                        attempt,
                        ?pause,
                        "Azure Resource Manager call retried"
                    ),
                },
            )
            .await;
        let answer = retried.outcome?;
        if (200..300).contains(&answer.status) {
            return Ok(answer);
        }
        Err(arm_error(operation, &answer, retried.attempts))
    }

    async fn attempt(
        &self,
        method: Method,
        url: &Url,
        body: Option<Bytes>,
        operation: &str,
        limit: u64,
        write: bool,
    ) -> Attempt<Result<Answer>> {
        self.throttle(write).await;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut req = Request::new(url.clone(), method);
        req.insert_header(headers::ACCEPT, "application/json");
        if let Some(b) = body {
            req.insert_header(headers::CONTENT_TYPE, "application/json");
            req.set_body(b);
        }
        let options = PipelineStreamOptions {
            skip_checks: true,
            ..PipelineStreamOptions::default()
        };
        let resp = match self
            .pipeline
            .stream(&Context::new(), &mut req, Some(options))
            .await
        {
            Ok(r) => r,
            Err(source) => {
                let transient = matches!(source.kind(), ErrorKind::Io | ErrorKind::Connection);
                let e = if matches!(source.kind(), ErrorKind::Credential) {
                    Error::Authenticate {
                        operation: operation.into(),
                        source,
                    }
                } else {
                    Error::Send {
                        operation: operation.into(),
                        source,
                    }
                };
                return if transient {
                    Attempt::Again {
                        outcome: Err(e),
                        retry_after: None,
                    }
                } else {
                    Attempt::Done(Err(e))
                };
            }
        };
        let status = u16::from(resp.status());
        let (_, headers, body) = resp.deconstruct();
        if (200..300).contains(&status) {
            let read = http_body::read_limited(StreamBody(body), limit, API, operation).await;
            return Attempt::Done(match read {
                Ok(bytes) => Ok(Answer {
                    status,
                    headers,
                    body: bytes.into(),
                }),
                Err(source) => Err(Error::ReadBody {
                    operation: operation.into(),
                    source,
                }),
            });
        }
        let (prefix, _) = http_body::read_prefix(StreamBody(body)).await;
        let answer = Answer {
            status,
            headers,
            body: prefix.into(),
        };
        if retryable_status(status) {
            Attempt::Again {
                retry_after: answer.retry_after(),
                outcome: Ok(answer),
            }
        } else {
            Attempt::Done(Ok(answer))
        }
    }

    /// GETs a resource (`id`: its resource ID).
    pub async fn get<T: DeserializeOwned>(&self, id: &str) -> Result<T> {
        self.get_with(id, &[]).await
    }

    /// GETs a resource with query parameters (`&[("$expand", "instanceView")]`).
    pub async fn get_with<T: DeserializeOwned>(
        &self,
        id: &str,
        query: &[(&str, &str)],
    ) -> Result<T> {
        let op = describe("GET", id);
        let url = self.url(id, query, &op)?;
        let a = self
            .send(Method::Get, &url, None, &op, OBJECT_LIMIT)
            .await?;
        decode(&op, &a.body)
    }

    /// Every item of a collection (`id`: its path), following each `nextLink` verbatim.
    pub async fn list<T: DeserializeOwned>(&self, id: &str) -> Result<Vec<T>> {
        self.list_with(id, &[]).await
    }

    /// [`Arm::list`] with query parameters (`&[("$top", "100")]`).
    pub async fn list_with<T: DeserializeOwned>(
        &self,
        id: &str,
        query: &[(&str, &str)],
    ) -> Result<Vec<T>> {
        let op = describe("list", id);
        let mut url = self.url(id, query, &op)?;
        let mut pager = Pager::new("Azure Resource Manager", op.clone());
        let mut items = Vec::new();
        loop {
            let a = self.send(Method::Get, &url, None, &op, LIST_LIMIT).await?;
            let page: Page<T> = decode(&op, &a.body)?;
            items.extend(page.value);
            match pager.next(page.next_link.as_deref())? {
                Some(next) => url = Self::link(&next, "nextLink", &op)?,
                None => return Ok(items),
            }
        }
    }

    /// PUTs (creates or replaces) a resource and waits for its long-running operation; the
    /// resource as ARM then shows it.
    pub async fn put<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        id: &str,
        body: &B,
    ) -> Result<T> {
        self.change(Method::Put, "PUT", id, body).await
    }

    /// PATCHes a resource (tags, or the properties given) and waits for its operation.
    pub async fn patch<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        id: &str,
        body: &B,
    ) -> Result<T> {
        self.change(Method::Patch, "PATCH", id, body).await
    }

    async fn change<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        verb: &str,
        id: &str,
        body: &B,
    ) -> Result<T> {
        let op = describe(verb, id);
        let url = self.url(id, &[], &op)?;
        let json = serde_json::to_vec(body).map_err(|source| Error::Decode {
            operation: op.clone(),
            path: ".".into(),
            excerpt: "(the request body)".into(),
            source,
        })?;
        let initial = self
            .send(method, &url, Some(json.into()), &op, OBJECT_LIMIT)
            .await?;
        let done = self.finish_change(&op, &url, initial).await?;
        decode(&op, &done)
    }

    /// DELETEs a resource and waits for its operation. A resource already gone is
    /// [`Error::NotFound`] (ARM answers 204 for some, 404 for others).
    pub async fn delete(&self, id: &str) -> Result<()> {
        let op = describe("DELETE", id);
        let url = self.url(id, &[], &op)?;
        let initial = self
            .send(Method::Delete, &url, None, &op, OBJECT_LIMIT)
            .await?;
        self.finish_action(&op, initial).await
    }

    /// POSTs an action without a body (`deallocate`, `powerOff`, `start`) to a resource and
    /// waits for its operation.
    pub async fn post_action(&self, id: &str, action: &str) -> Result<()> {
        let path = format!("{}/{action}", id.trim_end_matches('/'));
        let op = describe("POST", &path);
        let url = self.url(&path, &[], &op)?;
        let initial = self
            .send(Method::Post, &url, Some(Bytes::new()), &op, OBJECT_LIMIT)
            .await?;
        self.finish_action(&op, initial).await
    }
}

/// ARM's error body (`{"error": {"code", "message"}}`, or the two at the top, as some
/// services answer) into [`Error::NotFound`] or [`Error::Arm`]; a body that is neither is
/// quoted as an excerpt.
fn arm_error(operation: &str, answer: &Answer, attempts: u32) -> Error {
    let (code, message) = error_of(&answer.body);
    if answer.status == 404 {
        return Error::NotFound {
            operation: operation.into(),
            code,
            message,
        };
    }
    Error::Arm {
        operation: operation.into(),
        status: answer.status,
        code,
        message,
        attempts,
    }
}

/// The code and message of an ARM (or operation) error document, as excerpts.
fn error_of(body: &[u8]) -> (String, String) {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let e = if v["error"].is_object() {
        &v["error"]
    } else {
        &v
    };
    match (e["code"].as_str(), e["message"].as_str()) {
        (None, None) => (String::new(), excerpt(body)),
        (code, message) => (
            excerpt_str(code.unwrap_or_default()),
            excerpt_str(message.unwrap_or_default()),
        ),
    }
}

/// A typed answer; what does not fit is an error naming where.
fn decode<T: DeserializeOwned>(operation: &str, body: &[u8]) -> Result<T> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Decode {
        operation: operation.into(),
        path: e.path().to_string(),
        excerpt: if body.is_empty() {
            "(an empty answer)".into()
        } else {
            excerpt(body)
        },
        source: e.into_inner(),
    })
}

#[cfg(test)]
mod tests;
