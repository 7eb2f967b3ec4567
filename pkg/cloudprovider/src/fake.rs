//! The `fake` provider: an in-memory cloud that records every call (upstream
//! `k8s.io/cloud-provider/fake`).
//!
//! It is configured from a YAML or JSON cloud-config, so any personality can run against it
//! (`--cloud-provider=fake --cloud-config=fake.yaml`), and tests can change it at run time
//! (add, stop or remove instances, make a method fail) and read back the calls it got.
//! Load balancer ingress addresses come from 192.0.2.0/24 (TEST-NET-1): they are data only.
//!
//! ```yaml
//! region: RegionOne          # default region of instances and of get_zone()
//! zone: nova                 # default zone of instances and of get_zone()
//! instances:
//!   - name: node-1
//!     instanceType: m1.small
//!     addresses: [{type: InternalIP, address: 10.0.0.11}]
//! routes: [{targetNode: node-1, destinationCIDR: 10.244.1.0/24}]
//! clusters: {kubernetes: 10.0.0.1}
//! volumes: [{id: vol-1, zone: nova}]   # PVs with csi.volumeHandle or cinder.volumeID vol-1
//! disabled: [clusters]       # capabilities to report as unsupported
//! panicOn: [ensure_load_balancer]  # fault hook: these calls panic (tests of supervision)
//! ```

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, PersistentVolume, Service,
};
use serde::{Deserialize, Serialize};

use crate::{
    default_load_balancer_name, CloudConfig, Clusters, Error, InstanceMetadata, Instances,
    InstancesV2, Interface, LoadBalancer, PvLabeler, Result, Route, Routes, Zone, Zones,
};

const PROVIDER: &str = "fake";

/// The fake cloud's configuration (the `--cloud-config` file).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FakeConfig {
    /// Default region; also what `get_zone()` answers.
    #[serde(default)]
    pub region: String,
    /// Default zone; also what `get_zone()` answers.
    #[serde(default)]
    pub zone: String,
    /// `has_cluster_id()`; defaults to true.
    #[serde(default, rename = "hasClusterID")]
    pub has_cluster_id: Option<bool>,
    /// The instances.
    #[serde(default)]
    pub instances: Vec<FakeInstance>,
    /// Pre-existing routes; each belongs to `clusterName` (default `kubernetes`).
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Cluster name → master address.
    #[serde(default)]
    pub clusters: BTreeMap<String, String>,
    /// Volumes, for PV labels.
    #[serde(default)]
    pub volumes: Vec<FakeVolume>,
    /// Capabilities to report as unsupported: `instances`, `instances-v2`, `load-balancer`,
    /// `zones`, `routes`, `clusters`, `pv-labeler` (`volumes` and `attach-detach` are accepted
    /// and never offered: the fake has no in-tree volume plugin).
    #[serde(default)]
    pub disabled: Vec<String>,
    /// Fault hook for tests of process supervision: every call of these methods (names as in
    /// [`METHODS`]) panics, as a bug in a provider would.
    #[serde(default)]
    pub panic_on: Vec<String>,
    /// When set, only Nodes whose name (or provider ID's instance part) starts with this prefix
    /// are this cloud's to answer for: asked about any other, the fake fails as an unreachable
    /// cloud would (HTTP 503) instead of saying "not found", so the lifecycle controller leaves
    /// it alone. Lets several controller managers share one apiserver, each with its own Nodes.
    #[serde(default)]
    pub scope: Option<String>,
}

/// How many calls the fake keeps for [`FakeCloud::calls`]; older ones are dropped (their
/// counts stay in [`FakeCloud::call_count`]).
pub const MAX_CALL_LOG: usize = 10_000;

/// The provider methods the fake records, by the names [`Call::method`] and `panicOn` use.
pub const METHODS: [&str; 25] = [
    "add_ssh_key_to_all_instances",
    "create_route",
    "current_node_name",
    "delete_route",
    "ensure_load_balancer",
    "ensure_load_balancer_deleted",
    "get_labels_for_volume",
    "get_load_balancer",
    "get_zone",
    "get_zone_by_node_name",
    "get_zone_by_provider_id",
    "instance_exists",
    "instance_exists_by_provider_id",
    "instance_id",
    "instance_metadata",
    "instance_shutdown",
    "instance_shutdown_by_provider_id",
    "instance_type",
    "instance_type_by_provider_id",
    "list_clusters",
    "list_routes",
    "master",
    "node_addresses",
    "node_addresses_by_provider_id",
    "update_load_balancer",
];

/// One instance of the fake cloud.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FakeInstance {
    /// Node name.
    pub name: String,
    /// Cloud ID; defaults to the name.
    #[serde(default)]
    pub id: Option<String>,
    /// Flavor.
    #[serde(default)]
    pub instance_type: String,
    /// Zone; defaults to the cloud's.
    #[serde(default)]
    pub zone: Option<String>,
    /// Region; defaults to the cloud's.
    #[serde(default)]
    pub region: Option<String>,
    /// Addresses, `{type, address}` as in Node status.
    #[serde(default)]
    pub addresses: Vec<NodeAddress>,
    /// Whether the instance is shut down.
    #[serde(default)]
    pub shutdown: bool,
    /// Additional labels reported by instance metadata.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl FakeInstance {
    fn id(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.name)
    }

    /// `fake:///<id>`.
    pub fn provider_id(&self) -> String {
        format!("{PROVIDER}:///{}", self.id())
    }
}

/// One volume of the fake cloud.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FakeVolume {
    /// Volume ID, matched against a PV's `csi.volumeHandle` or `cinder.volumeID`.
    pub id: String,
    /// Zone; defaults to the cloud's.
    #[serde(default)]
    pub zone: Option<String>,
    /// Region; defaults to the cloud's.
    #[serde(default)]
    pub region: Option<String>,
}

/// The cloud volume a PV refers to: a CSI volume handle or an in-tree Cinder volume ID.
pub fn pv_volume_id(pv: &PersistentVolume) -> Option<&str> {
    let spec = pv.spec.as_ref()?;
    spec.csi
        .as_ref()
        .map(|c| c.volume_handle.as_str())
        .or_else(|| spec.cinder.as_ref().map(|c| c.volume_id.as_str()))
}

/// One recorded call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Method name, as in the trait (`instance_metadata`, `ensure_load_balancer`, ...).
    pub method: &'static str,
    /// The main arguments, rendered as strings (node name, provider ID, service key, ...).
    pub args: Vec<String>,
}

/// A load balancer of the fake cloud.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeLoadBalancer {
    /// Cloud name (`get_load_balancer_name`).
    pub name: String,
    /// `namespace/name` of the Service.
    pub service: String,
    /// Names of the backend nodes, sorted (shared between load balancers with the same set:
    /// 5000 Services over 5000 Nodes hold one list, not 5000).
    pub nodes: Arc<Vec<String>>,
    /// Ingress IP.
    pub ip: String,
}

#[derive(Default)]
struct State {
    config: FakeConfig,
    /// The most recent [`MAX_CALL_LOG`] calls; `counts` counts them all.
    calls: VecDeque<Call>,
    counts: HashMap<&'static str, usize>,
    total_calls: usize,
    failures: BTreeMap<String, u16>,
    load_balancers: BTreeMap<String, FakeLoadBalancer>,
    route_clusters: Vec<String>,
    next_ip: u8,
    /// Instance name → index in `config.instances`, and provider ID → index: lookups cost
    /// the same at 5000 instances as at 5 (benchmarks measure controllers, not the fake).
    by_name: HashMap<String, usize>,
    by_provider_id: HashMap<String, usize>,
    /// The last node set a load balancer got (sorted names), shared with the next one if
    /// equal, and the node names of that call in the order given.
    last_nodes: Arc<Vec<String>>,
    last_given: Vec<String>,
}

impl State {
    /// The names of `nodes`, sorted, as a shared list: the previous load balancer's when
    /// equal. The controllers pass the same backends to every load balancer until the nodes
    /// change, so that case compares names without allocating or sorting (the upstream fake
    /// the benchmarks compare with ignores the nodes).
    fn intern_nodes(&mut self, nodes: &[Node]) -> Arc<Vec<String>> {
        let same = self.last_given.len() == nodes.len()
            && nodes
                .iter()
                .zip(&self.last_given)
                .all(|(n, given)| n.metadata.name.as_deref().unwrap_or_default() == given);
        if !same {
            self.last_given = nodes.iter().map(node_name).collect();
            let mut sorted = self.last_given.clone();
            sorted.sort();
            if *self.last_nodes != sorted {
                self.last_nodes = Arc::new(sorted);
            }
        }
        self.last_nodes.clone()
    }

    /// Rebuilds the lookup indexes after `config.instances` changed.
    fn reindex(&mut self) {
        self.by_name.clear();
        self.by_provider_id.clear();
        for (i, inst) in self.config.instances.iter().enumerate() {
            self.by_name.entry(inst.name.clone()).or_insert(i);
            self.by_provider_id.entry(inst.provider_id()).or_insert(i);
        }
    }
}

/// The fake cloud. Cheap to clone: clones share state.
#[derive(Clone, Default)]
pub struct FakeCloud {
    state: Arc<Mutex<State>>,
    disabled: Arc<Vec<String>>,
}

impl FakeCloud {
    /// A fake cloud from a parsed config.
    pub fn new(config: FakeConfig) -> Self {
        let disabled = Arc::new(config.disabled.clone());
        let route_clusters = vec!["kubernetes".to_string(); config.routes.len()];
        let mut state = State {
            config,
            route_clusters,
            next_ip: 1,
            ..State::default()
        };
        state.reindex();
        Self {
            state: Arc::new(Mutex::new(state)),
            disabled,
        }
    }

    /// Parses YAML or JSON; errors name the origin, the line and the field.
    pub fn from_config_bytes(bytes: &[u8], origin: &str) -> Result<Self> {
        let config: FakeConfig = if bytes.iter().all(u8::is_ascii_whitespace) {
            FakeConfig::default()
        } else {
            let invalid = |message: String| Error::InvalidCloudConfig {
                provider: PROVIDER.into(),
                origin: origin.into(),
                message,
            };
            crate::yaml::check_depth(&String::from_utf8_lossy(bytes)).map_err(invalid)?;
            serde_yaml::from_slice(bytes).map_err(|e| invalid(e.to_string()))?
        };
        for cap in &config.disabled {
            if !crate::cloud::CAPABILITY_NAMES.contains(&cap.as_str()) {
                return Err(Error::InvalidCloudConfig {
                    provider: PROVIDER.into(),
                    origin: origin.into(),
                    message: format!(
                        "disabled: unknown capability {cap:?} (known: {})",
                        crate::cloud::CAPABILITY_NAMES.join(", ")
                    ),
                });
            }
        }
        if let Some(m) = config
            .panic_on
            .iter()
            .find(|m| !METHODS.contains(&m.as_str()))
        {
            return Err(Error::InvalidCloudConfig {
                provider: PROVIDER.into(),
                origin: origin.into(),
                message: format!(
                    "panicOn: unknown method {m:?} (known: {})",
                    METHODS.join(", ")
                ),
            });
        }
        Ok(Self::new(config))
    }

    /// The registry factory: an empty cloud without a config.
    pub fn from_cloud_config(config: Option<&CloudConfig>) -> Result<Self> {
        match config {
            None => Ok(Self::new(FakeConfig::default())),
            Some(c) => Self::from_config_bytes(&c.bytes, &c.origin),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock only happens in a failing test; keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a call and returns the injected failure for it, if any.
    fn record(&self, method: &'static str, args: Vec<String>) -> Result<MutexGuard<'_, State>> {
        let mut st = self.lock();
        if st.calls.len() >= MAX_CALL_LOG {
            st.calls.pop_front();
        }
        st.calls.push_back(Call { method, args });
        *st.counts.entry(method).or_default() += 1;
        st.total_calls += 1;
        if st.config.panic_on.iter().any(|m| m == method) {
            drop(st);
            panic!("fake cloud: injected panic in {method} (panicOn)");
        }
        if let Some(status) = st.failures.get(method).copied() {
            return Err(Error::Cloud {
                provider: PROVIDER.into(),
                operation: method.into(),
                status: Some(status),
                request_id: Some(format!("fake-{}", st.total_calls)),
                source: Box::new(crate::Message("injected failure".into())),
            });
        }
        Ok(st)
    }

    /// The calls so far, oldest first: all of them, or the most recent [`MAX_CALL_LOG`] in a
    /// long run (a CCM holding 5000 Nodes makes thousands per lifecycle pass).
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.iter().cloned().collect()
    }

    /// How many calls of `method` so far (exact, however long the run).
    pub fn call_count(&self, method: &str) -> usize {
        self.lock().counts.get(method).copied().unwrap_or(0)
    }

    /// Forgets the recorded calls and their counts.
    pub fn clear_calls(&self) {
        let mut st = self.lock();
        st.calls.clear();
        st.counts.clear();
    }

    /// Makes every later call of `method` fail with a cloud error of `status`; `None` heals.
    pub fn set_failure(&self, method: &str, status: Option<u16>) {
        let mut st = self.lock();
        match status {
            Some(s) => st.failures.insert(method.into(), s),
            None => st.failures.remove(method),
        };
    }

    /// Adds or replaces an instance (by name).
    pub fn upsert_instance(&self, instance: FakeInstance) {
        let mut st = self.lock();
        st.config.instances.retain(|i| i.name != instance.name);
        st.config.instances.push(instance);
        st.reindex();
    }

    /// Removes an instance; returns whether it existed.
    pub fn remove_instance(&self, name: &str) -> bool {
        let mut st = self.lock();
        let before = st.config.instances.len();
        st.config.instances.retain(|i| i.name != name);
        st.reindex();
        before != st.config.instances.len()
    }

    /// Shuts an instance down or starts it; returns whether it exists.
    pub fn set_shutdown(&self, name: &str, shutdown: bool) -> bool {
        let mut st = self.lock();
        let index = st.by_name.get(name).copied();
        match index.and_then(|i| st.config.instances.get_mut(i)) {
            Some(i) => {
                i.shutdown = shutdown;
                true
            }
            None => false,
        }
    }

    /// The load balancers, by name.
    pub fn load_balancers(&self) -> BTreeMap<String, FakeLoadBalancer> {
        self.lock().load_balancers.clone()
    }

    fn enabled(&self, cap: &str) -> bool {
        !self.disabled.iter().any(|d| d == cap)
    }
}

fn by_name<'a>(st: &'a State, name: &str) -> Result<&'a FakeInstance> {
    st.by_name
        .get(name)
        .and_then(|&i| st.config.instances.get(i))
        .ok_or_else(|| not_found(st, name))
}

fn by_provider_id<'a>(st: &'a State, provider_id: &str) -> Result<&'a FakeInstance> {
    st.by_provider_id
        .get(provider_id)
        .and_then(|&i| st.config.instances.get(i))
        .ok_or_else(|| {
            let key = provider_id
                .strip_prefix(&format!("{PROVIDER}:///"))
                .unwrap_or(provider_id);
            not_found(st, key)
        })
}

/// Whether a lookup found the instance; "not found" is `false`, other errors stay errors.
fn exists(found: Result<&FakeInstance>) -> Result<bool> {
    match found {
        Ok(_) => Ok(true),
        Err(Error::InstanceNotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `InstanceNotFound` for an unknown instance in scope; outside [`FakeConfig::scope`], the
/// error of a cloud that cannot answer.
fn not_found(st: &State, key: &str) -> Error {
    match &st.config.scope {
        Some(prefix) if !key.starts_with(prefix.as_str()) => Error::Cloud {
            provider: PROVIDER.into(),
            operation: "find instance".into(),
            status: Some(503),
            request_id: None,
            source: Box::new(crate::Message(format!(
                "{key:?} is outside this fake cloud's scope {prefix:?}"
            ))),
        },
        _ => Error::InstanceNotFound,
    }
}

/// InstancesV2 finds a Node's instance by `spec.providerID` when set, else by name.
fn by_node<'a>(st: &'a State, node: &Node) -> Result<&'a FakeInstance> {
    match node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
        Some(id) if !id.is_empty() => by_provider_id(st, id),
        _ => by_name(st, node.metadata.name.as_deref().unwrap_or_default()),
    }
}

fn zone_of(st: &State, i: &FakeInstance) -> Zone {
    Zone {
        failure_domain: i.zone.clone().unwrap_or_else(|| st.config.zone.clone()),
        region: i.region.clone().unwrap_or_else(|| st.config.region.clone()),
    }
}

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

fn service_key(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or("default"),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

fn lb_status(ip: &str) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.into()),
            ..Default::default()
        }]),
    }
}

impl Interface for FakeCloud {
    fn provider_name(&self) -> &str {
        PROVIDER
    }

    fn has_cluster_id(&self) -> bool {
        self.lock().config.has_cluster_id.unwrap_or(true)
    }

    fn instances(&self) -> Option<&dyn Instances> {
        self.enabled("instances").then_some(self as &dyn Instances)
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        self.enabled("instances-v2")
            .then_some(self as &dyn InstancesV2)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.enabled("load-balancer")
            .then_some(self as &dyn LoadBalancer)
    }

    fn zones(&self) -> Option<&dyn Zones> {
        self.enabled("zones").then_some(self as &dyn Zones)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        self.enabled("routes").then_some(self as &dyn Routes)
    }

    fn clusters(&self) -> Option<&dyn Clusters> {
        self.enabled("clusters").then_some(self as &dyn Clusters)
    }

    fn pv_labeler(&self) -> Option<&dyn PvLabeler> {
        self.enabled("pv-labeler").then_some(self as &dyn PvLabeler)
    }
}

#[async_trait]
impl PvLabeler for FakeCloud {
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<BTreeMap<String, String>> {
        let pv_name = pv.metadata.name.clone().unwrap_or_default();
        let st = self.record("get_labels_for_volume", vec![pv_name])?;
        let Some(id) = pv_volume_id(pv) else {
            return Ok(BTreeMap::new());
        };
        let v = st
            .config
            .volumes
            .iter()
            .find(|v| v.id == id)
            .ok_or(Error::DiskNotFound)?;
        let zone = v.zone.clone().unwrap_or_else(|| st.config.zone.clone());
        let region = v.region.clone().unwrap_or_else(|| st.config.region.clone());
        let mut labels = BTreeMap::new();
        if !zone.is_empty() {
            labels.insert(crate::wellknown::LABEL_TOPOLOGY_ZONE.to_string(), zone);
        }
        if !region.is_empty() {
            labels.insert(crate::wellknown::LABEL_TOPOLOGY_REGION.to_string(), region);
        }
        Ok(labels)
    }
}

#[async_trait]
impl Instances for FakeCloud {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        let st = self.record("node_addresses", vec![name.into()])?;
        Ok(by_name(&st, name)?.addresses.clone())
    }

    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        let st = self.record("node_addresses_by_provider_id", vec![provider_id.into()])?;
        Ok(by_provider_id(&st, provider_id)?.addresses.clone())
    }

    async fn instance_id(&self, name: &str) -> Result<String> {
        let st = self.record("instance_id", vec![name.into()])?;
        // As OpenStack's: "/" + ID, so that upstream's `<provider>://<instance id>` gives
        // the same provider ID as InstancesV2 (`fake:///<id>`).
        Ok(format!("/{}", by_name(&st, name)?.id()))
    }

    async fn instance_type(&self, name: &str) -> Result<String> {
        let st = self.record("instance_type", vec![name.into()])?;
        Ok(by_name(&st, name)?.instance_type.clone())
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        let st = self.record("instance_type_by_provider_id", vec![provider_id.into()])?;
        Ok(by_provider_id(&st, provider_id)?.instance_type.clone())
    }

    async fn add_ssh_key_to_all_instances(&self, user: &str, _key: &[u8]) -> Result<()> {
        drop(self.record("add_ssh_key_to_all_instances", vec![user.into()])?);
        Ok(())
    }

    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        drop(self.record("current_node_name", vec![hostname.into()])?);
        Ok(hostname.into())
    }

    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let st = self.record("instance_exists_by_provider_id", vec![provider_id.into()])?;
        exists(by_provider_id(&st, provider_id))
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let st = self.record("instance_shutdown_by_provider_id", vec![provider_id.into()])?;
        Ok(by_provider_id(&st, provider_id)?.shutdown)
    }
}

#[async_trait]
impl InstancesV2 for FakeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        let st = self.record("instance_exists", vec![node_name(node)])?;
        exists(by_node(&st, node))
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        let st = self.record("instance_shutdown", vec![node_name(node)])?;
        Ok(by_node(&st, node)?.shutdown)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata> {
        let st = self.record("instance_metadata", vec![node_name(node)])?;
        let i = by_node(&st, node)?;
        let zone = zone_of(&st, i);
        Ok(InstanceMetadata {
            provider_id: i.provider_id(),
            instance_type: i.instance_type.clone(),
            node_addresses: i.addresses.clone(),
            zone: zone.failure_domain,
            region: zone.region,
            additional_labels: i.labels.clone(),
        })
    }
}

#[async_trait]
impl LoadBalancer for FakeCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let st = self.record(
            "get_load_balancer",
            vec![cluster_name.into(), service_key(service)],
        )?;
        let name = default_load_balancer_name(service);
        Ok(st.load_balancers.get(&name).map(|lb| lb_status(&lb.ip)))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        let args = vec![
            cluster_name.into(),
            service_key(service),
            format!("{} nodes", nodes.len()),
        ];
        let mut st = self.record("ensure_load_balancer", args)?;
        let nodes = st.intern_nodes(nodes);
        let name = default_load_balancer_name(service);
        let ip = match st.load_balancers.get(&name) {
            Some(lb) => lb.ip.clone(),
            None => {
                let ip = format!("192.0.2.{}", st.next_ip);
                st.next_ip = st.next_ip.wrapping_add(1).max(1);
                ip
            }
        };
        st.load_balancers.insert(
            name.clone(),
            FakeLoadBalancer {
                name,
                service: service_key(service),
                nodes,
                ip: ip.clone(),
            },
        );
        Ok(lb_status(&ip))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        let args = vec![
            cluster_name.into(),
            service_key(service),
            format!("{} nodes", nodes.len()),
        ];
        let mut st = self.record("update_load_balancer", args)?;
        let nodes = st.intern_nodes(nodes);
        let name = default_load_balancer_name(service);
        match st.load_balancers.get_mut(&name) {
            Some(lb) => {
                lb.nodes = nodes;
                Ok(())
            }
            None => Err(Error::Cloud {
                provider: PROVIDER.into(),
                operation: "update_load_balancer".into(),
                status: Some(404),
                request_id: None,
                source: Box::new(crate::Message(format!(
                    "load balancer {name} does not exist"
                ))),
            }),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let mut st = self.record(
            "ensure_load_balancer_deleted",
            vec![cluster_name.into(), service_key(service)],
        )?;
        st.load_balancers
            .remove(&default_load_balancer_name(service));
        Ok(())
    }
}

#[async_trait]
impl Zones for FakeCloud {
    async fn get_zone(&self) -> Result<Zone> {
        let st = self.record("get_zone", vec![])?;
        Ok(Zone {
            failure_domain: st.config.zone.clone(),
            region: st.config.region.clone(),
        })
    }

    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        let st = self.record("get_zone_by_provider_id", vec![provider_id.into()])?;
        let i = by_provider_id(&st, provider_id)?;
        Ok(zone_of(&st, i))
    }

    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone> {
        let st = self.record("get_zone_by_node_name", vec![name.into()])?;
        let i = by_name(&st, name)?;
        Ok(zone_of(&st, i))
    }
}

#[async_trait]
impl Routes for FakeCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        let st = self.record("list_routes", vec![cluster_name.into()])?;
        Ok(st
            .config
            .routes
            .iter()
            .zip(&st.route_clusters)
            .filter(|(_, c)| *c == cluster_name)
            .map(|(r, _)| r.clone())
            .collect())
    }

    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        let mut st = self.record(
            "create_route",
            vec![
                cluster_name.into(),
                name_hint.into(),
                route.destination_cidr.clone(),
            ],
        )?;
        let mut route = route.clone();
        route.name = format!("{cluster_name}-{name_hint}");
        st.config.routes.push(route);
        st.route_clusters.push(cluster_name.into());
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()> {
        let mut st = self.record(
            "delete_route",
            vec![cluster_name.into(), route.destination_cidr.clone()],
        )?;
        let State {
            config,
            route_clusters,
            ..
        } = &mut *st;
        let keep: Vec<bool> = config
            .routes
            .iter()
            .zip(route_clusters.iter())
            .map(|(r, c)| {
                !(c == cluster_name
                    && r.destination_cidr == route.destination_cidr
                    && r.target_node == route.target_node)
            })
            .collect();
        let mut k = keep.iter();
        config.routes.retain(|_| *k.next().unwrap_or(&true));
        let mut k = keep.iter();
        route_clusters.retain(|_| *k.next().unwrap_or(&true));
        Ok(())
    }
}

#[async_trait]
impl Clusters for FakeCloud {
    async fn list_clusters(&self) -> Result<Vec<String>> {
        let st = self.record("list_clusters", vec![])?;
        Ok(st.config.clusters.keys().cloned().collect())
    }

    async fn master(&self, cluster_name: &str) -> Result<String> {
        let st = self.record("master", vec![cluster_name.into()])?;
        st.config
            .clusters
            .get(cluster_name)
            .cloned()
            .ok_or_else(|| Error::Cloud {
                provider: PROVIDER.into(),
                operation: "master".into(),
                status: Some(404),
                request_id: None,
                source: Box::new(crate::Message(format!("cluster {cluster_name} not found"))),
            })
    }
}

#[cfg(test)]
#[allow(clippy::err_expect)] // the Ok types are not Debug
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const CONFIG: &str = r#"
region: RegionOne
zone: nova
instances:
  - name: node-1
    instanceType: m1.small
    addresses: [{type: InternalIP, address: 10.0.0.11}]
    labels: {example.com/rack: r1}
  - name: node-2
    id: uuid-2
    instanceType: m1.large
    zone: az-2
    shutdown: true
routes:
  - targetNode: node-1
    destinationCIDR: 10.244.1.0/24
clusters: {kubernetes: 10.0.0.1}
"#;

    fn cloud() -> FakeCloud {
        FakeCloud::from_config_bytes(CONFIG.as_bytes(), "test").expect("valid config")
    }

    fn node(name: &str, provider_id: Option<&str>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn service(name: &str, uid: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn instances_v1_answers_and_records() {
        let c = cloud();
        let i = c.instances().expect("supported");
        assert_eq!(
            i.node_addresses("node-1").await.expect("ok")[0].address,
            "10.0.0.11"
        );
        assert_eq!(i.instance_id("node-2").await.expect("ok"), "/uuid-2");
        assert_eq!(i.instance_type("node-2").await.expect("ok"), "m1.large");
        assert_eq!(
            i.instance_type_by_provider_id("fake:///uuid-2")
                .await
                .expect("ok"),
            "m1.large"
        );
        assert_eq!(
            i.node_addresses_by_provider_id("fake:///node-1")
                .await
                .expect("ok")
                .len(),
            1
        );
        assert!(matches!(
            i.node_addresses("nope").await,
            Err(Error::InstanceNotFound)
        ));
        assert!(i
            .instance_exists_by_provider_id("fake:///node-1")
            .await
            .expect("ok"));
        assert!(!i
            .instance_exists_by_provider_id("fake:///gone")
            .await
            .expect("ok"));
        assert!(i
            .instance_shutdown_by_provider_id("fake:///uuid-2")
            .await
            .expect("ok"));
        assert!(matches!(
            i.instance_shutdown_by_provider_id("fake:///gone").await,
            Err(Error::InstanceNotFound)
        ));
        assert_eq!(i.current_node_name("host-a").await.expect("ok"), "host-a");
        i.add_ssh_key_to_all_instances("core", b"ssh-ed25519 AAA")
            .await
            .expect("ok");
        assert_eq!(c.call_count("node_addresses"), 2);
        assert_eq!(
            c.calls()[0],
            Call {
                method: "node_addresses",
                args: vec!["node-1".into()]
            }
        );
        assert_eq!(c.calls().len(), 12);
    }

    #[tokio::test]
    async fn instances_v2_uses_provider_id_then_name() {
        let c = cloud();
        let v2 = c.instances_v2().expect("supported");
        let md = v2
            .instance_metadata(&node("node-1", None))
            .await
            .expect("ok");
        assert_eq!(md.provider_id, "fake:///node-1");
        assert_eq!(md.instance_type, "m1.small");
        assert_eq!(md.zone, "nova");
        assert_eq!(md.region, "RegionOne");
        assert_eq!(
            md.additional_labels
                .get("example.com/rack")
                .map(String::as_str),
            Some("r1")
        );
        // Found by provider ID even though the Node is named differently.
        let md2 = v2
            .instance_metadata(&node("renamed", Some("fake:///uuid-2")))
            .await
            .expect("ok");
        assert_eq!(md2.zone, "az-2");
        assert!(v2
            .instance_shutdown(&node("node-2", None))
            .await
            .expect("ok"));
        assert!(!v2.instance_exists(&node("ghost", None)).await.expect("ok"));
        assert!(matches!(
            v2.instance_metadata(&node("ghost", None)).await,
            Err(Error::InstanceNotFound)
        ));
    }

    #[tokio::test]
    async fn outside_its_scope_the_fake_cannot_answer_rather_than_not_found() {
        let config = FakeConfig {
            scope: Some("t1-".into()),
            instances: vec![FakeInstance {
                name: "t1-a".into(),
                ..FakeInstance::default()
            }],
            ..FakeConfig::default()
        };
        let c = FakeCloud::new(config);
        let v2 = c.instances_v2().expect("supported");
        assert!(v2.instance_exists(&node("t1-a", None)).await.expect("ok"));
        assert!(!v2
            .instance_exists(&node("t1-gone", None))
            .await
            .expect("ok"));
        let e = v2
            .instance_exists(&node("t2-a", None))
            .await
            .expect_err("outside the scope");
        assert!(
            matches!(
                e,
                Error::Cloud {
                    status: Some(503),
                    ..
                }
            ),
            "{e}"
        );
        assert!(v2
            .instance_exists(&node("t2-a", Some("fake:///t2-a")))
            .await
            .is_err());
    }

    #[tokio::test]
    async fn instances_change_at_run_time() {
        let c = cloud();
        let v2 = c.instances_v2().expect("supported");
        assert!(c.set_shutdown("node-1", true));
        assert!(v2
            .instance_shutdown(&node("node-1", None))
            .await
            .expect("ok"));
        assert!(c.remove_instance("node-1"));
        assert!(!c.remove_instance("node-1"));
        assert!(!v2.instance_exists(&node("node-1", None)).await.expect("ok"));
        c.upsert_instance(FakeInstance {
            name: "node-3".into(),
            ..Default::default()
        });
        assert!(v2.instance_exists(&node("node-3", None)).await.expect("ok"));
    }

    #[tokio::test]
    async fn load_balancers_record_sorted_node_sets_shared_while_equal() {
        let c = cloud();
        let lb = c.load_balancer().expect("supported");
        let (a, b, d) = (service("a", "a"), service("b", "b"), service("d", "d"));
        let given = [node("node-2", None), node("node-1", None)];
        lb.ensure_load_balancer("k", &a, &given).await.expect("ok");
        lb.ensure_load_balancer("k", &b, &given).await.expect("ok");
        // The same set in another order: still the same sorted list.
        let reordered = [node("node-1", None), node("node-2", None)];
        lb.ensure_load_balancer("k", &d, &reordered)
            .await
            .expect("ok");
        let lbs = c.load_balancers();
        let nodes = |svc: &Service| lbs[&default_load_balancer_name(svc)].nodes.clone();
        assert_eq!(*nodes(&a), vec!["node-1".to_string(), "node-2".to_string()]);
        assert!(Arc::ptr_eq(&nodes(&a), &nodes(&b)));
        assert!(Arc::ptr_eq(&nodes(&a), &nodes(&d)));
        // A changed set is recorded as such, and the earlier load balancers keep theirs.
        lb.update_load_balancer("k", &b, &[node("node-3", None), node("node-1", None)])
            .await
            .expect("ok");
        let lbs = c.load_balancers();
        let nodes = |svc: &Service| lbs[&default_load_balancer_name(svc)].nodes.clone();
        assert_eq!(*nodes(&b), vec!["node-1".to_string(), "node-3".to_string()]);
        assert_eq!(*nodes(&a), vec!["node-1".to_string(), "node-2".to_string()]);
    }

    #[tokio::test]
    async fn load_balancer_lifecycle() {
        let c = cloud();
        let lb = c.load_balancer().expect("supported");
        let svc = service("web", "11111111-2222-3333-4444-555555555555");
        assert_eq!(
            lb.get_load_balancer("kubernetes", &svc).await.expect("ok"),
            None
        );
        assert!(lb
            .update_load_balancer("kubernetes", &svc, &[])
            .await
            .is_err());
        let status = lb
            .ensure_load_balancer(
                "kubernetes",
                &svc,
                &[node("node-2", None), node("node-1", None)],
            )
            .await
            .expect("ok");
        let ip = status.ingress.as_ref().and_then(|i| i[0].ip.clone());
        assert_eq!(ip.as_deref(), Some("192.0.2.1"));
        // Ensuring again keeps the address; a second service gets the next one.
        let again = lb
            .ensure_load_balancer("kubernetes", &svc, &[])
            .await
            .expect("ok");
        assert_eq!(again, status);
        let other = lb
            .ensure_load_balancer("kubernetes", &service("db", "x"), &[])
            .await
            .expect("ok");
        assert_eq!(
            other.ingress.and_then(|i| i[0].ip.clone()).as_deref(),
            Some("192.0.2.2")
        );
        lb.update_load_balancer("kubernetes", &svc, &[node("node-1", None)])
            .await
            .expect("ok");
        let lbs = c.load_balancers();
        let ours = lbs.get("a1111111122223333444455555555555").expect("exists");
        assert_eq!(*ours.nodes, vec!["node-1".to_string()]);
        assert_eq!(ours.service, "ns/web");
        assert_eq!(
            lb.get_load_balancer("kubernetes", &svc).await.expect("ok"),
            Some(status)
        );
        lb.ensure_load_balancer_deleted("kubernetes", &svc)
            .await
            .expect("ok");
        lb.ensure_load_balancer_deleted("kubernetes", &svc)
            .await
            .expect("idempotent");
        assert_eq!(
            lb.get_load_balancer("kubernetes", &svc).await.expect("ok"),
            None
        );
        assert_eq!(
            lb.get_load_balancer_name("kubernetes", &svc),
            "a1111111122223333444455555555555"
        );
    }

    #[tokio::test]
    async fn zones_answer_per_instance_with_defaults() {
        let c = cloud();
        let z = c.zones().expect("supported");
        assert_eq!(
            z.get_zone().await.expect("ok"),
            Zone {
                failure_domain: "nova".into(),
                region: "RegionOne".into()
            }
        );
        assert_eq!(
            z.get_zone_by_node_name("node-2")
                .await
                .expect("ok")
                .failure_domain,
            "az-2"
        );
        assert_eq!(
            z.get_zone_by_provider_id("fake:///node-1")
                .await
                .expect("ok")
                .region,
            "RegionOne"
        );
        assert!(matches!(
            z.get_zone_by_node_name("x").await,
            Err(Error::InstanceNotFound)
        ));
    }

    #[tokio::test]
    async fn routes_are_per_cluster() {
        let c = cloud();
        let r = c.routes().expect("supported");
        assert_eq!(r.list_routes("kubernetes").await.expect("ok").len(), 1);
        let route = Route {
            name: String::new(),
            target_node: "node-2".into(),
            destination_cidr: "10.244.2.0/24".into(),
            blackhole: false,
        };
        r.create_route("other", "uid-2", &route).await.expect("ok");
        assert_eq!(r.list_routes("kubernetes").await.expect("ok").len(), 1);
        let others = r.list_routes("other").await.expect("ok");
        assert_eq!(others.len(), 1);
        assert_eq!(others[0].name, "other-uid-2");
        r.delete_route("other", &route).await.expect("ok");
        assert!(r.list_routes("other").await.expect("ok").is_empty());
        assert_eq!(r.list_routes("kubernetes").await.expect("ok").len(), 1);
    }

    #[tokio::test]
    async fn pv_labels_from_volumes() {
        use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};
        let c = FakeCloud::from_config_bytes(
            b"region: r1\nzone: z0\nvolumes: [{id: vol-1, zone: z1}, {id: vol-2}]",
            "t",
        )
        .expect("config");
        let pv = |handle: Option<&str>| PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                csi: handle.map(|h| CSIPersistentVolumeSource {
                    driver: "any".into(),
                    volume_handle: h.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let l = c.pv_labeler().expect("supported");
        let got = l
            .get_labels_for_volume(&pv(Some("vol-1")))
            .await
            .expect("ok");
        assert_eq!(
            got.get("topology.kubernetes.io/zone").map(String::as_str),
            Some("z1")
        );
        assert_eq!(
            got.get("topology.kubernetes.io/region").map(String::as_str),
            Some("r1")
        );
        let got = l
            .get_labels_for_volume(&pv(Some("vol-2")))
            .await
            .expect("ok");
        assert_eq!(
            got.get("topology.kubernetes.io/zone").map(String::as_str),
            Some("z0")
        );
        assert!(l
            .get_labels_for_volume(&pv(None))
            .await
            .expect("ok")
            .is_empty());
        assert!(matches!(
            l.get_labels_for_volume(&pv(Some("vol-9"))).await,
            Err(Error::DiskNotFound)
        ));
    }

    #[tokio::test]
    async fn clusters_list_and_master() {
        let c = cloud();
        let cl = c.clusters().expect("supported");
        assert_eq!(
            cl.list_clusters().await.expect("ok"),
            vec!["kubernetes".to_string()]
        );
        assert_eq!(cl.master("kubernetes").await.expect("ok"), "10.0.0.1");
        assert!(cl.master("nope").await.is_err());
    }

    #[tokio::test]
    async fn injected_failures_are_cloud_errors_until_healed() {
        let c = cloud();
        c.set_failure("instance_metadata", Some(503));
        let v2 = c.instances_v2().expect("supported");
        let err = v2
            .instance_metadata(&node("node-1", None))
            .await
            .err()
            .expect("fails");
        assert_eq!(err.kind(), "cloud_503");
        c.set_failure("instance_metadata", None);
        assert!(v2.instance_metadata(&node("node-1", None)).await.is_ok());
        assert_eq!(c.call_count("instance_metadata"), 2);
        c.clear_calls();
        assert!(c.calls().is_empty());
    }

    #[test]
    fn disabled_capabilities_are_unsupported() {
        let c = FakeCloud::from_config_bytes(b"disabled: [routes, clusters]", "t").expect("valid");
        let caps = crate::capabilities(&c);
        let off: Vec<_> = caps
            .iter()
            .filter(|c| !c.supported)
            .map(|c| c.name)
            .collect();
        // The fake has no in-tree volume plugin.
        assert_eq!(off, vec!["routes", "clusters", "volumes", "attach-detach"]);
    }

    #[test]
    fn bad_configs_name_origin_line_and_field() {
        let err = FakeCloud::from_config_bytes(b"region: r\ninstancez: []\n", "/etc/fake.yaml")
            .err()
            .expect("unknown field");
        let msg = err.to_string();
        assert!(msg.contains("/etc/fake.yaml"), "{msg}");
        assert!(msg.contains("instancez"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        let err = FakeCloud::from_config_bytes(b"disabled: [teleport]", "x")
            .err()
            .expect("bad cap");
        assert!(err.to_string().contains("teleport"), "{err}");
        let err = FakeCloud::from_config_bytes(b"instances: [{name: a, shutdown: maybe}]", "x")
            .err()
            .expect("bad type");
        assert!(err.to_string().contains("shutdown"), "{err}");
    }

    #[test]
    fn json_config_is_accepted_and_empty_is_default() {
        let c =
            FakeCloud::from_config_bytes(br#"{"region": "r1", "instances": [{"name": "n"}]}"#, "j")
                .expect("json");
        assert_eq!(c.lock().config.instances.len(), 1);
        let e = FakeCloud::from_config_bytes(b"  \n", "empty").expect("empty ok");
        assert_eq!(e.lock().config, FakeConfig::default());
        assert!(e.has_cluster_id());
    }

    #[test]
    fn panic_on_names_known_methods_and_panics_there() {
        let err = FakeCloud::from_config_bytes(b"panicOn: [no_such_call]\n", "f.yaml")
            .err()
            .expect("unknown method")
            .to_string();
        assert!(
            err.contains("panicOn: unknown method \"no_such_call\""),
            "{err}"
        );
        let cloud =
            FakeCloud::from_config_bytes(b"panicOn: [list_clusters]\n", "f.yaml").expect("config");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async { cloud.list_clusters().await })
        }));
        assert!(panicked.is_err(), "list_clusters should have panicked");
        // The lock is not poisoned for the next caller.
        assert_eq!(cloud.call_count("list_clusters"), 1);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use serde_yaml::Value;

        /// Any YAML value with extreme numbers: what a field is mutated to.
        fn any_yaml() -> impl Strategy<Value = Value> {
            prop_oneof![
                "[ -~]{0,16}".prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                any::<f64>().prop_map(Value::from),
                Just(Value::from(f64::NAN)),
                Just(Value::from(f64::NEG_INFINITY)),
                any::<bool>().prop_map(Value::from),
                Just(Value::Null),
                Just(Value::Sequence(vec![Value::from(-1)])),
            ]
        }

        const FIELDS: &[&[&str]] = &[
            &["region"],
            &["zone"],
            &["hasClusterID"],
            &["instances"],
            &["instances", "0", "name"],
            &["instances", "0", "instanceType"],
            &["instances", "0", "shutdown"],
            &["instances", "0", "addresses"],
            &["instances", "0", "labels"],
            &["routes"],
            &["clusters"],
            &["volumes", "0", "id"],
            &["volumes", "0", "zone"],
            &["disabled"],
            &["panicOn"],
            &["unknownKey"],
        ];

        fn set(doc: &mut Value, path: &[&str], value: Value) {
            let mut cur = doc;
            for (i, key) in path.iter().enumerate() {
                let last = i + 1 == path.len();
                let next = match cur {
                    Value::Mapping(m) if last => {
                        m.insert(Value::from(*key), value);
                        return;
                    }
                    Value::Mapping(m) => m.get_mut(*key),
                    Value::Sequence(s) => key.parse::<usize>().ok().and_then(|n| s.get_mut(n)),
                    _ => None,
                };
                match next {
                    Some(n) => cur = n,
                    None => return,
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// The fake's config with fields mutated to any type: accepted, or refused with
            /// the origin and a mutated key named; never a panic.
            #[test]
            fn mutated_config_is_accepted_or_names_the_key(
                mutations in prop::collection::vec((prop::sample::select(FIELDS), any_yaml()), 1..4),
            ) {
                let mut doc: Value = serde_yaml::from_str(
                    "region: r\nzone: z\ninstances: [{name: n, instanceType: t, addresses: [{type: InternalIP, address: 10.0.0.1}]}]\nvolumes: [{id: v}]\n",
                ).expect("yaml");
                for (path, value) in &mutations {
                    set(&mut doc, path, value.clone());
                }
                let text = serde_yaml::to_string(&doc).expect("yaml");
                if let Err(e) = FakeCloud::from_config_bytes(text.as_bytes(), "f.yaml") {
                    let msg = e.to_string();
                    prop_assert!(msg.contains("f.yaml"), "{msg}");
                    prop_assert!(
                        mutations.iter().any(|(path, _)| path.iter().any(|k| msg.contains(k))),
                        "names none of the mutated keys: {msg}"
                    );
                }
            }

            /// Any bytes, and the sample's text mutated (not only its values): accepted or
            /// refused naming the file, with a line or field where YAML gives one.
            #[test]
            fn arbitrary_and_mutated_text_never_panics(
                text in prop_oneof![
                    crate::fuzz::arbitrary_text(),
                    crate::fuzz::mutated("region: r\nzone: z\ninstances:\n  - name: n\n    instanceType: t\n    addresses: [{type: InternalIP, address: 10.0.0.1}]\nvolumes: [{id: v}]\n"),
                ],
            ) {
                if let Err(e) = FakeCloud::from_config_bytes(text.as_bytes(), "f.yaml") {
                    let msg = e.to_string();
                    prop_assert!(msg.contains("f.yaml"), "{msg}");
                }
            }
        }
    }
}
