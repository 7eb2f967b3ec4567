//! Metrics shared by the controllers, under the names upstream dashboards expect
//! (`k8s.io/component-base/metrics/prometheus/workqueue`, the service controller's
//! `service_controller_*`, the node controllers' counters, node IPAM's
//! `node_ipam_controller_cidrset_*`).

use prometheus::{
    exponential_buckets, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGaugeVec, Opts, Registry,
};

/// Every metric of the controllers.
#[derive(Clone)]
pub(crate) struct Metrics {
    /// `workqueue_depth{name}`.
    pub depth: IntGaugeVec,
    /// `workqueue_adds_total{name}`.
    pub adds: IntCounterVec,
    /// `workqueue_queue_duration_seconds{name}`.
    pub queue_duration: HistogramVec,
    /// `workqueue_work_duration_seconds{name}`.
    pub work_duration: HistogramVec,
    /// `workqueue_retries_total{name}`.
    pub retries: IntCounterVec,
    /// `workqueue_unfinished_work_seconds{name}`.
    pub unfinished: GaugeVec,
    /// `workqueue_longest_running_processor_seconds{name}`.
    pub longest_running: GaugeVec,
    /// `service_controller_loadbalancer_sync_total`.
    pub lb_sync: IntCounter,
    /// `service_controller_nodesync_latency_seconds`.
    pub nodesync_latency: Histogram,
    /// `service_controller_update_loadbalancer_host_latency_seconds`.
    pub update_lb_host_latency: Histogram,
    /// `service_controller_nodesync_error_total`.
    pub nodesync_errors: IntCounter,
    /// `cloud_node_lifecycle_controller_shutdown_total`-style counters, by action
    /// (`taint`, `untaint`, `delete`).
    pub lifecycle_actions: IntCounterVec,
    /// `route_controller_route_sync_total`.
    pub route_sync: IntCounter,
    /// `node_controller_cloud_provider_taint_removal_delay_seconds`: from a Node's creation to
    /// the cloud-node controller removing its uninitialized taint.
    pub taint_removal_delay: Histogram,
    /// `node_controller_initial_node_sync_delay_seconds`: from a Node's creation to the end
    /// of its initialisation (addresses written, event sent).
    pub initial_node_sync_delay: Histogram,
    /// `node_ipam_controller_cidrset_cidrs_allocations_total{clusterCIDR}`.
    pub cidrset_allocations: IntCounterVec,
    /// `node_ipam_controller_cidrset_cidrs_releases_total{clusterCIDR}`.
    pub cidrset_releases: IntCounterVec,
    /// `node_ipam_controller_cidrset_usage_cidrs{clusterCIDR}`: the fraction in use.
    pub cidrset_usage: GaugeVec,
    /// `node_ipam_controller_cidrset_allocation_tries_per_request{clusterCIDR}`.
    pub cidrset_tries: HistogramVec,
}

impl Metrics {
    /// Creates the metrics and registers them; a metric already registered (the runtime
    /// started the controllers twice with one registry) is kept unregistered rather than
    /// failing the start.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let name = &["name"];
        let cluster_cidr = &["clusterCIDR"];
        let buckets = exponential_buckets(1e-8, 10.0, 10)?;
        let m = Self {
            depth: IntGaugeVec::new(Opts::new("workqueue_depth", "Current depth of workqueue"), name)?,
            adds: IntCounterVec::new(
                Opts::new("workqueue_adds_total", "Total number of adds handled by workqueue"),
                name,
            )?,
            queue_duration: HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_queue_duration_seconds",
                    "How long in seconds an item stays in workqueue before being requested.",
                )
                .buckets(buckets.clone()),
                name,
            )?,
            work_duration: HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_work_duration_seconds",
                    "How long in seconds processing an item from workqueue takes.",
                )
                .buckets(buckets),
                name,
            )?,
            retries: IntCounterVec::new(
                Opts::new("workqueue_retries_total", "Total number of retries handled by workqueue"),
                name,
            )?,
            unfinished: GaugeVec::new(
                Opts::new(
                    "workqueue_unfinished_work_seconds",
                    "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
                ),
                name,
            )?,
            longest_running: GaugeVec::new(
                Opts::new(
                    "workqueue_longest_running_processor_seconds",
                    "How many seconds has the longest running processor for workqueue been running.",
                ),
                name,
            )?,
            lb_sync: IntCounter::new(
                "service_controller_loadbalancer_sync_total",
                "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
            )?,
            nodesync_latency: Histogram::with_opts(
                HistogramOpts::new(
                    "service_controller_nodesync_latency_seconds",
                    "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
                )
                .buckets(exponential_buckets(1.0, 2.0, 15)?),
            )?,
            update_lb_host_latency: Histogram::with_opts(
                HistogramOpts::new(
                    "service_controller_update_loadbalancer_host_latency_seconds",
                    "A metric measuring the latency for updating each load balancer hosts.",
                )
                .buckets(exponential_buckets(1.0, 2.0, 15)?),
            )?,
            nodesync_errors: IntCounter::new(
                "service_controller_nodesync_error_total",
                "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
            )?,
            lifecycle_actions: IntCounterVec::new(
                Opts::new(
                    "cloud_node_lifecycle_controller_actions_total",
                    "Shutdown taints added and removed and Nodes deleted by the cloud-node-lifecycle controller",
                ),
                &["action"],
            )?,
            route_sync: IntCounter::new(
                "route_controller_route_sync_total",
                "A metric counting the amount of times routes have been synced with the cloud provider.",
            )?,
            // Upstream's buckets: 1s to about 17 minutes.
            taint_removal_delay: Histogram::with_opts(
                HistogramOpts::new(
                    "node_controller_cloud_provider_taint_removal_delay_seconds",
                    "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.",
                )
                .buckets(exponential_buckets(1.0, 4.0, 6)?),
            )?,
            initial_node_sync_delay: Histogram::with_opts(
                HistogramOpts::new(
                    "node_controller_initial_node_sync_delay_seconds",
                    "Number of seconds after node creation when NodeController finished the initial synchronization of a single node.",
                )
                .buckets(exponential_buckets(1.0, 4.0, 6)?),
            )?,
            cidrset_allocations: IntCounterVec::new(
                Opts::new(
                    "node_ipam_controller_cidrset_cidrs_allocations_total",
                    "Counter measuring total number of CIDR allocations.",
                ),
                cluster_cidr,
            )?,
            cidrset_releases: IntCounterVec::new(
                Opts::new(
                    "node_ipam_controller_cidrset_cidrs_releases_total",
                    "Counter measuring total number of CIDR releases.",
                ),
                cluster_cidr,
            )?,
            cidrset_usage: GaugeVec::new(
                Opts::new(
                    "node_ipam_controller_cidrset_usage_cidrs",
                    "Gauge measuring percentage of allocated CIDRs.",
                ),
                cluster_cidr,
            )?,
            // Upstream's help text, a copy-paste slip, kept: dashboards show it.
            cidrset_tries: HistogramVec::new(
                HistogramOpts::new(
                    "node_ipam_controller_cidrset_allocation_tries_per_request",
                    "Number of endpoints added on each Service sync",
                )
                .buckets(exponential_buckets(1.0, 5.0, 5)?),
                cluster_cidr,
            )?,
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(m.depth.clone()),
            Box::new(m.adds.clone()),
            Box::new(m.queue_duration.clone()),
            Box::new(m.work_duration.clone()),
            Box::new(m.retries.clone()),
            Box::new(m.unfinished.clone()),
            Box::new(m.longest_running.clone()),
            Box::new(m.lb_sync.clone()),
            Box::new(m.nodesync_latency.clone()),
            Box::new(m.update_lb_host_latency.clone()),
            Box::new(m.nodesync_errors.clone()),
            Box::new(m.lifecycle_actions.clone()),
            Box::new(m.route_sync.clone()),
            Box::new(m.taint_removal_delay.clone()),
            Box::new(m.initial_node_sync_delay.clone()),
            Box::new(m.cidrset_allocations.clone()),
            Box::new(m.cidrset_releases.clone()),
            Box::new(m.cidrset_usage.clone()),
            Box::new(m.cidrset_tries.clone()),
        ];
        for c in collectors {
            match registry.register(c) {
                Ok(()) | Err(prometheus::Error::AlreadyReg) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(m)
    }
}
