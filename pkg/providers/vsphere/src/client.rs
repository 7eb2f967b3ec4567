//! One authenticated connection to vCenter: the SOAP endpoint (`/sdk`, session cookie
//! `vmware_soap_session`) and the vAPI REST endpoint (`/rest`, header
//! `vmware-api-session-id`).
//!
//! Sessions are created lazily and again when vCenter says they are gone (the SOAP fault
//! `NotAuthenticated`, HTTP 401 from vAPI): the failed call is then repeated once. Concurrent
//! callers that hit an expired session log in once between them (a generation counter).
//! Upstream equivalent: govmomi's `session.KeepAlive`/`session.Manager` as the vSphere
//! providers use it through `vclib.VSphereConnection` (which re-logs in on `NotAuthenticated`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hypercloud_cloudprovider::http_body::{self, excerpt_str, LIST_LIMIT};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::retry::{retryable_status, Attempt, RetryPolicy};
use hypercloud_cloudprovider::Chain;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, OnceCell, RwLock};

use crate::config::{Secret, VCenter};
use crate::soap::{self, Method, Moref, ServiceContent};
use crate::{Error, Result};

const SOAP_ACTION: &str = "urn:vim25/6.5";
const SESSION_COOKIE: &str = "vmware_soap_session";
/// One HTTP round trip (connect, send, answer). Upstream's config has no key for it; govmomi's
/// clients use none, which is how a slow vCenter times every retry by minutes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// One SOAP call, all its `soap-roundtrip-count` attempts together: one deadline, so a slow
/// endpoint costs at most this, not the request timeout times the round-trip count.
const CALL_DEADLINE: Duration = Duration::from_secs(60);
/// Connecting to vCenter: an unreachable address fails fast.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first pause before repeating a call (it doubles, with jitter).
const RETRY_FIRST_DELAY: Duration = Duration::from_millis(50);
/// The longest pause before repeating a call.
const RETRY_MAX_DELAY: Duration = Duration::from_secs(1);
/// Shown in vCenter's session list.
pub(crate) const USER_AGENT: &str = concat!("hypercloud-vsphere/", env!("CARGO_PKG_VERSION"));

#[derive(Default)]
struct Session {
    /// `vmware_soap_session="..."`, as sent back in `Cookie`.
    cookie: Option<String>,
    /// Bumped by every login.
    generation: u64,
    /// The [`Credentials`] version the session was logged in with.
    credentials: u64,
}

/// Who logs in: the config's user and password, replaced when a followed credentials Secret
/// changes ([`Credentials::replace`]); sessions of an older version are not used again.
#[derive(Debug)]
pub(crate) struct Credentials {
    current: std::sync::RwLock<std::sync::Arc<(String, Secret)>>,
    version: AtomicU64,
}

impl Credentials {
    fn new(user: String, password: Secret) -> Self {
        Credentials {
            current: std::sync::RwLock::new(std::sync::Arc::new((user, password))),
            version: AtomicU64::new(0),
        }
    }

    /// The user and password in use.
    fn get(&self) -> std::sync::Arc<(String, Secret)> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Logs in with `user` and `password` from the next call on.
    pub fn replace(&self, user: String, password: Secret) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) =
            std::sync::Arc::new((user, password));
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }
}

/// The connection.
pub(crate) struct Client {
    http: reqwest::Client,
    vc: VCenter,
    content: OnceCell<ServiceContent>,
    soap: RwLock<Session>,
    soap_login: Mutex<()>,
    /// The vAPI session and the [`Credentials`] version it was created with.
    vapi: RwLock<Option<(String, u64)>>,
    credentials: std::sync::Arc<Credentials>,
    calls: AtomicU64,
    logins: AtomicU64,
}

impl Client {
    pub fn new(vc: VCenter) -> Result<Self> {
        let http = HttpClientConfig::new(REQUEST_TIMEOUT, CONNECT_TIMEOUT)
            .user_agent(USER_AGENT)
            .insecure(vc.insecure)
            .ca_file("[VirtualCenter] ca-file", vc.ca_file.as_deref())
            .thumbprint("[VirtualCenter] thumbprint", vc.thumbprint.as_ref())
            .build()?;
        Ok(Client {
            http,
            credentials: std::sync::Arc::new(Credentials::new(
                vc.user.clone(),
                vc.password.clone(),
            )),
            vc,
            content: OnceCell::new(),
            soap: RwLock::new(Session::default()),
            soap_login: Mutex::new(()),
            vapi: RwLock::new(None),
            calls: AtomicU64::new(0),
            logins: AtomicU64::new(0),
        })
    }

    /// HTTP requests sent so far (SOAP and REST, logins included).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// SOAP logins so far (the first and every re-login).
    pub fn logins(&self) -> u64 {
        self.logins.load(Ordering::Relaxed)
    }

    pub fn vcenter(&self) -> &VCenter {
        &self.vc
    }

    /// Who logs in, shared with whatever replaces the credentials.
    pub fn credentials(&self) -> std::sync::Arc<Credentials> {
        self.credentials.clone()
    }

    /// `RetrieveServiceContent`, once (it needs no session).
    pub async fn service_content(&self) -> Result<&ServiceContent> {
        self.content
            .get_or_try_init(|| async {
                let sc = self
                    .post(&soap::RetrieveServiceContent::new(Moref::new(
                        "ServiceInstance",
                        "ServiceInstance",
                    )))
                    .await?;
                tracing::info!(server = %self.vc.address(), product = %sc.about.full_name, api = %sc.about.api_version, "connected to vSphere");
                Ok(sc)
            })
            .await
    }

    /// Calls a SOAP method built from the service content, logging in first when there is
    /// no session and again (once) when vCenter says the session is gone.
    pub async fn call<M: Method>(
        &self,
        build: impl Fn(&ServiceContent) -> Result<M>,
    ) -> Result<M::Return> {
        let sc = self.service_content().await?;
        let generation = self.ensure_session().await?;
        match self.post(&build(sc)?).await {
            Err(e) if e.is_not_authenticated() => {
                tracing::info!(
                    method = M::NAME,
                    "vCenter session expired; logging in again"
                );
                self.relogin(generation).await?;
                self.post(&build(sc)?).await
            }
            other => other,
        }
    }

    /// The generation of the current session, after logging in if there is none.
    pub async fn ensure_session(&self) -> Result<u64> {
        let seen = {
            let s = self.soap.read().await;
            if s.cookie.is_some() && s.credentials == self.credentials.version() {
                return Ok(s.generation);
            }
            s.generation
        };
        self.relogin(seen).await
    }

    /// The current session generation (0 before the first login).
    pub async fn generation(&self) -> u64 {
        self.soap.read().await.generation
    }

    /// Logs in unless another caller already did since `seen` was current.
    async fn relogin(&self, seen: u64) -> Result<u64> {
        let _one = self.soap_login.lock().await;
        {
            let s = self.soap.read().await;
            if s.cookie.is_some()
                && s.generation != seen
                && s.credentials == self.credentials.version()
            {
                return Ok(s.generation);
            }
        }
        self.soap.write().await.cookie = None;
        let sc = self.service_content().await?;
        let sm = sc.session_manager.clone().ok_or_else(|| Error::Decode {
            operation: "RetrieveServiceContent".into(),
            status: 200,
            message: "no sessionManager in the service content".into(),
        })?;
        let version = self.credentials.version();
        let creds = self.credentials.get();
        let (user, password) = (&creds.0, &creds.1);
        let login = soap::Login::new(sm, user.clone(), password.expose().to_owned());
        self.logins.fetch_add(1, Ordering::Relaxed);
        let cookie = match self.post_raw(&login).await {
            Ok((session, cookie)) => {
                tracing::debug!(user = %session.user_name, "vCenter session created");
                cookie.ok_or_else(|| Error::Decode {
                    operation: "Login".into(),
                    status: 200,
                    message: format!("no {SESSION_COOKIE} cookie in the answer"),
                })?
            }
            Err(Error::Fault { fault, message, .. }) if fault == "InvalidLogin" => {
                return Err(Error::InvalidLogin {
                    server: self.vc.address(),
                    user: user.clone(),
                    fault: message,
                })
            }
            Err(e) => return Err(e),
        };
        let mut s = self.soap.write().await;
        s.cookie = Some(cookie);
        s.generation += 1;
        s.credentials = version;
        tracing::debug!(generation = s.generation, "logged in to vCenter");
        Ok(s.generation)
    }

    /// `SessionManager.Logout` and `DELETE /rest/com/vmware/cis/session`, if logged in.
    pub async fn logout(&self) -> Result<()> {
        if let Some((token, _)) = self.vapi.write().await.take() {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let _ = self
                .http
                .delete(format!(
                    "{}/rest/com/vmware/cis/session",
                    self.vc.base_url()
                ))
                .header("vmware-api-session-id", token)
                .send()
                .await;
        }
        if self.soap.read().await.cookie.is_none() {
            return Ok(());
        }
        let sc = self.service_content().await?;
        if let Some(sm) = sc.session_manager.clone() {
            self.post(&soap::Logout::new(sm)).await?;
        }
        self.soap.write().await.cookie = None;
        Ok(())
    }

    async fn post<M: Method>(&self, m: &M) -> Result<M::Return> {
        self.post_raw(m).await.map(|(r, _)| r)
    }

    /// One SOAP round trip, repeated on connection errors up to `soap-roundtrip-count` times.
    async fn post_raw<M: Method>(&self, m: &M) -> Result<(M::Return, Option<String>)> {
        let body = m.to_xml().map_err(|e| Error::Decode {
            operation: M::NAME.into(),
            status: 0,
            message: format!("encoding the request: {e}"),
        })?;
        let url = format!("{}/sdk", self.vc.base_url());
        let deadline = tokio::time::Instant::now() + CALL_DEADLINE;
        let cookie = self.soap.read().await.cookie.clone();
        // Every method is repeated on connection errors and timeouts, as govmomi's
        // `vim25.Retry(.., TemporaryNetworkError(soap-roundtrip-count))` round tripper does;
        // never on an answer (a SOAP fault is an HTTP 500 and final).
        let attempt = |_| {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let mut req = self
                .http
                .post(&url)
                .timeout(left.min(REQUEST_TIMEOUT))
                .header("Content-Type", "text/xml; charset=utf-8")
                .header("SOAPAction", SOAP_ACTION)
                .body(body.clone());
            if let Some(c) = &cookie {
                req = req.header("Cookie", c);
            }
            async move {
                match req.send().await {
                    Err(e)
                        if (e.is_connect() || e.is_timeout())
                            && tokio::time::Instant::now() < deadline =>
                    {
                        Attempt::Again {
                            outcome: Err(e),
                            retry_after: None,
                        }
                    }
                    other => Attempt::Done(other),
                }
            }
        };
        let retried = self
            .retry_policy()
            .run(attempt, |e, attempt, delay| {
                if let Err(e) = e {
                    tracing::debug!(method = M::NAME, attempt, error = %e, ?delay, "retrying SOAP call");
                }
            })
            .await;
        let resp = retried.outcome.map_err(|e| Error::Transport {
            operation: M::NAME.into(),
            // With the causes: a refused certificate is said there, not in reqwest's message.
            message: format!("POST {url}: {}", Chain(&e)),
        })?;
        let status = resp.status().as_u16();
        let cookie = resp
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with(SESSION_COOKIE))
            .and_then(|v| v.split(';').next())
            .map(str::to_owned);
        // A page of the property collector may be large; a fault is read only as far as
        // ERROR_PREFIX_LIMIT.
        let text = read_text(M::NAME, status, resp, "vSphere SOAP").await?;
        if status == 200 {
            let r: soap::Response<M::Return> =
                quick_xml::de::from_str(&text).map_err(|e| Error::Decode {
                    operation: M::NAME.into(),
                    status,
                    message: format!("{}: {}", excerpt_str(&e.to_string()), excerpt_str(&text)),
                })?;
            return Ok((r.into_inner(), cookie));
        }
        match quick_xml::de::from_str::<soap::FaultEnvelope>(&text) {
            Ok(f) => {
                let (fault, message) = f.fault();
                Err(Error::Fault {
                    operation: M::NAME.into(),
                    fault: excerpt_str(&fault),
                    message: excerpt_str(&message),
                })
            }
            Err(_) => Err(Error::Decode {
                operation: M::NAME.into(),
                status,
                message: excerpt_str(&text),
            }),
        }
    }

    /// The shared retry policy with `soap-roundtrip-count` attempts, pausing from 50 ms to 1 s.
    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::new(self.vc.roundtrip_count, RETRY_FIRST_DELAY, RETRY_MAX_DELAY)
    }

    /// An idempotent read (a vAPI GET), repeated on connection errors, 429 and 5xx; each
    /// attempt counts as a call. Writes are sent once: vAPI has no request IDs to make a
    /// repeated POST safe, and govmomi's REST client does not repeat them either.
    async fn read(
        &self,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> std::result::Result<reqwest::Response, reqwest::Error> {
        let attempt = |_| {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let req = build();
            async move {
                match req.send().await {
                    Err(e) => Attempt::Again {
                        outcome: Err(e),
                        retry_after: None,
                    },
                    Ok(r) if retryable_status(r.status().as_u16()) => Attempt::Again {
                        outcome: Ok(r),
                        retry_after: None,
                    },
                    Ok(r) => Attempt::Done(Ok(r)),
                }
            }
        };
        self.retry_policy()
            .run(attempt, |_, attempt, delay| {
                tracing::debug!(attempt, ?delay, "retrying vAPI read");
            })
            .await
            .outcome
    }

    // ------------------------------------------------------------ vAPI REST

    async fn vapi_token(&self, stale: Option<&str>) -> Result<String> {
        let mut slot = self.vapi.write().await;
        let version = self.credentials.version();
        if let Some((t, v)) = slot.as_ref() {
            if Some(t.as_str()) != stale && *v == version {
                return Ok(t.clone());
            }
        }
        let creds = self.credentials.get();
        let (user, password) = (&creds.0, &creds.1);
        self.calls.fetch_add(1, Ordering::Relaxed);
        let op = "POST /rest/com/vmware/cis/session";
        let resp = self
            .http
            .post(format!(
                "{}/rest/com/vmware/cis/session",
                self.vc.base_url()
            ))
            .basic_auth(user, Some(password.expose()))
            .send()
            .await
            .map_err(|e| Error::Transport {
                operation: op.into(),
                message: Chain(&e).to_string(),
            })?;
        let status = resp.status().as_u16();
        if status == 401 || status == 403 {
            return Err(Error::InvalidLogin {
                server: self.vc.address(),
                user: user.clone(),
                fault: format!("vAPI session: HTTP {status}"),
            });
        }
        let token: Wrapped<String> = read_json(op, resp).await?;
        *slot = Some((token.value.clone(), version));
        Ok(token.value)
    }

    /// A vAPI call answering `{"value": T}`; `body` makes it a POST.
    pub async fn rest<T: DeserializeOwned, B: Serialize>(
        &self,
        path: &str,
        body: Option<&B>,
    ) -> Result<T> {
        let mut token = self.vapi_token(None).await?;
        for attempt in 0..2 {
            let url = format!("{}{path}", self.vc.base_url());
            let resp = match body {
                Some(b) => {
                    self.http
                        .post(&url)
                        .json(b)
                        .header("vmware-api-session-id", &token)
                        .send()
                        .await
                }
                None => {
                    self.read(|| self.http.get(&url).header("vmware-api-session-id", &token))
                        .await
                }
            }
            .map_err(|e| Error::Transport {
                operation: path.into(),
                message: Chain(&e).to_string(),
            })?;
            if resp.status().as_u16() == 401 && attempt == 0 {
                tracing::info!(path, "vAPI session expired; creating a new one");
                token = self.vapi_token(Some(&token)).await?;
                continue;
            }
            let w: Wrapped<T> = read_json(path, resp).await?;
            return Ok(w.value);
        }
        Err(Error::Rest {
            operation: path.into(),
            status: 401,
            message: "still unauthenticated after a new session".into(),
        })
    }
}

#[derive(Deserialize)]
struct Wrapped<T> {
    value: T,
}

async fn read_json<T: DeserializeOwned>(op: &str, resp: reqwest::Response) -> Result<T> {
    let status = resp.status().as_u16();
    let text = read_text(op, status, resp, "vSphere vAPI").await?;
    if !(200..300).contains(&status) {
        return Err(Error::Rest {
            operation: op.into(),
            status,
            message: excerpt_str(&text),
        });
    }
    serde_json::from_str(&text).map_err(|e| Error::Decode {
        operation: op.into(),
        status,
        message: format!("{}: {}", excerpt_str(&e.to_string()), excerpt_str(&text)),
    })
}

/// The text of an answer: of a success, the whole body up to [`LIST_LIMIT`]; of anything
/// else, its first [`ERROR_PREFIX_LIMIT`](http_body) bytes.
async fn read_text(op: &str, status: u16, resp: reqwest::Response, api: &str) -> Result<String> {
    let bytes = if (200..300).contains(&status) {
        http_body::read_limited(reqwest::Body::from(resp), LIST_LIMIT, api, op)
            .await
            .map_err(|e| Error::Transport {
                operation: op.into(),
                message: Chain(&e).to_string(),
            })?
    } else {
        http_body::read_prefix(reqwest::Body::from(resp)).await.0
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
