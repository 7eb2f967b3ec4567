//! Shared by the integration tests: an in-process local cloud on free ports in a temporary
//! state directory, and a small authenticated HTTP client.
#![allow(dead_code)]

use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

pub struct TestCloud {
    pub handle: Option<ServerHandle>,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    pub url: String,
    pub token: String,
    pub project: String,
    pub config: ServerConfig,
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl TestCloud {
    pub async fn start() -> Self {
        Self::start_with(|c| c).await
    }

    pub async fn start_with(f: impl FnOnce(ServerConfig) -> ServerConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = f(ServerConfig::ephemeral(dir.path()));
        let handle = Server::bind(config.clone()).await.unwrap();
        let url = handle.api_url().to_owned();
        let http = reqwest::Client::new();
        let mut cloud = TestCloud {
            handle: Some(handle),
            dir,
            http,
            url,
            token: String::new(),
            project: String::new(),
            config,
        };
        cloud.login().await;
        cloud
    }

    pub async fn login(&mut self) {
        let r = self
            .raw(
                Method::POST,
                "/identity/v3/auth/tokens",
                Some(password_auth("hypercloud")),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        self.token = r.headers["x-subject-token"].to_str().unwrap().to_owned();
        self.project = r.body["token"]["project"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
    }

    /// Stops the server and starts a new one on the same state directory.
    pub async fn restart(&mut self) {
        self.handle.take().unwrap().shutdown().await.unwrap();
        // Connection tasks of the old server (kept-alive client connections) can hold the
        // state, and so its lock, for a moment after shutdown returns: retry briefly.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let handle = loop {
            match Server::bind(self.config.clone()).await {
                Err(hypercloud_localcloud::Error::StateDirInUse { .. })
                    if std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => break other.unwrap(),
            }
        };
        self.url = handle.api_url().to_owned();
        self.handle = Some(handle);
    }

    pub fn metadata_url(&self) -> String {
        format!(
            "http://{}",
            self.handle.as_ref().unwrap().metadata_addr().unwrap()
        )
    }

    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> Reply {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.header("x-auth-token", t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Reply {
            status,
            body,
            headers,
        }
    }

    pub async fn bytes(&self, method: Method, path: &str, body: &'static str) -> Reply {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("x-auth-token", &self.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        Reply {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
            headers,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.raw(Method::GET, path, None, Some(&self.token)).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.raw(Method::POST, path, Some(body), Some(&self.token))
            .await
    }
    pub async fn put(&self, path: &str, body: Value) -> Reply {
        self.raw(Method::PUT, path, Some(body), Some(&self.token))
            .await
    }
    pub async fn delete(&self, path: &str) -> Reply {
        self.raw(Method::DELETE, path, None, Some(&self.token))
            .await
    }

    pub fn volumes(&self) -> String {
        format!("/volume/v3/{}/volumes", self.project)
    }

    /// ID of the network with this name.
    pub async fn network_id(&self, name: &str) -> String {
        let r = self
            .get(&format!("/network/v2.0/networks?name={name}"))
            .await;
        r.body["networks"][0]["id"].as_str().unwrap().to_owned()
    }

    /// Creates a server and returns its ID.
    pub async fn create_server(&self, name: &str, extra: Value) -> String {
        let mut server = json!({"name": name, "flavorRef": "2"});
        if let (Some(s), Some(e)) = (server.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let r = self
            .post("/compute/v2.1/servers", json!({"server": server}))
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
        r.body["server"]["id"].as_str().unwrap().to_owned()
    }

    pub async fn shutdown(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await.unwrap();
        }
    }
}

pub fn password_auth(password: &str) -> Value {
    json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"name": "Default"}, "password": password}}},
        "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}})
}
