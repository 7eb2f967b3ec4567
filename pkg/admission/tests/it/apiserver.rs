//! The real kube-apiserver (pkg/testenv) calls the webhook over HTTPS: PVs of cloud volumes
//! come back labelled, Nodes without an instance are refused. The webhook configurations
//! select only this test's objects by label, so other tests sharing the apiserver are not
//! affected.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hypercloud_admission::{router, Webhook, PATH_NODE, PATH_PV_LABEL};
use hypercloud_cloudprovider::fake::FakeCloud;
use hypercloud_metrics::tls::{self_signed, TlsSource};
use hypercloud_metrics::{serve, ServeConfig};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Node, PersistentVolume, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, PostParams};

const SELECT: &str = "hypercloud.io/webhook-test";

fn rule(resource: &str) -> RuleWithOperations {
    RuleWithOperations {
        operations: Some(vec!["CREATE".into()]),
        api_groups: Some(vec!["".into()]),
        api_versions: Some(vec!["v1".into()]),
        resources: Some(vec![resource.into()]),
        scope: None,
    }
}

fn client_config(url: String, ca: &str) -> WebhookClientConfig {
    WebhookClientConfig {
        url: Some(url),
        ca_bundle: Some(ByteString(ca.as_bytes().to_vec())),
        service: None,
    }
}

fn meta(name: &str, test: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(BTreeMap::from([(SELECT.to_string(), test.to_string())])),
        ..Default::default()
    }
}

fn node(name: &str, test: &str) -> Node {
    Node {
        metadata: meta(name, test),
        ..Default::default()
    }
}

#[tokio::test]
async fn apiserver_calls_the_webhook() {
    let env = TestEnv::new("admission-webhook").await.expect("testenv");
    let test = env.unique_name("wh");
    let good = env.unique_name("node-in-cloud");
    let intruder = env.unique_name("node-intruder");
    let volume = format!("vol-{test}");
    let cloud = FakeCloud::from_config_bytes(
        format!("region: r1\nzone: nova\ninstances: [{{name: {good}}}]\nvolumes: [{{id: {volume}, zone: az-7}}]\n").as_bytes(),
        "test",
    )
    .expect("config");
    let webhook = Arc::new(Webhook {
        cloud: Arc::new(cloud),
        client: env.client(),
    });

    let pair = self_signed(
        "hypercloud-apiserver-plugin",
        "127.0.0.1".parse().expect("ip"),
    )
    .expect("cert");
    let dir = tempfile::tempdir().expect("tmp");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &pair.cert_pem).expect("cert");
    std::fs::write(&key, &pair.key_pem).expect("key");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = serve(
        ServeConfig {
            addr: "127.0.0.1:0".parse().expect("addr"),
            tls: TlsSource::Files { cert, key },
            options: Default::default(),
            permit_port_sharing: false,
        },
        router(webhook),
        async {
            let _ = stop_rx.await;
        },
    )
    .await
    .expect("serve");
    let base = format!("https://127.0.0.1:{}", server.local_addr.port());
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([(SELECT.to_string(), test.clone())])),
        ..Default::default()
    };

    let mutating: Api<MutatingWebhookConfiguration> = Api::all(env.client());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    mutating
        .create(
            &PostParams::default(),
            &MutatingWebhookConfiguration {
                metadata: ObjectMeta {
                    name: Some(test.clone()),
                    ..Default::default()
                },
                webhooks: Some(vec![MutatingWebhook {
                    name: "persistentvolumelabel.hypercloud.io".into(),
                    client_config: client_config(format!("{base}{PATH_PV_LABEL}"), &pair.cert_pem),
                    rules: Some(vec![rule("persistentvolumes")]),
                    admission_review_versions: vec!["v1".into()],
                    side_effects: "None".into(),
                    failure_policy: Some("Fail".into()),
                    object_selector: Some(selector.clone()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("mutating webhook configuration");
    validating
        .create(
            &PostParams::default(),
            &ValidatingWebhookConfiguration {
                metadata: ObjectMeta {
                    name: Some(test.clone()),
                    ..Default::default()
                },
                webhooks: Some(vec![ValidatingWebhook {
                    name: "cloudnode.hypercloud.io".into(),
                    client_config: client_config(format!("{base}{PATH_NODE}"), &pair.cert_pem),
                    rules: Some(vec![rule("nodes")]),
                    admission_review_versions: vec!["v1".into()],
                    side_effects: "None".into(),
                    failure_policy: Some("Fail".into()),
                    object_selector: Some(selector),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("validating webhook configuration");

    // The apiserver picks webhook configurations up asynchronously: retry until the node
    // webhook answers (it denies the intruder).
    let nodes: Api<Node> = Api::all(env.client());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let denial = loop {
        match nodes
            .create(&PostParams::default(), &node(&intruder, &test))
            .await
        {
            Err(kube::Error::Api(status)) => break status.message,
            Ok(_) => {
                // Registered before the webhook was active: remove and try again.
                nodes
                    .delete(&intruder, &DeleteParams::default())
                    .await
                    .expect("delete early node");
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "webhook never became active"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(denial.contains("cloudnode.hypercloud.io"), "{denial}");
    assert!(
        denial.contains("has no instance in cloud provider"),
        "{denial}"
    );
    nodes
        .create(&PostParams::default(), &node(&good, &test))
        .await
        .expect("cloud instance may register");

    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let pv_name = format!("pv-{test}");
    let created = pvs
        .create(
            &PostParams::default(),
            &PersistentVolume {
                metadata: meta(&pv_name, &test),
                spec: Some(PersistentVolumeSpec {
                    capacity: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity("1Gi".into()),
                    )])),
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    csi: Some(CSIPersistentVolumeSource {
                        driver: "cinder.csi.openstack.org".into(),
                        volume_handle: volume.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .expect("create PV");
    let labels = created.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("az-7")
    );
    assert_eq!(
        labels
            .get("topology.kubernetes.io/region")
            .map(String::as_str),
        Some("r1")
    );
    let terms = created
        .spec
        .and_then(|s| s.node_affinity)
        .and_then(|a| a.required)
        .expect("node affinity")
        .node_selector_terms;
    let keys: Vec<String> = terms[0]
        .match_expressions
        .iter()
        .flatten()
        .map(|e| e.key.clone())
        .collect();
    assert!(
        keys.contains(&"topology.kubernetes.io/zone".to_string()),
        "{keys:?}"
    );

    for name in [&good] {
        nodes
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete node");
    }
    pvs.delete(&pv_name, &DeleteParams::default())
        .await
        .expect("delete pv");
    mutating
        .delete(&test, &DeleteParams::default())
        .await
        .expect("delete mwc");
    validating
        .delete(&test, &DeleteParams::default())
        .await
        .expect("delete vwc");
    let _ = stop_tx.send(());
    env.cleanup().await.expect("cleanup");
}
