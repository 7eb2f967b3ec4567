//! The oVirt dialect judged by oVirt's own Python SDK (hack/conformance/ovirt_sdk_conformance.py,
//! ovirt-engine-sdk-python from hack/python-tools.sh ovirt), and the v3 shape the legacy
//! provider read, over HTTP.

use reqwest::StatusCode;
use serde_json::json;

use crate::support::TestCloud;

#[tokio::test]
async fn ovirt_sdk_signs_in_lists_searches_and_reads_vms() {
    let python = hypercloud_testenv::venv_python("venv-ovirt", "ovirtsdk4", "ovirt");
    let c = TestCloud::start().await;
    let k8s = c
        .create_server(
            "k8s-a",
            json!({"metadata": {"ovirt-fqdn": "k8s-a.cluster.example"}}),
        )
        .await;
    c.create_server("db-1", json!({})).await;
    let script = hypercloud_testenv::repo_root().join("hack/conformance/ovirt_sdk_conformance.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(format!("{}/ovirt-engine/api", c.url))
        .arg("hypercloud")
        .arg("k8s-a.cluster.example")
        .arg(&k8s)
        .output()
        .await
        .unwrap();
    hypercloud_testenv::conformance_passed(&out, &script, "\nok");
}

#[tokio::test]
async fn the_v3_api_answers_the_legacy_provider_s_search_with_basic_auth() {
    let c = TestCloud::start().await;
    let id = c
        .create_server("k8s-a", json!({"metadata": {"ovirt-fqdn": "a.example"}}))
        .await;
    let get = |path: &str, password: &str| {
        c.http
            .get(format!("{}{path}", c.url))
            .basic_auth("admin@internal", Some(password))
            .send()
    };
    let r = get("/api/vms?search=name%3Dk8s-*", "hypercloud")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/xml"));
    let body = r.text().await.unwrap();
    assert!(
        body.contains(&format!("<vm href=\"/api/vms/{id}\" id=\"{id}\">")),
        "{body}"
    );
    assert!(
        body.contains("<status><state>up</state></status>"),
        "{body}"
    );
    assert!(
        body.contains("<fqdn>a.example</fqdn>") && body.contains("<ip address=\""),
        "{body}"
    );
    let none = get("/api/vms?search=name%3Ddb*", "hypercloud")
        .await
        .unwrap();
    assert_eq!(
        none.text().await.unwrap().trim_end().rsplit('\n').next(),
        Some("<vms></vms>")
    );
    let denied = get("/api/vms", "wrong").await.unwrap();
    assert_eq!(denied.status(), StatusCode::UNAUTHORIZED);
    let bad = get("/api/vms?search=cluster%3Dx", "hypercloud")
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("<fault>"));
}
