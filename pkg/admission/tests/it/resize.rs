//! The PersistentVolumeClaimResize check in process, reading the claim's StorageClass and PV
//! from the real kube-apiserver (pkg/testenv): a `vsphereVolume` claim may not grow even when
//! its class allows expansion (upstream v1.20's vSphere plugin had none), and the denial says
//! why; a `gcePersistentDisk` claim of the same class may.

use std::sync::Arc;

use axum::body::Body;
use hypercloud_admission::{router, Webhook, PATH_PVC_RESIZE};
use hypercloud_cloudprovider::fake::FakeCloud;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};
use tower::ServiceExt;

/// An UPDATE review of a claim bound to `pv` in `class`, its request grown from 1Gi to 2Gi.
fn review(class: &str, pv: &str) -> String {
    let claim = |size: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"storageClassName": class, "volumeName": pv,
                     "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}},
            "status": {"phase": "Bound"}})
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "2f3c0c1e-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
            "resource": {"group": "", "version": "v1", "resource": "persistentvolumeclaims"},
            "name": "data", "namespace": "default", "operation": "UPDATE",
            "userInfo": {"username": "admin"},
            "object": claim("2Gi"), "oldObject": claim("1Gi"), "dryRun": false}})
    .to_string()
}

async fn decide(w: Arc<Webhook>, body: String) -> Value {
    let resp = router(w)
        .oneshot(
            http::Request::builder()
                .method("POST")
                .uri(PATH_PVC_RESIZE)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(resp.status().as_u16(), 200);
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    let v: Value = serde_json::from_slice(&bytes).expect("AdmissionReview JSON");
    v["response"].clone()
}

#[tokio::test]
async fn vsphere_volume_claims_may_not_grow_and_say_why() {
    let env = TestEnv::new("admission-resize").await.expect("testenv");
    let webhook = Arc::new(Webhook {
        cloud: Arc::new(FakeCloud::from_config_bytes(b"region: r1\n", "test").expect("config")),
        client: env.client(),
    });
    let class = env.unique_name("expandable");
    let classes: Api<StorageClass> = Api::all(env.client());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": class},
                "provisioner": "kubernetes.io/vsphere-volume", "allowVolumeExpansion": true}))
            .expect("class"),
        )
        .await
        .expect("create class");
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let vsphere = env.unique_name("pv-vmdk");
    let gce = env.unique_name("pv-pd");
    for (name, source) in [
        (
            &vsphere,
            json!({"vsphereVolume": {"volumePath": "[LocalDS_0] kubevols/data.vmdk"}}),
        ),
        (&gce, json!({"gcePersistentDisk": {"pdName": "data"}})),
    ] {
        let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": class});
        spec.as_object_mut()
            .expect("object")
            .extend(source.as_object().expect("source").clone());
        pvs.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pv"),
        )
        .await
        .expect("create pv");
    }

    let r = decide(webhook.clone(), review(&class, &vsphere)).await;
    assert_eq!(r["allowed"], false, "{r}");
    let message = r["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "the volume type of PersistentVolume {vsphere} does not support resizing"
        )) && message.contains("kubernetes.io/vsphere-volume plugin had no volume expansion"),
        "{r}"
    );
    let r = decide(webhook, review(&class, &gce)).await;
    assert_eq!(r["allowed"], true, "{r}");

    for name in [&vsphere, &gce] {
        pvs.delete(name, &DeleteParams::default())
            .await
            .expect("delete pv");
    }
    classes
        .delete(&class, &DeleteParams::default())
        .await
        .expect("delete class");
    env.cleanup().await.expect("cleanup");
}
