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
    std::fs::read_to_string(
        hypercloud_testenv::repo_root()
            .join("pkg/admission/tests/fixtures")
            .join(name),
    )
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

#[tokio::test]
async fn reviews_of_another_version_or_kind_are_400_not_echoed() {
    for path in [PATH_PV_LABEL, PATH_NODE, PATH_PVC_RESIZE] {
        for (field, value, named) in [
            ("apiVersion", "admission.k8s.io/v1beta1", "apiVersion"),
            ("apiVersion", "v1", "apiVersion"),
            ("apiVersion", "", "apiVersion"),
            ("kind", "ConfigMap", "kind"),
            ("kind", "AdmissionReviewList", "kind"),
        ] {
            let mut review: Value =
                serde_json::from_str(&fixture("node-create.json")).expect("json");
            review[field] = Value::from(value);
            let (status, text) = call(webhook(CLOUD), path, review.to_string()).await;
            assert_eq!(status, 400, "{path} {field}={value}: {text}");
            assert!(text.starts_with(named), "{path} {field}={value}: {text}");
        }
    }
}

/// AdmissionReview decoding through the router in process, on generated and mutated
/// reviews: every answer is a 400 naming the problem or a well-formed v1 AdmissionReview
/// for the same uid; nothing panics.
mod props {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Any JSON value, extreme numbers included: what a field is mutated to.
    fn any_json() -> impl Strategy<Value = Value> {
        prop_oneof![
            "[ -~]{0,16}".prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| json!(f)),
            Just(json!(-1e308)),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
            Just(json!([])),
            Just(json!({})),
        ]
    }

    /// JSON pointers to the fields of the fixtures a mutation may hit.
    const FIELDS: &[&str] = &[
        "/apiVersion",
        "/kind",
        "/request",
        "/request/uid",
        "/request/kind",
        "/request/kind/kind",
        "/request/resource",
        "/request/name",
        "/request/namespace",
        "/request/operation",
        "/request/userInfo",
        "/request/userInfo/username",
        "/request/object",
        "/request/object/metadata",
        "/request/object/metadata/name",
        "/request/object/metadata/labels",
        "/request/object/spec",
        "/request/object/spec/capacity",
        "/request/object/spec/csi/volumeHandle",
        "/request/oldObject",
        "/request/dryRun",
    ];

    fn set(doc: &mut Value, pointer: &str, value: Value) {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer");
        let parent = if parent.is_empty() {
            Some(&mut *doc)
        } else {
            doc.pointer_mut(parent)
        };
        if let Some(Value::Object(map)) = parent {
            map.insert(key.to_string(), value);
        }
    }

    /// One runtime and one webhook for all cases (building a client per case is slow).
    fn shared() -> &'static (tokio::runtime::Runtime, Arc<Webhook>) {
        static SHARED: std::sync::OnceLock<(tokio::runtime::Runtime, Arc<Webhook>)> =
            std::sync::OnceLock::new();
        SHARED.get_or_init(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let w = rt.block_on(async { webhook(CLOUD) });
            (rt, w)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        #[test]
        fn mutated_reviews_get_400_or_a_v1_answer(
            fixture_name in prop::sample::select(&["node-create.json", "pv-create.json", "configmap-create.json"][..]),
            path in prop::sample::select(&[PATH_PV_LABEL, PATH_NODE, PATH_PVC_RESIZE][..]),
            mutations in prop::collection::vec((prop::sample::select(FIELDS), any_json()), 1..4),
        ) {
            let mut review: Value = serde_json::from_str(&fixture(fixture_name)).expect("json");
            for (pointer, value) in &mutations {
                set(&mut review, pointer, value.clone());
            }
            let uid = review.pointer("/request/uid").cloned();
            let (rt, w) = shared();
            let (status, body) = rt.block_on(call(w.clone(), path, review.to_string()));
            match status {
                400 => prop_assert!(
                    body.starts_with("apiVersion:") || body.starts_with("kind:")
                        || body.contains("AdmissionReview"),
                    "400 without naming the problem: {body}"
                ),
                200 => {
                    prop_assert_eq!(review["apiVersion"].as_str(), Some("admission.k8s.io/v1"));
                    prop_assert_eq!(review["kind"].as_str(), Some("AdmissionReview"));
                    let answer: Value = serde_json::from_str(&body).expect("AdmissionReview JSON");
                    prop_assert_eq!(&answer["apiVersion"], "admission.k8s.io/v1");
                    prop_assert_eq!(&answer["kind"], "AdmissionReview");
                    prop_assert_eq!(Some(&answer["response"]["uid"]), uid.as_ref());
                }
                other => prop_assert!(false, "status {other}: {body}"),
            }
        }
    }
}
