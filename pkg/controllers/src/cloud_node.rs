//! The cloud-node controller (upstream `k8s.io/cloud-provider/controllers/node`): initialises
//! Nodes that the kubelet registered with the `node.cloudprovider.kubernetes.io/uninitialized`
//! taint from their cloud instance (provider ID, zone/region and instance-type labels,
//! additional labels, addresses), then removes the taint; keeps the beta labels of initialised
//! Nodes in step with the GA ones; and refreshes every Node's addresses each
//! `--node-status-update-frequency`.
//!
//! Unlike upstream, which updates the whole Node (and retries on conflict) and then patches
//! its status, initialisation is one JSON merge patch of labels, providerID and taints guarded
//! by the cached resourceVersion, plus at most one status patch of the addresses.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use hypercloud_cloudprovider::wellknown::{
    ANNOTATION_PROVIDED_NODE_IP, LABEL_FAILURE_DOMAIN_REGION, LABEL_FAILURE_DOMAIN_ZONE,
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE,
    TAINT_UNINITIALIZED,
};
use hypercloud_cloudprovider::{Chain, Error as CloudError, InstanceMetadata, Interface};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::json;

use crate::informer::{enqueue_changes, run_node_workers, Informer};
use crate::queue::{Action, Backoff, Queue};
use crate::{merge_patch, names, Context, Error, Result};

const CONTROLLER: &str = names::CLOUD_NODE.name;

/// Runs the controller until it is dropped.
pub(crate) async fn run(ctx: Arc<Context>, nodes: Arc<Informer<Node>>) -> Result<()> {
    let queue = Queue::new("Nodes", Backoff::DEFAULT_CONTROLLER, ctx.metrics.clone());
    let feed = nodes.subscribe();
    nodes.ready().await;
    let workers = ctx.options.node_controller.concurrent_node_syncs;

    let enqueue = enqueue_changes(&nodes, feed, &queue, |_| {});
    let work = run_node_workers(
        queue.clone(),
        nodes.clone(),
        workers,
        ctx.clone(),
        reconcile,
        error_policy,
    );
    let period = ctx
        .options
        .node_controller
        .node_status_update_frequency
        .get();
    let sync = async {
        let mut tick = tokio::time::interval(period.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            update_node_status(&ctx, &nodes, workers).await;
        }
    };
    tokio::join!(enqueue, work, sync);
    Ok(())
}

/// Counts the failure and requeues the Node after its backoff.
pub(crate) fn error_policy(node: Arc<Node>, error: &Error, queue: &Queue) -> Action {
    crate::requeue_node(&node, error, queue, "error syncing node, requeuing")
}

/// Initialises one Node, or reconciles the labels of an initialised one.
#[tracing::instrument(skip_all, fields(node = %node.name_any()))]
pub async fn reconcile(node: Arc<Node>, ctx: Arc<Context>) -> Result<Action> {
    let name = node.name_any();
    let api: Api<Node> = Api::all(ctx.client.clone());
    if !has_taint(&node, TAINT_UNINITIALIZED) {
        let labels = labels_to_reconcile(&node);
        if !labels.is_empty() {
            let patch = json!({"metadata": {"labels": labels}});
            crate::patch_node(&api, &name, &patch).await?;
        }
        return Ok(Action::AwaitChange);
    }
    tracing::info!("initializing node with cloud provider");
    let meta = instance_metadata(ctx.cloud.as_ref(), &node).await?;
    let patch = match initialisation_patch(&node, &meta) {
        Ok(p) => p,
        Err(e) => {
            if matches!(e, Error::ProvidedNodeIp { .. }) {
                ctx.event(
                    CONTROLLER,
                    &node.object_ref(&()),
                    EventType::Warning,
                    "ProvidedNodeIPInvalid",
                    e.to_string(),
                )
                .await;
            }
            return Err(e);
        }
    };
    let patched = apply_initialisation(&ctx.client, &name, &patch).await?;
    if let Some(age) = seconds_since_creation(&node) {
        ctx.metrics.taint_removal_delay.observe(age);
    }
    // Addresses right away, so users do not wait for the periodic sync (as upstream).
    if let Some(addresses) = desired_addresses(&patched, &meta.node_addresses) {
        patch_addresses(&ctx, &name, addresses).await?;
    }
    tracing::info!("successfully initialized node with cloud provider");
    ctx.event(
        CONTROLLER,
        &node.object_ref(&()),
        EventType::Normal,
        "Synced",
        "Node synced successfully".into(),
    )
    .await;
    if let Some(age) = seconds_since_creation(&node) {
        ctx.metrics.initial_node_sync_delay.observe(age);
    }
    Ok(Action::AwaitChange)
}

/// Sends an [`initialisation_patch`] and reads back what [`desired_addresses`] needs.
pub(crate) async fn apply_initialisation(
    client: &kube::Client,
    name: &str,
    patch: &serde_json::Value,
) -> Result<Node> {
    let patched = merge_patch::<Node, PatchedNode>(client, None, name, None, patch)
        .await
        .map_err(|source| Error::PatchNode {
            node: name.to_string(),
            source,
        })?;
    Ok(patched.into())
}

/// Seconds since the Node was created (upstream's delay metrics), when it says when.
fn seconds_since_creation(node: &Node) -> Option<f64> {
    let created = node.metadata.creation_timestamp.as_ref()?;
    let age = k8s_openapi::jiff::Timestamp::now().duration_since(created.0);
    Some(age.as_secs_f64().max(0.0))
}

async fn patch_addresses(ctx: &Context, name: &str, addresses: Vec<NodeAddress>) -> Result<()> {
    patch_node_addresses(&ctx.client, name, addresses).await
}

/// Replaces the Node's `status.addresses` (a merge patch: the list is replaced whole).
pub(crate) async fn patch_node_addresses(
    client: &kube::Client,
    name: &str,
    addresses: Vec<NodeAddress>,
) -> Result<()> {
    let patch = json!({"status": {"addresses": addresses}});
    merge_patch::<Node, IgnoredAny>(client, None, name, Some("status"), &patch)
        .await
        .map_err(|source| Error::PatchNodeStatus {
            node: name.into(),
            source,
        })?;
    Ok(())
}

/// What initialisation reads back from the patched Node ([`desired_addresses`]' inputs); the
/// rest of the answer is skipped unparsed.
#[derive(Deserialize)]
struct PatchedNode {
    #[serde(default)]
    metadata: PatchedMeta,
    #[serde(default)]
    spec: Option<PatchedSpec>,
    #[serde(default)]
    status: Option<PatchedStatus>,
}

#[derive(Default, Deserialize)]
struct PatchedMeta {
    name: Option<String>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct PatchedSpec {
    taints: Option<Vec<Taint>>,
}

#[derive(Deserialize)]
struct PatchedStatus {
    addresses: Option<Vec<NodeAddress>>,
}

impl From<PatchedNode> for Node {
    fn from(p: PatchedNode) -> Self {
        Node {
            metadata: ObjectMeta {
                name: p.metadata.name,
                annotations: p.metadata.annotations,
                ..Default::default()
            },
            spec: p.spec.map(|s| NodeSpec {
                taints: s.taints,
                ..Default::default()
            }),
            status: p.status.map(|s| NodeStatus {
                addresses: s.addresses,
                ..Default::default()
            }),
        }
    }
}

/// The periodic address refresh of all initialised Nodes (upstream `UpdateNodeStatus`).
async fn update_node_status(ctx: &Arc<Context>, nodes: &Informer<Node>, workers: u32) {
    let all = nodes.store.state();
    futures::stream::iter(all)
        .for_each_concurrent(workers.max(1) as usize, |node| async move {
            if has_taint(&node, TAINT_UNINITIALIZED) {
                return;
            }
            let name = node.name_any();
            let addresses = match instance_addresses(ctx.cloud.as_ref(), &node).await {
                Ok(a) => a,
                Err(e) => {
                    tracing::error!(node = %name, error = %Chain(&e), "getting instance metadata for node addresses");
                    return;
                }
            };
            if let Some(addresses) = desired_addresses(&node, &addresses) {
                if let Err(e) = patch_addresses(ctx, &name, addresses).await {
                    tracing::error!(node = %name, error = %Chain(&e), "patching node with cloud addresses");
                }
            }
        })
        .await;
}

/// Instance metadata: InstancesV2 when the provider has it, else Instances (+ Zones), with
/// upstream's by-provider-ID-then-by-name fallbacks.
pub(crate) async fn instance_metadata(
    cloud: &dyn Interface,
    node: &Node,
) -> Result<InstanceMetadata> {
    let name = node.name_any();
    let node_pid = provider_id(node).to_string();
    let err = |source| Error::InstanceMetadata {
        node: name.clone(),
        source,
    };
    if let Some(v2) = cloud.instances_v2() {
        let mut meta = v2.instance_metadata(node).await.map_err(err)?;
        // spec.providerID is immutable once set and other controllers (load balancers) need
        // it, so a node is not untainted without one.
        if meta.provider_id.is_empty() {
            if node_pid.is_empty() {
                return Err(Error::MissingProviderId { node: name });
            }
            meta.provider_id = node_pid;
        }
        return Ok(meta);
    }
    let Some(instances) = cloud.instances() else {
        return Err(err(CloudError::NotImplemented));
    };
    let mut pid = node_pid;
    if pid.is_empty() {
        match instances.instance_id(&name).await {
            Ok(id) => pid = format!("{}://{id}", cloud.provider_name()),
            // The only case where the provider ID may stay empty: the node is then found by name.
            Err(CloudError::NotImplemented) => {
                tracing::warn!(node = %name, "cloud provider does not set node provider ID, using node name to discover node");
            }
            Err(e) => return Err(err(e)),
        }
    }
    let node_addresses = match instances.node_addresses_by_provider_id(&pid).await {
        Ok(a) => a,
        Err(_) => instances.node_addresses(&name).await.map_err(err)?,
    };
    let instance_type = match instances.instance_type_by_provider_id(&pid).await {
        Ok(t) => t,
        Err(_) => instances.instance_type(&name).await.map_err(err)?,
    };
    let mut meta = InstanceMetadata {
        provider_id: pid.clone(),
        instance_type,
        node_addresses,
        ..InstanceMetadata::default()
    };
    if let Some(zones) = cloud.zones() {
        let zone = match zones.get_zone_by_provider_id(&pid).await {
            Ok(z) => z,
            Err(_) => zones.get_zone_by_node_name(&name).await.map_err(err)?,
        };
        meta.zone = zone.failure_domain;
        meta.region = zone.region;
    }
    Ok(meta)
}

/// Only the addresses, saving the type and zone calls of Instances v1 (upstream
/// `getInstanceNodeAddresses`).
async fn instance_addresses(cloud: &dyn Interface, node: &Node) -> Result<Vec<NodeAddress>> {
    let name = node.name_any();
    let err = |source| Error::InstanceMetadata {
        node: name.clone(),
        source,
    };
    if let Some(v2) = cloud.instances_v2() {
        return Ok(v2
            .instance_metadata(node)
            .await
            .map_err(err)?
            .node_addresses);
    }
    let Some(instances) = cloud.instances() else {
        return Err(err(CloudError::NotImplemented));
    };
    match instances
        .node_addresses_by_provider_id(provider_id(node))
        .await
    {
        Ok(a) => Ok(a),
        Err(_) => instances.node_addresses(&name).await.map_err(err),
    }
}

fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or("")
}

/// Whether the Node carries a taint with `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

/// Whether a label key is in a Kubernetes-reserved namespace (`*.kubernetes.io/`,
/// `*.k8s.io/`); providers may not set those as additional labels.
fn is_kubernetes_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")))
}

/// The one merge patch that initialises `node` from `meta`: labels, providerID if unset, and
/// the taints without the uninitialized one, guarded by the Node's resourceVersion so that a
/// concurrent change (a new taint) is never overwritten.
pub fn initialisation_patch(node: &Node, meta: &InstanceMetadata) -> Result<serde_json::Value> {
    initialisation_patch_with(node, meta, BetaLabels::Set)
}

/// Whether initialisation sets the deprecated beta labels (`beta.kubernetes.io/instance-type`,
/// `failure-domain.beta.kubernetes.io/zone` and `/region`) beside the GA ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BetaLabels {
    /// Both, as upstream's cloud-node controller does.
    Set,
    /// GA only, as cloud-provider-azure's cloud-node-manager does by default.
    Omit,
}

/// [`initialisation_patch`] with the beta labels as `beta` says.
pub fn initialisation_patch_with(
    node: &Node,
    meta: &InstanceMetadata,
    beta: BetaLabels,
) -> Result<serde_json::Value> {
    let name = node.name_any();
    // A provided node IP that matches no cloud address keeps the node tainted.
    if let Some(ip) = node.annotations().get(ANNOTATION_PROVIDED_NODE_IP) {
        addresses_from_node_ip(ip, &meta.node_addresses).map_err(|message| {
            Error::ProvidedNodeIp {
                node: name.clone(),
                message,
            }
        })?;
    }
    let current = node.labels();
    let mut labels = BTreeMap::new();
    for (keys, value) in [
        (
            [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA],
            &meta.instance_type,
        ),
        ([LABEL_TOPOLOGY_ZONE, LABEL_FAILURE_DOMAIN_ZONE], &meta.zone),
        (
            [LABEL_TOPOLOGY_REGION, LABEL_FAILURE_DOMAIN_REGION],
            &meta.region,
        ),
    ] {
        if !value.is_empty() {
            let keys = if beta == BetaLabels::Set {
                &keys[..]
            } else {
                &keys[..1]
            };
            for k in keys {
                labels.insert(k.to_string(), value.clone());
            }
        }
    }
    for (k, v) in &meta.additional_labels {
        if is_kubernetes_label(k) {
            tracing::warn!(node = %name, label = %k, "discarding node label with kubernetes namespace");
            continue;
        }
        if let Some(old) = current.get(k) {
            if old != v {
                tracing::warn!(node = %name, label = %k, "discarding node label that is already present");
            }
            continue;
        }
        labels.insert(k.clone(), v.clone());
    }
    let taints = crate::taints_without(node, TAINT_UNINITIALIZED);
    let mut spec = json!({ "taints": taints });
    if provider_id(node).is_empty() && !meta.provider_id.is_empty() {
        spec["providerID"] = json!(meta.provider_id);
    }
    let mut metadata = json!({ "labels": labels });
    if let Some(rv) = &node.metadata.resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    Ok(json!({ "metadata": metadata, "spec": spec }))
}

/// The addresses `node` should have given the cloud's, or `None` when nothing is to be
/// written (tainted node, no cloud addresses, provided node IP unmatched, or no change);
/// upstream `updateNodeAddress`.
pub fn desired_addresses(node: &Node, cloud: &[NodeAddress]) -> Option<Vec<NodeAddress>> {
    if has_taint(node, TAINT_UNINITIALIZED) || cloud.is_empty() {
        return None;
    }
    let current = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    let mut addresses = cloud.to_vec();
    // Keep the kubelet's hostname when the cloud reports none.
    if !addresses.iter().any(|a| a.type_ == "Hostname") {
        addresses.extend(current.iter().filter(|a| a.type_ == "Hostname").cloned());
    }
    if let Some(ip) = node.annotations().get(ANNOTATION_PROVIDED_NODE_IP) {
        match addresses_from_node_ip(ip, &addresses) {
            Ok(a) => addresses = a,
            Err(e) => {
                tracing::error!(node = %node.name_any(), error = %e, "failed to update node addresses");
                return None;
            }
        }
    }
    addresses_changed(&current, &addresses).then_some(addresses)
}

/// Upstream `nodeAddressesChangeDetected`: different length, or an address whose type maps to
/// another address.
fn addresses_changed(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    if a.len() != b.len() {
        return true;
    }
    let by_type: HashMap<&str, &str> = a
        .iter()
        .map(|x| (x.type_.as_str(), x.address.as_str()))
        .collect();
    b.iter()
        .any(|x| by_type.get(x.type_.as_str()) != Some(&x.address.as_str()))
}

/// Upstream `GetNodeAddressesFromNodeIP`: for each IP of the annotation (one, or two of
/// different families), the first cloud address equal to it; error if none match; then every
/// cloud address whose type is not one of the matched ones.
pub fn addresses_from_node_ip(
    provided: &str,
    cloud: &[NodeAddress],
) -> Result<Vec<NodeAddress>, String> {
    let ips: Vec<IpAddr> = provided
        .split(',')
        .map(|s| s.trim().parse::<IpAddr>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("failed to parse node IP {provided:?}: {e}"))?;
    if ips.is_empty() || ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv4() == ips[1].is_ipv4()) {
        return Err(format!(
            "failed to parse node IP {provided:?}: must be one IP or a dual-stack pair"
        ));
    }
    if ips.iter().any(|ip| ip.is_unspecified()) {
        return Err(format!(
            "failed to parse node IP {provided:?}: must not be unspecified"
        ));
    }
    let mut out: Vec<NodeAddress> = Vec::new();
    for ip in &ips {
        if let Some(a) = cloud
            .iter()
            .find(|a| a.address.parse::<IpAddr>().ok().as_ref() == Some(ip))
        {
            out.push(a.clone());
        }
    }
    if out.is_empty() {
        return Err(format!(
            "failed to get node address from cloud provider that matches ip: {provided}"
        ));
    }
    let matched: Vec<String> = out.iter().map(|a| a.type_.clone()).collect();
    out.extend(
        cloud
            .iter()
            .filter(|a| !matched.contains(&a.type_))
            .cloned(),
    );
    Ok(out)
}

/// The deprecated beta labels and their GA twins: `(beta, GA)`.
const BETA_AND_GA: [(&str, &str); 3] = [
    (LABEL_FAILURE_DOMAIN_ZONE, LABEL_TOPOLOGY_ZONE),
    (LABEL_FAILURE_DOMAIN_REGION, LABEL_TOPOLOGY_REGION),
    (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE),
];

/// Upstream `reconcileNodeLabels`: the GA zone/region/instance-type labels follow the beta ones
/// on initialised Nodes.
pub fn labels_to_reconcile(node: &Node) -> BTreeMap<String, String> {
    labels_following(node, BETA_AND_GA)
}

/// The other way (cloud-provider-azure's cloud-node-manager with its beta labels on): the beta
/// labels follow the GA ones.
pub fn beta_labels_to_reconcile(node: &Node) -> BTreeMap<String, String> {
    labels_following(node, BETA_AND_GA.map(|(beta, ga)| (ga, beta)))
}

/// For each `(primary, secondary)` pair whose primary label is set: the secondary label with
/// the primary's value, when it differs.
fn labels_following(node: &Node, pairs: [(&str, &str); 3]) -> BTreeMap<String, String> {
    let labels = node.labels();
    pairs
        .into_iter()
        .filter_map(|(primary, secondary)| {
            let v = labels.get(primary)?;
            (labels.get(secondary) != Some(v)).then(|| (secondary.to_string(), v.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig, FakeInstance};

    #[test]
    fn a_patched_node_is_read_back_with_what_initialisation_needs() {
        let answer = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": "n1", "resourceVersion": "7",
                "annotations": {ANNOTATION_PROVIDED_NODE_IP: "10.0.0.1"},
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:status": {"f:addresses": {}}}}],
            },
            "spec": {"providerID": "fake:///n1", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "Hostname", "address": "host-1"}], "nodeInfo": {"kubeletVersion": "v1.34.4"}},
        });
        let node: Node = serde_json::from_value::<PatchedNode>(answer)
            .expect("decodes")
            .into();
        assert_eq!(node.name_any(), "n1");
        assert_eq!(node.annotations()[ANNOTATION_PROVIDED_NODE_IP], "10.0.0.1");
        assert!(has_taint(&node, "k"));
        let status = node.status.as_ref().expect("status");
        assert_eq!(
            status.addresses.as_deref(),
            Some(&[addr("Hostname", "host-1")][..])
        );
        // Nothing else is kept.
        assert!(node.metadata.managed_fields.is_none());
        assert!(status.node_info.is_none());
        let bare: Node = serde_json::from_value::<PatchedNode>(json!({"metadata": {"name": "n2"}}))
            .expect("decodes")
            .into();
        assert!(bare.spec.is_none() && bare.status.is_none());
    }

    fn addr(t: &str, a: &str) -> NodeAddress {
        NodeAddress {
            type_: t.into(),
            address: a.into(),
        }
    }

    fn tainted(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some("42".into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(vec![
                    Taint {
                        key: TAINT_UNINITIALIZED.into(),
                        value: Some("true".into()),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    },
                    Taint {
                        key: "other".into(),
                        effect: "NoExecute".into(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![addr("Hostname", "host-1")]),
                ..Default::default()
            }),
        }
    }

    fn meta() -> InstanceMetadata {
        InstanceMetadata {
            provider_id: "fake:///n1".into(),
            instance_type: "m1.small".into(),
            node_addresses: vec![
                addr("InternalIP", "10.0.0.1"),
                addr("ExternalIP", "192.0.2.9"),
            ],
            zone: "az1".into(),
            region: "r1".into(),
            additional_labels: [
                ("example.com/rack".to_string(), "r7".to_string()),
                ("node.kubernetes.io/bad".to_string(), "x".to_string()),
            ]
            .into(),
        }
    }

    #[test]
    fn patch_sets_labels_provider_id_and_drops_only_the_cloud_taint() {
        let p = initialisation_patch(&tainted("n1"), &meta()).expect("patch");
        assert_eq!(p["metadata"]["resourceVersion"], "42");
        let labels = &p["metadata"]["labels"];
        assert_eq!(labels[LABEL_INSTANCE_TYPE], "m1.small");
        assert_eq!(labels[LABEL_INSTANCE_TYPE_BETA], "m1.small");
        assert_eq!(labels[LABEL_TOPOLOGY_ZONE], "az1");
        assert_eq!(labels[LABEL_FAILURE_DOMAIN_ZONE], "az1");
        assert_eq!(labels[LABEL_TOPOLOGY_REGION], "r1");
        assert_eq!(labels[LABEL_FAILURE_DOMAIN_REGION], "r1");
        assert_eq!(labels["example.com/rack"], "r7");
        assert!(labels.get("node.kubernetes.io/bad").is_none());
        assert_eq!(p["spec"]["providerID"], "fake:///n1");
        let taints = p["spec"]["taints"].as_array().expect("taints");
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0]["key"], "other");
    }

    #[test]
    fn patch_keeps_existing_provider_id_and_labels() {
        let mut n = tainted("n1");
        n.spec.as_mut().expect("spec").provider_id = Some("fake:///kept".into());
        n.metadata.labels = Some([("example.com/rack".to_string(), "r1".to_string())].into());
        let p = initialisation_patch(&n, &meta()).expect("patch");
        assert!(p["spec"].get("providerID").is_none());
        assert!(p["metadata"]["labels"].get("example.com/rack").is_none());
    }

    #[test]
    fn empty_zone_and_type_set_no_labels() {
        let m = InstanceMetadata {
            provider_id: "x".into(),
            ..Default::default()
        };
        let p = initialisation_patch(&tainted("n1"), &m).expect("patch");
        assert_eq!(p["metadata"]["labels"], json!({}));
    }

    #[test]
    fn provided_node_ip_must_match_a_cloud_address() {
        let mut n = tainted("n1");
        n.metadata.annotations = Some(
            [(
                ANNOTATION_PROVIDED_NODE_IP.to_string(),
                "10.9.9.9".to_string(),
            )]
            .into(),
        );
        let e = initialisation_patch(&n, &meta()).expect_err("no match");
        assert!(e.to_string().contains("10.9.9.9"), "{e}");
    }

    #[test]
    fn node_ip_comes_first_and_other_types_follow() {
        let cloud = vec![
            addr("InternalIP", "10.0.0.1"),
            addr("InternalIP", "10.0.0.2"),
            addr("ExternalIP", "192.0.2.9"),
        ];
        let got = addresses_from_node_ip("10.0.0.2", &cloud).expect("match");
        assert_eq!(
            got,
            vec![
                addr("InternalIP", "10.0.0.2"),
                addr("ExternalIP", "192.0.2.9")
            ]
        );
        let got = addresses_from_node_ip("10.0.0.2,fd00::2", &cloud).expect("dual");
        assert_eq!(got.len(), 2);
        assert!(addresses_from_node_ip("bogus", &cloud).is_err());
        assert!(addresses_from_node_ip("10.0.0.1,10.0.0.2", &cloud).is_err());
    }

    #[test]
    fn desired_addresses_keep_hostname_and_skip_unchanged_or_tainted() {
        assert!(desired_addresses(&tainted("n1"), &meta().node_addresses).is_none());
        let mut n = tainted("n1");
        n.spec.as_mut().expect("spec").taints = None;
        let want = desired_addresses(&n, &meta().node_addresses).expect("changed");
        assert_eq!(want.len(), 3);
        assert_eq!(want[2], addr("Hostname", "host-1"));
        n.status.as_mut().expect("status").addresses = Some(want.clone());
        assert!(desired_addresses(&n, &meta().node_addresses).is_none());
        assert!(desired_addresses(&n, &[]).is_none());
    }

    #[test]
    fn ga_labels_follow_beta_labels() {
        let mut n = tainted("n1");
        n.metadata.labels = Some(
            [
                (LABEL_FAILURE_DOMAIN_ZONE.to_string(), "z".to_string()),
                (LABEL_TOPOLOGY_ZONE.to_string(), "old".to_string()),
                (LABEL_INSTANCE_TYPE_BETA.to_string(), "t".to_string()),
                (LABEL_INSTANCE_TYPE.to_string(), "t".to_string()),
            ]
            .into(),
        );
        let got = labels_to_reconcile(&n);
        assert_eq!(
            got,
            [(LABEL_TOPOLOGY_ZONE.to_string(), "z".to_string())].into()
        );
    }

    #[test]
    fn kubernetes_label_namespaces() {
        assert!(is_kubernetes_label("kubernetes.io/x"));
        assert!(is_kubernetes_label("node.k8s.io/x"));
        assert!(!is_kubernetes_label("example.com/x"));
        assert!(!is_kubernetes_label("notkubernetes.io/x"));
        assert!(!is_kubernetes_label("plain"));
    }

    fn fake(disabled: &[&str]) -> FakeCloud {
        FakeCloud::new(FakeConfig {
            region: "r1".into(),
            zone: "az1".into(),
            instances: vec![FakeInstance {
                name: "n1".into(),
                instance_type: "m1.small".into(),
                addresses: vec![addr("InternalIP", "10.0.0.1")],
                ..Default::default()
            }],
            disabled: disabled.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn v2_metadata_is_one_cloud_call() {
        let cloud = fake(&[]);
        let m = instance_metadata(&cloud, &tainted("n1"))
            .await
            .expect("meta");
        assert_eq!(m.provider_id, "fake:///n1");
        assert_eq!(m.zone, "az1");
        assert_eq!(cloud.calls().len(), 1);
        let e = instance_metadata(&cloud, &tainted("gone"))
            .await
            .expect_err("gone");
        assert!(matches!(
            e,
            Error::InstanceMetadata {
                source: CloudError::InstanceNotFound,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn v1_metadata_falls_back_to_names_and_uses_zones() {
        let cloud = fake(&["instances-v2"]);
        let m = instance_metadata(&cloud, &tainted("n1"))
            .await
            .expect("meta");
        // Upstream builds the provider ID as "<provider>://<instance id>"; the fake's
        // instance IDs are "/<id>", as OpenStack's, so v1 and v2 agree and the by-ID calls
        // find the instance.
        assert_eq!(m.provider_id, "fake:///n1");
        assert_eq!(m.instance_type, "m1.small");
        assert_eq!(m.region, "r1");
        assert_eq!(m.node_addresses, vec![addr("InternalIP", "10.0.0.1")]);
        assert_eq!(cloud.call_count("instance_id"), 1);
        assert_eq!(cloud.call_count("node_addresses_by_provider_id"), 1);
        assert_eq!(cloud.call_count("node_addresses"), 0);
        assert_eq!(cloud.call_count("get_zone_by_provider_id"), 1);

        // A provider ID the cloud does not know by ID: every look-up falls back to the name.
        cloud.clear_calls();
        let mut foreign = tainted("n1");
        if let Some(spec) = foreign.spec.as_mut() {
            spec.provider_id = Some("elsewhere:///n1".into());
        }
        let m = instance_metadata(&cloud, &foreign).await.expect("meta");
        assert_eq!(m.provider_id, "elsewhere:///n1");
        assert_eq!(m.node_addresses, vec![addr("InternalIP", "10.0.0.1")]);
        assert_eq!(cloud.call_count("instance_id"), 0);
        assert_eq!(cloud.call_count("node_addresses"), 1);
        assert_eq!(cloud.call_count("instance_type"), 1);
        assert_eq!(cloud.call_count("get_zone_by_node_name"), 1);
    }
}

/// What a reconcile sends, checked against a mocked apiserver.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::fixtures::{cloud, context, exchange};
    use serde_json::json;

    const CLOUD: &str = "region: r1\nzone: az1\ninstances:\n  - name: n1\n    instanceType: m1.small\n    addresses: [{type: InternalIP, address: 10.0.0.1}]\n";

    fn node(tainted: bool) -> Node {
        let mut taints = vec![json!({"key": "other", "effect": "NoExecute"})];
        if tainted {
            taints.insert(
                0,
                json!({"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}),
            );
        }
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "resourceVersion": "42"},
            "spec": {"taints": taints},
            "status": {"addresses": [{"type": "Hostname", "address": "host-1"}]},
        }))
        .expect("node")
    }

    #[tokio::test]
    async fn initialisation_is_one_merge_patch_then_one_status_patch() {
        let (ctx, api) = context(cloud(CLOUD), &[]);
        let untainted = serde_json::to_value(node(false)).expect("json");
        let mut tainted = node(true);
        // Created a minute ago: both delay metrics observe about 60s.
        tainted.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now()
                    - k8s_openapi::jiff::SignedDuration::from_secs(60),
            ));
        let metrics = ctx.metrics.clone();
        let action = exchange(reconcile(Arc::new(tainted), ctx), api, |mut api| {
            Box::pin(async move {
                let patch = api
                    .expect("PATCH", "/api/v1/nodes/n1?", untainted.clone())
                    .await;
                assert_eq!(patch.content_type, "application/merge-patch+json");
                assert_eq!(
                    patch.body,
                    json!({
                        "metadata": {
                            "resourceVersion": "42",
                            "labels": {
                                LABEL_INSTANCE_TYPE: "m1.small",
                                LABEL_INSTANCE_TYPE_BETA: "m1.small",
                                LABEL_TOPOLOGY_ZONE: "az1",
                                LABEL_FAILURE_DOMAIN_ZONE: "az1",
                                LABEL_TOPOLOGY_REGION: "r1",
                                LABEL_FAILURE_DOMAIN_REGION: "r1",
                            },
                        },
                        "spec": {
                            "providerID": "fake:///n1",
                            "taints": [{"key": "other", "effect": "NoExecute"}],
                        },
                    })
                );
                let status = api
                    .expect("PATCH", "/api/v1/nodes/n1/status?", untainted)
                    .await;
                assert_eq!(status.content_type, "application/merge-patch+json");
                assert_eq!(
                    status.body,
                    json!({"status": {"addresses": [
                        {"type": "InternalIP", "address": "10.0.0.1"},
                        {"type": "Hostname", "address": "host-1"},
                    ]}})
                );
                api.expect_event("default", "Synced").await;
                api
            })
        })
        .await
        .expect("reconcile");
        assert_eq!(action, Action::AwaitChange);
        for h in [
            &metrics.taint_removal_delay,
            &metrics.initial_node_sync_delay,
        ] {
            assert_eq!(h.get_sample_count(), 1);
            assert!(
                (60.0..70.0).contains(&h.get_sample_sum()),
                "{}",
                h.get_sample_sum()
            );
        }
    }

    #[tokio::test]
    async fn an_initialised_node_with_its_labels_costs_no_request() {
        let mut n = node(false);
        n.metadata.labels = Some(
            [
                (LABEL_INSTANCE_TYPE.to_string(), "m1.small".to_string()),
                (LABEL_TOPOLOGY_ZONE.to_string(), "az1".to_string()),
            ]
            .into(),
        );
        let (ctx, api) = context(cloud(CLOUD), &[]);
        exchange(reconcile(Arc::new(n), ctx), api, |api| {
            Box::pin(async move { api })
        })
        .await
        .expect("reconcile");
    }
}
