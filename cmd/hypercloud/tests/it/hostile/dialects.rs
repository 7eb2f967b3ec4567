//! See main.rs.
//!
//! The local cloud as a process: regions and zones that would only fail later (empty, `/`,
//! dot segments, control characters) are refused at start with exit 2 naming the flag, before
//! any state is written; malformed writes of its GCE and OpenStack dialects are 400s that
//! leave the state as it was across a restart; a huge request body is refused without the
//! server's memory following it.

use std::path::Path;
use std::process::Command;

use hypercloud_testenv::localcloud::{http, local_cloud, state_dir, token, Serve};

use super::support::{peak_rss_kib, BIN};

/// Runs `hypercloud local-cloud --state-dir DIR ARGS...` to its end.
fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd: Command = local_cloud(BIN);
    cmd.arg("--state-dir").arg(dir).args(args);
    cmd.output().expect("run hypercloud local-cloud")
}

#[test]
fn local_cloud_refuses_empty_and_path_like_regions_and_zones_by_flag() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let serve = |flag: &'static str, value: &'static str| {
        (
            vec![
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metadata-listen",
                "127.0.0.1:0",
                flag,
                value,
            ],
            flag,
        )
    };
    let cases = [
        serve("--region", ""),
        serve("--region", "us/central1"),
        serve("--region", ".."),
        serve("--region", "region\none"),
        serve("--availability-zones", ""),
        serve("--availability-zones", "nova,"),
        serve("--availability-zones", "nova,zones/b"),
        serve("--availability-zones", "a b"),
        (vec!["instance", "create", "vm", "--zone", ""], "--zone"),
        (vec!["instance", "create", "vm", "--zone", "a/b"], "--zone"),
        (vec!["volume", "create", "v", "--zone", "."], "--zone"),
    ];
    for (args, flag) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = state_dir(&tmp);
        let out = run(&dir, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} does not name {flag}: {stderr}"
        );
        assert!(
            stderr.lines().all(|l| l.len() < 512),
            "{args:?}: an overlong error line: {stderr}"
        );
        // Refused before anything was opened or written.
        assert!(!dir.exists(), "{args:?} created the state directory");
    }
}

/// The GCE instance `victim`'s metadata and tags and the project's metadata, as shown.
fn gce_state(api: &str) -> String {
    let base = format!("{api}/compute/v1/projects/demo");
    let (s1, _, instance) = http(
        "GET",
        &format!("{base}/zones/nova/instances/victim"),
        &[],
        None,
    );
    let (s2, _, project) = http("GET", &base, &[], None);
    assert_eq!((s1, s2), (200, 200), "{instance} {project}");
    let i: serde_json::Value = serde_json::from_str(&instance).unwrap();
    let p: serde_json::Value = serde_json::from_str(&project).unwrap();
    format!(
        "{} {} {}",
        i["metadata"], i["tags"], p["commonInstanceMetadata"]
    )
}

#[test]
fn malformed_dialect_writes_change_nothing_across_a_restart() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let api = serve.api_url.clone();
    let instances = format!("{api}/compute/v1/projects/demo/zones/nova/instances");
    let (status, _, body) = http(
        "POST",
        &instances,
        &[],
        Some(
            r#"{"name": "victim", "machineType": "zones/nova/machineTypes/m1.small",
                "metadata": {"items": [{"key": "ssh-keys", "value": "core:ssh-ed25519 AAAA"}]},
                "tags": {"items": ["web"]}}"#,
        ),
    );
    assert_eq!(status, 200, "{body}");
    let before = gce_state(&api);
    let victim = format!("{instances}/victim");
    let project = format!("{api}/compute/v1/projects/demo");
    for call in [
        format!("{victim}/setMetadata"),
        format!("{victim}/setTags"),
        format!("{project}/setCommonInstanceMetadata"),
    ] {
        for body in ["null", "7", "\"x\"", "[]", "{\"items\": {}}"] {
            let (status, _, answer) = http("POST", &call, &[], Some(body));
            assert_eq!(status, 400, "{call} {body}: {answer}");
            assert!(answer.contains("\"code\":400"), "{call} {body}: {answer}");
        }
        let (status, _, answer) = http("POST", &call, &[], Some("{\"items\": []}"));
        assert_eq!(status, 412, "{call} without a fingerprint: {answer}");
        assert!(answer.contains("conditionNotMet"), "{answer}");
    }
    // The OpenStack side: wrong shapes on Neutron and Octavia writes.
    let t = token(&api);
    let auth = [("x-auth-token", t.as_str())];
    for (path, body) in [
        ("/network/v2.0/networks", "null"),
        ("/network/v2.0/ports", "{\"port\": 7}"),
        ("/network/v2.0/security-group-rules", "[]"),
        ("/load-balancer/v2/lbaas/loadbalancers", "\"lb\""),
        ("/compute/v2.1/servers", "{\"server\": null}"),
    ] {
        let (status, _, answer) = http("POST", &format!("{api}{path}"), &auth, Some(body));
        assert_eq!(status, 400, "{path} {body}: {answer}");
    }
    assert_eq!(gce_state(&api), before);
    serve.terminate();
    // What is on disk is what was there before the refused writes.
    let serve = Serve::start(BIN, &dir, &[]);
    assert_eq!(gce_state(&serve.api_url), before);
    serve.terminate();
}

#[test]
fn a_huge_request_body_is_refused_without_the_memory_following_it() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let mut serve = Serve::start(BIN, &dir, &[]);
    let pid_file = std::fs::read_to_string(dir.join("server.json")).unwrap();
    let pid = serde_json::from_str::<serde_json::Value>(&pid_file).unwrap()["pid"]
        .as_u64()
        .unwrap() as u32;
    let start = peak_rss_kib(pid).unwrap();
    // 64 MiB of one JSON string, to a GCE and an OpenStack write.
    let huge = format!(
        "{{\"items\": [{{\"key\": \"k\", \"value\": \"{}\"}}]}}",
        "x".repeat(64 << 20)
    );
    let t = token(&serve.api_url);
    for (path, auth) in [
        ("/compute/v1/projects/demo/setCommonInstanceMetadata", None),
        ("/network/v2.0/networks", Some(t.as_str())),
    ] {
        let headers: Vec<(&str, &str)> = auth.map(|t| ("x-auth-token", t)).into_iter().collect();
        let (status, _, answer) = http(
            "POST",
            &format!("{}{path}", serve.api_url),
            &headers,
            Some(&huge),
        );
        // 413, or the connection closed once the limit was passed (status 0).
        assert!(status == 413 || status == 0, "{path}: {status} {answer}");
    }
    assert!(serve.running(), "the local cloud died");
    let peak = peak_rss_kib(pid).unwrap();
    assert!(
        peak < start + 32 * 1024,
        "peak RSS grew from {start} KiB to {peak} KiB on a refused 64 MiB body"
    );
    serve.terminate();
}
