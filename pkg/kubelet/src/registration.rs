//! Building and registering the kubelet's Node (upstream `initialNode`,
//! `tryRegisterWithAPIServer`, `updateDefaultLabels` and the NodeAddress status setter).
//!
//! The Node is built by a pure function from what the cloud said ([`CloudFacts`]) and the
//! kubelet's flags ([`NodeInput`]), so the in-tree and external layouts can be compared field
//! by field; [`register`] then creates it, or reconciles the default labels of an existing
//! one in a single patch, as the kubelet does on restart.

use std::collections::BTreeMap;
use std::net::IpAddr;

use hypercloud_cloudprovider::node::{facts_by_name, node_addresses_from_node_ip, LookupError};
use hypercloud_cloudprovider::wellknown::{
    ANNOTATION_PROVIDED_NODE_IP, LABEL_FAILURE_DOMAIN_REGION, LABEL_FAILURE_DOMAIN_ZONE,
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE,
    TAINT_UNINITIALIZED,
};
use hypercloud_cloudprovider::{Interface, Zone};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{Error, Result};

/// Label every kubelet sets to its hostname.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// Operating system label.
pub const LABEL_OS: &str = "kubernetes.io/os";
/// Architecture label.
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";

/// What the cloud said about this node (in-tree mode only).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CloudFacts {
    /// `spec.providerID`.
    pub provider_id: String,
    /// Addresses after `--node-ip` filtering.
    pub addresses: Vec<NodeAddress>,
    /// Zone and region, when the provider has zones.
    pub zone: Option<Zone>,
    /// Instance type, when known.
    pub instance_type: Option<String>,
    /// Whether the Node starts `NetworkUnavailable` until the route controller clears it:
    /// upstream's kubelet does this for the `gce` provider with routes only
    /// (`providerRequiresNetworkingConfiguration`), see [`requires_network_configuration`].
    pub has_routes: bool,
}

/// How the kubelet relates to the cloud.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// `--cloud-provider=external`: no cloud calls; taint the Node uninitialized.
    External,
    /// An in-tree provider answered these facts.
    InTree(CloudFacts),
    /// No cloud provider at all.
    NoCloud,
}

/// The kubelet flags that shape the Node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInput {
    /// The Node's name.
    pub node_name: String,
    /// The hostname (`--hostname-override` or the machine's), for the hostname label.
    pub hostname: String,
    /// `--provider-id`: wins over the cloud's.
    pub provider_id: Option<String>,
    /// `--node-ip` (comma-separated for dual stack).
    pub node_ip: Option<String>,
    /// `--node-labels`.
    pub labels: BTreeMap<String, String>,
    /// In-tree, external, or none.
    pub mode: Mode,
}

/// The hostname the kubelet uses: `--hostname-override` or the machine's, lower-cased.
pub fn hostname(override_: Option<&str>) -> String {
    let raw = match override_.map(str::trim).filter(|s| !s.is_empty()) {
        Some(h) => h.to_string(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "localhost".into()),
    };
    raw.trim().to_lowercase()
}

/// The node name: in-tree the provider's `CurrentNodeName(hostname)`, otherwise the hostname.
pub async fn node_name(cloud: Option<&dyn Interface>, hostname: &str) -> Result<String> {
    match cloud.and_then(|c| c.instances()) {
        Some(instances) => instances
            .current_node_name(hostname)
            .await
            .map_err(|source| Error::CurrentNodeName {
                hostname: hostname.into(),
                source,
            }),
        None => Ok(hostname.to_string()),
    }
}

/// Asks an in-tree provider everything the kubelet puts on its Node (Instances v1 and Zones,
/// as the in-tree kubelet does; InstancesV2 when v1 is missing).
pub async fn cloud_facts(
    cloud: &dyn Interface,
    node_name: &str,
    node_ip: Option<&str>,
) -> Result<CloudFacts> {
    let facts = facts_by_name(cloud, node_name).await.map_err(|e| match e {
        LookupError::NoInstances(p) => Error::NoInstances(p),
        LookupError::Call { what, node, source } => Error::CloudLookup { what, node, source },
    })?;
    let addresses = node_addresses_from_node_ip(node_ip.unwrap_or(""), &facts.addresses).map_err(
        |mismatch| Error::NodeIp {
            node: node_name.into(),
            mismatch,
        },
    )?;
    Ok(CloudFacts {
        provider_id: facts.provider_id,
        addresses: with_hostname_address(addresses, node_name),
        zone: facts.zone,
        instance_type: Some(facts.instance_type).filter(|t| !t.is_empty()),
        has_routes: requires_network_configuration(cloud),
    })
}

/// Upstream's kubelet starts a Node `NetworkUnavailable` only when its provider is `gce` and
/// has routes (`providerRequiresNetworkingConfiguration`); with any other provider the Node is
/// schedulable without a route, whether or not the cloud has routes (aws and openstack do).
pub fn requires_network_configuration(cloud: &dyn Interface) -> bool {
    cloud.provider_name() == "gce" && cloud.routes().is_some()
}

/// The addresses the kubelet reports itself when no in-tree provider gives them (upstream's
/// NodeAddress setter without a cloud): each `--node-ip` (else the hostname, when it is an IP)
/// as InternalIP, then the hostname as Hostname. Unlike the kubelet, no DNS look-up or
/// default-route guess when neither gives an IP: the Node then starts with its Hostname only.
/// With an external provider see [`external_addresses`].
/// The `--node-ip` addresses that count: upstream ignores an unspecified one (`0.0.0.0`, `::`).
fn node_ips(input: &NodeInput) -> Vec<IpAddr> {
    input
        .node_ip
        .iter()
        .flat_map(|s| s.split(','))
        .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        .filter(|ip| !ip.is_unspecified())
        .collect()
}

/// With `--cloud-provider=external` (upstream kubelet since 1.29, kubernetes#120720): with a
/// `--node-ip` the kubelet reports [`own_addresses`], which the cloud-controller-manager then
/// replaces by the cloud's while keeping the Hostname; without one it reports no address at
/// all and waits for the cloud-controller-manager, so such a Node gets no Hostname address
/// (the cloud's addresses have none) where its in-tree twin has one.
pub fn external_addresses(input: &NodeInput) -> Vec<NodeAddress> {
    if node_ips(input).is_empty() {
        Vec::new()
    } else {
        own_addresses(input)
    }
}

pub fn own_addresses(input: &NodeInput) -> Vec<NodeAddress> {
    let mut ips = node_ips(input);
    if ips.is_empty() {
        ips.extend(input.hostname.parse::<IpAddr>().ok());
    }
    let mut addresses: Vec<NodeAddress> = ips
        .into_iter()
        .map(|ip| NodeAddress {
            type_: "InternalIP".into(),
            address: ip.to_string(),
        })
        .collect();
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: input.hostname.clone(),
    });
    addresses
}

/// The kubelet reports a Hostname address when the cloud gave none.
fn with_hostname_address(mut addresses: Vec<NodeAddress>, hostname: &str) -> Vec<NodeAddress> {
    if !addresses.iter().any(|a| a.type_ == "Hostname") {
        addresses.push(NodeAddress {
            type_: "Hostname".into(),
            address: hostname.into(),
        });
    }
    addresses
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// The labels the kubelet owns on its Node (upstream `updateDefaultLabels` set).
pub fn default_labels(input: &NodeInput) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (LABEL_HOSTNAME.to_string(), input.hostname.clone()),
        (LABEL_OS.to_string(), std::env::consts::OS.to_string()),
        (LABEL_ARCH.to_string(), go_arch().to_string()),
        (LABEL_OS_BETA.to_string(), std::env::consts::OS.to_string()),
        (LABEL_ARCH_BETA.to_string(), go_arch().to_string()),
    ]);
    if let Mode::InTree(facts) = &input.mode {
        if let Some(t) = &facts.instance_type {
            labels.insert(LABEL_INSTANCE_TYPE.into(), t.clone());
            labels.insert(LABEL_INSTANCE_TYPE_BETA.into(), t.clone());
        }
        if let Some(z) = &facts.zone {
            if !z.failure_domain.is_empty() {
                labels.insert(LABEL_TOPOLOGY_ZONE.into(), z.failure_domain.clone());
                labels.insert(LABEL_FAILURE_DOMAIN_ZONE.into(), z.failure_domain.clone());
            }
            if !z.region.is_empty() {
                labels.insert(LABEL_TOPOLOGY_REGION.into(), z.region.clone());
                labels.insert(LABEL_FAILURE_DOMAIN_REGION.into(), z.region.clone());
            }
        }
    }
    labels
}

/// The Node the kubelet registers (upstream `initialNode`).
pub fn initial_node(input: &NodeInput) -> Node {
    let mut labels = input.labels.clone();
    labels.extend(default_labels(input));
    let mut annotations = BTreeMap::new();
    let mut taints = Vec::new();
    let mut provider_id = None;
    let addresses: Vec<NodeAddress>;
    let mut conditions = None;
    match &input.mode {
        Mode::External => {
            taints.push(Taint {
                key: TAINT_UNINITIALIZED.into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            });
            if let Some(ip) = input.node_ip.as_deref().filter(|s| !s.is_empty()) {
                annotations.insert(ANNOTATION_PROVIDED_NODE_IP.to_string(), ip.to_string());
            }
            addresses = external_addresses(input);
        }
        Mode::InTree(facts) => {
            provider_id = Some(facts.provider_id.clone()).filter(|p| !p.is_empty());
            addresses = facts.addresses.clone();
            if facts.has_routes {
                conditions = Some(vec![NodeCondition {
                    type_: "NetworkUnavailable".into(),
                    status: "True".into(),
                    reason: Some("NoRouteCreated".into()),
                    message: Some("Node created without a route".into()),
                    last_transition_time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                    last_heartbeat_time: None,
                }]);
            }
        }
        Mode::NoCloud => addresses = own_addresses(input),
    }
    if let Some(id) = input.provider_id.as_deref().filter(|s| !s.is_empty()) {
        provider_id = Some(id.to_string());
    }
    Node {
        metadata: ObjectMeta {
            name: Some(input.node_name.clone()),
            labels: Some(labels),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id,
            taints: Some(taints).filter(|t| !t.is_empty()),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(addresses).filter(|a| !a.is_empty()),
            conditions,
            ..Default::default()
        }),
    }
}

/// What [`register`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registered {
    /// The Node was created.
    Created,
    /// The Node existed; its default labels were updated in one patch.
    UpdatedLabels,
    /// The Node existed and needed nothing.
    Unchanged,
}

/// Creates the Node, or, when it exists, brings the kubelet-owned labels up to date (as the
/// kubelet does after a restart; taints and provider ID of an existing Node are left alone).
pub async fn register(client: kube::Client, node: &Node, input: &NodeInput) -> Result<Registered> {
    let api: Api<Node> = Api::all(client);
    let name = input.node_name.clone();
    match api.create(&PostParams::default(), node).await {
        Ok(_) => return Ok(Registered::Created),
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(source) => return Err(Error::CreateNode { node: name, source }),
    }
    let existing = api.get(&name).await.map_err(|source| Error::GetNode {
        node: name.clone(),
        source,
    })?;
    let current = existing.metadata.labels.unwrap_or_default();
    let wanted = default_labels(input);
    let changed: BTreeMap<&String, &String> = wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(v))
        .collect();
    if changed.is_empty() {
        return Ok(Registered::Unchanged);
    }
    let patch = json!({
        "metadata": {
            "labels": changed,
            "resourceVersion": existing.metadata.resource_version,
        }
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::PatchNode { node: name, source })?;
    Ok(Registered::UpdatedLabels)
}

/// Sets the Node's addresses when they differ from `addresses`; returns whether it wrote.
pub async fn sync_addresses(
    client: kube::Client,
    node_name: &str,
    addresses: &[NodeAddress],
) -> Result<bool> {
    let api: Api<Node> = Api::all(client);
    let current = api
        .get_status(node_name)
        .await
        .map_err(|source| Error::GetNode {
            node: node_name.into(),
            source,
        })?;
    let have = current.status.and_then(|s| s.addresses).unwrap_or_default();
    if have == addresses {
        return Ok(false);
    }
    let patch = json!({ "status": { "addresses": addresses } });
    api.patch_status(node_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::PatchNodeStatus {
            node: node_name.into(),
            source,
        })?;
    Ok(true)
}

/// Parses `--node-labels` (`key=value,key2=value2`).
pub fn parse_labels(s: &str) -> std::result::Result<BTreeMap<String, String>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("invalid label {kv:?}: want key=value")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypercloud_cloudprovider::fake::FakeCloud;

    const CLOUD: &str = r#"
region: RegionOne
zone: nova
instances:
  - name: node-1
    id: uuid-1
    instanceType: m1.small
    zone: az-1
    addresses:
      - {type: InternalIP, address: 10.0.0.11}
      - {type: InternalIP, address: 10.0.0.12}
      - {type: ExternalIP, address: 203.0.113.11}
"#;

    fn input(mode: Mode) -> NodeInput {
        NodeInput {
            node_name: "node-1".into(),
            hostname: "node-1".into(),
            provider_id: None,
            node_ip: None,
            labels: BTreeMap::from([("team".to_string(), "blue".to_string())]),
            mode,
        }
    }

    #[tokio::test]
    async fn in_tree_facts_come_from_instances_and_zones() {
        let cloud = FakeCloud::from_config_bytes(CLOUD.as_bytes(), "t").expect("config");
        assert_eq!(
            node_name(Some(&cloud), "node-1").await.expect("name"),
            "node-1"
        );
        let facts = cloud_facts(&cloud, "node-1", Some("10.0.0.12"))
            .await
            .expect("facts");
        assert_eq!(facts.provider_id, "fake:///uuid-1");
        assert_eq!(facts.instance_type.as_deref(), Some("m1.small"));
        assert_eq!(
            facts.zone,
            Some(Zone {
                failure_domain: "az-1".into(),
                region: "RegionOne".into()
            })
        );
        let addrs: Vec<_> = facts
            .addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect();
        assert_eq!(
            addrs,
            vec![
                ("InternalIP", "10.0.0.12"),
                ("ExternalIP", "203.0.113.11"),
                ("Hostname", "node-1")
            ]
        );
        // The fake provider has routes, but only gce's start a Node NetworkUnavailable.
        assert!(!facts.has_routes);
        let calls: Vec<_> = cloud.calls().iter().map(|c| c.method).collect();
        assert_eq!(
            calls,
            vec![
                "current_node_name",
                "instance_id",
                "node_addresses",
                "instance_type",
                "get_zone_by_node_name"
            ]
        );
    }

    /// A provider under another name, with or without the fake provider's routes.
    struct Named(&'static str, FakeCloud, bool);
    impl Interface for Named {
        fn provider_name(&self) -> &str {
            self.0
        }
        fn routes(&self) -> Option<&dyn hypercloud_cloudprovider::Routes> {
            self.1.routes().filter(|_| self.2)
        }
    }

    #[test]
    fn only_gce_with_routes_starts_nodes_network_unavailable() {
        let fake = || FakeCloud::from_config_bytes(CLOUD.as_bytes(), "t").expect("config");
        assert!(requires_network_configuration(&Named("gce", fake(), true)));
        assert!(!requires_network_configuration(&Named(
            "gce",
            fake(),
            false
        )));
        for other in ["aws", "openstack", "local", "vsphere", "fake"] {
            assert!(
                !requires_network_configuration(&Named(other, fake(), true)),
                "{other}"
            );
        }
    }

    #[tokio::test]
    async fn in_tree_errors_name_node_and_lookup() {
        let cloud = FakeCloud::from_config_bytes(CLOUD.as_bytes(), "t").expect("config");
        let err = cloud_facts(&cloud, "ghost", None)
            .await
            .expect_err("no instance");
        assert!(
            err.to_string().contains("instance ID of node ghost"),
            "{err}"
        );
        let err = cloud_facts(&cloud, "node-1", Some("10.9.9.9"))
            .await
            .expect_err("ip");
        assert!(err.to_string().contains("matches ip: 10.9.9.9"), "{err}");
        let bare = FakeCloud::from_config_bytes(b"disabled: [instances, instances-v2]", "t")
            .expect("config");
        assert!(matches!(
            cloud_facts(&bare, "node-1", None).await,
            Err(Error::NoInstances(_))
        ));
    }

    #[tokio::test]
    async fn instances_v2_only_provider_still_works() {
        let cloud = FakeCloud::from_config_bytes(
            format!("{CLOUD}\ndisabled: [instances, zones, routes]").as_bytes(),
            "t",
        )
        .expect("config");
        let facts = cloud_facts(&cloud, "node-1", None).await.expect("facts");
        assert_eq!(facts.provider_id, "fake:///uuid-1");
        assert_eq!(facts.zone.map(|z| z.failure_domain), Some("az-1".into()));
        assert!(!facts.has_routes);
    }

    #[test]
    fn external_node_is_tainted_and_annotated_without_cloud_fields() {
        let mut i = input(Mode::External);
        i.node_ip = Some("10.0.0.12".into());
        i.provider_id = Some("fake:///uuid-1".into());
        let node = initial_node(&i);
        let spec = node.spec.expect("spec");
        let taints = spec.taints.expect("taints");
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key, TAINT_UNINITIALIZED);
        assert_eq!(taints[0].value.as_deref(), Some("true"));
        assert_eq!(taints[0].effect, "NoSchedule");
        assert_eq!(spec.provider_id.as_deref(), Some("fake:///uuid-1"));
        let ann = node.metadata.annotations.expect("annotations");
        assert_eq!(
            ann.get(ANNOTATION_PROVIDED_NODE_IP).map(String::as_str),
            Some("10.0.0.12")
        );
        let labels = node.metadata.labels.expect("labels");
        assert!(!labels.contains_key(LABEL_TOPOLOGY_ZONE));
        assert_eq!(labels.get("team").map(String::as_str), Some("blue"));
        assert_eq!(
            labels.get(LABEL_HOSTNAME).map(String::as_str),
            Some("node-1")
        );
        // Its own addresses until the cloud-controller-manager sets the cloud's.
        let addrs: Vec<_> = node
            .status
            .and_then(|s| s.addresses)
            .expect("addresses")
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            addrs,
            vec![
                ("InternalIP".to_string(), "10.0.0.12".to_string()),
                ("Hostname".to_string(), "node-1".to_string())
            ]
        );
    }

    #[test]
    fn own_addresses_are_the_node_ips_then_the_hostname() {
        let pairs = |i: &NodeInput| -> Vec<(String, String)> {
            own_addresses(i)
                .into_iter()
                .map(|a| (a.type_, a.address))
                .collect()
        };
        let p = |t: &str, a: &str| (t.to_string(), a.to_string());
        let mut i = input(Mode::External);
        assert_eq!(pairs(&i), vec![p("Hostname", "node-1")], "no IP known");
        // External without --node-ip: no address at all, the cloud-controller-manager sets them.
        assert!(external_addresses(&i).is_empty());
        assert!(initial_node(&i).status.and_then(|s| s.addresses).is_none());
        i.node_ip = Some("10.0.0.12, fd00::12".into());
        assert_eq!(
            pairs(&i),
            vec![
                p("InternalIP", "10.0.0.12"),
                p("InternalIP", "fd00::12"),
                p("Hostname", "node-1")
            ]
        );
        // `0.0.0.0` means "detect it" to the kubelet; a hostname that is an IP is used.
        i.node_ip = Some("0.0.0.0".into());
        i.hostname = "192.0.2.7".into();
        assert_eq!(
            pairs(&i),
            vec![p("InternalIP", "192.0.2.7"), p("Hostname", "192.0.2.7")]
        );
        let no_cloud = initial_node(&input(Mode::NoCloud));
        assert_eq!(
            no_cloud.status.and_then(|s| s.addresses).map(|a| a.len()),
            Some(1)
        );
    }

    #[test]
    fn in_tree_node_has_cloud_labels_addresses_and_network_unavailable() {
        let facts = CloudFacts {
            provider_id: "fake://uuid-1".into(),
            addresses: vec![NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.11".into(),
            }],
            zone: Some(Zone {
                failure_domain: "az-1".into(),
                region: "r1".into(),
            }),
            instance_type: Some("m1.small".into()),
            has_routes: true,
        };
        let node = initial_node(&input(Mode::InTree(facts)));
        let labels = node.metadata.labels.clone().expect("labels");
        for (k, v) in [
            (LABEL_TOPOLOGY_ZONE, "az-1"),
            (LABEL_FAILURE_DOMAIN_ZONE, "az-1"),
            (LABEL_TOPOLOGY_REGION, "r1"),
            (LABEL_FAILURE_DOMAIN_REGION, "r1"),
            (LABEL_INSTANCE_TYPE, "m1.small"),
            (LABEL_INSTANCE_TYPE_BETA, "m1.small"),
        ] {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
        }
        let spec = node.spec.expect("spec");
        assert_eq!(spec.provider_id.as_deref(), Some("fake://uuid-1"));
        assert!(spec.taints.is_none());
        let status = node.status.expect("status");
        assert_eq!(status.addresses.expect("addresses")[0].address, "10.0.0.11");
        let cond = &status.conditions.expect("conditions")[0];
        assert_eq!(
            (cond.type_.as_str(), cond.status.as_str()),
            ("NetworkUnavailable", "True")
        );
        assert_eq!(cond.reason.as_deref(), Some("NoRouteCreated"));
    }

    #[test]
    fn provider_id_flag_wins_and_labels_parse() {
        let mut i = input(Mode::InTree(CloudFacts {
            provider_id: "fake://a".into(),
            ..Default::default()
        }));
        i.provider_id = Some("fake://override".into());
        assert_eq!(
            initial_node(&i).spec.and_then(|s| s.provider_id).as_deref(),
            Some("fake://override")
        );
        assert_eq!(
            parse_labels("a=1, b=two,").expect("ok"),
            BTreeMap::from([("a".into(), "1".into()), ("b".into(), "two".into())])
        );
        assert!(parse_labels("novalue").is_err());
        assert!(parse_labels("=v").is_err());
    }

    #[test]
    fn hostname_override_is_lowercased() {
        assert_eq!(hostname(Some(" Node-A ")), "node-a");
        assert!(!hostname(None).is_empty());
    }
}
