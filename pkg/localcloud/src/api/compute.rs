//! Compute v2.1 (Nova): servers (create, list with `name`/`status`/`ip` filters, detail, get,
//! update, delete, `os-stop`/`os-start`/`reboot` so `SHUTOFF` exists), addresses per network,
//! `os-interface`, volume attachments, flavors and availability zones, with microversions up to
//! 2.79. Servers are records, not VMs: they get ports on the simulated networks and a config
//! drive directory, and they are `ACTIVE` as soon as they are created.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::network::{self, FloatingIp, Network, Port, PortSpec, FLOATING_IPS, NETWORKS, PORTS};
use super::volume::{self, Volume, VOLUMES};
use super::{
    paginate, parse_body, reply, require_scoped_token, service_layers, ApiError, Caller, Cloud,
    Ctx, Microversion, Microversions, Params, Service,
};
use crate::defaults::{self, Flavor, FLAVORS};
use crate::model::Meta;
use crate::store::{Read, Tx};

pub(crate) const SERVERS: &str = "servers";
pub(crate) const ZONES: &str = "availability_zones";
const COUNTERS: &str = "counters";

pub(crate) const MICROVERSIONS: Microversions = Microversions {
    service: "compute",
    min: Microversion(2, 1),
    max: Microversion(2, 79),
    legacy_header: Some("x-openstack-nova-api-version"),
};

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

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("itemNotFound", format!("Instance {id} could not be found."))
}

pub(crate) fn find_server(r: &impl Read, id: &str) -> Result<Server, ApiError> {
    r.get::<Server>(SERVERS, id).ok_or_else(|| not_found(id))
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

fn links(cloud: &Cloud, kind: &str, id: &str) -> Value {
    json!([
        {"rel": "self", "href": format!("{}/compute/v2.1/{kind}/{id}", cloud.base_url)},
        {"rel": "bookmark", "href": format!("{}/compute/{kind}/{id}", cloud.base_url)},
    ])
}

fn server_view(cloud: &Cloud, rel: &Related, s: &Server, mv: Microversion) -> Value {
    let flavor = s.flavor();
    let flavor_view = if mv >= Microversion(2, 47) {
        flavor.map_or(json!({}), |f| json!({"vcpus": f.vcpus, "ram": f.ram_mb, "disk": f.disk_gb, "ephemeral": 0, "swap": 0, "original_name": f.name, "extra_specs": {}}))
    } else {
        json!({"id": s.flavor_id, "links": [{"rel": "bookmark", "href": format!("{}/compute/flavors/{}", cloud.base_url, s.flavor_id)}]})
    };
    let image = if s.image_id.is_empty() {
        json!("")
    } else {
        json!({"id": s.image_id, "links": [{"rel": "bookmark", "href": format!("{}/compute/images/{}", cloud.base_url, s.image_id)}]})
    };
    let attached: Vec<Value> = rel
        .volumes(&s.meta.id)
        .iter()
        .map(|v| {
            if mv >= Microversion(2, 3) {
                json!({"id": v.meta.id, "delete_on_termination": false})
            } else {
                json!({"id": v.meta.id})
            }
        })
        .collect();
    let stopped = s.status == SHUTOFF;
    let mut v = json!({
        "id": s.meta.id, "name": s.name, "status": s.status, "tenant_id": s.meta.project_id, "user_id": s.user_id,
        "metadata": s.metadata, "hostId": format!("{:x}", fxhash(&format!("{}local-cloud", s.meta.project_id))),
        "image": image, "flavor": flavor_view, "created": s.meta.created_at, "updated": s.meta.updated_at,
        "addresses": rel.addresses(&s.meta.id), "accessIPv4": "", "accessIPv6": "",
        "links": links(cloud, "servers", &s.meta.id), "OS-DCF:diskConfig": "MANUAL", "progress": 0,
        "OS-EXT-AZ:availability_zone": s.availability_zone, "config_drive": "True", "key_name": s.key_name,
        "OS-SRV-USG:launched_at": s.meta.created_at.replace('Z', ".000000"), "OS-SRV-USG:terminated_at": null,
        "OS-EXT-STS:task_state": null, "OS-EXT-STS:vm_state": if stopped { "stopped" } else { "active" },
        "OS-EXT-STS:power_state": if stopped { 4 } else { 1 },
        "OS-EXT-SRV-ATTR:host": "local-cloud", "OS-EXT-SRV-ATTR:hypervisor_hostname": "local-cloud",
        "OS-EXT-SRV-ATTR:instance_name": format!("instance-{:08x}", s.index),
        "os-extended-volumes:volumes_attached": attached, "security_groups": [{"name": "default"}],
    });
    if mv >= Microversion(2, 9) {
        v["locked"] = json!(false);
    }
    if mv >= Microversion(2, 16) {
        v["host_status"] = json!("UP");
    }
    if mv >= Microversion(2, 19) {
        v["description"] = json!(s.description);
    }
    if mv >= Microversion(2, 26) {
        v["tags"] = json!(s.tags);
    }
    if mv >= Microversion(2, 3) {
        v["OS-EXT-SRV-ATTR:hostname"] = json!(s.hostname());
        v["OS-EXT-SRV-ATTR:reservation_id"] = json!(format!("r-{:08x}", s.index));
        v["OS-EXT-SRV-ATTR:launch_index"] = json!(0);
        v["OS-EXT-SRV-ATTR:kernel_id"] = json!("");
        v["OS-EXT-SRV-ATTR:ramdisk_id"] = json!("");
        v["OS-EXT-SRV-ATTR:root_device_name"] = json!("/dev/vda");
        v["OS-EXT-SRV-ATTR:user_data"] = json!(null);
    }
    v
}

/// A stable, non-cryptographic hash (for `hostId`).
fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(crate) fn router(cloud: Arc<Cloud>) -> Router<Arc<Cloud>> {
    let v = "/compute/v2.1";
    let protected = Router::new()
        .route(
            &format!("{v}/servers"),
            get(list_servers).post(create_server),
        )
        .route(&format!("{v}/servers/detail"), get(list_servers_detail))
        .route(
            &format!("{v}/servers/{{id}}"),
            get(get_server).put(update_server).delete(delete_server),
        )
        .route(
            &format!("{v}/servers/{{id}}/action"),
            axum::routing::post(server_action),
        )
        .route(&format!("{v}/servers/{{id}}/ips"), get(server_ips))
        .route(
            &format!("{v}/servers/{{id}}/ips/{{network}}"),
            get(server_ips_on),
        )
        .route(
            &format!("{v}/servers/{{id}}/os-interface"),
            get(list_interfaces),
        )
        .route(
            &format!("{v}/servers/{{id}}/os-interface/{{port}}"),
            get(get_interface),
        )
        .route(
            &format!("{v}/servers/{{id}}/os-volume_attachments"),
            get(list_attachments).post(attach_volume),
        )
        .route(
            &format!("{v}/servers/{{id}}/os-volume_attachments/{{volume}}"),
            get(get_attachment).delete(detach_volume),
        )
        .route(&format!("{v}/flavors"), get(list_flavors))
        .route(&format!("{v}/flavors/detail"), get(list_flavors_detail))
        .route(&format!("{v}/flavors/{{id}}"), get(get_flavor))
        .route(&format!("{v}/os-availability-zone"), get(list_zones))
        .route(&format!("{v}/os-availability-zone/detail"), get(list_zones))
        .route(
            &format!("{v}/os-keypairs"),
            get(|| async { reply(StatusCode::OK, json!({"keypairs": []})) }),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            cloud.clone(),
            require_scoped_token,
        ));
    let public = Router::new()
        .route("/compute", get(versions))
        .route("/compute/", get(versions))
        .route(v, get(version))
        .route(&format!("{v}/"), get(version));
    let router = public
        .merge(protected)
        .layer(axum::middleware::from_fn(|req, next| {
            super::negotiate_microversion(MICROVERSIONS, req, next)
        }));
    service_layers(router, &cloud, Service::Compute)
}

fn version_doc(cloud: &Cloud) -> Value {
    json!({
        "id": "v2.1", "status": "CURRENT", "version": MICROVERSIONS.max.to_string(),
        "min_version": MICROVERSIONS.min.to_string(), "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{}/compute/v2.1/", cloud.base_url)}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}],
    })
}

async fn versions(State(cloud): Ctx) -> Response {
    reply(StatusCode::OK, json!({"versions": [version_doc(&cloud)]}))
}

async fn version(State(cloud): Ctx) -> Response {
    reply(StatusCode::OK, json!({"version": version_doc(&cloud)}))
}

/// Servers matching Nova's filters, newest first.
fn filtered_servers(r: &impl Read, params: &Params) -> Result<Vec<Server>, ApiError> {
    let name = params.get("name").map(regex_or_literal).transpose()?;
    let ip = params.get("ip").map(regex_or_literal).transpose()?;
    let status = params.get("status").map(str::to_ascii_uppercase);
    let zone = params.get("availability_zone");
    let flavor = params.get("flavor");
    let rel = ip.as_ref().map(|_| Related::load(r));
    let mut servers: Vec<Server> = r
        .list::<Server>(SERVERS)
        .into_iter()
        .filter(|s| name.as_ref().is_none_or(|re| re.is_match(&s.name)))
        .filter(|s| status.as_ref().is_none_or(|st| &s.status == st))
        .filter(|s| zone.is_none_or(|z| s.availability_zone == z))
        .filter(|s| flavor.is_none_or(|f| s.flavor_id == f))
        .filter(|s| {
            ip.as_ref().zip(rel.as_ref()).is_none_or(|(re, rel)| {
                rel.ports(&s.meta.id)
                    .iter()
                    .flat_map(|p| &p.fixed_ips)
                    .any(|f| re.is_match(&f.ip_address))
            })
        })
        .collect();
    servers.sort_by_key(|s| std::cmp::Reverse(s.index));
    Ok(servers)
}

/// Nova matches `name` and `ip` as regular expressions (`re.search`).
fn regex_or_literal(s: &str) -> Result<regex::Regex, ApiError> {
    regex::Regex::new(s)
        .or_else(|_| regex::Regex::new(&regex::escape(s)))
        .map_err(|e| ApiError::bad_request(format!("Invalid filter {s:?}: {e}")))
}

async fn list_servers(
    State(cloud): Ctx,
    Query(params): Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let views: Vec<Value> = cloud.store.read(|r| {
        filtered_servers(r, &params).map(|ss| {
            ss.iter().map(|s| json!({"id": s.meta.id, "name": s.name, "links": links(&cloud, "servers", &s.meta.id)})).collect()
        })
    })?;
    let (page, next) = paginate(views, &params, &cloud.base_url, &uri, 1000)?;
    Ok(reply(
        StatusCode::OK,
        super::list_body("servers", page, next),
    ))
}

async fn list_servers_detail(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Query(params): Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let views: Vec<Value> = cloud.store.read(|r| {
        filtered_servers(r, &params).map(|ss| {
            let rel = Related::load(r);
            ss.iter()
                .map(|s| server_view(&cloud, &rel, s, mv))
                .collect()
        })
    })?;
    let (page, next) = paginate(views, &params, &cloud.base_url, &uri, 1000)?;
    Ok(reply(
        StatusCode::OK,
        super::list_body("servers", page, next),
    ))
}

async fn get_server(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = cloud
        .store
        .read(|r| find_server(r, &id).map(|s| server_view(&cloud, &Related::load(r), &s, mv)))?;
    Ok(reply(StatusCode::OK, json!({"server": view})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateServerBody {
    server: CreateServer,
    #[serde(rename = "os:scheduler_hints", default)]
    _hints: Option<Value>,
    #[serde(rename = "OS-SCH-HNT:scheduler_hints", default)]
    _hints_old: Option<Value>,
}

/// Nova's server-create schema (additional properties are rejected).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct CreateServer {
    name: Option<String>,
    #[serde(rename = "flavorRef")]
    flavor_ref: Option<Value>,
    #[serde(rename = "imageRef")]
    image_ref: Option<String>,
    networks: Option<Value>,
    availability_zone: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    key_name: Option<String>,
    description: Option<String>,
    #[serde(rename = "adminPass")]
    admin_pass: Option<String>,
    #[serde(rename = "OS-DCF:diskConfig")]
    _disk_config: Option<Value>,
    #[serde(rename = "accessIPv4")]
    _access_ipv4: Option<Value>,
    #[serde(rename = "accessIPv6")]
    _access_ipv6: Option<Value>,
    personality: Option<Value>,
    block_device_mapping: Option<Value>,
    block_device_mapping_v2: Option<Value>,
    config_drive: Option<Value>,
    min_count: Option<Value>,
    max_count: Option<Value>,
    return_reservation_id: Option<Value>,
    security_groups: Option<Value>,
    user_data: Option<String>,
    tags: Option<Value>,
    trusted_image_certificates: Option<Value>,
    host: Option<Value>,
    hypervisor_hostname: Option<Value>,
    hostname: Option<Value>,
}

/// A requested NIC: (network ID, port ID, fixed IP).
pub(crate) type Nic = (Option<String>, Option<String>, Option<String>);

/// Which networks a new server joins.
fn requested_networks(
    r: &impl Read,
    networks: Option<&Value>,
    mv: Microversion,
) -> Result<Vec<Nic>, ApiError> {
    let default_net = || -> Result<String, ApiError> {
        r.list::<Network>(NETWORKS)
            .into_iter()
            .find(|n| n.name == defaults::NETWORK)
            .or_else(|| {
                r.list::<Network>(NETWORKS)
                    .into_iter()
                    .find(|n| !n.external)
            })
            .map(|n| n.meta.id)
            .ok_or_else(|| {
                ApiError::conflict(
                    "conflictingRequest",
                    "No network is available for the server; create one or pass networks",
                )
            })
    };
    match networks {
        None if mv >= Microversion(2, 37) => Err(ApiError::bad_request("Invalid input for field/attribute server. Value: 'networks' is a required property")),
        None => Ok(vec![(Some(default_net()?), None, None)]),
        Some(Value::String(s)) if s == "auto" => Ok(vec![(Some(default_net()?), None, None)]),
        Some(Value::String(s)) if s == "none" => Ok(vec![]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                let obj = item.as_object().ok_or_else(|| ApiError::bad_request("Invalid input for field/attribute networks: each item must be an object"))?;
                for key in obj.keys() {
                    if !["uuid", "port", "fixed_ip", "tag"].contains(&key.as_str()) {
                        return Err(ApiError::bad_request(format!("Invalid input for field/attribute networks. Additional properties are not allowed ('{key}' was unexpected)")));
                    }
                }
                let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_owned);
                let (uuid, port, fixed_ip) = (s("uuid"), s("port"), s("fixed_ip"));
                if uuid.is_none() && port.is_none() {
                    return Err(ApiError::bad_request("Invalid input for field/attribute networks: uuid or port is required"));
                }
                if let Some(net) = &uuid {
                    if r.get::<Network>(NETWORKS, net).is_none() {
                        return Err(ApiError::bad_request(format!("Invalid input for field/attribute networks: Network {net} could not be found.")));
                    }
                }
                Ok((uuid, port, fixed_ip))
            })
            .collect(),
        Some(other) => Err(ApiError::bad_request(format!("Invalid input for field/attribute networks. Value: {other}"))),
    }
}

fn known_zones(r: &impl Read) -> Vec<String> {
    let mut zones: Vec<String> = r
        .list::<Value>(ZONES)
        .into_iter()
        .filter_map(|z| z["name"].as_str().map(str::to_owned))
        .collect();
    if zones.is_empty() {
        zones.push(defaults::AVAILABILITY_ZONE.into());
    }
    zones.sort();
    zones
}

/// Checks a zone name against the configured zones.
pub(crate) fn check_zone(r: &impl Read, zone: Option<String>) -> Result<String, ApiError> {
    let zones = known_zones(r);
    match zone {
        None => Ok(zones
            .iter()
            .find(|z| *z == defaults::AVAILABILITY_ZONE)
            .unwrap_or(&zones[0])
            .clone()),
        Some(z) if zones.contains(&z) => Ok(z),
        Some(z) => Err(ApiError::bad_request(format!(
            "The requested availability zone is not available: {z} (known: {})",
            zones.join(", ")
        ))),
    }
}

async fn create_server(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Extension(mv): Extension<Microversion>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: CreateServerBody = parse_body(&body)?;
    let b = b.server;
    let name = b.name.clone().unwrap_or_default();
    if name.trim().is_empty() || name.len() > 255 {
        return Err(ApiError::bad_request("Invalid input for field/attribute name. Value: must be a non-empty string of at most 255 characters"));
    }
    let flavor_ref = match &b.flavor_ref {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err(ApiError::bad_request(
            "Invalid input for field/attribute server. Value: 'flavorRef' is a required property",
        )),
    };
    if let Some(image) = b.image_ref.as_deref().filter(|i| !i.is_empty()) {
        let id = image.rsplit('/').next().unwrap_or(image);
        if super::image::find_image(id).is_none() {
            return Err(ApiError::bad_request(format!(
                "Can not find requested image: {image}"
            )));
        }
    }
    let flavor = find_flavor(&flavor_ref).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Invalid flavorRef provided: Flavor {flavor_ref} could not be found."
        ))
    })?;
    let config_drive_dir = cloud.config.config_drive_dir();
    let admin_pass = b
        .admin_pass
        .clone()
        .unwrap_or_else(|| super::new_hex_id()[..12].to_owned());
    let server = cloud
        .write(move |tx| {
            let zone = check_zone(tx, b.availability_zone.clone())?;
            let networks = requested_networks(tx, b.networks.as_ref(), mv)?;
            let index = next_index(tx)?;
            let server = Server {
                meta: Meta::new(caller.project_id.clone()),
                name,
                status: ACTIVE.into(),
                flavor_id: flavor.id.into(),
                image_id: b
                    .image_ref
                    .as_deref()
                    .map(|i| i.rsplit('/').next().unwrap_or(i).to_owned())
                    .unwrap_or_default(),
                availability_zone: zone,
                user_id: caller.user_id.clone(),
                metadata: b.metadata.clone().unwrap_or_default(),
                key_name: b.key_name.clone(),
                description: b.description.clone(),
                index,
                tags: Vec::new(),
            };
            add_server(tx, &server, networks, &config_drive_dir)?;
            Ok(server)
        })
        .await?;
    tracing::info!(server = %server.name, id = %server.meta.id, "created server");
    let mut response = reply(
        StatusCode::ACCEPTED,
        json!({"server": {"id": server.meta.id, "links": links(&cloud, "servers", &server.meta.id), "OS-DCF:diskConfig": "MANUAL", "security_groups": [{"name": "default"}], "adminPass": admin_pass}}),
    );
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{}/compute/v2.1/servers/{}",
        cloud.base_url, server.meta.id
    )) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
}

/// Stores a new server with its NICs (new ports on networks, or existing free ports) and writes
/// its config drive; shared by Nova's create and the GCE dialect's instance insert.
pub(crate) fn add_server(
    tx: &mut Tx<'_>,
    server: &Server,
    networks: Vec<Nic>,
    config_drive_dir: &std::path::Path,
) -> Result<(), ApiError> {
    for (net, port, fixed_ip) in networks {
        if let Some(port_id) = port {
            let mut p = network::find::<Port>(tx, &port_id)?;
            if !p.device_id.is_empty() {
                return Err(ApiError::conflict(
                    "conflictingRequest",
                    format!("Port {port_id} is still in use."),
                ));
            }
            p.device_id = server.meta.id.clone();
            p.device_owner = format!("compute:{}", server.availability_zone);
            tx.put(PORTS, &port_id, &p)?;
        } else if let Some(net) = net {
            network::create_port(
                tx,
                PortSpec {
                    network_id: net,
                    name: String::new(),
                    fixed_ips: fixed_ip
                        .map(|ip| vec![(None, Some(ip))])
                        .unwrap_or_default(),
                    device_id: server.meta.id.clone(),
                    device_owner: format!("compute:{}", server.availability_zone),
                    project_id: server.meta.project_id.clone(),
                },
            )
            .map_err(|e| {
                if e.status == StatusCode::NOT_FOUND {
                    ApiError::bad_request(e.message)
                } else {
                    e
                }
            })?;
        }
    }
    tx.put(SERVERS, &server.meta.id, server)?;
    crate::metadata::write_config_drive(config_drive_dir, tx, server)?;
    Ok(())
}

/// Deletes a server, its ports (releasing floating IPs) and attachments, and its config drive;
/// shared by Nova's delete and the GCE dialect's.
pub(crate) fn remove_server(
    tx: &mut Tx<'_>,
    id: &str,
    config_drive_dir: &std::path::Path,
) -> Result<(), ApiError> {
    find_server(tx, id)?;
    for port in server_ports(tx, id) {
        network::delete_port_cascade(tx, &port.meta.id)?;
    }
    for v in volume::attached_to(tx, id) {
        volume::detach(tx, &v.meta.id, id)?;
        // Nova 2.79: a volume attached with delete_on_termination goes with its server (when
        // no other server still has it).
        let delete = v
            .attachments
            .iter()
            .any(|a| a.server_id == id && a.delete_on_termination);
        if delete && v.attachments.len() == 1 {
            tx.delete(VOLUMES, &v.meta.id);
        }
    }
    tx.delete(SERVERS, id);
    crate::metadata::remove_config_drive(config_drive_dir, id)
}

pub(crate) fn next_index(tx: &mut Tx<'_>) -> Result<u64, ApiError> {
    let next = tx
        .get::<Value>(COUNTERS, SERVERS)
        .and_then(|v| v["next"].as_u64())
        .unwrap_or(1);
    tx.put(COUNTERS, SERVERS, &json!({"next": next + 1}))?;
    Ok(next)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateServerBody {
    server: UpdateServer,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
struct UpdateServer {
    name: Option<String>,
    #[serde(default, deserialize_with = "super::nullable")]
    description: Option<Option<String>>,
    #[serde(rename = "accessIPv4")]
    _access_ipv4: Option<Value>,
    #[serde(rename = "accessIPv6")]
    _access_ipv6: Option<Value>,
    #[serde(rename = "OS-DCF:diskConfig")]
    _disk_config: Option<Value>,
    hostname: Option<Value>,
}

async fn update_server(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: UpdateServerBody = parse_body(&body)?;
    let id2 = id.clone();
    cloud
        .write(move |tx| {
            let mut s = find_server(tx, &id2)?;
            if let Some(name) = b.server.name {
                if name.trim().is_empty() || name.len() > 255 {
                    return Err(ApiError::bad_request(
                        "Invalid input for field/attribute name.",
                    ));
                }
                s.name = name;
            }
            if let Some(d) = b.server.description {
                s.description = d;
            }
            s.meta.touch();
            tx.put(SERVERS, &id2, &s)?;
            Ok(())
        })
        .await?;
    get_server(State(cloud), Extension(mv), Path(id)).await
}

async fn delete_server(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let dir = cloud.config.config_drive_dir();
    cloud.write(move |tx| remove_server(tx, &id, &dir)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn server_action(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: serde_json::Map<String, Value> = parse_body(&body)?;
    let Some((action, arg)) = b.into_iter().next() else {
        return Err(ApiError::bad_request(
            "Malformed request body: no action given",
        ));
    };
    cloud
        .write(move |tx| {
            let mut s = find_server(tx, &id)?;
            let conflict = |verb: &str, s: &Server| {
                let state = if s.status == SHUTOFF {
                    "stopped"
                } else {
                    "active"
                };
                ApiError::conflict(
                    "conflictingRequest",
                    format!(
                        "Cannot '{verb}' instance {} while it is in vm_state {state}",
                        s.meta.id
                    ),
                )
            };
            match action.as_str() {
                "os-stop" if s.status == ACTIVE => s.status = SHUTOFF.into(),
                "os-stop" => return Err(conflict("stop", &s)),
                "os-start" if s.status == SHUTOFF => s.status = ACTIVE.into(),
                "os-start" => return Err(conflict("start", &s)),
                "reboot" => {
                    let kind = arg["type"]
                        .as_str()
                        .unwrap_or_default()
                        .to_ascii_uppercase();
                    if kind != "SOFT" && kind != "HARD" {
                        return Err(ApiError::bad_request(
                            "Invalid input for field/attribute reboot: type must be SOFT or HARD",
                        ));
                    }
                    if kind == "SOFT" && s.status == SHUTOFF {
                        return Err(conflict("reboot", &s));
                    }
                    s.status = ACTIVE.into();
                }
                other => {
                    return Err(ApiError::bad_request(format!(
                        "There is no such action: {other}"
                    )))
                }
            }
            s.meta.touch();
            tx.put(SERVERS, &id, &s)?;
            Ok(())
        })
        .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn server_ips(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let addrs = cloud
        .store
        .read(|r| find_server(r, &id).map(|_| Related::load(r).addresses(&id)))?;
    Ok(reply(StatusCode::OK, json!({"addresses": addrs})))
}

async fn server_ips_on(
    State(cloud): Ctx,
    Path((id, net)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let addrs = cloud
        .store
        .read(|r| find_server(r, &id).map(|_| Related::load(r).addresses(&id)))?;
    let list = addrs.get(&net).cloned().ok_or_else(|| {
        ApiError::not_found(
            "itemNotFound",
            "Instance is not a member of specified network",
        )
    })?;
    Ok(reply(StatusCode::OK, json!({ net: list })))
}

fn interface_view(p: &Port) -> Value {
    json!({
        "port_state": "ACTIVE", "port_id": p.meta.id, "net_id": p.network_id, "mac_addr": p.mac_address,
        "fixed_ips": p.fixed_ips.iter().map(|f| json!({"subnet_id": f.subnet_id, "ip_address": f.ip_address})).collect::<Vec<_>>(),
    })
}

async fn list_interfaces(State(cloud): Ctx, Path(id): Path<String>) -> Result<Response, ApiError> {
    let views: Vec<Value> = cloud.store.read(|r| {
        find_server(r, &id).map(|_| server_ports(r, &id).iter().map(interface_view).collect())
    })?;
    Ok(reply(
        StatusCode::OK,
        json!({"interfaceAttachments": views}),
    ))
}

async fn get_interface(
    State(cloud): Ctx,
    Path((id, port)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let view = cloud.store.read(|r| {
        find_server(r, &id)?;
        server_ports(r, &id)
            .iter()
            .find(|p| p.meta.id == port)
            .map(interface_view)
            .ok_or_else(|| {
                ApiError::not_found("itemNotFound", format!("Port {port} is not attached"))
            })
    })?;
    Ok(reply(StatusCode::OK, json!({"interfaceAttachment": view})))
}

fn attachment_view(server_id: &str, v: &Volume, mv: Microversion) -> Value {
    let a = v.attachments.iter().find(|a| a.server_id == server_id);
    let mut view = json!({"id": v.meta.id, "serverId": server_id, "volumeId": v.meta.id, "device": a.map(|a| a.device.clone())});
    if mv >= Microversion(2, 70) {
        view["tag"] = json!(a.and_then(|a| a.tag.clone()));
    }
    if mv >= Microversion(2, 79) {
        view["delete_on_termination"] = json!(a.is_some_and(|a| a.delete_on_termination));
    }
    view
}

async fn list_attachments(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let views: Vec<Value> = cloud.store.read(|r| {
        find_server(r, &id).map(|_| {
            volume::attached_to(r, &id)
                .iter()
                .map(|v| attachment_view(&id, v, mv))
                .collect()
        })
    })?;
    Ok(reply(StatusCode::OK, json!({"volumeAttachments": views})))
}

async fn get_attachment(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path((id, vol)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let view = cloud.store.read(|r| {
        find_server(r, &id)?;
        volume::attached_to(r, &id)
            .iter()
            .find(|v| v.meta.id == vol)
            .map(|v| attachment_view(&id, v, mv))
            .ok_or_else(|| {
                ApiError::not_found(
                    "itemNotFound",
                    format!("Volume {vol} is not attached to {id}"),
                )
            })
    })?;
    Ok(reply(StatusCode::OK, json!({"volumeAttachment": view})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttachBody {
    #[serde(rename = "volumeAttachment")]
    attachment: Attach,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Attach {
    #[serde(rename = "volumeId")]
    volume_id: String,
    #[serde(default, deserialize_with = "super::nullable")]
    device: Option<Option<String>>,
    tag: Option<String>,
    delete_on_termination: Option<bool>,
}

/// A body field Nova's schema for this microversion does not have.
fn unexpected(field: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid input for field/attribute volumeAttachment. Value: {field}. Additional properties are not allowed ('{field}' was unexpected)"
    ))
}

/// Nova's attach: the volume is reserved (`attaching`, device chosen) and then attached
/// (`in-use`), both durable, before the answer; the server's config drive shows the new
/// disk. Refusals are Nova's (see [`volume::attach`]).
async fn attach_volume(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: AttachBody = parse_body(&body)?;
    let b = b.attachment;
    if b.tag.is_some() && mv < Microversion(2, 49) {
        return Err(unexpected("tag"));
    }
    if b.delete_on_termination.is_some() && mv < Microversion(2, 79) {
        return Err(unexpected("delete_on_termination"));
    }
    let vol = b.volume_id.clone();
    let server = id.clone();
    cloud
        .write(move |tx| {
            find_server(tx, &server)?;
            if tx.get::<Volume>(VOLUMES, &b.volume_id).is_none() {
                return Err(ApiError::not_found(
                    "itemNotFound",
                    format!("Volume {} could not be found.", b.volume_id),
                ));
            }
            volume::attach(
                tx,
                &b.volume_id,
                &server,
                volume::AttachOptions {
                    device: b.device.flatten(),
                    tag: b.tag,
                    delete_on_termination: b.delete_on_termination.unwrap_or(false),
                },
            )
        })
        .await?;
    let view = complete_transition(&cloud, id.clone(), vol.clone())
        .await?
        .map(|v| attachment_view(&id, &v, mv))
        .unwrap_or(Value::Null);
    tracing::info!(server = %id, volume = %vol, device = %view["device"], "attached volume");
    Ok(reply(StatusCode::OK, json!({"volumeAttachment": view})))
}

/// The second write of an attach or detach: ends the volume's transition and rewrites the
/// server's config drive (whose `devices` list the attached disks). Returns the volume.
async fn complete_transition(
    cloud: &Arc<Cloud>,
    server_id: String,
    volume_id: String,
) -> Result<Option<Volume>, ApiError> {
    let dir = cloud.config.config_drive_dir();
    cloud
        .write(move |tx| {
            volume::finish(tx, &volume_id)?;
            if let Some(s) = tx.get::<Server>(SERVERS, &server_id) {
                crate::metadata::write_config_drive(&dir, tx, &s)?;
            }
            Ok(tx.get::<Volume>(VOLUMES, &volume_id))
        })
        .await
}

async fn detach_volume(
    State(cloud): Ctx,
    Path((id, vol)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (server, volume_id) = (id.clone(), vol.clone());
    cloud
        .write(move |tx| {
            find_server(tx, &server)?;
            if !volume::attached_to(tx, &server)
                .iter()
                .any(|v| v.meta.id == volume_id)
            {
                return Err(ApiError::not_found(
                    "itemNotFound",
                    format!("Volume {volume_id} is not attached to {server}"),
                ));
            }
            volume::begin_detach(tx, &volume_id, &server)
        })
        .await?;
    complete_transition(&cloud, id.clone(), vol.clone()).await?;
    tracing::info!(server = %id, volume = %vol, "detached volume");
    Ok(StatusCode::ACCEPTED.into_response())
}

fn flavor_view(cloud: &Cloud, f: &Flavor, detail: bool, mv: Microversion) -> Value {
    let mut v = json!({"id": f.id, "name": f.name, "links": links(cloud, "flavors", f.id)});
    if detail {
        v["ram"] = json!(f.ram_mb);
        v["vcpus"] = json!(f.vcpus);
        v["disk"] = json!(f.disk_gb);
        v["swap"] = if mv >= Microversion(2, 75) {
            json!(0)
        } else {
            json!("")
        };
        v["OS-FLV-EXT-DATA:ephemeral"] = json!(0);
        v["OS-FLV-DISABLED:disabled"] = json!(false);
        v["os-flavor-access:is_public"] = json!(true);
        v["rxtx_factor"] = json!(1.0);
        if mv >= Microversion(2, 61) {
            v["extra_specs"] = json!({});
        }
    }
    if mv >= Microversion(2, 55) {
        v["description"] = json!(null);
    }
    v
}

async fn list_flavors(
    state: Ctx,
    mv: Extension<Microversion>,
    q: Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    flavors(state, mv, q, uri, false).await
}

async fn list_flavors_detail(
    state: Ctx,
    mv: Extension<Microversion>,
    q: Query<Params>,
    uri: Uri,
) -> Result<Response, ApiError> {
    flavors(state, mv, q, uri, true).await
}

async fn flavors(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Query(params): Query<Params>,
    uri: Uri,
    detail: bool,
) -> Result<Response, ApiError> {
    let views: Vec<Value> = FLAVORS
        .iter()
        .map(|f| flavor_view(&cloud, f, detail, mv))
        .collect();
    let (page, next) = paginate(views, &params, &cloud.base_url, &uri, 1000)?;
    Ok(reply(
        StatusCode::OK,
        super::list_body("flavors", page, next),
    ))
}

async fn get_flavor(
    State(cloud): Ctx,
    Extension(mv): Extension<Microversion>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let f = FLAVORS.iter().find(|f| f.id == id).ok_or_else(|| {
        ApiError::not_found("itemNotFound", format!("Flavor {id} could not be found."))
    })?;
    Ok(reply(
        StatusCode::OK,
        json!({"flavor": flavor_view(&cloud, f, true, mv)}),
    ))
}

/// `{"availabilityZoneInfo": [{"zoneName": "nova", "zoneState": {"available": true}, "hosts": null}]}`
pub(crate) fn zones_body(r: &impl Read) -> Value {
    let zones: Vec<Value> = known_zones(r)
        .into_iter()
        .map(|z| json!({"zoneName": z, "zoneState": {"available": true}, "hosts": null}))
        .collect();
    json!({"availabilityZoneInfo": zones})
}

async fn list_zones(State(cloud): Ctx) -> Response {
    reply(StatusCode::OK, cloud.store.read(|r| zones_body(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_records_of_earlier_versions_still_read() {
        let s: Server = serde_json::from_value(json!({"id": "i",
            "name": "n", "status": "ACTIVE", "flavor_id": "1", "image_id": "", "availability_zone": "nova",
            "project_id": "p", "user_id": "u", "metadata": {}, "key_name": null, "description": null,
            "created": "2026-01-01T00:00:00Z", "updated": "2026-01-02T00:00:00Z", "index": 3}))
        .expect("decode");
        assert_eq!(s.meta.created_at, "2026-01-01T00:00:00Z");
        assert_eq!(s.meta.updated_at, "2026-01-02T00:00:00Z");
        assert_eq!((s.meta.id.as_str(), s.meta.project_id.as_str()), ("i", "p"));
    }
}
