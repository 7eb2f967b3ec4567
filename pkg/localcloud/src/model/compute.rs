//! Compute v2.1 (Nova) records: servers, as stored, with the relations other services and the
//! config drive read (a server's flavor, its ports). Flavors are fixed ([`crate::defaults`]).
//! Upstream equivalent: `nova.db.main.models` (`Instance`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::network::{Port, PORTS};
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
