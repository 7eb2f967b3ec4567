//! Node helpers shared by the kubelet side and the cloud-node controller (upstream
//! `k8s.io/cloud-provider/node/helpers`): which cloud addresses a Node reports when the
//! kubelet was given `--node-ip`, and the provider ID format.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::NodeAddress;

/// The requested node IP is not among the cloud's addresses for the node.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeIpError {
    /// `--node-ip` / the provided-node-ip annotation is not an IP address list.
    #[error("invalid node IP {0:?}")]
    Parse(String),
    /// None of the cloud's addresses is that IP.
    #[error("failed to get node address from cloud provider that matches ip: {0}")]
    NoMatch(String),
}

/// Filters the cloud's addresses by the node IP(s) the kubelet was given (comma-separated for
/// dual stack): for each address type that has an address equal to a node IP, that address
/// alone is kept for the type; addresses of other types are all kept, after it. An empty
/// `provided` keeps every cloud address.
pub fn node_addresses_from_node_ip(
    provided: &str,
    cloud: &[NodeAddress],
) -> Result<Vec<NodeAddress>, NodeIpError> {
    let provided = provided.trim();
    if provided.is_empty() {
        return Ok(cloud.to_vec());
    }
    let ips: Vec<IpAddr> = provided
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| NodeIpError::Parse(provided.into()))
        })
        .collect::<Result<_, _>>()?;
    let mut enforced: Vec<NodeAddress> = Vec::new();
    let mut types: Vec<String> = Vec::new();
    for ip in &ips {
        for a in cloud {
            if a.address.parse::<IpAddr>().ok().as_ref() == Some(ip) {
                enforced.push(a.clone());
                types.push(a.type_.clone());
            }
        }
    }
    if enforced.is_empty() {
        return Err(NodeIpError::NoMatch(provided.into()));
    }
    enforced.extend(cloud.iter().filter(|a| !types.contains(&a.type_)).cloned());
    Ok(enforced)
}

/// `<provider>://<instance id>` as upstream `GetInstanceProviderID`, unless the ID already
/// carries a scheme.
pub fn instance_provider_id(provider_name: &str, instance_id: &str) -> String {
    if instance_id.contains("://") {
        instance_id.to_string()
    } else {
        format!("{provider_name}://{instance_id}")
    }
}

/// The instance ID of `node` a volume attacher takes: its provider ID's last segment
/// (`openstack:///<uuid>`), else the provider's `InstanceID` by the Node's name, cut the same
/// way (as upstream's in-tree attachers find it). [`crate::Error::NotImplemented`] without
/// instances, [`crate::Error::InstanceNotFound`] when the answer names none.
pub async fn node_attach_instance(
    cloud: &dyn crate::Interface,
    node: &k8s_openapi::api::core::v1::Node,
) -> crate::Result<String> {
    if let Some(id) = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(attach_instance_id)
    {
        return Ok(id);
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let instances = cloud.instances().ok_or(crate::Error::NotImplemented)?;
    let id = instances.instance_id(name).await?;
    attach_instance_id(&id).ok_or(crate::Error::InstanceNotFound)
}

/// The instance ID a volume attacher takes, from a provider ID (`openstack:///<uuid>`,
/// `aws:///us-east-1a/i-0abc`) or an `InstanceID` answer (`/<uuid>`): the last non-empty
/// `/`-separated segment, as upstream's in-tree attachers cut it. `None` when there is none.
pub fn attach_instance_id(id: &str) -> Option<String> {
    id.rsplit('/').find(|p| !p.is_empty()).map(str::to_owned)
}

/// What the cloud says about one node, asked by the node's name as the node itself asks (see
/// [`facts_by_name`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFacts {
    /// `spec.providerID` (`<provider>://<instance id>`).
    pub provider_id: String,
    /// The cloud's addresses, unfiltered.
    pub addresses: Vec<NodeAddress>,
    /// The instance type; empty when the cloud names none.
    pub instance_type: String,
    /// Zone and region, when the provider has zones (or InstancesV2 answered).
    pub zone: Option<crate::Zone>,
}

/// A by-name lookup of a node that failed.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The provider supports neither Instances nor InstancesV2.
    #[error("cloud provider {0:?} supports neither Instances nor InstancesV2")]
    NoInstances(String),
    /// One call about the node failed.
    #[error("asking the cloud for {what} of node {node}")]
    Call {
        /// What was asked (instance ID, addresses, instance type, zone, instance metadata).
        what: &'static str,
        /// The node.
        node: String,
        /// The provider's error.
        source: crate::Error,
    },
}

/// What the cloud says about node `name`, asked by name, as the node itself asks: upstream's
/// in-tree kubelet and cloud-provider-azure's cloud-node-manager both call Instances'
/// `InstanceID`, `NodeAddresses` and `InstanceType` with the node's name (a provider that knows
/// it runs on that node answers from its instance metadata) and take the zone from Zones;
/// a provider with InstancesV2 only answers with one `InstanceMetadata`.
pub async fn facts_by_name(
    cloud: &dyn crate::Interface,
    name: &str,
) -> Result<NodeFacts, LookupError> {
    let call = |what: &'static str| {
        move |source| LookupError::Call {
            what,
            node: name.to_string(),
            source,
        }
    };
    let mut facts = if let Some(i) = cloud.instances() {
        let id = i.instance_id(name).await.map_err(call("instance ID"))?;
        NodeFacts {
            provider_id: instance_provider_id(cloud.provider_name(), &id),
            addresses: i.node_addresses(name).await.map_err(call("addresses"))?,
            instance_type: i.instance_type(name).await.map_err(call("instance type"))?,
            zone: None,
        }
    } else if let Some(v2) = cloud.instances_v2() {
        let probe = k8s_openapi::api::core::v1::Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let md = v2
            .instance_metadata(&probe)
            .await
            .map_err(call("instance metadata"))?;
        NodeFacts {
            provider_id: md.provider_id,
            addresses: md.node_addresses,
            instance_type: md.instance_type,
            zone: Some(crate::Zone {
                failure_domain: md.zone,
                region: md.region,
            }),
        }
    } else {
        return Err(LookupError::NoInstances(cloud.provider_name().into()));
    };
    if let Some(z) = cloud.zones() {
        facts.zone = Some(z.get_zone_by_node_name(name).await.map_err(call("zone"))?);
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(t: &str, ip: &str) -> NodeAddress {
        NodeAddress {
            type_: t.into(),
            address: ip.into(),
        }
    }

    #[test]
    fn node_ip_wins_its_type_and_keeps_other_types() {
        let cloud = vec![
            a("InternalIP", "10.0.0.1"),
            a("InternalIP", "10.0.0.2"),
            a("ExternalIP", "203.0.113.5"),
            a("Hostname", "node-1"),
        ];
        let got = node_addresses_from_node_ip("10.0.0.2", &cloud).expect("match");
        assert_eq!(
            got,
            vec![
                a("InternalIP", "10.0.0.2"),
                a("ExternalIP", "203.0.113.5"),
                a("Hostname", "node-1")
            ]
        );
    }

    #[test]
    fn empty_keeps_all_and_mismatch_is_an_error() {
        let cloud = vec![a("InternalIP", "10.0.0.1")];
        assert_eq!(node_addresses_from_node_ip("", &cloud).expect("all"), cloud);
        assert_eq!(
            node_addresses_from_node_ip("10.9.9.9", &cloud).expect_err("none"),
            NodeIpError::NoMatch("10.9.9.9".into())
        );
        assert!(matches!(
            node_addresses_from_node_ip("nope", &cloud),
            Err(NodeIpError::Parse(_))
        ));
    }

    #[test]
    fn dual_stack_node_ips() {
        let cloud = vec![
            a("InternalIP", "10.0.0.1"),
            a("InternalIP", "fd00::1"),
            a("InternalIP", "10.0.0.9"),
        ];
        let got = node_addresses_from_node_ip("10.0.0.1,fd00::1", &cloud).expect("match");
        assert_eq!(
            got,
            vec![a("InternalIP", "10.0.0.1"), a("InternalIP", "fd00::1")]
        );
    }

    #[test]
    fn provider_id_format() {
        assert_eq!(instance_provider_id("fake", "i-1"), "fake://i-1");
        assert_eq!(instance_provider_id("fake", "fake:///i-1"), "fake:///i-1");
    }
}
