//! The webhook configurations we ship (`deploy/apiserver-plugin/webhooks.yaml`), pointed at
//! a local `apiserver-plugin` process: its URL and caBundle instead of the in-cluster
//! Service, a name of the run's own, and an `objectSelector` on the run's label. Webhook
//! configurations are cluster-wide and other tests share the apiserver, so only objects
//! carrying that label are sent to this webhook.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::ByteString;
use serde::de::DeserializeOwned;

/// The shipped configurations, rewritten for a webhook serving at `base_url` (https) with
/// the certificate `ca_pem`, named `name`, for objects labelled `selector`.
pub fn shipped(
    name: &str,
    base_url: &str,
    ca_pem: &[u8],
    selector: (&str, &str),
) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
    // Found at run time, not in the checkout the test was compiled in.
    let path = hypercloud_testenv::repo_root().join("deploy/apiserver-plugin/webhooks.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut mutating: Option<MutatingWebhookConfiguration> = None;
    let mut validating: Option<ValidatingWebhookConfiguration> = None;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
        match value["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => mutating = Some(typed(value)),
            Some("ValidatingWebhookConfiguration") => validating = Some(typed(value)),
            other => panic!("{}: unexpected kind {other:?}", path.display()),
        }
    }
    let (mut mutating, mut validating) = (
        mutating.expect("a MutatingWebhookConfiguration"),
        validating.expect("a ValidatingWebhookConfiguration"),
    );
    let object_selector = LabelSelector {
        match_labels: Some(BTreeMap::from([(
            selector.0.to_owned(),
            selector.1.to_owned(),
        )])),
        ..Default::default()
    };
    let local = |cc: &mut WebhookClientConfig| {
        let service = cc
            .service
            .take()
            .expect("the shipped webhooks name a Service");
        let path = service.path.unwrap_or_default();
        cc.url = Some(format!("{base_url}{path}"));
        cc.ca_bundle = Some(ByteString(ca_pem.to_vec()));
    };
    mutating.metadata.name = Some(name.to_owned());
    for w in mutating.webhooks.iter_mut().flatten() {
        local(&mut w.client_config);
        w.object_selector = Some(object_selector.clone());
    }
    validating.metadata.name = Some(name.to_owned());
    for w in validating.webhooks.iter_mut().flatten() {
        local(&mut w.client_config);
        w.object_selector = Some(object_selector.clone());
    }
    (mutating, validating)
}

fn typed<T: DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}
