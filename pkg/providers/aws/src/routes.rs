//! Pod-network routes in the cluster's VPC route table: one route per node podCIDR with the
//! node's instance as target, the instance's source/destination check turned off so it may
//! forward pod traffic. The table is `[Global] RouteTableID`, else the one route table tagged
//! for the cluster. Upstream equivalent: legacy `aws_routes.go`.

use async_trait::async_trait;
use aws_sdk_ec2::types::{AttributeBooleanValue, RouteState};
use hypercloud_cloudprovider::{Result, Route, Routes};

use crate::error::{cloud, sdk};
use crate::Aws;

impl Aws {
    /// The route table: configured, or the single one carrying the cluster tag.
    async fn route_table(&self) -> Result<aws_sdk_ec2::types::RouteTable> {
        let s = self.session().await?;
        let mut req = s.ec2.describe_route_tables();
        match &self.config.global.route_table_id {
            Some(id) => req = req.route_table_ids(id),
            None => {
                let filters = Self::cluster_filters(s.cluster.as_ref());
                if filters.is_empty() {
                    return Err(cloud(
                        "DescribeRouteTables",
                        "no [Global] RouteTableID and no cluster ID to find the cluster's route table by",
                    ));
                }
                req = req.set_filters(Some(filters));
            }
        }
        let reply = req
            .send()
            .await
            .map_err(|e| sdk("DescribeRouteTables", e))?;
        let mut tables = reply.route_tables().to_vec();
        match tables.len() {
            1 => Ok(tables.remove(0)),
            0 => Err(cloud(
                "DescribeRouteTables",
                "found no route table for the cluster",
            )),
            n => Err(cloud(
                "DescribeRouteTables",
                format!("found {n} route tables for the cluster; set [Global] RouteTableID"),
            )),
        }
    }

    fn table_id(t: &aws_sdk_ec2::types::RouteTable) -> Result<String> {
        t.route_table_id()
            .map(str::to_owned)
            .ok_or_else(|| cloud("DescribeRouteTables", "a route table without an ID"))
    }
}

#[async_trait]
impl Routes for Aws {
    /// The table's routes that point at instances (named by their node), and blackholes.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        let table = self.route_table().await?;
        let ids: Vec<String> = table
            .routes()
            .iter()
            .filter_map(|r| r.instance_id().map(str::to_owned))
            .collect();
        let instances = if ids.is_empty() {
            Vec::new()
        } else {
            self.describe_instances(Vec::new(), &ids).await?
        };
        let mut out = Vec::new();
        for r in table.routes() {
            let Some(cidr) = r.destination_cidr_block() else {
                continue;
            };
            let blackhole = r.state() == Some(&RouteState::Blackhole);
            let target = match r.instance_id() {
                Some(id) => instances
                    .iter()
                    .find(|i| i.id == id && !i.terminated())
                    .map(|i| i.private_dns_name.clone()),
                None if blackhole => None,
                // Local, internet gateway and other targets are not the cluster's.
                None => continue,
            };
            out.push(Route {
                name: format!("{cluster_name}-{cidr}"),
                target_node: target.clone().unwrap_or_default(),
                destination_cidr: cidr.to_owned(),
                blackhole: blackhole || target.is_none(),
            });
        }
        Ok(out)
    }

    /// Turns the instance's source/destination check off (once), replaces a blackhole route
    /// to the same CIDR, and adds the route.
    async fn create_route(
        &self,
        _cluster_name: &str,
        _name_hint: &str,
        route: &Route,
    ) -> Result<()> {
        let instance = self.instance_by_node_name(&route.target_node).await?;
        let s = self.session().await?;
        if instance.source_dest_check {
            s.ec2
                .modify_instance_attribute()
                .instance_id(&instance.id)
                .source_dest_check(AttributeBooleanValue::builder().value(false).build())
                .send()
                .await
                .map_err(|e| sdk("ModifyInstanceAttribute", e))?;
        }
        let table = self.route_table().await?;
        let table_id = Self::table_id(&table)?;
        let stale = table.routes().iter().any(|r| {
            r.destination_cidr_block() == Some(route.destination_cidr.as_str())
                && r.state() == Some(&RouteState::Blackhole)
        });
        if stale {
            s.ec2
                .delete_route()
                .route_table_id(&table_id)
                .destination_cidr_block(&route.destination_cidr)
                .send()
                .await
                .map_err(|e| sdk("DeleteRoute", e))?;
        }
        s.ec2
            .create_route()
            .route_table_id(&table_id)
            .destination_cidr_block(&route.destination_cidr)
            .instance_id(&instance.id)
            .send()
            .await
            .map_err(|e| sdk("CreateRoute", e))?;
        Ok(())
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<()> {
        let table = self.route_table().await?;
        let table_id = Self::table_id(&table)?;
        let s = self.session().await?;
        let reply = s
            .ec2
            .delete_route()
            .route_table_id(&table_id)
            .destination_cidr_block(&route.destination_cidr)
            .send()
            .await;
        match reply.map_err(|e| sdk("DeleteRoute", e)) {
            Ok(_) => Ok(()),
            Err(e) if crate::error::code(&e) == Some("InvalidRoute.NotFound") => Ok(()),
            Err(e) => Err(e),
        }
    }
}
