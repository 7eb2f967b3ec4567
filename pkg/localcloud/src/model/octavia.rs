//! Load Balancer v2 (Octavia) records: load balancers, listeners, pools, members, health
//! monitors and the status tree, as stored and as the API shows them, plus the relations
//! between them and how operating statuses roll up (member → pool → listener → load balancer).
//! The API (`api/loadbalancer`) writes these records and the data plane
//! ([`crate::dataplane`]) reads them. Upstream equivalent: `octavia.db.models` and the status
//! calculation of Octavia's health manager.
//!
//! The stored JSON of each record is its API view minus the fields computed on read
//! (`operating_status` roll-ups, `listeners`/`pools`/`members` ID lists, `tenant_id`), so
//! records written by earlier versions (untyped, with `tenant_id` stored) still read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

pub(crate) use super::Record;
use super::{impl_record, Meta, NotFound};
use crate::store::Read;

/// Store tables of the Load Balancer API.
pub(crate) const LOADBALANCERS: &str = "lb_loadbalancers";
pub(crate) const LISTENERS: &str = "lb_listeners";
pub(crate) const POOLS: &str = "lb_pools";
pub(crate) const MEMBERS: &str = "lb_members";
pub(crate) const MONITORS: &str = "lb_healthmonitors";
pub(crate) const ALL_TABLES: [&str; 5] = [LOADBALANCERS, LISTENERS, POOLS, MEMBERS, MONITORS];

/// Octavia's `provisioning_status`: where the control plane is with an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Provisioning {
    Active,
    PendingCreate,
    PendingUpdate,
    PendingDelete,
    Error,
}

impl Provisioning {
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            Provisioning::PendingCreate | Provisioning::PendingUpdate | Provisioning::PendingDelete
        )
    }
}

/// Octavia's `operating_status`: what the data plane observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Operating {
    Online,
    Offline,
    Degraded,
    Error,
    NoMonitor,
}

/// `{"id": ...}`, how Octavia points at related objects (`"loadbalancers": [{"id": ...}]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ref {
    pub id: String,
}

impl Ref {
    pub fn to(id: impl Into<String>) -> Vec<Ref> {
        vec![Ref { id: id.into() }]
    }
}

fn first(refs: &[Ref]) -> &str {
    refs.first().map_or("", |r| r.id.as_str())
}

/// The attributes every Octavia object has.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Common {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub description: String,
    pub admin_state_up: bool,
    pub tags: Vec<String>,
    pub provisioning_status: Provisioning,
    pub operating_status: Operating,
}

impl Common {
    /// A new object of `project_id`: `PENDING_CREATE`, `OFFLINE`, admin up, unnamed.
    pub fn new(project_id: &str) -> Self {
        Common {
            meta: Meta::new(project_id),
            name: String::new(),
            description: String::new(),
            admin_state_up: true,
            tags: Vec::new(),
            provisioning_status: Provisioning::PendingCreate,
            operating_status: Operating::Offline,
        }
    }

    /// Records a change the data plane has to apply: `PENDING_UPDATE`, stamped.
    pub fn touch(&mut self) {
        self.meta.touch();
        self.provisioning_status = Provisioning::PendingUpdate;
    }
}

/// Filters a list answers from the store's index (the view shows them as the record stores
/// them, so the index narrows the candidates and the view filter still decides).
const INDEXED: &[&str] = &[
    "id",
    "name",
    "description",
    "project_id",
    "vip_port_id",
    "vip_address",
    "vip_subnet_id",
    "vip_network_id",
    "pool_id",
    "default_pool_id",
    "address",
];

/// What every Octavia [`Record`] has beyond [`Meta`]: the [`Common`] attributes and the way
/// Octavia shows them.
pub(crate) trait Octavia: Record {
    fn common(&self) -> &Common;
    fn common_mut(&mut self) -> &mut Common;
    /// The stored attributes as the API shows them: `tenant_id` beside `project_id`, no
    /// `revision_number` (Octavia has none), and timestamps as Octavia writes them: UTC
    /// without a zone suffix (`2018-08-23T20:05:21`).
    fn base_view(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("revision_number");
            for k in ["created_at", "updated_at"] {
                if let Some(Value::String(t)) = o.get_mut(k) {
                    if t.ends_with('Z') {
                        t.pop();
                    }
                }
            }
            o.insert("tenant_id".into(), json!(self.common().meta.project_id));
        }
        v
    }
}

/// The [`Record`] and [`Octavia`] impls of an Octavia record (its [`Meta`] is in `common`).
macro_rules! record {
    ($t:ty, $table:expr, $title:expr, $one:expr, $many:expr) => {
        impl_record!($t [common.meta]: $table, ($one, $many, $title), "NotFound", INDEXED;
            fn not_found(key: &str) -> NotFound {
                NotFound {
                    kind: Self::NOT_FOUND,
                    message: format!("{} {key} not found.", $title),
                }
            }
        );
        impl Octavia for $t {
            fn common(&self) -> &Common {
                &self.common
            }
            fn common_mut(&mut self) -> &mut Common {
                &mut self.common
            }
        }
    };
}

/// A load balancer: a VIP and the listeners and pools on it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LoadBalancer {
    #[serde(flatten)]
    pub common: Common,
    pub vip_address: String,
    pub vip_port_id: String,
    pub vip_subnet_id: Option<String>,
    pub vip_network_id: Option<String>,
    pub vip_qos_policy_id: Option<String>,
    pub provider: String,
    pub flavor_id: Option<String>,
    pub availability_zone: Option<String>,
}
record!(
    LoadBalancer,
    LOADBALANCERS,
    "Load Balancer",
    "loadbalancer",
    "loadbalancers"
);

/// Octavia's largest listener timeout: 365 days, in milliseconds.
pub(crate) const MAX_TIMEOUT_MS: i64 = 31_536_000_000;

/// Octavia's listener timeouts (milliseconds) and their defaults.
pub(crate) const LISTENER_TIMEOUTS: [(&str, i64); 4] = [
    ("timeout_client_data", 50_000),
    ("timeout_member_connect", 5_000),
    ("timeout_member_data", 50_000),
    ("timeout_tcp_inspect", 0),
];

/// A listener: `protocol_port` on the load balancer's VIP, forwarding to its default pool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Listener {
    #[serde(flatten)]
    pub common: Common,
    pub loadbalancers: Vec<Ref>,
    pub protocol: String,
    pub protocol_port: u16,
    pub default_pool_id: Option<String>,
    /// -1 is unlimited.
    pub connection_limit: i64,
    /// Milliseconds, 0..=[`MAX_TIMEOUT_MS`].
    pub timeout_client_data: i64,
    pub timeout_member_connect: i64,
    pub timeout_member_data: i64,
    pub timeout_tcp_inspect: i64,
    pub insert_headers: BTreeMap<String, String>,
    pub allowed_cidrs: Option<Vec<String>>,
    pub default_tls_container_ref: Option<String>,
    pub sni_container_refs: Vec<String>,
    pub l7policies: Vec<Ref>,
    #[serde(flatten)]
    pub tls: ListenerTls,
}
record!(Listener, LISTENERS, "Listener", "listener", "listeners");

/// A listener's TLS attributes: kept and shown once given. The local data plane forwards TCP
/// and UDP only and terminates no TLS.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ListenerTls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca_tls_container_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_authentication: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_crl_container_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ciphers: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_versions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn_protocols: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsts_max_age: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsts_include_subdomains: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsts_preload: Option<bool>,
}

impl Listener {
    pub fn lb_id(&self) -> &str {
        first(&self.loadbalancers)
    }
}

/// A pool of members behind a listener, with a balancing algorithm.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pool {
    #[serde(flatten)]
    pub common: Common,
    pub loadbalancers: Vec<Ref>,
    pub protocol: String,
    pub lb_algorithm: String,
    pub session_persistence: Option<Map<String, Value>>,
    pub tls_enabled: bool,
    pub tls_container_ref: Option<String>,
    pub ca_tls_container_ref: Option<String>,
    pub crl_container_ref: Option<String>,
}
record!(Pool, POOLS, "Pool", "pool", "pools");

impl Pool {
    pub fn lb_id(&self) -> &str {
        first(&self.loadbalancers)
    }
}

/// A pool member: a backend `address:protocol_port`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Member {
    #[serde(flatten)]
    pub common: Common,
    pub pool_id: String,
    pub address: String,
    pub protocol_port: u16,
    /// 0..=256; 0 drains the member (no new connections).
    pub weight: u16,
    pub backup: bool,
    pub subnet_id: Option<String>,
    pub monitor_address: Option<String>,
    pub monitor_port: Option<u16>,
}
record!(Member, MEMBERS, "Member", "member", "members");

/// A health monitor of one pool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HealthMonitor {
    #[serde(flatten)]
    pub common: Common,
    pub pools: Vec<Ref>,
    #[serde(rename = "type")]
    pub kind: String,
    /// Seconds between probes.
    pub delay: u32,
    /// Seconds a probe may take.
    pub timeout: u32,
    /// Successes that bring a member back (1..=10).
    pub max_retries: u8,
    /// Failures that take a member out (1..=10).
    pub max_retries_down: u8,
    pub http_method: Option<String>,
    pub url_path: Option<String>,
    pub expected_codes: Option<String>,
    pub http_version: Option<f64>,
    pub domain_name: Option<String>,
}
record!(
    HealthMonitor,
    MONITORS,
    "Health Monitor",
    "healthmonitor",
    "healthmonitors"
);

impl HealthMonitor {
    pub fn pool_id(&self) -> &str {
        first(&self.pools)
    }
}

// ---- relations --------------------------------------------------------------------------------

// From the store's index (`loadbalancers.id` is the reference array's index), not a scan of
// the child table per parent: rendering a list of N load balancers stays linear.

pub(crate) fn listeners_of(r: &impl Read, lb_id: &str) -> Vec<Listener> {
    Listener::list_where(r, "loadbalancers.id", lb_id)
        .into_iter()
        .filter(|l| l.lb_id() == lb_id)
        .collect()
}

pub(crate) fn pools_of(r: &impl Read, lb_id: &str) -> Vec<Pool> {
    Pool::list_where(r, "loadbalancers.id", lb_id)
        .into_iter()
        .filter(|p| p.lb_id() == lb_id)
        .collect()
}

pub(crate) fn members_of(r: &impl Read, pool_id: &str) -> Vec<Member> {
    Member::list_where(r, "pool_id", pool_id)
}

pub(crate) fn monitors_of(r: &impl Read, pool_id: &str) -> Vec<HealthMonitor> {
    HealthMonitor::list_where(r, "pools.id", pool_id)
        .into_iter()
        .filter(|m| m.pool_id() == pool_id)
        .collect()
}

/// Listeners whose default pool is `pool_id`.
pub(crate) fn listeners_using(r: &impl Read, pool_id: &str) -> Vec<Listener> {
    Listener::list_where(r, "default_pool_id", pool_id)
}

pub(crate) fn refs<T: Record>(items: &[T]) -> Vec<Ref> {
    items
        .iter()
        .map(|i| Ref {
            id: i.id().to_owned(),
        })
        .collect()
}

// ---- operating status roll-up -----------------------------------------------------------------

pub(crate) fn member_status(m: &Member) -> Operating {
    if !m.common.admin_state_up {
        return Operating::Offline;
    }
    m.common.operating_status
}

pub(crate) fn pool_status(r: &impl Read, p: &Pool) -> Operating {
    if !p.common.admin_state_up {
        return Operating::Offline;
    }
    let members: Vec<Operating> = members_of(r, p.id()).iter().map(member_status).collect();
    let errors = members.iter().filter(|s| **s == Operating::Error).count();
    if !members.is_empty() && errors == members.len() {
        Operating::Error
    } else if errors > 0 {
        Operating::Degraded
    } else {
        Operating::Online
    }
}

pub(crate) fn listener_status(r: &impl Read, l: &Listener) -> Operating {
    if !l.common.admin_state_up {
        return Operating::Offline;
    }
    if l.common.provisioning_status == Provisioning::Error {
        return Operating::Error;
    }
    match l
        .default_pool_id
        .as_deref()
        .and_then(|p| r.get::<Pool>(POOLS, p))
    {
        Some(p) => match pool_status(r, &p) {
            Operating::Error => Operating::Degraded,
            s => s,
        },
        None => Operating::Online,
    }
}

pub(crate) fn lb_status(r: &impl Read, lb: &LoadBalancer) -> Operating {
    if !lb.common.admin_state_up {
        return Operating::Offline;
    }
    let degraded = listeners_of(r, lb.id())
        .iter()
        .any(|l| listener_status(r, l) != Operating::Online)
        || pools_of(r, lb.id())
            .iter()
            .any(|p| pool_status(r, p) != Operating::Online);
    if degraded {
        Operating::Degraded
    } else {
        Operating::Online
    }
}

pub(crate) fn monitor_status(m: &HealthMonitor) -> Operating {
    if m.common.admin_state_up {
        Operating::Online
    } else {
        Operating::Offline
    }
}

// ---- status tree (`GET /loadbalancers/{id}/status`) -------------------------------------------

#[derive(Debug, Serialize)]
pub(crate) struct StatusTree {
    pub loadbalancer: LbStatus,
}

#[derive(Debug, Serialize)]
pub(crate) struct LbStatus {
    pub id: String,
    pub name: String,
    pub provisioning_status: Provisioning,
    pub operating_status: Operating,
    pub listeners: Vec<ListenerStatus>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ListenerStatus {
    pub id: String,
    pub name: String,
    pub provisioning_status: Provisioning,
    pub operating_status: Operating,
    pub pools: Vec<PoolStatus>,
}

#[derive(Debug, Serialize)]
pub(crate) struct PoolStatus {
    pub id: String,
    pub name: String,
    pub provisioning_status: Provisioning,
    pub operating_status: Operating,
    pub members: Vec<MemberStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_monitor: Option<MonitorStatus>,
}

#[derive(Debug, Serialize)]
pub(crate) struct MemberStatus {
    pub id: String,
    pub name: String,
    pub address: String,
    pub protocol_port: u16,
    pub provisioning_status: Provisioning,
    pub operating_status: Operating,
}

#[derive(Debug, Serialize)]
pub(crate) struct MonitorStatus {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub provisioning_status: Provisioning,
    pub operating_status: Operating,
}

impl StatusTree {
    /// The status tree of `lb`: its listeners, their default pools, members and monitor.
    pub fn of(r: &impl Read, lb: &LoadBalancer) -> StatusTree {
        let pool_tree = |p: Pool| PoolStatus {
            id: p.id().to_owned(),
            name: p.common.name.clone(),
            provisioning_status: p.common.provisioning_status,
            operating_status: pool_status(r, &p),
            members: members_of(r, p.id())
                .iter()
                .map(|m| MemberStatus {
                    id: m.id().to_owned(),
                    name: m.common.name.clone(),
                    address: m.address.clone(),
                    protocol_port: m.protocol_port,
                    provisioning_status: m.common.provisioning_status,
                    operating_status: member_status(m),
                })
                .collect(),
            health_monitor: monitors_of(r, p.id()).first().map(|hm| MonitorStatus {
                id: hm.id().to_owned(),
                name: hm.common.name.clone(),
                kind: hm.kind.clone(),
                provisioning_status: hm.common.provisioning_status,
                operating_status: monitor_status(hm),
            }),
        };
        StatusTree {
            loadbalancer: LbStatus {
                id: lb.id().to_owned(),
                name: lb.common.name.clone(),
                provisioning_status: lb.common.provisioning_status,
                operating_status: lb_status(r, lb),
                listeners: listeners_of(r, lb.id())
                    .iter()
                    .map(|l| ListenerStatus {
                        id: l.id().to_owned(),
                        name: l.common.name.clone(),
                        provisioning_status: l.common.provisioning_status,
                        operating_status: listener_status(r, l),
                        pools: l
                            .default_pool_id
                            .as_deref()
                            .and_then(|p| r.get::<Pool>(POOLS, p))
                            .into_iter()
                            .map(pool_tree)
                            .collect(),
                    })
                    .collect(),
            },
        }
    }
}
