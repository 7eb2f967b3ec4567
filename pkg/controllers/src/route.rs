//! The route controller (upstream `k8s.io/cloud-provider/controllers/route`): with
//! `--allocate-node-cidrs` and `--configure-cloud-routes` and a provider with Routes, every
//! `--route-reconciliation-period` it creates a cloud route for each node pod CIDR that has
//! none, deletes routes within `--cluster-cidr` that are blackholes or belong to no current
//! node/CIDR pair, and records the outcome in each Node's `NetworkUnavailable` condition
//! (False/`RouteCreated` once all its routes exist, True/`NoRouteCreated` otherwise), writing
//! the condition only when it changes.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use hypercloud_cloudprovider::{Chain, Route};
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::json;

pub use crate::cidr::Cidr;
use crate::informer::Informer;
use crate::{names, Context, Error, Result};

const CONTROLLER: &str = names::NODE_ROUTE.name;
/// Upstream `maxConcurrentRouteCreations`.
const MAX_CONCURRENT_ROUTE_CALLS: usize = 200;

/// Parses `--cluster-cidr` (comma-separated, as upstream for dual stack); at least one.
pub fn cluster_cidrs(s: &str) -> Result<Vec<Cidr>> {
    let cidrs: Vec<Cidr> = s
        .split(',')
        .filter(|c| !c.trim().is_empty())
        .map(Cidr::parse)
        .collect::<Result<_>>()?;
    if cidrs.is_empty() {
        return Err(Error::StartController {
            controller: CONTROLLER,
            reason: "must specify --cluster-cidr".into(),
        });
    }
    Ok(cidrs)
}

/// Upstream `isResponsibleForRoute`: the route's first or last address is in a cluster CIDR.
pub fn is_responsible_for(cluster: &[Cidr], route: &Route) -> bool {
    let Ok(cidr) = Cidr::parse(&route.destination_cidr) else {
        tracing::error!(route = %route.name, cidr = %route.destination_cidr, "ignoring route with unparsable CIDR");
        return false;
    };
    let (first, last) = cidr.first_and_last();
    cluster
        .iter()
        .any(|c| c.contains(first) || c.contains(last))
}

/// The pod CIDRs of a Node (`spec.podCIDRs`, else `spec.podCIDR`).
pub fn pod_cidrs(node: &Node) -> Vec<String> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    match (&spec.pod_cidrs, &spec.pod_cidr) {
        (Some(list), _) if !list.is_empty() => list.clone(),
        (_, Some(one)) if !one.is_empty() => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// What one pass must do.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Routes to create, with the name hint (the Node's UID).
    pub create: Vec<(String, Route)>,
    /// Routes to delete.
    pub delete: Vec<Route>,
}

/// Computes the creations and deletions of one pass (upstream `reconcile`, before any call).
pub fn plan(cluster: &[Cidr], nodes: &[Arc<Node>], routes: &[Route]) -> Plan {
    let existing: HashSet<(&str, &str)> = routes
        .iter()
        .filter(|r| !r.target_node.is_empty())
        .map(|r| (r.target_node.as_str(), r.destination_cidr.as_str()))
        .collect();
    let mut wanted: HashSet<(String, String)> = HashSet::new();
    let mut p = Plan::default();
    for node in nodes {
        let name = node.name_any();
        for cidr in pod_cidrs(node) {
            if !existing.contains(&(name.as_str(), cidr.as_str())) {
                p.create.push((
                    node.metadata.uid.clone().unwrap_or_default(),
                    Route {
                        name: String::new(),
                        target_node: name.clone(),
                        destination_cidr: cidr.clone(),
                        blackhole: false,
                    },
                ));
            }
            wanted.insert((name.clone(), cidr));
        }
    }
    for r in routes {
        if is_responsible_for(cluster, r)
            && (r.blackhole
                || !wanted.contains(&(r.target_node.clone(), r.destination_cidr.clone())))
        {
            p.delete.push(r.clone());
        }
    }
    p
}

/// Runs the controller until it is dropped.
pub(crate) async fn run(ctx: Arc<Context>, nodes: Arc<Informer<Node>>) -> Result<()> {
    let cluster = cluster_cidrs(
        ctx.options
            .kube_cloud_shared
            .cluster_cidr
            .as_deref()
            .unwrap_or(""),
    )?;
    nodes.ready().await;
    let period = ctx
        .options
        .kube_cloud_shared
        .route_reconciliation_period
        .get();
    let mut tick = tokio::time::interval(period.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = reconcile(&ctx, &cluster, &nodes.store.state()).await {
            tracing::error!(error = %Chain(&e), "reconciling node routes");
        }
    }
}

/// One pass over all Nodes (upstream `reconcileNodeRoutes`).
#[tracing::instrument(skip_all)]
pub(crate) async fn reconcile(ctx: &Context, cluster: &[Cidr], nodes: &[Arc<Node>]) -> Result<()> {
    let Some(routes_api) = ctx.cloud.routes() else {
        return Ok(());
    };
    let cluster_name = &ctx.options.kube_cloud_shared.cluster_name;
    let routes = routes_api
        .list_routes(cluster_name)
        .await
        .map_err(|source| Error::Route {
            operation: "list routes".into(),
            source,
        })?;
    ctx.metrics.route_sync.inc();
    let plan = plan(cluster, nodes, &routes);
    let failed: Arc<Mutex<HashSet<(String, String)>>> = Arc::default();
    futures::stream::iter(plan.create)
        .for_each_concurrent(MAX_CONCURRENT_ROUTE_CALLS, |(hint, route)| {
            let failed = failed.clone();
            async move {
                if let Err(e) = routes_api.create_route(cluster_name, &hint, &route).await {
                    let msg = format!(
                        "Could not create route {hint} {} for node {}: {}",
                        route.destination_cidr,
                        route.target_node,
                        Chain(&e)
                    );
                    tracing::warn!("{msg}");
                    let reference = ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Node".into()),
                        name: Some(route.target_node.clone()),
                        ..Default::default()
                    };
                    ctx.event(CONTROLLER, &reference, EventType::Warning, "FailedToCreateRoute", msg)
                        .await;
                    failed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert((route.target_node.clone(), route.destination_cidr.clone()));
                } else {
                    tracing::info!(node = %route.target_node, cidr = %route.destination_cidr, "created route");
                }
            }
        })
        .await;
    futures::stream::iter(plan.delete)
        .for_each_concurrent(MAX_CONCURRENT_ROUTE_CALLS, |route| async move {
            match routes_api.delete_route(cluster_name, &route).await {
                Ok(()) => tracing::info!(route = %route.name, cidr = %route.destination_cidr, "deleted route"),
                Err(e) => tracing::error!(route = %route.name, cidr = %route.destination_cidr, error = %Chain(&e), "could not delete route"),
            }
        })
        .await;
    let failed = failed.lock().unwrap_or_else(|p| p.into_inner()).clone();
    futures::stream::iter(nodes)
        .for_each_concurrent(MAX_CONCURRENT_ROUTE_CALLS, |node| {
            let name = node.name_any();
            let cidrs = pod_cidrs(node);
            let created = !cidrs.is_empty()
                && cidrs
                    .iter()
                    .all(|c| !failed.contains(&(name.clone(), c.clone())));
            async move {
                if let Err(e) = update_network_condition(ctx, node, created).await {
                    tracing::error!(node = %name, error = %Chain(&e), "failed to update networking condition");
                }
            }
        })
        .await;
    Ok(())
}

/// The route controller's NetworkUnavailable: False once the Node's route exists.
async fn update_network_condition(ctx: &Context, node: &Node, created: bool) -> Result<()> {
    let (reason, message) = if created {
        ("RouteCreated", "RouteController created a route")
    } else {
        ("NoRouteCreated", "RouteController failed to create a route")
    };
    set_network_unavailable(&ctx.client, node, !created, reason, message).await
}

/// Sets the Node's NetworkUnavailable condition to `unavailable` with `reason` and `message`
/// (a strategic merge of the one condition), unless it already says the same (upstream
/// `updateNetworkingCondition`, in the route controller and in cloud-provider-azure's node
/// manager alike).
pub(crate) async fn set_network_unavailable(
    client: &kube::Client,
    node: &Node,
    unavailable: bool,
    reason: &str,
    message: &str,
) -> Result<()> {
    let want = if unavailable { "True" } else { "False" };
    let current = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "NetworkUnavailable"));
    if current.is_some_and(|c| c.status == want) {
        return Ok(());
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let patch = json!({"status": {"conditions": [{
        "type": "NetworkUnavailable",
        "status": want,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
        "lastHeartbeatTime": now,
    }]}});
    let name = node.name_any();
    Api::<Node>::all(client.clone())
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map_err(|source| Error::PatchNodeStatus { node: name, source })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, cidrs: &[&str]) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                pod_cidrs: Some(cidrs.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn route(node: &str, cidr: &str, blackhole: bool) -> Route {
        Route {
            name: format!("r-{node}"),
            target_node: node.into(),
            destination_cidr: cidr.into(),
            blackhole,
        }
    }

    #[test]
    fn cidrs_parse_and_contain() {
        let c = Cidr::parse("10.244.0.0/16").expect("cidr");
        assert!(c.contains("10.244.3.4".parse().expect("ip")));
        assert!(!c.contains("10.245.0.1".parse().expect("ip")));
        assert!(!c.contains("fd00::1".parse().expect("ip")));
        let v6 = Cidr::parse("fd00:10::/56").expect("cidr");
        assert!(v6.contains("fd00:10::ff".parse().expect("ip")));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("nope").is_err());
        assert!(cluster_cidrs("").is_err());
        assert_eq!(
            cluster_cidrs("10.0.0.0/8, fd00::/48").expect("two").len(),
            2
        );
        assert!(Cidr::parse("0.0.0.0/0")
            .expect("all")
            .contains("1.2.3.4".parse().expect("ip")));
    }

    #[test]
    fn plan_creates_missing_and_deletes_stale_blackhole_and_unknown_in_cluster_cidr() {
        let cluster = cluster_cidrs("10.244.0.0/16").expect("cidr");
        let nodes = vec![
            node("a", &["10.244.1.0/24"]),
            node("b", &["10.244.2.0/24", "fd00::/64"]),
            node("c", &[]),
        ];
        let routes = vec![
            route("a", "10.244.1.0/24", false),
            route("b", "10.244.9.0/24", false),
            route("gone", "10.244.3.0/24", false),
            route("a", "10.244.1.0/24", true),
            route("x", "192.168.0.0/24", false),
        ];
        let p = plan(&cluster, &nodes, &routes);
        let created: Vec<_> = p
            .create
            .iter()
            .map(|(h, r)| {
                (
                    h.as_str(),
                    r.target_node.as_str(),
                    r.destination_cidr.as_str(),
                )
            })
            .collect();
        assert_eq!(
            created,
            vec![("uid-b", "b", "10.244.2.0/24"), ("uid-b", "b", "fd00::/64")]
        );
        let deleted: Vec<_> = p
            .delete
            .iter()
            .map(|r| {
                (
                    r.target_node.as_str(),
                    r.destination_cidr.as_str(),
                    r.blackhole,
                )
            })
            .collect();
        assert_eq!(
            deleted,
            vec![
                ("b", "10.244.9.0/24", false),
                ("gone", "10.244.3.0/24", false),
                ("a", "10.244.1.0/24", true),
            ]
        );
    }
}

/// What a reconcile sends, checked against a mocked apiserver.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::fixtures::{cloud, context, exchange};

    fn node(name: &str, cidr: &str, network_unavailable: Option<&str>) -> Arc<Node> {
        let mut n = json!({
            "metadata": {"name": name},
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        });
        if let Some(status) = network_unavailable {
            n["status"] = json!({"conditions": [{"type": "NetworkUnavailable", "status": status}]});
        }
        Arc::new(serde_json::from_value(n).expect("node"))
    }

    #[tokio::test]
    async fn a_created_route_clears_network_unavailable_with_one_status_patch() {
        let fake = cloud("instances: [{name: n1}, {name: n2}]\n");
        let (ctx, api) = context(fake.clone(), &[]);
        let cluster = cluster_cidrs("10.244.0.0/16").expect("cidr");
        // n2's condition already says so: no write for it.
        let nodes = vec![
            node("n1", "10.244.1.0/24", None),
            node("n2", "10.244.2.0/24", Some("False")),
        ];
        let answer = serde_json::to_value(nodes[0].as_ref()).expect("json");
        exchange(reconcile(&ctx, &cluster, &nodes), api, |mut api| {
            Box::pin(async move {
                let p = api
                    .expect("PATCH", "/api/v1/nodes/n1/status?", answer)
                    .await;
                assert_eq!(p.content_type, "application/strategic-merge-patch+json");
                let conditions = p.body["status"]["conditions"]
                    .as_array()
                    .expect("conditions");
                assert_eq!(conditions.len(), 1, "{p:?}");
                let c = &conditions[0];
                assert_eq!(c["type"], "NetworkUnavailable");
                assert_eq!(c["status"], "False");
                assert_eq!(c["reason"], "RouteCreated");
                assert_eq!(c["message"], "RouteController created a route");
                assert!(c["lastTransitionTime"].is_string(), "{c}");
                api
            })
        })
        .await
        .expect("reconcile");
        // Both nodes' routes were created in the cloud.
        assert_eq!(fake.call_count("create_route"), 2);
    }
}
