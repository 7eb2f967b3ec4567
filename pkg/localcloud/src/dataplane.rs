//! The load-balancer data plane: what Octavia's amphorae (haproxy, driven by the amphora agent
//! and the health manager) do, in this process. Every Octavia listener in the store binds
//! `VIP:protocol_port` (a loopback address from the VIP pool, 127.0.100.0/24 by default) and
//! proxies TCP connections (bidirectional copy with half-close, like haproxy in `mode tcp`) to
//! the healthy members of its default pool, chosen by the pool's algorithm (ROUND_ROBIN,
//! LEAST_CONNECTIONS, SOURCE_IP, or the same member for a client with `SOURCE_IP` session
//! persistence); `PROXY`/`PROXYV2` pools get a PROXY protocol v1/v2 header with the client's
//! address first, and `HTTP` listeners with `insert_headers` add `X-Forwarded-For` (`-Port`,
//! `-Proto`) to every request (`http`); UDP listeners keep one session per client address (its own
//! socket to the member picked at the first datagram) until it is idle for the listener's
//! `timeout_client_data` (`proxy`). Health monitors (TCP connect, HTTP GET with
//! `expected_codes`, UDP-CONNECT) really probe the members every `delay` seconds: after
//! `max_retries_down` failures a member leaves rotation (operating_status ERROR), after
//! `max_retries` successes it comes back (ONLINE) (`health`). The data plane follows the store
//! ([`crate::store::Store::subscribe`]): after every committed change to the load-balancer
//! tables it reconciles the running listeners with the stored ones, moves `PENDING_*` objects to
//! `ACTIVE` (or `ERROR` when a port cannot be bound), and so re-opens every listener after a
//! restart. Member and pool changes apply to new connections only: established connections keep
//! running. A floating IP associated with a load balancer's VIP port gets every listener of that
//! load balancer too (the floating IP forwards to the VIP). With
//! `--enforce-member-security-groups`, members' Neutron security groups decide whether the load
//! balancer reaches them, as Neutron's firewall would (`guard`). It binds nothing but loopback
//! addresses (`vip`).

mod guard;
mod health;
mod http;
mod metrics;
mod proxy;
mod vip;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::model::network::{FloatingIp, FLOATING_IPS, PORTS, SECURITY_GROUP_RULES, SUBNETS};
use crate::model::octavia::{
    HealthMonitor, Listener, LoadBalancer, Member, Octavia, Operating, Pool, Provisioning, Record,
    ALL_TABLES, LISTENERS, LOADBALANCERS, MEMBERS, MONITORS, POOLS,
};
use crate::store::{Read, Store, Tx};
use health::MonitorSpec;
use proxy::{AllowedSlot, InsertSlot, ListenerStats, MemberRt, PoolRt, PoolSlot};
pub use vip::VipPool;

struct RunningListener {
    bind: SocketAddr,
    listener_id: String,
    lb_id: String,
    pool: PoolSlot,
    allowed: AllowedSlot,
    insert: InsertSlot,
    stats: Arc<ListenerStats>,
    task: JoinHandle<()>,
}

struct RunningMonitor {
    spec: MonitorSpec,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Running {
    listeners: HashMap<String, RunningListener>,
    pools: HashMap<String, Arc<PoolRt>>,
    members: HashMap<String, Arc<MemberRt>>,
    monitors: HashMap<String, RunningMonitor>,
}

/// The data plane's typed copy of the load-balancer tables (and the floating IPs), kept in step
/// with the store by the changes it announces: a reconcile re-reads only the records that
/// changed since the last one (all of them at start and after the change feed lagged). Decoding
/// every record at each reconcile made a cloud of a few hundred load balancers spend most of its
/// CPU there, since the data plane reconciles after every burst of changes.
#[derive(Default)]
struct Snapshot {
    lbs: BTreeMap<String, LoadBalancer>,
    listeners: BTreeMap<String, Listener>,
    pools: BTreeMap<String, Pool>,
    members: BTreeMap<String, Member>,
    monitors: BTreeMap<String, HealthMonitor>,
    /// Associated floating IPs: by floating IP id, the port and the address.
    floating_ips: BTreeMap<String, (String, IpAddr)>,
    /// With `--enforce-member-security-groups`: the ports, groups and subnets members are
    /// checked against.
    firewall: Option<guard::Firewall>,
}

/// What changed since the data plane's last reconcile.
#[derive(Default)]
struct Dirty {
    /// Everything: at start, and after the change feed lagged.
    all: bool,
    /// `(kind, id)` of the records that changed.
    records: BTreeSet<(String, String)>,
}

impl Dirty {
    fn is_empty(&self) -> bool {
        !self.all && self.records.is_empty()
    }
}

/// The next burst of changes: waits for one, takes every one already queued (a burst is one
/// reconcile) and keeps those `relevant` names; a lagging feed (changes dropped unread) makes
/// it everything. `None` once the feed is closed.
async fn next_burst(
    changes: &mut tokio::sync::broadcast::Receiver<crate::store::Change>,
    relevant: &impl Fn(&crate::store::Change) -> bool,
) -> Option<Dirty> {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let mut burst = Dirty::default();
    let take = |c: crate::store::Change, burst: &mut Dirty| {
        if relevant(&c) {
            burst.records.insert((c.kind, c.id));
        }
    };
    match changes.recv().await {
        Ok(c) => take(c, &mut burst),
        Err(RecvError::Lagged(_)) => burst.all = true,
        Err(RecvError::Closed) => return None,
    }
    loop {
        match changes.try_recv() {
            Ok(c) => take(c, &mut burst),
            Err(TryRecvError::Lagged(_)) => burst.all = true,
            Err(TryRecvError::Empty | TryRecvError::Closed) => return Some(burst),
        }
    }
}

/// Re-reads `id` of `kind` into `map` (or removes it when the store no longer holds it).
fn refresh_one<T: serde::de::DeserializeOwned>(
    map: &mut BTreeMap<String, T>,
    r: &impl Read,
    kind: &str,
    id: &str,
) {
    match r.get::<T>(kind, id) {
        Some(v) => {
            map.insert(id.to_owned(), v);
        }
        None => {
            map.remove(id);
        }
    }
}

/// Every record of `kind`, by id.
fn read_all<T: Octavia + serde::de::DeserializeOwned>(
    r: &impl Read,
    kind: &str,
) -> BTreeMap<String, T> {
    r.list::<T>(kind)
        .into_iter()
        .map(|v| (v.id().to_owned(), v))
        .collect()
}

/// The associated floating IP `f` as (port, address).
fn associated(f: FloatingIp) -> Option<(String, IpAddr)> {
    Some((f.port_id?, f.floating_ip_address.parse::<IpAddr>().ok()?))
}

impl Snapshot {
    /// Brings the copy up to date with what `dirty` names.
    fn refresh(&mut self, r: &impl Read, dirty: Dirty, enforce_member_security_groups: bool) {
        if dirty.all {
            *self = Snapshot {
                firewall: enforce_member_security_groups.then(|| guard::Firewall::read(r)),
                lbs: read_all(r, LOADBALANCERS),
                listeners: read_all(r, LISTENERS),
                pools: read_all(r, POOLS),
                members: read_all(r, MEMBERS),
                monitors: read_all(r, MONITORS),
                floating_ips: r
                    .list::<FloatingIp>(FLOATING_IPS)
                    .into_iter()
                    .filter_map(|f| {
                        let id = f.meta.id.clone();
                        associated(f).map(|a| (id, a))
                    })
                    .collect(),
            };
        } else {
            let mut firewall_changed = false;
            for (kind, id) in &dirty.records {
                match kind.as_str() {
                    LOADBALANCERS => refresh_one(&mut self.lbs, r, kind, id),
                    LISTENERS => refresh_one(&mut self.listeners, r, kind, id),
                    POOLS => refresh_one(&mut self.pools, r, kind, id),
                    MEMBERS => refresh_one(&mut self.members, r, kind, id),
                    MONITORS => refresh_one(&mut self.monitors, r, kind, id),
                    FLOATING_IPS => {
                        match r.get::<FloatingIp>(kind, id).and_then(associated) {
                            Some(a) => self.floating_ips.insert(id.clone(), a),
                            None => self.floating_ips.remove(id),
                        };
                    }
                    _ => firewall_changed = true,
                }
            }
            if firewall_changed && enforce_member_security_groups {
                self.firewall = Some(guard::Firewall::read(r));
            }
        }
    }

    /// The associated floating IP addresses, by the port they are on.
    fn floating_by_port(&self) -> HashMap<&str, Vec<IpAddr>> {
        let mut out: HashMap<&str, Vec<IpAddr>> = HashMap::new();
        for (port, ip) in self.floating_ips.values() {
            out.entry(port.as_str()).or_default().push(*ip);
        }
        out
    }

    /// The ids of the objects `PENDING_*` in this snapshot: what a reconcile that applied it
    /// may settle (an object created after the snapshot is not running yet).
    fn pending_ids(&self) -> BTreeSet<String> {
        fn pending<T: Octavia>(items: &BTreeMap<String, T>, out: &mut BTreeSet<String>) {
            out.extend(
                items
                    .iter()
                    .filter(|(_, i)| i.common().provisioning_status.is_pending())
                    .map(|(id, _)| id.clone()),
            );
        }
        let mut out = BTreeSet::new();
        pending(&self.lbs, &mut out);
        pending(&self.listeners, &mut out);
        pending(&self.pools, &mut out);
        pending(&self.members, &mut out);
        pending(&self.monitors, &mut out);
        out
    }
}

/// The data plane of one server. See the module docs.
pub(crate) struct DataPlane {
    store: Arc<Store>,
    /// Members' Neutron security groups filter the load balancer's traffic (`guard`).
    enforce_member_security_groups: bool,
    running: Mutex<Running>,
    /// The typed copy of the tables and what changed since it was last brought up to date.
    mirror: Mutex<(Snapshot, Dirty)>,
    follower: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPlane").finish_non_exhaustive()
    }
}

/// The idle time that ends a UDP session: the listener's `timeout_client_data` (milliseconds,
/// range-checked by the API; clamped here for records written before that).
fn udp_idle(l: &Listener) -> Duration {
    let ms = u64::try_from(l.timeout_client_data).unwrap_or(50_000);
    Duration::from_millis(ms.clamp(100, crate::model::octavia::MAX_TIMEOUT_MS as u64))
}

impl DataPlane {
    pub(crate) fn new(store: Arc<Store>, enforce_member_security_groups: bool) -> Arc<Self> {
        Arc::new(DataPlane {
            store,
            enforce_member_security_groups,
            running: Mutex::new(Running::default()),
            mirror: Mutex::new((
                Snapshot::default(),
                Dirty {
                    all: true,
                    ..Dirty::default()
                },
            )),
            follower: Mutex::new(None),
        })
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reconciles now and then after every change to the load-balancer tables.
    pub(crate) async fn start(self: &Arc<Self>) {
        let mut changes = self.store.subscribe();
        self.reconcile().await;
        let me = self.clone();
        // With member security groups enforced, ports, rules and subnets matter too.
        let firewall_tables: &[&str] = if self.enforce_member_security_groups {
            &[PORTS, SECURITY_GROUP_RULES, SUBNETS]
        } else {
            &[]
        };
        let relevant = move |c: &crate::store::Change| {
            ALL_TABLES.contains(&c.kind.as_str())
                || c.kind == FLOATING_IPS
                || firewall_tables.contains(&c.kind.as_str())
        };
        let task = tokio::spawn(async move {
            while let Some(burst) = next_burst(&mut changes, &relevant).await {
                if burst.is_empty() {
                    continue;
                }
                {
                    let mut mirror = me.mirror.lock().unwrap_or_else(|e| e.into_inner());
                    let dirty = &mut mirror.1;
                    dirty.all |= burst.all;
                    dirty.records.extend(burst.records);
                }
                me.reconcile().await;
            }
        });
        *self.follower.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// Closes every listener and stops every health monitor.
    pub(crate) fn stop(&self) {
        if let Some(t) = self
            .follower
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            t.abort();
        }
        let mut running = self.running();
        for (_, l) in running.listeners.drain() {
            l.task.abort();
        }
        for (_, m) in running.monitors.drain() {
            m.task.abort();
        }
    }

    /// Makes the running listeners, pools and monitors match the store, then settles
    /// `PENDING_*` provisioning statuses.
    pub(crate) async fn reconcile(self: &Arc<Self>) {
        let enforce = self.enforce_member_security_groups;
        let (failed_listeners, pending) = {
            let mut mirror = self.mirror.lock().unwrap_or_else(|e| e.into_inner());
            let (snap, dirty) = &mut *mirror;
            let dirty = std::mem::take(dirty);
            self.store.read(|r| snap.refresh(r, dirty, enforce));
            let mut running = self.running();
            sync_pools(&mut running, snap);
            let failed = sync_listeners(&mut running, snap);
            self.sync_monitors(&mut running, snap);
            (failed, snap.pending_ids())
        };
        if pending.is_empty() && failed_listeners.is_empty() {
            return;
        }
        let store = self.store.clone();
        let settled = tokio::task::spawn_blocking(move || {
            store.write(|tx| settle(tx, &failed_listeners, Some(&pending)))
        })
        .await;
        match settled {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "settling load balancer statuses failed"),
            Err(error) => tracing::warn!(%error, "settling load balancer statuses failed"),
        }
    }

    fn sync_monitors(&self, running: &mut Running, snap: &Snapshot) {
        let mut wanted = HashSet::new();
        for hm in snap.monitors.values() {
            let Some(pool) = running.pools.get(hm.pool_id()).cloned() else {
                continue;
            };
            if !hm.common.admin_state_up {
                continue;
            }
            let id = hm.id();
            let spec = MonitorSpec::of(hm);
            wanted.insert(id.to_owned());
            if running
                .monitors
                .get(id)
                .is_some_and(|r| r.spec == spec && !r.task.is_finished())
            {
                continue;
            }
            if let Some(old) = running.monitors.remove(id) {
                old.task.abort();
            }
            let task = tokio::spawn(health::monitor(self.store.clone(), pool, spec.clone()));
            running
                .monitors
                .insert(id.to_owned(), RunningMonitor { spec, task });
        }
        running.monitors.retain(|id, m| {
            let keep = wanted.contains(id);
            if !keep {
                m.task.abort();
            }
            keep
        });
    }
}

/// Pools and members: the proxy's view of each pool, keeping members' health and counters.
/// Linear in the records: the data plane reconciles after every burst of changes, so a scan of
/// every member per pool made a cloud of a few hundred load balancers spend most of its CPU
/// here.
fn sync_pools(running: &mut Running, snap: &Snapshot) {
    let mut members_of: HashMap<&str, Vec<&Member>> = HashMap::new();
    for m in snap.members.values() {
        members_of.entry(m.pool_id.as_str()).or_default().push(m);
    }
    // Per pool: (monitored, monitored over UDP).
    let mut monitors_of: HashMap<&str, (bool, bool)> = HashMap::new();
    for hm in snap.monitors.values() {
        let entry = monitors_of.entry(hm.pool_id()).or_default();
        entry.0 |= hm.common.admin_state_up;
        entry.1 |= hm.kind == "UDP-CONNECT";
    }
    for p in snap.pools.values() {
        let id = p.id();
        let rt = running
            .pools
            .entry(id.to_owned())
            .or_insert_with(|| {
                Arc::new(PoolRt {
                    algorithm: RwLock::new(String::new()),
                    protocol: RwLock::new(String::new()),
                    source_ip_persistence: AtomicBool::new(false),
                    members: RwLock::new(Vec::new()),
                    next: AtomicUsize::new(0),
                })
            })
            .clone();
        *rt.algorithm.write().unwrap_or_else(|e| e.into_inner()) = p.lb_algorithm.clone();
        *rt.protocol.write().unwrap_or_else(|e| e.into_inner()) = p.protocol.clone();
        let source_ip = p
            .session_persistence
            .as_ref()
            .is_some_and(|sp| sp.get("type").and_then(|t| t.as_str()) == Some("SOURCE_IP"));
        rt.source_ip_persistence.store(source_ip, Ordering::Relaxed);
        let (monitored, monitor_udp) = monitors_of.get(id).copied().unwrap_or_default();
        let lb = p.loadbalancers.first().and_then(|r| snap.lbs.get(&r.id));
        let mut members = Vec::new();
        for m in members_of.get(id).into_iter().flatten().copied() {
            let Ok(ip) = m.address.parse::<IpAddr>() else {
                continue;
            };
            let addr = SocketAddr::new(ip, m.protocol_port);
            let monitor = SocketAddr::new(
                m.monitor_address
                    .as_deref()
                    .and_then(|a| a.parse::<IpAddr>().ok())
                    .unwrap_or(ip),
                m.monitor_port.unwrap_or(m.protocol_port),
            );
            let existing = running
                .members
                .get(m.id())
                .filter(|x| x.addr == addr && x.monitor == monitor && x.pool_id == id)
                .cloned();
            let member = existing.unwrap_or_else(|| {
                Arc::new(MemberRt {
                    id: m.id().to_owned(),
                    pool_id: id.to_owned(),
                    addr,
                    monitor,
                    admin_up: AtomicBool::new(true),
                    admitted: AtomicBool::new(true),
                    monitor_admitted: AtomicBool::new(true),
                    weight: AtomicU64::new(1),
                    healthy: AtomicBool::new(m.common.operating_status != Operating::Error),
                    active: AtomicU64::new(0),
                    connections: AtomicU64::new(0),
                    bytes_in: AtomicU64::new(0),
                    bytes_out: AtomicU64::new(0),
                })
            });
            member.admin_up.store(
                m.common.admin_state_up && p.common.admin_state_up,
                Ordering::Relaxed,
            );
            member.weight.store(u64::from(m.weight), Ordering::Relaxed);
            let admits = snap
                .firewall
                .as_ref()
                .map(|f| f.admits(m, p, lb, monitor_udp));
            member
                .admitted
                .store(admits.is_none_or(|a| a.traffic), Ordering::Relaxed);
            member
                .monitor_admitted
                .store(admits.is_none_or(|a| a.monitor), Ordering::Relaxed);
            if !monitored {
                member.healthy.store(true, Ordering::Relaxed);
            }
            running.members.insert(m.id().to_owned(), member.clone());
            members.push(member);
        }
        *rt.members.write().unwrap_or_else(|e| e.into_inner()) = members;
    }
    running.pools.retain(|id, _| snap.pools.contains_key(id));
    running
        .members
        .retain(|id, _| snap.members.contains_key(id));
}

/// Listeners: opens, re-points or closes sockets. Returns the listeners that could not open.
fn sync_listeners(running: &mut Running, snap: &Snapshot) -> Vec<String> {
    let floating_by_port = snap.floating_by_port();
    let mut failed = Vec::new();
    let mut wanted: HashSet<String> = HashSet::new();
    for l in snap.listeners.values() {
        let id = l.id();
        let Some(lb) = snap.lbs.get(l.lb_id()) else {
            continue;
        };
        let up = l.common.admin_state_up && lb.common.admin_state_up;
        let protocol = l.protocol.as_str();
        if !up || protocol == "SCTP" {
            continue;
        }
        let Ok(vip) = lb.vip_address.parse::<IpAddr>() else {
            continue;
        };
        let pool = l
            .default_pool_id
            .as_deref()
            .and_then(|p| running.pools.get(p).cloned());
        // The VIP, then each floating IP associated with the VIP's port (the floating IP
        // forwards to the VIP: here, the same proxy listens on both).
        let floating = floating_by_port
            .get(lb.vip_port_id.as_str())
            .cloned()
            .unwrap_or_default();
        let binds = std::iter::once((id.to_owned(), vip))
            .chain(floating.into_iter().map(|f| (format!("{id}@{f}"), f)));
        for (key, ip) in binds {
            let is_vip = key == id;
            let bind = SocketAddr::new(ip, l.protocol_port);
            if !ip.is_loopback() {
                // The API refuses such VIPs; a record from elsewhere must not open a socket off
                // loopback either.
                tracing::warn!(listener = id, %bind, "refusing to open a load balancer listener on a non-loopback address");
                if is_vip {
                    failed.push(id.to_owned());
                }
                continue;
            }
            if let Err(error) = open_listener(running, l, lb, &key, bind, pool.clone()) {
                tracing::warn!(listener = id, %bind, %error, "cannot open load balancer listener");
                if is_vip {
                    failed.push(id.to_owned());
                }
                continue;
            }
            wanted.insert(key);
        }
    }
    running.listeners.retain(|id, l| {
        let keep = wanted.contains(id);
        if !keep {
            tracing::info!(listener = id, bind = %l.bind, "load balancer listener closed");
            l.task.abort();
        }
        keep
    });
    failed
}

/// Opens (or re-points) the socket `key` of listener `l` on `bind`.
fn open_listener(
    running: &mut Running,
    l: &Listener,
    lb: &LoadBalancer,
    key: &str,
    bind: SocketAddr,
    pool: Option<Arc<PoolRt>>,
) -> std::io::Result<()> {
    let protocol = l.protocol.as_str();
    let cidrs = l.allowed_cidrs.as_deref().map(proxy::parse_cidrs);
    let insert = http::Insert::of(protocol, &l.insert_headers);
    if let Some(r) = running.listeners.get(key) {
        if r.bind == bind && !r.task.is_finished() {
            *r.pool.write().unwrap_or_else(|e| e.into_inner()) = pool;
            *r.allowed.write().unwrap_or_else(|e| e.into_inner()) = cidrs;
            *r.insert.write().unwrap_or_else(|e| e.into_inner()) = insert;
            return Ok(());
        }
    }
    if let Some(old) = running.listeners.remove(key) {
        old.task.abort();
    }
    let slot: PoolSlot = Arc::new(RwLock::new(pool));
    let allowed: AllowedSlot = Arc::new(RwLock::new(cidrs));
    let inserted: InsertSlot = Arc::new(RwLock::new(insert));
    let stats = Arc::new(ListenerStats::default());
    let started = if protocol == "UDP" {
        proxy::bind_udp(bind).map(|socket| {
            tokio::spawn(proxy::serve_udp(
                socket,
                slot.clone(),
                allowed.clone(),
                stats.clone(),
                udp_idle(l),
            ))
        })
    } else {
        proxy::bind_tcp(bind).map(|listener| {
            tokio::spawn(proxy::serve_tcp(
                listener,
                slot.clone(),
                allowed.clone(),
                inserted.clone(),
                stats.clone(),
            ))
        })
    };
    let task = started?;
    tracing::info!(listener = l.id(), %bind, protocol, "load balancer listener open");
    running.listeners.insert(
        key.to_owned(),
        RunningListener {
            bind,
            listener_id: l.id().to_owned(),
            lb_id: lb.id().to_owned(),
            pool: slot,
            allowed,
            insert: inserted,
            stats,
            task,
        },
    );
    Ok(())
}

/// Moves `PENDING_*` objects to `ACTIVE` (only those in `applied`, the ids pending in the
/// snapshot the data plane just applied, when given: an object created meanwhile is not
/// serving yet and stays pending until the next reconcile), and listeners that could not open
/// (and their load balancers) to `ERROR`.
pub(crate) fn settle(
    tx: &mut Tx<'_>,
    failed_listeners: &[String],
    applied: Option<&BTreeSet<String>>,
) -> crate::Result<()> {
    let mut failed_lbs = Vec::new();
    for id in failed_listeners {
        if let Some(mut l) = tx.get::<Listener>(LISTENERS, id) {
            if l.common.provisioning_status != Provisioning::Error {
                l.common.provisioning_status = Provisioning::Error;
                l.common.operating_status = Operating::Error;
                tx.put(LISTENERS, id, &l)?;
            }
            failed_lbs.push(l.lb_id().to_owned());
        }
    }
    settle_table::<LoadBalancer>(tx, &failed_lbs, applied)?;
    settle_table::<Listener>(tx, &[], applied)?;
    settle_table::<Pool>(tx, &[], applied)?;
    settle_table::<Member>(tx, &[], applied)?;
    settle_table::<HealthMonitor>(tx, &[], applied)
}

fn settle_table<T: Octavia>(
    tx: &mut Tx<'_>,
    failed: &[String],
    applied: Option<&BTreeSet<String>>,
) -> crate::Result<()> {
    for mut v in T::list(tx) {
        let status = v.common().provisioning_status;
        if !status.is_pending() || status == Provisioning::PendingDelete {
            continue;
        }
        let id = v.id().to_owned();
        if !failed.contains(&id) && applied.is_some_and(|a| !a.contains(&id)) {
            continue;
        }
        v.common_mut().provisioning_status = if failed.contains(&id) {
            Provisioning::Error
        } else {
            Provisioning::Active
        };
        v.put(tx)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::Change;
    use tokio::sync::broadcast;

    fn change(kind: &str, id: &str) -> Change {
        Change {
            kind: kind.into(),
            id: id.into(),
            deleted: false,
        }
    }

    fn octavia(c: &Change) -> bool {
        ALL_TABLES.contains(&c.kind.as_str()) || c.kind == FLOATING_IPS
    }

    #[tokio::test]
    async fn a_burst_is_the_relevant_changes_already_queued() {
        let (tx, mut rx) = broadcast::channel(8);
        for c in [
            change(LOADBALANCERS, "lb"),
            change("servers", "vm"),
            change(MEMBERS, "m1"),
            change(MEMBERS, "m1"),
            change(FLOATING_IPS, "fip"),
        ] {
            tx.send(c).unwrap();
        }
        let burst = next_burst(&mut rx, &octavia).await.unwrap();
        assert!(!burst.all);
        let names: Vec<(&str, &str)> = burst
            .records
            .iter()
            .map(|(k, i)| (k.as_str(), i.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (FLOATING_IPS, "fip"),
                (LOADBALANCERS, "lb"),
                (MEMBERS, "m1")
            ]
        );
        // Only other tables' changes: a burst with nothing to do.
        tx.send(change("servers", "vm")).unwrap();
        assert!(next_burst(&mut rx, &octavia).await.unwrap().is_empty());
        drop(tx);
        assert!(next_burst(&mut rx, &octavia).await.is_none(), "feed closed");
    }

    #[tokio::test]
    async fn a_lagging_feed_makes_the_burst_everything() {
        let (tx, mut rx) = broadcast::channel(2);
        for i in 0..5 {
            tx.send(change(LISTENERS, &format!("l{i}"))).unwrap();
        }
        let burst = next_burst(&mut rx, &octavia).await.unwrap();
        assert!(burst.all, "changes were dropped unread: re-read everything");
        assert!(!burst.is_empty());
    }
}
