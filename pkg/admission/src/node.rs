//! Cloud node admission (validating): a Node may be created only when the cloud has its
//! instance, the rule the in-tree OpenStack setup enforced so that nothing outside the cloud
//! can register as a node. Updates are not checked (the kubelet updates its own Node).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use hypercloud_cloudprovider::{Error as CloudError, Interface};
use k8s_openapi::api::core::v1::Node;
use kube::core::admission::AdmissionRequest;
use kube::core::DynamicObject;

use hypercloud_cloudprovider::Chain;

use crate::review::{self, Verdict};
use crate::{Error, Webhook};

const CHECK: &str = "CloudNode";

/// The webhook endpoint.
pub async fn handle(State(webhook): State<Arc<Webhook>>, body: Bytes) -> Response {
    review::answer(&body, CHECK, async |req| check(&webhook, req).await).await
}

/// Decides one request.
pub async fn check(webhook: &Webhook, req: &AdmissionRequest<DynamicObject>) -> Verdict {
    let node: Node = match review::created(CHECK, req, "Node") {
        Ok(n) => n,
        Err(verdict) => return verdict,
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    match instance_exists(webhook.cloud.as_ref(), &node).await {
        Ok(true) => Verdict::Allow,
        Ok(false) => Verdict::Deny(format!(
            "node {name:?} has no instance in cloud provider {:?}: only cloud instances may register as Nodes",
            webhook.cloud.provider_name()
        )),
        Err(source) => Verdict::Deny(format!(
            "{CHECK}: {}",
            Chain(&Error::CheckInstance {
                node: name,
                source: Box::new(source)
            })
        )),
    }
}

/// InstancesV2 when the provider has it; else Instances by provider ID, or by name.
async fn instance_exists(cloud: &dyn Interface, node: &Node) -> Result<bool, CloudError> {
    if let Some(v2) = cloud.instances_v2() {
        return v2.instance_exists(node).await;
    }
    let Some(v1) = cloud.instances() else {
        return Err(CloudError::NotImplemented);
    };
    match node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
    {
        Some(id) => v1.instance_exists_by_provider_id(id).await,
        None => match v1
            .instance_id(node.metadata.name.as_deref().unwrap_or_default())
            .await
        {
            Ok(_) => Ok(true),
            Err(CloudError::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        },
    }
}
