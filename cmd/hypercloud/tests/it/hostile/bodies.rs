//! Class 3 of issue #29 (and redirects, from class 8): huge, endless and hostile answers from
//! every cloud API and metadata server a provider or personality reads, served by in-test
//! servers on 127.0.0.1:0. Each test runs the real binary against one of them and asserts a
//! named error, stderr lines of bounded length, a bounded peak RSS (VmHWM from /proc), and
//! for redirects that the target was never asked. A huge request body sent to the local
//! cloud's servers is refused (413) without being read.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::support::{peak_rss_kib, BIN};

/// Peak RSS allowed to a process fed a hostile answer.
const MAX_RSS_KIB: u64 = 300 << 10;
/// The longest line allowed on stdout or stderr.
const MAX_LINE: usize = 4096;
/// How long a process may take to give up.
const DEADLINE: Duration = Duration::from_secs(120);

/// How the hostile server answers.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// 200 with `Content-Length: 2147483648`, then bytes for as long as the client reads.
    Huge,
    /// 200, chunked, never ending.
    Endless,
    /// 500 with a 100 MB body.
    HugeError,
    /// 302 to the same path on the redirect target (another loopback address).
    Redirect,
}

const ALL: [Mode; 4] = [Mode::Huge, Mode::Endless, Mode::HugeError, Mode::Redirect];
const NO_REDIRECT: [Mode; 3] = [Mode::Huge, Mode::Endless, Mode::HugeError];

/// A path the server answers normally (e.g. the IMDS paths in front of a hostile EC2).
type Normal = fn(&str, &str) -> Option<String>;

/// An in-test HTTP server on 127.0.0.1:0, hostile per [`Mode`] except for what `normal`
/// answers; with [`Mode::Redirect`], a second server on 127.0.0.2 counts the requests that
/// followed the redirect.
struct Hostile {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    followed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Hostile {
    fn start(mode: Mode, normal: Normal) -> Hostile {
        let stop = Arc::new(AtomicBool::new(false));
        let followed = Arc::new(AtomicU64::new(0));
        let target = serve(
            TcpListener::bind("127.0.0.2:0")
                .or_else(|_| TcpListener::bind("127.0.0.1:0"))
                .unwrap(),
            stop.clone(),
            followed.clone(),
            move |conn, _, _| answer(conn, 200, &[], b"followed"),
        );
        let requests = Arc::new(AtomicU64::new(0));
        let addr = serve(
            TcpListener::bind("127.0.0.1:0").unwrap(),
            stop.clone(),
            requests.clone(),
            move |conn, method, path| {
                if let Some(body) = normal(method, path) {
                    return answer(conn, 200, &[], body.as_bytes());
                }
                match mode {
                    Mode::Huge => stream(conn, 200, &["Content-Length: 2147483648"], false),
                    Mode::Endless => stream(conn, 200, &["Transfer-Encoding: chunked"], true),
                    Mode::HugeError => stream(conn, 500, &["Content-Length: 100000000"], false),
                    Mode::Redirect => {
                        let location = format!("Location: http://{target}{path}");
                        answer(conn, 302, &[&location], b"")
                    }
                }
            },
        );
        Hostile {
            addr,
            requests,
            followed,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Accepts connections on `listener` until `stop`, each on its own thread, handing the
/// request's method and path to `handle`.
fn serve(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    handle: impl Fn(&mut TcpStream, &str, &str) + Send + Sync + Copy + 'static,
) -> SocketAddr {
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    count.fetch_add(1, Ordering::Relaxed);
                    std::thread::spawn(move || {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                        let _ = conn.set_write_timeout(Some(Duration::from_secs(30)));
                        if let Some((method, path)) = read_head(&mut conn) {
                            handle(&mut conn, &method, &path);
                        }
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    addr
}

/// The request line's method and path (the head is read; a small body is left unread).
fn read_head(conn: &mut TcpStream) -> Option<(String, String)> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 << 10 {
        if conn.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    let mut line = text.lines().next()?.split(' ');
    Some((line.next()?.to_owned(), line.next()?.to_owned()))
}

fn answer(conn: &mut TcpStream, status: u16, headers: &[&str], body: &[u8]) {
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    let _ = conn.write_all(out.as_bytes());
    let _ = conn.write_all(body);
}

/// Writes a head, then body bytes until the client stops reading (or 2 GiB are sent).
fn stream(conn: &mut TcpStream, status: u16, headers: &[&str], chunked: bool) {
    let mut out =
        format!("HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: application/json\r\n");
    for h in headers {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    if conn.write_all(out.as_bytes()).is_err() {
        return;
    }
    let block = vec![b'x'; 64 << 10];
    let framed = [
        format!("{:x}\r\n", block.len()).into_bytes(),
        block.clone(),
        b"\r\n".to_vec(),
    ]
    .concat();
    let total = if status == 500 {
        100_000_000
    } else {
        2u64 << 30
    };
    let mut sent = 0u64;
    while sent < total {
        let ok = if chunked {
            conn.write_all(&framed).is_ok()
        } else {
            let n = (total - sent).min(block.len() as u64) as usize;
            conn.write_all(&block[..n]).is_ok()
        };
        if !ok {
            return;
        }
        sent += block.len() as u64;
    }
}

/// What a run of the binary left behind.
struct Run {
    code: Option<i32>,
    output: String,
    peak_rss_kib: u64,
}

/// Runs the binary with `args` until it exits (killed after [`DEADLINE`]),
/// sampling its peak RSS.
fn run(args: &[String]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = std::fs::File::create(dir.path().join("out")).unwrap();
    let err = std::fs::File::create(dir.path().join("err")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("GCE_METADATA_HOST")
        .env("AWS_ACCESS_KEY_ID", "AKIDHOSTILE")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let mut child = cmd.spawn().unwrap();
    let started = Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = peak_rss_kib(child.id()) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read =
        |f: &str| String::from_utf8_lossy(&std::fs::read(dir.path().join(f)).unwrap()).into_owned();
    Run {
        code: status.code(),
        output: format!("{}{}", read("out"), read("err")),
        peak_rss_kib: peak,
    }
}

/// The assertions every hostile run shares: a failure (not a panic, not a signal) whose
/// output names `expected`, no line over [`MAX_LINE`], a peak RSS under [`MAX_RSS_KIB`].
fn assert_refused(what: &str, mode: Mode, run: &Run, expected: &[&str]) {
    let context = format!("{what} against {mode:?}");
    // Shown with --nocapture (and on failure): what the run said last.
    let tail: Vec<&str> = run.output.lines().rev().take(2).collect();
    eprintln!(
        "{context}: exit {:?}, peak {} KiB: {tail:?}",
        run.code, run.peak_rss_kib
    );
    let excerpt: String = run.output.chars().take(4000).collect();
    assert!(
        matches!(run.code, Some(c) if c != 0 && c != 101),
        "{context}: exit {:?}\n{excerpt}",
        run.code
    );
    assert!(
        expected.iter().any(|e| run.output.contains(e)),
        "{context}: none of {expected:?} in the output:\n{excerpt}"
    );
    let longest = run.output.lines().map(str::len).max().unwrap_or(0);
    assert!(longest <= MAX_LINE, "{context}: a line of {longest} bytes");
    assert!(run.peak_rss_kib > 0, "{context}: no RSS sample");
    assert!(
        run.peak_rss_kib < MAX_RSS_KIB,
        "{context}: peak RSS {} KiB",
        run.peak_rss_kib
    );
}

/// What each mode's error says.
fn expected(mode: Mode) -> &'static [&'static str] {
    match mode {
        Mode::Huge | Mode::Endless => &["larger than the limit"],
        Mode::HugeError => &["HTTP 500"],
        Mode::Redirect => &["redirect (HTTP 302)"],
    }
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A kubeconfig of an apiserver that is never reached: these runs fail at the cloud first.
fn kubeconfig(dir: &tempfile::TempDir) -> String {
    write(
        dir,
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n\
         users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
    )
}

fn kubelet_helper(provider: &str, conf: &str, dir: &tempfile::TempDir) -> Vec<String> {
    vec![
        "kubelet-helper".into(),
        format!("--cloud-provider={provider}"),
        format!("--cloud-config={conf}"),
        format!("--kubeconfig={}", kubeconfig(dir)),
        "--hostname-override=hostile".into(),
        "--once".into(),
    ]
}

fn nothing(_: &str, _: &str) -> Option<String> {
    None
}

/// IMDS for an instance in us-east-1a, answering only its paths.
fn imds(method: &str, path: &str) -> Option<String> {
    match (method, path) {
        ("PUT", "/latest/api/token") => Some("token".into()),
        (_, "/latest/meta-data/instance-id") => Some("i-0123456789abcdef0".into()),
        (_, "/latest/meta-data/placement/availability-zone") => Some("us-east-1a".into()),
        (_, p) if p.starts_with("/latest/") => Some(String::new()),
        _ => None,
    }
}

/// One provider or personality against one kind of hostile server.
struct Case {
    what: &'static str,
    modes: &'static [Mode],
    /// What the server answers normally (the rest is hostile).
    normal: Normal,
    /// `--cloud-provider`.
    provider: &'static str,
    /// `kubelet-helper metadata` (the OpenStack metadata reader) instead of a registration.
    metadata_command: bool,
    /// The cloud config, given the server's URL.
    conf: fn(&Hostile) -> String,
    /// What the error must also name (the server or the call).
    names: &'static str,
}

/// Runs `case` against each of its modes: a named error, bounded lines and memory, and
/// no request followed to a redirect's target.
fn check(case: Case) {
    for &mode in case.modes {
        let server = Hostile::start(mode, case.normal);
        let dir = tempfile::tempdir().unwrap();
        let conf = write(&dir, "cloud.conf", &(case.conf)(&server));
        let args = if case.metadata_command {
            [
                "kubelet-helper",
                "metadata",
                &format!("--cloud-provider={}", case.provider),
                &format!("--cloud-config={conf}"),
            ]
            .map(String::from)
            .to_vec()
        } else {
            kubelet_helper(case.provider, &conf, &dir)
        };
        let run = run(&args);
        assert_refused(case.what, mode, &run, expected(mode));
        assert!(
            run.output.contains(case.names),
            "{}: {} not named:\n{}",
            case.what,
            case.names,
            run.output
        );
        assert!(
            server.requests.load(Ordering::Relaxed) > 0,
            "{}: the server was never asked",
            case.what
        );
        assert_eq!(
            server.followed.load(Ordering::Relaxed),
            0,
            "{}: a redirect was followed",
            case.what
        );
    }
}

#[test]
fn aws_imds_answers_are_bounded_and_redirects_refused() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check(Case {
        what: "aws IMDS",
        modes: &ALL,
        normal: nothing,
        provider: "aws",
        metadata_command: false,
        conf: |s| {
            format!(
                "[Global]\nKubernetesClusterID = c\n[Hypercloud]\nmetadata-endpoint = {}\n",
                s.url()
            )
        },
        names: "instance metadata",
    });
}

#[test]
fn aws_ec2_answers_are_bounded() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check(Case {
        what: "aws EC2",
        modes: &NO_REDIRECT,
        normal: imds,
        provider: "aws",
        metadata_command: false,
        conf: |s| {
            let url = s.url();
            format!(
                "[Global]\nZone = us-east-1a\nKubernetesClusterID = c\n\
                 [ServiceOverride \"ec2\"]\nService = ec2\nRegion = us-east-1\nURL = {url}/ec2\n\
                 [ServiceOverride \"elb\"]\nService = elasticloadbalancing\nRegion = us-east-1\nURL = {url}/elb\n\
                 [Hypercloud]\nmetadata-endpoint = {url}\n"
            )
        },
        names: "DescribeInstances",
    });
}

#[test]
fn gce_metadata_answers_are_bounded_and_redirects_refused() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check(Case {
        what: "gce metadata",
        modes: &ALL,
        normal: nothing,
        provider: "gce",
        metadata_command: false,
        conf: |s| {
            format!(
                "[global]\napi-endpoint = {0}/compute/v1/\n[Hypercloud]\nanonymous = true\nmetadata-endpoint = {0}\n",
                s.url()
            )
        },
        names: "metadata server project/project-id",
    });
}

#[test]
fn gce_compute_answers_are_bounded() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check(Case {
        what: "gce compute",
        modes: &NO_REDIRECT,
        normal: nothing,
        provider: "gce",
        metadata_command: false,
        conf: |s| {
            format!(
                "[global]\nproject-id = demo\nlocal-zone = us-central1-a\nmultizone = true\n\
                 api-endpoint = {0}/compute/v1/\n[Hypercloud]\nanonymous = true\nmetadata-endpoint = {0}\n",
                s.url()
            )
        },
        names: "zones.list",
    });
}

#[test]
fn vsphere_soap_answers_are_bounded() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check(Case {
        what: "vsphere SOAP",
        modes: &NO_REDIRECT,
        normal: nothing,
        provider: "vsphere",
        metadata_command: false,
        conf: |s| {
            format!(
                "[Global]\nuser = \"user\"\npassword = \"pass\"\nport = \"{}\"\ninsecure-flag = \"1\"\ndatacenters = \"DC0\"\n\n\
                 [VirtualCenter \"127.0.0.1\"]\n\n[Hypercloud]\nplain-http = true\n",
                s.addr.port()
            )
        },
        names: "RetrieveServiceContent",
    });
}

#[test]
fn openstack_keystone_answers_are_bounded() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check(Case {
        what: "openstack Keystone",
        modes: &NO_REDIRECT,
        normal: nothing,
        provider: "local",
        metadata_command: false,
        conf: |s| {
            format!(
                "[Global]\nauth-url = {}/identity/v3\n[Hypercloud]\nmax-attempts = 2\n",
                s.url()
            )
        },
        names: "authenticate with Keystone",
    });
}

#[test]
fn openstack_metadata_answers_are_bounded_and_redirects_refused() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check(Case {
        what: "openstack metadata",
        modes: &ALL,
        normal: nothing,
        provider: "local",
        metadata_command: true,
        conf: |s| {
            format!(
                "[Global]\nauth-url = http://127.0.0.1:1/identity/v3\n[Metadata]\nsearch-order = metadataService\nmetadata-url = {}\n",
                s.url()
            )
        },
        names: "metadataService",
    });
}

/// A request with a huge body, announced or chunked, to `addr`; the status line answered.
fn send_huge(addr: SocketAddr, path: &str, chunked: bool) -> String {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let length = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        "Content-Length: 3000000000".to_owned()
    };
    let head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{length}\r\n\r\n");
    conn.write_all(head.as_bytes()).unwrap();
    // Send up to 64 MiB (a server reading it all would take it); stop when the server answers
    // or closes.
    let block = vec![b' '; 64 << 10];
    let framed = [
        format!("{:x}\r\n", block.len()).into_bytes(),
        block.clone(),
        b"\r\n".to_vec(),
    ]
    .concat();
    conn.set_nonblocking(false).unwrap();
    let reader = conn.try_clone().unwrap();
    let answer = std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = vec![0u8; 4096];
        let n = reader.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    });
    for _ in 0..1024 {
        let chunk = if chunked { &framed } else { &block };
        if conn.write_all(chunk).is_err() {
            break;
        }
        if answer.is_finished() {
            break;
        }
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
    answer.join().unwrap()
}

#[test]
fn local_cloud_servers_refuse_huge_request_bodies_with_413() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let port_of = |url: &str| -> SocketAddr {
        url.trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut child = Command::new(BIN)
        .args([
            "local-cloud",
            &format!("--state-dir={}", state.display()),
            "serve",
            "--listen=127.0.0.1:0",
            "--metadata-listen=127.0.0.1:0",
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // `serve` writes server.json with its URLs once it listens.
    let info = state.join("server.json");
    let started = Instant::now();
    let info: serde_json::Value = loop {
        if let Some(v) = std::fs::read(&info)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
        {
            break v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "local-cloud serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let api = port_of(info["api_url"].as_str().unwrap());
    for chunked in [false, true] {
        let status = send_huge(api, "/identity/v3/auth/tokens", chunked);
        assert!(
            status.starts_with("HTTP/1.1 413"),
            "chunked={chunked}: {status:?}"
        );
    }
    if let Some(md) = info["metadata_url"].as_str() {
        let status = send_huge(port_of(md), "/openstack/latest/meta_data.json", false);
        assert!(status.starts_with("HTTP/1.1 4"), "metadata: {status:?}");
    }
    let peak = peak_rss_kib(child.id()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(peak < MAX_RSS_KIB, "local-cloud peak RSS {peak} KiB");
}
