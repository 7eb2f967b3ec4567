//! Google's official Compute Engine client (google-cloud-compute, pinned in
//! hack/python-tools.sh, REST transport with the endpoint overridden and anonymous credentials)
//! against the real `hypercloud local-cloud serve`: runs hack/conformance/gce_conformance.py,
//! which drives the GCE dialect (project metadata, zones, regions, instances, operations,
//! firewalls, routes, addresses, target pools, forwarding rules, health checks, GCE's errors)
//! and reads the GCE metadata server as an instance would. Then the operator CLI sees a
//! GCE-created instance as the server it is.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use hypercloud_testenv::localcloud::{cli, cli_json, http, state_dir, Serve};
use serde_json::Value;

use crate::BIN;
const ZONES: &str = "us-central1-a,us-central1-b";
const REGION: &str = "us-central1";

#[test]
fn google_cloud_compute_conformance() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_gce");
    let python = hypercloud_testenv::venv_python("venv-gce", "google.cloud.compute_v1", "gce");
    let script = hypercloud_testenv::repo_root().join("hack/conformance/gce_conformance.py");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(
        BIN,
        &dir,
        &["--availability-zones", ZONES, "--region", REGION],
    );
    let out = Command::new(python)
        .arg(&script)
        .env("GCE_ENDPOINT", &serve.api_url)
        .env("GCE_PROJECT", "demo")
        .env("GCE_ZONE", "us-central1-a")
        .env("GCE_REGION", REGION)
        .env("GCE_METADATA", &serve.metadata_url)
        .output()
        .unwrap();
    hypercloud_testenv::conformance_passed(&out, &script, "gce conformance: ok");
}

#[test]
fn gce_instances_are_servers_to_the_operator_cli() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_gce");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(
        BIN,
        &dir,
        &["--availability-zones", ZONES, "--region", REGION],
    );
    let base = format!(
        "{}/compute/v1/projects/demo/zones/us-central1-b/instances",
        serve.api_url
    );
    let body = r#"{"name": "gce-made", "machineType": "zones/us-central1-b/machineTypes/m1.tiny",
        "networkInterfaces": [{"networkIP": "127.1.251.9"}]}"#;
    let (status, _, op) = http("POST", &base, &[], Some(body));
    assert_eq!(status, 200, "{op}");
    let op: Value = serde_json::from_str(&op).unwrap();
    assert_eq!(op["status"], "DONE", "{op}");
    let list = cli_json(BIN, &dir, &["instance", "list", "-o", "json"]);
    let servers = list.as_array().unwrap();
    let server = servers
        .iter()
        .find(|s| s["name"] == "gce-made")
        .unwrap_or_else(|| panic!("gce-made not in {list}"));
    assert!(server.to_string().contains("127.1.251.9"), "{server}");
    // And a server the CLI stops is TERMINATED to GCE.
    let out = cli(BIN, &dir, &["instance", "stop", "gce-made"]);
    assert!(out.status.success(), "{out:?}");
    let (status, _, inst) = http("GET", &format!("{base}/gce-made"), &[], None);
    assert_eq!(status, 200, "{inst}");
    let inst: Value = serde_json::from_str(&inst).unwrap();
    assert_eq!(inst["status"], "TERMINATED", "{inst}");
    // Unknown instance: GCE's error body.
    let (status, _, err) = http("GET", &format!("{base}/nope"), &[], None);
    assert_eq!(status, 404, "{err}");
    let err: Value = serde_json::from_str(&err).unwrap();
    assert_eq!(err["error"]["errors"][0]["reason"], "notFound", "{err}");
}

#[test]
fn fault_injection_answers_in_gce_error_form() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_gce");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(
        BIN,
        &dir,
        &[
            "--availability-zones",
            ZONES,
            "--region",
            REGION,
            "--inject-throttle-rate",
            "gce=1",
        ],
    );
    let (status, head, body) = http(
        "GET",
        &format!("{}/compute/v1/projects/demo/zones", serve.api_url),
        &[],
        None,
    );
    assert_eq!(status, 429, "{head}\n{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["code"], 429, "{err}");
    assert_eq!(
        err["error"]["errors"][0]["reason"], "rateLimitExceeded",
        "{err}"
    );
    // Only the GCE dialect is throttled.
    let (status, _, _) = http("GET", &format!("{}/identity/v3", serve.api_url), &[], None);
    assert_eq!(status, 200);
}

/// google-auth (Google's own auth library) against a cloud requiring tokens: a key file the
/// operator CLI made authenticates through the token endpoint and its token is served;
/// anonymous requests, a key the cloud did not issue, an unknown account and a wrong audience
/// are refused as Google refuses them (hack/conformance/gce_auth_conformance.py).
#[test]
fn google_auth_service_account_keys() {
    let _group = hypercloud_testenv::group_blocking("local_cloud_gce");
    let python =
        hypercloud_testenv::venv_python("venv-gce", "google.oauth2.service_account", "gce");
    let script = hypercloud_testenv::repo_root().join("hack/conformance/gce_auth_conformance.py");
    let tmp = tempfile::tempdir().unwrap();
    let dir = state_dir(&tmp);
    let serve = Serve::start(
        BIN,
        &dir,
        &[
            "--availability-zones",
            ZONES,
            "--region",
            REGION,
            "--gce-require-tokens",
        ],
    );
    let key = tmp.path().join("ccm-key.json");
    let out = cli(
        BIN,
        &dir,
        &[
            "gce-service-account-key",
            "create",
            "--email",
            "ccm@demo.iam.gserviceaccount.com",
            "--out",
            key.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let listed = cli_json(
        BIN,
        &dir,
        &[
            "gce-service-account-key",
            "list",
            "--email",
            "ccm@demo.iam.gserviceaccount.com",
            "-o",
            "json",
        ],
    );
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert!(!listed.to_string().contains("privateKey"), "{listed}");
    let stranger =
        hypercloud_testenv::repo_root().join("pkg/providers/gce/tests/fixtures/test-key.pem");
    let out = Command::new(python)
        .arg(&script)
        .env("GCE_ENDPOINT", &serve.api_url)
        .env("GCE_PROJECT", "demo")
        .env("GCE_ZONE", "us-central1-a")
        .env("GCE_KEY_FILE", &key)
        .env("GCE_STRANGER_KEY", &stranger)
        .output()
        .unwrap();
    hypercloud_testenv::conformance_passed(&out, &script, "gce auth conformance: ok");
}
