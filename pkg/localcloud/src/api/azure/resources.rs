//! Resource Manager's resources over HTTP: the routes below a group's and the
//! subscription's `providers/`, each type's create, read, update (PUT and merge-patch PATCH
//! with `If-Match`/`If-None-Match`), delete and actions, lists with `nextLink`, child
//! resources shown inline in their parent ([`children`]) and long-running answers
//! ([`operations`]). What a type allows is decided by its own module ([`super::network`],
//! [`super::compute`]), what all share by [`super::arm`].

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};
use serde_json::{json, Map, Value};

use super::arm::{
    check_name, invalid, kind_of, new_etag, not_found, scope, string, Desired, Kind, Scope,
};
use super::{api_version, normalise_location, subscription_of, ArmQuery};
use crate::api::{reply, ApiError, Caller, Cloud, Ctx};
use crate::model::azure::{
    group_key, resource_key, resource_scope, ArmResource, Operation, ResourceGroup,
};
use crate::model::{Meta, Record};
use crate::store::{Read, Tx};

mod children;
mod generic;
mod operations;
mod serve;

use children::*;
use generic::*;
use operations::*;
pub(crate) use serve::remove_group_resources;
pub(super) use serve::router;
use serve::*;

/// The body of a resource as ARM shows it.
pub(crate) fn body(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let kind = kind_of(res);
    let mut properties = if kind.is_network() {
        super::network::properties(r, s, res)
    } else {
        super::compute::properties(r, s, res)
    };
    if let Some(p) = properties.as_object_mut() {
        p.insert("provisioningState".into(), json!("Succeeded"));
    }
    let mut v = json!({
        "id": s.id(res),
        "name": res.name,
        "type": res.kind,
        "location": res.location,
        "properties": properties,
    });
    if kind.has_etag() {
        v["etag"] = json!(res.etag);
    }
    if !res.tags.is_empty() {
        v["tags"] = json!(res.tags);
    }
    if let Some(sku) = &res.sku {
        v["sku"] = sku.clone();
    }
    if !res.zones.is_empty() {
        v["zones"] = json!(res.zones);
    }
    if kind == Kind::Disk {
        if let Some(vm) = super::compute::managed_by(r, s, res) {
            v["managedBy"] = json!(vm);
        }
    }
    for children in kind.children() {
        // Children carry their parent's etag.
        if let Some(items) = v["properties"][children].as_array_mut() {
            for c in items {
                c["etag"] = json!(res.etag);
            }
        }
    }
    v
}

pub(super) fn check_location(s: &Scope<'_>, asked: &str) -> Result<(), ApiError> {
    if normalise_location(asked) == s.location {
        Ok(())
    } else {
        Err(invalid(
            "LocationNotAvailableForResourceType",
            format!(
                "The provided location '{asked}' is not available. List of available regions is '{}'.",
                s.location
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_kinds_children_and_actions() {
        let p = parse_path("microsoft.network/VirtualNetworks/v1/subnets/s1").expect("a path");
        assert_eq!(p.kind, Kind::VirtualNetwork);
        assert_eq!(p.name.as_deref(), Some("v1"));
        assert_eq!(p.tail, Some(("subnets".into(), Some("s1".into()))));
        let p = parse_path("Microsoft.Compute/virtualMachines").expect("a path");
        assert_eq!((p.kind, p.name), (Kind::VirtualMachine, None));
        assert!(parse_path("Microsoft.Network/nope/x").is_none());
        assert!(parse_path("Microsoft.Network/virtualNetworks//x").is_none());
    }

    #[test]
    fn merge_patch_replaces_removes_and_recurses() {
        let mut t = json!({"tags": {"a": "1"}, "properties": {"x": 1, "y": {"z": 2}}});
        merge_patch(
            &mut t,
            &json!({"tags": {"b": "2"}, "properties": {"x": null, "y": {"w": 3}}}),
        );
        assert_eq!(
            t,
            json!({"tags": {"a": "1", "b": "2"}, "properties": {"y": {"z": 2, "w": 3}}})
        );
    }
}
