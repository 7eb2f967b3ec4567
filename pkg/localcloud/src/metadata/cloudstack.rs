//! The metadata a CloudStack virtual router serves its guests (`/latest/meta-data/<key>`,
//! plain text), which the legacy `cloudstack` provider's kubelet side read: `instance-id`
//! and `vm-id` (the VM's UUID), `local-hostname`, `availability-zone`, `service-offering`
//! (the flavor's name), `local-ipv4`, `public-ipv4` (a public IP forwarding to the VM, empty
//! when none), `public-hostname`, `cloud-identifier`. The EC2-style `/latest/meta-data` of
//! this listener is Nova's (its `instance-id` is `i-…`), so CloudStack's is under
//! `/cloudstack`: `/cloudstack/latest/meta-data/<key>` for the instance asking (told apart as
//! every document of this listener, [`super::caller`]) and
//! `/cloudstack/<vm id>/latest/meta-data/<key>` for a named one.

use std::sync::Arc;

use axum::extract::{ConnectInfo, Path as UrlPath, State};
use axum::http::HeaderMap;
use axum::routing::get;
use axum::Router;

use super::{caller, fixed_and_floating, Cloud, Peer};
use crate::http::ApiError;
use crate::model::compute::{find_flavor, Server, SERVERS};
use crate::store::Read;

const KEYS: &str = "availability-zone\ncloud-identifier\ninstance-id\nlocal-hostname\nlocal-ipv4\npublic-hostname\npublic-ipv4\nservice-offering\nvm-id";

pub(super) fn router() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/cloudstack/latest/meta-data", get(index_of_caller))
        .route("/cloudstack/latest/meta-data/", get(index_of_caller))
        .route("/cloudstack/latest/meta-data/{*key}", get(key_of_caller))
        .route("/cloudstack/{id}/latest/meta-data", get(index_of))
        .route("/cloudstack/{id}/latest/meta-data/", get(index_of))
        .route("/cloudstack/{id}/latest/meta-data/{*key}", get(key_of))
}

fn named(cloud: &Cloud, id: &str) -> Result<Server, ApiError> {
    cloud
        .store
        .read(|r| r.get::<Server>(SERVERS, id))
        .ok_or_else(|| ApiError::not_found("NotFound", format!("No instance {id}")))
}

async fn index_of_caller(
    State(cloud): State<Arc<Cloud>>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
) -> Result<&'static str, ApiError> {
    caller(&cloud, &headers, peer)?;
    Ok(KEYS)
}

async fn key_of_caller(
    State(cloud): State<Arc<Cloud>>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    UrlPath(key): UrlPath<String>,
) -> Result<String, ApiError> {
    let s = caller(&cloud, &headers, peer)?;
    value(&cloud, &s, &key)
}

async fn index_of(
    State(cloud): State<Arc<Cloud>>,
    UrlPath(id): UrlPath<String>,
) -> Result<&'static str, ApiError> {
    named(&cloud, &id)?;
    Ok(KEYS)
}

async fn key_of(
    State(cloud): State<Arc<Cloud>>,
    UrlPath((id, key)): UrlPath<(String, String)>,
) -> Result<String, ApiError> {
    let s = named(&cloud, &id)?;
    value(&cloud, &s, &key)
}

/// The value of metadata `key` for server `s`.
fn value(cloud: &Cloud, s: &Server, key: &str) -> Result<String, ApiError> {
    let (fixed, public) = cloud.store.read(|r| fixed_and_floating(r, &s.meta.id));
    Ok(match key.trim_end_matches('/') {
        "instance-id" | "vm-id" => s.meta.id.clone(),
        "local-hostname" => s.hostname(),
        "availability-zone" => s.availability_zone.clone(),
        "service-offering" => {
            find_flavor(&s.flavor_id).map_or(s.flavor_id.clone(), |f| f.name.to_owned())
        }
        "local-ipv4" => fixed.unwrap_or_default(),
        "public-ipv4" | "public-hostname" => public.unwrap_or_default(),
        "cloud-identifier" => format!("CloudStack-{{{}}}", s.meta.project_id),
        other => {
            return Err(ApiError::not_found(
                "NotFound",
                format!("No metadata key {other}"),
            ))
        }
    })
}
