//! The node controller of cloud-provider-azure's `cloud-node-manager` (upstream
//! `pkg/nodemanager`): in the external layout a per-node process that initialises **its own**
//! Node instead of the cloud-controller-manager's cloud-node controller (which then runs with
//! `--controllers=*,-cloud-node`). It asks the cloud about the node by the node's name, as the
//! node itself would (with Azure's `useInstanceMetadata`, the VM's instance metadata service:
//! no Resource Manager call), and:
//!
//! - while the Node has the `node.cloudprovider.kubernetes.io/uninitialized` taint: with
//!   `--wait-routes` marks it `NetworkUnavailable` until the route controller has made its
//!   route, then sets the provider ID (when unset), the GA instance-type, zone and region labels
//!   (the beta ones too with `--enable-deprecated-beta-topology-labels`), removes the taint
//!   and writes the cloud's addresses, in one merge patch guarded by the resourceVersion (a
//!   provided node IP that matches no cloud address keeps the taint);
//! - every `--node-status-update-frequency`: refreshes the addresses of the initialised Node
//!   and, with the beta labels, copies the GA labels onto them.
//!
//! Unlike upstream it sends no address update before the patch succeeds and does not ask the
//! cloud whether the instance still exists before refreshing the addresses (the
//! cloud-controller-manager's cloud-node-lifecycle controller deletes Nodes whose instance is
//! gone).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hypercloud_cloudprovider::node::{facts_by_name, LookupError};
use hypercloud_cloudprovider::wellknown::TAINT_UNINITIALIZED;
use hypercloud_cloudprovider::{Chain, InstanceMetadata, Interface};
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::cloud_node::{
    apply_initialisation, beta_labels_to_reconcile, desired_addresses, has_taint,
    initialisation_patch_with, patch_node_addresses, BetaLabels,
};
use crate::informer::{enqueue_changes, get_by_key, run_node_workers, Informer, Resync};
use crate::queue::{Action, Backoff, Queue};
use crate::{Error, Result};

/// The flags of upstream's cloud-node-manager that shape its node controller.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--node-name`: the one Node this process looks after.
    pub node_name: String,
    /// `--node-status-update-frequency` (upstream default 5m).
    pub node_status_update_frequency: Duration,
    /// `--wait-routes`: mark the Node `NetworkUnavailable` until its route is made.
    pub wait_routes: bool,
    /// `--enable-deprecated-beta-topology-labels`.
    pub beta_labels: bool,
    /// `--min-resync-period`: the Node informer's resync (zero: none).
    pub min_resync_period: Duration,
}

/// What each reconcile shares.
pub struct Manager {
    client: kube::Client,
    cloud: Arc<dyn Interface>,
    options: Options,
}

impl Manager {
    /// A manager of `options.node_name`, asking `cloud`.
    pub fn new(client: kube::Client, cloud: Arc<dyn Interface>, options: Options) -> Self {
        Self {
            client,
            cloud,
            options,
        }
    }

    fn beta(&self) -> BetaLabels {
        if self.options.beta_labels {
            BetaLabels::Set
        } else {
            BetaLabels::Omit
        }
    }
}

/// Runs the controller until `shutdown`; `metrics` gets the work queue's metrics.
pub async fn run(
    manager: Manager,
    metrics: &prometheus::Registry,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let metrics = crate::metrics::Metrics::new(metrics)?;
    let ctx = Arc::new(manager);
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", ctx.options.node_name));
    let (nodes, task) = Informer::<Node>::start(
        Api::all(ctx.client.clone()),
        config,
        |_| {},
        Resync::new(ctx.options.min_resync_period),
    );
    let queue = Queue::new("Nodes", Backoff::DEFAULT_CONTROLLER, metrics);
    let feed = nodes.subscribe();
    let enqueue = enqueue_changes(&nodes, feed, &queue, |_| {});
    let work = run_node_workers(
        queue.clone(),
        nodes.clone(),
        1,
        ctx.clone(),
        reconcile,
        error_policy,
    );
    let period = ctx
        .options
        .node_status_update_frequency
        .max(Duration::from_millis(100));
    let sync = async {
        nodes.ready().await;
        // The first refresh one period after start (the Node is being initialised then).
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let node = get_by_key(&nodes.store, &ctx.options.node_name);
            if let Some(node) = node {
                update_node_status(&ctx, &node).await;
            }
        }
    };
    tokio::select! {
        _ = async { tokio::join!(enqueue, work, sync) } => {}
        () = shutdown => {}
    }
    task.abort();
    Ok(())
}

/// Counts the failure and requeues the Node after its backoff.
pub(crate) fn error_policy(node: Arc<Node>, error: &Error, queue: &Queue) -> Action {
    crate::requeue_node(&node, error, queue, "error initializing node, requeuing")
}

/// Initialises the Node while it has the uninitialized taint; otherwise nothing (the periodic
/// refresh keeps it up to date).
#[tracing::instrument(skip_all, fields(node = %node.name_any()))]
pub async fn reconcile(node: Arc<Node>, ctx: Arc<Manager>) -> Result<Action> {
    if !has_taint(&node, TAINT_UNINITIALIZED) {
        return Ok(Action::AwaitChange);
    }
    let name = node.name_any();
    tracing::info!("initializing node with cloud provider");
    if ctx.options.wait_routes {
        // Upstream `updateNetworkingCondition(node, false)`.
        crate::route::set_network_unavailable(
            &ctx.client,
            &node,
            true,
            "NodeInitialization",
            "Waiting for cloud routes",
        )
        .await?;
    }
    let meta = own_metadata(ctx.cloud.as_ref(), &name).await?;
    let patch = initialisation_patch_with(&node, &meta, ctx.beta())?;
    let patched = apply_initialisation(&ctx.client, &name, &patch).await?;
    if let Some(addresses) = desired_addresses(&patched, &meta.node_addresses) {
        patch_node_addresses(&ctx.client, &name, addresses).await?;
    }
    tracing::info!("successfully initialized node with cloud provider");
    Ok(Action::AwaitChange)
}

/// The cloud's facts about node `name`, asked by name (see
/// [`hypercloud_cloudprovider::node::facts_by_name`]), as the cloud-node controller takes them.
pub async fn own_metadata(cloud: &dyn Interface, name: &str) -> Result<InstanceMetadata> {
    let facts = facts_by_name(cloud, name)
        .await
        .map_err(|source| Error::NodeFacts {
            node: name.into(),
            source,
        })?;
    let zone = facts.zone.unwrap_or_default();
    Ok(InstanceMetadata {
        provider_id: facts.provider_id,
        instance_type: facts.instance_type,
        node_addresses: facts.addresses,
        zone: zone.failure_domain,
        region: zone.region,
        additional_labels: BTreeMap::new(),
    })
}

/// The node's addresses, asked by name: Instances' `NodeAddresses` (upstream
/// `getNodeAddressesByName`), else those of [`own_metadata`].
async fn own_addresses(cloud: &dyn Interface, name: &str) -> Result<Vec<NodeAddress>> {
    let Some(instances) = cloud.instances() else {
        return Ok(own_metadata(cloud, name).await?.node_addresses);
    };
    instances
        .node_addresses(name)
        .await
        .map_err(|source| Error::NodeFacts {
            node: name.into(),
            source: LookupError::Call {
                what: "addresses",
                node: name.into(),
                source,
            },
        })
}

/// Upstream `UpdateNodeStatus`: the addresses of the initialised Node from the cloud, and with
/// the beta labels the GA labels copied onto them; failures are logged.
async fn update_node_status(ctx: &Manager, node: &Node) {
    if has_taint(node, TAINT_UNINITIALIZED) {
        return;
    }
    let name = node.name_any();
    match own_addresses(ctx.cloud.as_ref(), &name).await {
        Ok(a) => {
            if let Some(a) = desired_addresses(node, &a) {
                if let Err(e) = patch_node_addresses(&ctx.client, &name, a).await {
                    tracing::error!(node = %name, error = %Chain(&e), "patching node with cloud addresses");
                }
            }
        }
        Err(e) => tracing::error!(node = %name, error = %Chain(&e), "getting node addresses"),
    }
    if ctx.options.beta_labels {
        let labels = beta_labels_to_reconcile(node);
        if !labels.is_empty() {
            let patch = json!({"metadata": {"labels": labels}});
            if let Err(e) = crate::patch_node(&Api::all(ctx.client.clone()), &name, &patch).await {
                tracing::error!(node = %name, error = %Chain(&e), "reconciling node labels");
            }
        }
    }
}

/// What a reconcile sends, checked against a mocked apiserver.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{client, cloud, exchange};
    use hypercloud_cloudprovider::wellknown::{
        LABEL_FAILURE_DOMAIN_REGION, LABEL_FAILURE_DOMAIN_ZONE, LABEL_INSTANCE_TYPE,
        LABEL_INSTANCE_TYPE_BETA, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE,
    };

    const CLOUD: &str = "region: r1\nzone: az1\ninstances:\n  - name: n1\n    instanceType: m1.small\n    addresses: [{type: InternalIP, address: 10.0.0.1}]\n";

    fn manager(api_client: kube::Client, wait_routes: bool, beta_labels: bool) -> Arc<Manager> {
        Arc::new(Manager::new(
            api_client,
            Arc::new(cloud(CLOUD)),
            Options {
                node_name: "n1".into(),
                node_status_update_frequency: Duration::from_secs(300),
                wait_routes,
                beta_labels,
                min_resync_period: Duration::ZERO,
            },
        ))
    }

    fn node(tainted: bool) -> Node {
        let taints = if tainted {
            json!([{"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "resourceVersion": "42"},
            "spec": {"taints": taints},
            "status": {"addresses": [{"type": "Hostname", "address": "n1"}]},
        }))
        .expect("node")
    }

    #[tokio::test]
    async fn ga_labels_only_and_the_taint_removed_in_one_patch_then_the_addresses() {
        let (c, api) = client();
        let answer = serde_json::to_value(node(false)).expect("json");
        let action = exchange(
            reconcile(Arc::new(node(true)), manager(c, false, false)),
            api,
            |mut api| {
                Box::pin(async move {
                    let patch = api
                        .expect("PATCH", "/api/v1/nodes/n1?", answer.clone())
                        .await;
                    assert_eq!(
                        patch.body,
                        json!({
                            "metadata": {"resourceVersion": "42", "labels": {
                                LABEL_INSTANCE_TYPE: "m1.small",
                                LABEL_TOPOLOGY_ZONE: "az1",
                                LABEL_TOPOLOGY_REGION: "r1",
                            }},
                            "spec": {"providerID": "fake:///n1", "taints": []},
                        })
                    );
                    let status = api
                        .expect("PATCH", "/api/v1/nodes/n1/status?", answer)
                        .await;
                    assert_eq!(
                        status.body,
                        json!({"status": {"addresses": [
                            {"type": "InternalIP", "address": "10.0.0.1"},
                            {"type": "Hostname", "address": "n1"},
                        ]}})
                    );
                    api
                })
            },
        )
        .await
        .expect("reconcile");
        assert_eq!(action, Action::AwaitChange);
    }

    #[tokio::test]
    async fn wait_routes_marks_the_network_unavailable_first_and_beta_labels_are_asked_for() {
        let (c, api) = client();
        let answer = serde_json::to_value(node(false)).expect("json");
        exchange(
            reconcile(Arc::new(node(true)), manager(c, true, true)),
            api,
            |mut api| {
                Box::pin(async move {
                    let cond = api
                        .expect("PATCH", "/api/v1/nodes/n1/status?", answer.clone())
                        .await;
                    assert_eq!(cond.content_type, "application/strategic-merge-patch+json");
                    let c = &cond.body["status"]["conditions"][0];
                    assert_eq!(
                        (&c["type"], &c["status"], &c["reason"]),
                        (
                            &json!("NetworkUnavailable"),
                            &json!("True"),
                            &json!("NodeInitialization")
                        )
                    );
                    let patch = api
                        .expect("PATCH", "/api/v1/nodes/n1?", answer.clone())
                        .await;
                    let labels = &patch.body["metadata"]["labels"];
                    assert_eq!(labels[LABEL_INSTANCE_TYPE_BETA], "m1.small");
                    assert_eq!(labels[LABEL_FAILURE_DOMAIN_ZONE], "az1");
                    assert_eq!(labels[LABEL_FAILURE_DOMAIN_REGION], "r1");
                    api.expect("PATCH", "/api/v1/nodes/n1/status?", answer)
                        .await;
                    api
                })
            },
        )
        .await
        .expect("reconcile");
    }

    #[tokio::test]
    async fn an_initialised_node_is_left_to_the_periodic_refresh() {
        let (c, api) = client();
        let action = exchange(
            reconcile(Arc::new(node(false)), manager(c, true, true)),
            api,
            |api| Box::pin(async move { api }),
        )
        .await
        .expect("reconcile");
        assert_eq!(action, Action::AwaitChange);
    }

    #[tokio::test]
    async fn an_unknown_node_keeps_its_taint_with_an_error_naming_it() {
        let (c, api) = client();
        let mut other = node(true);
        other.metadata.name = Some("ghost".into());
        let err = exchange(
            reconcile(Arc::new(other), manager(c, false, false)),
            api,
            |api| Box::pin(async move { api }),
        )
        .await
        .expect_err("no instance");
        assert!(
            Chain(&err).to_string().contains("node ghost"),
            "{}",
            Chain(&err)
        );
    }

    #[test]
    fn beta_labels_follow_the_ga_ones() {
        let mut n = node(false);
        n.metadata.labels = Some(
            [
                (LABEL_TOPOLOGY_ZONE, "z1"),
                (LABEL_FAILURE_DOMAIN_ZONE, "old"),
                (LABEL_TOPOLOGY_REGION, "r1"),
                (LABEL_FAILURE_DOMAIN_REGION, "r1"),
                (LABEL_INSTANCE_TYPE, "big"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        let want: BTreeMap<String, String> = [
            (LABEL_FAILURE_DOMAIN_ZONE.to_string(), "z1".to_string()),
            (LABEL_INSTANCE_TYPE_BETA.to_string(), "big".to_string()),
        ]
        .into();
        assert_eq!(beta_labels_to_reconcile(&n), want);
    }
}
