//! The GCE metadata server (`/computeMetadata/v1/...`) on the metadata listener, for the
//! instance asking (found as for the OpenStack metadata service: `X-Instance-ID`, else the
//! address). As on GCE, every request needs `Metadata-Flavor: Google` (403 without it) and
//! every answer carries it; a directory lists its entries (subdirectories end in `/`),
//! `?recursive=true` answers a directory as JSON (camelCase keys, attribute keys as set), and
//! `?alt=text` answers it as `path value` lines. `wait_for_change` is not supported (400).
//! `instance/service-accounts/default/token` is an access token of the instance's default
//! service account (the instance's owner in its project, as the GCE dialect's token endpoint
//! issues them; [`ServiceAccountTokens`]), so the gce provider's metadata credentials and
//! Application Default Credentials work on the local cloud's instances as on GCE's.
//! Upstream equivalent: `metadata.google.internal`.

use std::collections::BTreeMap;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::{caller, Cloud, IdentityToken, Issuing, Peer};
use crate::model::compute::{Related, Server};
use crate::model::gce::project_metadata::common_metadata;
use crate::model::gce::{fingerprint, gce_status, numeric_id};
use crate::model::identity::{Project, PROJECTS};
use crate::store::Read;

/// Who issues default service account tokens: the GCE dialect's issuer, which lives in the API
/// layer (it owns Keystone's tokens) and is handed to the metadata servers, so that a token
/// from here is one the GCE dialect accepts (`--gce-require-tokens`).
pub(crate) trait ServiceAccountTokens: Send + Sync {
    /// A token for `user_id` in `project_id`.
    fn issue(&self, user_id: String, project_id: String) -> Issuing<'_>;
}

/// The scopes the default service account shows (and its tokens carry, in effect: all).
const SCOPES: &str = "https://www.googleapis.com/auth/cloud-platform";

fn text(status: StatusCode, body: String, content_type: &'static str) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut()
        .insert("metadata-flavor", HeaderValue::from_static("Google"));
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    r
}

fn plain_error(status: StatusCode, body: &str) -> Response {
    let mut r = text(status, format!("{body}\n"), "text/html; charset=UTF-8");
    // GCE's own error page, not the OpenStack metadata service's JSON.
    r.extensions_mut().insert(crate::http::Formatted);
    r
}

/// The tree an instance sees, with GCE's path names (kebab-case).
fn tree(r: &impl Read, cloud: &Cloud, s: &Server) -> Value {
    let project = r
        .list::<Project>(PROJECTS)
        .into_iter()
        .find(|p| p.id == s.meta.project_id);
    let (project_name, project_num) = project
        .as_ref()
        .map_or((String::new(), 0), |p| (p.name.clone(), numeric_id(&p.id)));
    let rel = Related::load(r);
    let nics: Vec<Value> = rel
        .ports(&s.meta.id)
        .iter()
        .map(|port| {
            let access: Vec<Value> = rel
                .floating(&port.meta.id)
                .iter()
                .map(|f| json!({"external-ip": f.floating_ip_address, "type": "ONE_TO_ONE_NAT"}))
                .collect();
            json!({
                "ip": port.fixed_ips.first().map(|f| f.ip_address.clone()).unwrap_or_default(),
                "mac": port.mac_address,
                "network": format!("projects/{project_num}/networks/{}", rel.network_name(&port.network_id)),
                "access-configs": access,
                "mtu": 1460,
            })
        })
        .collect();
    let zone = format!("projects/{project_num}/zones/{}", s.availability_zone);
    let machine_type = s.flavor().map_or(s.flavor_id.as_str(), |f| f.name);
    json!({
        "instance": {
            "attributes": s.metadata,
            "cpu-platform": "Intel Broadwell",
            "description": s.description.clone().unwrap_or_default(),
            "hostname": format!("{}.{}.c.{project_name}.internal", s.hostname(), s.availability_zone),
            "id": numeric_id(&s.meta.id),
            "image": "",
            "machine-type": format!("projects/{project_num}/machineTypes/{machine_type}"),
            "name": s.name,
            "network-interfaces": nics,
            "service-accounts": {
                "default": {
                    "aliases": ["default"],
                    "email": default_account(project_num),
                    "scopes": [SCOPES],
                },
            },
            "status": gce_status(&s.status),
            "tags": s.tags,
            "zone": zone,
        },
        "project": {
            "attributes": common_metadata(r, &s.meta.project_id),
            "numeric-project-id": project_num,
            "project-id": project_name,
        },
        "universe": {"universe-domain": cloud.base_url.clone()},
    })
}

/// The default service account's email, as GCE names a project's compute default account.
fn default_account(project_num: u64) -> String {
    format!("{project_num}-compute@developer.gserviceaccount.com")
}

/// `instance/service-accounts/{default|email}/token`.
async fn token(cloud: &Cloud, s: &Server) -> Response {
    match cloud
        .gce_tokens
        .issue(s.user_id.clone(), s.meta.project_id.clone())
        .await
    {
        Ok(IdentityToken {
            access_token,
            issued_at,
            expires_at,
        }) => text(
            StatusCode::OK,
            json!({
                "access_token": access_token,
                "expires_in": expires_at.saturating_sub(issued_at),
                "token_type": "Bearer",
            })
            .to_string(),
            "application/json",
        ),
        Err(e) => plain_error(e.status, &e.message),
    }
}

/// camelCase keys for recursive JSON, except the user's attribute keys.
fn camel(v: &Value, under_attributes: bool) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = if under_attributes {
                        k.clone()
                    } else {
                        let mut out = String::new();
                        let mut up = false;
                        for c in k.chars() {
                            if c == '-' {
                                up = true;
                            } else if up {
                                out.push(c.to_ascii_uppercase());
                                up = false;
                            } else {
                                out.push(c);
                            }
                        }
                        out
                    };
                    (key, camel(v, !under_attributes && k == "attributes"))
                })
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| camel(i, false)).collect()),
        other => other.clone(),
    }
}

/// Whether a value is a directory (a list of scalars, such as `tags`, is a leaf).
fn is_dir(v: &Value) -> bool {
    match v {
        Value::Object(_) => true,
        Value::Array(a) => a.iter().any(|x| x.is_object()),
        _ => false,
    }
}

fn leaf_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<String>) {
    let children: Vec<(String, &Value)> = match v {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(items) if is_dir(v) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        leaf => {
            out.push(format!("{prefix} {}", leaf_text(leaf)));
            return;
        }
    };
    for (k, child) in children {
        let path = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}/{k}")
        };
        flatten(&path, child, out);
    }
}

fn listing(v: &Value) -> String {
    let entries: Vec<String> = match v {
        Value::Object(map) => map
            .iter()
            .map(|(k, c)| {
                if is_dir(c) {
                    format!("{k}/")
                } else {
                    k.clone()
                }
            })
            .collect(),
        Value::Array(items) => (0..items.len()).map(|i| format!("{i}/")).collect(),
        _ => Vec::new(),
    };
    entries.iter().map(|e| format!("{e}\n")).collect()
}

/// `GET /computeMetadata/v1/` and everything under it.
pub(super) async fn serve(
    State(cloud): State<std::sync::Arc<Cloud>>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: axum::http::Uri,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let flavor = headers.get("metadata-flavor").and_then(|v| v.to_str().ok());
    if flavor != Some("Google") {
        return plain_error(
            StatusCode::FORBIDDEN,
            "Your client does not have permission to get URL from this server. Missing Metadata-Flavor:Google header.",
        );
    }
    if q.contains_key("wait_for_change") {
        return plain_error(
            StatusCode::BAD_REQUEST,
            "wait_for_change is not supported by the local cloud's metadata server",
        );
    }
    let server = match caller(&cloud, &headers, peer) {
        Ok(s) => s,
        Err(e) => return plain_error(StatusCode::NOT_FOUND, &e.message),
    };
    let root = cloud.store.read(|r| tree(r, &cloud, &server));
    let path = uri
        .path()
        .trim_start_matches("/computeMetadata/v1")
        .trim_matches('/');
    if let Some(account) = path
        .strip_prefix("instance/service-accounts/")
        .and_then(|p| p.strip_suffix("/token"))
    {
        let email = &root["instance"]["service-accounts"]["default"]["email"];
        if account == "default" || email.as_str() == Some(account) {
            return token(&cloud, &server).await;
        }
    }
    let mut node = &root;
    let mut under_attributes = false;
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        let next = match node {
            Value::Object(map) => map.get(seg),
            Value::Array(items) if is_dir(node) => {
                seg.parse::<usize>().ok().and_then(|i| items.get(i))
            }
            _ => None,
        };
        let Some(next) = next else {
            return plain_error(StatusCode::NOT_FOUND, "Not Found");
        };
        under_attributes = seg == "attributes" && !under_attributes;
        node = next;
    }
    let recursive = q.get("recursive").is_some_and(|v| v == "true");
    let alt = q.get("alt").map(String::as_str);
    let mut response = if is_dir(node) && recursive {
        if alt == Some("text") {
            let mut lines = Vec::new();
            flatten("", node, &mut lines);
            text(StatusCode::OK, lines.join("\n") + "\n", "application/text")
        } else {
            text(
                StatusCode::OK,
                camel(node, under_attributes).to_string(),
                "application/json",
            )
        }
    } else if is_dir(node) {
        text(StatusCode::OK, listing(node), "application/text")
    } else if alt == Some("json") {
        text(StatusCode::OK, node.to_string(), "application/json")
    } else {
        text(StatusCode::OK, leaf_text(node), "application/text")
    };
    if let Ok(etag) = HeaderValue::from_str(&fingerprint(node)) {
        response.headers_mut().insert("etag", etag);
    }
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn recursive_json_is_camel_case_but_attributes_keep_their_keys() {
        let v = json!({"network-interfaces": [{"access-configs": [{"external-ip": "1"}]}], "attributes": {"ssh-keys": "k"}});
        let c = camel(&v, false);
        assert_eq!(
            c["networkInterfaces"][0]["accessConfigs"][0]["externalIp"],
            "1"
        );
        assert_eq!(c["attributes"]["ssh-keys"], "k");
    }

    #[test]
    fn directories_list_entries_and_text_flattens() {
        let v = json!({"a": "1", "d": {"b": "2"}, "tags": ["x"], "nics": [{"ip": "3"}]});
        assert_eq!(listing(&v), "a\nd/\nnics/\ntags\n");
        let mut lines = Vec::new();
        flatten("", &v, &mut lines);
        assert_eq!(lines, ["a 1", "d/b 2", "nics/0/ip 3", "tags [\"x\"]"]);
    }
}
