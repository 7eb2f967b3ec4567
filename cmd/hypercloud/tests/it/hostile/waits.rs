//! Class 4 of #29: no timeout, endless pagination, hot loops. Hostile servers written here
//! (tokio on 127.0.0.1:0) that accept and never answer, repeat or alternate page tokens forever,
//! keep a Compute Engine operation `RUNNING`, or answer vSphere too slowly; each provider is
//! pointed at one through its cloud config, and each test asserts a clear error naming the API
//! and call within a bounded wait, the number of requests the server received (counted here),
//! and the process's peak RSS (from /proc).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::support::{peak_rss_kib, BIN};

/// Peak RSS any of these processes may reach: a listing followed forever, or a hot loop
/// buffering answers, grows without bound; start-up needs a few tens of MiB.
const RSS_LIMIT_KIB: u64 = 256 * 1024;

/// One request as the hostile server saw it.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    /// Path and query.
    target: String,
    /// The `Host` header.
    host: String,
    body: String,
}

/// What the hostile server does with a request.
enum Reply {
    /// Answers with this status, content type and body.
    With(u16, &'static str, String),
    /// The same with one more header.
    Headed(u16, &'static str, (&'static str, String), String),
    /// Never answers (the connection stays open).
    Hang,
}

type Handler = Arc<dyn Fn(&Request, u64) -> Reply + Send + Sync>;

/// A hostile HTTP/1.1 server on a loopback port; counts the requests it receives.
struct Hostile {
    url: String,
    port: u16,
    requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Hostile {
    /// Serves `handler`, which gets each request and its 1-based number.
    async fn start(handler: impl Fn(&Request, u64) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicU64::new(0));
        let handler: Handler = Arc::new(handler);
        let counted = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, handler.clone(), counted.clone()));
            }
        });
        Hostile {
            url: format!("http://127.0.0.1:{port}"),
            port,
            requests,
            task,
        }
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads requests from one connection (keep-alive) and answers each as the handler says.
async fn serve(mut conn: TcpStream, handler: Handler, requests: Arc<AtomicU64>) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.len() > 1 << 20 {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut first = head.lines().next().unwrap_or_default().split(' ');
        let method = first.next().unwrap_or_default().to_owned();
        let target = first.next().unwrap_or_default().to_owned();
        let header = |name: &str| {
            head.lines()
                .skip(1)
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_owned())
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let host = header("host").unwrap_or_default();
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
        buf.drain(..head_end + length);
        let n = requests.fetch_add(1, Ordering::Relaxed) + 1;
        let request = Request {
            method,
            target,
            host,
            body,
        };
        match handler(&request, n) {
            Reply::Hang => {
                // Hold the connection open without a byte of answer.
                std::future::pending::<()>().await;
            }
            Reply::With(status, content_type, body) => {
                if !answer(&mut conn, status, content_type, None, &body).await {
                    return;
                }
            }
            Reply::Headed(status, content_type, (name, value), body) => {
                if !answer(&mut conn, status, content_type, Some((name, &value)), &body).await {
                    return;
                }
            }
        }
    }
}

/// Writes one answer; false when the connection is gone.
async fn answer(
    conn: &mut TcpStream,
    status: u16,
    content_type: &str,
    header: Option<(&str, &str)>,
    body: &str,
) -> bool {
    let extra = header
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.is_ok() && conn.write_all(body.as_bytes()).await.is_ok()
}

/// How a run of the binary ended.
struct Outcome {
    /// Exit code, `None` when it was still running at the limit (then killed).
    code: Option<i32>,
    /// stdout and stderr together.
    output: String,
    /// Peak RSS seen while it ran.
    peak_kib: u64,
    elapsed: Duration,
}

/// Runs the binary with `args` and `env` until it exits or `limit` passes (then kills it),
/// or, with `until`, until its output contains that text; samples its peak RSS meanwhile.
async fn run(
    dir: &Path,
    args: &[String],
    env: &[(&str, &str)],
    limit: Duration,
    until: Option<&str>,
) -> Outcome {
    let log = dir.join(format!("run-{}.log", std::process::id()));
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env("HOME", dir)
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let pid = child.id().unwrap();
    let mut peak_kib = 0;
    let code = loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        let seen = until.is_some_and(|needle| {
            std::fs::read_to_string(&log).is_ok_and(|text| text.contains(needle))
        });
        if seen || started.elapsed() > limit {
            let _ = child.kill().await;
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    Outcome {
        code,
        output: std::fs::read_to_string(&log).unwrap_or_default(),
        peak_kib,
        elapsed: started.elapsed(),
    }
}

/// The process failed (no panic) with `needle` in its output after `expected` requests of
/// the listing (`counted`), in bounded memory.
fn assert_listing_refused(o: &Outcome, needle: &str, counted: &AtomicU64, expected: u64) {
    assert_failed(o);
    assert!(o.output.contains(needle), "{}", o.output);
    assert_eq!(counted.load(Ordering::Relaxed), expected, "{}", o.output);
    assert_bounded_memory(o);
}

/// The process exited by itself with an error (not a panic) within its limit.
fn assert_failed(o: &Outcome) {
    assert!(
        matches!(o.code, Some(c) if c != 0 && c != 101),
        "still running or crashed after {:?}: {:?}\n{}",
        o.elapsed,
        o.code,
        o.output
    );
}

fn assert_bounded_memory(o: &Outcome) {
    assert!(
        o.peak_kib > 0 && o.peak_kib < RSS_LIMIT_KIB,
        "peak RSS {} KiB (limit {RSS_LIMIT_KIB})\n{}",
        o.peak_kib,
        o.output
    );
}

/// A kubeconfig for an apiserver that is not there: the personalities build their client
/// before the cloud is asked anything, and never reach it in these tests.
fn kubeconfig(dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster:\n    server: https://127.0.0.1:1\n\
         users:\n- name: none\n  user:\n    token: x\ncontexts:\n- name: none\n  context:\n    cluster: none\n    user: none\n\
         current-context: none\n",
    )
    .unwrap();
    path
}

// ------------------------------------------------------------------------------ gce

/// A gce.conf for a hostile endpoint serving both the API and the metadata server.
fn gce_conf(dir: &Path, server: &Hostile, extra: &str) -> PathBuf {
    let path = dir.join("gce.conf");
    std::fs::write(
        &path,
        format!(
            "[global]\nproject-id = demo\nlocal-zone = us-central1-a\nnetwork-name = private\n\
             api-endpoint = {}/compute/v1/\n{extra}\n\
             [Hypercloud]\nanonymous = true\nmetadata-endpoint = {}\n",
            server.url, server.url
        ),
    )
    .unwrap();
    path
}

/// Start-up lists the region's zones (`multizone`); `token(n)` is the `nextPageToken` of the
/// n-th `zones.list` page.
async fn gce_zones_listing(token: fn(u64) -> String) -> (Hostile, Arc<AtomicU64>) {
    let lists = Arc::new(AtomicU64::new(0));
    let counted = lists.clone();
    let server = Hostile::start(move |r, _| {
        if r.target.starts_with("/compute/v1/projects/demo/zones?") {
            let n = counted.fetch_add(1, Ordering::Relaxed) + 1;
            let page = serde_json::json!({
                "items": [{"name": format!("us-central1-{n}")}],
                "nextPageToken": token(n),
            });
            Reply::With(200, "application/json", page.to_string())
        } else {
            Reply::With(404, "text/plain", "not here".into())
        }
    })
    .await;
    (server, lists)
}

async fn gce_kubelet_helper(dir: &Path, server: &Hostile) -> Outcome {
    let conf = gce_conf(dir, server, "multizone = true");
    let args = [
        "kubelet-helper".to_owned(),
        "--cloud-provider=gce".to_owned(),
        format!("--cloud-config={}", conf.display()),
        format!("--kubeconfig={}", kubeconfig(dir).display()),
        "--hostname-override=node-1".to_owned(),
        "--once".to_owned(),
    ];
    run(dir, &args, &[], Duration::from_secs(120), None).await
}

/// (b) A Compute Engine list whose `nextPageToken` never changes: start-up stops on the
/// second page with an error naming `zones.list` and the repeated token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_list_repeating_the_same_page_token_stops_on_the_second_page() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let (server, lists) = gce_zones_listing(|_| "same-token".into()).await;
    let o = gce_kubelet_helper(dir.path(), &server).await;
    assert_listing_refused(
        &o,
        "compute zones.list: page 2 repeats continuation token \"same-token\"",
        &lists,
        2,
    );
}

/// (c) Two tokens in turn: the third page brings back the first token, and that stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_list_alternating_two_page_tokens_stops_on_the_third_page() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let (server, lists) =
        gce_zones_listing(|n| if n % 2 == 1 { "tick" } else { "tock" }.into()).await;
    let o = gce_kubelet_helper(dir.path(), &server).await;
    assert_listing_refused(
        &o,
        "compute zones.list: page 3 repeats continuation token \"tick\"",
        &lists,
        3,
    );
}

/// (d) An operation that stays `RUNNING`, answered at once by every `operations.wait`: the
/// provider backs off between polls and gives up after `[Hypercloud] operation-timeout`
/// with an error naming the call and the operation, instead of polling in a hot loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_operation_that_stays_running_is_polled_with_back_off_then_named() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let waits = Arc::new(AtomicU64::new(0));
    let counted = waits.clone();
    let running = serde_json::json!({
        "kind": "compute#operation", "name": "op-forever", "status": "RUNNING",
        "selfLink": "https://compute.example/compute/v1/projects/demo/global/operations/op-forever",
    })
    .to_string();
    let server = Hostile::start(move |r, _| {
        let path = r.target.split('?').next().unwrap_or_default();
        match (r.method.as_str(), path) {
            ("GET", "/compute/v1/projects/demo/zones/us-central1-a") => Reply::With(
                200,
                "application/json",
                r#"{"name": "us-central1-a"}"#.into(),
            ),
            ("GET", "/compute/v1/projects/demo") => Reply::With(
                200,
                "application/json",
                r#"{"name": "demo", "commonInstanceMetadata": {"fingerprint": "abc=", "items": []}}"#
                    .into(),
            ),
            ("POST", "/compute/v1/projects/demo/setCommonInstanceMetadata") => {
                Reply::With(200, "application/json", running.clone())
            }
            ("POST", "/compute/v1/projects/demo/global/operations/op-forever/wait") => {
                counted.fetch_add(1, Ordering::Relaxed);
                Reply::With(200, "application/json", running.clone())
            }
            _ => Reply::With(404, "text/plain", format!("no {} {}", r.method, r.target)),
        }
    })
    .await;
    let conf = gce_conf(dir.path(), &server, "");
    std::fs::write(
        &conf,
        std::fs::read_to_string(&conf).unwrap() + "operation-timeout = 6s\n",
    )
    .unwrap();
    let key = dir.path().join("tunnel");
    std::fs::write(
        dir.path().join("tunnel.pub"),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHlwZXJjbG91ZC1nY2UtdGVzdC1rZXktMDAwMDA= test\n",
    )
    .unwrap();
    let args = [
        "apiserver-plugin".to_owned(),
        "--cloud-provider=gce".to_owned(),
        format!("--cloud-config={}", conf.display()),
        format!("--kubeconfig={}", kubeconfig(dir.path()).display()),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={}", free_port().await),
        format!("--cert-dir={}", dir.path().join("certs").display()),
        "--ssh-user=kube".to_owned(),
        format!("--ssh-keyfile={}", key.display()),
    ];
    let needle = "operation op-forever failed: still RUNNING after";
    let o = run(
        dir.path(),
        &args,
        &[],
        Duration::from_secs(90),
        Some(needle),
    )
    .await;
    assert!(o.output.contains(needle), "{}", o.output);
    assert!(
        o.output.contains("projects.setCommonInstanceMetadata"),
        "{}",
        o.output
    );
    // 6 s of pauses from 0.5 s doubling (with jitter): a handful of polls; a hot loop
    // makes thousands. The plugin retries the whole change every 5 s after that, so allow
    // for a second round having started.
    let polls = waits.load(Ordering::Relaxed);
    assert!(
        (2..=24).contains(&polls),
        "{polls} operations.wait calls\n{}",
        o.output
    );
    assert_bounded_memory(&o);
}

async fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

// ------------------------------------------------------------------------------ aws

/// A hostile endpoint that is both the instance metadata service (an instance in us-east-1a)
/// and EC2, whose `DescribeInstances` answers are `ec2(n)` for the n-th call.
async fn aws_endpoint(ec2: fn(u64) -> Reply) -> (Hostile, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let server = Hostile::start(move |r, _| {
        let text = |s: &str| Reply::With(200, "text/plain", s.to_owned());
        match (r.method.as_str(), r.target.as_str()) {
            ("PUT", "/latest/api/token") => text("hostile-token"),
            ("GET", "/latest/meta-data/instance-id") => text("i-0123456789abcdef0"),
            ("GET", "/latest/meta-data/placement/availability-zone") => text("us-east-1a"),
            ("GET", "/latest/meta-data/local-hostname") => text("ip-10-0-0-1.ec2.internal"),
            ("GET", "/latest/meta-data/local-ipv4") => text("10.0.0.1"),
            ("GET", "/latest/meta-data/instance-type") => text("m5.large"),
            ("GET", p) if p.starts_with("/latest/") => {
                Reply::With(404, "text/plain", "not found".into())
            }
            ("POST", "/") if r.body.contains("Action=DescribeInstances") => {
                ec2(counted.fetch_add(1, Ordering::Relaxed) + 1)
            }
            _ => Reply::With(
                400,
                "text/xml",
                "<Response><Errors><Error><Code>InvalidAction</Code><Message>no</Message></Error></Errors><RequestID>x</RequestID></Response>".into(),
            ),
        }
    })
    .await;
    (server, calls)
}

/// A `DescribeInstances` page without instances, continued by `token`.
fn ec2_page(token: &str) -> Reply {
    Reply::With(
        200,
        "text/xml;charset=UTF-8",
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
             <requestId>req-1</requestId><reservationSet/><nextToken>{token}</nextToken></DescribeInstancesResponse>"
        ),
    )
}

async fn aws_kubelet_helper(dir: &Path, server: &Hostile, limit: Duration) -> Outcome {
    let conf = dir.join("cloud.conf");
    std::fs::write(
        &conf,
        hypercloud_testenv::aws::cloud_conf(&server.url, &server.url, ""),
    )
    .unwrap();
    let args = [
        "kubelet-helper".to_owned(),
        "--cloud-provider=aws".to_owned(),
        format!("--cloud-config={}", conf.display()),
        format!("--kubeconfig={}", kubeconfig(dir).display()),
        "--once".to_owned(),
    ];
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIDHYPERCLOUDTEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_CONFIG_FILE", "/nonexistent"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
    ];
    run(dir, &args, &env, limit, None).await
}

/// (a) EC2 accepts and never answers: the SDK's per-attempt and per-operation timeouts end
/// the call with an error naming `DescribeInstances`, within a bounded time and attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_ec2_that_never_answers_times_out_by_name() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let (server, calls) = aws_endpoint(|_| Reply::Hang).await;
    let o = aws_kubelet_helper(dir.path(), &server, Duration::from_secs(150)).await;
    assert_failed(&o);
    assert!(o.output.contains("DescribeInstances"), "{}", o.output);
    assert!(
        o.output.to_lowercase().contains("timeout") || o.output.contains("timed out"),
        "{}",
        o.output
    );
    let n = calls.load(Ordering::Relaxed);
    assert!(
        (1..=4).contains(&n),
        "{n} DescribeInstances attempts\n{}",
        o.output
    );
    assert_bounded_memory(&o);
}

/// (b) `NextToken` repeated: the listing stops on the second page, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_describe_instances_repeating_next_token_is_refused_by_name() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let (server, calls) = aws_endpoint(|_| ec2_page("same-token")).await;
    let o = aws_kubelet_helper(dir.path(), &server, Duration::from_secs(120)).await;
    assert_listing_refused(
        &o,
        "ec2 DescribeInstances: page 2 repeats continuation token \"same-token\"",
        &calls,
        2,
    );
}

/// (c) Two `NextToken`s in turn, which the SDK's own duplicate check (the previous token
/// only) follows forever: stopped on the third page, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_describe_instances_alternating_next_tokens_is_refused_by_name() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let (server, calls) =
        aws_endpoint(|n| ec2_page(if n % 2 == 1 { "tick" } else { "tock" })).await;
    let o = aws_kubelet_helper(dir.path(), &server, Duration::from_secs(120)).await;
    assert_listing_refused(
        &o,
        "ec2 DescribeInstances: page 3 repeats continuation token \"tick\"",
        &calls,
        3,
    );
}

// -------------------------------------------------------------------------- vsphere

/// (e) A vCenter that accepts and answers nothing, with the largest `soap-roundtrip-count`:
/// one deadline across the retries ends start-up with an error naming the endpoint, in about
/// a minute instead of ten, after one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsphere_slow_endpoint_stops_start_up_within_one_deadline_naming_it() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let server = Hostile::start(|_, _| Reply::Hang).await;
    let conf = dir.path().join("vsphere.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nuser = \"user\"\npassword = \"pass\"\nport = \"{}\"\ndatacenters = \"DC0\"\n\
             soap-roundtrip-count = \"10\"\n\n[VirtualCenter \"127.0.0.1\"]\n\n[Hypercloud]\nplain-http = true\n",
            server.port
        ),
    )
    .unwrap();
    let args = [
        "kubelet-helper".to_owned(),
        "--cloud-provider=vsphere".to_owned(),
        format!("--cloud-config={}", conf.display()),
        format!("--kubeconfig={}", kubeconfig(dir.path()).display()),
        "--hostname-override=node-1".to_owned(),
        "--once".to_owned(),
    ];
    let o = run(dir.path(), &args, &[], Duration::from_secs(180), None).await;
    assert_failed(&o);
    let endpoint = format!("127.0.0.1:{}", server.port);
    assert!(o.output.contains(&endpoint), "{}", o.output);
    assert!(o.output.contains("RetrieveServiceContent"), "{}", o.output);
    // Ten attempts of a minute each would be ten minutes and ten requests.
    assert!(
        server.requests() <= 2,
        "{} requests\n{}",
        server.requests(),
        o.output
    );
    assert_bounded_memory(&o);
}

// ------------------------------------------------------------------------ openstack

/// (b) Nova's `servers_links` `next` link repeated forever: the in-tree kubelet-helper asks
/// Nova for its server, and the listing stops on the second page, naming nova and the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_list_repeating_the_next_link_is_refused_by_name() {
    let _group = hypercloud_testenv::group("hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let lists = Arc::new(AtomicU64::new(0));
    let counted = lists.clone();
    let server = Hostile::start(move |r, _| {
        // The server's own address, for the catalog and the links.
        let base = r.host.clone();
        let path = r.target.split('?').next().unwrap_or_default();
        match (r.method.as_str(), path) {
            ("GET", "/openstack/latest/meta_data.json") => Reply::With(
                200,
                "application/json",
                r#"{"uuid": "5d6a9c1e-0000-4000-8000-000000000001", "name": "node-1", "availability_zone": "nova"}"#.into(),
            ),
            ("POST", "/identity/v3/auth/tokens") => Reply::Headed(
                201,
                "application/json",
                ("X-Subject-Token", "hostile-token".into()),
                serde_json::json!({"token": {
                    "expires_at": "2099-01-01T00:00:00.000000Z",
                    "catalog": [{"type": "compute", "endpoints": [{
                        "interface": "public", "region_id": "RegionOne", "region": "RegionOne",
                        "url": format!("http://{base}/compute/v2.1"),
                    }]}],
                }})
                .to_string(),
            ),
            ("GET", "/compute/v2.1/servers/detail") => {
                counted.fetch_add(1, Ordering::Relaxed);
                let page = serde_json::json!({
                    "servers": [],
                    "servers_links": [{"rel": "next",
                        "href": format!("http://{base}/compute/v2.1/servers/detail?marker=same")}],
                });
                Reply::With(200, "application/json", page.to_string())
            }
            _ => Reply::With(404, "application/json", r#"{"itemNotFound": {"message": "no"}}"#.into()),
        }
    })
    .await;
    let conf = dir.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nauth-url = {url}/identity/v3\nusername = admin\npassword = secret\n\
             user-domain-name = Default\nproject-name = demo\nproject-domain-name = Default\n\
             region = RegionOne\n[Metadata]\nsearch-order = metadataService\nmetadata-url = {url}\n",
            url = server.url
        ),
    )
    .unwrap();
    let args = [
        "kubelet-helper".to_owned(),
        "--cloud-provider=openstack".to_owned(),
        format!("--cloud-config={}", conf.display()),
        format!("--kubeconfig={}", kubeconfig(dir.path()).display()),
        "--once".to_owned(),
    ];
    let o = run(dir.path(), &args, &[], Duration::from_secs(120), None).await;
    assert_listing_refused(
        &o,
        "nova list servers: page 2 repeats continuation token",
        &lists,
        2,
    );
}
