//! The real `hypercloud local-cloud` process: banner, operator CLI (online and offline),
//! kill -9 in the middle of writes and restart with state intact, one server per state dir.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hypercloud_testenv::localcloud::{cli, cli_json, http, serve_log, state_dir, token, Serve};

use crate::BIN;

#[test]
fn serve_prints_where_it_listens_and_how_to_use_it() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    // The server answers as soon as it is bound; the banner follows a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut log = serve_log(&dir);
    while !log.contains("auth_url:") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        log = serve_log(&dir);
    }
    assert!(
        log.contains(&format!("API:          {}", serve.api_url)),
        "{log}"
    );
    assert!(log.contains(&serve.metadata_url), "{log}");
    assert!(log.contains("OS_CLOUD=local"), "{log}");
    assert!(log.contains("--cloud-provider=local"), "{log}");
    assert!(log.contains("auth_url:"), "{log}");
    let clouds = std::fs::read_to_string(dir.join("clouds.yaml")).unwrap();
    assert!(
        clouds.contains(&format!("auth_url: {}/identity", serve.api_url)),
        "{clouds}"
    );
    let conf = std::fs::read_to_string(dir.join("cloud.conf")).unwrap();
    assert!(
        conf.contains("[Global]") && conf.contains("search-order = configDrive,metadataService"),
        "{conf}"
    );
    eprintln!(
        "local-cloud start-up (spawn to first answer): {:?}",
        serve.startup
    );
    serve.terminate();
    assert!(
        !dir.join("server.json").exists(),
        "server.json left behind after a clean stop"
    );
}

#[test]
fn operator_cli_works_with_and_without_a_running_server() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);

    // Offline: no server holds the state dir, so the CLI runs the cloud in-process.
    let created = cli_json(
        BIN,
        &dir,
        &[
            "instance",
            "create",
            "offline-1",
            "--address",
            "127.1.0.40",
            "-o",
            "json",
        ],
    );
    assert_eq!(created["name"], "offline-1");
    assert_eq!(created["addresses"]["private"][0]["addr"], "127.1.0.40");
    let vol = cli_json(
        BIN,
        &dir,
        &["volume", "create", "disk-1", "--size", "4", "-o", "json"],
    );
    assert_eq!(vol["size"], 4);

    let serve = Serve::start(BIN, &dir, &["--availability-zones", "nova,zone-b"]);
    let created = cli_json(
        BIN,
        &dir,
        &[
            "instance", "create", "online-1", "--zone", "zone-b", "--flavor", "m1.tiny", "-o",
            "json",
        ],
    );
    assert_eq!(created["OS-EXT-AZ:availability_zone"], "zone-b");
    assert_eq!(created["flavor"]["original_name"], "m1.tiny");
    assert!(cli(BIN, &dir, &["instance", "stop", "online-1"])
        .status
        .success());
    let list = cli_json(BIN, &dir, &["instance", "list", "-o", "json"]);
    let status_of = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status_of("online-1"), "SHUTOFF");
    assert_eq!(status_of("offline-1"), "ACTIVE");
    let stop_again = cli(BIN, &dir, &["instance", "stop", "online-1"]);
    assert!(!stop_again.status.success());
    assert!(
        String::from_utf8_lossy(&stop_again.stderr).contains("409"),
        "{}",
        String::from_utf8_lossy(&stop_again.stderr)
    );
    assert!(cli(BIN, &dir, &["instance", "start", "online-1"])
        .status
        .success());
    let bad_zone = cli(BIN, &dir, &["instance", "create", "x", "--zone", "mars"]);
    assert!(!bad_zone.status.success());
    let status = cli_json(BIN, &dir, &["status", "-o", "json"]);
    assert_eq!(status["running"], true);
    assert_eq!(status["api_url"], serve.api_url.as_str());
    assert_eq!(status["instances"], 2);
    assert_eq!(status["volumes"], 1);
    let text = cli(BIN, &dir, &["instance", "list"]);
    let table = String::from_utf8_lossy(&text.stdout);
    assert!(table.lines().next().unwrap().starts_with("ID"), "{table}");
    assert!(
        table.contains("online-1") && table.contains("zone-b"),
        "{table}"
    );
    serve.terminate();

    // Offline again: the zones and everything else were kept.
    assert!(cli(BIN, &dir, &["instance", "delete", "offline-1"])
        .status
        .success());
    assert!(cli(BIN, &dir, &["volume", "delete", "disk-1"])
        .status
        .success());
    let status = cli_json(BIN, &dir, &["status", "-o", "json"]);
    assert_eq!(status["running"], false);
    assert_eq!(status["instances"], 1);
    assert_eq!(status["volumes"], 0);
    let missing = cli(BIN, &dir, &["instance", "delete", "no-such"]);
    assert!(!missing.status.success());
}

#[test]
fn kill_9_mid_run_loses_no_acknowledged_write() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let api = serve.api_url.clone();
    let tok = token(&api);
    let auth = [("X-Auth-Token", tok.as_str())];
    let router_list = http(
        "GET",
        &format!("{api}/network/v2.0/routers?name=router1"),
        &auth,
        None,
    )
    .2;
    let router: serde_json::Value = serde_json::from_str(&router_list).unwrap();
    let router_id = router["routers"][0]["id"].as_str().unwrap().to_owned();
    let (status, _, _) = http(
        "PUT",
        &format!("{api}/network/v2.0/routers/{router_id}/add_extraroutes"),
        &auth,
        Some(
            r#"{"router": {"routes": [{"destination": "10.244.7.0/24", "nexthop": "127.1.0.7"}]}}"#,
        ),
    );
    assert_eq!(status, 200);

    // A writer creates instances through the API as fast as it can; kill -9 hits it mid-run.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop, api, tok) = (acked.clone(), stop.clone(), api.clone(), tok.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("w{i}");
                let body = format!(r#"{{"server": {{"name": "{name}", "flavorRef": "1"}}}}"#);
                let (status, _, _) = http(
                    "POST",
                    &format!("{api}/compute/v2.1/servers"),
                    &[("X-Auth-Token", &tok)],
                    Some(&body),
                );
                if status == 202 {
                    acked.lock().unwrap().push(name);
                } else {
                    break; // the server is gone
                }
                i += 1;
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.lock().unwrap().len() < 20 {
        assert!(Instant::now() < deadline, "writer made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    serve.kill9();
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let acked = acked.lock().unwrap().clone();

    let serve = Serve::start(BIN, &dir, &[]);
    eprintln!(
        "restart after kill -9 ({} instances acknowledged): {:?} to first answer",
        acked.len(),
        serve.startup
    );
    let list = cli_json(BIN, &dir, &["instance", "list", "-o", "json"]);
    let names: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    for name in &acked {
        assert!(
            names.contains(name),
            "acknowledged {name} lost after kill -9"
        );
    }
    // At most the one request in flight at the kill may have landed unacknowledged.
    assert!(
        names.len() <= acked.len() + 1,
        "{} present, {} acknowledged",
        names.len(),
        acked.len()
    );
    // Tokens and routes survived too.
    let (status, _, body) = http(
        "GET",
        &format!("{}/network/v2.0/routers/{router_id}", serve.api_url),
        &[("X-Auth-Token", &tok)],
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("10.244.7.0/24"), "{body}");
    // Addresses stay unique across the crash.
    let mut ips: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["addresses"]["private"][0]["addr"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let n = ips.len();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), n);
    serve.terminate();
}

#[test]
fn a_second_server_on_the_same_state_dir_is_refused() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(BIN, &dir, &[]);
    let out = std::process::Command::new(BIN)
        .args([
            "local-cloud",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metadata-listen",
            "127.0.0.1:0",
            "--state-dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in use by another local-cloud server"),
        "{stderr}"
    );
    // The first one is unaffected.
    assert_eq!(
        http("GET", &format!("{}/identity/v3", serve.api_url), &[], None).0,
        200
    );
    serve.terminate();
}

#[test]
fn absurd_serve_flags_exit_2_naming_the_flag_before_anything_starts() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    for (flag, value, range) in [
        ("--token-ttl", "1e300h", "1s to 8760h"),
        ("--token-ttl", "0s", "1s to 8760h"),
        ("--token-ttl", "NaN", "1s to 8760h"),
        ("--inject-latency", "1e300s", "0 to 600s"),
        ("--inject-latency", "compute=11m", "0 to 600s"),
        ("--inject-error-rate", "NaN", "0 to 1"),
        ("--inject-throttle-rate", "network=-0.5", "0 to 1"),
        ("--lb-vip-pool", "0.0.0.0/8", "127.0.0.0/8"),
        ("--lb-vip-pool", "10.0.0.0/24", "127.0.0.0/8"),
        ("--volume-backing", "sparse", "none, sparse-file"),
    ] {
        let out = std::process::Command::new(BIN)
            .args(["local-cloud", "serve", "--state-dir"])
            .arg(&dir)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--metadata-listen",
                "127.0.0.1:0",
            ])
            .args([flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag), "{flag} {value}: {stderr}");
        assert!(stderr.contains(range), "{flag} {value}: {stderr}");
        // Nothing started: no state was written.
        assert!(!dir.join("server.json").exists(), "{flag} {value}");
        assert!(!dir.join("wal.jsonl").exists(), "{flag} {value}");
    }
}

/// Without loop devices (here: no `losetup` on PATH, as for a user who is not root) a backed
/// cloud still starts, says why once, backs volumes by files and makes no device link.
#[test]
fn a_backed_cloud_without_loop_devices_starts_and_says_why() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_process");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let mut cmd = hypercloud_testenv::localcloud::local_cloud(BIN);
    cmd.env("PATH", tmp.path().join("empty-path"));
    let serve = Serve::start_command(cmd, &dir, &["--volume-backing", "sparse-file"]);
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("server.json")).unwrap()).unwrap();
    let why = info["loop_devices_unavailable"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("losetup"), "{info}");
    let vm = cli_json(BIN, &dir, &["instance", "create", "vm", "-o", "json"]);
    let vol = cli_json(BIN, &dir, &["volume", "create", "data", "-o", "json"]);
    let (vm_id, vol_id) = (vm["id"].as_str().unwrap(), vol["id"].as_str().unwrap());
    assert!(dir.join(format!("volumes/{vol_id}.img")).exists());
    let t = token(&serve.api_url);
    let (status, _, body) = http(
        "POST",
        &format!(
            "{}/compute/v2.1/servers/{vm_id}/os-volume_attachments",
            serve.api_url
        ),
        &[("X-Auth-Token", &t)],
        Some(&format!(
            r#"{{"volumeAttachment": {{"volumeId": "{vol_id}"}}}}"#
        )),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        !serve.device_link(vm_id, vol_id).exists(),
        "no link without a loop device"
    );
    let log = serve.log();
    assert_eq!(
        log.matches("no loop devices").count(),
        1,
        "one warning naming why: {log}"
    );
    assert!(log.contains("cannot run losetup"), "{log}");
    let status = cli_json(BIN, &dir, &["status", "-o", "json"]);
    assert!(
        status["volume_backing"]
            .as_str()
            .unwrap_or_default()
            .starts_with("sparse-file (no loop devices: cannot run losetup"),
        "{status}"
    );
    serve.terminate();
}
