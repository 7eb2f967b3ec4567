//! A provider wrapper that times and counts every call, and can trace each one.
//!
//! Upstream each provider family keeps its own `cloudprovider_<provider>_api_request_*`
//! metrics; here one wrapper does it for every provider, labelled by provider and request,
//! so a new provider gets the metrics without writing any code. With `--trace-cloud-calls
//! FILE` every call is also written as one JSON line ([`TraceRecord`]), which the teaching
//! views turn into sequence diagrams of which component asked the cloud what.

use std::fs::OpenOptions;
use std::future::Future;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LoadBalancerStatus, Node, NodeAddress, PersistentVolume, PersistentVolumeSpec, Service,
};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{
    Clusters, Error, InstanceMetadata, Instances, InstancesV2, Interface, LoadBalancer,
    ProvisionedVolume, PvLabeler, Result, Route, Routes, VolumeAttacher, VolumeProvisioner,
    VolumeRequest, Zone, Zones,
};

/// The call metrics, registered once per process and shared by every wrapped provider.
#[derive(Clone)]
pub struct ProviderMetrics {
    duration: HistogramVec,
    errors: IntCounterVec,
}

impl ProviderMetrics {
    /// Creates `cloudprovider_api_request_duration_seconds` and
    /// `cloudprovider_api_request_errors_total` (labels `provider`, `request`) in `registry`.
    pub fn register(registry: &prometheus::Registry) -> Result<Self> {
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "cloudprovider_api_request_duration_seconds",
                "Latency of cloud provider calls, by provider and request (method).",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0, 30.0,
            ]),
            &["provider", "request"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "cloudprovider_api_request_errors_total",
                "Cloud provider calls that returned an error, by provider and request (method).",
            ),
            &["provider", "request"],
        )?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        Ok(Self { duration, errors })
    }
}

/// One traced call, as written to the `--trace-cloud-calls` file (one JSON object a line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Wall-clock start of the call, milliseconds since the Unix epoch.
    pub ts_unix_ms: u64,
    /// The personality that made the call (`cloud-controller-manager`, `kubelet-helper`, ...).
    pub component: String,
    /// The provider called.
    pub provider: String,
    /// The method, as named in the traits (`instance_metadata`, ...).
    pub method: String,
    /// The arguments (nodes and services by name).
    pub args: Value,
    /// What the call returned, when it succeeded.
    pub result: Option<Value>,
    /// The error, when it failed.
    pub error: Option<String>,
    /// How long the call took.
    pub latency_ms: f64,
}

/// Writes [`TraceRecord`]s, one line each, flushed per call so a crash loses nothing written.
pub struct CallTracer {
    component: String,
    out: Mutex<Box<dyn Write + Send>>,
}

impl CallTracer {
    /// Appends to `path` (created if missing), naming `component` in every record.
    pub fn open(path: &Path, component: &str) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| Error::OpenTraceFile {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Self::to_writer(Box::new(BufWriter::new(file)), component))
    }

    /// Writes to any sink (tests use an in-memory buffer).
    pub fn to_writer(out: Box<dyn Write + Send>, component: &str) -> Self {
        Self {
            component: component.into(),
            out: Mutex::new(out),
        }
    }

    fn write(&self, record: &TraceRecord) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let written = serde_json::to_writer(&mut *out, record)
            .map_err(std::io::Error::other)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(e) = written {
            tracing::warn!(error = %e, "could not write cloud call trace");
        }
    }
}

struct Observer {
    provider: String,
    metrics: Option<ProviderMetrics>,
    tracer: Option<CallTracer>,
}

impl Observer {
    async fn observe<T: Serialize>(
        &self,
        method: &'static str,
        // Built only when a trace is written: the node list of a load-balancer call is
        // thousands of names at scale.
        args: impl FnOnce() -> Value,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let ts_unix_ms = self.tracer.as_ref().map(|_| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default()
        });
        let start = Instant::now();
        let result = call.await;
        let elapsed = start.elapsed();
        if let Some(m) = &self.metrics {
            let labels = [self.provider.as_str(), method];
            m.duration
                .with_label_values(&labels)
                .observe(elapsed.as_secs_f64());
            if result.is_err() {
                m.errors.with_label_values(&labels).inc();
            }
        }
        tracing::debug!(provider = %self.provider, method, latency_ms = elapsed.as_secs_f64() * 1e3, ok = result.is_ok(), "cloud call");
        if let Some(t) = &self.tracer {
            let (result_value, error) = match &result {
                Ok(v) => (Some(serde_json::to_value(v).unwrap_or(Value::Null)), None),
                Err(e) => (None, Some(crate::Chain(e).to_string())),
            };
            t.write(&TraceRecord {
                ts_unix_ms: ts_unix_ms.unwrap_or_default(),
                component: t.component.clone(),
                provider: self.provider.clone(),
                method: method.into(),
                args: args(),
                result: result_value,
                error,
                latency_ms: elapsed.as_secs_f64() * 1e3,
            });
        }
        result
    }
}

/// A provider whose every call is timed, counted and optionally traced.
///
/// It supports exactly the capabilities of the provider it wraps.
#[derive(Clone)]
pub struct Instrumented {
    inner: Arc<dyn Interface>,
    obs: Arc<Observer>,
}

impl Instrumented {
    /// Wraps `inner`; `metrics` and `tracer` are each optional.
    pub fn new(
        inner: Arc<dyn Interface>,
        metrics: Option<ProviderMetrics>,
        tracer: Option<CallTracer>,
    ) -> Self {
        let provider = inner.provider_name().to_string();
        Self {
            inner,
            obs: Arc::new(Observer {
                provider,
                metrics,
                tracer,
            }),
        }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &Arc<dyn Interface> {
        &self.inner
    }

    fn inst(&self) -> Result<&dyn Instances> {
        self.inner.instances().ok_or(Error::NotImplemented)
    }
    fn inst2(&self) -> Result<&dyn InstancesV2> {
        self.inner.instances_v2().ok_or(Error::NotImplemented)
    }
    fn lb(&self) -> Result<&dyn LoadBalancer> {
        self.inner.load_balancer().ok_or(Error::NotImplemented)
    }
    fn zones_(&self) -> Result<&dyn Zones> {
        self.inner.zones().ok_or(Error::NotImplemented)
    }
    fn routes_(&self) -> Result<&dyn Routes> {
        self.inner.routes().ok_or(Error::NotImplemented)
    }
    fn clusters_(&self) -> Result<&dyn Clusters> {
        self.inner.clusters().ok_or(Error::NotImplemented)
    }
    fn pv_labeler_(&self) -> Result<&dyn PvLabeler> {
        self.inner.pv_labeler().ok_or(Error::NotImplemented)
    }
    fn volumes_(&self) -> Result<&dyn VolumeProvisioner> {
        self.inner.volume_provisioner().ok_or(Error::NotImplemented)
    }
    fn attacher_(&self) -> Result<&dyn VolumeAttacher> {
        self.inner.volume_attacher().ok_or(Error::NotImplemented)
    }
}

fn node_name(n: &Node) -> &str {
    n.metadata.name.as_deref().unwrap_or_default()
}

fn svc_key(s: &Service) -> String {
    format!(
        "{}/{}",
        s.metadata.namespace.as_deref().unwrap_or_default(),
        s.metadata.name.as_deref().unwrap_or_default()
    )
}

fn node_names(nodes: &[Node]) -> Vec<&str> {
    nodes.iter().map(node_name).collect()
}

#[async_trait]
impl Interface for Instrumented {
    async fn initialize(&self, client: Option<kube::Client>) -> Result<()> {
        let has_client = client.is_some();
        self.obs
            .observe(
                "initialize",
                || json!({"client": has_client}),
                self.inner.initialize(client),
            )
            .await
    }
    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }
    fn credentials_health(&self) -> std::result::Result<(), String> {
        self.inner.credentials_health()
    }
    fn has_cluster_id(&self) -> bool {
        self.inner.has_cluster_id()
    }
    fn instances(&self) -> Option<&dyn Instances> {
        self.inner.instances().map(|_| self as &dyn Instances)
    }
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        self.inner.instances_v2().map(|_| self as &dyn InstancesV2)
    }
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.inner
            .load_balancer()
            .map(|_| self as &dyn LoadBalancer)
    }
    fn zones(&self) -> Option<&dyn Zones> {
        self.inner.zones().map(|_| self as &dyn Zones)
    }
    fn routes(&self) -> Option<&dyn Routes> {
        self.inner.routes().map(|_| self as &dyn Routes)
    }
    fn clusters(&self) -> Option<&dyn Clusters> {
        self.inner.clusters().map(|_| self as &dyn Clusters)
    }
    fn pv_labeler(&self) -> Option<&dyn PvLabeler> {
        self.inner.pv_labeler().map(|_| self as &dyn PvLabeler)
    }
    fn volume_provisioner(&self) -> Option<&dyn VolumeProvisioner> {
        self.inner
            .volume_provisioner()
            .map(|_| self as &dyn VolumeProvisioner)
    }
    fn volume_attacher(&self) -> Option<&dyn VolumeAttacher> {
        self.inner
            .volume_attacher()
            .map(|_| self as &dyn VolumeAttacher)
    }
    // Admission answers are not cloud calls (a webhook decides from the object, and any
    // cloud call it makes goes through the provider's own client): passed through untimed.
    fn webhooks(&self) -> Option<&dyn crate::Webhooks> {
        self.inner.webhooks()
    }
}

#[async_trait]
impl VolumeAttacher for Instrumented {
    // As for the provisioner: these need no cloud call and are not observed.
    fn plugin_name(&self) -> &str {
        self.inner
            .volume_attacher()
            .map(|v| v.plugin_name())
            .unwrap_or_default()
    }
    fn pv_volume_id(&self, spec: &PersistentVolumeSpec) -> Option<String> {
        self.inner.volume_attacher()?.pv_volume_id(spec)
    }
    fn pod_volume_id(&self, volume: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
        self.inner.volume_attacher()?.pod_volume_id(volume)
    }
    async fn attach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let args = || json!({ "instanceID": instance_id, "volumeID": volume_id });
        self.obs
            .observe("attach_disk", args, async {
                self.attacher_()?.attach_disk(instance_id, volume_id).await
            })
            .await
    }
    async fn detach_disk(&self, instance_id: &str, volume_id: &str) -> Result<()> {
        let args = || json!({ "instanceID": instance_id, "volumeID": volume_id });
        self.obs
            .observe("detach_disk", args, async {
                self.attacher_()?.detach_disk(instance_id, volume_id).await
            })
            .await
    }
    async fn disk_is_attached(&self, instance_id: &str, volume_id: &str) -> Result<bool> {
        let args = || json!({ "instanceID": instance_id, "volumeID": volume_id });
        self.obs
            .observe("disk_is_attached", args, async {
                self.attacher_()?
                    .disk_is_attached(instance_id, volume_id)
                    .await
            })
            .await
    }
    async fn disks_are_attached(
        &self,
        instance_id: &str,
        volume_ids: &[String],
    ) -> Result<BTreeMap<String, bool>> {
        let args = || json!({ "instanceID": instance_id, "volumeIDs": volume_ids });
        self.obs
            .observe("disks_are_attached", args, async {
                self.attacher_()?
                    .disks_are_attached(instance_id, volume_ids)
                    .await
            })
            .await
    }
    async fn get_attachment_disk_path(&self, instance_id: &str, volume_id: &str) -> Result<String> {
        let args = || json!({ "instanceID": instance_id, "volumeID": volume_id });
        self.obs
            .observe("get_attachment_disk_path", args, async {
                self.attacher_()?
                    .get_attachment_disk_path(instance_id, volume_id)
                    .await
            })
            .await
    }
}

#[async_trait]
impl VolumeProvisioner for Instrumented {
    // The inner provider answers these without a cloud call; `?`-less fallbacks keep the
    // wrapper total when the capability vanished (it never does for a given provider).
    fn plugin_name(&self) -> &str {
        self.inner
            .volume_provisioner()
            .map(|v| v.plugin_name())
            .unwrap_or_default()
    }
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        self.inner.volume_provisioner()?.volume_id(pv)
    }
    fn volume_source(&self, volume_id: &str, fs_type: Option<&str>) -> PersistentVolumeSpec {
        self.inner
            .volume_provisioner()
            .map(|v| v.volume_source(volume_id, fs_type))
            .unwrap_or_default()
    }
    fn class_parameters(
        &self,
        parameters: &std::collections::BTreeMap<String, String>,
    ) -> std::result::Result<crate::ClassParameters, String> {
        match self.inner.volume_provisioner() {
            Some(v) => v.class_parameters(parameters),
            None => {
                crate::cinder_class_parameters(VolumeProvisioner::plugin_name(self), parameters)
            }
        }
    }
    fn max_volume_name_len(&self) -> usize {
        self.inner
            .volume_provisioner()
            .map_or(255, |v| v.max_volume_name_len())
    }
    async fn create_volume(&self, request: &VolumeRequest) -> Result<ProvisionedVolume> {
        let args = || serde_json::to_value(request).unwrap_or(Value::Null);
        self.obs
            .observe("create_volume", args, async {
                self.volumes_()?.create_volume(request).await
            })
            .await
    }
    async fn delete_volume(&self, volume_id: &str) -> Result<()> {
        let args = || json!({ "volumeID": volume_id });
        self.obs
            .observe("delete_volume", args, async {
                self.volumes_()?.delete_volume(volume_id).await
            })
            .await
    }
    async fn expand_volume(&self, volume_id: &str, new_size_gib: u64) -> Result<u64> {
        let args = || json!({ "volumeID": volume_id, "newSizeGiB": new_size_gib });
        self.obs
            .observe("expand_volume", args, async {
                self.volumes_()?
                    .expand_volume(volume_id, new_size_gib)
                    .await
            })
            .await
    }
    async fn find_volumes(
        &self,
        filter: crate::VolumeFilter<'_>,
    ) -> Result<Vec<crate::CloudVolume>> {
        let args = || match filter {
            crate::VolumeFilter::All => json!({}),
            crate::VolumeFilter::Id(id) => json!({ "volumeID": id }),
            crate::VolumeFilter::Name(name) => json!({ "name": name }),
        };
        self.obs
            .observe("find_volumes", args, async {
                self.volumes_()?.find_volumes(filter).await
            })
            .await
    }
}

#[async_trait]
impl PvLabeler for Instrumented {
    async fn get_labels_for_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<BTreeMap<String, String>> {
        let args =
            || json!({ "persistentVolume": pv.metadata.name.as_deref().unwrap_or_default() });
        self.obs
            .observe("get_labels_for_volume", args, async {
                self.pv_labeler_()?.get_labels_for_volume(pv).await
            })
            .await
    }
}

#[async_trait]
impl Instances for Instrumented {
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>> {
        let args = || json!({ "name": name });
        self.obs
            .observe("node_addresses", args, async {
                self.inst()?.node_addresses(name).await
            })
            .await
    }
    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>> {
        let args = || json!({ "providerID": provider_id });
        self.obs
            .observe("node_addresses_by_provider_id", args, async {
                self.inst()?
                    .node_addresses_by_provider_id(provider_id)
                    .await
            })
            .await
    }
    async fn instance_id(&self, name: &str) -> Result<String> {
        let args = || json!({ "name": name });
        self.obs
            .observe("instance_id", args, async {
                self.inst()?.instance_id(name).await
            })
            .await
    }
    async fn instance_type(&self, name: &str) -> Result<String> {
        let args = || json!({ "name": name });
        self.obs
            .observe("instance_type", args, async {
                self.inst()?.instance_type(name).await
            })
            .await
    }
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String> {
        let args = || json!({ "providerID": provider_id });
        self.obs
            .observe("instance_type_by_provider_id", args, async {
                self.inst()?.instance_type_by_provider_id(provider_id).await
            })
            .await
    }
    async fn add_ssh_key_to_all_instances(&self, user: &str, key: &[u8]) -> Result<()> {
        // The key itself is not traced: traces are shared for teaching.
        let args = || json!({ "user": user, "keyBytes": key.len() });
        self.obs
            .observe("add_ssh_key_to_all_instances", args, async {
                self.inst()?.add_ssh_key_to_all_instances(user, key).await
            })
            .await
    }
    async fn current_node_name(&self, hostname: &str) -> Result<String> {
        let args = || json!({ "hostname": hostname });
        self.obs
            .observe("current_node_name", args, async {
                self.inst()?.current_node_name(hostname).await
            })
            .await
    }
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let args = || json!({ "providerID": provider_id });
        self.obs
            .observe("instance_exists_by_provider_id", args, async {
                self.inst()?
                    .instance_exists_by_provider_id(provider_id)
                    .await
            })
            .await
    }
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool> {
        let args = || json!({ "providerID": provider_id });
        self.obs
            .observe("instance_shutdown_by_provider_id", args, async {
                self.inst()?
                    .instance_shutdown_by_provider_id(provider_id)
                    .await
            })
            .await
    }
}

#[async_trait]
impl InstancesV2 for Instrumented {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        let args = || json!({ "node": node_name(node) });
        self.obs
            .observe("instance_exists", args, async {
                self.inst2()?.instance_exists(node).await
            })
            .await
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        let args = || json!({ "node": node_name(node) });
        self.obs
            .observe("instance_shutdown", args, async {
                self.inst2()?.instance_shutdown(node).await
            })
            .await
    }
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata> {
        let args = || json!({ "node": node_name(node) });
        self.obs
            .observe("instance_metadata", args, async {
                self.inst2()?.instance_metadata(node).await
            })
            .await
    }
}

#[async_trait]
impl LoadBalancer for Instrumented {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let args = || json!({ "cluster": cluster_name, "service": svc_key(service) });
        self.obs
            .observe("get_load_balancer", args, async {
                self.lb()?.get_load_balancer(cluster_name, service).await
            })
            .await
    }
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        match self.inner.load_balancer() {
            Some(lb) => lb.get_load_balancer_name(cluster_name, service),
            None => crate::default_load_balancer_name(service),
        }
    }
    /// No cloud call: not observed.
    fn check_service(&self, service: &Service) -> Result<()> {
        self.lb()?.check_service(service)
    }
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        let args = || json!({ "cluster": cluster_name, "service": svc_key(service), "nodes": node_names(nodes) });
        self.obs
            .observe("ensure_load_balancer", args, async {
                self.lb()?
                    .ensure_load_balancer(cluster_name, service, nodes)
                    .await
            })
            .await
    }
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        let args = || json!({ "cluster": cluster_name, "service": svc_key(service), "nodes": node_names(nodes) });
        self.obs
            .observe("update_load_balancer", args, async {
                self.lb()?
                    .update_load_balancer(cluster_name, service, nodes)
                    .await
            })
            .await
    }
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let args = || json!({ "cluster": cluster_name, "service": svc_key(service) });
        self.obs
            .observe("ensure_load_balancer_deleted", args, async {
                self.lb()?
                    .ensure_load_balancer_deleted(cluster_name, service)
                    .await
            })
            .await
    }
}

#[async_trait]
impl Zones for Instrumented {
    async fn get_zone(&self) -> Result<Zone> {
        self.obs
            .observe("get_zone", || json!({}), async {
                self.zones_()?.get_zone().await
            })
            .await
    }
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone> {
        let args = || json!({ "providerID": provider_id });
        self.obs
            .observe("get_zone_by_provider_id", args, async {
                self.zones_()?.get_zone_by_provider_id(provider_id).await
            })
            .await
    }
    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone> {
        let args = || json!({ "name": name });
        self.obs
            .observe("get_zone_by_node_name", args, async {
                self.zones_()?.get_zone_by_node_name(name).await
            })
            .await
    }
}

#[async_trait]
impl Routes for Instrumented {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        let args = || json!({ "cluster": cluster_name });
        self.obs
            .observe("list_routes", args, async {
                self.routes_()?.list_routes(cluster_name).await
            })
            .await
    }
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        let args = || json!({ "cluster": cluster_name, "nameHint": name_hint, "route": route });
        self.obs
            .observe("create_route", args, async {
                self.routes_()?
                    .create_route(cluster_name, name_hint, route)
                    .await
            })
            .await
    }
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()> {
        let args = || json!({ "cluster": cluster_name, "route": route });
        self.obs
            .observe("delete_route", args, async {
                self.routes_()?.delete_route(cluster_name, route).await
            })
            .await
    }
}

#[async_trait]
impl Clusters for Instrumented {
    async fn list_clusters(&self) -> Result<Vec<String>> {
        self.obs
            .observe("list_clusters", || json!({}), async {
                self.clusters_()?.list_clusters().await
            })
            .await
    }
    async fn master(&self, cluster_name: &str) -> Result<String> {
        let args = || json!({ "cluster": cluster_name });
        self.obs
            .observe("master", args, async {
                self.clusters_()?.master(cluster_name).await
            })
            .await
    }
}

#[cfg(test)]
#[allow(clippy::err_expect)] // the Ok types are not Debug
mod tests {
    use super::*;
    use crate::fake::FakeCloud;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A `Write` that appends to a shared buffer the test can read.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn setup(config: &str) -> (FakeCloud, Instrumented, prometheus::Registry, Buf) {
        let fake = FakeCloud::from_config_bytes(config.as_bytes(), "t").expect("config");
        let reg = prometheus::Registry::new();
        let metrics = ProviderMetrics::register(&reg).expect("metrics");
        let buf = Buf::default();
        let tracer = CallTracer::to_writer(Box::new(buf.clone()), "cloud-controller-manager");
        let wrapped = Instrumented::new(Arc::new(fake.clone()), Some(metrics), Some(tracer));
        (fake, wrapped, reg, buf)
    }

    fn records(buf: &Buf) -> Vec<TraceRecord> {
        let bytes = buf.0.lock().expect("lock").clone();
        String::from_utf8(bytes)
            .expect("utf8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    }

    fn metric_value(reg: &prometheus::Registry, name: &str, request: &str) -> f64 {
        reg.gather()
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric().iter())
            .filter(|m| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "request" && l.value() == request)
            })
            .map(|m| {
                if m.get_histogram().get_sample_count() > 0 {
                    m.get_histogram().get_sample_count() as f64
                } else {
                    m.get_counter().get_value()
                }
            })
            .sum()
    }

    #[tokio::test]
    async fn every_call_is_counted_and_errors_are_counted_separately() {
        let (_fake, cloud, reg, _buf) =
            setup("instances: [{name: n1, addresses: [{type: InternalIP, address: 10.0.0.1}]}]");
        let v2 = cloud.instances_v2().expect("supported");
        v2.instance_metadata(&node("n1")).await.expect("ok");
        v2.instance_metadata(&node("n1")).await.expect("ok");
        assert!(v2.instance_metadata(&node("ghost")).await.is_err());
        assert_eq!(
            metric_value(
                &reg,
                "cloudprovider_api_request_duration_seconds",
                "instance_metadata"
            ),
            3.0
        );
        assert_eq!(
            metric_value(
                &reg,
                "cloudprovider_api_request_errors_total",
                "instance_metadata"
            ),
            1.0
        );
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&reg.gather())
            .expect("encode");
        assert!(
            text.contains(r#"cloudprovider_api_request_errors_total{provider="fake",request="instance_metadata"} 1"#),
            "{text}"
        );
    }

    #[tokio::test]
    async fn trace_has_one_line_per_call_with_args_and_result() {
        let (_fake, cloud, _reg, buf) =
            setup("instances: [{name: n1, instanceType: m1.small}]\nzone: nova\nregion: r1");
        cloud
            .instances()
            .expect("v1")
            .instance_type("n1")
            .await
            .expect("ok");
        assert!(cloud
            .zones()
            .expect("zones")
            .get_zone_by_node_name("ghost")
            .await
            .is_err());
        cloud.initialize(None).await.expect("init");
        let recs = records(&buf);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].component, "cloud-controller-manager");
        assert_eq!(recs[0].provider, "fake");
        assert_eq!(recs[0].method, "instance_type");
        assert_eq!(recs[0].args, json!({"name": "n1"}));
        assert_eq!(recs[0].result, Some(json!("m1.small")));
        assert_eq!(recs[0].error, None);
        assert!(recs[0].latency_ms >= 0.0);
        assert!(recs[0].ts_unix_ms > 1_600_000_000_000);
        assert_eq!(recs[1].method, "get_zone_by_node_name");
        assert_eq!(recs[1].error.as_deref(), Some("instance not found"));
        assert_eq!(recs[2].method, "initialize");
    }

    #[tokio::test]
    async fn wrapper_mirrors_capabilities_and_passes_calls_through() {
        let (fake, cloud, _reg, buf) = setup("disabled: [routes]");
        assert!(cloud.routes().is_none());
        assert!(cloud.load_balancer().is_some());
        assert_eq!(cloud.provider_name(), "fake");
        let svc = Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let lb = cloud.load_balancer().expect("lb");
        lb.ensure_load_balancer("k", &svc, &[node("a"), node("b")])
            .await
            .expect("ok");
        assert_eq!(lb.get_load_balancer_name("k", &svc), "au1");
        assert_eq!(fake.call_count("ensure_load_balancer"), 1);
        let recs = records(&buf);
        assert_eq!(
            recs[0].args,
            json!({"cluster": "k", "service": "ns/web", "nodes": ["a", "b"]})
        );
        assert_eq!(
            recs[0].result,
            Some(json!({"ingress": [{"ip": "192.0.2.1"}]}))
        );
    }

    #[test]
    fn registering_metrics_twice_in_one_registry_is_an_error() {
        let reg = prometheus::Registry::new();
        ProviderMetrics::register(&reg).expect("first");
        assert!(matches!(
            ProviderMetrics::register(&reg),
            Err(Error::RegisterMetrics(_))
        ));
    }

    #[test]
    fn trace_file_is_appended_and_unwritable_path_is_named() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("calls.jsonl");
        CallTracer::open(&path, "x").expect("open");
        assert!(path.exists());
        let bad = dir.path().join("missing-dir/calls.jsonl");
        let err = CallTracer::open(&bad, "x").err().expect("fails");
        assert!(err.to_string().contains("missing-dir/calls.jsonl"), "{err}");
    }
}
