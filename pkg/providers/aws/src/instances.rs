//! EC2 instances as Kubernetes nodes: Instances (v1), InstancesV2 and Zones.
//!
//! The node name is the instance's private DNS name, the provider ID `aws:///<zone>/<id>`, as
//! upstream. Look-ups are answered from one paginated `DescribeInstances` of the cluster's
//! instances (filtered by the cluster tag), kept for `[Hypercloud] instance-cache-ttl` (default
//! 5s), so initialising many nodes costs one listing per TTL instead of calls per node;
//! concurrent callers share one in-flight listing. A node missing from a cached listing is asked
//! for once more by name or ID (it may be newer than the listing); absence from a listing made
//! for this very call is final. Upstream equivalent: legacy `aws.go` (`NodeAddresses`,
//! `InstanceExistsByProviderID`, `getInstancesByNodeNames`, `extractNodeAddresses`) and
//! cloud-provider-aws `instances.go`, which ask per node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use hypercloud_cloudprovider::pager::Pager;
use hypercloud_cloudprovider::{
    Error, InstanceMetadata, Instances, InstancesV2, Result, Zone, Zones,
};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::config::IpFamily;
use crate::error::{cloud, code, paginate, sdk};
use crate::session::ClusterTag;
use crate::{Aws, CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG};

/// The provider ID scheme.
pub const PROVIDER_ID_PREFIX: &str = "aws://";

/// `aws:///<zone>/<instance-id>` (also `aws:////<id>`, `aws://<zone>/<id>` and a bare
/// `i-...`, as upstream's `KubernetesInstanceID.MapToAWSInstanceID`) → the instance ID.
pub fn parse_provider_id(provider_id: &str) -> Result<&str> {
    let bad = || {
        cloud(
            "parse provider ID",
            format!("{provider_id:?} is not an AWS provider ID (aws:///<zone>/<instance-id>)"),
        )
    };
    let path = match provider_id.strip_prefix(PROVIDER_ID_PREFIX) {
        Some(rest) => rest,
        None if !provider_id.contains("://") => provider_id,
        None => return Err(bad()),
    };
    let id = path.trim_matches('/').rsplit('/').next().ok_or_else(bad)?;
    if !id.starts_with("i-") || id.len() < 3 || id.contains(char::is_whitespace) {
        return Err(bad());
    }
    Ok(id)
}

/// An instance as the provider needs it.
/// One DescribeInstances listing of the cluster, indexed by private DNS name and ID.
pub(crate) type InstanceListing = hypercloud_cloudprovider::listing::Listing<InstanceInfo>;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct InstanceInfo {
    pub id: String,
    pub private_dns_name: String,
    pub state: String,
    pub instance_type: String,
    pub zone: String,
    pub addresses: Vec<NodeAddress>,
    pub vpc_id: String,
    pub subnet_id: String,
    pub security_groups: Vec<(String, String)>,
    pub tags: BTreeMap<String, String>,
    pub source_dest_check: bool,
}

impl InstanceInfo {
    pub fn terminated(&self) -> bool {
        self.state == InstanceStateName::Terminated.as_str()
    }
}

/// One listing of the cluster's instances, shared until it is older than the TTL.
#[derive(Default)]
pub(crate) struct InstanceCache {
    snapshot: tokio::sync::Mutex<Option<(Instant, Arc<InstanceListing>)>>,
}

impl InstanceCache {
    pub async fn invalidate(&self) {
        *self.snapshot.lock().await = None;
    }
}

fn push(out: &mut Vec<NodeAddress>, kind: &str, addr: Option<&str>) {
    let Some(addr) = addr.filter(|a| !a.is_empty()) else {
        return;
    };
    if out.iter().any(|a| a.type_ == kind && a.address == addr) {
        return;
    }
    out.push(NodeAddress {
        type_: kind.into(),
        address: addr.into(),
    });
}

/// Upstream `extractNodeAddresses`: per family in `NodeIPFamilies`, the private addresses of
/// the in-use network interfaces (by device index, primary first) as InternalIP, the public
/// IPv4 as ExternalIP (ipv4) or the interfaces' IPv6 addresses as InternalIP (ipv6); then the
/// private DNS name as InternalDNS and Hostname, the public DNS name as ExternalDNS.
pub(crate) fn node_addresses(i: &Instance, families: &[IpFamily]) -> Vec<NodeAddress> {
    let mut out = Vec::new();
    let mut enis: Vec<_> = i
        .network_interfaces()
        .iter()
        .filter(|n| n.status().map(|s| s.as_str()) == Some("in-use"))
        .collect();
    enis.sort_by_key(|n| {
        n.attachment()
            .and_then(|a| a.device_index())
            .unwrap_or(i32::MAX)
    });
    for family in families {
        match family {
            IpFamily::Ipv4 => {
                if enis.is_empty() {
                    push(&mut out, "InternalIP", i.private_ip_address());
                }
                for n in &enis {
                    let mut ips: Vec<_> = n.private_ip_addresses().iter().collect();
                    ips.sort_by_key(|p| !p.primary().unwrap_or(false));
                    for p in ips {
                        push(&mut out, "InternalIP", p.private_ip_address());
                    }
                }
                push(&mut out, "ExternalIP", i.public_ip_address());
            }
            IpFamily::Ipv6 => {
                for n in &enis {
                    for a in n.ipv6_addresses() {
                        push(&mut out, "InternalIP", a.ipv6_address());
                    }
                }
                push(&mut out, "InternalIP", i.ipv6_address());
            }
        }
    }
    push(&mut out, "InternalDNS", i.private_dns_name());
    push(&mut out, "Hostname", i.private_dns_name());
    push(&mut out, "ExternalDNS", i.public_dns_name());
    out
}

impl Aws {
    fn to_info(&self, i: &Instance) -> Option<InstanceInfo> {
        Some(InstanceInfo {
            id: i.instance_id()?.to_owned(),
            private_dns_name: i.private_dns_name().unwrap_or_default().to_owned(),
            state: i
                .state()
                .and_then(|s| s.name())
                .map(|n| n.as_str().to_owned())
                .unwrap_or_default(),
            instance_type: i
                .instance_type()
                .map(|t| t.as_str().to_owned())
                .unwrap_or_default(),
            zone: i
                .placement()
                .and_then(|p| p.availability_zone())
                .unwrap_or_default()
                .to_owned(),
            addresses: node_addresses(i, &self.config.global.node_ip_families),
            vpc_id: i.vpc_id().unwrap_or_default().to_owned(),
            subnet_id: i.subnet_id().unwrap_or_default().to_owned(),
            security_groups: i
                .security_groups()
                .iter()
                .map(|g| {
                    (
                        g.group_id().unwrap_or_default().to_owned(),
                        g.group_name().unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
            tags: i
                .tags()
                .iter()
                .filter_map(|t| {
                    Some((
                        t.key()?.to_owned(),
                        t.value().unwrap_or_default().to_owned(),
                    ))
                })
                .collect(),
            source_dest_check: i.source_dest_check().unwrap_or(true),
        })
    }

    /// The cluster filter upstream adds to every listing.
    pub(crate) fn cluster_filters(cluster: Option<&ClusterTag>) -> Vec<Filter> {
        match cluster {
            Some(ClusterTag { id, legacy: true }) => vec![Filter::builder()
                .name(format!("tag:{LEGACY_CLUSTER_TAG}"))
                .values(id)
                .build()],
            Some(ClusterTag { id, legacy: false }) => vec![Filter::builder()
                .name("tag-key")
                .values(format!("{CLUSTER_TAG_PREFIX}{id}"))
                .build()],
            None => Vec::new(),
        }
    }

    /// `DescribeInstances` with `filters` (and the cluster filter), every page.
    pub(crate) async fn describe_instances(
        &self,
        mut filters: Vec<Filter>,
        ids: &[String],
    ) -> Result<Vec<InstanceInfo>> {
        let s = self.session().await?;
        filters.extend(Self::cluster_filters(s.cluster.as_ref()));
        let mut req = s
            .ec2
            .describe_instances()
            .set_filters(Some(filters).filter(|f| !f.is_empty()));
        if ids.is_empty() {
            req = req.max_results(1000);
        } else {
            req = req.set_instance_ids(Some(ids.to_vec()));
        }
        let mut pages = req.into_paginator().send();
        // The SDK's paginator stops quietly on a token repeated at once, not on one that
        // alternates or comes back later, nor after any number of pages.
        let mut pager = Pager::new("ec2", "DescribeInstances");
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(p) => p,
                // Asking for an ID that EC2 does not know.
                Err(e) => {
                    let e = sdk("DescribeInstances", e);
                    if code(&e).is_some_and(|c| c.starts_with("InvalidInstanceID")) {
                        return Ok(Vec::new());
                    }
                    return Err(e);
                }
            };
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                if let Some(info) = self.to_info(i) {
                    out.push(info);
                }
            }
            if pager.next(page.next_token()).map_err(paginate)?.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// Every instance of the cluster, and whether this call listed them just now.
    async fn listing(&self) -> Result<(Arc<InstanceListing>, bool)> {
        let mut slot = self.instances.snapshot.lock().await;
        if let Some((at, list)) = slot.as_ref() {
            if at.elapsed() < self.config.tuning.instance_cache_ttl {
                return Ok((list.clone(), false));
            }
        }
        let list = Arc::new(InstanceListing::new(
            self.describe_instances(Vec::new(), &[]).await?,
            |i| &i.private_dns_name,
            |i| &i.id,
        ));
        tracing::debug!(instances = list.len(), "listed EC2 instances");
        *slot = Some((Instant::now(), list.clone()));
        Ok((list, true))
    }

    /// The cluster's instances (from the cache when fresh).
    pub(crate) async fn all_instances(&self) -> Result<Arc<InstanceListing>> {
        Ok(self.listing().await?.0)
    }

    /// The live (not terminated) instance whose private DNS name is `name`.
    pub(crate) async fn instance_by_node_name(&self, name: &str) -> Result<InstanceInfo> {
        let pick = |found: Vec<&InstanceInfo>| -> Result<Option<InstanceInfo>> {
            let found: Vec<&InstanceInfo> = found.into_iter().filter(|i| !i.terminated()).collect();
            match found.as_slice() {
                [] => Ok(None),
                [one] => Ok(Some((*one).clone())),
                many => Err(cloud(
                    "DescribeInstances",
                    format!("{} instances have private DNS name {name:?}", many.len()),
                )),
            }
        };
        let (list, fresh) = self.listing().await?;
        if let Some(i) = pick(list.named(name))? {
            return Ok(i);
        }
        if fresh {
            return Err(Error::InstanceNotFound);
        }
        let filter = Filter::builder()
            .name("private-dns-name")
            .values(name)
            .build();
        let list = self.describe_instances(vec![filter], &[]).await?;
        pick(list.iter().filter(|i| i.private_dns_name == name).collect())?
            .ok_or(Error::InstanceNotFound)
    }

    /// The instance with this provider ID (terminated ones included: callers decide).
    pub(crate) async fn instance_by_provider_id(&self, provider_id: &str) -> Result<InstanceInfo> {
        let id = parse_provider_id(provider_id)?;
        let (list, fresh) = self.listing().await?;
        if let Some(i) = list.by_id(id) {
            return Ok(i.clone());
        }
        if fresh {
            return Err(Error::InstanceNotFound);
        }
        self.describe_instances(Vec::new(), &[id.to_owned()])
            .await?
            .into_iter()
            .find(|i| i.id == id)
            .ok_or(Error::InstanceNotFound)
    }

    async fn instance_for_node(&self, node: &Node) -> Result<InstanceInfo> {
        match node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
            Some(id) if !id.is_empty() => self.instance_by_provider_id(id).await,
            _ => {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                self.instance_by_node_name(name).await
            }
        }
    }

    fn provider_id_of(i: &InstanceInfo) -> String {
        format!("{PROVIDER_ID_PREFIX}/{}/{}", i.zone, i.id)
    }

    async fn zone_of(&self, i: &InstanceInfo) -> Result<Zone> {
        Ok(Zone {
            failure_domain: i.zone.clone(),
            region: self.session().await?.region.clone(),
        })
    }
}

fn exists(r: Result<InstanceInfo>) -> Result<bool> {
    match r {
        Ok(i) if i.terminated() => Ok(false),
        Ok(_) => Ok(true),
        Err(Error::InstanceNotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

fn shutdown(r: Result<InstanceInfo>) -> Result<bool> {
    Ok(r?.state == InstanceStateName::Stopped.as_str())
}

#[async_trait]
impl Instances for Aws {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        Ok(self.instance_by_node_name(name).await?.addresses)
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        Ok(self.instance_by_provider_id(provider_id).await?.addresses)
    }

    /// As upstream: `/<zone>/<instance-id>`, so that `aws://` + it is the provider ID.
    async fn instance_id(&self, name: &str) -> Result<String> {
        let i = self.instance_by_node_name(name).await?;
        Ok(format!("/{}/{}", i.zone, i.id))
    }

    async fn instance_type(&self, name: &str) -> Result<String> {
        Ok(self.instance_by_node_name(name).await?.instance_type)
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        Ok(self
            .instance_by_provider_id(provider_id)
            .await?
            .instance_type)
    }

    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> Result<()> {
        Err(Error::NotImplemented)
    }

    /// As the legacy provider: this instance's private DNS name (instance ID from IMDS, then
    /// EC2), not the hostname.
    async fn current_node_name(&self, _hostname: &str) -> Result<String> {
        let me = self.local_identity().await?;
        let i = self
            .describe_instances(Vec::new(), std::slice::from_ref(&me.instance_id))
            .await?
            .into_iter()
            .find(|i| i.id == me.instance_id)
            .ok_or(Error::InstanceNotFound)?;
        if i.private_dns_name.is_empty() {
            return Err(cloud(
                "DescribeInstances",
                format!("instance {} has no private DNS name", i.id),
            ));
        }
        Ok(i.private_dns_name)
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        exists(self.instance_by_provider_id(provider_id).await)
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        shutdown(self.instance_by_provider_id(provider_id).await)
    }
}

#[async_trait]
impl InstancesV2 for Aws {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        exists(self.instance_for_node(node).await)
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        shutdown(self.instance_for_node(node).await)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata> {
        let i = self.instance_for_node(node).await?;
        if i.terminated() {
            return Err(Error::InstanceNotFound);
        }
        let zone = self.zone_of(&i).await?;
        Ok(InstanceMetadata {
            provider_id: Self::provider_id_of(&i),
            instance_type: i.instance_type,
            node_addresses: i.addresses,
            zone: zone.failure_domain,
            region: zone.region,
            additional_labels: BTreeMap::new(),
        })
    }
}

#[async_trait]
impl Zones for Aws {
    /// The zone of this machine, from instance metadata.
    async fn get_zone(&self) -> Result<Zone> {
        let me = self.local_identity().await?;
        Ok(Zone {
            failure_domain: me.availability_zone,
            region: self.session().await?.region.clone(),
        })
    }

    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        let i = self.instance_by_provider_id(provider_id).await?;
        self.zone_of(&i).await
    }

    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone> {
        let i = self.instance_by_node_name(name).await?;
        self.zone_of(&i).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{
        InstanceNetworkInterface, InstanceNetworkInterfaceAttachment, InstancePrivateIpAddress,
        NetworkInterfaceStatus,
    };

    #[test]
    fn provider_ids_as_upstream() {
        assert_eq!(
            parse_provider_id("aws:///us-east-1a/i-0abc").unwrap(),
            "i-0abc"
        );
        assert_eq!(parse_provider_id("aws:////i-0abc").unwrap(), "i-0abc");
        assert_eq!(
            parse_provider_id("aws://us-east-1a/i-0abc").unwrap(),
            "i-0abc"
        );
        assert_eq!(parse_provider_id("i-0abc").unwrap(), "i-0abc");
        for bad in [
            "openstack:///i-1",
            "aws:///us-east-1a/",
            "aws:///zone/fargate-x",
            "",
            "i-",
        ] {
            assert!(parse_provider_id(bad).is_err(), "{bad}");
        }
    }

    fn eni(
        index: i32,
        ips: &[(&str, bool)],
        status: NetworkInterfaceStatus,
    ) -> InstanceNetworkInterface {
        let mut b = InstanceNetworkInterface::builder()
            .status(status)
            .attachment(
                InstanceNetworkInterfaceAttachment::builder()
                    .device_index(index)
                    .build(),
            );
        for (ip, primary) in ips {
            b = b.private_ip_addresses(
                InstancePrivateIpAddress::builder()
                    .private_ip_address(*ip)
                    .primary(*primary)
                    .build(),
            );
        }
        b.build()
    }

    #[test]
    fn addresses_as_upstream() {
        let i = Instance::builder()
            .private_ip_address("10.0.0.9")
            .public_ip_address("54.1.2.3")
            .private_dns_name("ip-10-0-0-5.ec2.internal")
            .public_dns_name("ec2-54-1-2-3.compute-1.amazonaws.com")
            .network_interfaces(eni(1, &[("10.0.1.7", true)], NetworkInterfaceStatus::InUse))
            .network_interfaces(eni(
                0,
                &[("10.0.0.6", false), ("10.0.0.5", true)],
                NetworkInterfaceStatus::InUse,
            ))
            .network_interfaces(eni(
                2,
                &[("10.0.2.2", true)],
                NetworkInterfaceStatus::Detaching,
            ))
            .build();
        let got: Vec<(String, String)> = node_addresses(&i, &[IpFamily::Ipv4])
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        let want: Vec<(String, String)> = [
            ("InternalIP", "10.0.0.5"),
            ("InternalIP", "10.0.0.6"),
            ("InternalIP", "10.0.1.7"),
            ("ExternalIP", "54.1.2.3"),
            ("InternalDNS", "ip-10-0-0-5.ec2.internal"),
            ("Hostname", "ip-10-0-0-5.ec2.internal"),
            ("ExternalDNS", "ec2-54-1-2-3.compute-1.amazonaws.com"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
        // Without interfaces: the instance's private IP.
        let bare = Instance::builder().private_ip_address("10.0.0.9").build();
        assert_eq!(
            node_addresses(&bare, &[IpFamily::Ipv4])[0].address,
            "10.0.0.9"
        );
    }
}
