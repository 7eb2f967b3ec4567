//! A local cloud in process with two zones of `us-central1`, an HTTP client to arrange and
//! inspect its GCE state, and a `gce` provider configured against it through a real
//! `gce.conf`.
#![allow(dead_code)]

use hypercloud_cloudprovider::{CloudConfig, Interface};
use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use hypercloud_providers_gce::Gce;
use serde_json::{json, Value};

pub const ZONE_A: &str = "us-central1-a";
pub const ZONE_B: &str = "us-central1-b";

pub struct Cloud {
    pub handle: ServerHandle,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    /// `.../compute/v1/projects/demo/`
    pub base: String,
}

impl Cloud {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// [`Cloud::start`] with the server's config changed by `tweak`.
    pub async fn start_with(tweak: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let handle = Server::bind(Self::config(dir.path(), tweak)).await.unwrap();
        let base = format!("{}/compute/v1/projects/demo/", handle.api_url());
        Cloud {
            handle,
            dir,
            http: reqwest::Client::new(),
            base,
        }
    }

    fn config(dir: &std::path::Path, tweak: impl FnOnce(&mut ServerConfig)) -> ServerConfig {
        let mut config = ServerConfig::ephemeral(dir);
        config.region = "us-central1".into();
        config.availability_zones = Some(vec![ZONE_A.into(), ZONE_B.into()]);
        tweak(&mut config);
        config
    }

    /// Stops the server and starts it again on the same state, with `tweak`.
    pub async fn restart_with(self, tweak: impl FnOnce(&mut ServerConfig)) -> Self {
        let Cloud {
            handle, dir, http, ..
        } = self;
        handle.shutdown().await.unwrap();
        let handle = Server::bind(Self::config(dir.path(), tweak)).await.unwrap();
        let base = format!("{}/compute/v1/projects/demo/", handle.api_url());
        Cloud {
            handle,
            dir,
            http,
            base,
        }
    }

    /// A `gce` provider on this cloud (all zones of the region managed), initialised.
    pub async fn provider(&self) -> Gce {
        let gce = self.provider_with("anonymous = true").unwrap();
        gce.initialize(None).await.unwrap();
        gce
    }

    /// A `gce` provider on this cloud with `credentials` in `[Hypercloud]`, not initialised.
    pub fn provider_with(&self, credentials: &str) -> hypercloud_cloudprovider::Result<Gce> {
        let md = self.handle.metadata_addr().unwrap();
        let conf = format!(
            "[global]\nproject-id = demo\nlocal-zone = {ZONE_A}\nmultizone = true\n\
             network-name = private\napi-endpoint = {}/compute/v1/\n\
             [Hypercloud]\n{credentials}\nmetadata-endpoint = http://{md}\n",
            self.handle.api_url()
        );
        let cc = CloudConfig {
            origin: "test".into(),
            bytes: conf.into_bytes(),
        };
        Gce::from_cloud_config(Some(&cc))
    }

    /// A call to the GCE dialect: status and JSON body.
    pub async fn gce(
        &self,
        method: reqwest::Method,
        rest: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{rest}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, rest: &str) -> (u16, Value) {
        self.gce(reqwest::Method::GET, rest, None).await
    }

    /// Creates an instance in `zone`.
    pub async fn instance(&self, zone: &str, name: &str) {
        let (status, op) = self
            .gce(
                reqwest::Method::POST,
                &format!("zones/{zone}/instances"),
                Some(json!({"name": name, "machineType": format!("zones/{zone}/machineTypes/m1.small")})),
            )
            .await;
        assert_eq!((status, op["status"].as_str()), (200, Some("DONE")), "{op}");
    }

    /// The device names of an instance's disks, as GCE lists them.
    pub async fn devices(&self, zone: &str, name: &str) -> Vec<(String, String)> {
        let (status, i) = self.get(&format!("zones/{zone}/instances/{name}")).await;
        assert_eq!(status, 200, "{i}");
        i["disks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["deviceName"].as_str().unwrap().to_owned(),
                    d["mode"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}
