//! The node IPAM controller with the range allocator (upstream
//! `k8s.io/kubernetes/pkg/controller/nodeipam`: `ipam.rangeAllocator` over one
//! `cidrset.CidrSet` per cluster CIDR; kube-controller-manager runs it, and the upstream
//! cloud-controller-manager example registers it as `node-ipam-controller`). With
//! `--allocate-node-cidrs=true`, every Node without `spec.podCIDRs` gets the next free node CIDR
//! of each `--cluster-cidr` (one per family on a dual-stack cluster, in the flag's order) in one
//! strategic merge patch of `spec.podCIDR` and `spec.podCIDRs`, which the route controller then
//! routes. At start the CIDRs Nodes already have, and the parts of
//! `--service-cluster-ip-range` inside a cluster CIDR, are marked used; a deleted Node's CIDRs
//! are freed. When a cluster CIDR is exhausted the Node gets a `CIDRNotAvailable` event and is
//! retried with backoff; upstream writes no Node condition for it, so neither does this.
//!
//! Deliberate differences: a Node whose podCIDR lies outside `--cluster-cidr` at start is
//! logged and left alone instead of failing the whole controller manager; an unparsable
//! `--service-cluster-ip-range` is refused at start instead of logged and ignored; the first
//! CIDR of a dual-stack pair whose second family is exhausted is given back; and a Node patched
//! but not yet seen with its CIDRs in the cache is not given a second pair.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use hypercloud_cloudprovider::Chain;
use hypercloud_options::{ControllerOptions, NodeIpamOptions};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::cidr::Cidr;
use crate::informer::{enqueue_changes, run_node_workers, Informer};
use crate::metrics::Metrics;
use crate::queue::{Action, Backoff, Queue};
use crate::route::pod_cidrs;
use crate::{names, Context, Error, Result};

const CONTROLLER: &str = names::NODE_IPAM.name;
/// Upstream's event reasons (`RecordNodeStatusChange`).
pub const REASON_CIDR_NOT_AVAILABLE: &str = "CIDRNotAvailable";
/// The Node could not be patched with its CIDRs.
pub const REASON_CIDR_ASSIGNMENT_FAILED: &str = "CIDRAssignmentFailed";
/// Upstream `defaultNodeMaskCIDRIPv4` / `defaultNodeMaskCIDRIPv6`.
const DEFAULT_MASK_IPV4: u8 = 24;
const DEFAULT_MASK_IPV6: u8 = 64;
/// Upstream `clusterSubnetMaxDiff`: an IPv6 node mask at most 16 bits longer than its cluster
/// CIDR's prefix (IPv4 has no such limit upstream; its 32 bits bound it).
const CLUSTER_SUBNET_MAX_DIFF: u8 = 16;
/// Upstream `cidrUpdateWorkers`.
const CIDR_UPDATE_WORKERS: u32 = 30;
/// Upstream `cidrUpdateRetries`: patch attempts before giving the CIDRs back.
const CIDR_UPDATE_RETRIES: usize = 3;

/// Node IPAM's validated settings (upstream `startNodeIpamController`'s checks, before the
/// controller starts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpamConfig {
    /// `--cluster-cidr`: one, or one per family.
    pub cluster_cidrs: Vec<Cidr>,
    /// The node CIDR prefix length for each cluster CIDR.
    pub node_mask_sizes: Vec<u8>,
    /// `--service-cluster-ip-range`: none, one, or one per family.
    pub service_cidrs: Vec<Cidr>,
}

fn invalid(flag: &'static str, message: impl Into<String>) -> Error {
    Error::InvalidFlag {
        flag,
        message: message.into(),
    }
}

fn dual_stack(cidrs: &[Cidr]) -> bool {
    cidrs.iter().any(Cidr::is_ipv4) && cidrs.iter().any(|c| !c.is_ipv4())
}

impl IpamConfig {
    /// The settings `options` give node IPAM; `None` with `--allocate-node-cidrs=false` (then
    /// upstream does not look at the other flags either). Errors name the flag.
    pub fn from_options(options: &ControllerOptions) -> Result<Option<IpamConfig>> {
        let shared = &options.kube_cloud_shared;
        if !shared.allocate_node_cidrs {
            return Ok(None);
        }
        let text = shared.cluster_cidr.as_deref().unwrap_or("").trim();
        if text.is_empty() {
            return Err(invalid(
                "--cluster-cidr",
                "must be set when --allocate-node-cidrs=true",
            ));
        }
        let cluster_cidrs = text
            .split(',')
            .map(|c| {
                Cidr::parse(c)
                    .map_err(|_| invalid("--cluster-cidr", format!("invalid CIDR {:?}", c.trim())))
            })
            .collect::<Result<Vec<_>>>()?;
        if cluster_cidrs.len() > 2 {
            return Err(invalid(
                "--cluster-cidr",
                format!(
                    "{} CIDRs given; at most two, one IPv4 and one IPv6 (dual-stack)",
                    cluster_cidrs.len()
                ),
            ));
        }
        if cluster_cidrs.len() == 2 && !dual_stack(&cluster_cidrs) {
            return Err(invalid(
                "--cluster-cidr",
                "two CIDRs must be dual-stack: one IPv4 and one IPv6",
            ));
        }
        let service_cidrs = options
            .node_ipam
            .service_cidrs()
            .map_err(|e| match e {
                hypercloud_options::Error::InvalidFlag { flag, message } => invalid(flag, message),
                e => invalid("--service-cluster-ip-range", e.to_string()),
            })?
            .into_iter()
            .map(|c| {
                Cidr::parse(c).map_err(|_| {
                    invalid("--service-cluster-ip-range", format!("invalid CIDR {c:?}"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if service_cidrs.len() == 2 && !dual_stack(&service_cidrs) {
            return Err(invalid(
                "--service-cluster-ip-range",
                "two CIDRs must be dual-stack: one IPv4 and one IPv6",
            ));
        }
        let masks = node_mask_sizes(&options.node_ipam, &cluster_cidrs)?;
        for (cidr, &(mask, flag)) in cluster_cidrs.iter().zip(&masks) {
            if mask > cidr.width() {
                return Err(invalid(
                    flag,
                    format!(
                        "/{mask} is longer than an IPv{} address",
                        if cidr.is_ipv4() { 4 } else { 6 }
                    ),
                ));
            }
            if mask < cidr.prefix() {
                return Err(invalid(
                    flag,
                    format!(
                        "/{mask} is shorter than the prefix of --cluster-cidr {cidr}: the mask size of the cluster CIDR must be less than or equal to the node CIDR mask size of its family"
                    ),
                ));
            }
            if !cidr.is_ipv4() && mask - cidr.prefix() > CLUSTER_SUBNET_MAX_DIFF {
                return Err(invalid(
                    flag,
                    format!(
                        "/{mask} is more than {CLUSTER_SUBNET_MAX_DIFF} bits longer than the prefix of --cluster-cidr {cidr} (at most 65536 node CIDRs per IPv6 cluster CIDR, as upstream): use a cluster CIDR of /{} or longer, or a shorter node mask",
                        mask - CLUSTER_SUBNET_MAX_DIFF
                    ),
                ));
            }
        }
        Ok(Some(IpamConfig {
            cluster_cidrs,
            node_mask_sizes: masks.into_iter().map(|(m, _)| m).collect(),
            service_cidrs,
        }))
    }
}

/// Each cluster CIDR's node mask size and the flag that set it (upstream
/// `setNodeCIDRMaskSizes`): `--node-cidr-mask-size` only on a single-stack cluster, the
/// per-family flags only for a family the cluster has, 24 and 64 when unset.
fn node_mask_sizes(o: &NodeIpamOptions, cluster: &[Cidr]) -> Result<Vec<(u8, &'static str)>> {
    const MASK: &str = "--node-cidr-mask-size";
    const MASK_V4: &str = "--node-cidr-mask-size-ipv4";
    const MASK_V6: &str = "--node-cidr-mask-size-ipv6";
    let v4 = match o.node_cidr_mask_size_ipv4 {
        0 => DEFAULT_MASK_IPV4,
        m => m,
    };
    let v6 = match o.node_cidr_mask_size_ipv6 {
        0 => DEFAULT_MASK_IPV6,
        m => m,
    };
    let per_family = |c: &Cidr| {
        if c.is_ipv4() {
            (v4, MASK_V4)
        } else {
            (v6, MASK_V6)
        }
    };
    if cluster.len() > 1 {
        if o.node_cidr_mask_size != 0 {
            return Err(invalid(
                MASK,
                "not allowed with dual-stack clusters; use --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6",
            ));
        }
        return Ok(cluster.iter().map(per_family).collect());
    }
    let single_v6 = cluster.first().is_some_and(|c| !c.is_ipv4());
    if o.node_cidr_mask_size != 0 {
        if o.node_cidr_mask_size_ipv4 != 0 || o.node_cidr_mask_size_ipv6 != 0 {
            return Err(invalid(
                MASK,
                "--node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 are not allowed with it; for dual-stack clusters unset it and use the per-family flags",
            ));
        }
        return Ok(cluster
            .iter()
            .map(|_| (o.node_cidr_mask_size, MASK))
            .collect());
    }
    if o.node_cidr_mask_size_ipv4 != 0 && single_v6 {
        return Err(invalid(
            MASK_V4,
            "not allowed for a single-stack IPv6 cluster",
        ));
    }
    if o.node_cidr_mask_size_ipv6 != 0 && !single_v6 {
        return Err(invalid(
            MASK_V6,
            "not allowed for a single-stack IPv4 cluster",
        ));
    }
    Ok(cluster.iter().map(per_family).collect())
}

/// The node CIDRs of one cluster CIDR, used or free (upstream `cidrset.CidrSet`): a bitmap
/// indexed by node CIDR number, grown only as far as the highest one used. Allocation goes
/// round-robin from after the last one handed out, as upstream's `nextCandidate`, so a freed
/// CIDR is not reused at once.
#[derive(Clone)]
pub struct CidrSet {
    cluster: Cidr,
    node_prefix: u8,
    /// Number of node CIDRs: 2^(node prefix - cluster prefix).
    max: u64,
    allocated: u64,
    next_candidate: u64,
    used: Vec<u64>,
    metrics: Option<Metrics>,
}

impl std::fmt::Debug for CidrSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CidrSet")
            .field("cluster", &self.cluster)
            .field("node_prefix", &self.node_prefix)
            .field("allocated", &self.allocated)
            .field("max", &self.max)
            .field("next_candidate", &self.next_candidate)
            .finish_non_exhaustive()
    }
}

impl CidrSet {
    /// The node CIDRs of length `node_prefix` in `cluster`; `None` when `node_prefix` is
    /// shorter than the cluster's prefix, longer than an address, or (IPv6) more than 16 bits
    /// longer than the cluster's prefix ([`IpamConfig::from_options`] says which).
    pub fn new(cluster: Cidr, node_prefix: u8) -> Option<CidrSet> {
        let diff = node_prefix.checked_sub(cluster.prefix())?;
        if node_prefix > cluster.width() || (!cluster.is_ipv4() && diff > CLUSTER_SUBNET_MAX_DIFF) {
            return None;
        }
        Some(CidrSet {
            cluster,
            node_prefix,
            max: 1u64 << diff,
            allocated: 0,
            next_candidate: 0,
            used: Vec::new(),
            metrics: None,
        })
    }

    /// Reports allocations, releases and usage under the cluster CIDR's label, as upstream's
    /// cidrset metrics.
    pub(crate) fn with_metrics(mut self, metrics: Metrics) -> CidrSet {
        self.metrics = Some(metrics);
        self.observe(0, 0, None);
        self
    }

    fn observe(&self, allocations: u64, releases: u64, tries: Option<u64>) {
        let Some(m) = &self.metrics else {
            return;
        };
        let label = [self.cluster.to_string()];
        m.cidrset_allocations
            .with_label_values(&label)
            .inc_by(allocations);
        m.cidrset_releases
            .with_label_values(&label)
            .inc_by(releases);
        if let Some(t) = tries {
            m.cidrset_tries.with_label_values(&label).observe(t as f64);
        }
        m.cidrset_usage
            .with_label_values(&label)
            .set(self.allocated as f64 / self.max as f64);
    }

    /// The cluster CIDR.
    pub fn cluster(&self) -> Cidr {
        self.cluster
    }

    /// Node CIDRs in use, and how many there are.
    pub fn usage(&self) -> (u64, u64) {
        (self.allocated, self.max)
    }

    fn shift(&self) -> u32 {
        u32::from(self.cluster.width() - self.node_prefix)
    }

    fn cidr_at(&self, index: u64) -> Cidr {
        let offset = u128::from(index).checked_shl(self.shift()).unwrap_or(0);
        self.cluster
            .sibling(self.cluster.network() | offset, self.node_prefix)
    }

    /// The number of the node CIDR holding the address `bits`, if it is in the cluster CIDR.
    fn index_of(&self, bits: u128) -> Option<u64> {
        let index = (self.cluster.network() ^ bits)
            .checked_shr(self.shift())
            .unwrap_or(0);
        u64::try_from(index).ok().filter(|i| *i < self.max)
    }

    /// The node CIDR numbers `cidr` covers (upstream `getBeginningAndEndIndices`): one that
    /// holds it when it is smaller than a node CIDR, all when it holds the cluster CIDR.
    fn range_of(&self, cidr: &Cidr) -> Option<(u64, u64)> {
        if !self.cluster.overlaps(cidr) {
            return None;
        }
        if self.cluster.prefix() < cidr.prefix() {
            Some((self.index_of(cidr.network())?, self.index_of(cidr.last())?))
        } else {
            Some((0, self.max - 1))
        }
    }

    fn is_used(&self, index: u64) -> bool {
        let word = usize::try_from(index / 64).unwrap_or(usize::MAX);
        self.used
            .get(word)
            .is_some_and(|w| (w >> (index % 64)) & 1 == 1)
    }

    /// Sets (or clears) `begin..=end`; returns how many bits changed.
    fn set_range(&mut self, begin: u64, end: u64, value: bool) -> u64 {
        let mut changed = 0;
        let mut i = begin;
        while i <= end {
            let offset = i % 64;
            let n = (64 - offset).min(end - i + 1);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << offset
            };
            // Bounded by max / 64 + 1 words, at most 2^26.
            let word = (i / 64) as usize;
            if value && self.used.len() <= word {
                self.used.resize(word + 1, 0);
            }
            if let Some(w) = self.used.get_mut(word) {
                let old = *w;
                *w = if value { old | mask } else { old & !mask };
                changed += u64::from((old ^ *w).count_ones());
            }
            i += n;
        }
        changed
    }

    /// Hands out the next free node CIDR after the last one handed out (upstream
    /// `AllocateNext`); `None` when all are used.
    pub fn allocate_next(&mut self) -> Option<Cidr> {
        if self.allocated >= self.max {
            return None;
        }
        let mut candidate = self.next_candidate;
        let mut tries = 0;
        // A free one exists (allocated < max), so this ends within max steps.
        while self.is_used(candidate) {
            candidate = (candidate + 1) % self.max;
            tries += 1;
        }
        self.set_range(candidate, candidate, true);
        self.allocated += 1;
        self.next_candidate = (candidate + 1) % self.max;
        self.observe(1, 0, Some(tries));
        Some(self.cidr_at(candidate))
    }

    /// Marks the node CIDRs `cidr` covers as used (upstream `Occupy`); false when it is
    /// outside the cluster CIDR.
    pub fn occupy(&mut self, cidr: &Cidr) -> bool {
        let Some((begin, end)) = self.range_of(cidr) else {
            return false;
        };
        let taken = self.set_range(begin, end, true);
        self.allocated += taken;
        self.observe(taken, 0, None);
        true
    }

    /// Frees the node CIDRs `cidr` covers (upstream `Release`); false when it is outside the
    /// cluster CIDR.
    pub fn release(&mut self, cidr: &Cidr) -> bool {
        let Some((begin, end)) = self.range_of(cidr) else {
            return false;
        };
        let freed = self.set_range(begin, end, false);
        self.allocated -= freed;
        self.observe(0, freed, None);
        true
    }
}

/// One [`CidrSet`] per cluster CIDR (upstream `rangeAllocator`), plus the Nodes patched whose
/// CIDRs the cache has not shown yet.
#[derive(Debug)]
pub struct RangeAllocator {
    sets: Vec<CidrSet>,
    pending: HashMap<String, Vec<Cidr>>,
}

impl RangeAllocator {
    /// Empty sets for `config`'s cluster CIDRs, with the service CIDRs inside them marked used
    /// (upstream `filterOutServiceRange`).
    pub fn new(config: &IpamConfig) -> Result<RangeAllocator> {
        Self::build(config, None)
    }

    /// [`RangeAllocator::new`] reporting upstream's cidrset metrics.
    pub(crate) fn with_metrics(config: &IpamConfig, metrics: Metrics) -> Result<RangeAllocator> {
        Self::build(config, Some(metrics))
    }

    fn build(config: &IpamConfig, metrics: Option<Metrics>) -> Result<RangeAllocator> {
        let mut sets = config
            .cluster_cidrs
            .iter()
            .zip(&config.node_mask_sizes)
            .map(|(&cidr, &mask)| {
                let set = CidrSet::new(cidr, mask).ok_or_else(|| {
                    invalid(
                        "--cluster-cidr",
                        format!("{cidr} cannot be cut into /{mask} node CIDRs"),
                    )
                })?;
                Ok(match &metrics {
                    Some(m) => set.with_metrics(m.clone()),
                    None => set,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for service in &config.service_cidrs {
            for set in sets.iter_mut().filter(|s| s.cluster.overlaps(service)) {
                set.occupy(service);
            }
        }
        Ok(RangeAllocator {
            sets,
            pending: HashMap::new(),
        })
    }

    /// The sets, in `--cluster-cidr` order.
    pub fn sets(&self) -> &[CidrSet] {
        &self.sets
    }

    fn parse(&self, node: &str, cidrs: &[String]) -> Result<Vec<(usize, Cidr)>> {
        cidrs
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let foreign = |message: String| Error::ForeignPodCidr {
                    node: node.into(),
                    cidr: text.clone(),
                    message,
                };
                let cidr = Cidr::parse(text).map_err(|_| foreign("not a CIDR".into()))?;
                if i >= self.sets.len() {
                    return Err(foreign(format!(
                        "pod CIDR number {} has no cluster CIDR (--cluster-cidr has {})",
                        i + 1,
                        self.sets.len()
                    )));
                }
                Ok((i, cidr))
            })
            .collect()
    }

    /// Marks a Node's podCIDRs used, each in the set of its position (upstream
    /// `occupyCIDRs`).
    pub fn occupy(&mut self, node: &str, cidrs: &[String]) -> Result<()> {
        let observed = self.parse(node, cidrs)?;
        if let Some(pending) = self.pending.remove(node) {
            // Someone else set other CIDRs first (our patch then failed or came second):
            // ours go back.
            if !observed.iter().map(|(_, c)| *c).eq(pending.iter().copied()) {
                self.release(&pending);
            }
        }
        for (i, cidr) in observed {
            if !self.sets[i].occupy(&cidr) {
                return Err(Error::ForeignPodCidr {
                    node: node.into(),
                    cidr: cidr.to_string(),
                    message: format!("outside cluster CIDR {}", self.sets[i].cluster),
                });
            }
        }
        Ok(())
    }

    /// Frees a deleted Node's podCIDRs, or the ones it was being given (upstream
    /// `ReleaseCIDR`).
    pub fn release_node(&mut self, node: &str, cidrs: &[String]) -> Result<()> {
        if let Some(pending) = self.pending.remove(node) {
            self.release(&pending);
        }
        for (i, cidr) in self.parse(node, cidrs)? {
            self.sets[i].release(&cidr);
        }
        Ok(())
    }

    /// The next free CIDR of each set, for `node`, which counts as being given them until its
    /// CIDRs are seen ([`RangeAllocator::occupy`]) or it is deleted. When a set is exhausted,
    /// the ones already taken go back and the error names that set's cluster CIDR.
    pub fn allocate(&mut self, node: &str) -> Result<Vec<Cidr>> {
        let mut taken = Vec::with_capacity(self.sets.len());
        for i in 0..self.sets.len() {
            match self.sets[i].allocate_next() {
                Some(c) => taken.push(c),
                None => {
                    self.release(&taken);
                    return Err(Error::CidrExhausted {
                        cluster_cidr: self.sets[i].cluster.to_string(),
                    });
                }
            }
        }
        self.pending.insert(node.into(), taken.clone());
        Ok(taken)
    }

    /// Whether `node` was given CIDRs the cache does not show yet.
    pub fn is_pending(&self, node: &str) -> bool {
        self.pending.contains_key(node)
    }

    /// Gives back what [`RangeAllocator::allocate`] gave `node` (its patch failed).
    pub fn abandon(&mut self, node: &str, give_back: bool) {
        if let Some(cidrs) = self.pending.remove(node) {
            if give_back {
                self.release(&cidrs);
            }
        }
    }

    fn release(&mut self, cidrs: &[Cidr]) {
        for (set, cidr) in self.sets.iter_mut().zip(cidrs) {
            set.release(cidr);
        }
    }
}

/// The controller's long-lived state: the shared context and the allocator.
pub struct Ipam {
    ctx: Arc<Context>,
    allocator: Mutex<RangeAllocator>,
}

impl Ipam {
    /// The state for `ctx` with `allocator`.
    pub(crate) fn new(ctx: Arc<Context>, allocator: RangeAllocator) -> Arc<Ipam> {
        Arc::new(Ipam {
            ctx,
            allocator: Mutex::new(allocator),
        })
    }

    fn allocator(&self) -> MutexGuard<'_, RangeAllocator> {
        self.allocator.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs the controller until it is dropped.
pub(crate) async fn run(ctx: Arc<Context>, nodes: Arc<Informer<Node>>) -> Result<()> {
    let config = IpamConfig::from_options(&ctx.options)?.ok_or(Error::StartController {
        controller: CONTROLLER,
        reason: "needs --allocate-node-cidrs=true".into(),
    })?;
    let mut allocator = RangeAllocator::with_metrics(&config, ctx.metrics.clone())?;
    let feed = nodes.subscribe();
    nodes.ready().await;
    // Before any allocation, what Nodes already have is taken (upstream lists Nodes first).
    for node in nodes.store.state() {
        if let Err(e) = allocator.occupy(&node.name_any(), &pod_cidrs(&node)) {
            tracing::error!(error = %Chain(&e), "leaving a node's pod CIDRs alone");
        }
    }
    let cluster: Vec<String> = config.cluster_cidrs.iter().map(|c| c.to_string()).collect();
    tracing::info!(cluster_cidrs = ?cluster, masks = ?config.node_mask_sizes, "starting range CIDR allocator");
    let ipam = Ipam::new(ctx.clone(), allocator);
    let queue = Queue::new(
        "cidrallocator_node",
        Backoff::DEFAULT_CONTROLLER,
        ctx.metrics.clone(),
    );
    let enqueue = enqueue_changes(&nodes, feed, &queue, |node| {
        let name = node.name_any();
        let released = ipam.allocator().release_node(&name, &pod_cidrs(&node));
        if let Err(e) = released {
            tracing::error!(node = %name, error = %Chain(&e), "releasing the CIDRs of a deleted node");
        }
    });
    // A Node gone from the store is dropped: its CIDRs were released with its deletion.
    let work = run_node_workers(
        queue.clone(),
        nodes.clone(),
        CIDR_UPDATE_WORKERS,
        ipam.clone(),
        reconcile,
        error_policy,
    );
    tokio::join!(enqueue, work);
    Ok(())
}

/// Counts the failure and requeues the Node after its backoff.
pub(crate) fn error_policy(node: Arc<Node>, error: &Error, queue: &Queue) -> Action {
    crate::requeue_node(&node, error, queue, "error syncing node CIDRs, requeuing")
}

/// One Node (upstream `AllocateOrOccupyCIDR`): a Node with podCIDRs has them marked used; one
/// without gets the next free CIDR of each cluster CIDR.
#[tracing::instrument(skip_all, fields(node = %node.name_any()))]
pub async fn reconcile(node: Arc<Node>, ipam: Arc<Ipam>) -> Result<Action> {
    if node.metadata.deletion_timestamp.is_some() {
        return Ok(Action::AwaitChange);
    }
    let name = node.name_any();
    let existing = pod_cidrs(&node);
    let allocated = {
        let mut allocator = ipam.allocator();
        if !existing.is_empty() {
            allocator.occupy(&name, &existing)?;
            return Ok(Action::AwaitChange);
        }
        if allocator.is_pending(&name) {
            // Patched; the cache shows it soon.
            return Ok(Action::AwaitChange);
        }
        allocator.allocate(&name)
    };
    let cidrs = match allocated {
        Ok(c) => c,
        Err(e) => {
            record_status_change(&ipam.ctx, &node, REASON_CIDR_NOT_AVAILABLE).await;
            return Err(e);
        }
    };
    let cidrs: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
    let patch = json!({"spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs}});
    let api: Api<Node> = Api::all(ipam.ctx.client.clone());
    let mut attempts = 0;
    let err = loop {
        attempts += 1;
        match api
            .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(pod_cidrs = ?cidrs, "set node PodCIDR");
                return Ok(Action::AwaitChange);
            }
            Err(e) if attempts >= CIDR_UPDATE_RETRIES => break e,
            Err(_) => {}
        }
    };
    record_status_change(&ipam.ctx, &node, REASON_CIDR_ASSIGNMENT_FAILED).await;
    // As upstream: after a server timeout the patch may have been applied, so the CIDRs stay
    // taken (a restart frees them); otherwise they go back.
    let timeout = matches!(&err, kube::Error::Api(s) if s.reason == "ServerTimeout");
    ipam.allocator().abandon(&name, !timeout);
    Err(Error::PatchNode {
        node: name,
        source: err,
    })
}

/// Upstream `RecordNodeStatusChange`: a Normal event on the Node, `Node NAME status is now:
/// REASON`.
async fn record_status_change(ctx: &Context, node: &Node, reason: &str) {
    let name = node.name_any();
    ctx.event(
        CONTROLLER,
        &node.object_ref(&()),
        EventType::Normal,
        reason,
        format!("Node {name} status is now: {reason}"),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::options;

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).expect("cidr")
    }

    fn set(cluster: &str, mask: u8) -> CidrSet {
        CidrSet::new(c(cluster), mask).expect("set")
    }

    fn next(s: &mut CidrSet) -> String {
        s.allocate_next().expect("free CIDR").to_string()
    }

    fn config(args: &[&str]) -> Result<Option<IpamConfig>> {
        let mut all = vec!["--allocate-node-cidrs=true"];
        all.extend_from_slice(args);
        IpamConfig::from_options(&options(&all))
    }

    fn allocator(args: &[&str]) -> RangeAllocator {
        let config = config(args).expect("valid").expect("enabled");
        RangeAllocator::new(&config).expect("allocator")
    }

    fn strings(cidrs: &[Cidr]) -> Vec<String> {
        cidrs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn allocation_goes_in_order_and_round_robin_after_a_release() {
        let mut s = set("10.244.0.0/16", 24);
        assert_eq!(s.usage(), (0, 256));
        assert_eq!(next(&mut s), "10.244.0.0/24");
        assert_eq!(next(&mut s), "10.244.1.0/24");
        assert_eq!(next(&mut s), "10.244.2.0/24");
        assert!(s.release(&c("10.244.0.0/24")));
        // Upstream's nextCandidate: a freed CIDR is not handed out again at once.
        assert_eq!(next(&mut s), "10.244.3.0/24");
        assert_eq!(s.usage(), (3, 256));

        // Once at the end, the search wraps around to the freed ones.
        let mut s = set("10.0.0.0/30", 32);
        let all: Vec<String> = (0..4).map(|_| next(&mut s)).collect();
        assert_eq!(
            all,
            ["10.0.0.0/32", "10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"]
        );
        assert_eq!(s.allocate_next(), None, "exhausted");
        assert!(s.release(&c("10.0.0.1/32")));
        assert_eq!(next(&mut s), "10.0.0.1/32");
        assert_eq!(s.allocate_next(), None);
    }

    #[test]
    fn upstream_cidrset_metrics() {
        let registry = prometheus::Registry::new();
        let m = Metrics::new(&registry).expect("metrics");
        let mut s = set("10.244.0.0/16", 24).with_metrics(m.clone());
        next(&mut s);
        next(&mut s);
        assert!(s.release(&c("10.244.0.0/24")));
        assert!(s.occupy(&c("10.244.8.0/23")));
        let label = ["10.244.0.0/16"];
        assert_eq!(m.cidrset_allocations.with_label_values(&label).get(), 4);
        assert_eq!(m.cidrset_releases.with_label_values(&label).get(), 1);
        assert_eq!(
            m.cidrset_tries.with_label_values(&label).get_sample_count(),
            2
        );
        let usage = m.cidrset_usage.with_label_values(&label).get();
        assert!((usage - 3.0 / 256.0).abs() < 1e-9, "{usage}");
    }

    #[test]
    fn ipv6_node_cidrs() {
        let mut s = set("fd00:10::/56", 64);
        assert_eq!(s.usage(), (0, 256));
        assert_eq!(next(&mut s), "fd00:10::/64");
        assert_eq!(next(&mut s), "fd00:10:0:1::/64");
        // A node mask past the low 64 bits.
        let mut s = set("fd00::/112", 120);
        next(&mut s);
        assert_eq!(next(&mut s), "fd00::100/120");
    }

    #[test]
    fn sets_refuse_impossible_masks() {
        assert!(CidrSet::new(c("10.244.0.0/16"), 15).is_none());
        assert!(CidrSet::new(c("10.244.0.0/16"), 33).is_none());
        assert!(CidrSet::new(c("fd00::/47"), 64).is_none(), "17 bits");
        assert!(CidrSet::new(c("fd00::/48"), 64).is_some(), "16 bits");
        // IPv4 has no 16-bit limit upstream.
        assert_eq!(set("10.0.0.0/8", 32).usage(), (0, 1 << 24));
        // Mask equal to the prefix: the cluster CIDR is the one node CIDR.
        let mut s = set("10.244.0.0/24", 24);
        assert_eq!(next(&mut s), "10.244.0.0/24");
        assert_eq!(s.allocate_next(), None);
    }

    #[test]
    fn existing_node_cidrs_are_taken_first() {
        let mut a = allocator(&["--cluster-cidr=10.244.0.0/16"]);
        a.occupy("n0", &["10.244.0.0/24".into()]).expect("in range");
        a.occupy("n2", &["10.244.2.0/24".into()]).expect("in range");
        // Occupying twice counts once.
        a.occupy("n2", &["10.244.2.0/24".into()]).expect("in range");
        assert_eq!(a.sets()[0].usage().0, 2);
        assert_eq!(strings(&a.allocate("n1").expect("free")), ["10.244.1.0/24"]);
        assert_eq!(strings(&a.allocate("n3").expect("free")), ["10.244.3.0/24"]);
        // Outside the cluster CIDR, not a CIDR, or more CIDRs than cluster CIDRs.
        for bad in [
            vec!["10.245.0.0/24".to_string()],
            vec!["nonsense".to_string()],
            vec!["10.244.9.0/24".to_string(), "fd00::/64".to_string()],
        ] {
            let err = a.occupy("x", &bad).expect_err("foreign").to_string();
            assert!(err.starts_with("node x: pod CIDR "), "{err}");
        }
    }

    #[test]
    fn deleted_nodes_give_their_cidrs_back() {
        let mut a = allocator(&["--cluster-cidr=10.244.0.0/23"]);
        let n0 = strings(&a.allocate("n0").expect("free"));
        a.occupy("n0", &n0).expect("seen with its CIDRs");
        let n1 = a.allocate("n1").expect("free");
        assert!(a.is_pending("n1"));
        assert!(matches!(a.allocate("n2"), Err(Error::CidrExhausted { .. })));
        // n1 deleted before the cache showed its CIDRs: its pending ones go back.
        a.release_node("n1", &[]).expect("release");
        assert!(!a.is_pending("n1"));
        assert_eq!(a.allocate("n2").expect("free"), n1);
        a.release_node("n0", &n0).expect("release");
        assert_eq!(strings(&a.allocate("n3").expect("free")), n0);
        // A failed patch gives its CIDRs back, unless the server may have applied it.
        a.abandon("n3", true);
        assert_eq!(strings(&a.allocate("n4").expect("free")), n0);
        a.abandon("n4", false);
        assert!(a.allocate("n5").is_err(), "kept after a timeout");
    }

    #[test]
    fn cidrs_someone_else_set_first_win_and_ours_go_back() {
        let mut a = allocator(&["--cluster-cidr=10.244.0.0/23"]);
        let ours = strings(&a.allocate("n").expect("free"));
        assert_eq!(ours, ["10.244.0.0/24"]);
        a.occupy("n", &["10.244.1.0/24".into()]).expect("in range");
        assert!(!a.is_pending("n"));
        assert_eq!(a.sets()[0].usage().0, 1);
        assert_eq!(strings(&a.allocate("m").expect("free")), ours);
    }

    #[test]
    fn exhaustion_names_the_cluster_cidr() {
        let mut a = allocator(&["--cluster-cidr=10.244.0.0/24"]);
        a.allocate("n0").expect("the one CIDR");
        let err = a.allocate("n1").expect_err("exhausted");
        assert_eq!(
            err.to_string(),
            "failed to allocate cidr from cluster cidr 10.244.0.0/24: no remaining CIDRs left to allocate in the accepted range"
        );
    }

    #[test]
    fn dual_stack_gives_one_per_family_in_flag_order() {
        let mut a = allocator(&[
            "--cluster-cidr=fd00:10::/120,10.244.0.0/16",
            "--node-cidr-mask-size-ipv6=120",
        ]);
        assert_eq!(
            strings(&a.allocate("n0").expect("free")),
            ["fd00:10::/120", "10.244.0.0/24"]
        );
        // The IPv6 set is exhausted: the IPv4 CIDR taken meanwhile goes back.
        assert!(a.allocate("n1").is_err());
        assert_eq!(a.sets()[1].usage().0, 1);
        a.occupy("n0", &["fd00:10::/120".into(), "10.244.0.0/24".into()])
            .expect("in range");
        // Families go by position: an IPv4 first CIDR is not in the IPv6 set.
        assert!(a.occupy("x", &["10.244.5.0/24".into()]).is_err());
    }

    #[test]
    fn service_ranges_inside_the_cluster_cidr_are_never_handed_out() {
        let mut a = allocator(&[
            "--cluster-cidr=10.0.0.0/16",
            "--service-cluster-ip-range=10.0.0.0/20",
        ]);
        assert_eq!(a.sets()[0].usage().0, 16);
        assert_eq!(strings(&a.allocate("n").expect("free")), ["10.0.16.0/24"]);
        // Smaller than a node CIDR: the node CIDR holding it is taken.
        let mut a = allocator(&[
            "--cluster-cidr=10.0.0.0/30,fd00::/120",
            "--node-cidr-mask-size-ipv4=32",
            "--node-cidr-mask-size-ipv6=120",
            "--service-cluster-ip-range=10.0.0.1/32,fd00::/112",
        ]);
        assert_eq!(a.sets()[0].usage().0, 1);
        // Holding the whole cluster CIDR: nothing is left.
        assert_eq!(a.sets()[1].usage(), (1, 1));
        assert!(matches!(
            a.allocate("n"),
            Err(Error::CidrExhausted { cluster_cidr }) if cluster_cidr == "fd00::/120"
        ));
        // Outside, or of the other family: no effect.
        let a = allocator(&[
            "--cluster-cidr=10.244.0.0/16",
            "--service-cluster-ip-range=10.96.0.0/12,fd00::/108",
        ]);
        assert_eq!(a.sets()[0].usage().0, 0);
    }

    #[test]
    fn big_ranges_are_marked_by_words() {
        // 2^24 node CIDRs, half of them a service range: quick, and a bitmap of 2 MiB.
        let mut a = allocator(&[
            "--cluster-cidr=10.0.0.0/8",
            "--node-cidr-mask-size=32",
            "--service-cluster-ip-range=10.0.0.0/9",
        ]);
        assert_eq!(a.sets()[0].usage(), (1 << 23, 1 << 24));
        assert_eq!(strings(&a.allocate("n").expect("free")), ["10.128.0.0/32"]);
        let mut s = set("10.0.0.0/8", 32);
        assert!(s.occupy(&c("10.0.0.0/8")));
        assert_eq!(s.usage(), (1 << 24, 1 << 24));
        assert!(s.release(&c("10.0.0.64/26")));
        assert_eq!(s.usage().0, (1 << 24) - 64);
    }

    #[test]
    fn mask_sizes_default_by_family_and_follow_upstream_rules() {
        let masks = |args: &[&str]| config(args).expect("valid").expect("on").node_mask_sizes;
        assert_eq!(masks(&["--cluster-cidr=10.244.0.0/16"]), [24]);
        assert_eq!(masks(&["--cluster-cidr=fd00::/48"]), [64]);
        assert_eq!(masks(&["--cluster-cidr=fd00::/48,10.0.0.0/8"]), [64, 24]);
        assert_eq!(
            masks(&["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=26"]),
            [26]
        );
        assert_eq!(
            masks(&[
                "--cluster-cidr=10.244.0.0/16",
                "--node-cidr-mask-size-ipv4=16"
            ]),
            [16]
        );
        assert_eq!(
            masks(&[
                "--cluster-cidr=10.244.0.0/16,fd00::/56",
                "--node-cidr-mask-size-ipv4=25",
                "--node-cidr-mask-size-ipv6=72",
            ]),
            [25, 72]
        );
        let off = options(&["--cluster-cidr=10.0.0.0/8,10.1.0.0/8"]);
        assert_eq!(IpamConfig::from_options(&off).expect("not looked at"), None);
    }

    #[test]
    fn invalid_ipam_flags_are_named() {
        let err = |args: &[&str]| config(args).expect_err("invalid").to_string();
        let cases: &[(&[&str], &str)] = &[
            (&[], "--cluster-cidr: must be set"),
            (&["--cluster-cidr=10.244.0.0"], "--cluster-cidr: invalid CIDR \"10.244.0.0\""),
            (
                &["--cluster-cidr=10.0.0.0/8,10.1.0.0/16"],
                "--cluster-cidr: two CIDRs must be dual-stack",
            ),
            (
                &["--cluster-cidr=10.0.0.0/8,fd00::/48,10.1.0.0/16"],
                "--cluster-cidr: 3 CIDRs given",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size-ipv4=8"],
                "--node-cidr-mask-size-ipv4: /8 is shorter than the prefix of --cluster-cidr 10.244.0.0/16",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=12"],
                "--node-cidr-mask-size: /12 is shorter",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=40"],
                "--node-cidr-mask-size: /40 is longer than an IPv4 address",
            ),
            (
                &["--cluster-cidr=fd00::/32"],
                "--node-cidr-mask-size-ipv6: /64 is more than 16 bits longer than the prefix of --cluster-cidr fd00::/32",
            ),
            (
                &["--cluster-cidr=10.0.0.0/8,fd00::/48", "--node-cidr-mask-size=24"],
                "--node-cidr-mask-size: not allowed with dual-stack clusters",
            ),
            (
                &[
                    "--cluster-cidr=10.0.0.0/8",
                    "--node-cidr-mask-size=24",
                    "--node-cidr-mask-size-ipv4=24",
                ],
                "--node-cidr-mask-size: --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 are not allowed with it",
            ),
            (
                &["--cluster-cidr=fd00::/48", "--node-cidr-mask-size-ipv4=24"],
                "--node-cidr-mask-size-ipv4: not allowed for a single-stack IPv6 cluster",
            ),
            (
                &["--cluster-cidr=10.0.0.0/8", "--node-cidr-mask-size-ipv6=64"],
                "--node-cidr-mask-size-ipv6: not allowed for a single-stack IPv4 cluster",
            ),
            (
                &["--cluster-cidr=10.0.0.0/8", "--service-cluster-ip-range=10.96.0.0"],
                "--service-cluster-ip-range: invalid CIDR \"10.96.0.0\"",
            ),
            (
                &[
                    "--cluster-cidr=10.0.0.0/8",
                    "--service-cluster-ip-range=10.96.0.0/12,10.97.0.0/16",
                ],
                "--service-cluster-ip-range: two CIDRs must be dual-stack",
            ),
        ];
        for (args, want) in cases {
            let got = err(args);
            assert!(got.starts_with(want), "{args:?}: {got}");
        }
    }
}

/// What a reconcile sends, checked against a mocked apiserver.
#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::fixtures::{cloud, context, exchange};

    fn node(name: &str, cidrs: &[&str]) -> Arc<Node> {
        let mut n = json!({"metadata": {"name": name, "uid": format!("uid-{name}")}});
        if let Some(first) = cidrs.first() {
            n["spec"] = json!({"podCIDR": first, "podCIDRs": cidrs});
        }
        Arc::new(serde_json::from_value(n).expect("node"))
    }

    fn ipam(args: &[&str]) -> (Arc<Ipam>, crate::fixtures::ApiServerVerifier) {
        let (ctx, api) = context(cloud("{}"), args);
        let config = IpamConfig::from_options(&ctx.options)
            .expect("valid")
            .expect("enabled");
        let allocator = RangeAllocator::new(&config).expect("allocator");
        (Ipam::new(ctx, allocator), api)
    }

    #[tokio::test]
    async fn a_node_without_cidrs_gets_one_strategic_merge_patch() {
        let (ipam, api) = ipam(&[
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16,fd00:10::/56",
        ]);
        let n1 = node("n1", &[]);
        let answer =
            serde_json::to_value(node("n1", &["10.244.1.0/24", "fd00:10:0:1::/64"]).as_ref())
                .expect("json");
        let work = {
            let ipam = ipam.clone();
            async move {
                // A Node the cache shows with CIDRs: taken, no request.
                let n0 = node("n0", &["10.244.0.0/24", "fd00:10::/64"]);
                reconcile(n0, ipam.clone()).await?;
                let action = reconcile(n1.clone(), ipam.clone()).await?;
                // The cache has not shown n1's CIDRs yet: no second pair, no request.
                reconcile(n1, ipam.clone()).await?;
                // Then it does.
                reconcile(node("n1", &["10.244.1.0/24", "fd00:10:0:1::/64"]), ipam).await?;
                Ok::<_, Error>(action)
            }
        };
        let action = exchange(work, api, |mut api| {
            Box::pin(async move {
                let p = api.expect("PATCH", "/api/v1/nodes/n1?", answer).await;
                assert_eq!(p.content_type, "application/strategic-merge-patch+json");
                assert_eq!(
                    p.body,
                    json!({"spec": {
                        "podCIDR": "10.244.1.0/24",
                        "podCIDRs": ["10.244.1.0/24", "fd00:10:0:1::/64"],
                    }})
                );
                api
            })
        })
        .await
        .expect("reconcile");
        assert_eq!(action, Action::AwaitChange);
        let allocator = ipam.allocator();
        assert!(!allocator.is_pending("n1"));
        assert_eq!(
            allocator
                .sets()
                .iter()
                .map(|s| s.usage().0)
                .collect::<Vec<_>>(),
            [2, 2]
        );
    }

    #[tokio::test]
    async fn an_exhausted_range_is_a_cidr_not_available_event_and_an_error() {
        let (ipam, api) = ipam(&["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/24"]);
        let work = {
            let ipam = ipam.clone();
            async move {
                reconcile(node("n0", &["10.244.0.0/24"]), ipam.clone()).await?;
                reconcile(node("n1", &[]), ipam).await
            }
        };
        let err = exchange(work, api, |mut api| {
            Box::pin(async move {
                let e = api.expect_event("default", "CIDRNotAvailable").await;
                assert_eq!(e.body["type"], "Normal");
                assert_eq!(e.body["note"], "Node n1 status is now: CIDRNotAvailable");
                assert_eq!(e.body["regarding"]["kind"], "Node");
                assert_eq!(e.body["regarding"]["name"], "n1");
                api
            })
        })
        .await
        .expect_err("exhausted");
        assert!(matches!(err, Error::CidrExhausted { .. }), "{err}");
    }
}
