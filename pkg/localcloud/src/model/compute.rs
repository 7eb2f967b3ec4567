//! Compute v2.1 (Nova) records: servers, as stored, with the relations other services and the
//! config drive read (a server's flavor, its ports). Flavors are fixed ([`crate::defaults`]).
//! Upstream equivalent: `nova.db.main.models` (`Instance`).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::network::{FloatingIp, Network, Port, FLOATING_IPS, NETWORKS, PORTS};
use super::volume::{Volume, VOLUMES};
use super::{impl_record, Meta};
use crate::defaults::{Flavor, FLAVORS};
use crate::store::Read;

pub(crate) const SERVERS: &str = "servers";
pub(crate) const ACTIVE: &str = "ACTIVE";
pub(crate) const SHUTOFF: &str = "SHUTOFF";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Server {
    #[serde(flatten)]
    pub meta: Meta,
    pub name: String,
    pub status: String,
    pub flavor_id: String,
    pub image_id: String,
    pub availability_zone: String,
    pub user_id: String,
    pub metadata: BTreeMap<String, String>,
    pub key_name: Option<String>,
    pub description: Option<String>,
    /// Creation order; also the EC2-style ID (`i-0000000b`).
    pub index: u64,
    /// Server tags (Nova 2.26); the GCE dialect shows them as the instance's network tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

impl_record!(Server: SERVERS, ("server", "servers", "Instance"), "itemNotFound");

impl Server {
    pub fn ec2_id(&self) -> String {
        format!("i-{:08x}", self.index)
    }
    pub fn hostname(&self) -> String {
        let h: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        if h.is_empty() {
            format!("server-{}", self.index)
        } else {
            h
        }
    }
    pub fn flavor(&self) -> Option<&'static Flavor> {
        find_flavor(&self.flavor_id)
    }
}

pub(crate) fn find_flavor(id_or_name: &str) -> Option<&'static Flavor> {
    // Accept a link as flavorRef (`.../flavors/2`), as Nova does.
    let key = id_or_name.rsplit('/').next().unwrap_or(id_or_name);
    FLAVORS
        .iter()
        .find(|f| f.id == key)
        .or_else(|| FLAVORS.iter().find(|f| f.name == key))
}

/// The ports of a server.
pub(crate) fn server_ports(r: &impl Read, server_id: &str) -> Vec<Port> {
    let mut ports: Vec<Port> = r
        .list::<Port>(PORTS)
        .into_iter()
        .filter(|p| p.device_id == server_id && p.device_owner.starts_with("compute:"))
        .collect();
    ports.sort_by(|a, b| {
        a.meta
            .created_at
            .cmp(&b.meta.created_at)
            .then(a.meta.id.cmp(&b.meta.id))
    });
    ports
}

/// What server views need from other tables, read once per request so that listing n
/// servers costs O(n), not O(n²).
pub(crate) struct Related {
    ports: HashMap<String, Vec<Port>>,
    floating: HashMap<String, Vec<FloatingIp>>,
    network_names: HashMap<String, String>,
    volumes: HashMap<String, Vec<Volume>>,
}

impl Related {
    pub(crate) fn load(r: &impl Read) -> Self {
        let mut ports: HashMap<String, Vec<Port>> = HashMap::new();
        for p in r.list::<Port>(PORTS) {
            if p.device_owner.starts_with("compute:") {
                ports.entry(p.device_id.clone()).or_default().push(p);
            }
        }
        for list in ports.values_mut() {
            list.sort_by(|a, b| {
                a.meta
                    .created_at
                    .cmp(&b.meta.created_at)
                    .then(a.meta.id.cmp(&b.meta.id))
            });
        }
        let mut floating: HashMap<String, Vec<FloatingIp>> = HashMap::new();
        for f in r.list::<FloatingIp>(FLOATING_IPS) {
            if let Some(port) = f.port_id.clone() {
                floating.entry(port).or_default().push(f);
            }
        }
        let network_names = r
            .list::<Network>(NETWORKS)
            .into_iter()
            .map(|n| (n.meta.id, n.name))
            .collect();
        let mut volumes: HashMap<String, Vec<Volume>> = HashMap::new();
        for v in r.list::<Volume>(VOLUMES) {
            for a in &v.attachments {
                volumes
                    .entry(a.server_id.clone())
                    .or_default()
                    .push(v.clone());
            }
        }
        for (server, list) in volumes.iter_mut() {
            list.sort_by_key(|v| {
                v.attachments
                    .iter()
                    .find(|a| &a.server_id == server)
                    .map(|a| a.device.clone())
            });
        }
        Related {
            ports,
            floating,
            network_names,
            volumes,
        }
    }

    /// The floating IPs associated with a port.
    pub(crate) fn floating(&self, port_id: &str) -> &[FloatingIp] {
        self.floating.get(port_id).map_or(&[], Vec::as_slice)
    }

    /// A network's name (its ID when unknown).
    pub(crate) fn network_name<'a>(&'a self, network_id: &'a str) -> &'a str {
        self.network_names
            .get(network_id)
            .map_or(network_id, String::as_str)
    }

    /// The ports of a server, oldest first.
    pub(crate) fn ports(&self, server_id: &str) -> &[Port] {
        self.ports.get(server_id).map_or(&[], Vec::as_slice)
    }

    /// Volumes attached to a server, by device name.
    pub(crate) fn volumes(&self, server_id: &str) -> &[Volume] {
        self.volumes.get(server_id).map_or(&[], Vec::as_slice)
    }

    /// `{"private": [{"addr": "127.1.0.3", "version": 4, "OS-EXT-IPS:type": "fixed", ...}]}`
    pub(crate) fn addresses(&self, server_id: &str) -> serde_json::Map<String, Value> {
        let mut out = serde_json::Map::new();
        for port in self.ports(server_id) {
            let net_name = self
                .network_names
                .get(&port.network_id)
                .cloned()
                .unwrap_or_else(|| port.network_id.clone());
            let entry = out.entry(net_name).or_insert_with(|| json!([]));
            let Some(list) = entry.as_array_mut() else {
                continue;
            };
            for ip in &port.fixed_ips {
                list.push(json!({"version": 4, "addr": ip.ip_address, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": port.mac_address}));
            }
            for fip in self.floating.get(&port.meta.id).into_iter().flatten() {
                list.push(json!({"version": 4, "addr": fip.floating_ip_address, "OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": port.mac_address}));
            }
        }
        out
    }
}
