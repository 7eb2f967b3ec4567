//! Shared by the integration tests and the benchmarks in `examples/` (which include this file
//! by path): an in-process local cloud on free ports in a temporary state directory, a small
//! authenticated HTTP client, and the set-up steps many tests repeat (log in, create a server,
//! a volume, a load balancer and its children, wait for it to be ACTIVE, scrape /metrics).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// Where Octavia's resources live.
pub const LBAAS: &str = "/load-balancer/v2/lbaas";

pub struct TestCloud {
    pub handle: Option<ServerHandle>,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    pub url: String,
    pub token: String,
    pub project: String,
    pub config: ServerConfig,
}

/// A load balancer just created (and ACTIVE since): its ID, its VIP, and the create's reply
/// (whose `provisioning_status` is still `PENDING_CREATE`).
pub struct NewLb {
    pub id: String,
    pub vip: String,
    pub reply: Reply,
}

/// A listener and its default pool, with the replies to the creates of the pool's members.
pub struct LbTree {
    pub listener: String,
    pub pool: String,
    pub members: Vec<Reply>,
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    /// The string `field` of the object under `key` (`{"server": {"id": "…"}}`).
    pub fn str(&self, key: &str, field: &str) -> String {
        self.body[key][field]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}.{field} in {}", self.body))
            .to_owned()
    }

    /// The ID of the object under `key`.
    pub fn id(&self, key: &str) -> String {
        self.str(key, "id")
    }

    /// The ID of the first item of the list under `key`.
    pub fn first_id(&self, key: &str) -> String {
        self.body[key][0]["id"].as_str().unwrap().to_owned()
    }

    /// How many items the list under `key` holds.
    pub fn count(&self, key: &str) -> usize {
        self.body[key].as_array().unwrap().len()
    }
}

impl TestCloud {
    pub async fn start() -> Self {
        Self::start_with(|c| c).await
    }

    /// Starts as [`start`](Self::start), logs in, then restarts on the same state with the
    /// config changed by `f` (faults, say, which would refuse the log-in).
    pub async fn start_then_restart_with(f: impl FnOnce(&mut ServerConfig)) -> Self {
        let mut cloud = Self::start().await;
        cloud.restart_with(f).await;
        cloud
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
        let r = self.authenticate(password_auth("hypercloud")).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        self.token = subject_token(&r);
        self.project = r.body["token"]["project"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
    }

    /// `POST /identity/v3/auth/tokens` with `auth`, carrying no token.
    pub async fn authenticate(&self, auth: Value) -> Reply {
        self.raw(Method::POST, "/identity/v3/auth/tokens", Some(auth), None)
            .await
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

    /// Changes `self.config` with `f` and restarts on the same state (so a test can log in
    /// before turning faults on).
    pub async fn restart_with(&mut self, f: impl FnOnce(&mut ServerConfig)) {
        f(&mut self.config);
        self.restart().await;
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

    /// A request to `path` carrying the token, for a test that sets headers or a body of its own.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .header("x-auth-token", &self.token)
    }

    /// Validates (`GET`) or revokes (`DELETE`) token `subject`, authenticated by the cloud's own
    /// token.
    pub async fn subject_token_call(&self, method: Method, subject: &str) -> StatusCode {
        self.request(method, "/identity/v3/auth/tokens")
            .header("x-subject-token", subject)
            .send()
            .await
            .unwrap()
            .status()
    }

    pub async fn bytes(&self, method: Method, path: &str, body: &'static str) -> Reply {
        let resp = self
            .request(method, path)
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
        self.neutron_id("networks", name).await
    }

    /// ID of the Neutron object of `kind` (`routers`, `subnets`, …) with this name.
    pub async fn neutron_id(&self, kind: &str, name: &str) -> String {
        let r = self.get(&format!("/network/v2.0/{kind}?name={name}")).await;
        r.first_id(kind)
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
        r.id("server")
    }

    /// Creates a volume from the fields in `volume` and returns its ID.
    pub async fn create_volume(&self, volume: Value) -> String {
        self.post(&self.volumes(), json!({ "volume": volume }))
            .await
            .id("volume")
    }

    /// Attaches `volume` to `server` through Nova.
    pub async fn attach_volume(&self, server: &str, volume: &str) -> Reply {
        self.post(
            &format!("/compute/v2.1/servers/{server}/os-volume_attachments"),
            json!({"volumeAttachment": {"volumeId": volume}}),
        )
        .await
    }

    /// Creates the Neutron object `key` (`network`, `port`, `floatingip`, `security_group`, …)
    /// from the fields in `fields`: `POST /network/v2.0/<key>s` (`_` written `-`) with
    /// `{"<key>": fields}`.
    pub async fn neutron_create(&self, key: &str, fields: Value) -> Reply {
        let path = format!("/network/v2.0/{}s", key.replace('_', "-"));
        self.post(&path, json!({ key: fields })).await
    }

    /// Associates floating IP `id` with `port` (or, with `null`, with nothing).
    pub async fn set_floating_ip_port(&self, id: &str, port: Value) -> Reply {
        self.put(
            &format!("/network/v2.0/floatingips/{id}"),
            json!({"floatingip": {"port_id": port}}),
        )
        .await
    }

    /// The text of `/metrics`.
    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Creates a load balancer from the fields in `lb`, asserts 201 and waits until it is ACTIVE.
    pub async fn create_lb(&self, lb: Value) -> NewLb {
        let reply = self
            .post(
                &format!("{LBAAS}/loadbalancers"),
                json!({ "loadbalancer": lb }),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let id = reply.id("loadbalancer");
        wait_lb_active(self, &id).await;
        NewLb {
            vip: reply.str("loadbalancer", "vip_address"),
            id,
            reply,
        }
    }

    /// Adds to load balancer `lb` a ROUND_ROBIN pool of `protocol` and no listener; returns its
    /// ID.
    pub async fn add_lb_pool(&self, lb: &str, protocol: &str) -> String {
        let pool =
            json!({"loadbalancer_id": lb, "protocol": protocol, "lb_algorithm": "ROUND_ROBIN"});
        self.add_to_lb(lb, "pools", json!({ "pool": pool }))
            .await
            .id("pool")
    }

    /// Adds to load balancer `lb` a listener with the fields in `listener`, a pool behind it with
    /// the fields in `pool`, and a member with the fields of each of `members`, in that order,
    /// each asserted 201 and waited out (`lb` ACTIVE again).
    pub async fn add_listener_and_pool(
        &self,
        lb: &str,
        mut listener: Value,
        mut pool: Value,
        members: &[Value],
    ) -> LbTree {
        listener["loadbalancer_id"] = json!(lb);
        let listener = self
            .add_to_lb(lb, "listeners", json!({ "listener": listener }))
            .await
            .id("listener");
        pool["listener_id"] = json!(listener);
        let pool = self
            .add_to_lb(lb, "pools", json!({ "pool": pool }))
            .await
            .id("pool");
        let mut created = Vec::new();
        for m in members {
            let path = format!("pools/{pool}/members");
            created.push(self.add_to_lb(lb, &path, json!({ "member": m })).await);
        }
        LbTree {
            listener,
            pool,
            members: created,
        }
    }

    /// POSTs `body` to `{LBAAS}/{path}` (a listener, pool, member or monitor of load balancer
    /// `lb`), asserts 201 and waits until `lb` is ACTIVE again.
    pub async fn add_to_lb(&self, lb: &str, path: &str, body: Value) -> Reply {
        let r = self.post(&format!("{LBAAS}/{path}"), body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        wait_lb_active(self, lb).await;
        r
    }

    pub async fn shutdown(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await.unwrap();
        }
    }
}

/// The token a `POST /identity/v3/auth/tokens` answered with.
pub fn subject_token(r: &Reply) -> String {
    r.headers["x-subject-token"].to_str().unwrap().to_owned()
}

/// An error answer in the form of Nova, Cinder and Keystone (`{"<key>": {"code": <status>}}`)
/// with `status`.
pub fn assert_fault(r: &Reply, status: StatusCode, key: &str, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.body);
    assert_eq!(r.body[key]["code"], status.as_u16(), "{what}: {}", r.body);
}

/// A Neutron error answer: `status`, and `NeutronError` of type `kind`.
pub fn assert_neutron_error(r: &Reply, status: StatusCode, kind: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.body["NeutronError"]["type"], kind, "{}", r.body);
}

/// The first item of the JSON array `list` whose `key` is `value`.
pub fn find<'a>(list: &'a Value, key: &str, value: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|item| item[key] == value)
        .unwrap_or_else(|| panic!("no {key} {value} in {list}"))
}

/// Polls `check` every 50ms until it holds; panics after `timeout`.
pub async fn wait_for(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}

/// Waits until load balancer `lb` is ACTIVE, failing if it goes to ERROR.
pub async fn wait_lb_active(c: &TestCloud, lb: &str) {
    wait_for("ACTIVE", Duration::from_secs(10), async || {
        let r = c.get(&format!("{LBAAS}/loadbalancers/{lb}")).await;
        assert_ne!(r.body["loadbalancer"]["provisioning_status"], "ERROR");
        r.body["loadbalancer"]["provisioning_status"] == "ACTIVE"
    })
    .await;
}

/// A TCP port free on `ip` right now.
pub async fn free_port(ip: &str) -> u16 {
    let l = TcpListener::bind((ip, 0)).await.unwrap();
    l.local_addr().unwrap().port()
}

/// A TCP server that echoes everything back on every connection.
pub async fn echo_backend() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

pub fn password_auth(password: &str) -> Value {
    json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"name": "Default"}, "password": password}}},
        "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}})
}

/// A configuration serving the API over TLS with a new self-signed certificate for 127.0.0.1
/// (state under `dir/state`), the certificate's file, and a client that trusts it.
pub fn tls_config(dir: &std::path::Path) -> (ServerConfig, std::path::PathBuf, reqwest::Client) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let cert_file = dir.join("tls.crt");
    let key_file = dir.join("tls.key");
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let mut config = ServerConfig::ephemeral(dir.join("state"));
    config.tls = Some(hypercloud_localcloud::TlsFiles {
        cert_file: cert_file.clone(),
        key_file,
    });
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    (config, cert_file, http)
}
