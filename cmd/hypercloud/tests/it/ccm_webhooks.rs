//! The cloud-controller-manager's provider webhooks (upstream k8s.io/cloud-provider
//! `--webhooks`, `--webhook-*`) against the real kube-apiserver (pkg/testenv) and a real
//! `hypercloud local-cloud serve` for the `local` provider:
//!
//! - on upstream's default `--webhook-secure-port` (10260), bound to 127.0.0.1, with the
//!   self-signed certificate written to `--webhook-cert-dir`: a ValidatingWebhookConfiguration
//!   with that certificate as caBundle makes the apiserver call `service-lb-annotations`,
//!   which refuses a LoadBalancer Service with a bad `loadbalancer.openstack.org/*`
//!   annotation with the provider's message and admits a good one. The configuration selects
//!   only this test's namespace, so the tests running beside it are not affected;
//! - `--webhook-secure-port=0` serves nothing (the same flags with the default port do);
//! - an unknown name in `--webhooks` stops start-up (exit 2) naming it.
#![cfg(feature = "openstack")]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::localcloud::{state_dir, Serve};
use hypercloud_testenv::process::{personality, Proc, Stdout};
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::Api;
use serde_json::json;

use crate::lb_settings::until_webhook_refuses;
use crate::BIN;
const PATH: &str = "/validate/service-lb-annotations";
const BAD: &str = "local: read Service annotations failed: annotation loadbalancer.openstack.org/connection-limit: \"lots\" is not an integer from -1 to 2147483647";

/// A local cloud and a cloud.conf for the `local` provider.
struct Cloud {
    tmp: tempfile::TempDir,
    _serve: Serve,
    conf: std::path::PathBuf,
}

fn cloud() -> Cloud {
    let tmp = tempfile::tempdir().expect("tmp");
    let serve = Serve::start(BIN, &state_dir(&tmp), &[]);
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, serve.cloud_conf()).expect("cloud.conf");
    Cloud {
        tmp,
        _serve: serve,
        conf,
    }
}

/// A cloud-controller-manager running no controllers (only its webhooks matter here).
fn ccm(cloud: &Cloud, kubeconfig: &Path, name: &str, extra: &[String]) -> Proc {
    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", cloud.conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--leader-elect=false", "--secure-port=0", "--controllers="])
        .args(extra);
    Proc::spawn_with(
        name,
        cmd,
        cloud.tmp.path().join(format!("{name}.log")),
        Stdout::Log,
    )
}

fn service(name: &str, connection_limit: &str) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": name,
            "annotations": {"loadbalancer.openstack.org/connection-limit": connection_limit}
        },
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}
    }))
    .expect("service")
}

#[tokio::test]
async fn the_apiserver_calls_the_provider_webhook_on_10260() {
    let _group = hypercloud_testenv::group("ccm_webhooks").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-webhooks")
        .await
        .expect("testenv");
    let cloud = cloud();
    let cert_dir = cloud.tmp.path().join("webhook-certs");
    let mut proc = ccm(
        &cloud,
        env.control_plane().kubeconfig(),
        "ccm",
        &[
            "--webhooks=*".into(),
            "--webhook-bind-address=127.0.0.1".into(),
            format!("--webhook-cert-dir={}", cert_dir.display()),
        ],
    );
    let out = proc.wait_for_output(
        "webhooks: serving on https://127.0.0.1:10260",
        Duration::from_secs(60),
    );
    assert!(
        out.contains(&format!("  service-lb-annotations           {PATH}")),
        "{out}"
    );
    // Upstream's pair name in the cert dir: the certificate the apiserver is told to trust.
    let ca = std::fs::read(cert_dir.join("cloud-controller-manager-webhook.crt")).expect("cert");

    let ns = env.namespace().to_string();
    let configuration = env.unique_name("ccm-webhooks");
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    validating
        .create(
            &PostParams::default(),
            &ValidatingWebhookConfiguration {
                metadata: ObjectMeta {
                    name: Some(configuration.clone()),
                    ..Default::default()
                },
                webhooks: Some(vec![ValidatingWebhook {
                    name: "service-lb-annotations.hypercloud.io".into(),
                    client_config: WebhookClientConfig {
                        url: Some(format!("https://127.0.0.1:10260{PATH}")),
                        ca_bundle: Some(ByteString(ca)),
                        service: None,
                    },
                    rules: Some(vec![RuleWithOperations {
                        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
                        api_groups: Some(vec!["".into()]),
                        api_versions: Some(vec!["v1".into()]),
                        resources: Some(vec!["services".into()]),
                        scope: None,
                    }]),
                    namespace_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            "kubernetes.io/metadata.name".to_string(),
                            ns.clone(),
                        )])),
                        ..Default::default()
                    }),
                    admission_review_versions: vec!["v1".into()],
                    side_effects: "None".into(),
                    failure_policy: Some("Fail".into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("webhook configuration");

    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    let bad = service(&env.unique_name("bad"), "lots");
    // The apiserver picks the configuration up a moment later.
    let refused = until_webhook_refuses(&services, &bad).await;
    assert_eq!(refused.code, 400, "{refused:?}");
    assert!(
        refused.message.contains(&format!(
            "admission webhook \"service-lb-annotations.hypercloud.io\" denied the request: {BAD}"
        )),
        "{refused:?}"
    );
    // Really refused, not only in a dry run.
    let err = services
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains(BAD), "{err}");
    let good = service(&env.unique_name("good"), "100");
    let created = services
        .create(&PostParams::default(), &good)
        .await
        .expect("a good Service is admitted");
    assert_eq!(
        created.metadata.annotations.as_ref().expect("annotations")
            ["loadbalancer.openstack.org/connection-limit"],
        "100"
    );
    // Made bad by an update: refused as well.
    let mut worse = created.clone();
    worse.metadata.annotations.get_or_insert_default().insert(
        "loadbalancer.openstack.org/connection-limit".into(),
        "lots".into(),
    );
    let name = worse.metadata.name.clone().expect("name");
    let err = services
        .replace(&name, &PostParams::default(), &worse)
        .await
        .expect_err("update refused");
    assert!(err.to_string().contains(BAD), "{err}");

    validating
        .delete(&configuration, &DeleteParams::default())
        .await
        .expect("delete configuration");
    services
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete service");
    assert!(proc.running(), "{}", proc.log());
    drop(proc);
    env.cleanup().await.expect("cleanup");
}

/// On 127.0.0.2 so that it never meets the test above on 127.0.0.1:10260.
#[tokio::test]
async fn port_zero_serves_nothing_and_unknown_names_are_refused() {
    let _group = hypercloud_testenv::group("ccm_webhooks").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-webhooks-off")
        .await
        .expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig();
    let cloud = cloud();
    let flags = |port: &str| -> Vec<String> {
        vec![
            "--webhooks=service-lb-annotations".into(),
            "--webhook-bind-address=127.0.0.2".into(),
            port.into(),
        ]
    };
    let answers = || {
        std::net::TcpStream::connect_timeout(
            &"127.0.0.2:10260".parse().expect("addr"),
            Duration::from_secs(5),
        )
        .is_ok()
    };

    // The same flags with the default port do serve: the check below can fail.
    let mut on = ccm(
        &cloud,
        kubeconfig,
        "ccm-on",
        &flags("--webhook-secure-port=10260"),
    );
    on.wait_for_output(
        "webhooks: serving on https://127.0.0.2:10260",
        Duration::from_secs(60),
    );
    assert!(answers(), "{}", on.log());
    drop(on);

    let mut off = ccm(
        &cloud,
        kubeconfig,
        "ccm-off",
        &flags("--webhook-secure-port=0"),
    );
    off.wait_for_output("controllers:", Duration::from_secs(60));
    off.wait_for_output(
        "webhooks: not serving service-lb-annotations (--webhook-secure-port=0)",
        Duration::from_secs(30),
    );
    assert!(!answers(), "{}", off.log());
    assert!(!off.log().contains("webhooks: serving"), "{}", off.log());
    assert!(off.running(), "{}", off.log());
    drop(off);

    let mut unknown = ccm(
        &cloud,
        kubeconfig,
        "ccm-unknown",
        &["--webhooks=*,bogus".into()],
    );
    unknown.assert_exits(2, Duration::from_secs(60));
    let log = unknown.log();
    assert!(
        log.contains(
            "--webhooks: \"bogus\" is not in the list of known webhooks (service-lb-annotations)"
        ),
        "{log}"
    );
    env.cleanup().await.expect("cleanup");
}
