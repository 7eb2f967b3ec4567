//! Pod network routes as extra routes of the Neutron router named by `[Route] router-id`: one
//! route per node pod CIDR, next hop = the node's internal address; the node's port gets the
//! CIDR as an allowed address pair so Neutron's port security lets the pod traffic through.
//! Routes whose next hop is no server's address are reported as blackholes (the route
//! controller deletes them). Upstream equivalent: cloud-provider-openstack
//! `pkg/openstack/routes.go`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hypercloud_cloudprovider::{Error, Result, Route, Routes};
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::Service;
use crate::OpenStack;

impl OpenStack {
    fn router_id(&self) -> Result<&str> {
        self.config
            .route
            .router_id
            .as_deref()
            .ok_or(Error::NotImplemented)
    }

    async fn router_routes(&self, router: &str) -> Result<Vec<(String, String)>> {
        let reply = self
            .client
            .request(
                Service::Network,
                Method::GET,
                &format!("/routers/{router}"),
                None,
                "get router",
            )
            .await?;
        Ok(reply.body["router"]["routes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|r| {
                Some((
                    r["destination"].as_str()?.to_owned(),
                    r["nexthop"].as_str()?.to_owned(),
                ))
            })
            .collect())
    }

    async fn node_internal_ip(&self, node: &str) -> Result<(String, String)> {
        let s = self.server_by_name(node).await?;
        let ip = s
            .addresses
            .iter()
            .find(|a| a.type_ == "InternalIP")
            .map(|a| a.address.clone())
            .ok_or_else(|| {
                Error::cloud(
                    &self.name,
                    "find node address",
                    format!("node {node} has no InternalIP to route to"),
                )
            })?;
        Ok((s.id, ip))
    }

    /// Adds or removes `cidr` in the allowed address pairs of the server's port holding `ip`.
    async fn update_address_pairs(
        &self,
        server_id: &str,
        ip: &str,
        cidr: &str,
        add: bool,
    ) -> Result<()> {
        let ports = self
            .client
            .list(
                Service::Network,
                &format!("/ports?device_id={server_id}"),
                "ports",
                "list ports",
            )
            .await?;
        let Some(port) = ports.iter().find(|p| {
            p["fixed_ips"]
                .as_array()
                .is_some_and(|ips| ips.iter().any(|f| f["ip_address"] == ip))
        }) else {
            tracing::warn!(
                server_id,
                ip,
                "no port holds the route's next hop; allowed address pairs unchanged"
            );
            return Ok(());
        };
        let mut pairs: Vec<Value> = port["allowed_address_pairs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let present = pairs.iter().any(|p| p["ip_address"] == cidr);
        if add == present {
            return Ok(());
        }
        if add {
            pairs.push(json!({"ip_address": cidr}));
        } else {
            pairs.retain(|p| p["ip_address"] != cidr);
        }
        let id = port["id"].as_str().unwrap_or_default();
        self.client
            .request(
                Service::Network,
                Method::PUT,
                &format!("/ports/{id}"),
                Some(&json!({"port": {"allowed_address_pairs": pairs}})),
                "update port allowed address pairs",
            )
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Routes for OpenStack {
    async fn list_routes(&self, _cluster_name: &str) -> Result<Vec<Route>> {
        let router = self.router_id()?;
        let routes = self.router_routes(router).await?;
        let servers = self.servers().await?;
        let mut by_addr: BTreeMap<&str, &str> = BTreeMap::new();
        for s in servers.iter() {
            for a in &s.addresses {
                by_addr.entry(a.address.as_str()).or_insert(s.name.as_str());
            }
        }
        Ok(routes
            .into_iter()
            .map(|(destination, nexthop)| {
                let node = by_addr.get(nexthop.as_str()).map(|n| (*n).to_owned());
                Route {
                    name: destination.clone(),
                    blackhole: node.is_none(),
                    // Upstream puts the next hop here when no node has it.
                    target_node: node.unwrap_or(nexthop),
                    destination_cidr: destination,
                }
            })
            .collect())
    }

    async fn create_route(
        &self,
        _cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<()> {
        let router = self.router_id()?;
        let (server_id, ip) = self.node_internal_ip(&route.target_node).await?;
        let existing = self.router_routes(router).await?;
        if !existing
            .iter()
            .any(|(d, n)| *d == route.destination_cidr && *n == ip)
        {
            self.client
                .request(
                    Service::Network,
                    Method::PUT,
                    &format!("/routers/{router}/add_extraroutes"),
                    Some(&json!({"router": {"routes": [{"destination": route.destination_cidr, "nexthop": ip}]}})),
                    "add router extra route",
                )
                .await?;
        }
        self.update_address_pairs(&server_id, &ip, &route.destination_cidr, true)
            .await?;
        tracing::info!(node = %route.target_node, cidr = %route.destination_cidr, nexthop = %ip, name_hint, "route created");
        Ok(())
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<()> {
        let router = self.router_id()?;
        let node = if route.blackhole {
            None
        } else {
            match self.node_internal_ip(&route.target_node).await {
                Ok(found) => Some(found),
                Err(Error::InstanceNotFound) => None,
                Err(e) => return Err(e),
            }
        };
        let remove: Vec<Value> = self
            .router_routes(router)
            .await?
            .into_iter()
            .filter(|(d, n)| {
                *d == route.destination_cidr
                    && match &node {
                        Some((_, ip)) => n == ip,
                        // A blackhole's target is its next hop (see list_routes).
                        None => {
                            *n == route.target_node
                                || route.target_node.is_empty()
                                || !route.blackhole
                        }
                    }
            })
            .map(|(d, n)| json!({"destination": d, "nexthop": n}))
            .collect();
        if !remove.is_empty() {
            self.client
                .request(
                    Service::Network,
                    Method::PUT,
                    &format!("/routers/{router}/remove_extraroutes"),
                    Some(&json!({"router": {"routes": remove}})),
                    "remove router extra route",
                )
                .await?;
        }
        if let Some((server_id, ip)) = node {
            self.update_address_pairs(&server_id, &ip, &route.destination_cidr, false)
                .await?;
        }
        tracing::info!(node = %route.target_node, cidr = %route.destination_cidr, "route deleted");
        Ok(())
    }
}
