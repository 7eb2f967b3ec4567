//! Shared by the integration tests: a real local cloud in process on free ports, an admin
//! HTTP client to arrange state (servers, floating IPs, volumes), and providers configured
//! against it through a real `cloud.conf`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use hypercloud_cloudprovider::{CloudConfig, Layout};
use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use hypercloud_providers_openstack::OpenStack;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

pub struct Cloud {
    pub handle: Option<ServerHandle>,
    pub dir: tempfile::TempDir,
    pub config: ServerConfig,
    pub http: reqwest::Client,
    pub url: String,
    pub token: String,
    pub project: String,
    pub user_id: String,
}

impl Cloud {
    pub async fn start() -> Self {
        Self::start_with(|c| c).await
    }

    pub async fn start_with(f: impl FnOnce(ServerConfig) -> ServerConfig) -> Self {
        Self::start_with_identity(f, None).await
    }

    /// [`Cloud::start_with`] whose admin client presents `identity` (a cloud that requires
    /// client certificates).
    pub async fn start_with_identity(
        f: impl FnOnce(ServerConfig) -> ServerConfig,
        identity: Option<reqwest::Identity>,
    ) -> Self {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServerConfig::ephemeral(dir.path());
        config.availability_zones = Some(vec!["nova".into(), "az-2".into()]);
        let config = f(config);
        // Start fault-free so tests can arrange state; `restart` applies `config.faults`.
        let mut clean = config.clone();
        clean.faults = Default::default();
        let handle = Server::bind(clean).await.unwrap();
        let url = handle.api_url().to_owned();
        let mut cloud = Cloud {
            handle: Some(handle),
            dir,
            config,
            // The admin client trusts the test cloud's self-signed certificate, if any.
            http: identity
                .into_iter()
                .fold(reqwest::Client::builder(), |b, id| b.identity(id))
                .danger_accept_invalid_certs(true)
                .build()
                .unwrap(),
            url,
            token: String::new(),
            project: String::new(),
            user_id: String::new(),
        };
        cloud.login().await;
        cloud
    }

    /// Restarts on the same state with `self.config` (its faults included).
    pub async fn restart(&mut self) {
        self.handle.take().unwrap().shutdown().await.unwrap();
        let handle = Server::bind(self.config.clone()).await.unwrap();
        self.url = handle.api_url().to_owned();
        self.handle = Some(handle);
    }

    pub async fn shutdown(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await.unwrap();
        }
    }

    pub fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().unwrap()
    }

    pub fn metadata_url(&self) -> String {
        format!("http://{}", self.handle().metadata_addr().unwrap())
    }

    pub fn config_drive_dir(&self) -> std::path::PathBuf {
        self.config.config_drive_dir()
    }

    async fn login(&mut self) {
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}},
            "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}});
        let resp = self
            .http
            .post(format!("{}/identity/v3/auth/tokens", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
        self.token = resp.headers()["x-subject-token"]
            .to_str()
            .unwrap()
            .to_owned();
        let v: Value = resp.json().await.unwrap();
        self.project = v["token"]["project"]["id"].as_str().unwrap().to_owned();
        self.user_id = v["token"]["user"]["id"].as_str().unwrap().to_owned();
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("x-auth-token", &self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method.clone(), path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v
    }

    /// A new IPv4 subnet `name` of `cidr` on the `private` network: (network ID, subnet ID).
    pub async fn private_subnet(&self, name: &str, cidr: &str) -> (String, String) {
        let private = self
            .ok(Method::GET, "/network/v2.0/networks?name=private", None)
            .await["networks"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let body = serde_json::json!({"subnet": {"network_id": private, "name": name,
            "ip_version": 4, "cidr": cidr}});
        let subnet = self
            .ok(Method::POST, "/network/v2.0/subnets", Some(body))
            .await["subnet"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        (private, subnet)
    }

    /// Creates a server and returns its ID.
    pub async fn create_server(&self, name: &str, flavor: &str, zone: Option<&str>) -> String {
        let mut server = json!({"name": name, "flavorRef": flavor});
        if let Some(z) = zone {
            server["availability_zone"] = json!(z);
        }
        let v = self
            .ok(
                Method::POST,
                "/compute/v2.1/servers",
                Some(json!({"server": server})),
            )
            .await;
        v["server"]["id"].as_str().unwrap().to_owned()
    }

    pub async fn server_action(&self, id: &str, action: &str) {
        self.ok(
            Method::POST,
            &format!("/compute/v2.1/servers/{id}/action"),
            Some(json!({action: null})),
        )
        .await;
    }

    pub async fn delete_server(&self, id: &str) {
        self.ok(Method::DELETE, &format!("/compute/v2.1/servers/{id}"), None)
            .await;
    }

    /// Gives the server a floating IP from `public`; returns the address.
    pub async fn add_floating_ip(&self, server_id: &str) -> String {
        let nets = self
            .ok(Method::GET, "/network/v2.0/networks?name=public", None)
            .await;
        let public = nets["networks"][0]["id"].as_str().unwrap().to_owned();
        let ports = self
            .ok(
                Method::GET,
                &format!("/network/v2.0/ports?device_id={server_id}"),
                None,
            )
            .await;
        let port = ports["ports"][0]["id"].as_str().unwrap().to_owned();
        let v = self
            .ok(
                Method::POST,
                "/network/v2.0/floatingips",
                Some(json!({"floatingip": {"floating_network_id": public, "port_id": port}})),
            )
            .await;
        v["floatingip"]["floating_ip_address"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn router_id(&self) -> String {
        let v = self
            .ok(Method::GET, "/network/v2.0/routers?name=router1", None)
            .await;
        v["routers"][0]["id"].as_str().unwrap().to_owned()
    }

    /// The `[Global]` section for this cloud.
    pub fn global(&self) -> String {
        format!(
            "[Global]\nauth-url = {}/identity/v3\nusername = admin\npassword = hypercloud\nuser-domain-name = Default\nproject-name = demo\nproject-domain-name = Default\nregion = RegionOne\n",
            self.url
        )
    }

    /// A provider from `cloud.conf` text (external layout, as the cloud-controller-manager).
    pub fn provider(&self, conf: &str) -> Arc<OpenStack> {
        self.provider_in(conf, Layout::External)
    }

    /// A provider from `cloud.conf` text, built for `layout`.
    pub fn provider_in(&self, conf: &str, layout: Layout) -> Arc<OpenStack> {
        let cc = CloudConfig {
            origin: "test cloud.conf".into(),
            bytes: conf.as_bytes().to_vec(),
        };
        Arc::new(OpenStack::from_cloud_config(Some(&cc), layout).unwrap())
    }

    /// A provider with `[Global]` for this cloud plus `extra` sections.
    pub fn provider_with(&self, extra: &str) -> Arc<OpenStack> {
        self.provider(&format!("{}{extra}", self.global()))
    }

    /// [`Cloud::provider_with`] for `layout`.
    pub fn provider_with_in(&self, extra: &str, layout: Layout) -> Arc<OpenStack> {
        self.provider_in(&format!("{}{extra}", self.global()), layout)
    }
}

pub use hypercloud_testenv::nodes::node;
