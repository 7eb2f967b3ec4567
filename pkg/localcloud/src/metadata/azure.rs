//! The Azure instance metadata service (IMDS) on the metadata listener, for the VM asking:
//! `/metadata/instance` (and any path below it: `compute`, `network`, a leaf with
//! `format=text`), `/metadata/identity/oauth2/token` (the VM's managed identity) and
//! `/metadata/versions`. An Azure VM of the dialect is a Nova server with a
//! `Microsoft.Compute/virtualMachines` record behind it; the server asking is found as for the
//! other metadata servers (`X-Instance-ID`, else the address), and a server that is not an
//! Azure VM gets 404. As IMDS does, every request needs `Metadata: true` and one with
//! `X-Forwarded-For` is refused (400 either way), and every value of the instance document is
//! a string. What Microsoft's clients send is in `docs/azure-clients.md` (section b). Upstream
//! equivalent: `169.254.169.254/metadata`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use super::{caller, Cloud, Peer};
use crate::http::{ApiError, Formatted};
use crate::model::azure::{resource_key, ArmResource};
use crate::model::compute::{server_ports, Server};
use crate::model::network::{FloatingIp, Port, Subnet, SUBNETS};
use crate::model::Record;
use crate::store::Read;

const VM_TYPE: &str = "Microsoft.Compute/virtualMachines";
const NIC_TYPE: &str = "Microsoft.Network/networkInterfaces";
const SET_TYPE: &str = "Microsoft.Compute/availabilitySets";

/// Versions IMDS names when a request has none (its newest, as it lists them).
const NEWEST_VERSIONS: [&str; 3] = ["2023-07-01", "2021-12-13", "2021-02-01"];

/// A managed identity token the metadata service asks for on a VM's behalf.
#[derive(Debug, Clone)]
pub(crate) struct IdentityRequest {
    /// The Keystone user and project the token stands for: the VM's owner, in its project.
    pub user_id: String,
    pub project_id: String,
    /// `aud`: the resource asked for (`https://management.azure.com`).
    pub resource: String,
    /// `appid`: the identity's client ID.
    pub client_id: String,
    /// `xms_mirid`: the VM's resource ID.
    pub resource_id: String,
}

/// An issued managed identity token.
#[derive(Debug, Clone)]
pub(crate) struct IdentityToken {
    pub access_token: String,
    /// Seconds since the epoch.
    pub issued_at: u64,
    pub expires_at: u64,
}

/// A future of an issued token.
pub(crate) type Issuing<'a> =
    Pin<Box<dyn Future<Output = Result<IdentityToken, ApiError>> + Send + 'a>>;

/// Who signs managed identity tokens: Entra's signer, which lives in the API layer (it owns
/// Keystone's tokens and the signing key) and is handed to the metadata servers, so that a
/// token from IMDS is one Resource Manager accepts.
pub(crate) trait ManagedIdentity: Send + Sync {
    fn issue(&self, request: IdentityRequest) -> Issuing<'_>;
}

pub(super) fn router() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/metadata/versions", get(versions))
        .route("/metadata/instance", get(instance_root))
        .route("/metadata/instance/", get(instance_root))
        .route("/metadata/instance/{*path}", get(instance_path))
        .route("/metadata/identity/oauth2/token", get(identity_token))
}

type Params = Query<BTreeMap<String, String>>;

/// An IMDS answer in its own format, left as it is by the service's error formatting.
fn answer(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    r.extensions_mut().insert(Formatted);
    r
}

fn bad_request(message: &str) -> Response {
    answer(
        StatusCode::BAD_REQUEST,
        &json!({"error": format!("Bad request. {message}")}),
    )
}

/// The identity endpoint's errors are OAuth's (`error`, `error_description`).
fn oauth_error(status: StatusCode, description: &str) -> Response {
    answer(
        status,
        &json!({"error": "invalid_request", "error_description": description}),
    )
}

/// What every request must carry, or IMDS's refusal (the instance endpoint's words when
/// `oauth` is false, the identity endpoint's otherwise).
fn check_request(
    headers: &HeaderMap,
    q: &BTreeMap<String, String>,
    oauth: bool,
) -> Option<Response> {
    let refuse = |message: &str| {
        Some(if oauth {
            oauth_error(StatusCode::BAD_REQUEST, message)
        } else {
            bad_request(message)
        })
    };
    if headers.contains_key("x-forwarded-for") {
        return refuse("Requests with an X-Forwarded-For header are refused: IMDS is not reachable through a proxy");
    }
    let flagged = headers
        .get("metadata")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !flagged {
        return refuse("Required metadata header not specified");
    }
    let version_ok = q.get("api-version").is_some_and(|v| version_shaped(v));
    if !version_ok {
        let message = if q.contains_key("api-version") {
            "api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds"
        } else {
            "api-version was not specified in the request. For more information refer to aka.ms/azureimds"
        };
        return Some(if oauth {
            oauth_error(StatusCode::BAD_REQUEST, message)
        } else {
            answer(
                StatusCode::BAD_REQUEST,
                &json!({"error": format!("Bad request. {message}"), "newest-versions": NEWEST_VERSIONS}),
            )
        });
    }
    None
}

/// `YYYY-MM-DD`, optionally `-preview`: the shape of every IMDS version (any such version is
/// answered with the one document this service has).
fn version_shaped(v: &str) -> bool {
    let date = v.strip_suffix("-preview").unwrap_or(v);
    let b = date.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

/// `/metadata/versions`: the versions IMDS names (the one request without `api-version`).
async fn versions(headers: HeaderMap) -> Response {
    let mut q = BTreeMap::new();
    q.insert("api-version".to_owned(), NEWEST_VERSIONS[0].to_owned());
    if let Some(refused) = check_request(&headers, &q, false) {
        return refused;
    }
    answer(StatusCode::OK, &json!({"apiVersions": NEWEST_VERSIONS}))
}

/// The Azure VM the asking server is, or IMDS's 404.
fn asking_vm(
    cloud: &Cloud,
    headers: &HeaderMap,
    peer: Peer,
) -> Result<(Server, ArmResource), String> {
    let server = caller(cloud, headers, peer.0).map_err(|e| e.message)?;
    let vm = cloud.store.read(|r| vm_of(r, &server.meta.id));
    vm.map(|vm| (server.clone(), vm)).ok_or_else(|| {
        format!(
            "Instance {} is a Nova server, not an Azure virtual machine: IMDS answers VMs made through Resource Manager",
            server.name
        )
    })
}

fn not_found(message: &str, oauth: bool) -> Response {
    if oauth {
        oauth_error(StatusCode::NOT_FOUND, message)
    } else {
        answer(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("Not found. {message}")}),
        )
    }
}

/// The VM record behind a Nova server, if it is one.
fn vm_of(r: &impl Read, server_id: &str) -> Option<ArmResource> {
    ArmResource::list_where(r, "backing", server_id)
        .into_iter()
        .find(|res| res.kind == VM_TYPE)
}

/// A Keystone ID (32 hex digits) in GUID form, as ARM shows subscription IDs (the dialect's
/// `api::azure::guid`, which this layer cannot import).
fn guid(hex: &str) -> String {
    uuid::Uuid::try_parse(hex).map_or_else(|_| hex.to_owned(), |u| u.hyphenated().to_string())
}

fn resource_id(project_id: &str, group: &str, ty: &str, name: &str) -> String {
    format!(
        "/subscriptions/{}/resourceGroups/{group}/providers/{ty}/{name}",
        guid(project_id)
    )
}

/// The group and name of a resource ID of type `ty` (`/subscriptions/s/resourceGroups/g/
/// providers/Microsoft.Compute/availabilitySets/n`), any case.
fn group_and_name<'a>(id: &'a str, ty: &str) -> Option<(&'a str, &'a str)> {
    let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
    let want: Vec<&str> = ty.split('/').collect();
    match parts.as_slice() {
        [s, _, g, group, p, ns, kind, name]
            if s.eq_ignore_ascii_case("subscriptions")
                && g.eq_ignore_ascii_case("resourceGroups")
                && p.eq_ignore_ascii_case("providers")
                && ns.eq_ignore_ascii_case(want.first().copied().unwrap_or_default())
                && kind.eq_ignore_ascii_case(want.get(1).copied().unwrap_or_default()) =>
        {
            Some((group, name))
        }
        _ => None,
    }
}

/// The VM's fault and update domains: its place among the members of its availability set
/// (in creation order: [`crate::model::azure::place_in_set`]) modulo the set's counts, as the VM's `instanceView` computes them
/// (`api::azure::compute`; `tests/it/azure_imds.rs` checks the two agree); 0 and 0 outside a set.
fn domains(r: &impl Read, vm: &ArmResource) -> (u64, u64) {
    let Some(set_ref) = vm.properties["availabilitySet"]["id"].as_str() else {
        return (0, 0);
    };
    let Some(set) = group_and_name(set_ref, SET_TYPE).and_then(|(group, name)| {
        ArmResource::get(r, &resource_key(&vm.meta.project_id, group, SET_TYPE, name))
    }) else {
        return (0, 0);
    };
    let count = |key: &str, default: u64| set.properties[key].as_u64().unwrap_or(default).max(1);
    let (faults, updates) = (
        count("platformFaultDomainCount", 2),
        count("platformUpdateDomainCount", 5),
    );
    let set_id = resource_id(&set.meta.project_id, &set.group, SET_TYPE, &set.name);
    let members: Vec<ArmResource> = ArmResource::list_where(r, "type", VM_TYPE)
        .into_iter()
        .filter(|m| {
            m.meta.project_id == vm.meta.project_id
                && m.properties["availabilitySet"]["id"]
                    .as_str()
                    .is_some_and(|x| x.eq_ignore_ascii_case(&set_id))
        })
        .collect();
    let place = crate::model::azure::place_in_set(r, vm, &members);
    (place % faults, place % updates)
}

/// A JSON value as IMDS writes leaves: strings (numbers and booleans too).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The VM's network interfaces, in the order of its `networkProfile`.
fn interfaces(r: &impl Read, server: &Server, vm: &ArmResource) -> Vec<Value> {
    let listed: Vec<String> = vm.properties["networkProfile"]["networkInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str().map(str::to_lowercase))
        .collect();
    let place = |port: &Port| {
        ArmResource::list_where(r, "backing", &port.meta.id)
            .into_iter()
            .find(|nic| nic.kind == NIC_TYPE)
            .and_then(|nic| {
                let id = resource_id(&nic.meta.project_id, &nic.group, NIC_TYPE, &nic.name)
                    .to_lowercase();
                listed.iter().position(|l| *l == id)
            })
            .unwrap_or(usize::MAX)
    };
    let mut ports = server_ports(r, &server.meta.id);
    ports.sort_by_key(|p| place(p));
    let floating = FloatingIp::list(r);
    ports
        .iter()
        .map(|port| {
            let mut subnets: Vec<Value> = Vec::new();
            let addresses: Vec<Value> = port
                .fixed_ips
                .iter()
                .filter(|f| f.ip_address.contains('.'))
                .map(|f| {
                    if let Some(cidr) = r.get::<Subnet>(SUBNETS, &f.subnet_id).map(|s| s.cidr) {
                        let (address, prefix) = cidr.split_once('/').unwrap_or((&cidr, "32"));
                        let subnet = json!({"address": address, "prefix": prefix});
                        if !subnets.contains(&subnet) {
                            subnets.push(subnet);
                        }
                    }
                    let public = floating
                        .iter()
                        .find(|fip| {
                            fip.port_id.as_deref() == Some(port.meta.id.as_str())
                                && fip
                                    .fixed_ip_address
                                    .as_deref()
                                    .is_none_or(|a| a == f.ip_address)
                        })
                        .map(|fip| fip.floating_ip_address.clone())
                        .unwrap_or_default();
                    json!({"privateIpAddress": f.ip_address, "publicIpAddress": public})
                })
                .collect();
            json!({
                "ipv4": {"ipAddress": addresses, "subnet": subnets},
                "ipv6": {"ipAddress": []},
                "macAddress": port.mac_address.replace([':', '-'], "").to_uppercase(),
            })
        })
        .collect()
}

/// The instance document, as IMDS's `/metadata/instance` shows it.
fn document(r: &impl Read, server: &Server, vm: &ArmResource) -> Value {
    let p = &vm.properties;
    let image = &p["storageProfile"]["imageReference"];
    let os_disk = &p["storageProfile"]["osDisk"];
    let (fault, update) = domains(r, vm);
    let tags: Vec<String> = vm.tags.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    let tags_list: Vec<Value> = vm
        .tags
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    let linux = &p["osProfile"]["linuxConfiguration"];
    let public_keys: Vec<Value> = linux["ssh"]["publicKeys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| json!({"keyData": text_of(&k["keyData"]), "path": text_of(&k["path"])}))
        .collect();
    let data_disks: Vec<Value> = p["storageProfile"]["dataDisks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            json!({
                "lun": text_of(&d["lun"]),
                "name": text_of(&d["name"]),
                "caching": text_of(&d["caching"]),
                "createOption": text_of(&d["createOption"]),
                "managedDisk": {"id": text_of(&d["managedDisk"]["id"]), "storageAccountType": text_of(&d["managedDisk"]["storageAccountType"])},
            })
        })
        .collect();
    let os_type = os_disk["osType"].as_str().unwrap_or("Linux");
    json!({
        "compute": {
            "azEnvironment": "AzurePublicCloud",
            "customData": "",
            "evictionPolicy": "",
            "isHostCompatibilityLayerVm": "false",
            "licenseType": text_of(&p["licenseType"]),
            "location": vm.location,
            "name": vm.name,
            "offer": text_of(&image["offer"]),
            "osProfile": {
                "adminUsername": text_of(&p["osProfile"]["adminUsername"]),
                "computerName": p["osProfile"]["computerName"].as_str().unwrap_or(&server.name),
                "disablePasswordAuthentication": linux["disablePasswordAuthentication"].as_bool().unwrap_or(false).to_string(),
            },
            "osType": os_type,
            "placementGroupId": "",
            "plan": {"name": "", "product": "", "publisher": ""},
            "platformFaultDomain": fault.to_string(),
            "platformUpdateDomain": update.to_string(),
            "priority": text_of(&p["priority"]),
            "provider": "Microsoft.Compute",
            "publicKeys": public_keys,
            "publisher": text_of(&image["publisher"]),
            "resourceGroupName": vm.group,
            "resourceId": resource_id(&vm.meta.project_id, &vm.group, VM_TYPE, &vm.name),
            "securityProfile": {"secureBootEnabled": "false", "virtualTpmEnabled": "false"},
            "sku": text_of(&image["sku"]),
            "storageProfile": {
                "dataDisks": data_disks,
                "imageReference": {
                    "id": text_of(&image["id"]),
                    "offer": text_of(&image["offer"]),
                    "publisher": text_of(&image["publisher"]),
                    "sku": text_of(&image["sku"]),
                    "version": text_of(&image["version"]),
                },
                "osDisk": {
                    "caching": text_of(&os_disk["caching"]),
                    "createOption": text_of(&os_disk["createOption"]),
                    "diskSizeGB": text_of(&os_disk["diskSizeGB"]),
                    "name": text_of(&os_disk["name"]),
                    "osType": os_type,
                },
            },
            "subscriptionId": guid(&vm.meta.project_id),
            "tags": tags.join(";"),
            "tagsList": tags_list,
            "userData": text_of(&p["userData"]),
            "version": text_of(&image["version"]),
            "vmId": vm.meta.id,
            "vmScaleSetName": "",
            "vmSize": text_of(&p["hardwareProfile"]["vmSize"]),
            "zone": vm.zones.first().cloned().unwrap_or_default(),
        },
        "network": {"interface": interfaces(r, server, vm)},
    })
}

async fn instance_root(
    State(cloud): State<Arc<Cloud>>,
    peer: Peer,
    headers: HeaderMap,
    Query(q): Params,
) -> Response {
    instance(&cloud, peer, &headers, &q, "")
}

async fn instance_path(
    State(cloud): State<Arc<Cloud>>,
    peer: Peer,
    headers: HeaderMap,
    Query(q): Params,
    UrlPath(path): UrlPath<String>,
) -> Response {
    instance(&cloud, peer, &headers, &q, &path)
}

/// `/metadata/instance/<path>`: the document, or the part `path` names (array elements by
/// index: `network/interface/0/macAddress`); JSON, or with `format=text` a leaf's value.
fn instance(
    cloud: &Cloud,
    peer: Peer,
    headers: &HeaderMap,
    q: &BTreeMap<String, String>,
    path: &str,
) -> Response {
    if let Some(refused) = check_request(headers, q, false) {
        return refused;
    }
    let text = match q.get("format").map(String::as_str) {
        None | Some("json") => false,
        Some("text") => true,
        Some(other) => {
            return bad_request(&format!(
                "format '{}' is not supported (json, text)",
                other
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(20)
                    .collect::<String>()
            ))
        }
    };
    let (server, vm) = match asking_vm(cloud, headers, peer) {
        Ok(found) => found,
        Err(message) => return not_found(&message, false),
    };
    let doc = cloud.store.read(|r| document(r, &server, &vm));
    let mut node = &doc;
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        let next = match node {
            Value::Object(map) => map.get(segment),
            Value::Array(list) => segment.parse::<usize>().ok().and_then(|i| list.get(i)),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return not_found(&format!("No metadata at /metadata/instance/{path}"), false),
        }
    }
    let leaf = !matches!(node, Value::Object(_) | Value::Array(_));
    match (leaf, text) {
        (false, false) => answer(StatusCode::OK, node),
        (true, true) => {
            let mut r = (StatusCode::OK, text_of(node)).into_response();
            r.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        (true, false) => bad_request("A leaf node is asked for with format=text"),
        (false, true) => bad_request("format=text is for leaf nodes; ask for this one as JSON"),
    }
}

/// `/metadata/identity/oauth2/token?resource=...`: a token of the VM's managed identity (its
/// owner, in its project; the one identity a VM has here). `client_id`, `object_id` or
/// `msi_res_id` must name that identity, or the answer is IMDS's "Identity not found".
async fn identity_token(
    State(cloud): State<Arc<Cloud>>,
    peer: Peer,
    headers: HeaderMap,
    Query(q): Params,
) -> Response {
    if let Some(refused) = check_request(&headers, &q, true) {
        return refused;
    }
    let Some(resource) = q.get("resource").filter(|r| !r.trim().is_empty()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "Required audience parameter not specified",
        );
    };
    let (server, vm) = match asking_vm(&cloud, &headers, peer) {
        Ok(found) => found,
        Err(message) => return not_found(&message, true),
    };
    let client_id = guid(&server.user_id);
    let vm_id = resource_id(&vm.meta.project_id, &vm.group, VM_TYPE, &vm.name);
    let names_it = |key: &str, own: &str| {
        q.get(key).is_none_or(|v| {
            v.trim().eq_ignore_ascii_case(own) || v.replace('-', "") == own.replace('-', "")
        })
    };
    if !(names_it("client_id", &client_id)
        && names_it("object_id", &client_id)
        && names_it("msi_res_id", &vm_id))
    {
        return oauth_error(StatusCode::BAD_REQUEST, "Identity not found");
    }
    let request = IdentityRequest {
        user_id: server.user_id.clone(),
        project_id: server.meta.project_id.clone(),
        resource: resource.clone(),
        client_id: client_id.clone(),
        resource_id: vm_id,
    };
    match cloud.identity.issue(request).await {
        Ok(t) => {
            let expires_in = t.expires_at.saturating_sub(crate::time::now());
            answer(
                StatusCode::OK,
                &json!({
                    "access_token": t.access_token,
                    "client_id": client_id,
                    "expires_in": expires_in.to_string(),
                    "expires_on": t.expires_at.to_string(),
                    "ext_expires_in": expires_in.to_string(),
                    "not_before": t.issued_at.to_string(),
                    "resource": resource,
                    "token_type": "Bearer",
                }),
            )
        }
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            oauth_error(StatusCode::BAD_REQUEST, "Identity not found")
        }
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_dates() {
        for ok in ["2018-02-01", "2021-02-01", "2023-07-01-preview"] {
            assert!(version_shaped(ok), "{ok}");
        }
        for bad in ["", "latest", "2021-2-01", "2021-02-01x", "20210201"] {
            assert!(!version_shaped(bad), "{bad}");
        }
    }

    #[test]
    fn resource_ids_split_whatever_their_case() {
        let id =
            "/subscriptions/s/resourcegroups/RG/providers/microsoft.compute/AVAILABILITYSETS/set-1";
        assert_eq!(group_and_name(id, SET_TYPE), Some(("RG", "set-1")));
        assert_eq!(group_and_name(id, VM_TYPE), None);
        assert_eq!(group_and_name("/subscriptions/s", SET_TYPE), None);
    }
}
