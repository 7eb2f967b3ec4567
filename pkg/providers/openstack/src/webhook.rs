//! The cloud-provider webhook of `openstack` and `local`: the kit's `service-lb-annotations`
//! ([`hypercloud_cloudprovider::lb_webhook::review_service_lb`], the same on every provider with
//! load balancers), deciding with this provider's own check
//! (`LoadBalancer::check_service`: the refused rows of `loadbalancer::SERVICE_SETTINGS`,
//! then the `loadbalancer.openstack.org/*`, internal and source-range parsers).

use async_trait::async_trait;
use hypercloud_cloudprovider::lb_webhook::{admit_service_lb, SERVICE_LB_ANNOTATIONS};
use hypercloud_cloudprovider::{Result, WebhookSpec, Webhooks};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;

use crate::OpenStack;

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
        admit_service_lb(self, webhook, request)
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
