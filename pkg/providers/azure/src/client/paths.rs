//! Where a call goes and how it is named: the `api-version` of each resource provider (one
//! per provider, versions Azure serves; the local cloud accepts any) and the short name of a
//! call in errors and logs.

use hypercloud_cloudprovider::http_body::excerpt_str;

/// `api-version` of Microsoft.Compute's virtual machines, availability sets and sizes.
pub const COMPUTE_API_VERSION: &str = "2024-07-01";
/// `api-version` of Microsoft.Compute's disks and snapshots (a separate API of their own).
pub const DISKS_API_VERSION: &str = "2024-03-02";
/// `api-version` of Microsoft.Network.
pub const NETWORK_API_VERSION: &str = "2024-05-01";
/// `api-version` of Microsoft.Resources: subscriptions and resource groups.
pub const RESOURCES_API_VERSION: &str = "2024-03-01";

/// The `api-version` of a resource ID or collection path: by the last resource provider
/// namespace in it (`.../providers/Microsoft.Network/...`), disks and snapshots apart;
/// resource groups and subscriptions are Microsoft.Resources'.
pub fn api_version(id: &str) -> &'static str {
    let lower = id.to_ascii_lowercase();
    let Some((_, tail)) = lower.rsplit_once("/providers/") else {
        return RESOURCES_API_VERSION;
    };
    if tail.starts_with("microsoft.compute/disks")
        || tail.starts_with("microsoft.compute/snapshots")
    {
        DISKS_API_VERSION
    } else if tail.starts_with("microsoft.compute/") {
        COMPUTE_API_VERSION
    } else if tail.starts_with("microsoft.network/") {
        NETWORK_API_VERSION
    } else {
        RESOURCES_API_VERSION
    }
}

/// How a call is named in errors and logs: the verb and the resource's path below its
/// provider namespace, with its group (`PUT virtualMachines/vm1 (resource group rg)`).
pub(super) fn describe(verb: &str, id: &str) -> String {
    let path = id
        .split(['?', '#'])
        .next()
        .unwrap_or(id)
        .trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let group = segments
        .iter()
        .position(|s| s.eq_ignore_ascii_case("resourceGroups"))
        .and_then(|i| segments.get(i + 1));
    let below = match segments
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("providers"))
    {
        Some(i) => segments.get(i + 2..).unwrap_or_default().join("/"),
        None => match segments
            .iter()
            .position(|s| s.eq_ignore_ascii_case("resourceGroups"))
        {
            Some(i) => segments.get(i..).unwrap_or_default().join("/"),
            None => segments.join("/"),
        },
    };
    let text = match group {
        Some(g) if !below.to_ascii_lowercase().starts_with("resourcegroups") => {
            format!("{verb} {below} (resource group {g})")
        }
        _ => format!("{verb} {below}"),
    };
    excerpt_str(&text)
}
