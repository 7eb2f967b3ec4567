//! Service load balancers on Octavia (Load Balancer v2), as upstream cloud-provider-openstack
//! `pkg/openstack/loadbalancer.go` does it (behaviour only):
//!
//! * one Octavia load balancer per Service, named `kube_service_<cluster>_<namespace>_<name>`
//!   and found by that name; its VIP is on `[LoadBalancer] subnet-id`, else `network-id`, else
//!   the subnet named `private` (the local cloud's), else the first subnet;
//! * one listener per Service port (`listener_<index>_<lbname>`, TCP or UDP on the port), one
//!   pool per listener (`pool_<index>_<lbname>`, `lb-method`, default `ROUND_ROBIN`) whose
//!   members are every node's first InternalIP at the port's `nodePort`, and with
//!   `create-monitor` a health monitor per pool (`monitor-delay`/`-timeout`/`-max-retries`);
//! * Octavia refuses changes while the load balancer is `PENDING_*`, so every mutation is
//!   followed by a bounded wait for `ACTIVE`;
//! * ensuring again converges (listeners, pools, members, monitors added or removed) without
//!   recreating; deleting is a cascade delete and succeeds when the load balancer is gone.
//!
//! The ingress IP reported is the VIP (floating IPs are not attached).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hypercloud_cloudprovider::{Error, LoadBalancer, Result};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::{is_not_found, Service as Api};
use crate::OpenStack;

/// How long to wait for the load balancer to leave `PENDING_*`.
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(120);
const POLL_START: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_secs(2);
const LBAAS: &str = "/v2/lbaas";

/// One wanted listener: protocol, port, node port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Port {
    protocol: String,
    port: i32,
    node_port: i32,
}

impl OpenStack {
    fn lb_error(&self, operation: &str, message: impl Into<String>) -> Error {
        Error::Cloud {
            provider: self.name.clone(),
            operation: operation.into(),
            status: None,
            request_id: None,
            message: message.into(),
        }
    }

    async fn lb_call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &str,
    ) -> Result<Value> {
        Ok(self
            .client
            .request(
                Api::LoadBalancer,
                method,
                &format!("{LBAAS}{path}"),
                body,
                operation,
            )
            .await?
            .body)
    }

    async fn lb_list(&self, path: &str, key: &str, operation: &str) -> Result<Vec<Value>> {
        self.client
            .list(Api::LoadBalancer, &format!("{LBAAS}{path}"), key, operation)
            .await
    }

    async fn find_lb(&self, name: &str) -> Result<Option<Value>> {
        let found = self
            .lb_list(
                &format!("/loadbalancers?name={}", encode(name)),
                "loadbalancers",
                "find load balancer",
            )
            .await?;
        if found.len() > 1 {
            return Err(self.lb_error(
                "find load balancer",
                format!("{} load balancers are named {name}", found.len()),
            ));
        }
        Ok(found.into_iter().find(|l| l["name"] == name))
    }

    /// Polls until the load balancer is `ACTIVE` (bounded); `ERROR` fails.
    async fn wait_active(&self, id: &str) -> Result<Value> {
        let start = Instant::now();
        let mut pause = POLL_START;
        loop {
            let lb = self
                .lb_call(
                    Method::GET,
                    &format!("/loadbalancers/{id}"),
                    None,
                    "wait for load balancer",
                )
                .await?;
            let status = lb["loadbalancer"]["provisioning_status"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match status.as_str() {
                "ACTIVE" => return Ok(lb["loadbalancer"].clone()),
                "ERROR" => {
                    return Err(self.lb_error(
                        "wait for load balancer",
                        format!("load balancer {id} is in ERROR"),
                    ))
                }
                _ => {}
            }
            if start.elapsed() > ACTIVE_TIMEOUT {
                return Err(self.lb_error(
                    "wait for load balancer",
                    format!(
                        "load balancer {id} still {status} after {}s",
                        ACTIVE_TIMEOUT.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    /// Polls until the load balancer is gone (bounded).
    async fn wait_gone(&self, id: &str) -> Result<()> {
        let start = Instant::now();
        let mut pause = POLL_START;
        loop {
            match self
                .lb_call(
                    Method::GET,
                    &format!("/loadbalancers/{id}"),
                    None,
                    "wait for load balancer deletion",
                )
                .await
            {
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(e),
                Ok(lb) if lb["loadbalancer"]["provisioning_status"] == "DELETED" => return Ok(()),
                Ok(_) => {}
            }
            if start.elapsed() > ACTIVE_TIMEOUT {
                return Err(self.lb_error(
                    "wait for load balancer deletion",
                    format!(
                        "load balancer {id} still exists after {}s",
                        ACTIVE_TIMEOUT.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    /// The VIP placement: `vip_subnet_id` or `vip_network_id`.
    async fn vip_placement(&self) -> Result<(&'static str, String)> {
        let lb = &self.config.load_balancer;
        if let Some(s) = &lb.subnet_id {
            return Ok(("vip_subnet_id", s.clone()));
        }
        if let Some(n) = &lb.network_id {
            return Ok(("vip_network_id", n.clone()));
        }
        let subnets = self
            .client
            .list(Api::Network, "/subnets", "subnets", "list subnets")
            .await?;
        subnets
            .iter()
            .find(|s| s["name"] == "private")
            .or_else(|| subnets.first())
            .and_then(|s| s["id"].as_str())
            .map(|id| ("vip_subnet_id", id.to_owned()))
            .ok_or_else(|| {
                self.lb_error(
                    "choose VIP subnet",
                    "no [LoadBalancer] subnet-id or network-id, and the cloud has no subnet",
                )
            })
    }

    fn wanted_ports(&self, service: &Service) -> Result<Vec<Port>> {
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default();
        if ports.is_empty() {
            return Err(self.lb_error("ensure load balancer", "the Service has no ports"));
        }
        ports
            .iter()
            .map(|p| {
                let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
                if protocol != "TCP" && protocol != "UDP" {
                    return Err(self.lb_error(
                        "ensure load balancer",
                        format!("protocol {protocol} of port {} is not supported", p.port),
                    ));
                }
                let node_port = p.node_port.ok_or_else(|| {
                    self.lb_error(
                        "ensure load balancer",
                        format!("port {} has no nodePort", p.port),
                    )
                })?;
                Ok(Port {
                    protocol,
                    port: p.port,
                    node_port,
                })
            })
            .collect()
    }

    /// The pool members wanted for `node_port`: each node's first InternalIP.
    fn wanted_members(nodes: &[Node], node_port: i32) -> BTreeSet<(String, i64)> {
        nodes
            .iter()
            .filter_map(|n| {
                let ip = n
                    .status
                    .as_ref()?
                    .addresses
                    .as_ref()?
                    .iter()
                    .find(|a| a.type_ == "InternalIP")
                    .map(|a| a.address.clone());
                if ip.is_none() {
                    tracing::warn!(node = ?n.metadata.name, "node has no InternalIP; not a load balancer member");
                }
                ip
            })
            .map(|ip| (ip, i64::from(node_port)))
            .collect()
    }

    /// Replaces the pool's members by `wanted` (batch update) when they differ.
    async fn sync_members(
        &self,
        lb_id: &str,
        pool_id: &str,
        wanted: &BTreeSet<(String, i64)>,
    ) -> Result<bool> {
        let current: BTreeSet<(String, i64)> = self
            .lb_list(
                &format!("/pools/{pool_id}/members"),
                "members",
                "list pool members",
            )
            .await?
            .iter()
            .filter_map(|m| {
                Some((
                    m["address"].as_str()?.to_owned(),
                    m["protocol_port"].as_i64()?,
                ))
            })
            .collect();
        if &current == wanted {
            return Ok(false);
        }
        let members: Vec<Value> = wanted
            .iter()
            .map(|(address, port)| json!({"address": address, "protocol_port": port}))
            .collect();
        self.lb_call(
            Method::PUT,
            &format!("/pools/{pool_id}/members"),
            Some(&json!({ "members": members })),
            "update pool members",
        )
        .await?;
        self.wait_active(lb_id).await?;
        tracing::info!(
            pool_id,
            members = wanted.len(),
            "load balancer pool members updated"
        );
        Ok(true)
    }

    fn monitor_body(&self, pool_id: &str, name: &str, protocol: &str) -> Value {
        let c = &self.config.load_balancer;
        let delay = c.monitor_delay.unwrap_or(Duration::from_secs(5)).as_secs();
        let timeout = c
            .monitor_timeout
            .unwrap_or(Duration::from_secs(3))
            .as_secs();
        json!({"healthmonitor": {
            "name": name,
            "pool_id": pool_id,
            "type": if protocol == "UDP" { "UDP-CONNECT" } else { "TCP" },
            "delay": delay.max(1),
            "timeout": timeout.max(1).min(delay.max(1)),
            "max_retries": c.monitor_max_retries.unwrap_or(1).clamp(1, 10),
        }})
    }

    /// Deletes `kind/id` and waits for the load balancer.
    async fn delete_child(&self, lb_id: &str, path: &str, operation: &str) -> Result<()> {
        match self.lb_call(Method::DELETE, path, None, operation).await {
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        self.wait_active(lb_id).await.map(drop)
    }

    /// The load balancer's listeners, pools and monitors converge to `ports` and `nodes`.
    async fn converge(
        &self,
        lb_id: &str,
        lb_name: &str,
        ports: &[Port],
        nodes: &[Node],
        members_only: bool,
    ) -> Result<()> {
        let listeners = self
            .lb_list(
                &format!("/listeners?loadbalancer_id={lb_id}"),
                "listeners",
                "list listeners",
            )
            .await?;
        let pools = self
            .lb_list(
                &format!("/pools?loadbalancer_id={lb_id}"),
                "pools",
                "list pools",
            )
            .await?;
        let method = self
            .config
            .load_balancer
            .lb_method
            .clone()
            .unwrap_or_else(|| "ROUND_ROBIN".into());
        let mut kept = BTreeSet::new();
        for (index, p) in ports.iter().enumerate() {
            let existing = listeners
                .iter()
                .find(|l| l["protocol"] == p.protocol && l["protocol_port"] == p.port);
            let listener_id = match existing.and_then(|l| l["id"].as_str()) {
                Some(id) => id.to_owned(),
                None if members_only => continue,
                None => {
                    let created = self
                        .lb_call(
                            Method::POST,
                            "/listeners",
                            Some(&json!({"listener": {
                                "name": format!("listener_{index}_{lb_name}"),
                                "loadbalancer_id": lb_id,
                                "protocol": p.protocol,
                                "protocol_port": p.port,
                            }})),
                            "create listener",
                        )
                        .await?;
                    self.wait_active(lb_id).await?;
                    created["listener"]["id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                }
            };
            kept.insert(listener_id.clone());
            let pool = pools.iter().find(|pool| {
                pool["listeners"]
                    .as_array()
                    .is_some_and(|ls| ls.iter().any(|l| l["id"] == listener_id.as_str()))
            });
            let (pool_id, monitor_id) = match pool {
                Some(pool) => {
                    let id = pool["id"].as_str().unwrap_or_default().to_owned();
                    if !members_only && pool["lb_algorithm"] != method.as_str() {
                        self.lb_call(
                            Method::PUT,
                            &format!("/pools/{id}"),
                            Some(&json!({"pool": {"lb_algorithm": method}})),
                            "update pool",
                        )
                        .await?;
                        self.wait_active(lb_id).await?;
                    }
                    let monitor = pool["healthmonitor_id"].as_str().map(str::to_owned);
                    (id, monitor)
                }
                None if members_only => continue,
                None => {
                    let created = self
                        .lb_call(
                            Method::POST,
                            "/pools",
                            Some(&json!({"pool": {
                                "name": format!("pool_{index}_{lb_name}"),
                                "listener_id": listener_id,
                                "protocol": p.protocol,
                                "lb_algorithm": method,
                            }})),
                            "create pool",
                        )
                        .await?;
                    self.wait_active(lb_id).await?;
                    (
                        created["pool"]["id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        None,
                    )
                }
            };
            self.sync_members(lb_id, &pool_id, &Self::wanted_members(nodes, p.node_port))
                .await?;
            if members_only {
                continue;
            }
            match (self.config.load_balancer.create_monitor, monitor_id) {
                (true, None) => {
                    let body = self.monitor_body(
                        &pool_id,
                        &format!("monitor_{index}_{lb_name}"),
                        &p.protocol,
                    );
                    self.lb_call(
                        Method::POST,
                        "/healthmonitors",
                        Some(&body),
                        "create health monitor",
                    )
                    .await?;
                    self.wait_active(lb_id).await?;
                }
                (false, Some(m)) => {
                    self.delete_child(
                        lb_id,
                        &format!("/healthmonitors/{m}"),
                        "delete health monitor",
                    )
                    .await?;
                }
                _ => {}
            }
        }
        if members_only {
            return Ok(());
        }
        // Listeners (and their pools) for ports the Service no longer has.
        for l in &listeners {
            let Some(id) = l["id"].as_str() else { continue };
            if kept.contains(id) {
                continue;
            }
            for pool in pools.iter().filter(|pool| {
                pool["listeners"]
                    .as_array()
                    .is_some_and(|ls| ls.iter().any(|x| x["id"] == id))
            }) {
                if let Some(pid) = pool["id"].as_str() {
                    self.delete_child(lb_id, &format!("/pools/{pid}"), "delete pool")
                        .await?;
                }
            }
            self.delete_child(lb_id, &format!("/listeners/{id}"), "delete listener")
                .await?;
            tracing::info!(lb_id, listener = id, "obsolete listener deleted");
        }
        Ok(())
    }
}

fn status_of(lb: &Value) -> LoadBalancerStatus {
    let ingress = lb["vip_address"].as_str().map(|ip| {
        vec![LoadBalancerIngress {
            ip: Some(ip.to_owned()),
            ..Default::default()
        }]
    });
    LoadBalancerStatus { ingress }
}

/// Percent-encodes a query value (names are Kubernetes names plus `_`, but be safe).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[async_trait]
impl LoadBalancer for OpenStack {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let name = self.get_load_balancer_name(cluster_name, service);
        Ok(self.find_lb(&name).await?.as_ref().map(status_of))
    }

    /// Upstream's name: `kube_service_<cluster>_<namespace>_<name>`, at most 255 characters.
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        let mut name = format!(
            "kube_service_{cluster_name}_{}_{}",
            service.metadata.namespace.as_deref().unwrap_or("default"),
            service.metadata.name.as_deref().unwrap_or_default()
        );
        if name.len() > 255 {
            let mut cut = 255;
            while !name.is_char_boundary(cut) {
                cut -= 1;
            }
            name.truncate(cut);
        }
        name
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let ports = self.wanted_ports(service)?;
        let started = Instant::now();
        let id = match self.find_lb(&name).await? {
            Some(lb) => lb["id"].as_str().unwrap_or_default().to_owned(),
            None => {
                let (key, value) = self.vip_placement().await?;
                let mut body = json!({"loadbalancer": {
                    "name": name,
                    "description": format!(
                        "Kubernetes external service {}/{} from cluster {cluster_name}",
                        service.metadata.namespace.as_deref().unwrap_or("default"),
                        service.metadata.name.as_deref().unwrap_or_default()
                    ),
                    key: value,
                }});
                if let Some(p) = &self.config.load_balancer.lb_provider {
                    body["loadbalancer"]["provider"] = p.clone().into();
                }
                let created = self
                    .lb_call(
                        Method::POST,
                        "/loadbalancers",
                        Some(&body),
                        "create load balancer",
                    )
                    .await?;
                let id = created["loadbalancer"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                tracing::info!(lb = %name, id, "load balancer created");
                id
            }
        };
        if id.is_empty() {
            return Err(self.lb_error("ensure load balancer", "the load balancer has no id"));
        }
        self.wait_active(&id).await?;
        self.converge(&id, &name, &ports, nodes, false).await?;
        let lb = self.wait_active(&id).await?;
        tracing::info!(lb = %name, id, elapsed_ms = started.elapsed().as_millis() as u64, "load balancer ensured");
        Ok(status_of(&lb))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let ports = self.wanted_ports(service)?;
        let Some(lb) = self.find_lb(&name).await? else {
            return Err(self.lb_error(
                "update load balancer",
                format!("load balancer {name} does not exist"),
            ));
        };
        let id = lb["id"].as_str().unwrap_or_default().to_owned();
        self.wait_active(&id).await?;
        self.converge(&id, &name, &ports, nodes, true).await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let Some(lb) = self.find_lb(&name).await? else {
            return Ok(());
        };
        let id = lb["id"].as_str().unwrap_or_default().to_owned();
        if lb["provisioning_status"]
            .as_str()
            .is_some_and(|s| s.starts_with("PENDING_") && s != "PENDING_DELETE")
        {
            self.wait_active(&id).await?;
        }
        if lb["provisioning_status"] != "PENDING_DELETE" {
            match self
                .lb_call(
                    Method::DELETE,
                    &format!("/loadbalancers/{id}?cascade=true"),
                    None,
                    "delete load balancer",
                )
                .await
            {
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(e),
                Ok(_) => {}
            }
        }
        self.wait_gone(&id).await?;
        tracing::info!(lb = %name, id, "load balancer deleted");
        Ok(())
    }
}
