//! Refusals by name (a refused annotation, a value the provider cannot take, an IPv6
//! Service), before any cloud call, in `ensure_load_balancer`, `check_service` and the
//! `service-lb-annotations` webhook: the provider points nowhere and makes no request.

use hypercloud_cloudprovider::{Chain, LoadBalancer as _, Webhooks as _};
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use kube::core::DynamicObject;
use serde_json::json;

use super::*;

#[tokio::test]
async fn refusals_name_the_setting_before_any_cloud_call() {
    // No cloud at all: a refusal never gets as far as signing in.
    let config = hypercloud_providers_azure::Config::parse(
        r#"{"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
            "aadClientId": "c", "aadClientSecret": "x"}"#,
        "azure.json",
    )
    .unwrap();
    let env = hypercloud_providers_azure::config::Environment {
        name: "nowhere".into(),
        resource_manager_endpoint: "https://127.0.0.1:9/".into(),
        active_directory_endpoint: "https://127.0.0.1:9/".into(),
        service_management_endpoint: None,
        token_audience: None,
    };
    let azure = Azure::with_environment(config, env, Default::default());
    for (annotations, names) in [
        (
            json!({"service.beta.kubernetes.io/azure-load-balancer-mode": "__auto__"}),
            "annotation service.beta.kubernetes.io/azure-load-balancer-mode is not supported",
        ),
        (
            json!({"service.beta.kubernetes.io/azure-pip-ip-tags": "RoutingPreference=Internet"}),
            "annotation service.beta.kubernetes.io/azure-pip-ip-tags is not supported",
        ),
        (
            json!({"service.beta.kubernetes.io/azure-pls-create": "true"}),
            "annotation service.beta.kubernetes.io/azure-pls-create is not supported",
        ),
        (
            json!({"service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout": "60"}),
            "annotation service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout",
        ),
        (json!({INTERNAL: "true"}), "vnetName"),
    ] {
        let svc = service(
            "5e1f8c2a-0000-4000-8000-000000000001",
            "web",
            80,
            30080,
            annotations.clone(),
        );
        let e = azure.check_service(&svc).unwrap_err();
        assert!(
            Chain(&e).to_string().contains(names),
            "{annotations}: {}",
            Chain(&e)
        );
        let e = azure
            .ensure_load_balancer(CLUSTER, &svc, &[])
            .await
            .unwrap_err();
        assert!(
            Chain(&e).to_string().contains(names),
            "{annotations}: {}",
            Chain(&e)
        );
    }
    let mut ipv6 = service(
        "5e1f8c2a-0000-4000-8000-000000000002",
        "web",
        80,
        30080,
        json!({}),
    );
    ipv6.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".into()]);
    let e = azure.check_service(&ipv6).unwrap_err();
    assert!(
        e.to_string()
            .contains("spec.ipFamilies: IPv6 is not supported"),
        "{e}"
    );

    // The service-lb-annotations webhook answers with the same check.
    let mode = service(
        "5e1f8c2a-0000-4000-8000-000000000003",
        "web",
        80,
        30080,
        json!({"service.beta.kubernetes.io/azure-load-balancer-mode": "as1"}),
    );
    let mut object = serde_json::to_value(&mode).unwrap();
    object["apiVersion"] = json!("v1");
    object["kind"] = json!("Service");
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "r-1", "kind": {"group": "", "version": "v1", "kind": "Service"},
            "resource": {"group": "", "version": "v1", "resource": "services"},
            "operation": "CREATE", "name": "web", "namespace": "shop", "userInfo": {},
            "object": object}}))
    .unwrap();
    let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    assert_eq!(azure.webhooks()[0].name, "service-lb-annotations");
    let answer = azure
        .admit("service-lb-annotations", &request)
        .await
        .unwrap();
    assert!(!answer.allowed);
    assert!(
        answer
            .result
            .message
            .contains("azure-load-balancer-mode is not supported"),
        "{}",
        answer.result.message
    );
    assert_eq!(azure.api_calls(), 0, "no ARM request was made");
}
