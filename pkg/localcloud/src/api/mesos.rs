//! The Mesos dialect: the master's state endpoint (`/state`, the legacy `/state.json`, and both
//! under `/master/`), as Apache Mesos 1.x documents it (`docs/endpoints/master/state.md` and
//! the `MasterInfo`/`SlaveInfo` messages its JSON renders), over the local cloud's records.
//!
//! Each Nova server is an agent ("slave" in the API's field names):
//! - `id` is `<server id>-S<creation index>` (a real agent ID is `<master id>-S<n>`), stable
//!   across restarts of the local cloud;
//! - `hostname` is the server's `mesos-hostname` metadata when set, else its first fixed
//!   IPv4 address (DC/OS and many Mesos clusters start agents with `--hostname=<ip>`), else
//!   its host name; the legacy provider resolved it to the Node's address;
//! - `resources` come from the flavor (`cpus`, `mem` in MB, `disk` in MB, the default `ports`
//!   range), `attributes` are `zone` (the availability zone) plus every `mesos-attribute-<k>`
//!   metadata entry;
//! - a `SHUTOFF` server is a disconnected agent: still listed, `active: false` (Mesos keeps a
//!   disconnected agent in `slaves` until it is marked unreachable); a deleted one is gone.
//!
//! The leader is this server itself (`master@<ip>:<port>` of the API listener); `cluster` is
//! `--mesos-cluster` and absent without it, as a master started without `--cluster`. No
//! frameworks run. Mesos answers read-only endpoints without authentication by default
//! (`--authenticate_http_readonly=false`), and so does this dialect.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};

use super::{reply, service_layers, Cloud, Ctx, Service};
use crate::api::compute::{Related, Server, SERVERS};
use crate::model::gce::parse_iso;
use crate::store::Read;

/// The Mesos release whose `/state` this dialect follows.
pub(crate) const MESOS_VERSION: &str = "1.11.0";
/// An agent's default port (`--port` of `mesos-agent`).
const AGENT_PORT: u16 = 5051;
/// The agent's default `ports` resource.
const DEFAULT_PORTS: &str = "[31000-32000]";
/// Server metadata that overrides an agent's hostname.
pub(crate) const HOSTNAME_KEY: &str = "mesos-hostname";
/// Prefix of server metadata shown as agent attributes.
pub(crate) const ATTRIBUTE_PREFIX: &str = "mesos-attribute-";

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let router = Router::new()
        .route("/state", get(state))
        .route("/state.json", get(state))
        .route("/master/state", get(state))
        .route("/master/state.json", get(state));
    service_layers(router, &cloud, Service::Mesos)
}

/// The master's address: the API listener's, from the URL clients use.
fn master_address(cloud: &Cloud) -> SocketAddr {
    let fallback = SocketAddr::from((Ipv4Addr::LOCALHOST, 5050));
    let Ok(uri) = cloud.base_url.parse::<axum::http::Uri>() else {
        return fallback;
    };
    let host = uri
        .host()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
        .and_then(|h| h.parse::<IpAddr>().ok());
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    host.map_or(fallback, |ip| SocketAddr::new(ip, port))
}

/// `MasterInfo.ip`: the IPv4 address as Mesos stores it, network byte order read as a
/// little-endian integer (127.0.0.1 is 16777343).
fn packed_ip(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) => u64::from(u32::from_le_bytes(v4.octets())),
        IpAddr::V6(_) => 0,
    }
}

/// A stable master ID from the region (a real one is `<date>-<time>-<ip>-<port>-<pid>`).
fn master_id(cloud: &Cloud) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cloud.config.region.as_bytes());
    let b = digest.as_ref();
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]),
        u16::from_be_bytes([b[8], b[9]]),
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]]),
    )
}

fn seconds(iso: &str) -> f64 {
    parse_iso(iso).map_or(0.0, |s| s as f64)
}

/// One agent's `/state` entry.
pub(crate) fn agent_view(server: &Server, rel: &Related) -> Value {
    let ip = rel
        .ports(&server.meta.id)
        .iter()
        .flat_map(|p| p.fixed_ips.iter())
        .map(|f| f.ip_address.clone())
        .find(|a| a.parse::<Ipv4Addr>().is_ok());
    let hostname = server
        .metadata
        .get(HOSTNAME_KEY)
        .cloned()
        .or_else(|| ip.clone())
        .unwrap_or_else(|| server.hostname());
    let flavor = server.flavor();
    let cpus = flavor.map_or(1.0, |f| f64::from(f.vcpus));
    let mem = flavor.map_or(512.0, |f| f64::from(f.ram_mb));
    let disk = flavor.map_or(0.0, |f| f64::from(f.disk_gb) * 1024.0);
    let resources =
        json!({"cpus": cpus, "mem": mem, "disk": disk, "gpus": 0.0, "ports": DEFAULT_PORTS});
    let none = json!({"cpus": 0.0, "mem": 0.0, "disk": 0.0, "gpus": 0.0});
    let mut attributes = Map::new();
    attributes.insert("zone".into(), json!(server.availability_zone));
    for (k, v) in &server.metadata {
        if let Some(name) = k.strip_prefix(ATTRIBUTE_PREFIX) {
            // Mesos attributes are text, scalars or ranges; a number stays a number.
            let value = v.parse::<f64>().map_or_else(|_| json!(v), |n| json!(n));
            attributes.insert(name.into(), value);
        }
    }
    let active = server.status != crate::model::compute::SHUTOFF;
    let pid_host = ip.unwrap_or_else(|| hostname.clone());
    json!({
        "id": format!("{}-S{}", server.meta.id, server.index),
        "pid": format!("slave(1)@{pid_host}:{AGENT_PORT}"),
        "hostname": hostname,
        "port": AGENT_PORT,
        "registered_time": seconds(&server.meta.created_at),
        "reregistered_time": seconds(&server.meta.updated_at),
        "resources": resources,
        "used_resources": none,
        "offered_resources": none,
        "reserved_resources": {},
        "unreserved_resources": resources,
        "reserved_resources_full": {},
        "unreserved_resources_full": [],
        "used_resources_full": [],
        "offered_resources_full": [],
        "attributes": attributes,
        "active": active,
        "deactivated": false,
        "version": MESOS_VERSION,
        "capabilities": ["MULTI_ROLE", "HIERARCHICAL_ROLE", "RESERVATION_REFINEMENT", "RESOURCE_PROVIDER", "RESIZE_VOLUME", "AGENT_OPERATION_FEEDBACK", "AGENT_DRAINING", "TASK_RESOURCE_LIMITS"],
        "domain": {"fault_domain": {"region": {"name": ""}, "zone": {"name": server.availability_zone}}},
    })
}

/// The whole `/state` document.
pub(crate) fn state_view(cloud: &Cloud, r: &impl Read) -> Value {
    let rel = Related::load(r);
    let mut servers = r.list::<Server>(SERVERS);
    servers.sort_by_key(|s| s.index);
    let slaves: Vec<Value> = servers.iter().map(|s| agent_view(s, &rel)).collect();
    let active = slaves.iter().filter(|s| s["active"] == true).count();
    let master = master_address(cloud);
    let id = master_id(cloud);
    let pid = format!("master@{master}");
    let ip = master.ip().to_string();
    let info = json!({
        "id": id, "pid": pid, "port": master.port(), "hostname": ip, "ip": packed_ip(master.ip()),
        "address": {"hostname": ip, "ip": ip, "port": master.port()},
        "version": MESOS_VERSION,
        "capabilities": [{"type": "AGENT_UPDATE"}, {"type": "AGENT_DRAINING"}, {"type": "QUOTA_V2"}],
    });
    let started = crate::api::now() as f64;
    let mut state = json!({
        "version": MESOS_VERSION,
        "git_sha": "", "git_tag": MESOS_VERSION,
        "build_date": "", "build_time": 0.0, "build_user": "hypercloud",
        "start_time": started, "elected_time": started,
        "id": id, "pid": pid, "hostname": ip,
        "capabilities": ["AGENT_UPDATE", "AGENT_DRAINING", "QUOTA_V2"],
        "activated_slaves": active as f64,
        "deactivated_slaves": 0.0,
        "unreachable_slaves": 0.0,
        "leader": pid, "leader_info": info,
        "flags": {"port": master.port().to_string(), "authenticate_http_readonly": "false", "authenticate_agents": "false"},
        "slaves": slaves,
        "frameworks": [], "completed_frameworks": [], "orphan_tasks": [], "unregistered_frameworks": [],
    });
    if let Some(cluster) = &cloud.config.mesos_cluster {
        state["cluster"] = json!(cluster);
        state["flags"]["cluster"] = json!(cluster);
    }
    state
}

async fn state(State(cloud): Ctx) -> Response {
    let body = cloud.store.read(|r| state_view(&cloud, r));
    reply(StatusCode::OK, body)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn master_info_ip_is_packed_as_mesos_packs_it() {
        assert_eq!(packed_ip("127.0.0.1".parse().unwrap()), 16_777_343);
        assert_eq!(packed_ip("10.0.0.2".parse().unwrap()), 33_554_442);
    }
}
