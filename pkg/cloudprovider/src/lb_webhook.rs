//! hypercloud's own `service-lb-annotations` webhook, the same for every provider with load
//! balancers ([`SERVICE_LB_ANNOTATIONS`], [`review_service_lb`]; upstream defines none): a
//! validating webhook that refuses a `type: LoadBalancer` Service the provider's
//! [`LoadBalancer::check_service`] refuses (a refused annotation or field of its
//! [`crate::lb_settings`] table, a value its parsers reject), with the message the service
//! controller would otherwise only put into a `SyncLoadBalancerFailed` Event after the
//! Service was stored. An UPDATE is refused only when it makes the settings bad: a Service
//! that already had the same problem (stored before the webhook was installed) can still be
//! updated, so the service controller's finalizer and annotation writes never get stuck
//! behind it.

use k8s_openapi::api::core::v1::Service;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::DynamicObject;

use crate::webhook::WebhookSpec;
use crate::{Chain, Error, LoadBalancer, Result};

/// The load balancer settings webhook: its `--webhooks` name and path.
pub const SERVICE_LB_ANNOTATIONS: WebhookSpec = WebhookSpec {
    name: "service-lb-annotations",
    path: "/validate/service-lb-annotations",
    disabled_by_default: false,
};

/// Why a Service's load balancer settings are unusable (`None`: usable, or not a Service the
/// service controller gives a load balancer: another type, or a `loadBalancerClass`).
fn lb_problem(lb: &dyn LoadBalancer, service: &Service) -> Option<String> {
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() != Some("LoadBalancer") || spec.load_balancer_class.is_some() {
        return None;
    }
    lb.check_service(service)
        .err()
        .map(|e| Chain(&e).to_string())
}

fn decode_service(object: &DynamicObject) -> Result<Service> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| Error::Admission {
            webhook: SERVICE_LB_ANNOTATIONS.name.into(),
            message: format!("decoding the Service under review: {e}"),
        })
}

/// The `service-lb-annotations` decision for one request, from `lb`'s own check. A provider's
/// [`crate::Webhooks::admit`] hands requests for [`SERVICE_LB_ANNOTATIONS`] here.
pub fn review_service_lb(
    lb: &dyn LoadBalancer,
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
    let service = match decode_service(object) {
        Ok(s) => s,
        Err(e) => return Ok(response.deny(Chain(&e).to_string())),
    };
    if service.metadata.deletion_timestamp.is_some() {
        return Ok(response);
    }
    let Some(message) = lb_problem(lb, &service) else {
        return Ok(response);
    };
    if request.operation == Operation::Update {
        if let Some(old) = &request.old_object {
            let old_problem = decode_service(old)
                .ok()
                .and_then(|old| lb_problem(lb, &old));
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

/// [`crate::Webhooks::admit`] of a provider whose only webhook is `service-lb-annotations`.
pub fn admit_service_lb(
    lb: &dyn LoadBalancer,
    webhook: &str,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse> {
    if webhook != SERVICE_LB_ANNOTATIONS.name {
        return Err(Error::Admission {
            webhook: webhook.into(),
            message: "the provider has no webhook of this name".into(),
        });
    }
    review_service_lb(lb, request)
}
