//! The operator commands' API client: the running server's URL from `server.json`, or an
//! in-process server on a free loopback port when none runs.

use super::*;
use hypercloud_cloudprovider::http_body;

/// Connecting to the local cloud's API (a loopback server: at once, or never).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One operator request, answer included: every command is a small read or write, and a
/// server that accepted and never answers must not hang the command.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// An authenticated API client for the operator commands (see the module docs).
pub(super) struct Client {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) token: String,
    pub(super) project_id: String,
    pub(super) local: Option<ServerHandle>,
}

impl Client {
    pub(super) async fn connect(state_dir: &Path, password: &str) -> Result<Self> {
        let mut http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT);
        let (base, local) = if store::is_locked(state_dir) {
            let (url, cert) = running_server(state_dir)?;
            if let Some(cert) = cert {
                let pem = hypercloud_cloudprovider::input::read_named(
                    "the running server's certificate (tls_ca_file in server.json)",
                    &cert,
                    hypercloud_cloudprovider::input::MAX_INPUT_FILE_BYTES,
                )?;
                for c in
                    reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| Error::LoadTls {
                        path: cert.clone(),
                        reason: e.to_string(),
                    })?
                {
                    http = http.add_root_certificate(c);
                }
            }
            (url, None)
        } else {
            let config = ServerConfig {
                metadata_listen: None,
                password: password.to_owned(),
                ..ServerConfig::ephemeral(state_dir)
            };
            let handle = Server::bind(config).await?;
            (handle.api_url().to_owned(), Some(handle))
        };
        let http = http.build().map_err(|source| Error::Request {
            method: "GET",
            url: base.clone(),
            source,
        })?;
        let url = format!("{base}/identity/v3/auth/tokens");
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": defaults::USER, "domain": {"name": defaults::DOMAIN}, "password": password}}},
            "scope": {"project": {"name": defaults::PROJECT, "domain": {"name": defaults::DOMAIN}}}}});
        let response =
            http.post(&url)
                .json(&body)
                .send()
                .await
                .map_err(|source| Error::Request {
                    method: "POST",
                    url: url.clone(),
                    source,
                })?;
        let status = response.status();
        let token = response
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let Some(token) = token.filter(|_| status.is_success()) else {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(response)).await;
            return Err(Error::Api {
                method: "POST",
                url,
                status: status.as_u16(),
                body: http_body::excerpt(&prefix),
            });
        };
        let text = read_answer("POST", &url, response).await?;
        let body: Value = serde_json::from_str(&text).unwrap_or_default();
        let project_id = body["token"]["project"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(Client {
            http,
            base,
            token,
            project_id,
            local,
        })
    }

    pub(super) async fn close(self) -> Result<()> {
        match self.local {
            Some(handle) => handle.shutdown().await,
            None => Ok(()),
        }
    }

    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        self.send(method, path, body, None).await
    }

    /// A compute GET at the newest microversion, which shows zones and flavor names.
    pub(super) async fn get_compute(&self, path: &str) -> Result<Value> {
        self.send(Method::GET, path, None, Some("compute 2.79"))
            .await
    }

    pub(super) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        microversion: Option<&str>,
    ) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let name: &'static str = match method.as_str() {
            "GET" => "GET",
            "POST" => "POST",
            "PUT" => "PUT",
            "DELETE" => "DELETE",
            _ => "REQUEST",
        };
        let mut req = self
            .http
            .request(method, &url)
            .header("x-auth-token", &self.token);
        if let Some(v) = microversion {
            req = req.header("openstack-api-version", v);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let response = req.send().await.map_err(|source| Error::Request {
            method: name,
            url: url.clone(),
            source,
        })?;
        let status = response.status();
        if !status.is_success() {
            let (prefix, _) = http_body::read_prefix(reqwest::Body::from(response)).await;
            return Err(Error::Api {
                method: name,
                url,
                status: status.as_u16(),
                body: http_body::excerpt(&prefix),
            });
        }
        let text = read_answer(name, &url, response).await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub(super) async fn get(&self, path: &str) -> Result<Value> {
        self.call(Method::GET, path, None).await
    }

    /// A server by ID or exact name.
    pub(super) async fn find_server(&self, name: &str) -> Result<Value> {
        let all = self.get("/compute/v2.1/servers/detail").await?;
        let servers = all["servers"].as_array().cloned().unwrap_or_default();
        let found: Vec<Value> = servers
            .iter()
            .filter(|s| s["id"] == name)
            .cloned()
            .collect();
        let found = if found.is_empty() {
            servers.into_iter().filter(|s| s["name"] == name).collect()
        } else {
            found
        };
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(Error::NotFound {
                what: "instance",
                name: name.into(),
            }),
            _ => Err(Error::NotFound {
                what: "single instance (several match; use the ID)",
                name: name.into(),
            }),
        }
    }

    pub(super) async fn find_volume(&self, name: &str) -> Result<Value> {
        let all = self
            .get(&format!("/volume/v3/{}/volumes/detail", self.project_id))
            .await?;
        let vols = all["volumes"].as_array().cloned().unwrap_or_default();
        vols.into_iter()
            .find(|v| v["id"] == name || v["name"] == name)
            .ok_or_else(|| Error::NotFound {
                what: "volume",
                name: name.into(),
            })
    }
}

/// The URL of the server holding `state_dir`, and its TLS certificate if it serves HTTPS.
pub(super) fn running_server(state_dir: &Path) -> Result<(String, Option<PathBuf>)> {
    let path = state_dir.join(SERVER_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::ReadSnapshot {
        path: path.clone(),
        source,
    })?;
    let info: Value = serde_json::from_str(&text).map_err(|source| Error::DecodeSnapshot {
        path: path.clone(),
        source,
    })?;
    // What to trust: the CA of --tls-self-signed (or the served certificate), else (a server
    // of an older build) the served certificate.
    let cert = info["tls_ca_file"]
        .as_str()
        .or_else(|| info["tls_cert_file"].as_str())
        .map(PathBuf::from);
    info["api_url"]
        .as_str()
        .map(|u| (u.to_owned(), cert))
        .ok_or_else(|| Error::NotFound {
            what: "api_url in",
            name: path.display().to_string(),
        })
}

/// A successful answer's text, at most [`http_body::LIST_LIMIT`] bytes (a list of every
/// server of the cloud is the largest the CLI asks for).
async fn read_answer(
    method: &'static str,
    url: &str,
    response: reqwest::Response,
) -> Result<String> {
    let bytes = http_body::read_limited(
        reqwest::Body::from(response),
        http_body::LIST_LIMIT,
        "the local cloud",
        &format!("{method} {url}"),
    )
    .await
    .map_err(|source| Error::ReadBody {
        method,
        url: url.to_owned(),
        source,
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
