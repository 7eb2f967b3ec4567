//! Compute v2.1 (Nova): servers (create, list with `name`/`status`/`ip` filters, detail, get,
//! update, delete, `os-stop`/`os-start`/`reboot` so `SHUTOFF` exists), addresses per network,
//! `os-interface`, volume attachments, flavors and availability zones, with microversions up to
//! 2.79. Servers are records, not VMs: they get ports on the simulated networks and a config
//! drive directory, and they are `ACTIVE` as soon as they are created.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::network::{self, Network, Port, PortSpec, NETWORKS, PORTS};
use super::volume::{self, Volume, VOLUMES};
use super::{
    paginate, parse_body, reply, service_layers, ApiError, Caller, Cloud, Ctx, Microversion,
    Microversions, Params, Routes, Service,
};
use crate::defaults::{self, Flavor, FLAVORS};
use crate::model::Meta;
use crate::store::{Read, Tx};

mod actions;
mod attachments;
mod flavors;

use actions::*;
use attachments::*;
use flavors::*;

pub(crate) use super::zones::{check_zone, zones_body, ZONES};
const COUNTERS: &str = "counters";

pub(crate) const MICROVERSIONS: Microversions = Microversions {
    service: "compute",
    min: Microversion(2, 1),
    max: Microversion(2, 79),
    legacy_header: Some("x-openstack-nova-api-version"),
};

pub(crate) use crate::model::compute::{
    find_flavor, server_ports, Related, Server, ACTIVE, SERVERS, SHUTOFF,
};

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("itemNotFound", format!("Instance {id} could not be found."))
}

pub(crate) fn find_server(r: &impl Read, id: &str) -> Result<Server, ApiError> {
    r.get::<Server>(SERVERS, id).ok_or_else(|| not_found(id))
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
        .scoped(&cloud);
    let public = Router::new()
        .get_with_slash("/compute", versions)
        .get_with_slash(v, version);
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
    crate::model::config_drive::write(config_drive_dir, tx, server)?;
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
    crate::model::config_drive::remove(config_drive_dir, id)?;
    Ok(())
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
