//! The webhook in process (kubewarden style): AdmissionReview fixtures sent to the router
//! with `tower::ServiceExt::oneshot`, against the fake cloud.

use std::sync::Arc;

use axum::body::Body;
use hypercloud_admission::{router, Webhook, PATH_NODE, PATH_PVC_RESIZE, PATH_PV_LABEL};
use hypercloud_cloudprovider::fake::FakeCloud;
use serde_json::Value;
use tower::ServiceExt;

const CLOUD: &str =
    "region: r1\nzone: nova\ninstances: [{name: node-a}]\nvolumes: [{id: vol-1, zone: az-1}]\n";

fn webhook(config: &str) -> Arc<Webhook> {
    let cloud = FakeCloud::from_config_bytes(config.as_bytes(), "test").expect("config");
    // The checks here never reach the API server; the client is never used.
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
    Arc::new(Webhook {
        cloud: Arc::new(cloud),
        client: kube::Client::try_from(config).expect("client"),
    })
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

async fn call(w: Arc<Webhook>, path: &str, body: String) -> (u16, String) {
    let resp = router(w)
        .oneshot(
            http::Request::builder()
                .method("POST")
                .uri(path)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .expect("request"),
        )
        .await
        .expect("infallible");
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn response(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).expect("AdmissionReview JSON");
    assert_eq!(v["kind"], "AdmissionReview");
    v["response"].clone()
}

#[tokio::test]
async fn pv_of_a_cloud_volume_gets_zone_labels_and_affinity_patch() {
    let (status, body) = call(webhook(CLOUD), PATH_PV_LABEL, fixture("pv-create.json")).await;
    assert_eq!(status, 200, "{body}");
    let r = response(&body);
    assert_eq!(r["uid"], "7f0b2a1c-1111-2222-3333-444455556666");
    assert_eq!(r["allowed"], true);
    assert_eq!(r["patchType"], "JSONPatch");
    // kube-rs writes the patch bytes as a JSON array of numbers, which Go decodes into
    // []byte as well as the usual base64 string; accept both.
    let bytes: Vec<u8> = match &r["patch"] {
        Value::Array(a) => a.iter().map(|b| b.as_u64().expect("byte") as u8).collect(),
        other => {
            let raw: k8s_openapi::ByteString =
                serde_json::from_value(other.clone()).expect("base64 patch");
            raw.0
        }
    };
    let patch: Value = serde_json::from_slice(&bytes).expect("patch JSON");
    let ops = patch.as_array().expect("ops");
    let paths: Vec<&str> = ops
        .iter()
        .map(|o| o["path"].as_str().expect("path"))
        .collect();
    assert!(
        paths.contains(&"/metadata/labels/topology.kubernetes.io~1zone"),
        "{paths:?}"
    );
    assert!(paths.contains(&"/spec/nodeAffinity"), "{paths:?}");
    let zone = ops
        .iter()
        .find(|o| o["path"] == "/metadata/labels/topology.kubernetes.io~1zone")
        .expect("zone op");
    assert_eq!(zone["value"], "az-1");
}

#[tokio::test]
async fn pv_of_an_unknown_volume_is_denied_naming_it() {
    let cloud = "region: r1\nvolumes: []\n";
    let (status, body) = call(webhook(cloud), PATH_PV_LABEL, fixture("pv-create.json")).await;
    assert_eq!(status, 200);
    let r = response(&body);
    assert_eq!(r["allowed"], false);
    let msg = r["status"]["message"].as_str().expect("message");
    assert!(
        msg.contains("pv-vol-1") && msg.contains("disk not found"),
        "{msg}"
    );
}

#[tokio::test]
async fn node_admission_allows_cloud_instances_only() {
    let (_, body) = call(
        webhook(CLOUD),
        PATH_NODE,
        fixture("node-create.json").replace("NODE", "node-a"),
    )
    .await;
    assert_eq!(response(&body)["allowed"], true, "{body}");
    let (_, body) = call(
        webhook(CLOUD),
        PATH_NODE,
        fixture("node-create.json").replace("NODE", "intruder"),
    )
    .await;
    let r = response(&body);
    assert_eq!(r["allowed"], false);
    let msg = r["status"]["message"].as_str().expect("message");
    assert!(
        msg.contains("\"intruder\" has no instance in cloud provider \"fake\""),
        "{msg}"
    );
}

#[tokio::test]
async fn malformed_reviews_are_400_with_a_message() {
    for (path, body) in [
        (PATH_PV_LABEL, "{not json".to_string()),
        (
            PATH_NODE,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_string(),
        ),
        (PATH_PVC_RESIZE, r#"{"kind": 5}"#.to_string()),
    ] {
        let (status, text) = call(webhook(CLOUD), path, body).await;
        assert_eq!(status, 400, "{path}: {text}");
        assert!(text.contains("AdmissionReview"), "{path}: {text}");
    }
}

#[tokio::test]
async fn other_kinds_are_allowed_with_a_warning() {
    for path in [PATH_PV_LABEL, PATH_NODE, PATH_PVC_RESIZE] {
        let (status, body) = call(webhook(CLOUD), path, fixture("configmap-create.json")).await;
        assert_eq!(status, 200);
        let r = response(&body);
        assert_eq!(r["allowed"], true);
        let warning = r["warnings"][0].as_str().expect("warning");
        assert!(
            warning.contains("ConfigMap objects are not handled"),
            "{warning}"
        );
    }
}

#[tokio::test]
async fn cloud_errors_deny_rather_than_crash() {
    let w = webhook(CLOUD);
    let fake = FakeCloud::from_config_bytes(CLOUD.as_bytes(), "t").expect("config");
    fake.set_failure("instance_exists", Some(503));
    let w = Arc::new(Webhook {
        cloud: Arc::new(fake),
        client: w.client.clone(),
    });
    let (status, body) = call(
        w,
        PATH_NODE,
        fixture("node-create.json").replace("NODE", "node-a"),
    )
    .await;
    assert_eq!(status, 200);
    let r = response(&body);
    assert_eq!(r["allowed"], false);
    assert!(
        r["status"]["message"]
            .as_str()
            .expect("msg")
            .contains("HTTP 503"),
        "{body}"
    );
}
