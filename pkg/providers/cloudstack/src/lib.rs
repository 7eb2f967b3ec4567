//! The `cloudstack` cloud provider: Kubernetes on Apache CloudStack, as the in-tree provider of
//! Kubernetes v1.4 to v1.13 served it (`pkg/cloudprovider/providers/cloudstack`, removed for
//! v1.14 by kubernetes/kubernetes#72178 and continued out of tree as
//! apache/cloudstack-kubernetes-provider, whose firewall rules this provider also makes).
//!
//! - **Instances** from the API (`listVirtualMachines` of the project): a Node is the VM of its
//!   name; `NodeAddresses` the first NIC's IP (`InternalIP`), the VM's host name (`Hostname`)
//!   and its static-NAT public IP (`ExternalIP`) when it has one; `InstanceID` the VM ID
//!   (provider ID `cloudstack://<id>`); `InstanceType` the service offering; a `Stopped` VM is
//!   shut down. Without API keys, from the virtual router's metadata alone, as upstream's
//!   kubelet did (`/latest/meta-data/...`).
//! - **Zones**: `[Global] zone`, else the VM's zone (as failure domain and region, as upstream).
//! - **LoadBalancer**: one public IP per Service (`associateIpAddress` in the Nodes' network,
//!   or `spec.loadBalancerIP` when the account has it), one load-balancer rule per port
//!   (`<name>-<protocol>-<port>`, public port to node port, `roundrobin` or, with ClientIP
//!   affinity, `source`), the Nodes' VMs assigned to each rule, and a firewall rule per port
//!   opening it to `spec.loadBalancerSourceRanges` (default `0.0.0.0/0`), as the external
//!   provider does; deletion removes them and releases the IP it associated.
//! - No routes, clusters or volumes (upstream had no CloudStack volume plugin).

pub mod client;
pub mod config;
pub mod metadata;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use hypercloud_cloudprovider::lb_settings::{self, LbSetting, Setting};
use hypercloud_cloudprovider::lb_webhook::{admit_service_lb, SERVICE_LB_ANNOTATIONS};
use hypercloud_cloudprovider::{
    Error, Instances, Interface, LoadBalancer, Registry, Result, WebhookSpec, Webhooks, Zone, Zones,
};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::DynamicObject;
use serde::Deserialize;
use serde_json::Value;

use client::Client;
pub use config::Config;
use metadata::Metadata;

/// The name given to `--cloud-provider`.
pub const PROVIDER_NAME: &str = "cloudstack";
/// Provider IDs are `cloudstack://<vm id>`.
pub const PROVIDER_ID_PREFIX: &str = "cloudstack://";
/// The legacy provider's annotation: PROXY protocol on TCP rules (`tcp-proxy`).
pub const ANNOTATION_PROXY_PROTOCOL: &str =
    "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";
/// Opened when a Service names no source ranges, as the external provider.
const DEFAULT_ALLOWED_CIDR: &str = "0.0.0.0/0";

/// What the provider does with each load-balancer setting.
pub const SERVICE_SETTINGS: &[LbSetting] = &[
    LbSetting::implemented(Setting::Annotation(ANNOTATION_PROXY_PROTOCOL), "present (any value, as upstream): TCP rules are `tcp-proxy` (CloudStack 4.6+)"),
    LbSetting::implemented(Setting::LoadBalancerClass, "the service controller leaves the Service to the class's controller (upstream)"),
    LbSetting::refused(Setting::ExternalTrafficPolicyLocal, "a CloudStack load-balancer rule has no health check of the Service's health-check node port: every Node would get traffic"),
    LbSetting::implemented(Setting::SessionAffinityClientIp, "the rules' algorithm `source`"),
    LbSetting::refused(Setting::IpFamilyIpv6, "CloudStack's public IPs for load-balancer rules are IPv4"),
    LbSetting::refused(Setting::NoNodePorts, "the rules forward to the Nodes' node ports"),
    LbSetting::implemented(Setting::LoadBalancerIp, "a public IP the account already has (`listPublicIpAddresses`), kept when the Service goes"),
];

/// Registers the provider under [`PROVIDER_NAME`].
pub fn register(registry: &mut Registry) {
    registry.register(
        PROVIDER_NAME,
        "Apache CloudStack (the signed query API: VMs, load-balancer and firewall rules on public IPs; or the virtual router's metadata); configured by the legacy [Global] api-url/api-key/secret-key --cloud-config",
        |config| Ok(Arc::new(CloudStack::new(Config::from_cloud_config(config)?)?) as Arc<dyn Interface>),
    );
}

/// A VM as `listVirtualMachines` shows it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Vm {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub zonename: String,
    #[serde(default)]
    pub serviceofferingname: String,
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub publicip: String,
    #[serde(default)]
    pub nic: Vec<Nic>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Nic {
    #[serde(default)]
    pub ipaddress: String,
    #[serde(default)]
    pub networkid: String,
}

/// A load-balancer rule as `listLoadBalancerRules` shows it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Rule {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub publicip: String,
    #[serde(default)]
    pub publicipid: String,
    #[serde(default)]
    pub publicport: String,
    #[serde(default)]
    pub privateport: String,
    #[serde(default)]
    pub algorithm: String,
    #[serde(default)]
    pub protocol: String,
}

/// A firewall rule as `listFirewallRules` shows it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
struct FirewallRule {
    id: String,
    #[serde(default)]
    protocol: String,
    #[serde(default)]
    startport: Option<Value>,
    #[serde(default)]
    endport: Option<Value>,
    #[serde(default)]
    cidrlist: String,
}

fn port_of(v: &Option<Value>) -> Option<i64> {
    match v {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
}

/// The items of a list answer (`{"count": N, "<entity>": [...]}`; `{}` when none).
fn items<T: for<'de> Deserialize<'de>>(answer: &Value, entity: &str, op: &str) -> Result<Vec<T>> {
    match answer.get(entity) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| Error::cloud(PROVIDER_NAME, op, format!("the {entity} list: {e}"))),
    }
}

/// The cloudstack cloud provider.
#[derive(Debug)]
pub struct CloudStack {
    config: Config,
    client: Option<Client>,
    metadata: Option<Metadata>,
}

impl CloudStack {
    /// A provider of the API in `config` (or of the metadata alone); nothing is asked yet.
    pub fn new(config: Config) -> Result<CloudStack> {
        let client = config.has_api().then(|| Client::new(&config)).transpose()?;
        let metadata = config
            .metadata_url
            .as_ref()
            .filter(|_| client.is_none())
            .map(|u| Metadata::new(u, &config))
            .transpose()?;
        Ok(CloudStack {
            config,
            client,
            metadata,
        })
    }

    fn client(&self) -> Result<&Client> {
        self.client.as_ref().ok_or(Error::NotImplemented)
    }

    /// The project's parameter when one is configured.
    fn project(&self) -> Vec<(&'static str, String)> {
        if self.config.project_id.is_empty() {
            vec![("listall", "true".into())]
        } else {
            vec![
                ("listall", "true".into()),
                ("projectid", self.config.project_id.clone()),
            ]
        }
    }

    /// The project's VMs (of `name`, or of `id`).
    pub async fn vms(&self, filter: Option<(&'static str, &str)>) -> Result<Vec<Vm>> {
        let mut args = self.project();
        if let Some((k, v)) = filter {
            args.push((k, v.to_owned()));
        }
        let answer = self.client()?.call("listVirtualMachines", &args).await?;
        let vms: Vec<Vm> = items(&answer, "virtualmachine", "listVirtualMachines")?;
        Ok(match filter {
            Some(("name", n)) => vms.into_iter().filter(|v| v.name == n).collect(),
            Some(("id", id)) => vms.into_iter().filter(|v| v.id == id).collect(),
            _ => vms,
        })
    }

    async fn vm_named(&self, name: &str) -> Result<Vm> {
        let mut found = self.vms(Some(("name", name))).await?;
        match found.len() {
            0 => Err(Error::InstanceNotFound),
            1 => Ok(found.remove(0)),
            n => Err(Error::cloud(
                PROVIDER_NAME,
                "listVirtualMachines",
                format!("{n} VMs are named {name:?}"),
            )),
        }
    }

    async fn vm_by_id(&self, provider_id: &str) -> Result<Option<Vm>> {
        let id = vm_id(provider_id)?;
        Ok(self.vms(Some(("id", id))).await?.into_iter().next())
    }
}

/// The VM ID of `cloudstack://<id>`; another cloud's ID is an error, never "not found".
fn vm_id(provider_id: &str) -> Result<&str> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .map(|rest| rest.trim_start_matches('/'))
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "parse provider ID",
                format!("{provider_id:?} is not a {PROVIDER_ID_PREFIX}<vm id> provider ID"),
            )
        })
}

/// Upstream's addresses of a VM: the first NIC's IP, the host name, the public IP.
fn addresses(vm: &Vm) -> Result<Vec<NodeAddress>> {
    let ip = vm
        .nic
        .first()
        .map(|n| n.ipaddress.clone())
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| {
            Error::cloud(
                PROVIDER_NAME,
                "read the VM's addresses",
                format!("instance {} does not have an internal IP", vm.name),
            )
        })?;
    let mut out = vec![NodeAddress {
        type_: "InternalIP".into(),
        address: ip,
    }];
    if !vm.hostname.is_empty() {
        out.push(NodeAddress {
            type_: "Hostname".into(),
            address: vm.hostname.clone(),
        });
    }
    if !vm.publicip.is_empty() {
        out.push(NodeAddress {
            type_: "ExternalIP".into(),
            address: vm.publicip.clone(),
        });
    }
    Ok(out)
}

#[async_trait]
impl Interface for CloudStack {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// As upstream.
    fn has_cluster_id(&self) -> bool {
        true
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }

    fn zones(&self) -> Option<&dyn Zones> {
        Some(self)
    }

    /// With the API only, as upstream.
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.client.as_ref().map(|_| self as &dyn LoadBalancer)
    }

    fn webhooks(&self) -> Option<&dyn Webhooks> {
        self.client.as_ref().map(|_| self as &dyn Webhooks)
    }
}

#[async_trait]
impl Instances for CloudStack {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        if let Some(m) = &self.metadata {
            return m.node_addresses().await;
        }
        addresses(&self.vm_named(name).await?)
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        let vm = self
            .vm_by_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        addresses(&vm)
    }

    async fn instance_id(&self, name: &str) -> Result<String> {
        if let Some(m) = &self.metadata {
            return m.get("instance-id").await;
        }
        Ok(self.vm_named(name).await?.id)
    }

    async fn instance_type(&self, name: &str) -> Result<String> {
        if let Some(m) = &self.metadata {
            return m.get("service-offering").await;
        }
        Ok(self.vm_named(name).await?.serviceofferingname)
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        Ok(self
            .vm_by_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?
            .serviceofferingname)
    }

    async fn add_ssh_key_to_all_instances(&self, _user: &str, _key: &[u8]) -> Result<()> {
        Err(Error::NotImplemented)
    }

    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        Ok(hostname.to_owned())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        Ok(self.vm_by_id(provider_id).await?.is_some())
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let vm = self
            .vm_by_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(vm.state == "Stopped")
    }
}

fn zone_of(name: &str) -> Zone {
    Zone {
        failure_domain: name.to_owned(),
        region: name.to_owned(),
    }
}

#[async_trait]
impl Zones for CloudStack {
    /// `[Global] zone`, else (metadata) the `availability-zone`, else the zone of the VM named
    /// by this host's name, as upstream.
    async fn get_zone(&self) -> Result<Zone> {
        if !self.config.zone.is_empty() {
            return Ok(zone_of(&self.config.zone));
        }
        if let Some(m) = &self.metadata {
            return Ok(zone_of(&m.get("availability-zone").await?));
        }
        let host = hostname();
        let vm = self.vm_named(&host).await.map_err(|e| match e {
            Error::InstanceNotFound => Error::cloud(
                PROVIDER_NAME,
                "find the zone",
                format!("could not find instance {host:?} (this host's name) for retrieving the zone: set [Global] zone"),
            ),
            other => other,
        })?;
        Ok(zone_of(&vm.zonename))
    }

    /// With the metadata alone, the kubelet's own instance's zone (the only one it can see).
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        if self.metadata.is_some() {
            return self.get_zone().await;
        }
        let vm = self
            .vm_by_id(provider_id)
            .await?
            .ok_or(Error::InstanceNotFound)?;
        Ok(zone_of(&vm.zonename))
    }

    /// With the metadata alone, the kubelet's own instance's zone.
    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone> {
        if self.metadata.is_some() {
            return self.get_zone().await;
        }
        Ok(zone_of(&self.vm_named(name).await?.zonename))
    }
}

/// This host's name (`HOSTNAME`, else `/proc/sys/kernel/hostname`).
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_default()
}

// ------------------------------------------------------------------ load balancers

/// What a Service asks of its load balancer.
#[derive(Debug)]
struct Wanted {
    algorithm: &'static str,
    /// `(rule name, protocol, public port, node port)`.
    ports: Vec<(String, &'static str, i32, i32)>,
    source_ranges: Vec<String>,
    ip: Option<String>,
}

fn wanted(lb_name: &str, service: &Service) -> Result<Wanted> {
    let spec = service.spec.clone().unwrap_or_default();
    let refuse = |m: String| Error::cloud(PROVIDER_NAME, "read the Service", m);
    let ports = spec.ports.unwrap_or_default();
    if ports.is_empty() {
        return Err(refuse("requested load balancer with no ports".into()));
    }
    let proxy = service
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_PROXY_PROTOCOL));
    let mut out = Vec::new();
    for p in &ports {
        let protocol = match p.protocol.as_deref().unwrap_or("TCP") {
            "TCP" if proxy => "tcp-proxy",
            "TCP" => "tcp",
            "UDP" => "udp",
            other => {
                return Err(refuse(format!(
                    "unsupported load balancer protocol: {other}"
                )))
            }
        };
        let node_port = p
            .node_port
            .filter(|n| *n > 0)
            .ok_or_else(|| refuse(format!("port {} has no node port yet", p.port)))?;
        out.push((
            format!("{lb_name}-{protocol}-{}", p.port),
            protocol,
            p.port,
            node_port,
        ));
    }
    Ok(Wanted {
        algorithm: if spec.session_affinity.as_deref() == Some("ClientIP") {
            "source"
        } else {
            "roundrobin"
        },
        ports: out,
        source_ranges: spec.load_balancer_source_ranges.unwrap_or_default(),
        ip: spec.load_balancer_ip.filter(|ip| !ip.is_empty()),
    })
}

/// `tcp-proxy` is TCP to the firewall.
fn l4(protocol: &str) -> &str {
    if protocol == "tcp-proxy" {
        "tcp"
    } else {
        protocol
    }
}

impl CloudStack {
    /// The Service's rules (by the name prefix, as upstream's keyword search), by name.
    async fn rules(&self, lb_name: &str) -> Result<BTreeMap<String, Rule>> {
        let mut args = self.project();
        args.push(("keyword", lb_name.to_owned()));
        let answer = self.client()?.call("listLoadBalancerRules", &args).await?;
        let rules: Vec<Rule> = items(&answer, "loadbalancerrule", "listLoadBalancerRules")?;
        let prefix = format!("{lb_name}-");
        Ok(rules
            .into_iter()
            .filter(|r| r.name.starts_with(&prefix))
            .map(|r| (r.name.clone(), r))
            .collect())
    }

    /// The Nodes' VM IDs and their (one) network.
    async fn hosts(&self, nodes: &[Node]) -> Result<(Vec<String>, String)> {
        let names: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let mut ids = Vec::new();
        let mut network = String::new();
        for vm in self.vms(None).await? {
            if !names.contains(&vm.name) {
                continue;
            }
            let net = vm
                .nic
                .first()
                .map(|n| n.networkid.clone())
                .unwrap_or_default();
            if !network.is_empty() && network != net {
                return Err(Error::cloud(
                    PROVIDER_NAME,
                    "find the Nodes' VMs",
                    "found hosts that belong to different networks",
                ));
            }
            network = net;
            ids.push(vm.id);
        }
        Ok((ids, network))
    }

    /// The public IP: `loadBalancerIP` the account has, else a new one in `network`.
    async fn public_ip(&self, wanted: &Wanted, network: &str) -> Result<(String, String, bool)> {
        let c = self.client()?;
        if let Some(ip) = &wanted.ip {
            let mut args = self.project();
            args.push(("ipaddress", ip.clone()));
            let answer = c.call("listPublicIpAddresses", &args).await?;
            let found: Vec<Value> = items(&answer, "publicipaddress", "listPublicIpAddresses")?;
            let [one] = found.as_slice() else {
                return Err(Error::cloud(
                    PROVIDER_NAME,
                    "listPublicIpAddresses",
                    format!("could not find IP address {ip} (spec.loadBalancerIP) in the account"),
                ));
            };
            return Ok((
                one["id"].as_str().unwrap_or_default().to_owned(),
                ip.clone(),
                false,
            ));
        }
        let mut args = vec![("networkid", network.to_owned())];
        if !self.config.project_id.is_empty() {
            args.push(("projectid", self.config.project_id.clone()));
        }
        let r = c.call_async("associateIpAddress", &args).await?;
        let a = &r["ipaddress"];
        match (a["id"].as_str(), a["ipaddress"].as_str()) {
            (Some(id), Some(ip)) => Ok((id.to_owned(), ip.to_owned(), true)),
            _ => Err(Error::cloud(
                PROVIDER_NAME,
                "associateIpAddress",
                format!("the job's result has no ipaddress id and address: {r}"),
            )),
        }
    }

    async fn firewall_rules(&self, ip_id: &str) -> Result<Vec<FirewallRule>> {
        let answer = self
            .client()?
            .call("listFirewallRules", &[("ipaddressid", ip_id.to_owned())])
            .await?;
        items(&answer, "firewallrule", "listFirewallRules")
    }

    /// One firewall rule for the port, opening it to `ranges`: a new one first, then the old
    /// ones go (as the external provider); nothing when it already says exactly that.
    async fn open_port(
        &self,
        ip_id: &str,
        protocol: &str,
        port: i32,
        ranges: &[String],
    ) -> Result<()> {
        let ranges: Vec<String> = if ranges.is_empty() {
            vec![DEFAULT_ALLOWED_CIDR.to_owned()]
        } else {
            ranges.to_vec()
        };
        let want: BTreeSet<&str> = ranges.iter().map(|s| s.trim()).collect();
        let existing: Vec<FirewallRule> = self
            .firewall_rules(ip_id)
            .await?
            .into_iter()
            .filter(|r| {
                r.protocol == protocol
                    && port_of(&r.startport) == Some(port.into())
                    && port_of(&r.endport) == Some(port.into())
            })
            .collect();
        if let [one] = existing.as_slice() {
            let have: BTreeSet<&str> = one.cidrlist.split(',').map(str::trim).collect();
            if have == want {
                return Ok(());
            }
        }
        let c = self.client()?;
        c.call_async(
            "createFirewallRule",
            &[
                ("ipaddressid", ip_id.to_owned()),
                ("protocol", protocol.to_owned()),
                ("startport", port.to_string()),
                ("endport", port.to_string()),
                ("cidrlist", ranges.join(",")),
            ],
        )
        .await?;
        for r in existing {
            c.call_async("deleteFirewallRule", &[("id", r.id)]).await?;
        }
        Ok(())
    }

    async fn close_port(&self, ip_id: &str, protocol: &str, port: i32) -> Result<()> {
        let c = self.client()?;
        for r in self.firewall_rules(ip_id).await? {
            if r.protocol == protocol
                && port_of(&r.startport) == Some(port.into())
                && port_of(&r.endport) == Some(port.into())
            {
                c.call_async("deleteFirewallRule", &[("id", r.id)]).await?;
            }
        }
        Ok(())
    }

    /// Makes the rule's VMs exactly `hosts`.
    async fn sync_hosts(&self, rule: &Rule, hosts: &[String]) -> Result<()> {
        let c = self.client()?;
        let answer = c
            .call("listLoadBalancerRuleInstances", &[("id", rule.id.clone())])
            .await?;
        let current: Vec<Vm> = items(
            &answer,
            "loadbalancerruleinstance",
            "listLoadBalancerRuleInstances",
        )?;
        let have: BTreeSet<&str> = current.iter().map(|v| v.id.as_str()).collect();
        let want: BTreeSet<&str> = hosts.iter().map(String::as_str).collect();
        let assign: Vec<&str> = want.difference(&have).copied().collect();
        let remove: Vec<&str> = have.difference(&want).copied().collect();
        if !assign.is_empty() {
            c.call_async(
                "assignToLoadBalancerRule",
                &[
                    ("id", rule.id.clone()),
                    ("virtualmachineids", assign.join(",")),
                ],
            )
            .await?;
        }
        if !remove.is_empty() {
            c.call_async(
                "removeFromLoadBalancerRule",
                &[
                    ("id", rule.id.clone()),
                    ("virtualmachineids", remove.join(",")),
                ],
            )
            .await?;
        }
        Ok(())
    }

    async fn delete_rule(&self, rule: &Rule) -> Result<()> {
        if let Ok(port) = rule.publicport.parse::<i32>() {
            self.close_port(&rule.publicipid, l4(&rule.protocol), port)
                .await?;
        }
        self.client()?
            .call_async("deleteLoadBalancerRule", &[("id", rule.id.clone())])
            .await
            .map(drop)
    }

    async fn ensure(&self, service: &Service, nodes: &[Node]) -> Result<LoadBalancerStatus> {
        self.check_service(service)?;
        let lb_name = self.get_load_balancer_name("", service);
        let wanted = wanted(&lb_name, service)?;
        let mut rules = self.rules(&lb_name).await?;
        let (hosts, network) = self.hosts(nodes).await?;
        if hosts.is_empty() {
            return Err(Error::cloud(
                PROVIDER_NAME,
                "find the Nodes' VMs",
                format!("none of the {} Nodes is a VM of this account", nodes.len()),
            ));
        }
        // The IP the rules have, else one for the Service.
        let existing_ip = rules
            .values()
            .next()
            .map(|r| (r.publicipid.clone(), r.publicip.clone()));
        let (ip_id, ip) = match existing_ip {
            Some((id, ip)) if wanted.ip.as_ref().is_none_or(|w| *w == ip) => (id, ip),
            _ => {
                for r in rules.values() {
                    self.delete_rule(r).await?;
                }
                rules.clear();
                let (id, ip, _) = self.public_ip(&wanted, &network).await?;
                (id, ip)
            }
        };
        let c = self.client()?;
        for (rule_name, protocol, port, node_port) in &wanted.ports {
            let current = rules.remove(rule_name);
            let rule = match current {
                Some(r)
                    if r.publicport == port.to_string()
                        && r.privateport == node_port.to_string()
                        && r.publicipid == ip_id =>
                {
                    if r.algorithm != wanted.algorithm || r.protocol != *protocol {
                        c.call_async(
                            "updateLoadBalancerRule",
                            &[
                                ("id", r.id.clone()),
                                ("algorithm", wanted.algorithm.to_owned()),
                                ("protocol", (*protocol).to_owned()),
                            ],
                        )
                        .await?;
                    }
                    r
                }
                stale => {
                    if let Some(r) = stale {
                        self.delete_rule(&r).await?;
                    }
                    let mut args = vec![
                        ("algorithm", wanted.algorithm.to_owned()),
                        ("name", rule_name.clone()),
                        ("privateport", node_port.to_string()),
                        ("publicport", port.to_string()),
                        ("publicipid", ip_id.clone()),
                        ("protocol", (*protocol).to_owned()),
                        ("openfirewall", "false".to_owned()),
                    ];
                    if !network.is_empty() {
                        args.push(("networkid", network.clone()));
                    }
                    let r = c.call_async("createLoadBalancerRule", &args).await?;
                    let rule: Rule =
                        serde_json::from_value(r["loadbalancer"].clone()).map_err(|e| {
                            Error::cloud(
                                PROVIDER_NAME,
                                "createLoadBalancerRule",
                                format!("the job's result is not a load-balancer rule: {e}"),
                            )
                        })?;
                    rule
                }
            };
            self.sync_hosts(&rule, &hosts).await?;
            self.open_port(&ip_id, l4(protocol), *port, &wanted.source_ranges)
                .await?;
        }
        // Rules of ports the Service no longer has.
        for r in rules.values() {
            self.delete_rule(r).await?;
        }
        Ok(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip),
                ..Default::default()
            }]),
        })
    }
}

#[async_trait]
impl LoadBalancer for CloudStack {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let rules = self
            .rules(&self.get_load_balancer_name("", service))
            .await?;
        Ok(rules.values().next().map(|r| LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(r.publicip.clone()),
                ..Default::default()
            }]),
        }))
    }

    fn check_service(&self, service: &Service) -> Result<()> {
        lb_settings::check(PROVIDER_NAME, SERVICE_SETTINGS, service)
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        self.ensure(service, nodes).await
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        let rules = self
            .rules(&self.get_load_balancer_name("", service))
            .await?;
        let (hosts, _) = self.hosts(nodes).await?;
        for r in rules.values() {
            self.sync_hosts(r, &hosts).await?;
        }
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let rules = self
            .rules(&self.get_load_balancer_name("", service))
            .await?;
        let ip = rules
            .values()
            .next()
            .map(|r| (r.publicipid.clone(), r.publicip.clone()));
        for r in rules.values() {
            self.delete_rule(r).await?;
        }
        let kept = service
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_ip.clone())
            .filter(|ip| !ip.is_empty());
        if let Some((id, ip)) = ip {
            if kept.as_deref() != Some(ip.as_str()) {
                self.client()?
                    .call_async("disassociateIpAddress", &[("id", id)])
                    .await?;
            }
        }
        Ok(())
    }
}

/// hypercloud's own `service-lb-annotations` webhook, deciding with
/// [`LoadBalancer::check_service`].
#[async_trait]
impl Webhooks for CloudStack {
    fn webhooks(&self) -> Vec<WebhookSpec> {
        vec![SERVICE_LB_ANNOTATIONS]
    }

    async fn admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<AdmissionResponse> {
        admit_service_lb(self, webhook, request)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(spec: Value, annotations: Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "1234-5678", "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_rule_per_port_named_as_upstream() {
        let s = svc(
            json!({"ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP", "nodePort": 30053}],
                   "sessionAffinity": "ClientIP", "loadBalancerSourceRanges": ["10.0.0.0/8"]}),
            json!({ANNOTATION_PROXY_PROTOCOL: "false"}),
        );
        let w = wanted("a12345678", &s).unwrap();
        assert_eq!(w.algorithm, "source");
        assert_eq!(
            w.ports,
            vec![
                ("a12345678-tcp-proxy-80".to_owned(), "tcp-proxy", 80, 30080),
                ("a12345678-udp-53".to_owned(), "udp", 53, 30053)
            ]
        );
        assert_eq!(l4("tcp-proxy"), "tcp");
        assert_eq!(w.source_ranges, ["10.0.0.0/8"]);
        assert!(wanted("a", &svc(json!({"ports": []}), json!({}))).is_err());
        assert!(wanted(
            "a",
            &svc(
                json!({"ports": [{"port": 80, "protocol": "SCTP", "nodePort": 1}]}),
                json!({})
            )
        )
        .is_err());
    }

    #[test]
    fn the_settings_table_is_what_the_check_does() {
        let base = svc(
            json!({"ipFamilies": ["IPv4"], "ports": [{"port": 80, "nodePort": 30080}]}),
            json!({}),
        );
        let cs = CloudStack::new(
            Config::parse(
                "[Global]\napi-url = http://cs/client/api\napi-key = k\nsecret-key = s\n",
            )
            .unwrap(),
        )
        .unwrap();
        lb_settings::walk(SERVICE_SETTINGS, &base, |s| cs.check_service(s)).unwrap();
    }

    #[test]
    fn lb_settings_doc() {
        let doc = hypercloud_testenv::repo_root().join("docs/guide/cloudstack.md");
        lb_settings::verify_doc(&doc, SERVICE_SETTINGS).unwrap();
    }

    #[test]
    fn addresses_as_upstream() {
        let vm: Vm = serde_json::from_value(json!({
            "id": "v1", "name": "n1", "hostname": "n1", "publicip": "198.51.100.7",
            "nic": [{"ipaddress": "10.1.1.5", "networkid": "net"}],
        }))
        .unwrap();
        let a: Vec<(String, String)> = addresses(&vm)
            .unwrap()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            a,
            [
                ("InternalIP".to_owned(), "10.1.1.5".to_owned()),
                ("Hostname".to_owned(), "n1".to_owned()),
                ("ExternalIP".to_owned(), "198.51.100.7".to_owned())
            ]
        );
        assert!(addresses(&Vm {
            name: "x".into(),
            ..Default::default()
        })
        .is_err());
        assert_eq!(vm_id("cloudstack://abc").unwrap(), "abc");
        assert!(vm_id("aws:///i-1").is_err());
    }
}
