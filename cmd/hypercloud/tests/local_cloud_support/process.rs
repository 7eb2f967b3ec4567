//! Shared by the process-level local-cloud tests: run the real `hypercloud local-cloud serve`
//! on free loopback ports in a temporary state directory, and speak plain HTTP/1.1 to it with
//! std only (the binary's dev-dependencies have no HTTP client).
#![allow(dead_code, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_hypercloud");

/// A running `hypercloud local-cloud serve`.
pub struct Serve {
    pub child: Child,
    pub api_url: String,
    pub metadata_url: String,
    /// From spawn to answering HTTP.
    pub startup: Duration,
}

impl Serve {
    /// Starts the server on `state_dir` (ports picked by the OS) and waits until it answers.
    pub fn start(state_dir: &Path, extra: &[&str]) -> Serve {
        let log = std::fs::File::create(state_dir.with_extension("serve.log")).unwrap();
        let t = Instant::now();
        let child = Command::new(BIN)
            .args([
                "local-cloud",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metadata-listen",
                "127.0.0.1:0",
            ])
            .arg("--state-dir")
            .arg(state_dir)
            .args(extra)
            .env_remove("HYPERCLOUD_LOCAL_CLOUD_STATE_DIR")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        // Owned by `Serve` at once, so a failed wait below still kills it (Drop).
        let mut serve = Serve {
            child,
            api_url: String::new(),
            metadata_url: String::new(),
            startup: Duration::ZERO,
        };
        let pid = serve.child.id();
        let info_path = state_dir.join("server.json");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(text) = std::fs::read_to_string(&info_path) {
                if let Ok(info) = serde_json::from_str::<Value>(&text) {
                    if info["pid"] == pid {
                        let api_url = info["api_url"].as_str().unwrap().to_owned();
                        if http("GET", &format!("{api_url}/identity/v3"), &[], None).0 == 200 {
                            serve.api_url = api_url;
                            serve.metadata_url =
                                info["metadata_url"].as_str().unwrap_or_default().to_owned();
                            serve.startup = t.elapsed();
                            return serve;
                        }
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "server did not start; log: {}",
                serve_log(state_dir)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM and wait for a clean exit.
    pub fn terminate(mut self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "serve exited with {exit}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn serve_log(state_dir: &Path) -> String {
    std::fs::read_to_string(state_dir.with_extension("serve.log")).unwrap_or_default()
}

/// A state directory inside a temp dir (the serve log goes beside it).
pub fn state_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("state")
}

/// Runs `hypercloud local-cloud <args> --state-dir DIR`.
pub fn cli(state_dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("local-cloud")
        .args(args)
        .arg("--state-dir")
        .arg(state_dir)
        .env_remove("HYPERCLOUD_LOCAL_CLOUD_STATE_DIR")
        .output()
        .unwrap()
}

/// Like [`cli`], asserting success and decoding JSON stdout.
pub fn cli_json(state_dir: &Path, args: &[&str]) -> Value {
    let out = cli(state_dir, args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A minimal HTTP/1.1 request (`Connection: close`); returns status, headers and body.
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
    if stream.write_all(req.as_bytes()).is_err() {
        return (0, String::new(), String::new());
    }
    let mut raw = Vec::new();
    if stream.read_to_end(&mut raw).is_err() {
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

/// A token for the default admin user.
pub fn token(api_url: &str) -> String {
    let body = r#"{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}}, "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}}"#;
    let (status, head, _) = http(
        "POST",
        &format!("{api_url}/identity/v3/auth/tokens"),
        &[],
        Some(body),
    );
    assert_eq!(status, 201);
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("x-subject-token:")
                .then(|| l.split_once(':').unwrap().1.trim().to_owned())
        })
        .unwrap()
}
