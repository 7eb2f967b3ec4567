//! Every write route, with hostile path segments for the path property.

use super::*;

/// A hostile path segment: an unknown ID, a control character (raw or percent-encoded), a
/// dot segment, an encoded slash, a long or non-ASCII string.
pub(super) fn hostile_segment() -> impl Strategy<Value = String> {
    let encode = |s: String| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    prop_oneof![
        prop::sample::select(vec![
            "x%0D%0AX-Injected:%201".to_owned(),
            "%00".to_owned(),
            "%7F".to_owned(),
            "..".to_owned(),
            "%2E%2E".to_owned(),
            "a%2Fb".to_owned(),
            "%20".to_owned(),
            "0".to_owned(),
            "-1".to_owned(),
            "00000000-0000-0000-0000-000000000000".to_owned(),
            "x".repeat(4096),
        ]),
        "\\PC{1,24}".prop_map(encode),
        "[\\x00-\\x1f]{1,3}".prop_map(encode),
        "[a-z0-9-]{1,40}",
    ]
}

/// Every write route, with `{}` where the hostile segment goes: all of them answer a path that
/// names nothing (or holds a control character) with a 4xx that changes nothing.
pub(super) fn path_targets(h: &Harness) -> Vec<(Method, String)> {
    let project = h.cloud.store.read(|r| {
        use crate::store::Read as _;
        r.list::<Value>("projects")[0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    let (p, zone, region) = gce_scope(h);
    let (post, put, delete) = (Method::POST, Method::PUT, Method::DELETE);
    let lbaas = "/load-balancer/v2/lbaas";
    let mut routes = vec![
        (put.clone(), "/compute/v2.1/servers/{}".to_owned()),
        (delete.clone(), "/compute/v2.1/servers/{}".to_owned()),
        (post.clone(), "/compute/v2.1/servers/{}/action".to_owned()),
        (
            post.clone(),
            "/compute/v2.1/servers/{}/os-volume_attachments".to_owned(),
        ),
        (
            delete.clone(),
            "/compute/v2.1/servers/{}/os-volume_attachments/{}".to_owned(),
        ),
        (
            put.clone(),
            "/network/v2.0/routers/{}/add_router_interface".to_owned(),
        ),
        (
            put.clone(),
            "/network/v2.0/routers/{}/remove_router_interface".to_owned(),
        ),
        (
            put.clone(),
            "/network/v2.0/routers/{}/add_extraroutes".to_owned(),
        ),
        (
            put.clone(),
            "/network/v2.0/routers/{}/remove_extraroutes".to_owned(),
        ),
        (
            delete.clone(),
            "/network/v2.0/security-group-rules/{}".to_owned(),
        ),
        (put.clone(), format!("/volume/v3/{project}/volumes/{{}}")),
        (delete.clone(), format!("/volume/v3/{project}/volumes/{{}}")),
        (
            post.clone(),
            format!("/volume/v3/{project}/volumes/{{}}/action"),
        ),
        (post.clone(), "/volume/v3/{}/volumes".to_owned()),
        (post.clone(), format!("{lbaas}/pools/{{}}/members")),
        (put.clone(), format!("{lbaas}/pools/{{}}/members")),
        (put.clone(), format!("{lbaas}/pools/{{}}/members/{{}}")),
        (delete.clone(), format!("{lbaas}/pools/{{}}/members/{{}}")),
        (
            delete.clone(),
            "/identity/v3/users/{}/application_credentials/{}".to_owned(),
        ),
        (
            post.clone(),
            "/identity/v3/users/{}/application_credentials".to_owned(),
        ),
        (
            post.clone(),
            "/compute/v1/projects/{}/setCommonInstanceMetadata".to_owned(),
        ),
        (post.clone(), format!("{p}/zones/{{}}/instances")),
        (delete.clone(), format!("{p}/zones/{zone}/instances/{{}}")),
        (
            post.clone(),
            format!("{p}/zones/{zone}/instances/{{}}/setMetadata"),
        ),
        (post.clone(), format!("{p}/zones/{zone}/instances/fx/{{}}")),
        (delete.clone(), format!("{p}/zones/{zone}/disks/{{}}")),
        (delete.clone(), format!("{p}/zones/{zone}/operations/{{}}")),
        (post.clone(), format!("{p}/regions/{{}}/targetPools")),
        (
            post.clone(),
            format!("{p}/regions/{region}/targetPools/{{}}/addInstance"),
        ),
        (
            post.clone(),
            format!("{p}/regions/{region}/targetPools/fxpool/{{}}"),
        ),
        (post.clone(), format!("{p}/global/{{}}")),
    ];
    for c in [
        "networks",
        "subnets",
        "ports",
        "routers",
        "floatingips",
        "security-groups",
    ] {
        routes.push((put.clone(), format!("/network/v2.0/{c}/{{}}")));
        routes.push((delete.clone(), format!("/network/v2.0/{c}/{{}}")));
    }
    for c in ["loadbalancers", "listeners", "pools", "healthmonitors"] {
        routes.push((put.clone(), format!("{lbaas}/{c}/{{}}")));
        routes.push((delete.clone(), format!("{lbaas}/{c}/{{}}")));
    }
    for c in ["routes", "firewalls", "httpHealthChecks"] {
        routes.push((delete.clone(), format!("{p}/global/{c}/{{}}")));
    }
    for c in ["addresses", "targetPools", "forwardingRules"] {
        routes.push((delete.clone(), format!("{p}/regions/{region}/{c}/{{}}")));
    }
    routes
}
