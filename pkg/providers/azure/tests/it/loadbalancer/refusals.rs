//! Refusals by name (a refused annotation, a value the provider cannot take, an IPv6
//! Service), before any cloud call: the provider points nowhere and makes no request.

use hypercloud_cloudprovider::{Chain, LoadBalancer as _};
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
    assert_eq!(azure.api_calls(), 0, "no ARM request was made");
}
