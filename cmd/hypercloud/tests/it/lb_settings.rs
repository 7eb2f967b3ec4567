//! Nothing silent about load balancers, on every cloud with them: the real cloud-controller-
//! manager against the real apiserver (pkg/testenv) and the cloud's simulator (the local cloud
//! for `local` and its GCE dialect for `gce`, moto for `aws`), one Service per case:
//!
//! - with the `service-lb-annotations` webhook configured, the apiserver refuses a
//!   `type: LoadBalancer` Service asking for an annotation the provider's table refuses, by the
//!   annotation's name;
//! - without the webhook (a Service the configuration's object selector leaves out), the
//!   service controller's `SyncLoadBalancerFailed` Warning Event names the annotation, and the
//!   cloud has no load balancer.
//!
//! The providers' unit tests walk their whole tables; these show the wiring end to end. Each
//! cloud's test is a group of its own: its service controller sees every Service of the shared
//! apiserver.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::process::{free_port, personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Event, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Api;
use serde_json::json;

use crate::BIN;

/// The label that puts a Service under the webhook.
const UNDER_WEBHOOK: &str = "hypercloud.io/lb-settings-webhook";

/// One cloud's case.
struct Case<'a> {
    /// `--cloud-provider`.
    provider: &'a str,
    /// `--cloud-config`.
    conf: &'a Path,
    /// Extra environment of the binary (credentials).
    env: &'a [(&'a str, &'a str)],
    /// The refused annotation and a value.
    annotation: (&'a str, &'a str),
    /// The message naming it, as the webhook and the Event say it.
    message: &'a str,
}

fn service(name: &str, annotation: (&str, &str), under_webhook: bool) -> Service {
    let labels = if under_webhook {
        json!({UNDER_WEBHOOK: "on"})
    } else {
        json!({})
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "labels": labels, "annotations": {annotation.0: annotation.1}},
        "spec": {"type": "LoadBalancer", "selector": {"app": "none"},
            "ports": [{"port": 443, "targetPort": 8443, "protocol": "TCP"}]}
    }))
    .expect("service")
}

/// Runs the case: the webhook refuses, the controller names it in an Event. The caller then
/// checks that its cloud has no load balancer.
async fn refused_by_name(env: &TestEnv, case: &Case<'_>, dir: &Path) {
    let port = free_port();
    let cert_dir = dir.join("webhook-certs");
    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg(format!("--cloud-provider={}", case.provider))
        .arg(format!("--cloud-config={}", case.conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .args([
            "--leader-elect=false",
            "--secure-port=0",
            "--controllers=service",
            "--concurrent-service-syncs=1",
            "--cluster-name=lbsettings",
            "--webhooks=*",
            "--webhook-bind-address=127.0.0.1",
        ])
        .arg(format!("--webhook-secure-port={port}"))
        .arg(format!("--webhook-cert-dir={}", cert_dir.display()));
    for (k, v) in case.env {
        cmd.env(k, v);
    }
    let mut ccm = Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.join("ccm.log"),
        Stdout::Log,
    );
    ccm.wait_for_output(
        &format!("webhooks: serving on https://127.0.0.1:{port}"),
        Duration::from_secs(90),
    );
    let ca = std::fs::read(cert_dir.join("cloud-controller-manager-webhook.crt")).expect("cert");

    let ns = env.namespace().to_string();
    let configuration = env.unique_name("lb-settings");
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
                        url: Some(format!(
                            "https://127.0.0.1:{port}/validate/service-lb-annotations"
                        )),
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
                    object_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            UNDER_WEBHOOK.to_string(),
                            "on".to_string(),
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

    // (1) The webhook refuses by the annotation's name. The apiserver picks the configuration
    // up a moment later: dry runs (no side effects, so the webhook is called) until it refuses.
    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    let refused = service(&env.unique_name("refused"), case.annotation, true);
    let err = until_webhook_refuses(&services, &refused).await;
    assert_eq!(err.code, 400, "{err:?}");
    assert!(
        err.message.contains(&format!(
            "admission webhook \"service-lb-annotations.hypercloud.io\" denied the request: {}",
            case.message
        )),
        "{err:?}"
    );

    // (2) Without the webhook: stored, and the service controller says why it makes nothing.
    let name = env.unique_name("unhooked");
    services
        .create(
            &PostParams::default(),
            &service(&name, case.annotation, false),
        )
        .await
        .expect("a Service the webhook does not see is stored");
    let events: Api<Event> = Api::namespaced(env.client(), &ns);
    let event = eventually(
        "the SyncLoadBalancerFailed Event",
        Duration::from_secs(60),
        || async {
            let list = events
                .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
                .await
                .ok()?;
            list.items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("SyncLoadBalancerFailed"))
        },
    )
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"), "{event:?}");
    let message = event.message.unwrap_or_default();
    assert!(message.contains(case.message), "{message}");
    let stored = services.get(&name).await.expect("the Service");
    assert!(
        stored
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_none_or(|i| i.is_empty()),
        "no ingress is pretended"
    );

    validating
        .delete(&configuration, &DeleteParams::default())
        .await
        .expect("delete configuration");
    // Deleted while the controller runs, so its finalizer goes too.
    services
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete service");
    eventually("the Service to go", Duration::from_secs(60), || async {
        services.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(ccm.running(), "{}", ccm.log());
}

#[cfg(feature = "openstack")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_refuses_by_name() {
    use hypercloud_testenv::localcloud::{state_dir, Serve};
    let _group = hypercloud_testenv::group("lb_settings_openstack").await;
    let env = TestEnv::new("lb-settings-os").await.expect("testenv");
    let tmp = tempfile::tempdir().expect("tmp");
    let serve = Serve::start(BIN, &state_dir(&tmp), &[]);
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, serve.cloud_conf()).expect("cloud.conf");
    let case = Case {
        provider: "local",
        conf: &conf,
        env: &[],
        annotation: (
            "loadbalancer.openstack.org/default-tls-container-ref",
            "https://barbican/v1/containers/1",
        ),
        message: "annotation loadbalancer.openstack.org/default-tls-container-ref is not supported by hypercloud's local provider: TERMINATED_HTTPS listeners (Barbican certificates) are not implemented",
    };
    refused_by_name(&env, &case, tmp.path()).await;
    assert_eq!(
        serve.load_balancers("").len(),
        0,
        "no load balancer in Octavia"
    );
    env.cleanup().await.expect("cleanup");
}

#[cfg(feature = "gce")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_refuses_by_name() {
    use hypercloud_testenv::localcloud::{http, Serve};
    let _group = hypercloud_testenv::group("lb_settings_gce").await;
    let env = TestEnv::new("lb-settings-gce").await.expect("testenv");
    let tmp = tempfile::tempdir().expect("tmp");
    let serve = Serve::start(
        BIN,
        &tmp.path().join("cloud"),
        &[
            "--availability-zones",
            "us-central1-a",
            "--region",
            "us-central1",
        ],
    );
    let conf =
        crate::gce_provider::gce_conf(tmp.path(), &serve.api_url, &serve.metadata_url, false, "");
    let case = Case {
        provider: "gce",
        conf: &conf,
        env: &[],
        annotation: ("cloud.google.com/log-firewall-rules", "true"),
        message: "annotation cloud.google.com/log-firewall-rules is not supported by hypercloud's gce provider: firewall rule logging is not implemented",
    };
    refused_by_name(&env, &case, tmp.path()).await;
    for rest in [
        "regions/us-central1/forwardingRules",
        "regions/us-central1/targetPools",
        "global/firewalls",
    ] {
        let url = format!("{}/compute/v1/projects/demo/{rest}", serve.api_url);
        let (status, _, body) = http("GET", &url, &[], None);
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(status, 200, "{body}");
        assert!(
            v["items"].as_array().is_none_or(|i| i.is_empty()),
            "{rest}: {body}"
        );
    }
    env.cleanup().await.expect("cleanup");
}

#[cfg(feature = "aws")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_refuses_by_name() {
    use hypercloud_testenv::aws::Cloud;
    let _group = hypercloud_testenv::group("lb_settings_aws").await;
    let env = TestEnv::new("lb-settings-aws").await.expect("testenv");
    let cloud = Cloud::start(1, 0);
    let tmp = tempfile::tempdir().expect("tmp");
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, cloud.conf("")).expect("cloud.conf");
    let case = Case {
        provider: "aws",
        conf: &conf,
        // Moto accepts any signature.
        env: &[
            ("AWS_ACCESS_KEY_ID", "AKIDHYPERCLOUDTEST"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_CONFIG_FILE", "/nonexistent"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
        ],
        annotation: (
            "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy",
            "ELBSecurityPolicy-TLS-1-2-2017-01",
        ),
        message: "annotation service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy is not supported by hypercloud's aws provider: TLS listeners use ELB's default negotiation policy; choosing one is not implemented",
    };
    refused_by_name(&env, &case, tmp.path()).await;
    let classic = cloud.moto.cli(&["elb", "describe-load-balancers"]);
    assert_eq!(
        classic["LoadBalancerDescriptions"].as_array().map(Vec::len),
        Some(0),
        "{classic}"
    );
    let v2 = cloud.moto.cli(&["elbv2", "describe-load-balancers"]);
    assert_eq!(
        v2["LoadBalancers"].as_array().map(Vec::len),
        Some(0),
        "{v2}"
    );
    env.cleanup().await.expect("cleanup");
}

/// Creates `service` as a dry run (no side effects, so a webhook is still called) until the
/// apiserver refuses it, and returns the refusal: a webhook configuration takes effect a
/// moment after it is stored.
pub(crate) async fn until_webhook_refuses(
    services: &Api<Service>,
    service: &Service,
) -> Box<kube::core::Status> {
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    eventually(
        "the apiserver calls the webhook",
        Duration::from_secs(60),
        || async {
            match services.create(&dry, service).await {
                Err(kube::Error::Api(e)) => Some(e),
                _ => None,
            }
        },
    )
    .await
}
