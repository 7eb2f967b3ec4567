//! Photon Controller's REST API as the legacy provider's SDK spoke it: JSON under `/v1`, lists
//! as pages joined by following `nextPageLink`, changes answered with a task that is polled at
//! `/v1/tasks/{id}` until `COMPLETED` or `ERROR`, and, with `authentication`, a Lightwave
//! token (a password grant at the endpoint `GET /v1/auth` names) sent as `Authorization:
//! Bearer`, fetched again once when the API answers 401.

use std::time::Duration;

use hypercloud_cloudprovider::http_body::{self, LIST_LIMIT};
use hypercloud_cloudprovider::http_client::HttpClientConfig;
use hypercloud_cloudprovider::wait::{poll_until, Backoff, Poll, WaitError};
use hypercloud_cloudprovider::{Chain, Error, Message, Result};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::Config;
use crate::PROVIDER_NAME;

/// One request to the endpoint.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a task may take: upstream's SDK waited 30 minutes; a disk attach or create that
/// takes five is stuck, and the controllers retry.
const TASK_TIMEOUT: Duration = Duration::from_secs(300);
/// The first pause between task polls (the SDK polled every 100 ms).
const TASK_POLL_FIRST: Duration = Duration::from_millis(100);
const TASK_POLL_MAX: Duration = Duration::from_secs(5);
/// Pages followed before a list is refused as endless.
const MAX_PAGES: usize = 1000;
/// The scope the SDK asked Lightwave for.
const TOKEN_SCOPE: &str = "openid offline_access rs_photon_platform at_groups";

/// A VM as `GET /v1/projects/{id}/vms` shows it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Vm {
    pub id: String,
    pub name: String,
    /// `STARTED`, `STOPPED`, `CREATING`, `SUSPENDED`, `ERROR`.
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub flavor: String,
}

/// A persistent disk as `GET /v1/disks/{id}` shows it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub flavor: String,
    #[serde(default)]
    pub capacity_gb: u64,
    #[serde(default)]
    pub state: String,
    /// The VMs it is attached to.
    #[serde(default)]
    pub vms: Vec<String>,
}

/// One network connection of `GetNetworks`' task.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    #[serde(default)]
    pub ip_address: Option<String>,
    #[serde(default)]
    pub mac_address: Option<String>,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    items: Vec<Value>,
    #[serde(default, rename = "nextPageLink")]
    next: Option<String>,
}

#[derive(Deserialize)]
struct Named {
    id: String,
    name: String,
}

/// The task of a change; the entity is what it made or changed.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub entity: Entity,
    #[serde(default)]
    steps: Vec<Step>,
    #[serde(default)]
    pub resource_properties: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Entity {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Clone, Debug, Deserialize)]
struct Step {
    #[serde(default)]
    state: String,
    #[serde(default)]
    errors: Vec<ApiError>,
}

/// Photon's error body.
#[derive(Clone, Debug, Deserialize)]
struct ApiError {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// The endpoint, with the token when `authentication` is on.
pub struct Client {
    http: reqwest::Client,
    target: String,
    login: Option<(String, String)>,
    token: Mutex<Option<String>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("target", &self.target)
            .field("authentication", &self.login.is_some())
            .finish_non_exhaustive()
    }
}

fn cloud_error(operation: &str, message: impl Into<String>) -> Error {
    Error::cloud(PROVIDER_NAME, operation, message.into())
}

/// What went wrong with one request: 404 apart, because several callers take it as "gone".
enum Failure {
    NotFound,
    Other(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Other(e)
    }
}

impl Failure {
    fn into_error(self, operation: &str, path: &str) -> Error {
        match self {
            Failure::NotFound => Error::Cloud {
                provider: PROVIDER_NAME.into(),
                operation: operation.into(),
                status: Some(404),
                request_id: None,
                source: Box::new(Message(format!("{path}: not found"))),
            },
            Failure::Other(e) => e,
        }
    }
}

impl Client {
    /// A client of `config.target` with the login from the login info file when
    /// `authentication` is on (read now: a missing file stops start-up, as upstream).
    pub fn new(config: &Config) -> Result<Client> {
        let http = HttpClientConfig::new(REQUEST_TIMEOUT, CONNECT_TIMEOUT)
            .user_agent("hypercloud-photon")
            .ca_file("[Hypercloud] ca-file", config.ca_file.as_deref())
            .insecure(config.ignore_certificate)
            .build()
            .map_err(|e| cloud_error("build the HTTP client", Chain(&e).to_string()))?;
        let login = if config.authentication {
            Some(
                crate::config::read_login_info(&config.login_info_file)
                    .map_err(|m| cloud_error("read the login info", m))?,
            )
        } else {
            None
        };
        Ok(Client {
            http,
            target: config.target.clone(),
            login,
            token: Mutex::new(None),
        })
    }

    /// A Lightwave token: `GET /v1/auth` says where Lightwave is, then a password grant.
    async fn fetch_token(&self, user: &str, password: &str) -> Result<String> {
        let op = "log in to Lightwave";
        #[derive(Deserialize)]
        struct AuthInfo {
            #[serde(default)]
            enabled: bool,
            #[serde(default)]
            endpoint: String,
            #[serde(default)]
            port: u16,
        }
        let info: AuthInfo = self
            .send_json(reqwest::Method::GET, "/v1/auth", None, None)
            .await
            .map_err(|f| f.into_error(op, "/v1/auth"))?;
        if !info.enabled || info.endpoint.is_empty() {
            return Err(cloud_error(
                op,
                format!(
                    "[Global] authentication is true but the Photon Controller at {} has authentication disabled (GET /v1/auth)",
                    self.target
                ),
            ));
        }
        // The SDK always used https; the endpoint's own scheme serves a plain-HTTP test cloud.
        let scheme = self.target.split("://").next().unwrap_or("https");
        let port = if info.port == 0 { 443 } else { info.port };
        let host = if info.endpoint.contains(':') && !info.endpoint.starts_with('[') {
            format!("[{}]", info.endpoint)
        } else {
            info.endpoint.clone()
        };
        let url = format!("{scheme}://{host}:{port}/openidconnect/token");
        let form = [
            ("grant_type", "password"),
            ("username", user),
            ("password", password),
            ("scope", TOKEN_SCOPE),
        ];
        let response = self
            .http
            .post(&url)
            .form(&form)
            .send()
            .await
            .map_err(|e| cloud_error(op, format!("{url}: {}", Chain(&e))))?;
        let status = response.status();
        let body =
            http_body::read_limited(reqwest::Body::from(response), LIST_LIMIT, "Lightwave", op)
                .await
                .map_err(|e| cloud_error(op, Chain(&e).to_string()))?;
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        match v["access_token"].as_str() {
            Some(t) if status.is_success() && !t.is_empty() => Ok(t.to_owned()),
            _ => Err(Error::Cloud {
                provider: PROVIDER_NAME.into(),
                operation: op.into(),
                status: Some(status.as_u16()),
                request_id: None,
                source: Box::new(Message(format!(
                    "{url}: the password grant of {user:?} was refused: {}",
                    v["error_description"]
                        .as_str()
                        .map_or_else(|| http_body::excerpt(&body), str::to_owned)
                ))),
            }),
        }
    }

    async fn token(&self, renew: bool) -> Result<Option<String>> {
        let Some((user, password)) = &self.login else {
            return Ok(None);
        };
        let mut held = self.token.lock().await;
        if renew || held.is_none() {
            *held = Some(self.fetch_token(user, password).await?);
        }
        Ok(held.clone())
    }

    /// One request; a 401 with a token fetches a new one and tries once more.
    async fn send_json<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> std::result::Result<T, Failure> {
        let op = format!("{method} {}", path.split('?').next().unwrap_or(path));
        let url = format!("{}{path}", self.target);
        let mut req = self
            .http
            .request(method.clone(), &url)
            .header("Accept", "application/json");
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let response = req
            .send()
            .await
            .map_err(|e| cloud_error(&op, format!("{url}: {}", Chain(&e))))?;
        let status = response.status();
        let bytes = http_body::read_limited(
            reqwest::Body::from(response),
            LIST_LIMIT,
            "Photon Controller",
            &op,
        )
        .await
        .map_err(|e| cloud_error(&op, Chain(&e).to_string()))?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(Failure::NotFound);
        }
        if !status.is_success() {
            let why = match serde_json::from_slice::<ApiError>(&bytes) {
                Ok(e) if !e.code.is_empty() => format!("{}: {}", e.code, e.message),
                _ => http_body::excerpt(&bytes),
            };
            let why = if status == reqwest::StatusCode::UNAUTHORIZED && self.login.is_none() {
                format!("{why} (the endpoint needs a token: set [Global] authentication = true)")
            } else {
                why
            };
            return Err(Failure::Other(Error::Cloud {
                provider: PROVIDER_NAME.into(),
                operation: op,
                status: Some(status.as_u16()),
                request_id: None,
                source: Box::new(Message(format!("{url}: {why}"))),
            }));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            Failure::Other(cloud_error(
                &op,
                format!(
                    "{url}: not the Photon Controller answer expected: {e} (answer begins {})",
                    http_body::excerpt(&bytes)
                ),
            ))
        })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> std::result::Result<T, Failure> {
        let token = self.token(false).await?;
        match self
            .send_json(method.clone(), path, body, token.as_deref())
            .await
        {
            Err(Failure::Other(Error::Cloud {
                status: Some(401), ..
            })) if token.is_some() => {
                let token = self.token(true).await?;
                self.send_json(method, path, body, token.as_deref()).await
            }
            other => other,
        }
    }

    /// `GET path`; `None` when it does not exist.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>> {
        match self.call(reqwest::Method::GET, path, None).await {
            Ok(v) => Ok(Some(v)),
            Err(Failure::NotFound) => Ok(None),
            Err(Failure::Other(e)) => Err(e),
        }
    }

    /// Every item of a list, following `nextPageLink` as the SDK's `GetList`.
    pub async fn list<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>> {
        let mut items = Vec::new();
        let mut next = Some(path.to_owned());
        let mut pages = 0;
        while let Some(p) = next.take() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(cloud_error(
                    &format!("GET {path}"),
                    format!("the list did not end after {MAX_PAGES} pages"),
                ));
            }
            let page: Page = self
                .call(reqwest::Method::GET, &p, None)
                .await
                .map_err(|f| f.into_error(&format!("GET {path}"), &p))?;
            for item in page.items {
                items.push(serde_json::from_value(item).map_err(|e| {
                    cloud_error(&format!("GET {path}"), format!("an item of the list: {e}"))
                })?);
            }
            next = page.next.filter(|n| !n.is_empty());
        }
        Ok(items)
    }

    /// The ID of the project `tenant`/`project` names (`getProjIDbyName`).
    pub async fn project_id(&self, tenant: &str, project: &str) -> Result<String> {
        let tenants: Vec<Named> = self.list("/v1/tenants").await?;
        let Some(t) = tenants.iter().find(|t| t.name == tenant) else {
            return Err(cloud_error(
                "find the project",
                format!("no tenant {tenant:?} at {}", self.target),
            ));
        };
        let projects: Vec<Named> = self.list(&format!("/v1/tenants/{}/projects", t.id)).await?;
        projects
            .into_iter()
            .find(|p| p.name == project)
            .map(|p| p.id)
            .ok_or_else(|| {
                cloud_error(
                    "find the project",
                    format!("no matching tenant/project name is found with {tenant}/{project}"),
                )
            })
    }

    /// Starts a change (`POST`/`DELETE` answering a task) and waits for its task; the task's
    /// `ERROR` is an error with its failed step's errors.
    pub async fn change(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Task> {
        let op = format!("{method} {path}");
        let first: Task = self
            .call(method, path, body)
            .await
            .map_err(|f| f.into_error(&op, path))?;
        self.wait(first, &op).await
    }

    /// Polls a task until it ends, within five minutes.
    pub async fn wait(&self, task: Task, op: &str) -> Result<Task> {
        let id = task.id.clone();
        let mut known = Some(task);
        let path = format!("/v1/tasks/{id}");
        let done = poll_until(
            Backoff::new(TASK_POLL_FIRST, TASK_POLL_MAX, TASK_TIMEOUT),
            || {
                let first = known.take();
                let path = &path;
                async move {
                    let task = match first {
                        Some(t) if matches!(t.state.as_str(), "COMPLETED" | "ERROR") => t,
                        _ => self
                            .call::<Task>(reqwest::Method::GET, path, None)
                            .await
                            .map_err(|f| f.into_error(op, path))?,
                    };
                    match task.state.as_str() {
                        "COMPLETED" | "ERROR" => Ok(Poll::Ready(task)),
                        s => Ok::<_, Error>(Poll::Pending(s.chars().take(32).collect())),
                    }
                }
            },
        )
        .await;
        let task = match done {
            Ok(t) => t,
            Err(WaitError::Failed(e)) => return Err(e),
            Err(WaitError::TimedOut(t)) => return Err(cloud_error(op, format!("task {id}: {t}"))),
        };
        if task.state == "ERROR" {
            let errors: Vec<String> = task
                .steps
                .iter()
                .filter(|s| s.state == "ERROR" || !s.errors.is_empty())
                .flat_map(|s| s.errors.iter())
                .map(|e| format!("{}: {}", e.code, e.message))
                .collect();
            return Err(cloud_error(
                op,
                format!(
                    "task {id} ({}) failed: {}",
                    task.operation,
                    if errors.is_empty() {
                        "no step says why".to_owned()
                    } else {
                        errors.join("; ")
                    }
                ),
            ));
        }
        Ok(task)
    }

    /// `GetNetworks`: the VM's connections, from the task `GET /v1/vms/{id}/subnets` answers.
    pub async fn networks(&self, vm_id: &str) -> Result<Option<Vec<Connection>>> {
        let path = format!("/v1/vms/{vm_id}/subnets");
        let op = format!("GET {path}");
        let Some(task) = self.get::<Task>(&path).await? else {
            return Ok(None);
        };
        let task = self.wait(task, &op).await?;
        let connections = task
            .resource_properties
            .as_ref()
            .map(|p| p["networkConnections"].clone())
            .unwrap_or(Value::Null);
        if connections.is_null() {
            return Err(cloud_error(
                &op,
                "the task has no resourceProperties.networkConnections",
            ));
        }
        serde_json::from_value(connections)
            .map(Some)
            .map_err(|e| cloud_error(&op, format!("networkConnections: {e}")))
    }
}
