//! GCE instances: the Nova servers of the project, seen through Compute Engine's shapes.
//! `networkInterfaces[i]` is the server's i-th port (`networkIP` its fixed IP, `accessConfigs`
//! the floating IPs on it), `metadata` the server metadata, `tags` the server tags,
//! `machineType` the flavor, `status` `RUNNING` for `ACTIVE` and `TERMINATED` for `SHUTOFF`.
//! So an instance made here is a server to Nova and the operator CLI, and the other way round.

use super::body::{
    check_fingerprint, check_name, json_kind, known_fields, object, opt_list, opt_str,
    parse_metadata, resource_name,
};
use super::list::page;
use super::networks::find_network;
use super::operations::change_zonal;
use super::*;
use crate::api::compute::{self, add_server, find_flavor, remove_server, Related, Server, SERVERS};
use crate::api::network::{
    self, FloatingIpSpec, Network, Port, PortSpec, Subnet, NETWORKS, SUBNETS,
};
use crate::model::gce::gce_status;

pub(crate) use super::find_instance;

/// The description that marks a floating IP as an instance's ephemeral external IP, released
/// with the instance (a reserved address outlives it).
pub(crate) const EPHEMERAL_NAT: &str = "GCE ephemeral external IP";

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    let i = format!("{p}/zones/{{zone}}/instances");
    Router::new()
        .route(&i, get(list).post(insert))
        .route(&format!("{i}/{{name}}"), get(get_one).delete(delete))
        .route(&format!("{i}/{{name}}/{{action}}"), post(action))
        .route(&format!("{p}/aggregated/instances"), get(aggregated_list))
}

pub(crate) fn instance_view(s: &Scope<'_>, r: &impl Read, rel: &Related, server: &Server) -> Value {
    let zone = &server.availability_zone;
    let subnets: BTreeMap<String, Subnet> = r
        .list::<Subnet>(SUBNETS)
        .into_iter()
        .map(|x| (x.meta.id.clone(), x))
        .collect();
    let nics: Vec<Value> = rel
        .ports(&server.meta.id)
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let access: Vec<Value> = rel
                .floating(&port.meta.id)
                .iter()
                .map(|f| json!({"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": "External NAT", "natIP": f.floating_ip_address, "networkTier": "PREMIUM"}))
                .collect();
            let fixed = port.fixed_ips.first();
            let mut nic = json!({
                "kind": "compute#networkInterface", "name": format!("nic{i}"),
                "network": s.link(&format!("global/networks/{}", rel.network_name(&port.network_id))),
                "networkIP": fixed.map(|f| f.ip_address.clone()).unwrap_or_default(),
                "fingerprint": m::fingerprint(&json!(port.meta.id)), "stackType": "IPV4_ONLY",
            });
            if let Some(subnet) = fixed.and_then(|f| subnets.get(&f.subnet_id)) {
                nic["subnetwork"] = json!(s.link(&format!("regions/{}/subnetworks/{}", s.region(), subnet.name)));
            }
            if !access.is_empty() {
                nic["accessConfigs"] = Value::Array(access);
            }
            nic
        })
        .collect();
    let machine_type = server
        .flavor()
        .map_or(server.flavor_id.as_str(), |f| f.name);
    let mut tags = json!({"fingerprint": m::fingerprint(&json!(server.tags))});
    if !server.tags.is_empty() {
        tags["items"] = json!(server.tags);
    }
    let status = gce_status(&server.status);
    let mut v = json!({
        "kind": "compute#instance", "id": m::numeric_id(&server.meta.id).to_string(),
        "creationTimestamp": m::timestamp(&server.meta.created_at), "name": server.name,
        "description": server.description.clone().unwrap_or_default(), "tags": tags,
        "machineType": s.link(&format!("zones/{zone}/machineTypes/{machine_type}")),
        "status": status, "zone": s.link(&format!("zones/{zone}")), "canIpForward": false,
        "networkInterfaces": nics, "disks": super::attached_disks::view(s, r, server),
        "metadata": m::metadata_view(&server.metadata),
        "selfLink": s.link(&format!("zones/{zone}/instances/{}", server.name)),
        "scheduling": {"onHostMaintenance": "MIGRATE", "automaticRestart": true, "preemptible": false, "provisioningModel": "STANDARD"},
        "cpuPlatform": "Intel Broadwell", "labelFingerprint": m::fingerprint(&json!({})),
        "startRestricted": false, "deletionProtection": false, "fingerprint": m::fingerprint(&json!(server.meta.updated_at)),
        "lastStartTimestamp": m::timestamp(&server.meta.created_at),
    });
    if status == "TERMINATED" {
        v["lastStopTimestamp"] = json!(m::timestamp(&server.meta.updated_at));
    }
    v
}

/// The project's instances (of one zone, or all), as views.
fn views(s: &Scope<'_>, r: &impl Read, zone: Option<&str>) -> Vec<Value> {
    let rel = Related::load(r);
    r.list::<Server>(SERVERS)
        .iter()
        .filter(|x| x.meta.project_id == s.project.id)
        .filter(|x| zone.is_none_or(|z| x.availability_zone == z))
        .map(|x| instance_view(s, r, &rel, x))
        .collect()
}

async fn list(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    let what = ("compute#instanceList", "instances");
    list_zonal(&cloud, &p, &q, what, |r, s, zone| views(s, r, Some(zone)))
}

async fn aggregated_list(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    read(&cloud, &p, |r, s| {
        let (page, next) = page(views(s, r, None), &q)?;
        let mut items = Map::new();
        for zone in zones(r) {
            let scope = format!("zones/{zone}");
            let zone_link = s.link(&scope);
            let here: Vec<&Value> = page
                .iter()
                .filter(|v| v["zone"] == zone_link.as_str())
                .collect();
            let entry = if here.is_empty() {
                json!({"warning": {"code": "NO_RESULTS_ON_PAGE", "message": format!("There are no results for scope '{scope}' on this page."), "data": [{"key": "scope", "value": scope}]}})
            } else {
                json!({"instances": here})
            };
            items.insert(scope, entry);
        }
        let mut body = json!({
            "kind": "compute#instanceAggregatedList", "id": s.project.path("aggregated/instances"),
            "items": items, "selfLink": s.link("aggregated/instances"),
        });
        if let Some(next) = next {
            body["nextPageToken"] = json!(next);
        }
        Ok(reply(StatusCode::OK, body))
    })
}

async fn get_one(State(cloud): Ctx, Path(p): Params_) -> Reply {
    read_zonal(&cloud, &p, |r, s, zone| {
        let server = find_instance(r, s.project, zone, param(&p, "name"))?;
        ok(instance_view(s, r, &Related::load(r), &server))
    })
}

/// Fields an instance insert takes. Those after `tags` are accepted (Google's clients send
/// them) but not modelled: no disk, service account or scheduling exists here.
const INSERT_FIELDS: &[&str] = &[
    "name",
    "machineType",
    "networkInterfaces",
    "metadata",
    "description",
    "tags",
    "kind",
    "disks",
    "serviceAccounts",
    "scheduling",
    "canIpForward",
    "deletionProtection",
    "labels",
];

/// One requested network interface: the port made for it and its access configs' wanted
/// addresses (`None`: any).
struct Nic {
    port: Port,
    nat: Vec<Option<String>>,
}

/// Checks the shape of an insert's `networkInterfaces` before anything is made: a list of
/// objects whose references and addresses are strings.
fn check_interfaces(b: &Map<String, Value>) -> Result<(), ApiError> {
    let list = opt_list(b, "networkInterfaces", "resource.networkInterfaces")?;
    for (i, nic) in list.iter().enumerate() {
        let at = format!("resource.networkInterfaces[{i}]");
        let o = object(nic, &at)?;
        for key in [
            "network",
            "subnetwork",
            "networkIP",
            "name",
            "kind",
            "stackType",
            "nicType",
        ] {
            opt_str(o, key, &format!("{at}.{key}"))?;
        }
        let configs = opt_list(o, "accessConfigs", &format!("{at}.accessConfigs"))?;
        for (j, c) in configs.iter().enumerate() {
            let at = format!("{at}.accessConfigs[{j}]");
            let c = object(c, &at)?;
            for key in ["natIP", "name", "type", "networkTier", "kind"] {
                opt_str(c, key, &format!("{at}.{key}"))?;
            }
        }
    }
    Ok(())
}

fn make_nics(tx: &mut Tx<'_>, project: &Project, interfaces: &Value) -> Result<Vec<Nic>, ApiError> {
    let list = match interfaces {
        Value::Null => vec![json!({})],
        Value::Array(a) if a.is_empty() => vec![json!({})],
        Value::Array(a) => a.clone(),
        _ => {
            return Err(invalid(
                "Invalid value for field 'resource.networkInterfaces': must be a list",
            ))
        }
    };
    let mut nics = Vec::new();
    for (i, nic) in list.iter().enumerate() {
        let reference = nic["network"]
            .as_str()
            .or_else(|| nic["subnetwork"].as_str())
            .unwrap_or("default");
        let net = if let Some(sub) = nic["subnetwork"]
            .as_str()
            .filter(|_| nic["network"].is_null())
        {
            let name = m::last_segment(sub);
            let subnet = tx
                .list::<Subnet>(SUBNETS)
                .into_iter()
                .find(|x| x.name == name)
                .ok_or_else(|| invalid(format!("Invalid value for field 'resource.networkInterfaces[{i}].subnetwork': '{sub}'. The referenced subnetwork resource cannot be found.")))?;
            network::find::<Network>(tx, &subnet.network_id)?
        } else {
            find_network(tx, reference).ok_or_else(|| {
                invalid(format!("Invalid value for field 'resource.networkInterfaces[{i}].network': '{reference}'. The referenced network resource cannot be found."))
            })?
        };
        let port = network::create_port(
            tx,
            PortSpec {
                network_id: net.meta.id.clone(),
                name: String::new(),
                fixed_ips: nic["networkIP"]
                    .as_str()
                    .map(|ip| vec![(None, Some(ip.to_owned()))])
                    .unwrap_or_default(),
                device_id: String::new(),
                device_owner: String::new(),
                project_id: project.id.clone(),
            },
        )
        .map_err(|e| ApiError::new(e.status, "invalid", e.message))?;
        let nat = match &nic["accessConfigs"] {
            Value::Null => Vec::new(),
            Value::Array(a) => a.iter().map(|c| c["natIP"].as_str().map(str::to_owned)).collect(),
            _ => return Err(invalid(format!("Invalid value for field 'resource.networkInterfaces[{i}].accessConfigs': must be a list"))),
        };
        nics.push(Nic { port, nat });
    }
    Ok(nics)
}

/// Gives a port an external IP (an instance's access config).
pub(crate) fn add_access_config(
    tx: &mut Tx<'_>,
    project: &Project,
    port_id: &str,
    wanted: Option<String>,
) -> Result<(), ApiError> {
    let external = tx
        .list::<Network>(NETWORKS)
        .into_iter()
        .find(|n| n.external)
        .ok_or_else(|| invalid("No external network exists to take an external IP from"))?;
    // A reserved address (an `addresses` resource) is taken as it is; else a new ephemeral one.
    network::new_floating_ip(
        tx,
        FloatingIpSpec {
            network_id: external.meta.id,
            subnet_id: None,
            address: wanted,
            project_id: project.id.clone(),
            port_id: Some(port_id.to_owned()),
            fixed_ip: None,
            description: EPHEMERAL_NAT.into(),
        },
    )
    .map_err(|e| ApiError::new(e.status, "invalid", e.message))?;
    Ok(())
}

async fn insert(State(cloud): Ctx, Path(p): Params_, body: Bytes) -> Reply {
    let b: Map<String, Value> = parse_body(&body)?;
    known_fields(&b, "instance_resource", INSERT_FIELDS)?;
    let name = resource_name(&b)?;
    let machine_type = opt_str(&b, "machineType", "resource.machineType")?
        .ok_or_else(|| required("resource.machineType"))?
        .to_owned();
    let metadata = match b.get("metadata") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(v) => parse_metadata(v, "resource.metadata")?.0,
    };
    let tags = match b.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => parse_tags(v, "resource.tags")?.0,
    };
    let description = opt_str(&b, "description", "resource.description")?.map(str::to_owned);
    check_interfaces(&b)?;
    let dir = cloud.config.config_drive_dir();
    change_zonal(&cloud, p, move |tx, s, at| {
        let (project, zone) = (s.project, at.zone);
        if find_instance(tx, project, zone, &name).is_ok() {
            return Err(already_exists(
                &project.path(&format!("zones/{zone}/instances/{name}")),
            ));
        }
        let flavor = find_flavor(m::last_segment(&machine_type)).ok_or_else(|| {
            invalid(format!("Invalid value for field 'resource.machineType': '{machine_type}'. Machine type with name '{}' does not exist in zone '{zone}'.", m::last_segment(&machine_type)))
        })?;
        let nics = make_nics(tx, project, b.get("networkInterfaces").unwrap_or(&Value::Null))?;
        let (user_id, _) = user_of(s.cloud, tx);
        let server = Server {
            meta: Meta::new(project.id.clone()),
            name,
            status: compute::ACTIVE.into(),
            flavor_id: flavor.id.into(),
            image_id: String::new(),
            availability_zone: zone.to_owned(),
            user_id,
            metadata,
            key_name: None,
            description,
            index: compute::next_index(tx)?,
            tags,
        };
        let requested = nics.iter().map(|n| (None, Some(n.port.meta.id.clone()), None)).collect();
        add_server(tx, &server, requested, &dir)?;
        for nic in nics {
            for wanted in nic.nat {
                add_access_config(tx, project, &nic.port.meta.id, wanted)?;
            }
        }
        tracing::info!(instance = %server.name, %zone, "created GCE instance");
        Ok(at.done("insert", "instances", &server.name, m::numeric_id(&server.meta.id)))
    })
    .await
}

async fn delete(State(cloud): Ctx, Path(p): Params_) -> Reply {
    let dir = cloud.config.config_drive_dir();
    change_zonal(&cloud, p, move |tx, s, at| {
        let server = find_instance(tx, s.project, at.zone, at.name)?;
        let ephemeral: Vec<String> = compute::server_ports(tx, &server.meta.id)
            .iter()
            .flat_map(|port| {
                tx.list::<network::FloatingIp>(network::FLOATING_IPS)
                    .into_iter()
                    .filter(|f| {
                        f.port_id.as_deref() == Some(port.meta.id.as_str())
                            && f.description == EPHEMERAL_NAT
                    })
                    .map(|f| f.meta.id)
                    .collect::<Vec<_>>()
            })
            .collect();
        remove_server(tx, &server.meta.id, &dir)?;
        for id in ephemeral {
            tx.delete(network::FLOATING_IPS, &id);
        }
        Ok(at.done(
            "delete",
            "instances",
            &server.name,
            m::numeric_id(&server.meta.id),
        ))
    })
    .await
}

/// Parses GCE's Tags (`{"items": [...], "fingerprint"}`) at `field` of a body.
fn parse_tags(v: &Value, field: &str) -> Result<(Vec<String>, Option<String>), ApiError> {
    let o = object(v, field)?;
    known_fields(o, field, &["items", "fingerprint"])?;
    let mut tags = Vec::new();
    for (i, t) in opt_list(o, "items", &format!("{field}.items"))?
        .iter()
        .enumerate()
    {
        let t = t.as_str().ok_or_else(|| {
            invalid(format!(
                "Invalid value for field '{field}.items[{i}]': {}. Must be a string.",
                json_kind(t)
            ))
        })?;
        check_name(t).map_err(|_| invalid(format!("Invalid value for field '{field}.items[{i}]': '{t}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?)'")))?;
        if !tags.iter().any(|x| x == t) {
            tags.push(t.to_owned());
        }
    }
    let fingerprint = opt_str(o, "fingerprint", &format!("{field}.fingerprint"))?;
    Ok((tags, fingerprint.map(str::to_owned)))
}

async fn action(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery, body: Bytes) -> Reply {
    let action = param(&p, "action").to_owned();
    match action.as_str() {
        "attachDisk" => return super::attached_disks::attach(cloud, p, body).await,
        "detachDisk" => return super::attached_disks::detach(cloud, p, q).await,
        _ => {}
    }
    let b: Value = if body.is_empty() {
        json!({})
    } else {
        parse_body(&body)?
    };
    change_zonal(&cloud, p, move |tx, s, at| {
        let (project, zone) = (s.project, at.zone);
        let mut server = find_instance(tx, project, zone, at.name)?;
        match action.as_str() {
            "stop" => server.status = compute::SHUTOFF.into(),
            "start" => server.status = compute::ACTIVE.into(),
            "reset" if server.status == compute::ACTIVE => {}
            "reset" => {
                return Err(ApiError::new(StatusCode::BAD_REQUEST, "resourceNotReady", format!("The resource 'projects/{}/zones/{zone}/instances/{}' is not ready", project.name, server.name)))
            }
            "setMetadata" => {
                let (items, fp) = parse_metadata(&b, "metadata")?;
                let current = m::fingerprint(&json!(server.metadata));
                check_fingerprint(fp.as_deref(), &current, "metadata")?;
                server.metadata = items;
            }
            "setTags" => {
                let (tags, fp) = parse_tags(&b, "tags")?;
                check_fingerprint(fp.as_deref(), &m::fingerprint(&json!(server.tags)), "tags")?;
                server.tags = tags;
            }
            other => {
                return Err(ApiError::new(StatusCode::NOT_FOUND, "notFound", format!("The instance method '{other}' does not exist here (local cloud: stop, start, reset, setMetadata, setTags, attachDisk, detachDisk)")))
            }
        }
        server.meta.touch();
        tx.put(SERVERS, &server.meta.id, &server)?;
        Ok(at.done(action, "instances", &server.name, m::numeric_id(&server.meta.id)))
    })
    .await
}
