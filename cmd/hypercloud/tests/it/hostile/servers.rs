//! See main.rs. Bad flag values refused by name (exit 2) on every personality that takes
//! them; the admin server under file-descriptor exhaustion and idle connections; log lines
//! bounded whatever a request carries.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hypercloud_testenv::localcloud::{local_cloud, state_dir, Serve};
use hypercloud_testenv::process::{free_port, personality, Proc, Stdout};

use super::support::{peak_rss_kib, BIN};

/// The personalities that talk to the Kubernetes API (and so take the client flags).
const KUBE_PERSONALITIES: [&str; 4] = [
    "kubelet-helper",
    "apiserver-plugin",
    "controller-manager",
    "cloud-controller-manager",
];
const CONTROLLER_MANAGERS: [&str; 2] = ["controller-manager", "cloud-controller-manager"];

/// The largest line the binary may write (`hypercloud_options::logging::MAX_LOG_LINE_BYTES`).
const MAX_LOG_LINE_BYTES: usize = 16 * 1024;

/// Runs `hypercloud ARGS` (no `RUST_LOG`, no kubeconfig from the environment), killing it
/// after `limit`: exit code (`None`: still running at the limit, or killed) and stderr.
fn run_bounded(args: &[String], limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hypercloud");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = (&mut stderr).take(1 << 20).read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let deadline = Instant::now() + limit;
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (code, reader.join().unwrap_or_default())
}

/// Every value must make `personality` exit 2 within seconds, naming `flag` on stderr.
fn assert_refused(personality: &str, args: &[&str], flag: &str) {
    let mut all = vec![personality.to_string()];
    // A provider, so that nothing else is missing; the bad value must be what stops it.
    if personality != "local-cloud" {
        all.push("--cloud-provider=fake".into());
    }
    all.extend(args.iter().map(|a| a.to_string()));
    let (code, stderr) = run_bounded(&all, Duration::from_secs(20));
    assert_eq!(
        code,
        Some(2),
        "{personality} {args:?}: expected exit 2 naming {flag}; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(flag),
        "{personality} {args:?}: stderr does not name {flag}:\n{stderr}"
    );
    assert!(
        stderr.lines().all(|l| l.len() <= MAX_LOG_LINE_BYTES),
        "{personality} {args:?}: a line of stderr is over the limit"
    );
}

#[test]
fn client_flags_out_of_range_are_refused_by_name_on_every_personality() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let cases: &[(&str, &str)] = &[
        // Underflows to 0 as a float: used to mean "the default" silently.
        ("--kube-api-qps=1e-50", "--kube-api-qps"),
        ("--kube-api-qps=1e-400", "--kube-api-qps"),
        ("--kube-api-qps=NaN", "--kube-api-qps"),
        ("--kube-api-qps=inf", "--kube-api-qps"),
        ("--kube-api-qps=-1", "--kube-api-qps"),
        ("--kube-api-qps=1e300", "--kube-api-qps"),
        ("--kube-api-burst=4294967295", "--kube-api-burst"),
        ("--kube-api-burst=-1", "--kube-api-burst"),
        ("--master=ftp://127.0.0.1:6443", "--master"),
        ("--master=127.0.0.1:6443", "--master"),
        ("--master=unix:///run/kube.sock", "--master"),
        ("--master=https://", "--master"),
        ("--master=http://bad host", "--master"),
    ];
    for p in KUBE_PERSONALITIES {
        for (arg, flag) in cases {
            assert_refused(p, &[arg], flag);
        }
    }
}

#[test]
fn controller_manager_flags_out_of_range_are_refused_by_name() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let cases: &[(&str, &str)] = &[
        // A million workers used to abort the process.
        ("--concurrent-node-syncs=1000000", "--concurrent-node-syncs"),
        (
            "--concurrent-service-syncs=1000000",
            "--concurrent-service-syncs",
        ),
        (
            "--concurrent-service-syncs=1001",
            "--concurrent-service-syncs",
        ),
        ("--concurrent-node-syncs=0", "--concurrent-node-syncs"),
        ("--concurrent-node-syncs=-1", "--concurrent-node-syncs"),
        // Lease names and namespaces as the API server validates them.
        (
            "--leader-elect-resource-name=",
            "--leader-elect-resource-name",
        ),
        (
            "--leader-elect-resource-name=../../kube-system/x",
            "--leader-elect-resource-name",
        ),
        (
            "--leader-elect-resource-name=UPPER",
            "--leader-elect-resource-name",
        ),
        (
            "--leader-elect-resource-namespace=",
            "--leader-elect-resource-namespace",
        ),
        (
            "--leader-elect-resource-namespace=kube-system/leases",
            "--leader-elect-resource-namespace",
        ),
        (
            "--leader-elect-resource-namespace=a.b",
            "--leader-elect-resource-namespace",
        ),
        // Durations: negative, not a number, beyond Go's range.
        (
            "--leader-elect-lease-duration=-15s",
            "--leader-elect-lease-duration",
        ),
        (
            "--leader-elect-lease-duration=NaNs",
            "--leader-elect-lease-duration",
        ),
        (
            "--leader-elect-lease-duration=9999999999999h",
            "--leader-elect-lease-duration",
        ),
        (
            "--leader-elect-retry-period=0s",
            "--leader-elect-retry-period",
        ),
        ("--node-monitor-period=-5s", "--node-monitor-period"),
        (
            "--route-reconciliation-period=1e3s",
            "--route-reconciliation-period",
        ),
        ("--min-resync-period=inf", "--min-resync-period"),
        (
            "--node-status-update-frequency=-1m",
            "--node-status-update-frequency",
        ),
    ];
    for p in CONTROLLER_MANAGERS {
        for (arg, flag) in cases {
            assert_refused(p, &[arg], flag);
        }
    }
    assert_refused(
        "kubelet-helper",
        &["--node-status-update-frequency=-1m"],
        "--node-status-update-frequency",
    );
}

#[test]
fn leader_migration_configuration_with_a_path_like_leader_name_is_refused() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let dir = tempfile::tempdir().expect("tmp");
    for (i, name) in ["../../x", "", "Lease", "a/b"].iter().enumerate() {
        let path = dir.path().join(format!("lm{i}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: {name:?}\ncontrollerLeaders:\n  - {{name: route, component: '*'}}\n"
            ),
        )
        .expect("write");
        for p in CONTROLLER_MANAGERS {
            let (code, stderr) = run_bounded(
                &[
                    p.to_string(),
                    "--cloud-provider=fake".into(),
                    "--enable-leader-migration".into(),
                    format!("--leader-migration-config={}", path.display()),
                ],
                Duration::from_secs(20),
            );
            assert_eq!(code, Some(2), "{p} leaderName {name:?}:\n{stderr}");
            assert!(
                stderr.contains("leaderName") && stderr.contains("--leader-migration-config"),
                "{p} leaderName {name:?}: not named:\n{stderr}"
            );
        }
    }
}

#[test]
fn deeply_nested_yaml_configs_are_refused_quickly_naming_the_file() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let dir = tempfile::tempdir().expect("tmp");
    // A quarter of a megabyte of nesting: minutes of parsing before the check.
    let flow = format!("global:\n  user: {}\n", "[".repeat(250_000));
    let block: String = (0..400)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect();
    for (name, text) in [("flow.yaml", flow), ("block.yaml", block)] {
        let path = dir.path().join(name);
        std::fs::write(&path, &text).expect("write");
        for provider in ["vsphere", "fake"] {
            let (code, stderr) = run_bounded(
                &[
                    "cloud-controller-manager".into(),
                    format!("--cloud-provider={provider}"),
                    format!("--cloud-config={}", path.display()),
                ],
                Duration::from_secs(20),
            );
            assert_eq!(code, Some(2), "{provider} {name}:\n{stderr}");
            assert!(
                stderr.contains(name) && stderr.contains("nested deeper than"),
                "{provider} {name}: the file and the problem are not named:\n{stderr}"
            );
        }
    }
}

#[test]
fn local_cloud_flags_out_of_range_are_refused_by_name() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = state_dir(&tmp);
    let dir = dir.display().to_string();
    for (arg, flag) in [
        ("--token-ttl=0s", "--token-ttl"),
        ("--token-ttl=1e400s", "--token-ttl"),
        ("--inject-error-rate=NaN", "--inject-error-rate"),
        ("--inject-throttle-rate=1.5", "--inject-throttle-rate"),
        ("--inject-latency=-1s", "--inject-latency"),
        ("--inject-latency=1e300s", "--inject-latency"),
        ("--lb-vip-pool=0.0.0.0/0", "--lb-vip-pool"),
        ("--region=", "--region"),
        ("--region=a/b", "--region"),
        ("--region=../x", "--region"),
        ("--availability-zones=nova,", "--availability-zones"),
        ("--availability-zones=nova,zone/1", "--availability-zones"),
        ("--availability-zones=a b", "--availability-zones"),
    ] {
        assert_refused(
            "local-cloud",
            &[
                "--state-dir",
                &dir,
                "serve",
                "--listen=127.0.0.1:0",
                "--no-metadata",
                arg,
            ],
            flag,
        );
    }
}

/// A controller manager with the fake provider, leader election off and its admin server
/// on 127.0.0.1, against a kubeconfig whose server never answers (the admin server and
/// `/healthz` need none), under `prlimit --nofile=N:N` when `nofile` is given.
fn start_ccm(dir: &Path, port: u16, nofile: Option<u32>, extra: &[&str]) -> Proc {
    let kubeconfig = dir.join("kubeconfig");
    // Port 1 on loopback: refused at once, never reached.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .expect("kubeconfig");
    let fake = dir.join("fake.yaml");
    std::fs::write(&fake, "instances: []\n").expect("fake config");
    let args = [
        format!("--kubeconfig={}", kubeconfig.display()),
        "--cloud-provider=fake".into(),
        format!("--cloud-config={}", fake.display()),
        "--leader-elect=false".into(),
        "--authentication-skip-lookup=true".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
    ];
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}"))
                .arg("--")
                .arg(BIN)
                .arg("cloud-controller-manager")
                .env_remove("RUST_LOG")
                .env("NO_COLOR", "1");
            c
        }
        None => personality(BIN, "cloud-controller-manager"),
    };
    cmd.args(args).args(extra);
    Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.join("ccm.log"),
        Stdout::Null,
    )
}

/// `GET https://127.0.0.1:port/healthz` (certificate not checked: self-signed), bounded.
fn healthz(port: u16) -> Option<u16> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(3))
            .build()
            .ok()?;
        client
            .get(format!("https://127.0.0.1:{port}/healthz"))
            .send()
            .await
            .ok()
            .map(|r| r.status().as_u16())
    })
}

fn wait_healthy(port: u16, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if healthz(port) == Some(200) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

fn log_len(p: &Proc) -> u64 {
    std::fs::metadata(p.log_path())
        .map(|m| m.len())
        .unwrap_or(0)
}

#[test]
fn admin_server_at_the_open_files_limit_backs_off_and_recovers() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let dir = tempfile::tempdir().expect("tmp");
    let port = free_port();
    let mut ccm = start_ccm(dir.path(), port, Some(128), &[]);
    assert!(
        wait_healthy(port, Duration::from_secs(60)),
        "/healthz never answered:\n{}",
        ccm.log()
    );
    // Open far more connections than the process may hold files: the kernel completes them
    // (backlog 1024), the server's accept fails with EMFILE while they wait.
    let mut conns = Vec::new();
    for _ in 0..400 {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(c) => conns.push(c),
            Err(_) => break,
        }
    }
    assert!(conns.len() > 200, "only {} connections opened", conns.len());
    std::thread::sleep(Duration::from_secs(1));
    let before = log_len(&ccm);
    std::thread::sleep(Duration::from_secs(4));
    let grown = log_len(&ccm).saturating_sub(before);
    assert!(
        ccm.running(),
        "the server died at the limit:\n{}",
        ccm.log()
    );
    // A spinning loop wrote tens of MB a second; rate-limited warnings a few hundred bytes.
    assert!(
        grown < 32 * 1024,
        "the log grew {grown} bytes in 4 s at the open-files limit"
    );
    let log = ccm.log();
    assert!(
        log.contains("accepting a connection failed; backing off"),
        "the accept failure is not reported:\n{log}"
    );
    let peak = peak_rss_kib(ccm.pid()).unwrap_or(0);
    assert!(peak < 512 * 1024, "peak RSS {peak} KiB");
    drop(conns);
    assert!(
        wait_healthy(port, Duration::from_secs(30)),
        "/healthz does not answer after the connections closed:\n{}",
        ccm.log()
    );
    ccm.sigterm();
    ccm.wait_exit(Duration::from_secs(20));
}

#[test]
fn idle_connections_to_the_admin_server_are_closed() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let dir = tempfile::tempdir().expect("tmp");
    let port = free_port();
    let ccm = start_ccm(dir.path(), port, None, &[]);
    assert!(
        wait_healthy(port, Duration::from_secs(60)),
        "/healthz never answered:\n{}",
        ccm.log()
    );
    // Silent clients: connected, no TLS handshake ever sent; and one that stops half-way.
    let mut silent = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut partial = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    // The first bytes of a TLS ClientHello record header, then nothing.
    partial.write_all(&[0x16, 0x03, 0x01, 0x02]).expect("write");
    let started = Instant::now();
    for s in [&mut silent, &mut partial] {
        s.set_read_timeout(Some(Duration::from_secs(40)))
            .expect("timeout");
        let mut buf = [0u8; 64];
        // The server closes (0 bytes or a reset) at its handshake timeout; a server that
        // never does leaves us to our 40 s read timeout (WouldBlock/TimedOut).
        match s.read(&mut buf) {
            // 0 bytes: closed; more: a TLS alert before closing. Either way the server ended it.
            Ok(_closed_or_alert) => {}
            Err(e) => assert!(
                !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "an idle connection is still open after {:?}",
                started.elapsed()
            ),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "idle connections closed only after {:?}",
        started.elapsed()
    );
    assert_eq!(healthz(port), Some(200), "the server still serves others");
}

#[test]
fn a_huge_value_in_a_request_makes_no_log_line_over_the_limit() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    for format in ["text", "json"] {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = state_dir(&tmp);
        let mut cmd = local_cloud(BIN);
        // -v 4: every request is logged with its path.
        cmd.args(["-v=4", &format!("--logging-format={format}")]);
        let serve = Serve::start_command(cmd, &dir, &[]);
        let host = serve
            .api_url
            .strip_prefix("http://")
            .expect("http URL")
            .to_string();
        let huge = format!("/compute/v2.1/servers/{}", "a".repeat(60_000));
        {
            let path = huge.as_str();
            let mut s = TcpStream::connect(&host).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )
            .expect("request");
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            assert!(
                !answer.is_empty(),
                "no answer to {}",
                &path[..40.min(path.len())]
            );
        }
        // The request log is written after the answer; give it a moment.
        std::thread::sleep(Duration::from_millis(500));
        let log = serve.log();
        assert!(
            log.contains("aaaaaaaaaaaaaaaa"),
            "the long path was not logged at -v=4 ({format}); log:\n{}",
            &log[..log.len().min(4000)]
        );
        for line in log.lines() {
            assert!(
                line.len() <= MAX_LOG_LINE_BYTES,
                "a {format} log line of {} bytes",
                line.len()
            );
            if format == "json" && line.starts_with('{') {
                serde_json::from_str::<serde_json::Value>(line)
                    .unwrap_or_else(|e| panic!("a cut JSON line is not JSON: {e}"));
            }
        }
        assert!(
            log.contains("…[truncated "),
            "the cut is not marked ({format})"
        );
        serve.terminate();
    }
}

#[test]
fn a_huge_flag_value_makes_no_error_line_over_the_limit() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    // The longest single argument Linux passes is 128 KiB.
    let huge = format!("--cloud-provider={}", "p".repeat(100_000));
    for p in KUBE_PERSONALITIES {
        let (code, stderr) = run_bounded(&[p.to_string(), huge.clone()], Duration::from_secs(20));
        assert_eq!(code, Some(2), "{p}: {}", &stderr[..stderr.len().min(2000)]);
        assert!(stderr.contains("--cloud-provider") || stderr.contains("provider"));
        for line in stderr.lines() {
            assert!(
                line.len() <= MAX_LOG_LINE_BYTES,
                "{p}: a stderr line of {} bytes",
                line.len()
            );
        }
    }
}
