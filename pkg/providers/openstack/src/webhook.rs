//! hypercloud's own cloud-provider webhook for `openstack` and `local` (upstream in-tree
//! providers and OCCM define none): `service-lb-annotations`, a validating webhook that
//! refuses a `type: LoadBalancer` Service whose `loadbalancer.openstack.org/*` annotations
//! (or internal flag, source ranges) this provider cannot use, with the message the service
//! controller would otherwise only put into a `SyncLoadBalancerFailed` Event after the
//! Service was stored. The parsing is the load balancer's own
//! (`OpenStack::check_service_settings`).
//!
//! An UPDATE is refused only when it makes the settings bad: a Service that already had the
//! same problem (stored before the webhook was installed) can still be updated, so the
//! service controller's finalizer and annotation writes never get stuck behind it.

use async_trait::async_trait;
use hypercloud_cloudprovider::{Chain, Error, Result, WebhookSpec, Webhooks};
use k8s_openapi::api::core::v1::Service;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::DynamicObject;

use crate::OpenStack;

/// The webhook: its `--webhooks` name and path.
pub const SERVICE_LB_ANNOTATIONS: WebhookSpec = WebhookSpec {
    name: "service-lb-annotations",
    path: "/validate/service-lb-annotations",
    disabled_by_default: false,
};

/// Why a Service's load balancer settings are unusable (`None`: usable, or not a Service the
/// service controller gives a load balancer: another type, or a `loadBalancerClass`).
fn problem(cloud: &OpenStack, service: &Service) -> Option<String> {
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() != Some("LoadBalancer") || spec.load_balancer_class.is_some() {
        return None;
    }
    cloud
        .check_service_settings(service)
        .err()
        .map(|e| Chain(&e).to_string())
}

fn decode(object: &DynamicObject) -> Result<Service> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| Error::Admission {
            webhook: SERVICE_LB_ANNOTATIONS.name.into(),
            message: format!("decoding the Service under review: {e}"),
        })
}

/// The decision for one request.
fn review(
    cloud: &OpenStack,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse> {
    let response = AdmissionResponse::from(request);
    let is_service = request.kind.group.is_empty() && request.kind.kind == "Service";
    if !is_service || !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(response);
    }
    let Some(object) = &request.object else {
        return Ok(response);
    };
    // An object that is not a Service under a Service kind is the request's fault: a denial
    // that says so (as the apiserver's own decoding would), not a 500.
    let service = match decode(object) {
        Ok(s) => s,
        Err(e) => return Ok(response.deny(Chain(&e).to_string())),
    };
    if service.metadata.deletion_timestamp.is_some() {
        return Ok(response);
    }
    let Some(message) = problem(cloud, &service) else {
        return Ok(response);
    };
    if request.operation == Operation::Update {
        if let Some(old) = &request.old_object {
            let old_problem = decode(old).ok().and_then(|old| problem(cloud, &old));
            if old_problem.as_deref() == Some(message.as_str()) {
                let mut response = response;
                response.warnings = Some(vec![message]);
                return Ok(response);
            }
        }
    }
    tracing::info!(service = %request.name, namespace = ?request.namespace, %message, "refusing Service");
    Ok(response.deny(message))
}

#[async_trait]
impl Webhooks for OpenStack {
    fn webhooks(&self) -> Vec<WebhookSpec> {
        vec![SERVICE_LB_ANNOTATIONS]
    }

    async fn admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse> {
        if webhook != SERVICE_LB_ANNOTATIONS.name {
            return Err(Error::Admission {
                webhook: webhook.into(),
                message: "the provider has no webhook of this name".into(),
            });
        }
        review(self, request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::Layout;
    use kube::core::admission::AdmissionReview;
    use serde_json::{json, Value};

    fn cloud() -> OpenStack {
        OpenStack::local(None, Layout::External).expect("local provider")
    }

    fn service(annotations: Value, type_: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "annotations": annotations},
            "spec": {"type": type_, "ports": [{"port": 80, "protocol": "TCP"}]}
        })
    }

    fn request(
        operation: &str,
        object: Value,
        old: Option<Value>,
    ) -> AdmissionRequest<DynamicObject> {
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "", "version": "v1", "kind": "Service"},
                "resource": {"group": "", "version": "v1", "resource": "services"},
                "name": "web", "namespace": "shop",
                "operation": operation,
                "userInfo": {"username": "alice"},
                "object": object,
                "oldObject": old,
            }
        }))
        .expect("review");
        review.try_into().expect("request")
    }

    async fn admit(req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        cloud()
            .admit(SERVICE_LB_ANNOTATIONS.name, req)
            .await
            .expect("answer")
    }

    #[tokio::test]
    async fn bad_annotations_are_refused_with_the_providers_message() {
        let bad = service(
            json!({"loadbalancer.openstack.org/connection-limit": "lots"}),
            "LoadBalancer",
        );
        let r = admit(&request("CREATE", bad, None)).await;
        assert!(!r.allowed);
        assert_eq!(
            r.result.message,
            "local: read Service annotations failed: annotation loadbalancer.openstack.org/connection-limit: \"lots\" is not an integer from -1 to 2147483647"
        );
        assert_eq!(r.uid, "u-1");
        let bad = service(
            json!({"loadbalancer.openstack.org/keep-floatingip": "yes"}),
            "LoadBalancer",
        );
        let r = admit(&request("CREATE", bad, None)).await;
        assert!(!r.allowed);
        assert!(
            r.result.message.contains(
                "loadbalancer.openstack.org/keep-floatingip: \"yes\" is not true or false"
            ),
            "{}",
            r.result.message
        );
        let bad = service(
            json!({"loadbalancer.openstack.org/health-monitor-max-retries": "11", "loadbalancer.openstack.org/enable-health-monitor": "true"}),
            "LoadBalancer",
        );
        assert!(!admit(&request("CREATE", bad, None)).await.allowed);
    }

    #[tokio::test]
    async fn an_object_that_is_not_a_service_is_denied_not_an_error() {
        for object in [
            // (A bad `metadata` fails decoding the review itself: the server's 400.)
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": "all"}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"type": ["LoadBalancer"]}}),
        ] {
            let review = cloud()
                .admit(
                    SERVICE_LB_ANNOTATIONS.name,
                    &request("CREATE", object.clone(), None),
                )
                .await
                .expect("a denial, not an error");
            assert!(!review.allowed, "{object}");
            assert!(
                review
                    .result
                    .message
                    .contains("decoding the Service under review"),
                "{}",
                review.result.message
            );
        }
    }

    #[tokio::test]
    async fn good_other_types_and_classes_are_allowed() {
        let good = service(
            json!({"loadbalancer.openstack.org/connection-limit": "100", "loadbalancer.openstack.org/keep-floatingip": "true"}),
            "LoadBalancer",
        );
        assert!(admit(&request("CREATE", good, None)).await.allowed);
        let cluster_ip = service(
            json!({"loadbalancer.openstack.org/connection-limit": "lots"}),
            "ClusterIP",
        );
        assert!(admit(&request("CREATE", cluster_ip, None)).await.allowed);
        let mut classed = service(
            json!({"loadbalancer.openstack.org/connection-limit": "lots"}),
            "LoadBalancer",
        );
        classed["spec"]["loadBalancerClass"] = json!("example.com/other");
        assert!(admit(&request("CREATE", classed, None)).await.allowed);
    }

    #[tokio::test]
    async fn updates_are_refused_only_when_they_bring_the_problem() {
        let bad = service(
            json!({"loadbalancer.openstack.org/connection-limit": "lots"}),
            "LoadBalancer",
        );
        let good = service(json!({}), "LoadBalancer");
        let r = admit(&request("UPDATE", bad.clone(), Some(good))).await;
        assert!(!r.allowed, "a good Service made bad");
        let mut finalized = bad.clone();
        finalized["metadata"]["finalizers"] =
            json!(["service.kubernetes.io/load-balancer-cleanup"]);
        let r = admit(&request("UPDATE", finalized, Some(bad))).await;
        assert!(r.allowed, "an unrelated update of a Service stored bad");
        assert_eq!(r.warnings.map(|w| w.len()), Some(1));
    }

    #[tokio::test]
    async fn other_webhook_names_are_an_error() {
        let good = service(json!({}), "LoadBalancer");
        assert!(cloud()
            .admit("nope", &request("CREATE", good, None))
            .await
            .is_err());
    }
}
