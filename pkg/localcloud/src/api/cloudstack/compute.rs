//! What the CloudStack dialect reads of the cloud's compute side: zones (the availability
//! zones), projects (Keystone's), virtual machines (Nova servers, with their NICs = Neutron
//! ports), guest networks (Neutron's internal networks), service offerings (flavors) and
//! disk offerings (fixed sizes, and a custom one).

use serde_json::{json, Value};

use super::{covers, filter, keyword, list, ownership, uuid_of, CsResult, Req};
use crate::api::zones::known_zones;
use crate::api::Cloud;
use crate::defaults::{self, FLAVORS};
use crate::model::compute::{find_flavor, Related, Server, ACTIVE, SERVERS, SHUTOFF};
use crate::model::identity::{Project, PROJECTS};
use crate::model::network::{Network, Subnet, NETWORKS, SUBNETS};
use crate::model::Record;
use crate::store::Read;

/// CloudStack's state of a VM with this Nova status.
pub(super) fn vm_state(status: &str) -> &'static str {
    match status {
        ACTIVE => "Running",
        SHUTOFF | "SUSPENDED" | "PAUSED" | "SHELVED" | "SHELVED_OFFLOADED" => "Stopped",
        "BUILD" | "REBOOT" | "HARD_REBOOT" => "Starting",
        "DELETED" | "SOFT_DELETED" => "Destroyed",
        _ => "Error",
    }
}

pub(crate) fn zone_id(name: &str) -> String {
    uuid_of("zone", name)
}

/// The zone a `zoneid` names (its ID or its name).
pub(super) fn zone_named(r: &impl Read, id: &str) -> Option<String> {
    known_zones(r)
        .into_iter()
        .find(|z| zone_id(z) == id || z == id)
}

fn zone_view(name: &str) -> Value {
    json!({
        "id": zone_id(name), "name": name, "description": format!("availability zone {name}"),
        "networktype": "Advanced", "allocationstate": "Enabled", "securitygroupsenabled": false,
        "localstorageenabled": true, "zonetoken": zone_id(name), "dhcpprovider": "VirtualRouter",
        "tags": [],
    })
}

/// `listZones` (`id`, `name`, `available`, `keyword`).
pub(super) fn list_zones(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items: Vec<Value> = cloud
        .store
        .read(|r| known_zones(r))
        .iter()
        .map(|z| zone_view(z))
        .collect();
    filter(req, "id", "id", &mut items);
    filter(req, "name", "name", &mut items);
    keyword(req, "name", &mut items);
    list(req, "zone", items)
}

/// `listProjects` (`id`, `name`, `keyword`): the default domain's projects.
pub(super) fn list_projects(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items: Vec<Value> = cloud.store.read(|r| {
        r.list::<Project>(PROJECTS)
            .into_iter()
            .filter(|p| p.domain_id == defaults::DOMAIN_ID)
            .map(|p| {
                json!({
                    "id": p.id, "name": p.name, "displaytext": p.name, "state": "Active",
                    "domainid": uuid_of("domain", "ROOT"), "domain": "ROOT",
                    "account": defaults::USER, "owner": [{"account": defaults::USER}], "tags": [],
                })
            })
            .collect()
    });
    filter(req, "id", "id", &mut items);
    filter(req, "name", "name", &mut items);
    keyword(req, "name", &mut items);
    list(req, "project", items)
}

pub(super) fn offering_id(flavor_id: &str) -> String {
    uuid_of("serviceoffering", flavor_id)
}

/// A VM's view: its NICs (the first is the default), its public IP when one forwards to it,
/// its offering, zone and host name.
pub(super) fn vm_view(r: &impl Read, rel: &Related, s: &Server) -> Value {
    let subnets = r.list::<Subnet>(SUBNETS);
    let nics: Vec<Value> = rel
        .ports(&s.meta.id)
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let fixed = p.fixed_ips.first();
            let subnet = fixed.and_then(|f| subnets.iter().find(|sn| sn.meta.id == f.subnet_id));
            json!({
                "id": p.meta.id, "networkid": p.network_id,
                "networkname": rel.network_name(&p.network_id),
                "ipaddress": fixed.map(|f| f.ip_address.as_str()),
                "macaddress": p.mac_address, "isdefault": i == 0,
                "netmask": subnet.map(|sn| netmask(&sn.cidr)),
                "gateway": subnet.and_then(|sn| sn.gateway_ip.clone()),
                "traffictype": "Guest", "type": "Isolated", "deviceid": i.to_string(),
            })
        })
        .collect();
    let public = rel
        .ports(&s.meta.id)
        .iter()
        .flat_map(|p| rel.floating(&p.meta.id))
        .next();
    let flavor = find_flavor(&s.flavor_id);
    let mut v = json!({
        "id": s.meta.id, "name": s.name, "displayname": s.name, "state": vm_state(&s.status),
        "zoneid": zone_id(&s.availability_zone), "zonename": s.availability_zone,
        "hostname": s.hostname(), "instancename": format!("i-{}-VM", s.index),
        "serviceofferingid": offering_id(flavor.map_or(s.flavor_id.as_str(), |f| f.id)),
        "serviceofferingname": flavor.map_or(s.flavor_id.as_str(), |f| f.name),
        "cpunumber": flavor.map(|f| f.vcpus), "memory": flavor.map(|f| f.ram_mb),
        "templateid": s.image_id, "keypair": s.key_name, "hypervisor": "KVM",
        "created": super::cs_date(&s.meta.created_at), "haenable": false,
        "nic": nics, "securitygroup": [], "affinitygroup": [],
        "tags": s.metadata.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
    });
    if let Some(f) = public {
        v["publicip"] = json!(f.floating_ip_address);
        v["publicipid"] = json!(f.meta.id);
    }
    if let Some(o) = v.as_object_mut() {
        o.extend(ownership(r, &s.meta.project_id));
    }
    v
}

/// The dotted netmask of an IPv4 CIDR (`127.1.0.0/16` → `255.255.0.0`).
fn netmask(cidr: &str) -> String {
    let len: u32 = cidr
        .split_once('/')
        .and_then(|(_, l)| l.parse().ok())
        .unwrap_or(32)
        .min(32);
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    std::net::Ipv4Addr::from(mask).to_string()
}

/// `listVirtualMachines` (`id`, `ids`, `name`, `projectid`, `zoneid`, `state`, `keyword`,
/// `networkid`).
pub(super) fn list_virtual_machines(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items = cloud.store.read(|r| {
        let projects = req.projects(r)?;
        let rel = Related::load(r);
        let mut servers: Vec<Server> = r
            .list::<Server>(SERVERS)
            .into_iter()
            .filter(|s| covers(&projects, &s.meta.project_id))
            .collect();
        servers.sort_by_key(|s| s.index);
        Ok::<_, super::CsError>(
            servers
                .iter()
                .map(|s| vm_view(r, &rel, s))
                .collect::<Vec<_>>(),
        )
    })?;
    if let Some(ids) = req.get("ids") {
        let ids: Vec<&str> = ids.split(',').map(str::trim).collect();
        items.retain(|i| i["id"].as_str().is_some_and(|id| ids.contains(&id)));
    }
    filter(req, "id", "id", &mut items);
    filter(req, "name", "name", &mut items);
    filter(req, "state", "state", &mut items);
    filter(req, "zoneid", "zoneid", &mut items);
    keyword(req, "name", &mut items);
    if let Some(net) = req.get("networkid") {
        items.retain(|i| {
            i["nic"]
                .as_array()
                .is_some_and(|nics| nics.iter().any(|n| n["networkid"] == net))
        });
    }
    list(req, "virtualmachine", items)
}

/// The guest network a `networkid` names, if it is one.
pub(super) fn guest_network(r: &impl Read, id: &str) -> Option<Network> {
    Network::get(r, id).filter(|n| !n.external)
}

/// `listNetworks` (`id`, `zoneid`, `projectid`, `keyword`): the internal (guest) networks of
/// the projects, and the shared ones.
pub(super) fn list_networks(cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items = cloud.store.read(|r| {
        let projects = req.projects(r)?;
        let subnets = r.list::<Subnet>(SUBNETS);
        let zone = known_zones(r)
            .first()
            .cloned()
            .unwrap_or_else(|| defaults::AVAILABILITY_ZONE.into());
        let items: Vec<Value> = r
            .list::<Network>(NETWORKS)
            .into_iter()
            .filter(|n| !n.external && (n.shared || covers(&projects, &n.meta.project_id)))
            .map(|n| {
                let subnet = subnets.iter().find(|s| s.network_id == n.meta.id);
                let mut v = json!({
                    "id": n.meta.id, "name": n.name, "displaytext": n.name,
                    "zoneid": zone_id(&zone), "zonename": zone, "state": "Implemented",
                    "traffictype": "Guest", "type": "Isolated", "isdefault": true,
                    "cidr": subnet.map(|s| s.cidr.as_str()),
                    "netmask": subnet.map(|s| netmask(&s.cidr)),
                    "gateway": subnet.and_then(|s| s.gateway_ip.clone()),
                    "networkofferingname": "DefaultIsolatedNetworkOfferingWithSourceNatService",
                    "canusefordeploy": true, "ispersistent": false, "tags": [],
                    "service": [{"name": "Lb"}, {"name": "Firewall"}, {"name": "Dhcp"}],
                });
                if let Some(o) = v.as_object_mut() {
                    o.extend(ownership(r, &n.meta.project_id));
                }
                v
            })
            .collect();
        Ok::<_, super::CsError>(items)
    })?;
    filter(req, "id", "id", &mut items);
    filter(req, "zoneid", "zoneid", &mut items);
    keyword(req, "name", &mut items);
    list(req, "network", items)
}

/// `listServiceOfferings` (`id`, `name`, `keyword`): the flavors.
pub(super) fn list_service_offerings(_cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items: Vec<Value> = FLAVORS
        .iter()
        .map(|f| {
            json!({
                "id": offering_id(f.id), "name": f.name, "displaytext": f.name,
                "cpunumber": f.vcpus, "cpuspeed": 2000, "memory": f.ram_mb,
                "rootdisksize": f.disk_gb, "storagetype": "shared", "offerha": false,
                "iscustomized": false, "issystem": false, "isvolatile": false,
                "created": "2026-01-01T00:00:00+0000",
            })
        })
        .collect();
    filter(req, "id", "id", &mut items);
    filter(req, "name", "name", &mut items);
    keyword(req, "name", &mut items);
    list(req, "serviceoffering", items)
}

/// The disk offerings: a custom one (`size` given at creation) and fixed sizes.
pub(super) const DISK_OFFERINGS: &[(&str, u64)] =
    &[("Custom", 0), ("Small", 5), ("Medium", 20), ("Large", 100)];

pub(super) fn disk_offering_id(name: &str) -> String {
    uuid_of("diskoffering", name)
}

/// The disk offering a `diskofferingid` names: its name and size (0: custom).
pub(super) fn disk_offering(id: &str) -> Option<(&'static str, u64)> {
    DISK_OFFERINGS
        .iter()
        .find(|(n, _)| disk_offering_id(n) == id || n.eq_ignore_ascii_case(id))
        .copied()
}

/// `listDiskOfferings` (`id`, `name`, `keyword`).
pub(super) fn list_disk_offerings(_cloud: &Cloud, req: &Req) -> CsResult<Value> {
    let mut items: Vec<Value> = DISK_OFFERINGS
        .iter()
        .map(|(name, size)| {
            json!({
                "id": disk_offering_id(name), "name": name,
                "displaytext": if *size == 0 { "Custom size".to_owned() } else { format!("{size} GB") },
                "disksize": size, "iscustomized": *size == 0, "storagetype": "shared",
                "provisioningtype": "thin", "displayoffering": true,
                "created": "2026-01-01T00:00:00+0000",
            })
        })
        .collect();
    filter(req, "id", "id", &mut items);
    filter(req, "name", "name", &mut items);
    keyword(req, "name", &mut items);
    list(req, "diskoffering", items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_states_read_as_cloudstack_vm_states() {
        assert_eq!(vm_state(ACTIVE), "Running");
        assert_eq!(vm_state(SHUTOFF), "Stopped");
        assert_eq!(vm_state("BUILD"), "Starting");
        assert_eq!(vm_state("ERROR"), "Error");
    }

    #[test]
    fn netmasks_of_cidrs() {
        assert_eq!(netmask("127.1.0.0/16"), "255.255.0.0");
        assert_eq!(netmask("10.0.0.0/24"), "255.255.255.0");
        assert_eq!(netmask("0.0.0.0/0"), "0.0.0.0");
    }

    #[test]
    fn disk_offerings_are_found_by_id_or_name() {
        assert_eq!(
            disk_offering(&disk_offering_id("Small")),
            Some(("Small", 5))
        );
        assert_eq!(disk_offering("custom"), Some(("Custom", 0)));
        assert_eq!(disk_offering("huge"), None);
    }
}
