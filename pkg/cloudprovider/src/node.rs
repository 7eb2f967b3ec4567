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
