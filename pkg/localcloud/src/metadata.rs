//! Instance metadata, as Nova serves it: the metadata service (`/openstack/latest/meta_data.json`,
//! `network_data.json`, EC2-style `/latest/meta-data/...`) on its own address, and config-drive
//! directories (`<dir>/<instance-id>/openstack/latest/meta_data.json`) written when an instance
//! is created. The upstream equivalents are nova-api-metadata and Nova's config drive.
//!
//! Which instance is asking: on a real cloud the source address says it. Here the instances'
//! addresses are simulated, so the caller may name itself with `X-Instance-ID` (ID or name);
//! otherwise `X-Forwarded-For` (as set by Neutron's metadata proxy) or the peer address is
//! matched against the instances' fixed and floating IPs. The GCE metadata server
//! (`/computeMetadata/v1/`, see [`gce`]) and the Azure instance metadata service
//! (`/metadata/instance`, `/metadata/identity/oauth2/token`, see [`azure`]) answer on the same
//! listener for the same instances, and so does a CloudStack virtual router's
//! `/latest/meta-data` (under `/cloudstack`, see [`cloudstack`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::json;

use crate::http::ApiError;
use crate::model::compute::{find_flavor, server_ports, Related, Server, SERVERS};
use crate::model::config_drive::{attached_disks, meta_data, network_data};
use crate::model::network::{FloatingIp, FLOATING_IPS};
use crate::store::{Read, Store};

mod azure;
mod cloudstack;
mod gce;

pub(crate) use azure::{IdentityRequest, IdentityToken, Issuing, ManagedIdentity};
pub(crate) use gce::ServiceAccountTokens;

/// What the metadata servers read: the records, where clients reach the API, and who signs
/// the Azure VMs' managed identity tokens.
pub(crate) struct Cloud {
    pub store: Arc<Store>,
    pub base_url: String,
    pub identity: Arc<dyn ManagedIdentity>,
    /// Who issues the GCE instances' default service account tokens.
    pub gce_tokens: Arc<dyn ServiceAccountTokens>,
}

/// The metadata service router (serve with `ConnectInfo<SocketAddr>`); the caller adds the
/// service's error format, fault injection and request counting (`api::metadata_router`).
pub(crate) fn router(cloud: Arc<Cloud>) -> Router {
    Router::new()
        .route("/", get(|| async { "latest\n" }))
        .route("/openstack", get(openstack_versions))
        .route("/openstack/", get(openstack_versions))
        .route("/openstack/{version}", get(openstack_files))
        .route("/openstack/{version}/", get(openstack_files))
        .route("/openstack/{version}/{file}", get(openstack_file))
        .route("/computeMetadata/v1", get(gce::serve))
        .route("/computeMetadata/v1/", get(gce::serve))
        .route("/computeMetadata/v1/{*path}", get(gce::serve))
        .route("/{version}/meta-data", get(ec2_index))
        .route("/{version}/meta-data/", get(ec2_index))
        .route("/{version}/meta-data/{*key}", get(ec2_key))
        .merge(azure::router())
        .merge(cloudstack::router())
        .fallback(|| async { ApiError::not_found("NotFound", "The resource could not be found.") })
        .with_state(cloud)
}

type Peer = ConnectInfo<SocketAddr>;

/// The server asking, per the module docs.
fn caller(cloud: &Cloud, headers: &HeaderMap, peer: SocketAddr) -> Result<Server, ApiError> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim().to_owned())
    };
    cloud.store.read(|r| {
        let servers = r.list::<Server>(SERVERS);
        if let Some(id) = header("x-instance-id") {
            let mut found: Vec<&Server> = servers.iter().filter(|s| s.meta.id == id).collect();
            if found.is_empty() {
                found = servers.iter().filter(|s| s.name == id).collect();
            }
            return match found.as_slice() {
                [one] => Ok((*one).clone()),
                [] => Err(ApiError::not_found("NotFound", format!("No instance {id}"))),
                _ => Err(ApiError::not_found(
                    "NotFound",
                    format!("More than one instance is named {id}; use its ID"),
                )),
            };
        }
        let ip = header("x-forwarded-for")
            .and_then(|v| v.split(',').next().map(|s| s.trim().to_owned()))
            .unwrap_or_else(|| peer.ip().to_string());
        let fips = r.list::<FloatingIp>(FLOATING_IPS);
        let rel = Related::load(r);
        servers
            .into_iter()
            .find(|s| {
                rel.ports(&s.meta.id).iter().any(|p| {
                    p.fixed_ips.iter().any(|f| f.ip_address == ip)
                        || fips.iter().any(|f| {
                            f.port_id.as_deref() == Some(p.meta.id.as_str())
                                && f.floating_ip_address == ip
                        })
                })
            })
            .ok_or_else(|| {
                ApiError::not_found(
                    "NotFound",
                    format!("No instance has address {ip}; send X-Instance-ID"),
                )
            })
    })
}

async fn openstack_versions() -> &'static str {
    "2012-08-10\n2013-04-04\n2013-10-17\n2015-10-15\n2016-06-30\n2016-10-06\n2017-02-22\n2018-08-27\nlatest"
}

async fn openstack_files() -> &'static str {
    "meta_data.json\nnetwork_data.json\nvendor_data.json\nvendor_data2.json"
}

async fn openstack_file(
    State(cloud): State<Arc<Cloud>>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    UrlPath((_version, file)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    let server = caller(&cloud, &headers, peer)?;
    let body = match file.as_str() {
        "meta_data.json" => cloud.store.read(|r| meta_data(r, &server)),
        "network_data.json" => cloud.store.read(|r| network_data(r, &server)),
        "vendor_data.json" | "vendor_data2.json" => json!({}),
        _ => {
            return Err(ApiError::not_found(
                "NotFound",
                format!("No such metadata file {file}"),
            ))
        }
    };
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

const EC2_KEYS: &str = "ami-id\nami-launch-index\nblock-device-mapping/\nhostname\ninstance-id\ninstance-type\nlocal-hostname\nlocal-ipv4\nplacement/\npublic-hostname\npublic-ipv4\nreservation-id\nsecurity-groups";

async fn ec2_index(
    State(cloud): State<Arc<Cloud>>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
) -> Result<&'static str, ApiError> {
    caller(&cloud, &headers, peer)?;
    Ok(EC2_KEYS)
}

/// A server's first fixed IP and the floating IP on one of its ports, as its EC2
/// `local-ipv4`/`public-ipv4` (and the CloudStack virtual router's) show them.
pub(super) fn fixed_and_floating(
    r: &impl Read,
    server_id: &str,
) -> (Option<String>, Option<String>) {
    let ports = server_ports(r, server_id);
    let fixed = ports
        .iter()
        .flat_map(|p| &p.fixed_ips)
        .map(|f| f.ip_address.clone())
        .next();
    let floating = r
        .list::<FloatingIp>(FLOATING_IPS)
        .into_iter()
        .find(|f| {
            ports
                .iter()
                .any(|p| f.port_id.as_deref() == Some(p.meta.id.as_str()))
        })
        .map(|f| f.floating_ip_address);
    (fixed, floating)
}

async fn ec2_key(
    State(cloud): State<Arc<Cloud>>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    UrlPath((_version, key)): UrlPath<(String, String)>,
) -> Result<String, ApiError> {
    let s = caller(&cloud, &headers, peer)?;
    let (fixed, floating) = cloud.store.read(|r| fixed_and_floating(r, &s.meta.id));
    let disks = cloud.store.read(|r| attached_disks(r, &s.meta.id));
    let key = key.trim_end_matches('/');
    // Nova's EC2 `block-device-mapping`: the root disk, then `ebsN` per attached volume.
    if key == "block-device-mapping" {
        let mut names = vec!["ami".to_owned(), "root".to_owned()];
        names.extend((0..disks.len()).map(|i| format!("ebs{i}")));
        return Ok(names.join("\n"));
    }
    if let Some(ebs) = key.strip_prefix("block-device-mapping/ebs") {
        if let Some((_, device, _)) = ebs.parse::<usize>().ok().and_then(|i| disks.get(i)) {
            return Ok(device.clone());
        }
    }
    let value = match key {
        "block-device-mapping/ami" => "vda".to_owned(),
        "block-device-mapping/root" => "/dev/vda".to_owned(),
        "ami-id" => "ami-00000001".to_owned(),
        "ami-launch-index" => "0".to_owned(),
        "hostname" | "local-hostname" | "public-hostname" => s.hostname(),
        "instance-id" => s.ec2_id(),
        "instance-type" => {
            find_flavor(&s.flavor_id).map_or(s.flavor_id.clone(), |f| f.name.to_owned())
        }
        "local-ipv4" => fixed.unwrap_or_default(),
        "public-ipv4" => floating.unwrap_or_default(),
        "placement" => "availability-zone".to_owned(),
        "placement/availability-zone" => s.availability_zone.clone(),
        "reservation-id" => format!("r-{:08x}", s.index),
        "security-groups" => "default".to_owned(),
        _ => {
            return Err(ApiError::not_found(
                "NotFound",
                format!("No metadata key {key}"),
            ))
        }
    };
    Ok(value)
}
