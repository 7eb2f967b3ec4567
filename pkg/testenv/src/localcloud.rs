//! A real `hypercloud local-cloud serve` for tests: started on free loopback ports in a state
//! directory of the test's, driven with the `local-cloud` operator commands, and read back
//! through its OpenStack API with a minimal HTTP/1.1 client (std only, so the tests need no
//! HTTP client). The in-process equivalent is `hypercloud_localcloud`'s server, which the
//! library tests use; these are for tests of the binary.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::Proc;

/// `bin local-cloud`, free of `HYPERCLOUD_LOCAL_CLOUD_STATE_DIR` (the state dir is always
/// given as a flag).
pub fn local_cloud(bin: impl AsRef<Path>) -> Command {
    let mut cmd = Command::new(bin.as_ref());
    cmd.arg("local-cloud")
        .env_remove("HYPERCLOUD_LOCAL_CLOUD_STATE_DIR");
    cmd
}

/// A state directory inside a temp dir (the serve log goes beside it).
pub fn state_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("state")
}

/// The log of the server on `state_dir`: `<state_dir>.serve.log`.
pub fn serve_log(state_dir: &Path) -> String {
    std::fs::read_to_string(serve_log_path(state_dir)).unwrap_or_default()
}

fn serve_log_path(state_dir: &Path) -> PathBuf {
    state_dir.with_extension("serve.log")
}

/// A running `hypercloud local-cloud serve`: killed when dropped, its log printed when the
/// test is panicking.
pub struct Serve {
    proc: Proc,
    pub api_url: String,
    pub metadata_url: String,
    /// Where the instances' device links are (`devicesDir` of server.json): set when the
    /// cloud backs volumes (`--volume-backing=sparse-file`, [`Serve::start_backed`]).
    pub devices_dir: Option<PathBuf>,
    /// From spawn to answering HTTP.
    pub startup: Duration,
}

impl Serve {
    /// Starts `bin local-cloud serve` on `state_dir` (ports picked by the OS), `extra` being
    /// more `serve` flags, and waits until it answers.
    pub fn start(bin: impl AsRef<Path>, state_dir: &Path, extra: &[&str]) -> Serve {
        Serve::start_command(local_cloud(bin), state_dir, extra)
    }

    /// Like [`Serve::start`], with volumes backed by sparse files and attached ones by loop
    /// devices (`--volume-backing=sparse-file`; loop devices need root): an attached volume
    /// is the block device [`Serve::device_link`] points at.
    pub fn start_backed(bin: impl AsRef<Path>, state_dir: &Path, extra: &[&str]) -> Serve {
        let mut args = vec!["--volume-backing", "sparse-file"];
        args.extend_from_slice(extra);
        Serve::start(bin, state_dir, &args)
    }

    /// The directory of instance `server_id`'s device links, as a guest's
    /// `/dev/disk/by-id`: `<devicesDir>/<server-id>`. Panics unless volumes are backed.
    pub fn devices_of(&self, server_id: &str) -> PathBuf {
        self.devices_dir
            .as_ref()
            .expect("devicesDir: start the cloud with Serve::start_backed")
            .join(server_id)
    }

    /// The link a Nova (virtio) guest has for `volume_id`:
    /// `<devicesDir>/<server-id>/virtio-<volume-id[:20]>`.
    pub fn device_link(&self, server_id: &str, volume_id: &str) -> PathBuf {
        let serial: String = volume_id.chars().take(20).collect();
        self.devices_of(server_id).join(format!("virtio-{serial}"))
    }

    /// Like [`Serve::start`], with `local_cloud` the command that runs `local-cloud` (e.g.
    /// through a personality symlink, with global flags already added).
    pub fn start_command(mut local_cloud: Command, state_dir: &Path, extra: &[&str]) -> Serve {
        local_cloud
            .arg("--state-dir")
            .arg(state_dir)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metadata-listen",
                "127.0.0.1:0",
            ])
            .args(extra);
        let t = Instant::now();
        // Owned by `Serve` at once, so a failed wait below still kills it (Drop).
        let mut serve = Serve {
            proc: Proc::spawn("local-cloud serve", local_cloud, serve_log_path(state_dir)),
            api_url: String::new(),
            metadata_url: String::new(),
            devices_dir: None,
            startup: Duration::ZERO,
        };
        let pid = serve.proc.pid();
        let info_path = state_dir.join("server.json");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let info = std::fs::read_to_string(&info_path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .filter(|i| i["pid"] == pid);
            if let Some(info) = info {
                let api_url = info["api_url"].as_str().expect("api_url in server.json");
                if http("GET", &format!("{api_url}/identity/v3"), &[], None).0 == 200 {
                    serve.api_url = api_url.to_owned();
                    serve.metadata_url = info["metadata_url"]
                        .as_str()
                        .expect("metadata_url in server.json")
                        .to_owned();
                    serve.devices_dir = info["devicesDir"].as_str().map(PathBuf::from);
                    serve.startup = t.elapsed();
                    return serve;
                }
            }
            assert!(serve.proc.running(), "the local cloud exited");
            assert!(
                Instant::now() < deadline,
                "the local cloud did not start within 30s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the server printed so far.
    pub fn log(&self) -> String {
        self.proc.log()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.proc.running()
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill9(mut self) {
        self.proc.kill9();
    }

    /// SIGTERM, and waits for a clean exit.
    pub fn terminate(mut self) {
        self.proc.sigterm();
        let exit = self.proc.wait();
        assert!(exit.success(), "serve exited with {exit}");
    }

    /// The `[Global]` section of a cloud.conf for the `local` provider pointing at this cloud.
    pub fn cloud_conf(&self) -> String {
        format!("[Global]\nauth-url = {}/identity/v3\n", self.api_url)
    }

    /// A token for the default admin user.
    pub fn token(&self) -> String {
        token(&self.api_url)
    }

    /// Octavia's load balancers whose name ends with `suffix`.
    pub fn load_balancers(&self, suffix: &str) -> Vec<Value> {
        self.list_load_balancers("")
            .into_iter()
            .filter(|lb| lb["name"].as_str().is_some_and(|n| n.ends_with(suffix)))
            .collect()
    }

    /// Octavia's load balancers named `name` (listed by name, as the provider looks them up).
    pub fn load_balancers_named(&self, name: &str) -> Vec<Value> {
        self.list_load_balancers(&format!("?name={name}"))
    }

    fn list_load_balancers(&self, query: &str) -> Vec<Value> {
        let token = self.token();
        let (status, _, body) = http(
            "GET",
            &format!(
                "{}/load-balancer/v2/lbaas/loadbalancers{query}",
                self.api_url
            ),
            &[("X-Auth-Token", &token)],
            None,
        );
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("a JSON load balancer list");
        v["loadbalancers"]
            .as_array()
            .expect("a list of load balancers")
            .clone()
    }
}

/// Detaches, when dropped, every loop device whose backing file lies under its directory (a
/// backed cloud's state dir), so a test that fails leaks none: the cloud frees the devices of
/// detached volumes, and its killed process those nothing else holds, but a device a test
/// left mounted or open would stay.
pub struct LoopGuard(pub PathBuf);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        for (dev, _) in loops_under(&self.0) {
            let _ = Command::new("losetup").arg("-d").arg(&dev).status();
        }
    }
}

/// Unmounts, when dropped, every mount point under its directory (deepest first, lazily), so
/// a test whose CSI node plugin staged or published volumes there leaves no mount behind,
/// also when it fails. Declare it after the [`LoopGuard`] (locals drop in reverse order):
/// the mounts go first, then the devices they held.
pub struct MountGuard(pub PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        for m in mounts_under(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&m).status();
        }
    }
}

/// The mount points under `dir` (`/proc/self/mountinfo`), deepest first.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(m.replace("\\040", " ")))
        .filter(|m| m.starts_with(&dir) && *m != dir)
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found.dedup();
    found
}

/// The loop devices (`/dev/loopN`) whose backing file lies under `dir`, with that file as
/// `/sys/block/loopN/loop/backing_file` says (` (deleted)` after a removed file).
pub fn loops_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let Ok(blocks) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, String)> = blocks
        .flatten()
        .filter(|b| b.file_name().to_string_lossy().starts_with("loop"))
        .filter_map(|b| {
            let file = std::fs::read_to_string(b.path().join("loop/backing_file")).ok()?;
            Path::new(file.trim_end()).starts_with(&dir).then(|| {
                (
                    Path::new("/dev").join(b.file_name()),
                    file.trim_end().into(),
                )
            })
        })
        .collect();
    found.sort();
    found
}

/// Runs `bin local-cloud --state-dir DIR ARGS`.
pub fn cli(bin: impl AsRef<Path>, state_dir: &Path, args: &[&str]) -> Output {
    cli_command(local_cloud(bin), state_dir, args)
}

/// Runs `local-cloud --state-dir DIR ARGS` with `local_cloud` the command that runs
/// `local-cloud` (see [`Serve::start_command`]).
pub fn cli_command(mut local_cloud: Command, state_dir: &Path, args: &[&str]) -> Output {
    local_cloud
        .arg("--state-dir")
        .arg(state_dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running local-cloud {args:?}: {e}"))
}

/// Like [`cli`], asserting success and decoding JSON stdout (`args` ask for `-o json`).
pub fn cli_json(bin: impl AsRef<Path>, state_dir: &Path, args: &[&str]) -> Value {
    json_stdout(args, cli(bin, state_dir, args))
}

/// Like [`cli_command`], asserting success and decoding JSON stdout.
pub fn cli_command_json(local_cloud: Command, state_dir: &Path, args: &[&str]) -> Value {
    json_stdout(args, cli_command(local_cloud, state_dir, args))
}

fn json_stdout(args: &[&str], out: Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "local-cloud {args:?} failed with {}:\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("local-cloud {args:?}: {e}: {stdout}"))
}

/// The official `openstack` CLI that hack/python-tools.sh installs in `$HYPERCLOUD_CACHE/venv`;
/// fails the test, naming the script, when it is missing.
pub fn openstack_cli() -> PathBuf {
    let bin = crate::cache_dir().join("venv/bin/openstack");
    assert!(
        bin.exists(),
        "the openstack CLI is not installed at {}; run hack/python-tools.sh (hack/test.sh does)",
        bin.display()
    );
    bin
}

/// `openstack ARGS -f json` against the local cloud on `state_dir` (its `clouds.yaml`, cloud
/// `local`, no `OS_*` variables of the caller's environment), asserting success; the JSON.
pub fn openstack_json(state_dir: &Path, args: &[&str]) -> Value {
    let mut cmd = Command::new(openstack_cli());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OS_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .env("OS_CLIENT_CONFIG_FILE", state_dir.join("clouds.yaml"))
        .env("OS_CLOUD", "local")
        .args(args)
        .args(["-f", "json"])
        .output()
        .unwrap_or_else(|e| panic!("running openstack {args:?}: {e}"));
    assert!(
        out.status.success(),
        "openstack {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "openstack {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A persistent disk of the GCE dialect at `api_url` as Google's official client
/// (google-cloud-compute in `$HYPERCLOUD_CACHE/venv-gce`) shows it: `disks.get`, then
/// `instances.get` of each user, through `hack/lib/gce-disk.py --require-client` (its doc
/// gives the JSON: `size_gb`, `type`, `description`, `users`, `attachments`, ...). `None` when
/// the client is told the disk does not exist.
pub fn gce_disk(api_url: &str, project: &str, zone: &str, disk: &str) -> Option<Value> {
    let python = crate::venv_python("venv-gce", "google.cloud.compute_v1", "gce");
    let script = crate::repo_root().join("hack/lib/gce-disk.py");
    let out = Command::new(python)
        .arg(&script)
        .args(["--require-client", api_url, project, zone, disk, "-"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gce-disk.py {zone}/{disk} failed with {}:\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("gce-disk.py {zone}/{disk}: {e}: {stdout}"));
    (v["found"] == true).then_some(v)
}

/// A minimal HTTP/1.1 request (`Connection: close`, 30 s read timeout); status, head and
/// body. Status 0 when the server cannot be reached.
pub fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String, String) {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http:// URL: {url}"));
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let Ok(mut stream) = TcpStream::connect(host) else {
        return (0, String::new(), String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("set a read timeout");
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

/// A Keystone token for the local cloud's default admin user (project `demo`).
pub fn token(api_url: &str) -> String {
    let body = r#"{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}}, "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}}"#;
    let (status, head, _) = http(
        "POST",
        &format!("{api_url}/identity/v3/auth/tokens"),
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
        .expect("an X-Subject-Token header")
}

/// The Compute API of a local cloud, signed in as its admin in the `demo` project, for tests of
/// a cloud started in process (the blocking [`http`] would stall the runtime that serves it).
pub struct Nova {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Nova {
    /// Signs in to the cloud at `api_url` with the default password.
    pub async fn login(api_url: &str) -> Nova {
        let http = reqwest::Client::new();
        let body = serde_json::json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}},
            "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}});
        let resp = http
            .post(format!("{api_url}/identity/v3/auth/tokens"))
            .json(&body)
            .send()
            .await
            .expect("sign in to the local cloud");
        let token = resp.headers()["x-subject-token"]
            .to_str()
            .expect("a token")
            .to_owned();
        Nova {
            http,
            url: api_url.to_owned(),
            token,
        }
    }

    /// `method` on `path` under `/compute/v2.1`; fails the test unless it succeeds. The JSON
    /// answer (`null` for none).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let mut req = self
            .http
            .request(method, format!("{}/compute/v2.1{path}", self.url))
            .header("x-auth-token", &self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("a Compute request");
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().await.unwrap_or(serde_json::Value::Null)
    }

    /// A server `name` of flavor 1 with `metadata`: its ID.
    pub async fn server(&self, name: &str, metadata: serde_json::Value) -> String {
        let body =
            serde_json::json!({"server": {"name": name, "flavorRef": "1", "metadata": metadata}});
        let v = self
            .call(reqwest::Method::POST, "/servers", Some(body))
            .await;
        v["server"]["id"].as_str().expect("a server ID").to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_reports_status_zero_when_nothing_answers() {
        let port = crate::process::free_port();
        let (status, head, body) = http("GET", &format!("http://127.0.0.1:{port}/x"), &[], None);
        assert_eq!((status, head.as_str(), body.as_str()), (0, "", ""));
    }

    #[test]
    fn http_sends_the_request_and_splits_the_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !String::from_utf8_lossy(&req).contains("{\"a\": 1}") {
                let n = conn.read(&mut buf).expect("read");
                req.extend_from_slice(&buf[..n]);
            }
            conn.write_all(b"HTTP/1.1 201 Created\r\nX-Subject-Token: t1\r\n\r\n{}")
                .expect("write");
            String::from_utf8_lossy(&req).into_owned()
        });
        let (status, head, body) = http(
            "POST",
            &format!("http://{addr}/identity/v3/auth/tokens"),
            &[("X-Test", "yes")],
            Some("{\"a\": 1}"),
        );
        assert_eq!(status, 201);
        assert!(head.contains("X-Subject-Token: t1"), "{head}");
        assert_eq!(body, "{}");
        let req = server.join().expect("server");
        assert!(
            req.starts_with("POST /identity/v3/auth/tokens HTTP/1.1\r\n"),
            "{req}"
        );
        assert!(req.contains("Content-Type: application/json\r\n"), "{req}");
        assert!(req.contains("X-Test: yes\r\n"), "{req}");
    }
}
