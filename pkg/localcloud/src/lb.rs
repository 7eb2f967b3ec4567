//! The load-balancer data plane: what Octavia's amphorae (haproxy, driven by the amphora agent
//! and the health manager) do, in this process. Every Octavia listener in the store binds
//! `VIP:protocol_port` (a loopback address from the VIP pool, 127.0.100.0/24 by default) and
//! proxies TCP connections (bidirectional copy with half-close, like haproxy in `mode tcp`) to
//! the healthy members of its default pool, chosen by the pool's algorithm (ROUND_ROBIN,
//! LEAST_CONNECTIONS, SOURCE_IP); UDP listeners keep one session per client address (its own
//! socket to the member picked at the first datagram) until it is idle for the listener's
//! `timeout_client_data`. Health monitors (TCP connect, HTTP GET with `expected_codes`, UDP-CONNECT)
//! really probe the members every `delay` seconds: after `max_retries_down` failures a member
//! leaves rotation (operating_status ERROR), after `max_retries` successes it comes back
//! (ONLINE). The data plane follows the store ([`crate::store::Store::subscribe`]): after every
//! committed change to the load-balancer tables it reconciles the running listeners with the
//! stored ones, moves `PENDING_*` objects to `ACTIVE` (or `ERROR` when a port cannot be bound),
//! and so re-opens every listener after a restart. Member and pool changes apply to new
//! connections only: established connections keep running.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;

use crate::store::{Read, Store};

/// Store tables of the Load Balancer API.
pub(crate) const LOADBALANCERS: &str = "lb_loadbalancers";
pub(crate) const LISTENERS: &str = "lb_listeners";
pub(crate) const POOLS: &str = "lb_pools";
pub(crate) const MEMBERS: &str = "lb_members";
pub(crate) const MONITORS: &str = "lb_healthmonitors";
pub(crate) const ALL_TABLES: [&str; 5] = [LOADBALANCERS, LISTENERS, POOLS, MEMBERS, MONITORS];

/// The addresses VIPs are allocated from, e.g. `127.0.100.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VipPool {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl Default for VipPool {
    fn default() -> Self {
        VipPool {
            network: Ipv4Addr::new(127, 0, 100, 0),
            prefix: 24,
        }
    }
}

impl FromStr for VipPool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a CIDR such as 127.0.100.0/24"))?;
        let network: Ipv4Addr = addr.parse().map_err(|e| format!("{addr:?}: {e}"))?;
        let prefix: u8 = prefix.parse().map_err(|e| format!("{prefix:?}: {e}"))?;
        if !(8..=30).contains(&prefix) {
            return Err(format!("prefix /{prefix} must be between /8 and /30"));
        }
        Ok(VipPool { network, prefix })
    }
}

impl std::fmt::Display for VipPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl VipPool {
    /// The first host address of the pool not in `used`.
    pub(crate) fn allocate(&self, used: &[String]) -> Option<Ipv4Addr> {
        let base = u32::from(self.network) & (u32::MAX << (32 - u32::from(self.prefix)));
        let size = 1u32 << (32 - u32::from(self.prefix));
        (1..size.saturating_sub(1))
            .map(|i| Ipv4Addr::from(base + i))
            .find(|a| !used.iter().any(|u| u == &a.to_string()))
    }
}

/// One member as the proxy sees it; kept across reconciles so health and counters persist.
#[derive(Debug)]
struct MemberRt {
    id: String,
    pool_id: String,
    addr: SocketAddr,
    /// Where health monitors probe (the member's `monitor_address`/`monitor_port`, else `addr`).
    monitor: SocketAddr,
    admin_up: AtomicBool,
    /// Weight 0 drains the member: no new connections, as in Octavia.
    weight: AtomicU64,
    healthy: AtomicBool,
    active: AtomicU64,
    connections: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

#[derive(Debug)]
struct PoolRt {
    algorithm: RwLock<String>,
    members: RwLock<Vec<Arc<MemberRt>>>,
    next: AtomicUsize,
}

/// Whether the data plane may send traffic to `addr`: only loopback members (127.0.0.0/8, ::1).
/// Instances on the default `private` subnet (127.1.0.0/16) have loopback addresses, so a member
/// on a Node's InternalIP is reached; an address on any other subnet belongs to no host here, is
/// never connected to, and its monitor reports it down (operating_status ERROR). This keeps the
/// local cloud from ever sending traffic off the machine.
pub(crate) fn may_contact(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

impl PoolRt {
    /// The members to try for a client, best first.
    fn pick(&self, client: IpAddr) -> Vec<Arc<MemberRt>> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        let mut up: Vec<Arc<MemberRt>> = members
            .iter()
            .filter(|m| {
                may_contact(&m.addr)
                    && m.admin_up.load(Ordering::Relaxed)
                    && m.healthy.load(Ordering::Relaxed)
                    && m.weight.load(Ordering::Relaxed) > 0
            })
            .cloned()
            .collect();
        if up.is_empty() {
            return up;
        }
        let algorithm = self
            .algorithm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let first = match algorithm.as_str() {
            "LEAST_CONNECTIONS" => {
                let start = self.next.fetch_add(1, Ordering::Relaxed) % up.len();
                (0..up.len())
                    .map(|i| (start + i) % up.len())
                    .min_by_key(|&i| up[i].active.load(Ordering::Relaxed))
                    .unwrap_or(0)
            }
            "SOURCE_IP" => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                client.hash(&mut h);
                (h.finish() % up.len() as u64) as usize
            }
            _ => self.next.fetch_add(1, Ordering::Relaxed) % up.len(),
        };
        up.rotate_left(first);
        up
    }
}

#[derive(Debug, Default)]
struct ListenerStats {
    connections: AtomicU64,
    active: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    no_member: AtomicU64,
}

type PoolSlot = Arc<RwLock<Option<Arc<PoolRt>>>>;

struct RunningListener {
    bind: SocketAddr,
    lb_id: String,
    pool: PoolSlot,
    stats: Arc<ListenerStats>,
    task: JoinHandle<()>,
}

struct RunningMonitor {
    spec: Value,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Running {
    listeners: HashMap<String, RunningListener>,
    pools: HashMap<String, Arc<PoolRt>>,
    members: HashMap<String, Arc<MemberRt>>,
    monitors: HashMap<String, RunningMonitor>,
}

/// The data plane of one server. See the module docs.
pub(crate) struct DataPlane {
    store: Arc<Store>,
    running: Mutex<Running>,
    follower: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPlane").finish_non_exhaustive()
    }
}

/// `obj["loadbalancers"][0]["id"]` and friends.
pub(crate) fn first_ref(obj: &Value, key: &str) -> Option<String> {
    obj[key][0]["id"].as_str().map(str::to_owned)
}

fn is_pending(v: &Value) -> bool {
    v["provisioning_status"]
        .as_str()
        .is_some_and(|s| s.starts_with("PENDING_"))
}

impl DataPlane {
    pub(crate) fn new(store: Arc<Store>) -> Arc<Self> {
        Arc::new(DataPlane {
            store,
            running: Mutex::new(Running::default()),
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
        let task = tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(c) if !ALL_TABLES.contains(&c.kind.as_str()) => continue,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
                // Coalesce a burst of changes into one reconcile.
                while changes.try_recv().is_ok() {}
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
        let tables: BTreeMap<&str, Vec<Value>> = self.store.read(|r| {
            ALL_TABLES
                .iter()
                .map(|k| (*k, r.list::<Value>(k)))
                .collect()
        });
        let empty = Vec::new();
        let t = |k: &str| tables.get(k).unwrap_or(&empty);
        let lbs: HashMap<String, &Value> = t(LOADBALANCERS)
            .iter()
            .filter_map(|v| Some((v["id"].as_str()?.to_owned(), v)))
            .collect();
        let mut failed_listeners: Vec<String> = Vec::new();
        {
            let mut running = self.running();
            // Pools and members.
            let mut pool_ids: Vec<String> = Vec::new();
            for p in t(POOLS) {
                let Some(id) = p["id"].as_str() else { continue };
                pool_ids.push(id.to_owned());
                let rt = running
                    .pools
                    .entry(id.to_owned())
                    .or_insert_with(|| {
                        Arc::new(PoolRt {
                            algorithm: RwLock::new(String::new()),
                            members: RwLock::new(Vec::new()),
                            next: AtomicUsize::new(0),
                        })
                    })
                    .clone();
                *rt.algorithm.write().unwrap_or_else(|e| e.into_inner()) = p["lb_algorithm"]
                    .as_str()
                    .unwrap_or("ROUND_ROBIN")
                    .to_owned();
                let monitored = t(MONITORS).iter().any(|m| {
                    first_ref(m, "pools").as_deref() == Some(id)
                        && m["admin_state_up"].as_bool().unwrap_or(true)
                });
                let mut members = Vec::new();
                for m in t(MEMBERS).iter().filter(|m| m["pool_id"] == id) {
                    let (Some(mid), Some(addr), Some(port)) = (
                        m["id"].as_str(),
                        m["address"].as_str().and_then(|a| a.parse::<IpAddr>().ok()),
                        m["protocol_port"]
                            .as_u64()
                            .and_then(|p| u16::try_from(p).ok()),
                    ) else {
                        continue;
                    };
                    let addr = SocketAddr::new(addr, port);
                    let monitor = SocketAddr::new(
                        m["monitor_address"]
                            .as_str()
                            .and_then(|a| a.parse::<IpAddr>().ok())
                            .unwrap_or(addr.ip()),
                        m["monitor_port"]
                            .as_u64()
                            .and_then(|p| u16::try_from(p).ok())
                            .unwrap_or(port),
                    );
                    let existing = running
                        .members
                        .get(mid)
                        .filter(|x| x.addr == addr && x.monitor == monitor && x.pool_id == id)
                        .cloned();
                    let rt = existing.unwrap_or_else(|| {
                        Arc::new(MemberRt {
                            id: mid.to_owned(),
                            pool_id: id.to_owned(),
                            addr,
                            monitor,
                            admin_up: AtomicBool::new(true),
                            weight: AtomicU64::new(1),
                            healthy: AtomicBool::new(m["operating_status"] != "ERROR"),
                            active: AtomicU64::new(0),
                            connections: AtomicU64::new(0),
                            bytes_in: AtomicU64::new(0),
                            bytes_out: AtomicU64::new(0),
                        })
                    });
                    rt.admin_up.store(
                        m["admin_state_up"].as_bool().unwrap_or(true)
                            && p["admin_state_up"].as_bool().unwrap_or(true),
                        Ordering::Relaxed,
                    );
                    rt.weight
                        .store(m["weight"].as_u64().unwrap_or(1), Ordering::Relaxed);
                    if !monitored {
                        rt.healthy.store(true, Ordering::Relaxed);
                    }
                    running.members.insert(mid.to_owned(), rt.clone());
                    members.push(rt);
                }
                *rt.members.write().unwrap_or_else(|e| e.into_inner()) = members;
            }
            running.pools.retain(|id, _| pool_ids.contains(id));
            let member_ids: Vec<String> = t(MEMBERS)
                .iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect();
            running.members.retain(|id, _| member_ids.contains(id));

            // Listeners.
            let mut wanted: Vec<String> = Vec::new();
            for l in t(LISTENERS) {
                let Some(id) = l["id"].as_str() else { continue };
                let Some(lb_id) = first_ref(l, "loadbalancers") else {
                    continue;
                };
                let Some(lb) = lbs.get(&lb_id) else { continue };
                let up = l["admin_state_up"].as_bool().unwrap_or(true)
                    && lb["admin_state_up"].as_bool().unwrap_or(true);
                let protocol = l["protocol"].as_str().unwrap_or("TCP");
                let udp = protocol == "UDP";
                if !up || protocol == "SCTP" {
                    continue;
                }
                let (Some(ip), Some(port)) = (
                    lb["vip_address"]
                        .as_str()
                        .and_then(|a| a.parse::<IpAddr>().ok()),
                    l["protocol_port"]
                        .as_u64()
                        .and_then(|p| u16::try_from(p).ok()),
                ) else {
                    continue;
                };
                let bind = SocketAddr::new(ip, port);
                let pool = l["default_pool_id"]
                    .as_str()
                    .and_then(|p| running.pools.get(p).cloned());
                wanted.push(id.to_owned());
                if let Some(r) = running.listeners.get(id) {
                    if r.bind == bind && !r.task.is_finished() {
                        *r.pool.write().unwrap_or_else(|e| e.into_inner()) = pool;
                        continue;
                    }
                }
                if let Some(old) = running.listeners.remove(id) {
                    old.task.abort();
                }
                let idle = Duration::from_millis(
                    l["timeout_client_data"].as_u64().unwrap_or(50_000).max(100),
                );
                let slot: PoolSlot = Arc::new(RwLock::new(pool));
                let stats = Arc::new(ListenerStats::default());
                let started = if udp {
                    bind_udp(bind).map(|socket| {
                        tokio::spawn(serve_udp(socket, slot.clone(), stats.clone(), idle))
                    })
                } else {
                    bind_tcp(bind).map(|listener| {
                        tokio::spawn(serve_tcp(listener, slot.clone(), stats.clone()))
                    })
                };
                match started {
                    Ok(task) => {
                        tracing::info!(listener = id, %bind, protocol, "load balancer listener open");
                        running.listeners.insert(
                            id.to_owned(),
                            RunningListener {
                                bind,
                                lb_id: lb_id.clone(),
                                pool: slot,
                                stats,
                                task,
                            },
                        );
                    }
                    Err(error) => {
                        tracing::warn!(listener = id, %bind, %error, "cannot open load balancer listener");
                        failed_listeners.push(id.to_owned());
                    }
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

            // Health monitors.
            let mut wanted_monitors = Vec::new();
            for m in t(MONITORS) {
                let (Some(id), Some(pool_id)) = (m["id"].as_str(), first_ref(m, "pools")) else {
                    continue;
                };
                let Some(pool) = running.pools.get(&pool_id).cloned() else {
                    continue;
                };
                if !m["admin_state_up"].as_bool().unwrap_or(true) {
                    continue;
                }
                let mut spec = m.clone();
                for volatile in [
                    "provisioning_status",
                    "operating_status",
                    "updated_at",
                    "name",
                ] {
                    if let Some(o) = spec.as_object_mut() {
                        o.remove(volatile);
                    }
                }
                wanted_monitors.push(id.to_owned());
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
                let task = tokio::spawn(monitor(self.store.clone(), pool, spec.clone()));
                running
                    .monitors
                    .insert(id.to_owned(), RunningMonitor { spec, task });
            }
            running.monitors.retain(|id, m| {
                let keep = wanted_monitors.contains(id);
                if !keep {
                    m.task.abort();
                }
                keep
            });
        }

        // Settle provisioning statuses.
        let any_pending = ALL_TABLES.iter().any(|k| t(k).iter().any(is_pending));
        if !any_pending && failed_listeners.is_empty() {
            return;
        }
        let store = self.store.clone();
        let settled = tokio::task::spawn_blocking(move || {
            store.write(|tx| -> crate::Result<()> {
                let mut failed_lbs = Vec::new();
                for id in &failed_listeners {
                    if let Some(mut l) = tx.get::<Value>(LISTENERS, id) {
                        if l["provisioning_status"] != "ERROR" {
                            l["provisioning_status"] = "ERROR".into();
                            l["operating_status"] = "ERROR".into();
                            tx.put(LISTENERS, id, &l)?;
                        }
                        failed_lbs.extend(first_ref(&l, "loadbalancers"));
                    }
                }
                for kind in ALL_TABLES {
                    for mut v in tx.list::<Value>(kind) {
                        if !is_pending(&v) || v["provisioning_status"] == "PENDING_DELETE" {
                            continue;
                        }
                        let Some(id) = v["id"].as_str().map(str::to_owned) else {
                            continue;
                        };
                        let status = if kind == LOADBALANCERS && failed_lbs.contains(&id) {
                            "ERROR"
                        } else {
                            "ACTIVE"
                        };
                        v["provisioning_status"] = status.into();
                        tx.put(kind, &id, &v)?;
                    }
                }
                Ok(())
            })
        })
        .await;
        match settled {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "settling load balancer statuses failed"),
            Err(error) => tracing::warn!(%error, "settling load balancer statuses failed"),
        }
    }

    /// The data plane's metrics in the Prometheus text format.
    pub(crate) fn metrics(&self) -> String {
        let running = self.running();
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, u64)>| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, v) in rows {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
        };
        let mut listeners: Vec<(&String, &RunningListener)> = running.listeners.iter().collect();
        listeners.sort_by(|a, b| a.0.cmp(b.0));
        let ll = |id: &str, l: &RunningListener| {
            format!(
                "loadbalancer=\"{}\",listener=\"{id}\",vip=\"{}\"",
                l.lb_id, l.bind
            )
        };
        let rows = |f: &dyn Fn(&ListenerStats) -> u64| {
            listeners
                .iter()
                .map(|(id, l)| (ll(id, l), f(&l.stats)))
                .collect::<Vec<_>>()
        };
        family(
            "localcloud_lb_listener_connections_total",
            "counter",
            "Client connections accepted by a load balancer listener.",
            rows(&|s| s.connections.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_active_connections",
            "gauge",
            "Client connections open on a load balancer listener.",
            rows(&|s| s.active.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_bytes_in_total",
            "counter",
            "Bytes received from clients by a load balancer listener.",
            rows(&|s| s.bytes_in.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_bytes_out_total",
            "counter",
            "Bytes sent to clients by a load balancer listener.",
            rows(&|s| s.bytes_out.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_listener_no_member_total",
            "counter",
            "Client connections closed because no healthy member could take them.",
            rows(&|s| s.no_member.load(Ordering::Relaxed)),
        );
        let mut members: Vec<&Arc<MemberRt>> = running.members.values().collect();
        members.sort_by(|a, b| a.id.cmp(&b.id));
        let ml = |m: &MemberRt| {
            format!(
                "pool=\"{}\",member=\"{}\",address=\"{}\"",
                m.pool_id, m.id, m.addr
            )
        };
        let mrows = |f: &dyn Fn(&MemberRt) -> u64| {
            members.iter().map(|m| (ml(m), f(m))).collect::<Vec<_>>()
        };
        family(
            "localcloud_lb_member_connections_total",
            "counter",
            "Connections proxied to a pool member.",
            mrows(&|m| m.connections.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_active_connections",
            "gauge",
            "Proxied connections open to a pool member.",
            mrows(&|m| m.active.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_bytes_in_total",
            "counter",
            "Bytes received from a pool member.",
            mrows(&|m| m.bytes_in.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_bytes_out_total",
            "counter",
            "Bytes sent to a pool member.",
            mrows(&|m| m.bytes_out.load(Ordering::Relaxed)),
        );
        family(
            "localcloud_lb_member_healthy",
            "gauge",
            "1 while a pool member is in rotation (healthy and admin up).",
            mrows(&|m| {
                u64::from(m.healthy.load(Ordering::Relaxed) && m.admin_up.load(Ordering::Relaxed))
            }),
        );
        out
    }
}

fn bind_udp(addr: SocketAddr) -> std::io::Result<Arc<tokio::net::UdpSocket>> {
    let socket = std::net::UdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    Ok(Arc::new(tokio::net::UdpSocket::from_std(socket)?))
}

/// The local address to reach `member` from: loopback for loopback members.
fn local_for(member: SocketAddr) -> SocketAddr {
    match member.ip() {
        IpAddr::V4(ip) if ip.is_loopback() => SocketAddr::from(([127, 0, 0, 1], 0)),
        IpAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        IpAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
    }
}

/// UDP: one session per client address (like haproxy/LVS in Octavia's UDP listeners), each with
/// its own socket to the member chosen at the first datagram; a session idle for `idle` ends.
async fn serve_udp(
    socket: Arc<tokio::net::UdpSocket>,
    pool: PoolSlot,
    stats: Arc<ListenerStats>,
    idle: Duration,
) {
    type Sessions = Arc<Mutex<HashMap<SocketAddr, Arc<tokio::net::UdpSocket>>>>;
    let sessions: Sessions = Arc::new(Mutex::new(HashMap::new()));
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, client) = match socket.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(error) => {
                // ICMP errors from earlier sends surface here on Linux; keep serving.
                tracing::debug!(%error, "udp receive failed");
                continue;
            }
        };
        let existing = sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&client)
            .cloned();
        let upstream = match existing {
            Some(u) => u,
            None => {
                let candidates = pool
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .map(|p| p.pick(client.ip()))
                    .unwrap_or_default();
                let Some(member) = candidates.into_iter().next() else {
                    stats.no_member.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let up = match tokio::net::UdpSocket::bind(local_for(member.addr)).await {
                    Ok(u) => u,
                    Err(error) => {
                        tracing::warn!(%error, "cannot open a udp session socket");
                        continue;
                    }
                };
                if let Err(error) = up.connect(member.addr).await {
                    tracing::debug!(%error, member = %member.addr, "udp connect failed");
                    continue;
                }
                let up = Arc::new(up);
                stats.connections.fetch_add(1, Ordering::Relaxed);
                stats.active.fetch_add(1, Ordering::Relaxed);
                member.connections.fetch_add(1, Ordering::Relaxed);
                member.active.fetch_add(1, Ordering::Relaxed);
                sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(client, up.clone());
                let (socket, sessions, stats, up2) =
                    (socket.clone(), sessions.clone(), stats.clone(), up.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65_536];
                    loop {
                        match tokio::time::timeout(idle, up2.recv(&mut buf)).await {
                            Ok(Ok(n)) => {
                                let _ = socket.send_to(&buf[..n], client).await;
                                stats.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                                member.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                            }
                            // Refused (ICMP port unreachable) is not fatal for UDP.
                            Ok(Err(_)) => continue,
                            Err(_) => break,
                        }
                    }
                    sessions
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&client);
                    stats.active.fetch_sub(1, Ordering::Relaxed);
                    member.active.fetch_sub(1, Ordering::Relaxed);
                });
                up
            }
        };
        stats.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        let _ = upstream.send(&buf[..n]).await;
    }
}

fn bind_tcp(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn serve_tcp(listener: tokio::net::TcpListener, pool: PoolSlot, stats: Arc<ListenerStats>) {
    loop {
        let (client, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(error) => {
                tracing::debug!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let candidates = pool
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| p.pick(peer.ip()))
            .unwrap_or_default();
        let stats = stats.clone();
        tokio::spawn(async move {
            stats.active.fetch_add(1, Ordering::Relaxed);
            proxy(client, candidates, &stats).await;
            stats.active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn proxy(mut client: TcpStream, candidates: Vec<Arc<MemberRt>>, stats: &ListenerStats) {
    let _ = client.set_nodelay(true);
    for member in candidates {
        let connected =
            tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(member.addr)).await;
        let mut backend = match connected {
            Ok(Ok(s)) => s,
            Ok(Err(error)) => {
                tracing::debug!(member = %member.addr, %error, "member refused, trying the next");
                continue;
            }
            Err(_) => continue,
        };
        let _ = backend.set_nodelay(true);
        member.connections.fetch_add(1, Ordering::Relaxed);
        member.active.fetch_add(1, Ordering::Relaxed);
        let copied = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
        member.active.fetch_sub(1, Ordering::Relaxed);
        if let Ok((up, down)) = copied {
            member.bytes_out.fetch_add(up, Ordering::Relaxed);
            member.bytes_in.fetch_add(down, Ordering::Relaxed);
            stats.bytes_in.fetch_add(up, Ordering::Relaxed);
            stats.bytes_out.fetch_add(down, Ordering::Relaxed);
        }
        return;
    }
    stats.no_member.fetch_add(1, Ordering::Relaxed);
}

/// Probes one member once.
async fn probe(addr: SocketAddr, spec: &Value, timeout: Duration) -> bool {
    if !may_contact(&addr) {
        return false;
    }
    let kind = spec["type"].as_str().unwrap_or("TCP").to_owned();
    if kind == "UDP-CONNECT" {
        // Like Octavia's UDP-CONNECT: a datagram, then only an ICMP port-unreachable fails.
        let check = async {
            let s = tokio::net::UdpSocket::bind(local_for(addr)).await.ok()?;
            s.connect(addr).await.ok()?;
            s.send(b"\n").await.ok()?;
            let mut buf = [0u8; 512];
            match tokio::time::timeout(timeout / 2, s.recv(&mut buf)).await {
                Ok(Err(_)) => Some(false),
                Ok(Ok(_)) | Err(_) => Some(true),
            }
        };
        return matches!(check.await, Some(true));
    }
    let check = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        if kind != "HTTP" {
            return Some(true);
        }
        let path = spec["url_path"].as_str().unwrap_or("/");
        let method = spec["http_method"].as_str().unwrap_or("GET");
        let req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = vec![0u8; 1024];
        let mut n = 0;
        while n < 12 {
            let got = s.read(&mut buf[n..]).await.ok()?;
            if got == 0 {
                break;
            }
            n += got;
        }
        let head = String::from_utf8_lossy(&buf[..n]).into_owned();
        let code: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
        Some(expected(
            spec["expected_codes"].as_str().unwrap_or("200"),
            code,
        ))
    };
    matches!(tokio::time::timeout(timeout, check).await, Ok(Some(true)))
}

/// Octavia's `expected_codes`: `200`, `200,202`, `200-204`.
pub(crate) fn expected(codes: &str, code: u16) -> bool {
    codes
        .split(',')
        .map(str::trim)
        .any(|part| match part.split_once('-') {
            Some((a, b)) => match (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
                (Ok(a), Ok(b)) => (a..=b).contains(&code),
                _ => false,
            },
            None => part.parse::<u16>().is_ok_and(|c| c == code),
        })
}

/// A health monitor: probes every member of `pool` every `delay` seconds.
async fn monitor(store: Arc<Store>, pool: Arc<PoolRt>, spec: Value) {
    let delay = Duration::from_secs(spec["delay"].as_u64().unwrap_or(5).max(1));
    let timeout = Duration::from_secs(spec["timeout"].as_u64().unwrap_or(5).max(1));
    let rise = spec["max_retries"].as_u64().unwrap_or(3).max(1);
    let fall = spec["max_retries_down"].as_u64().unwrap_or(3).max(1);
    // member id → (consecutive successes, consecutive failures, reported state)
    let mut state: HashMap<String, (u64, u64, Option<bool>)> = HashMap::new();
    loop {
        let members: Vec<Arc<MemberRt>> = pool
            .members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut probes = tokio::task::JoinSet::new();
        for m in &members {
            let m = m.clone();
            let spec = spec.clone();
            probes.spawn(async move {
                let ok = probe(m.monitor, &spec, timeout).await;
                (m, ok)
            });
        }
        let mut results = Vec::new();
        while let Some(r) = probes.join_next().await {
            if let Ok(r) = r {
                results.push(r);
            }
        }
        let mut changed: Vec<(String, &'static str)> = Vec::new();
        for (m, ok) in results {
            let e = state.entry(m.id.clone()).or_insert((0, 0, None));
            if ok {
                e.0 += 1;
                e.1 = 0;
            } else {
                e.1 += 1;
                e.0 = 0;
            }
            let now_up = match e.2 {
                // A new member counts as up until proven down (haproxy's default).
                None if ok => Some(true),
                Some(false) if e.0 >= rise => Some(true),
                None | Some(true) if e.1 >= fall => Some(false),
                other => other,
            };
            if now_up != e.2 {
                e.2 = now_up;
                if let Some(up) = now_up {
                    m.healthy.store(up, Ordering::Relaxed);
                    tracing::info!(member = %m.id, address = %m.addr, up, "member health changed");
                    changed.push((m.id.clone(), if up { "ONLINE" } else { "ERROR" }));
                }
            }
        }
        state.retain(|id, _| members.iter().any(|m| &m.id == id));
        if !changed.is_empty() {
            let store = store.clone();
            let _ = tokio::task::spawn_blocking(move || {
                store.write(|tx| -> crate::Result<()> {
                    for (id, status) in &changed {
                        if let Some(mut m) = tx.get::<Value>(MEMBERS, id) {
                            if m["operating_status"] != *status {
                                m["operating_status"] = (*status).into();
                                tx.put(MEMBERS, id, &m)?;
                            }
                        }
                    }
                    Ok(())
                })
            })
            .await;
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_loopback_members_are_contacted() {
        assert!(may_contact(&"127.0.0.1:80".parse().expect("addr")));
        assert!(may_contact(&"127.0.100.7:80".parse().expect("addr")));
        assert!(may_contact(&"[::1]:80".parse().expect("addr")));
        assert!(!may_contact(&"10.0.0.2:30080".parse().expect("addr")));
        assert!(!may_contact(&"192.0.2.1:80".parse().expect("addr")));
        // A probe of a simulated address fails without any connection attempt.
        let spec = serde_json::json!({"type": "TCP"});
        let healthy = probe(
            "10.0.0.2:30080".parse().expect("addr"),
            &spec,
            Duration::from_millis(50),
        )
        .await;
        assert!(!healthy);
    }
}
