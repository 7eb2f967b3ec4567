//! The HTTP side: the Compute Engine v1 REST client (JSON in and out, GCE's error body read
//! into [`Error::Api`], operations waited for), the metadata server client, and the access
//! token each request carries (see [`TokenSource`]). Upstream equivalent: the generated
//! `google.golang.org/api/compute/v1` client with `cloud.google.com/go/compute/metadata` and
//! the provider's `AltTokenSource`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hypercloud_cloudprovider::http_body::{
    self, excerpt, excerpt_str, LIST_LIMIT, METADATA_LIMIT, OBJECT_LIMIT,
};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::pager::Pager;
use hypercloud_cloudprovider::wait::{poll_until, Backoff, Poll, WaitError};
use hypercloud_cloudprovider::Chain;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::{Config, TokenSource};
use crate::credentials::{
    find_default_credentials, Found, ServiceAccountKey, CLOUD_PLATFORM_SCOPE, JWT_BEARER_GRANT,
};
use crate::error::{Error, Result};

/// The first pause between `operations.wait` calls; the real API blocks in `wait` for up to
/// two minutes, so on Google these pauses only follow its own long polls.
const OPERATION_POLL_FIRST: Duration = Duration::from_millis(500);
/// The longest pause between `operations.wait` calls (before jitter).
const OPERATION_POLL_MAX: Duration = Duration::from_secs(10);
/// Every Compute Engine request: longer than `operations.wait`'s own two-minute bound would be
/// pointless, but one whole request (connect, send, answer) beyond a minute is a hung server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Connecting to Compute Engine (or the token URL): an unreachable endpoint fails fast.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Talks to the metadata server.
#[derive(Debug, Clone)]
pub(crate) struct Metadata {
    http: reqwest::Client,
    base: String,
}

impl Metadata {
    pub fn new(config: &Config) -> Result<Self> {
        // The metadata server never redirects; a redirect is refused (see `get`).
        let http = HttpClientConfig::new(config.tuning.metadata_timeout, CONNECT_TIMEOUT)
            .metadata_server(config.tuning.metadata_source_address)
            .build()?;
        Ok(Metadata {
            http,
            base: format!("{}/computeMetadata/v1", config.tuning.metadata_endpoint),
        })
    }

    /// A metadata value as text (`instance/zone`).
    pub async fn get(&self, path: &str) -> Result<String> {
        let err = |message: String| Error::Metadata {
            path: path.into(),
            message,
        };
        let resp = self
            .http
            .get(format!("{}/{path}", self.base))
            .header("Metadata-Flavor", "Google")
            .send()
            .await
            .map_err(|e| err(e.to_string()))?;
        let status = resp.status();
        let location = resp.headers().get(reqwest::header::LOCATION);
        http_body::refuse_redirect(
            status.as_u16(),
            location.map(|l| l.as_bytes()),
            "GCE metadata server",
            path,
        )
        .map_err(|e| err(e.to_string()))?;
        if !status.is_success() {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(resp)).await;
            return Err(err(format!("HTTP {status}: {}", excerpt(&prefix))));
        }
        let bytes = http_body::read_limited(
            reqwest::Body::from(resp),
            METADATA_LIMIT,
            "GCE metadata server",
            path,
        )
        .await
        .map_err(|e| err(Chain(&e).to_string()))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| err(format!("not UTF-8: {}", excerpt(e.as_bytes()))))?;
        Ok(text.trim().to_owned())
    }
}

/// An access token and when it stops being good.
#[derive(Debug, Clone)]
struct Token {
    value: String,
    until: Instant,
}

/// How long a token that lives `expires_in` is used: until a minute before it expires, or
/// half its life when it is shorter than two minutes, so it is renewed before the server
/// stops taking it.
fn good_for(expires_in: Duration) -> Duration {
    expires_in - (expires_in / 2).min(Duration::from_secs(60))
}

/// What requests are authorised with, once the config's [`TokenSource`] is resolved (files
/// read, the Application Default Credentials search done).
#[derive(Debug)]
pub(crate) enum Credentials {
    /// No token.
    Anonymous,
    /// The metadata server's default service account; `adc` is what the Application Default
    /// Credentials search looked for before it, when it came to this.
    Metadata { adc: Option<String> },
    /// A service-account key; `origin` says where it was found.
    ServiceAccount {
        origin: String,
        key: ServiceAccountKey,
    },
    /// Upstream's `AltTokenSource`.
    Alt { url: String, body: String },
}

impl Credentials {
    /// Resolves `source`, with the environment given by `env`; a key file that cannot be
    /// used is an error naming it.
    pub fn resolve(source: &TokenSource, env: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let creds = match source {
            TokenSource::Anonymous => Credentials::Anonymous,
            TokenSource::Metadata => Credentials::Metadata { adc: None },
            TokenSource::Alt { url, body } => Credentials::Alt {
                url: url.clone(),
                body: body.clone(),
            },
            TokenSource::KeyFile(path) => {
                let what = "[Hypercloud] credentials-file";
                Credentials::ServiceAccount {
                    origin: format!("the service-account key {what} {}", path.display()),
                    key: ServiceAccountKey::from_file(what, path)?,
                }
            }
            TokenSource::DefaultCredentials => match find_default_credentials(env)? {
                Found::KeyFile { origin, key } => Credentials::ServiceAccount {
                    origin: format!("the service-account key of {origin}"),
                    key,
                },
                Found::Metadata { looked } => Credentials::Metadata { adc: Some(looked) },
            },
        };
        match &creds {
            Credentials::Anonymous => tracing::info!("gce credentials: none (anonymous requests)"),
            Credentials::Metadata { adc: None } => {
                tracing::info!("gce credentials: the metadata server's default service account")
            }
            Credentials::Metadata { adc: Some(looked) } => tracing::info!(
                "gce credentials: Application Default Credentials: the metadata server's default service account ({looked})"
            ),
            Credentials::ServiceAccount { origin, key } => tracing::info!(
                client_email = %key.client_email, token_uri = %key.token_uri,
                "gce credentials: {origin}"
            ),
            Credentials::Alt { url, .. } => tracing::info!("gce credentials: token-url {url}"),
        }
        Ok(creds)
    }
}

/// The Compute Engine v1 client of one project.
#[derive(Debug)]
pub(crate) struct Compute {
    http: reqwest::Client,
    /// `.../compute/v1/`
    base: String,
    pub project: String,
    credentials: Arc<Credentials>,
    metadata: Metadata,
    token: Mutex<Option<Token>>,
    operation_timeout: Duration,
    calls: AtomicU64,
}

/// GCE's error body: `{"error": {"code", "message", "errors": [{"reason"}]}}`; what it says
/// is quoted as an excerpt.
fn api_error(operation: &str, status: u16, body: &str) -> Error {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = v["error"]["message"]
        .as_str()
        .map_or_else(|| excerpt_str(body), excerpt_str);
    let reason = v["error"]["errors"][0]["reason"]
        .as_str()
        .map(excerpt_str)
        .unwrap_or_default();
    Error::Api {
        operation: operation.into(),
        status,
        reason,
        message,
    }
}

impl Compute {
    pub fn new(
        config: &Config,
        project: String,
        metadata: Metadata,
        credentials: Arc<Credentials>,
    ) -> Result<Self> {
        Ok(Compute {
            http: HttpClientConfig::new(REQUEST_TIMEOUT, CONNECT_TIMEOUT).build()?,
            base: config.global.api_endpoint.clone(),
            project,
            credentials,
            metadata,
            token: Mutex::new(None),
            operation_timeout: config.tuning.operation_timeout,
            calls: AtomicU64::new(0),
        })
    }

    /// Requests sent so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    async fn token(&self) -> Result<Option<String>> {
        let mut cached = self.token.lock().await;
        if let Some(t) = cached.as_ref().filter(|t| t.until > Instant::now()) {
            return Ok(Some(t.value.clone()));
        }
        let fresh = match &*self.credentials {
            Credentials::Anonymous => return Ok(None),
            Credentials::Metadata { adc } => {
                let path = "instance/service-accounts/default/token";
                let got = self.metadata.get(path).await.and_then(|text| {
                    serde_json::from_str::<Value>(&text).map_err(|e| Error::Metadata {
                        path: path.into(),
                        message: e.to_string(),
                    })
                });
                let v = match (got, adc) {
                    (Ok(v), _) => v,
                    (Err(e), None) => return Err(e),
                    (Err(e), Some(looked)) => {
                        return Err(Error::Token {
                            origin: "Application Default Credentials".into(),
                            message: format!(
                                "could not find default credentials: {looked}, and the metadata server gave no token: {e}"
                            ),
                        })
                    }
                };
                let secs = v["expires_in"].as_u64().unwrap_or(60).clamp(1, 86_400);
                Token {
                    value: v["access_token"].as_str().unwrap_or_default().to_owned(),
                    until: Instant::now() + good_for(Duration::from_secs(secs)),
                }
            }
            Credentials::ServiceAccount { origin, key } => {
                self.service_account_token(origin, key).await?
            }
            Credentials::Alt { url, body } => {
                let op = "token-url";
                let resp = self
                    .http
                    .post(url)
                    .header("Content-Type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .map_err(|e| Error::Transport {
                        operation: op.into(),
                        message: e.to_string(),
                    })?;
                let status = resp.status().as_u16();
                if !(200..300).contains(&status) {
                    let (prefix, _) = http_body::read_prefix(reqwest::Body::from(resp)).await;
                    return Err(api_error(op, status, &String::from_utf8_lossy(&prefix)));
                }
                let text = read_answer(resp, OBJECT_LIMIT, op).await?;
                let v: Value = serde_json::from_str(&text).map_err(|e| Error::Decode {
                    operation: op.into(),
                    message: e.to_string(),
                })?;
                let value = v["accessToken"].as_str().ok_or_else(|| Error::Decode {
                    operation: op.into(),
                    message: "no accessToken in the answer".into(),
                })?;
                // The expiry is an RFC 3339 time; without a date library, keep a token five
                // minutes (upstream refreshes well before expiry too).
                Token {
                    value: value.to_owned(),
                    until: Instant::now() + Duration::from_secs(300),
                }
            }
        };
        let value = fresh.value.clone();
        *cached = Some(fresh);
        Ok(Some(value))
    }

    /// An access token for a service-account key: a signed assertion exchanged at the key's
    /// `token_uri` (RFC 7523), as Google's `JWTConfig` token source does.
    async fn service_account_token(&self, origin: &str, key: &ServiceAccountKey) -> Result<Token> {
        let err = |message: String| Error::Token {
            origin: format!("{origin} ({})", key.client_email),
            message,
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let assertion = key.assertion(CLOUD_PLATFORM_SCOPE, now)?;
        // The assertion is base64url and dots: only the grant type needs escaping.
        let body = format!(
            "grant_type={}&assertion={assertion}",
            JWT_BEARER_GRANT.replace(':', "%3A")
        );
        let resp = self
            .http
            .post(&key.token_uri)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| err(format!("{}: {}", key.token_uri, Chain(&e))))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(resp)).await;
            let v: Value = serde_json::from_slice(&prefix).unwrap_or(Value::Null);
            let message = match (v["error"].as_str(), v["error_description"].as_str()) {
                (Some(e), Some(d)) => format!("{}: {}", excerpt_str(e), excerpt_str(d)),
                (Some(e), None) => excerpt_str(e),
                _ => excerpt(&prefix),
            };
            return Err(err(format!(
                "{} answered HTTP {status}: {message}",
                key.token_uri
            )));
        }
        let text = read_answer(resp, OBJECT_LIMIT, "token").await?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| err(format!("{}: the answer is not JSON: {e}", key.token_uri)))?;
        let value = v["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| err(format!("{}: no access_token in the answer", key.token_uri)))?;
        let secs = v["expires_in"].as_u64().unwrap_or(3600).clamp(1, 86_400);
        tracing::debug!(client_email = %key.client_email, expires_in = secs, "gce access token renewed");
        Ok(Token {
            value: value.to_owned(),
            until: Instant::now() + good_for(Duration::from_secs(secs)),
        })
    }

    /// The full URL of a path (for references in request bodies and filters).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The path of `rest` in the provider's project (`zones/z/instances/i` →
    /// `projects/p/zones/z/instances/i`).
    pub fn path(&self, rest: &str) -> String {
        format!("projects/{}/{rest}", self.project)
    }

    /// One request to `path` (under the API endpoint, `projects/p/...`); `operation` names it
    /// in errors (`instances.get`).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
        operation: &str,
    ) -> Result<Value> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .query(query);
        if let Some(t) = self.token().await? {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| Error::Transport {
            operation: operation.into(),
            message: e.to_string(),
        })?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(resp)).await;
            return Err(api_error(
                operation,
                status,
                &String::from_utf8_lossy(&prefix),
            ));
        }
        // A page of a list (asked for with maxResults) may be large; any other answer is one
        // object or operation.
        let limit = if query.iter().any(|(k, _)| *k == "maxResults") {
            LIST_LIMIT
        } else {
            OBJECT_LIMIT
        };
        let text = read_answer(resp, limit, operation).await?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| Error::Decode {
            operation: operation.into(),
            message: excerpt_str(&e.to_string()),
        })
    }

    pub async fn get(&self, path: &str, operation: &str) -> Result<Value> {
        self.call(reqwest::Method::GET, path, &[], None, operation)
            .await
    }

    /// Every item of a list (following `nextPageToken`, bounded, no token twice), with a
    /// `filter`.
    pub async fn list(&self, path: &str, filter: &str, operation: &str) -> Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut pager = Pager::new("compute", operation);
        let mut token = String::new();
        loop {
            let mut q = vec![("maxResults", "500")];
            if !filter.is_empty() {
                q.push(("filter", filter));
            }
            if !token.is_empty() {
                q.push(("pageToken", token.as_str()));
            }
            let page = self
                .call(reqwest::Method::GET, path, &q, None, operation)
                .await?;
            if let Some(a) = page["items"].as_array() {
                items.extend(a.iter().cloned());
            }
            match pager.next(page["nextPageToken"].as_str())? {
                Some(t) => token = t,
                None => return Ok(items),
            }
        }
    }

    /// A mutation: sends it and waits for its operation to finish.
    pub async fn mutate(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        operation: &str,
    ) -> Result<()> {
        self.mutate_query(method, path, &[], body, operation).await
    }

    /// [`Compute::mutate`] with a query (`instances.detachDisk` names the device in it).
    pub async fn mutate_query(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
        operation: &str,
    ) -> Result<()> {
        let op = self.call(method, path, query, body, operation).await?;
        self.wait(op, operation).await
    }

    /// Waits for an operation (`zoneOperations.wait` etc.) until it is `DONE`, backing off
    /// between `wait` calls (a server may answer them at once, still `RUNNING`) and giving up
    /// after `[Hypercloud] operation-timeout`; its `error` becomes [`Error::Operation`].
    pub async fn wait(&self, op: Value, operation: &str) -> Result<()> {
        let name = op["name"].as_str().unwrap_or_default().to_owned();
        let wait_path = self.operation_wait_path(&op, &name);
        let mut first = Some(op);
        let backoff = Backoff::new(
            OPERATION_POLL_FIRST,
            OPERATION_POLL_MAX,
            self.operation_timeout,
        );
        let done = poll_until(backoff, || {
            let known = first.take();
            let wait_path = &wait_path;
            async move {
                let op = match known {
                    Some(op) => op,
                    None => {
                        self.call(
                            reqwest::Method::POST,
                            wait_path,
                            &[],
                            None,
                            "operations.wait",
                        )
                        .await?
                    }
                };
                if op["status"] == "DONE" {
                    return Ok(Poll::Ready(op));
                }
                let status = op["status"].as_str().unwrap_or("without a status");
                Ok::<_, Error>(Poll::Pending(status.chars().take(32).collect()))
            }
        })
        .await;
        let op = match done {
            Ok(op) => op,
            Err(WaitError::Failed(e)) => return Err(e),
            Err(WaitError::TimedOut(t)) => {
                return Err(Error::Operation {
                    operation: operation.into(),
                    name,
                    message: t.to_string(),
                })
            }
        };
        if let Some(errors) = op["error"]["errors"].as_array() {
            let message = errors
                .iter()
                .filter_map(|e| e["message"].as_str().map(excerpt_str))
                .take(5)
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Error::Operation {
                operation: operation.into(),
                name: op["name"].as_str().unwrap_or_default().into(),
                message,
            });
        }
        Ok(())
    }
}

impl Compute {
    /// `projects/P/<scope>/operations/N/wait` of an operation: its own link says which
    /// project and scope it lives in.
    fn operation_wait_path(&self, op: &Value, name: &str) -> String {
        let link = op["selfLink"].as_str().unwrap_or_default();
        let project = link
            .split("/projects/")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or(&self.project);
        let scope = if let Some(z) = op["zone"].as_str() {
            format!("zones/{}", last_segment(z))
        } else if let Some(r) = op["region"].as_str() {
            format!("regions/{}", last_segment(r))
        } else {
            "global".to_owned()
        };
        format!("projects/{project}/{scope}/operations/{name}/wait")
    }
}

/// The body of a successful answer, at most `limit` bytes, as text.
async fn read_answer(resp: reqwest::Response, limit: u64, operation: &str) -> Result<String> {
    let bytes = http_body::read_limited(
        reqwest::Body::from(resp),
        limit,
        "Compute Engine",
        operation,
    )
    .await
    .map_err(|e| Error::Transport {
        operation: operation.into(),
        message: Chain(&e).to_string(),
    })?;
    String::from_utf8(bytes).map_err(|e| Error::Decode {
        operation: operation.into(),
        message: format!("not UTF-8: {}", excerpt(e.as_bytes())),
    })
}

/// The last path segment of a GCE reference (`.../zones/us-central1-a` → `us-central1-a`).
pub fn last_segment(reference: &str) -> &str {
    reference
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(reference)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gce_error_bodies_are_read() {
        let e = api_error(
            "instances.get",
            404,
            r#"{"error": {"code": 404, "message": "The resource 'x' was not found", "errors": [{"reason": "notFound"}]}}"#,
        );
        assert!(e.is_not_found());
        assert_eq!(
            e.to_string(),
            "instances.get: HTTP 404 notFound: The resource 'x' was not found"
        );
        let e = api_error("x", 502, "<html>bad gateway</html>");
        assert!(e.to_string().contains("bad gateway"));
    }
}
