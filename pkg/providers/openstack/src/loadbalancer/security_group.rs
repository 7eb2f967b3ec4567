//! `[LoadBalancer] manage-security-groups = true`: a Neutron security group per load balancer
//! that opens the Service's node ports to the load balancer, as OCCM v1.34
//! (`ensureAndUpdateOctaviaSecurityGroup`, `ensureSecurityGroupDeleted`) does it:
//!
//! * the group is named `lb-sg-<uid>-<namespace>-<name>` (at most 255 bytes), described
//!   `Security Group for <ns>/<name> Service LoadBalancer in cluster <cluster>`, found by name;
//! * its rules are exactly: ingress, the port's protocol, each `nodePort` (and the TCP
//!   `healthCheckNodePort` when the Service has one) from the CIDR of the members' subnet (the
//!   load balancer's VIP subnet: the amphorae reach the members from there). Any other rule,
//!   Neutron's two default egress rules included, is deleted, as OCCM's rule sync does;
//! * the group is added to every member node's Neutron port (the port of the node's server that
//!   holds its member address, with port security on); deleting the load balancer takes it off
//!   every port that has it and deletes it.
//!
//! Both layouts manage it the same way when the key is set.

use std::collections::BTreeSet;

use hypercloud_cloudprovider::Result;
use k8s_openapi::api::core::v1::{Node, Service};
use reqwest::Method;
use serde_json::{json, Value};

use super::{encode, Port};
use crate::client::{is_not_found, Service as Api};
use crate::OpenStack;

/// One rule of the group: (protocol, port, remote CIDR, ethertype).
type Rule = (String, i64, String, &'static str);

/// OCCM's `getSecurityGroupName`.
pub(super) fn group_name(service: &Service) -> String {
    super::cut_255(format!(
        "lb-sg-{}-{}-{}",
        service.metadata.uid.as_deref().unwrap_or_default(),
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    ))
}

/// The rules the group must hold for `ports` from `cidr`.
fn wanted_rules(ports: &[Port], health_check_node_port: Option<i32>, cidr: &str) -> BTreeSet<Rule> {
    let ethertype = if cidr.contains(':') { "IPv6" } else { "IPv4" };
    let mut wanted: BTreeSet<Rule> = ports
        .iter()
        .filter(|p| p.node_port > 0)
        .map(|p| {
            (
                p.protocol.to_lowercase(),
                i64::from(p.node_port),
                cidr.to_owned(),
                ethertype,
            )
        })
        .collect();
    if let Some(hc) = health_check_node_port.filter(|p| *p > 0) {
        wanted.insert(("tcp".into(), i64::from(hc), cidr.to_owned(), ethertype));
    }
    wanted
}

/// A Neutron rule as a [`Rule`], when it is an ingress rule on a single port from a prefix.
fn as_rule(r: &Value) -> Option<Rule> {
    let ethertype = match r["ethertype"].as_str()? {
        "IPv4" => "IPv4",
        "IPv6" => "IPv6",
        _ => return None,
    };
    let min = r["port_range_min"].as_i64()?;
    (r["direction"] == "ingress" && r["port_range_max"].as_i64() == Some(min)).then(|| {
        (
            r["protocol"].as_str().unwrap_or_default().to_lowercase(),
            min,
            r["remote_ip_prefix"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            ethertype,
        )
    })
}

impl OpenStack {
    async fn net_call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &str,
    ) -> Result<Value> {
        Ok(self
            .client
            .request(Api::Network, method, path, body, operation)
            .await?
            .body)
    }

    async fn find_group(&self, name: &str) -> Result<Option<String>> {
        let found = self
            .client
            .list(
                Api::Network,
                &format!("/security-groups?name={}", encode(name)),
                "security_groups",
                "find security group",
            )
            .await?;
        Ok(found
            .iter()
            .find(|g| g["name"] == name)
            .and_then(|g| g["id"].as_str())
            .map(str::to_owned))
    }

    /// The CIDR of the members' subnet: the load balancer's VIP subnet, else the first subnet
    /// of its VIP network.
    async fn member_cidr(&self, lb: &Value) -> Result<String> {
        let subnet = match lb["vip_subnet_id"].as_str().filter(|s| !s.is_empty()) {
            Some(id) => self
                .net_call(
                    Method::GET,
                    &format!("/subnets/{}", encode(id)),
                    None,
                    "get member subnet",
                )
                .await?["subnet"]
                .clone(),
            None => {
                let network = lb["vip_network_id"].as_str().unwrap_or_default();
                self.client
                    .list(
                        Api::Network,
                        &format!("/subnets?network_id={}", encode(network)),
                        "subnets",
                        "list member subnets",
                    )
                    .await?
                    .into_iter()
                    .next()
                    .unwrap_or(Value::Null)
            }
        };
        subnet["cidr"].as_str().map(str::to_owned).ok_or_else(|| {
            self.lb_error(
                "get member subnet",
                format!(
                    "load balancer {} has no VIP subnet with a CIDR to open the node ports to",
                    lb["id"].as_str().unwrap_or_default()
                ),
            )
        })
    }

    /// Creates or converges the Service's group and puts it on the member nodes' ports.
    pub(super) async fn ensure_security_group(
        &self,
        cluster_name: &str,
        service: &Service,
        lb: &Value,
        ports: &[Port],
        nodes: &[Node],
    ) -> Result<()> {
        let name = group_name(service);
        let id = match self.find_group(&name).await? {
            Some(id) => id,
            None => {
                let body = json!({"security_group": {
                    "name": name,
                    "description": format!(
                        "Security Group for {}/{} Service LoadBalancer in cluster {cluster_name}",
                        service.metadata.namespace.as_deref().unwrap_or("default"),
                        service.metadata.name.as_deref().unwrap_or_default()
                    ),
                }});
                let created = self
                    .net_call(
                        Method::POST,
                        "/security-groups",
                        Some(&body),
                        "create security group",
                    )
                    .await?;
                let id = created["security_group"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                tracing::info!(group = %name, id, "load balancer security group created");
                id
            }
        };
        let cidr = self.member_cidr(lb).await?;
        let health_check = service.spec.as_ref().and_then(|s| s.health_check_node_port);
        let wanted = wanted_rules(ports, health_check, &cidr);
        let existing = self
            .client
            .list(
                Api::Network,
                &format!("/security-group-rules?security_group_id={}", encode(&id)),
                "security_group_rules",
                "list security group rules",
            )
            .await?;
        let mut have = BTreeSet::new();
        for r in existing
            .iter()
            .filter(|r| r["security_group_id"] == id.as_str())
        {
            match as_rule(r).filter(|rule| wanted.contains(rule)) {
                Some(rule) => {
                    have.insert(rule);
                }
                None => {
                    let rule_id = r["id"].as_str().unwrap_or_default();
                    match self
                        .net_call(
                            Method::DELETE,
                            &format!("/security-group-rules/{}", encode(rule_id)),
                            None,
                            "delete security group rule",
                        )
                        .await
                    {
                        Err(e) if !is_not_found(&e) => return Err(e),
                        _ => {}
                    }
                }
            }
        }
        for (protocol, port, prefix, ethertype) in wanted.difference(&have) {
            let body = json!({"security_group_rule": {
                "security_group_id": id, "direction": "ingress", "ethertype": ethertype,
                "protocol": protocol, "port_range_min": port, "port_range_max": port,
                "remote_ip_prefix": prefix,
            }});
            match self
                .net_call(
                    Method::POST,
                    "/security-group-rules",
                    Some(&body),
                    "create security group rule",
                )
                .await
            {
                // 409: a concurrent sync made it already (OCCM ignores it too).
                Err(hypercloud_cloudprovider::Error::Cloud {
                    status: Some(409), ..
                }) => {}
                Err(e) => return Err(e),
                Ok(_) => {}
            }
        }
        self.attach_group(&id, nodes).await
    }

    /// Adds group `id` to the port of each node's server that holds the node's member address.
    async fn attach_group(&self, id: &str, nodes: &[Node]) -> Result<()> {
        for node in nodes {
            let Some(provider_id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
            else {
                continue;
            };
            let Some(addr) = super::member_address(node) else {
                continue;
            };
            let (_, server) = crate::instances::parse_provider_id(provider_id)?;
            let ports = self
                .client
                .list(
                    Api::Network,
                    &format!("/ports?device_id={}", encode(server)),
                    "ports",
                    "list node ports",
                )
                .await?;
            for port in ports.iter().filter(|p| {
                p["port_security_enabled"] != false
                    && p["fixed_ips"]
                        .as_array()
                        .is_some_and(|f| f.iter().any(|ip| ip["ip_address"] == addr.as_str()))
            }) {
                let mut groups: Vec<Value> = port["security_groups"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if groups.iter().any(|g| g == id) {
                    continue;
                }
                groups.push(id.into());
                let port_id = port["id"].as_str().unwrap_or_default();
                self.net_call(
                    Method::PUT,
                    &format!("/ports/{}", encode(port_id)),
                    Some(&json!({"port": {"security_groups": groups}})),
                    "add security group to node port",
                )
                .await?;
                tracing::info!(group = id, port = port_id, node = ?node.metadata.name, "security group added to the node's port");
            }
        }
        Ok(())
    }

    /// Takes the Service's group off every port and deletes it; gone already is fine.
    pub(super) async fn ensure_security_group_deleted(&self, service: &Service) -> Result<()> {
        let name = group_name(service);
        let Some(id) = self.find_group(&name).await? else {
            return Ok(());
        };
        let ports = self
            .client
            .list(
                Api::Network,
                &format!("/ports?security_groups={}", encode(&id)),
                "ports",
                "list ports of security group",
            )
            .await?;
        for port in &ports {
            let groups: Vec<&Value> = port["security_groups"]
                .as_array()
                .map(|g| g.iter().collect())
                .unwrap_or_default();
            if !groups.iter().any(|g| *g == id.as_str()) {
                continue;
            }
            let kept: Vec<&Value> = groups.into_iter().filter(|g| *g != id.as_str()).collect();
            let port_id = port["id"].as_str().unwrap_or_default();
            match self
                .net_call(
                    Method::PUT,
                    &format!("/ports/{}", encode(port_id)),
                    Some(&json!({"port": {"security_groups": kept}})),
                    "remove security group from port",
                )
                .await
            {
                Err(e) if !is_not_found(&e) => return Err(e),
                _ => {}
            }
        }
        match self
            .net_call(
                Method::DELETE,
                &format!("/security-groups/{}", encode(&id)),
                None,
                "delete security group",
            )
            .await
        {
            Err(e) if !is_not_found(&e) => return Err(e),
            _ => {}
        }
        tracing::info!(group = %name, id, "load balancer security group deleted");
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rules_open_each_node_port_and_the_health_check_port_from_the_member_subnet() {
        let ports = [
            Port {
                protocol: "TCP".into(),
                port: 80,
                node_port: 30080,
            },
            Port {
                protocol: "UDP".into(),
                port: 53,
                node_port: 30053,
            },
            Port {
                protocol: "TCP".into(),
                port: 81,
                node_port: 0,
            },
        ];
        let got = wanted_rules(&ports, Some(32000), "10.0.0.0/24");
        let want: BTreeSet<Rule> = [
            ("tcp".to_string(), 30080, "10.0.0.0/24".to_string(), "IPv4"),
            ("udp".to_string(), 30053, "10.0.0.0/24".to_string(), "IPv4"),
            ("tcp".to_string(), 32000, "10.0.0.0/24".to_string(), "IPv4"),
        ]
        .into();
        assert_eq!(got, want);
        assert!(wanted_rules(&ports[..1], None, "fd00::/64")
            .iter()
            .all(|r| r.3 == "IPv6"));
        // Neutron's default egress rule is no wanted rule: the sync deletes it.
        assert_eq!(
            as_rule(&json!({"direction": "egress", "ethertype": "IPv4", "protocol": null})),
            None
        );
        assert_eq!(
            as_rule(
                &json!({"direction": "ingress", "ethertype": "IPv4", "protocol": "TCP",
                "port_range_min": 30080, "port_range_max": 30080, "remote_ip_prefix": "10.0.0.0/24"})
            ),
            Some(("tcp".into(), 30080, "10.0.0.0/24".into(), "IPv4"))
        );
    }

    #[test]
    fn group_name_as_occm() {
        let mut svc = Service::default();
        svc.metadata.uid = Some("u-1".into());
        svc.metadata.namespace = Some("ns".into());
        svc.metadata.name = Some("web".into());
        assert_eq!(group_name(&svc), "lb-sg-u-1-ns-web");
        svc.metadata.name = Some("x".repeat(300));
        assert_eq!(group_name(&svc).len(), 255);
    }
}
