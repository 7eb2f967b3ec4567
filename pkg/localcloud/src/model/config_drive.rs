//! Config drives: the `openstack/latest` files (`meta_data.json`, `network_data.json`,
//! `vendor_data.json`) of each server, derived from its records and written under the config
//! drive directory, as Nova writes the config drive image a guest mounts. The metadata service
//! answers with the same documents. Upstream equivalent: `nova.api.metadata.base` and
//! `nova.virt.configdrive`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::compute::{server_ports, Server, SERVERS};
use super::network::{Subnet, SUBNETS};
use super::volume::attached_to;
use crate::store::{write_replace, Read};
use crate::{Error, Result};

/// The devices of a server's attached volumes, by device name: (volume ID, device, tag).
pub(crate) fn attached_disks(
    r: &impl Read,
    server_id: &str,
) -> Vec<(String, String, Option<String>)> {
    attached_to(r, server_id)
        .iter()
        .filter_map(|v| {
            let a = v.attachments.iter().find(|a| a.server_id == server_id)?;
            Some((v.meta.id.clone(), a.device.clone(), a.tag.clone()))
        })
        .collect()
}

/// `meta_data.json` of a server. Its `devices` are the attached volumes (virtio disks whose
/// serial is the volume ID, as a guest finds them in `/dev/disk/by-id/virtio-<id>`).
pub(crate) fn meta_data(r: &impl Read, s: &Server) -> Value {
    let devices: Vec<Value> = attached_disks(r, &s.meta.id)
        .into_iter()
        .enumerate()
        .map(|(i, (id, _, tag))| json!({"type": "disk", "bus": "virtio", "serial": id, "address": format!("0000:00:{:02x}.0", i + 6), "tags": tag.into_iter().collect::<Vec<_>>()}))
        .collect();
    json!({
        "uuid": s.meta.id, "name": s.name, "hostname": s.hostname(), "launch_index": 0,
        "availability_zone": s.availability_zone, "project_id": s.meta.project_id, "meta": s.metadata,
        "public_keys": {}, "keys": [], "devices": devices, "dedicated_cpus": [], "random_seed": "",
    })
}

fn netmask(cidr: &str) -> String {
    let len: u32 = cidr
        .split_once('/')
        .and_then(|(_, l)| l.parse().ok())
        .unwrap_or(32);
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32))
    };
    std::net::Ipv4Addr::from(mask).to_string()
}

/// `network_data.json` of a server.
pub(crate) fn network_data(r: &impl Read, s: &Server) -> Value {
    let mut links = Vec::new();
    let mut networks = Vec::new();
    for port in server_ports(r, &s.meta.id) {
        let link = format!("tap{}", &port.meta.id[..port.meta.id.len().min(11)]);
        links.push(json!({"id": link, "vif_id": port.meta.id, "type": "ovs", "mtu": 1450, "ethernet_mac_address": port.mac_address}));
        for ip in &port.fixed_ips {
            let subnet = r.get::<Subnet>(SUBNETS, &ip.subnet_id);
            let routes: Vec<Value> = subnet
                .as_ref()
                .and_then(|s| s.gateway_ip.clone())
                .map(|gw| vec![json!({"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": gw})])
                .unwrap_or_default();
            networks.push(json!({
                "id": format!("network{}", networks.len()), "type": "ipv4", "link": link,
                "ip_address": ip.ip_address, "netmask": subnet.as_ref().map_or("255.255.255.255".into(), |s| netmask(&s.cidr)),
                "routes": routes, "network_id": port.network_id, "services": [],
            }));
        }
    }
    json!({"links": links, "networks": networks, "services": []})
}

/// Writes the config drive of a new server, file by file with write-temp + rename. The files are
/// derived from the store, so they are not `fsync`ed: [`repair`] rewrites any that
/// a crash lost when the server starts again.
pub(crate) fn write(dir: &Path, r: &impl Read, s: &Server) -> Result<()> {
    let base = dir.join(&s.meta.id).join("openstack").join("latest");
    let files = [
        ("meta_data.json", meta_data(r, s)),
        ("network_data.json", network_data(r, s)),
        ("vendor_data.json", json!({})),
    ];
    for (name, value) in files {
        let path = base.join(name);
        let bytes = serde_json::to_vec_pretty(&value).map_err(|source| Error::Encode {
            what: "config drive",
            source,
        })?;
        write_replace(&path, &bytes, false).map_err(|source| Error::WriteConfigDrive {
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Writes the config drives of servers that have none (lost in a crash, or a new
/// `--config-drive-dir`) or whose `meta_data.json` no longer says what the store does (a
/// crash between an attach's or detach's two writes); returns how many were written.
pub(crate) fn repair(dir: &Path, r: &impl Read) -> Result<usize> {
    let mut written = 0;
    for s in r.list::<Server>(SERVERS) {
        let meta = dir.join(&s.meta.id).join("openstack/latest/meta_data.json");
        let current = std::fs::read(&meta)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        if current.as_ref() != Some(&meta_data(r, &s)) {
            write(dir, r, &s)?;
            written += 1;
        }
    }
    Ok(written)
}

/// Removes a deleted server's config drive.
pub(crate) fn remove(dir: &Path, id: &str) -> Result<()> {
    let path: PathBuf = dir.join(id);
    match std::fs::remove_dir_all(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::WriteConfigDrive { path, source }),
    }
}
