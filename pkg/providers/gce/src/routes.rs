//! Routes, as the legacy provider's `gce_routes.go`: one GCE route per node pod CIDR, named
//! `<cluster name, cut to 26>-<name hint>`, to the node's instance as next hop, on the
//! cluster's network, marked with the description `k8s-node-route` (what the listing filters
//! on, with the name prefix and the network) and the node tags.

use async_trait::async_trait;
use hypercloud_cloudprovider::{Route, Routes};
use serde_json::json;

use crate::client::last_segment;
use crate::error::Error;
use crate::Gce;

/// The description that marks a route as the route controller's.
pub const K8S_NODE_ROUTE: &str = "k8s-node-route";

/// Upstream `truncateClusterName`: route names are `<26 characters>-<hint>`.
fn truncate_cluster_name(cluster: &str) -> &str {
    match cluster.char_indices().nth(26) {
        Some((i, _)) => &cluster[..i],
        None => cluster,
    }
}

#[async_trait]
impl Routes for Gce {
    async fn list_routes(
        &self,
        cluster_name: &str,
    ) -> hypercloud_cloudprovider::Result<Vec<Route>> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let network = c.url(&c.path(&format!("global/networks/{}", r.network)));
        let filter = format!(
            "(name eq {}-.*) (network eq {network}) (description eq {K8S_NODE_ROUTE})",
            truncate_cluster_name(cluster_name)
        );
        let routes = c
            .list(&c.path("global/routes"), &filter, "routes.list")
            .await?;
        let prefix = self
            .config
            .global
            .node_instance_prefix
            .as_deref()
            .unwrap_or("");
        Ok(routes
            .iter()
            .filter_map(|x| {
                let target = last_segment(x["nextHopInstance"].as_str()?);
                // Routes to instances outside the cluster's prefix are not this cluster's.
                target.starts_with(prefix).then(|| Route {
                    name: x["name"].as_str().unwrap_or_default().to_owned(),
                    target_node: target.to_owned(),
                    destination_cidr: x["destRange"].as_str().unwrap_or_default().to_owned(),
                    blackhole: false,
                })
            })
            .collect())
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> hypercloud_cloudprovider::Result<()> {
        let r = self.resolved().await?;
        let c = &r.compute;
        let instance = self
            .instance_by_name(&route.target_node)
            .await?
            .ok_or(hypercloud_cloudprovider::Error::InstanceNotFound)?;
        let zone = last_segment(instance["zone"].as_str().unwrap_or_default());
        let name = format!("{}-{name_hint}", truncate_cluster_name(cluster_name));
        let mut body = json!({
            "name": name,
            "destRange": route.destination_cidr,
            "nextHopInstance": format!("zones/{zone}/instances/{}", instance["name"].as_str().unwrap_or_default()),
            "network": c.url(&c.path(&format!("global/networks/{}", r.network))),
            "priority": 1000,
            "description": K8S_NODE_ROUTE,
        });
        if !self.config.global.node_tags.is_empty() {
            body["tags"] = json!(self.config.global.node_tags);
        }
        match c
            .mutate(
                reqwest::Method::POST,
                &c.path("global/routes"),
                Some(&body),
                "routes.insert",
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(Error::Api { status: 409, .. }) => {
                tracing::info!(route = %name, "route already exists");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_route(
        &self,
        _cluster_name: &str,
        route: &Route,
    ) -> hypercloud_cloudprovider::Result<()> {
        let r = self.resolved().await?;
        let c = &r.compute;
        match c
            .mutate(
                reqwest::Method::DELETE,
                &c.path(&format!("global/routes/{}", route.name)),
                None,
                "routes.delete",
            )
            .await
        {
            Err(e) if e.is_not_found() => Ok(()),
            other => Ok(other?),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_cut_to_26() {
        assert_eq!(truncate_cluster_name("kubernetes"), "kubernetes");
        assert_eq!(
            truncate_cluster_name("abcdefghijklmnopqrstuvwxyz0123"),
            "abcdefghijklmnopqrstuvwxyz"
        );
    }
}
