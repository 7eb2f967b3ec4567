//! The `apiserver-plugin` binary serves the admission webhook over HTTPS with the caBundle it
//! prints, and answers an AdmissionReview (the checks themselves are tested in pkg/admission,
//! including through the real apiserver).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use hypercloud_testenv::process::free_port;
use hypercloud_testenv::TestEnv;

use crate::BIN;

#[tokio::test]
async fn webhook_binary_serves_admission_reviews() {
    let _group = hypercloud_testenv::group("apiserver_plugin").await;
    let env = TestEnv::new("apiserver-plugin-bin").await.expect("testenv");
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("fake.yaml");
    std::fs::write(&cfg, "instances: [{name: node-a}]\n").expect("config");
    let ca = dir.path().join("ca.crt");
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "apiserver-plugin",
            "--cloud-provider=fake",
            &format!("--cloud-config={}", cfg.display()),
            &format!(
                "--kubeconfig={}",
                env.control_plane().kubeconfig().display()
            ),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            &format!("--ca-bundle-file={}", ca.display()),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start apiserver-plugin");
    let stdout = child.stdout.take().expect("stdout");
    let lines = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .take_while(|l| !l.starts_with("  caBundle: "))
            .collect::<Vec<_>>()
    });
    let lines = tokio::time::timeout(Duration::from_secs(30), lines)
        .await
        .expect("started in time")
        .expect("join");
    let text = lines.join("\n");
    assert!(
        text.contains(&format!(
            "serving admission webhooks on https://127.0.0.1:{port}"
        )),
        "{text}"
    );
    assert!(text.contains("/validate/cloudnode"), "{text}");

    let pem = std::fs::read(&ca).expect("ca bundle file");
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("pem"))
        .build()
        .expect("client");
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Node"},
            "resource": {"group": "", "version": "v1", "resource": "nodes"},
            "name": "ghost",
            "operation": "CREATE",
            "userInfo": {"username": "system:node:ghost"},
            "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ghost"}}
        }
    });
    let url = format!("https://127.0.0.1:{port}/validate/cloudnode");
    let resp: serde_json::Value = client
        .post(&url)
        .json(&review)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    assert_eq!(resp["response"]["uid"], "u-1");
    assert_eq!(resp["response"]["allowed"], false, "{resp}");
    let bad = client.post(&url).body("{oops").send().await.expect("post");
    assert_eq!(bad.status().as_u16(), 400);

    child.kill().expect("kill");
    let _ = child.wait();
    env.cleanup().await.expect("cleanup");
}
