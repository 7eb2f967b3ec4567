//! `hypercloud trace render` on traces the binary itself recorded with
//! `--trace-cloud-calls`, and on broken input (exit codes, messages naming file and line).
//! The rendering rules are unit-tested in pkg/trace; this checks the command around them.

use std::path::Path;
use std::process::Command;

use crate::BIN;

const FAKE_CONFIG: &str = "\
region: RegionOne
zone: nova
instances:
  - name: node-1
    instanceType: m1.small
    addresses: [{type: InternalIP, address: 10.0.0.11}]
";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn hc(args: &[&str]) -> Run {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run hypercloud");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).expect("utf8"),
        stderr: String::from_utf8(out.stderr).expect("utf8"),
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// Records a trace with two personalities (each initialises the fake provider, then stops
/// at the missing kubeconfig) and renders it both ways.
#[test]
fn renders_what_the_personalities_recorded() {
    let _group = hypercloud_testenv::group_blocking("trace_render");
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("fake.yaml");
    std::fs::write(&cfg, FAKE_CONFIG).expect("config");
    let mut traces = Vec::new();
    for component in ["kubelet-helper", "cloud-controller-manager"] {
        let trace = dir.path().join(format!("trace-{component}.jsonl"));
        let r = hc(&[
            component,
            "--cloud-provider=fake",
            &format!("--cloud-config={}", cfg.display()),
            &format!("--trace-cloud-calls={}", trace.display()),
            "--kubeconfig=/nonexistent/kubeconfig",
        ]);
        assert_eq!(
            r.code, 2,
            "{component} stops at the kubeconfig: {}",
            r.stderr
        );
        traces.push(trace);
    }
    let files: Vec<&str> = traces.iter().map(|p| path_str(p)).collect();

    let mut args = vec!["trace", "render", "--participant", "apiserver-plugin"];
    args.extend(&files);
    let r = hc(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("sequenceDiagram\n"), "{}", r.stdout);
    for line in [
        "participant kubelet_helper as kubelet-helper",
        "participant apiserver_plugin as apiserver-plugin",
        "participant cloud_controller_manager as cloud-controller-manager",
        "participant cloud_fake as fake (cloud)",
        "Note over apiserver_plugin: no cloud calls",
        "kubelet_helper->>cloud_fake: initialize(client=false)",
        "cloud_controller_manager->>cloud_fake: initialize(client=false)",
    ] {
        assert!(r.stdout.contains(line), "missing {line:?} in\n{}", r.stdout);
    }

    // -o x.svg picks SVG; the same input gives the same bytes twice.
    let svg = dir.path().join("calls.svg");
    let mut args = vec!["trace", "render", "--title", "fake", "-o", path_str(&svg)];
    args.extend(&files);
    for _ in 0..2 {
        let r = hc(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    }
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.starts_with("<?xml"), "{text}");
    assert!(text.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(text.contains(">cloud-controller-manager</text>"));
    assert!(text.contains(">initialize(client=false)</text>"));

    let mut args = vec!["trace", "render", "--format", "svg", "--title", "fake"];
    args.extend(&files);
    assert_eq!(hc(&args).stdout, text, "stdout and -o give the same SVG");
}

#[test]
fn bad_input_is_named_and_exits_2() {
    let _group = hypercloud_testenv::group_blocking("trace_render");
    let dir = tempfile::tempdir().expect("tmp");
    let good = r#"{"ts_unix_ms":1,"component":"kubelet-helper","provider":"local","method":"initialize","args":{},"result":null,"error":null,"latency_ms":0.1}"#;
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, format!("{good}\n{good}\nnot json\n")).expect("write");
    let r = hc(&["trace", "render", path_str(&bad)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}:3: not a cloud-call trace record",
            bad.display()
        )),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());

    let missing = dir.path().join("missing.jsonl");
    let r = hc(&["trace", "render", path_str(&missing)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("cannot read trace file {}", missing.display())),
        "{}",
        r.stderr
    );

    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").expect("write");
    let r = hc(&["trace", "render", path_str(&empty)]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no cloud calls in"), "{}", r.stderr);

    let r = hc(&["trace", "render"]);
    assert_eq!(r.code, 2, "a file is required: {}", r.stderr);

    let ok = dir.path().join("ok.jsonl");
    std::fs::write(&ok, good).expect("write");
    let out = dir.path().join("no/such/dir/out.mmd");
    let r = hc(&["trace", "render", "-o", path_str(&out), path_str(&ok)]);
    assert_eq!(
        r.code, 1,
        "an unwritable output is a run-time failure: {}",
        r.stderr
    );
    assert!(r.stderr.contains("--output: cannot write"), "{}", r.stderr);
}

/// `hypercloud trace serve` refuses what it cannot serve by name (exit 2), serves what the
/// personalities recorded, and stops on SIGTERM with status 0.
#[test]
fn trace_serve_refuses_by_name_and_serves_until_stopped() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = path_str(dir.path());
    let refused = |args: &[&str], says: &[&str]| {
        let r = hc(&[&["trace", "serve"], args].concat());
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        for s in says {
            assert!(
                r.stderr.contains(s),
                "{args:?} should say {s:?}: {}",
                r.stderr
            );
        }
    };
    refused(
        &["--listen", "0.0.0.0:0", d],
        &["--listen 0.0.0.0:0: not a loopback address"],
    );
    std::fs::write(dir.path().join("notes.jsonl"), "hello\n").expect("write");
    refused(&[d], &["notes.jsonl:1: not a cloud-call trace record"]);
    std::fs::remove_file(dir.path().join("notes.jsonl")).expect("rm");
    refused(&["--expected-differences", "x.txt", d], &["--compare"]);
    refused(&["--compare", d], &["cannot follow", "in-tree"]);

    std::fs::write(
        dir.path().join("trace-x.jsonl"),
        r#"{"ts_unix_ms":1,"component":"kubelet-helper","provider":"local","method":"instance_id","args":{"name":"node-1"},"result":"i-1","error":null,"latency_ms":0.5}
"#,
    )
    .expect("write");
    let mut child = Command::new(BIN)
        .args(["trace", "serve", "--listen", "127.0.0.1:0", d])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("read");
    let url = line
        .trim()
        .strip_prefix("trace view: ")
        .unwrap_or_else(|| panic!("first line names the address: {line:?}"))
        .to_string();
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    // The view follows the files as they grow: the record is there after the follower's first
    // read, which may come after the address is printed.
    let events = || {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        std::io::Write::write_all(
            &mut s,
            b"GET /api/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .expect("request");
        let mut body = String::new();
        std::io::Read::read_to_string(&mut s, &mut body).expect("answer");
        body
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut body = events();
    while !body.contains("\"method\":\"instance_id\"") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        body = events();
    }
    assert!(body.contains("\"method\":\"instance_id\""), "{body}");
    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "stops cleanly on SIGTERM");
}
