//! The cloud-node-lifecycle controller (upstream
//! `k8s.io/cloud-provider/controllers/nodelifecycle`): every `--node-monitor-period`, for each
//! Node whose Ready condition is not True, asks the cloud whether its instance still exists
//! (deleting the Node when it does not) or is shut down (tainting it
//! `node.cloudprovider.kubernetes.io/shutdown:NoSchedule`); the taint comes off once the Node
//! is Ready again. Nodes labelled `node.kubernetes.io/exclude-from-lifecycle-management` are
//! skipped, as upstream; control-plane Nodes get no other special treatment upstream, so none
//! here.
//!
//! The cache makes a pass cost no API reads; writes are taint patches guarded by the cached
//! resourceVersion and deletions.

use std::sync::Arc;
use std::time::Duration;

use hypercloud_cloudprovider::wellknown::TAINT_SHUTDOWN;
use hypercloud_cloudprovider::{Chain, Error as CloudError, Interface};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::DeleteParams;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use tracing::Instrument;

use crate::cloud_node::has_taint;
use crate::informer::Informer;
use crate::queue::Action;
use crate::{names, Context, Error, Result};

const CONTROLLER: &str = names::CLOUD_NODE_LIFECYCLE.name;
/// Nodes with this label are left alone.
pub const LABEL_EXCLUDE_FROM_LIFECYCLE: &str =
    "node.kubernetes.io/exclude-from-lifecycle-management";

/// What a pass decides for one Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to do.
    Keep,
    /// Ready again: remove the shutdown taint.
    Untaint,
    /// The instance is shut down: add the shutdown taint.
    Taint,
    /// The instance is gone: delete the Node.
    Delete,
}

/// Runs the controller until it is dropped.
pub(crate) async fn run(ctx: Arc<Context>, nodes: Arc<Informer<Node>>) -> Result<()> {
    nodes.ready().await;
    let period = ctx
        .options
        .kube_cloud_shared
        .node_monitor_period
        .get()
        .max(Duration::from_millis(100));
    // As upstream's `wait.UntilWithContext`: a pass at once, then each next one a full period
    // after the previous pass *ended* (a pass slower than the period is not followed at once
    // by another, which at 5000 Nodes doubled the passes and their cloud calls).
    loop {
        for node in nodes.store.state() {
            if let Err(e) = reconcile(node.clone(), ctx.clone()).await {
                error_policy(node, &e, &ctx);
            }
        }
        tokio::time::sleep(period).await;
    }
}

/// Counts and logs the failure; the next period retries (upstream has no per-node queue
/// here).
pub(crate) fn error_policy(node: Arc<Node>, error: &Error, _ctx: &Context) -> Action {
    tracing::error!(node = %node.name_any(), error = %Chain(error), "cloud node lifecycle");
    Action::AwaitChange
}

/// Whether the Node's Ready condition is True (absent counts as Unknown).
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// One Node of one pass (upstream `MonitorNodes`' loop body).
// Not `#[tracing::instrument]`: a pass asks the cloud about every Node that is not Ready (each
// one at every pass while a cluster's kubelets are away), and a span with a formatted field per
// Node per pass is work thrown away when the verdict is to keep it. The span is entered only
// when the verdict acts on the Node.
pub async fn reconcile(node: Arc<Node>, ctx: Arc<Context>) -> Result<Action> {
    let verdict = verdict(ctx.cloud.as_ref(), &node).await?;
    if verdict == Verdict::Keep {
        return Ok(Action::AwaitChange);
    }
    let name = node.name_any();
    let span = tracing::info_span!("reconcile", node = %name);
    act(node, ctx, verdict, name).instrument(span).await
}

async fn act(node: Arc<Node>, ctx: Arc<Context>, verdict: Verdict, name: String) -> Result<Action> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    match verdict {
        Verdict::Keep => {}
        Verdict::Untaint | Verdict::Taint => {
            let mut taints = crate::taints_without(&node, TAINT_SHUTDOWN);
            if verdict == Verdict::Taint {
                taints.push(Taint {
                    key: TAINT_SHUTDOWN.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                });
            }
            let patch = json!({
                "metadata": {"resourceVersion": node.resource_version()},
                "spec": {"taints": taints},
            });
            crate::patch_node(&api, &name, &patch).await?;
            let action = if verdict == Verdict::Taint {
                "taint"
            } else {
                "untaint"
            };
            ctx.metrics
                .lifecycle_actions
                .with_label_values(&[action])
                .inc();
        }
        Verdict::Delete => {
            tracing::info!("deleting node since it is no longer present in cloud provider");
            let reference = node.object_ref(&());
            ctx.event(
                CONTROLLER,
                &reference,
                EventType::Normal,
                "DeletingNode",
                format!("Deleting node {name} because it does not exist in the cloud provider"),
            )
            .await;
            if let Err(source) = api.delete(&name, &DeleteParams::default()).await {
                ctx.event(
                    CONTROLLER,
                    &reference,
                    EventType::Warning,
                    "DeletingNodeFailed",
                    format!("Failed deleting node {name}: {source}"),
                )
                .await;
                return Err(Error::DeleteNode { node: name, source });
            }
            ctx.metrics
                .lifecycle_actions
                .with_label_values(&["delete"])
                .inc();
        }
    }
    Ok(Action::AwaitChange)
}

/// Decides what to do with `node`, asking the cloud only about Nodes that are not Ready.
pub async fn verdict(cloud: &dyn Interface, node: &Node) -> Result<Verdict> {
    if node.labels().contains_key(LABEL_EXCLUDE_FROM_LIFECYCLE) {
        return Ok(Verdict::Keep);
    }
    let tainted = has_taint(node, TAINT_SHUTDOWN);
    if is_ready(node) {
        return Ok(if tainted {
            Verdict::Untaint
        } else {
            Verdict::Keep
        });
    }
    let name = node.name_any();
    let err = |source| Error::CheckInstance {
        node: name.clone(),
        source,
    };
    if !exists(cloud, node).await.map_err(err)? {
        return Ok(Verdict::Delete);
    }
    match shutdown(cloud, node).await {
        Ok(true) if !tainted => Ok(Verdict::Taint),
        Ok(_) => Ok(Verdict::Keep),
        Err(e) => Err(err(e)),
    }
}

/// Provider ID of the Node, or from the cloud when unset (upstream `getProviderID`).
async fn provider_id(cloud: &dyn Interface, node: &Node) -> Result<String, CloudError> {
    if let Some(id) = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|s| !s.is_empty())
    {
        return Ok(id.to_string());
    }
    if let Some(v2) = cloud.instances_v2() {
        return Ok(v2.instance_metadata(node).await?.provider_id);
    }
    let instances = cloud.instances().ok_or(CloudError::NotImplemented)?;
    let id = instances.instance_id(&node.name_any()).await?;
    Ok(format!("{}://{id}", cloud.provider_name()))
}

async fn exists(cloud: &dyn Interface, node: &Node) -> Result<bool, CloudError> {
    if let Some(v2) = cloud.instances_v2() {
        return v2.instance_exists(node).await;
    }
    let instances = cloud.instances().ok_or(CloudError::NotImplemented)?;
    match provider_id(cloud, node).await {
        Ok(id) => instances.instance_exists_by_provider_id(&id).await,
        Err(CloudError::InstanceNotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

async fn shutdown(cloud: &dyn Interface, node: &Node) -> Result<bool, CloudError> {
    if let Some(v2) = cloud.instances_v2() {
        return v2.instance_shutdown(node).await;
    }
    let instances = cloud.instances().ok_or(CloudError::NotImplemented)?;
    let id = match provider_id(cloud, node).await {
        Ok(id) => id,
        Err(CloudError::InstanceNotFound) => return Ok(false),
        Err(e) => return Err(e),
    };
    match instances.instance_shutdown_by_provider_id(&id).await {
        Err(CloudError::NotImplemented) => Ok(false),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig, FakeInstance};
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, ready: Option<&str>, shutdown_taint: bool) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                // Initialised Nodes have one. (Without it, Instances v1 builds
                // "fake://<instance_id>", which the fake does not know: see the report.)
                provider_id: Some(format!("fake:///{name}")),
                taints: shutdown_taint.then(|| {
                    vec![Taint {
                        key: TAINT_SHUTDOWN.into(),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: ready.map(|s| {
                    vec![NodeCondition {
                        type_: "Ready".into(),
                        status: s.into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    fn cloud(disabled: &[&str]) -> FakeCloud {
        FakeCloud::new(FakeConfig {
            instances: vec![
                FakeInstance {
                    name: "up".into(),
                    ..Default::default()
                },
                FakeInstance {
                    name: "down".into(),
                    shutdown: true,
                    ..Default::default()
                },
            ],
            disabled: disabled.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn verdicts_as_upstream_with_v2_and_v1() {
        for disabled in [&[][..], &["instances-v2"][..]] {
            let c = cloud(disabled);
            let v = |n| {
                let c = c.clone();
                async move { verdict(&c, &n).await.expect("verdict") }
            };
            assert_eq!(v(node("up", Some("True"), false)).await, Verdict::Keep);
            assert_eq!(v(node("down", Some("True"), true)).await, Verdict::Untaint);
            assert_eq!(v(node("down", Some("False"), false)).await, Verdict::Taint);
            assert_eq!(v(node("down", None, true)).await, Verdict::Keep);
            assert_eq!(v(node("up", Some("Unknown"), false)).await, Verdict::Keep);
            assert_eq!(v(node("gone", Some("False"), false)).await, Verdict::Delete);
            let mut excluded = node("gone", Some("False"), false);
            excluded.metadata.labels =
                Some([(LABEL_EXCLUDE_FROM_LIFECYCLE.to_string(), String::new())].into());
            assert_eq!(v(excluded).await, Verdict::Keep);
        }
    }

    #[tokio::test]
    async fn ready_nodes_cost_no_cloud_call() {
        let c = cloud(&[]);
        verdict(&c, &node("up", Some("True"), false))
            .await
            .expect("verdict");
        assert!(c.calls().is_empty());
    }

    #[tokio::test]
    async fn cloud_errors_are_errors_not_deletions() {
        let c = cloud(&[]);
        c.set_failure("instance_exists", Some(503));
        assert!(verdict(&c, &node("up", Some("False"), false))
            .await
            .is_err());
    }
}

/// What a reconcile sends, checked against a mocked apiserver.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::fixtures::{cloud, context, exchange};

    const CLOUD: &str = "instances:\n  - {name: up}\n  - {name: down, shutdown: true}\n";

    fn node(name: &str, ready: &str, shutdown_taint: bool) -> Node {
        let taints: Vec<serde_json::Value> = shutdown_taint
            .then(|| json!({"key": TAINT_SHUTDOWN, "effect": "NoSchedule"}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "resourceVersion": "7"},
            "spec": {
                "providerID": format!("fake:///{name}"),
                "taints": taints,
            },
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .expect("node")
    }

    /// Reconciles `n` and checks that its one request is this merge PATCH of the Node.
    async fn expect_one_patch(n: Node, want: serde_json::Value) {
        let (ctx, api) = context(cloud(CLOUD), &[]);
        let path = format!("/api/v1/nodes/{}?", n.name_any());
        let answer = serde_json::to_value(&n).expect("json");
        exchange(reconcile(Arc::new(n), ctx), api, |mut api| {
            Box::pin(async move {
                let p = api.expect("PATCH", &path, answer).await;
                assert_eq!(p.content_type, "application/merge-patch+json");
                assert_eq!(p.body, want);
                api
            })
        })
        .await
        .expect("reconcile");
    }

    #[tokio::test]
    async fn a_shut_down_node_gets_the_taint_in_one_guarded_patch() {
        expect_one_patch(
            node("down", "Unknown", false),
            json!({
                "metadata": {"resourceVersion": "7"},
                "spec": {"taints": [{"key": TAINT_SHUTDOWN, "effect": "NoSchedule"}]},
            }),
        )
        .await;
    }

    #[tokio::test]
    async fn a_ready_node_loses_the_taint() {
        expect_one_patch(
            node("down", "True", true),
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"taints": []}}),
        )
        .await;
    }

    #[tokio::test]
    async fn a_node_without_instance_is_deleted_after_an_event() {
        let (ctx, api) = context(cloud(CLOUD), &[]);
        let n = node("gone", "False", false);
        let answer = serde_json::to_value(&n).expect("json");
        exchange(reconcile(Arc::new(n), ctx), api, |mut api| {
            Box::pin(async move {
                let e = api.expect_event("default", "DeletingNode").await;
                assert_eq!(e.body["regarding"]["name"], "gone");
                let d = api.expect("DELETE", "/api/v1/nodes/gone?", answer).await;
                // A plain delete: no preconditions, default propagation.
                assert_eq!(d.body, json!({}));
                api
            })
        })
        .await
        .expect("reconcile");
    }

    #[tokio::test]
    async fn a_running_unready_node_is_left_alone() {
        let (ctx, api) = context(cloud(CLOUD), &[]);
        exchange(
            reconcile(Arc::new(node("up", "False", false)), ctx),
            api,
            |api| Box::pin(async move { api }),
        )
        .await
        .expect("reconcile");
    }
}
