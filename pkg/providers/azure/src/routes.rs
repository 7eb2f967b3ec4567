//! Routes, as upstream's `azure_routes.go`: the route table is `routeTableName` in
//! `routeTableResourceGroup` (made, in `location`, when a route is first created in a table
//! that does not exist), one route per node named exactly as the node, its `addressPrefix` the
//! node's pod CIDR, `nextHopType` `VirtualAppliance` to the node's private address (its primary
//! NIC's primary IP configuration). Upstream batches changes every 30 s into one PUT of the
//! table; hypercloud puts and deletes each route as its child resource at once. As upstream,
//! the table is never associated with a subnet. Route changes go one at a time, so the first
//! makes a missing table and none undoes another's. Without `routeTableName` the provider has no
//! Routes (the route controller then does nothing, as upstream refuses to start it).

use async_trait::async_trait;
use hypercloud_cloudprovider::ProviderError as _;
use hypercloud_cloudprovider::{Route, Routes};
use serde_json::json;

use crate::error::{Error, Result};
use crate::instances::{primary_ip_configuration, primary_nic_id};
use crate::models::{NetworkInterface, RouteTable};
use crate::Azure;

impl Azure {
    /// The route table's ID.
    async fn route_table_id(&self) -> Result<String> {
        let name = self
            .config
            .route_table_name
            .as_deref()
            .ok_or_else(|| Error::Missing {
                what: "routes".into(),
                message: "azure.json names no routeTableName".into(),
            })?;
        let arm = self.arm().await?;
        Ok(arm.resource_id(
            &self.config.route_table_resource_group,
            "Microsoft.Network/routeTables",
            name,
        ))
    }

    /// The route table, `None` when it does not exist.
    async fn route_table(&self) -> Result<Option<RouteTable>> {
        let id = self.route_table_id().await?;
        match self.arm().await?.get::<RouteTable>(&id).await {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The private address of node `name`'s VM (its primary NIC's primary IP configuration).
    async fn node_private_ip(&self, name: &str) -> Result<String> {
        let vm = self
            .vm(&self.config.resource_group, name)
            .await?
            .ok_or_else(|| Error::Missing {
                what: format!("route to node {name}"),
                message: format!(
                    "no virtual machine {name} in resource group {}",
                    self.config.resource_group
                ),
            })?;
        let nic_id = primary_nic_id(&vm).ok_or_else(|| Error::Missing {
            what: format!("route to node {name}"),
            message: "its VM has no primary network interface".into(),
        })?;
        let nic: NetworkInterface = self.arm().await?.get(&nic_id).await?;
        primary_ip_configuration(&nic)
            .and_then(|c| c.properties.private_ip_address.clone())
            .ok_or_else(|| Error::Missing {
                what: format!("route to node {name}"),
                message: format!("network interface {nic_id} has no private address"),
            })
    }
}

#[async_trait]
impl Routes for Azure {
    /// The table's routes, each named as its node; none when the table does not exist.
    async fn list_routes(
        &self,
        _cluster_name: &str,
    ) -> hypercloud_cloudprovider::Result<Vec<Route>> {
        let table = self
            .route_table()
            .await
            .map_err(Error::into_provider_error)?;
        Ok(table
            .map(|t| t.properties.routes)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| {
                let name = r.name?;
                Some(Route {
                    target_node: name.clone(),
                    name,
                    destination_cidr: r.properties.address_prefix.unwrap_or_default(),
                    blackhole: false,
                })
            })
            .collect())
    }

    /// Puts the route `<node>` (making the table first when it does not exist).
    async fn create_route(
        &self,
        _cluster_name: &str,
        _name_hint: &str,
        route: &Route,
    ) -> hypercloud_cloudprovider::Result<()> {
        let _one_at_a_time = self.routes.lock().await;
        let run = async {
            let ip = self.node_private_ip(&route.target_node).await?;
            let arm = self.arm().await?;
            let table_id = self.route_table_id().await?;
            if self.route_table().await?.is_none() {
                let mut body = json!({"location": self.config.location, "properties": {}});
                if !self.config.tags.is_empty() {
                    body["tags"] = json!(self.config.tags);
                }
                let _: RouteTable = arm.put(&table_id, &body).await?;
            }
            let _: serde_json::Value = arm
                .put(
                    &format!("{table_id}/routes/{}", route.target_node),
                    &json!({"properties": {
                        "addressPrefix": route.destination_cidr,
                        "nextHopType": "VirtualAppliance",
                        "nextHopIpAddress": ip,
                    }}),
                )
                .await?;
            Ok::<_, Error>(())
        };
        run.await.map_err(Error::into_provider_error)
    }

    /// Deletes the route named as the node (a missing one is already gone).
    async fn delete_route(
        &self,
        _cluster_name: &str,
        route: &Route,
    ) -> hypercloud_cloudprovider::Result<()> {
        let _one_at_a_time = self.routes.lock().await;
        let run = async {
            let table_id = self.route_table_id().await?;
            let name = if route.name.is_empty() {
                &route.target_node
            } else {
                &route.name
            };
            match self
                .arm()
                .await?
                .delete(&format!("{table_id}/routes/{name}"))
                .await
            {
                Err(e) if !e.is_not_found() => Err(e),
                _ => Ok(()),
            }
        };
        run.await.map_err(Error::into_provider_error)
    }
}
