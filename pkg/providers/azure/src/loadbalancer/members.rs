//! The backend pool's members, as upstream v1.20's `EnsureHostsInPool`/`EnsureHostInPool`
//! (`azure_standard.go`): each node's VM (node name = VM name, in config `resourceGroup`) has
//! its primary NIC's primary IP configuration name the pool, by a full PUT of the NIC, the
//! nodes in parallel. Skipped as upstream: a VM that does not exist, a NIC whose provisioning
//! failed, with the standard SKU a configuration already in another cluster's load balancer,
//! with the basic SKU a VM outside `primaryAvailabilitySetName` (when set; upstream then takes
//! no node at all); nodes labelled `kubernetes.azure.com/managed=false`, of another
//! `kubernetes.azure.com/resource-group`, or `node.kubernetes.io/exclude-from-external-load-balancers`;
//! and with the standard SKU and `excludeMasterFromStandardLB` (the default) control-plane
//! nodes (`kubernetes.io/role=master`, as v1.20, and `node-role.kubernetes.io/master` or
//! `node-role.kubernetes.io/control-plane`, as newer upstream). A member whose NIC is not a
//! wanted node's is taken out by rewriting that NIC (newer upstream finds the node by the NIC's
//! VM; v1.20's NIC-name pattern is aks-engine's).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;

use crate::client::Arm;
use crate::config::LoadBalancerSku;
use crate::error::Result;
use crate::instances::primary_nic_id;
use crate::models::{NetworkInterface, VirtualMachine};
use crate::Azure;

const LABEL_ROLE: &str = "kubernetes.io/role";
const LABEL_MASTER: &str = "node-role.kubernetes.io/master";
const LABEL_CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
const LABEL_EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
const LABEL_MANAGED: &str = "kubernetes.azure.com/managed";
const LABEL_RESOURCE_GROUP: &str = "kubernetes.azure.com/resource-group";

/// A NIC in the pool: its ID (lower case) and its address.
pub(super) struct Member {
    pub nic: String,
    pub address: Option<String>,
}

/// The NIC of an IP configuration ID (`.../networkInterfaces/n/ipConfigurations/c` → `.../n`).
pub(super) fn nic_of(ip_configuration: &str) -> &str {
    let lower = ip_configuration.to_ascii_lowercase();
    match lower.find("/ipconfigurations/") {
        Some(i) => &ip_configuration[..i],
        None => ip_configuration,
    }
}

/// The load balancer of a backend pool ID.
fn lb_of_pool(pool: &str) -> Option<&str> {
    let segs: Vec<&str> = pool.split('/').collect();
    segs.iter()
        .position(|s| s.eq_ignore_ascii_case("loadBalancers"))
        .and_then(|i| segs.get(i + 1).copied())
}

/// A load balancer's name without the internal suffix, lower case.
fn base_of(lb: &str) -> String {
    let lower = lb.to_lowercase();
    lower
        .strip_suffix("-internal")
        .map(str::to_owned)
        .unwrap_or(lower)
}

/// The primary IP configuration's index: the only one, or the one marked primary.
fn primary_index(nic: &NetworkInterface) -> Option<usize> {
    let configs = &nic.properties.ip_configurations;
    if configs.len() == 1 {
        Some(0)
    } else {
        configs
            .iter()
            .position(|c| c.properties.primary.unwrap_or(false))
    }
}

impl Azure {
    /// Why a node is not a backend, if it is not.
    fn excluded(&self, node: &Node) -> Option<&'static str> {
        let labels = node.metadata.labels.as_ref();
        let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
        if label(LABEL_EXCLUDE).is_some() {
            return Some(LABEL_EXCLUDE);
        }
        if label(LABEL_MANAGED) == Some("false") {
            return Some("kubernetes.azure.com/managed=false");
        }
        if label(LABEL_RESOURCE_GROUP)
            .is_some_and(|g| !g.eq_ignore_ascii_case(&self.config.resource_group))
        {
            return Some("kubernetes.azure.com/resource-group (another group)");
        }
        let standard = self.config.load_balancer_sku == LoadBalancerSku::Standard;
        if standard && self.config.exclude_master_from_standard_lb {
            if label(LABEL_ROLE) == Some("master") {
                return Some("kubernetes.io/role=master (excludeMasterFromStandardLB)");
            }
            if label(LABEL_MASTER).is_some() || label(LABEL_CONTROL_PLANE).is_some() {
                return Some("a control-plane role (excludeMasterFromStandardLB)");
            }
        }
        None
    }

    /// Puts the nodes' primary IP configurations into pool `pool_id` of load balancer
    /// `lb_name` and takes out the `current` members (IP configuration IDs) of other NICs;
    /// the members kept.
    pub(super) async fn ensure_members(
        &self,
        arm: &Arm,
        lb_name: &str,
        pool_id: &str,
        nodes: &[Node],
        current: &[String],
    ) -> Result<Vec<Member>> {
        let names: BTreeSet<&str> = nodes
            .iter()
            .filter(|n| match self.excluded(n) {
                Some(why) => {
                    tracing::debug!(node = ?n.metadata.name, why, "node left out of the load balancer");
                    false
                }
                None => true,
            })
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let joined = futures::future::try_join_all(
            names
                .iter()
                .map(|name| self.join_pool(arm, name, lb_name, pool_id)),
        )
        .await?;
        let members: Vec<Member> = joined.into_iter().flatten().collect();
        let wanted: BTreeSet<&str> = members.iter().map(|m| m.nic.as_str()).collect();
        let mut leaving: Vec<String> = current
            .iter()
            .map(|c| nic_of(c).to_owned())
            .filter(|nic| !wanted.contains(nic.to_lowercase().as_str()))
            .collect();
        leaving.sort_by_key(|n| n.to_lowercase());
        leaving.dedup_by_key(|n| n.to_lowercase());
        let pools = [pool_id.to_owned()];
        futures::future::try_join_all(leaving.iter().map(|nic| self.leave_pools(arm, nic, &pools)))
            .await?;
        Ok(members)
    }

    /// One node's primary IP configuration into the pool: its member, or `None` when the
    /// node is skipped.
    async fn join_pool(
        &self,
        arm: &Arm,
        node: &str,
        lb_name: &str,
        pool_id: &str,
    ) -> Result<Option<Member>> {
        let vm_id = arm.resource_id(
            &self.config.resource_group,
            "Microsoft.Compute/virtualMachines",
            node,
        );
        let vm: VirtualMachine = match arm.get(&vm_id).await {
            Ok(vm) => vm,
            Err(e) if e.is_not_found() => {
                tracing::warn!(
                    node,
                    "no VM of the node's name; left out of the load balancer"
                );
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if self.config.load_balancer_sku == LoadBalancerSku::Basic {
            if let Some(set) = &self.config.primary_availability_set_name {
                let suffix = format!("/availabilitysets/{}", set.to_lowercase());
                let in_set = vm
                    .properties
                    .availability_set
                    .as_ref()
                    .and_then(|r| r.id.as_deref())
                    .is_some_and(|id| id.to_lowercase().ends_with(&suffix));
                if !in_set {
                    tracing::info!(node, availability_set = %set, "VM outside primaryAvailabilitySetName; left out of the basic load balancer");
                    return Ok(None);
                }
            }
        }
        let Some(nic_id) = primary_nic_id(&vm) else {
            tracing::warn!(
                node,
                "VM without a primary NIC; left out of the load balancer"
            );
            return Ok(None);
        };
        let mut nic: NetworkInterface = arm.get(&nic_id).await?;
        let Some(i) = primary_index(&nic) else {
            tracing::warn!(node, nic = %nic_id, "NIC without a primary IP configuration; left out of the load balancer");
            return Ok(None);
        };
        let member = Member {
            nic: nic_id.to_lowercase(),
            address: nic.properties.ip_configurations[i]
                .properties
                .private_ip_address
                .clone(),
        };
        if nic
            .properties
            .provisioning_state
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("Failed"))
        {
            tracing::warn!(node, nic = %nic_id, "NIC provisioning failed; left as it is");
            return Ok(Some(member));
        }
        let pools = &mut nic.properties.ip_configurations[i]
            .properties
            .load_balancer_backend_address_pools;
        if pools.iter().any(|p| {
            p.id.as_deref()
                .is_some_and(|id| id.eq_ignore_ascii_case(pool_id))
        }) {
            return Ok(Some(member));
        }
        if self.config.load_balancer_sku == LoadBalancerSku::Standard {
            let ours = base_of(lb_name);
            if let Some(other) = pools
                .iter()
                .filter_map(|p| p.id.as_deref().and_then(lb_of_pool))
                .find(|lb| base_of(lb) != ours)
            {
                tracing::warn!(node, load_balancer = other, "NIC already in another load balancer's pool; left out (a standard NIC is in one cluster's)");
                return Ok(None);
            }
        }
        pools.push(crate::models::Reference::to(pool_id));
        let _: NetworkInterface = arm.put(&nic_id, &nic).await?;
        Ok(Some(member))
    }

    /// Takes every IP configuration of NIC `nic_id` out of `pools`; a NIC already gone is
    /// fine.
    pub(super) async fn leave_pools(
        &self,
        arm: &Arm,
        nic_id: &str,
        pools: &[String],
    ) -> Result<()> {
        let mut nic: NetworkInterface = match arm.get(nic_id).await {
            Ok(nic) => nic,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut changed = false;
        for c in &mut nic.properties.ip_configurations {
            let list = &mut c.properties.load_balancer_backend_address_pools;
            let before = list.len();
            list.retain(|p| {
                !p.id
                    .as_deref()
                    .is_some_and(|id| pools.iter().any(|x| x.eq_ignore_ascii_case(id)))
            });
            changed |= list.len() != before;
        }
        if changed {
            let _: NetworkInterface = arm.put(nic_id, &nic).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_cut_as_arm_writes_them() {
        let c = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n1/ipConfigurations/ipconfig1";
        assert_eq!(
            nic_of(c),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n1"
        );
        assert_eq!(nic_of("/x/IPCONFIGURATIONS/y"), "/x");
        let pool = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/Kube-Internal/backendAddressPools/kube";
        assert_eq!(lb_of_pool(pool), Some("Kube-Internal"));
        assert_eq!(base_of("Kube-Internal"), "kube");
        assert_eq!(base_of("kube"), "kube");
    }
}
