//! A real `hypercloud local-cloud serve` in a temporary state directory, driven with the
//! `local-cloud` operator commands, and read back through its OpenStack API (plain HTTP/1.1
//! with std only).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use hypercloud_testenv::process::Proc;
use serde_json::Value;

use super::process::{run, Bin};

/// The region the local cloud names in its catalog.
pub const REGION: &str = "RegionOne";

/// An instance as the cloud reports it.
#[derive(Clone, Debug)]
pub struct Instance {
    pub id: String,
    pub name: String,
    pub zone: String,
    pub flavor: String,
    /// Its fixed address on the `private` network (127.1.0.0/16, so a real local address).
    pub address: String,
}

/// A running local cloud.
pub struct LocalCloud {
    // Fields drop in order: the server (printing its log on failure) before its directory.
    pub serve: Proc,
    pub state: PathBuf,
    pub api_url: String,
    pub metadata_url: String,
    bin: Bin,
    tmp: tempfile::TempDir,
}

impl LocalCloud {
    /// Serves on free loopback ports with the availability `zones` (comma-separated) and
    /// load balancer VIPs from `vip_pool`; returns once the API answers.
    pub fn start(bin: &Bin, vip_pool: &str, zones: &str) -> LocalCloud {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let mut cmd = bin.command("local-cloud");
        cmd.arg("--state-dir").arg(&state).args([
            "--v=2",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metadata-listen",
            "127.0.0.1:0",
            "--availability-zones",
            zones,
            "--lb-vip-pool",
            vip_pool,
        ]);
        let mut serve = Proc::spawn("local-cloud serve", cmd, tmp.path().join("serve.log"));
        let pid = serve.pid();
        let info_path = state.join("server.json");
        let deadline = Instant::now() + Duration::from_secs(30);
        let (api_url, metadata_url) = loop {
            let info = std::fs::read_to_string(&info_path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .filter(|i| i["pid"] == pid);
            if let Some(info) = info {
                let api = info["api_url"].as_str().unwrap().to_owned();
                if http("GET", &format!("{api}/identity/v3"), &[], None).0 == 200 {
                    break (api, info["metadata_url"].as_str().unwrap().to_owned());
                }
            }
            assert!(serve.running(), "the local cloud exited");
            assert!(Instant::now() < deadline, "the local cloud did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        LocalCloud {
            serve,
            state,
            api_url,
            metadata_url,
            bin: bin.clone(),
            tmp,
        }
    }

    /// `local-cloud --state-dir DIR`, for an operator command.
    fn command(&self) -> Command {
        let mut cmd = self.bin.command("local-cloud");
        cmd.arg("--state-dir").arg(&self.state);
        cmd
    }

    /// `local-cloud ARGS -o json` (an operator command), decoded.
    pub fn cli_json(&self, args: &[&str]) -> Value {
        let mut cmd = self.command();
        cmd.args(args).args(["-o", "json"]);
        let out = run(cmd);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub fn create_instance(&self, name: &str, zone: &str, flavor: &str) -> Instance {
        let s = self.cli_json(&[
            "instance", "create", name, "--zone", zone, "--flavor", flavor,
        ]);
        let address = s["addresses"]["private"][0]["addr"]
            .as_str()
            .unwrap()
            .to_owned();
        Instance {
            id: s["id"].as_str().unwrap().to_owned(),
            name: s["name"].as_str().unwrap().to_owned(),
            zone: s["OS-EXT-AZ:availability_zone"]
                .as_str()
                .unwrap()
                .to_owned(),
            flavor: s["flavor"]["original_name"].as_str().unwrap().to_owned(),
            address,
        }
    }

    /// Creates a volume; its ID.
    pub fn create_volume(&self, name: &str, zone: &str) -> String {
        let v = self.cli_json(&["volume", "create", name, "--zone", zone]);
        assert_eq!(v["availability_zone"], zone);
        v["id"].as_str().unwrap().to_owned()
    }

    /// A cloud.conf for the `local` provider pointing at this cloud; with `instance`, the
    /// `[Metadata]` section a node uses to learn which instance it is (on one machine every
    /// node calls the metadata service from 127.0.0.1, so it names itself, as in
    /// hack/local-up.sh).
    pub fn cloud_conf(&self, file: &str, instance: Option<&Instance>) -> PathBuf {
        let mut text = format!("[Global]\nauth-url = {}/identity/v3\n", self.api_url);
        if let Some(i) = instance {
            text.push_str(&format!(
                "[Metadata]\nsearch-order = metadataService\nmetadata-url = {}\ninstance-id = {}\n",
                self.metadata_url, i.id
            ));
        }
        let path = self.tmp.path().join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Octavia's load balancers whose name ends with `suffix`.
    pub fn load_balancers(&self, suffix: &str) -> Vec<Value> {
        let token = self.token();
        let (status, _, body) = http(
            "GET",
            &format!("{}/load-balancer/v2/lbaas/loadbalancers", self.api_url),
            &[("X-Auth-Token", &token)],
            None,
        );
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["loadbalancers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|lb| lb["name"].as_str().is_some_and(|n| n.ends_with(suffix)))
            .cloned()
            .collect()
    }

    /// A token for the default admin user.
    fn token(&self) -> String {
        let body = r#"{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}}, "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}}"#;
        let (status, head, _) = http(
            "POST",
            &format!("{}/identity/v3/auth/tokens", self.api_url),
            &[],
            Some(body),
        );
        assert_eq!(status, 201, "{head}");
        head.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("x-subject-token")
                    .then(|| v.trim().to_owned())
            })
            .unwrap()
    }
}

/// A minimal HTTP/1.1 request (`Connection: close`); status, head and body. Status 0 when
/// the server cannot be reached.
pub fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let Ok(mut stream) = TcpStream::connect(host) else {
        return (0, String::new(), String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.unwrap_or("");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut raw = Vec::new();
    if stream.write_all(req.as_bytes()).is_err() || stream.read_to_end(&mut raw).is_err() {
        return (0, String::new(), String::new());
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}
