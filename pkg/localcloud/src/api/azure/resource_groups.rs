//! Resource groups (`/subscriptions/{s}/resourcegroups/{name}`, either spelling of the
//! collection, names found whatever their case): create or update (`location` required and
//! fixed once set, `tags`), get, check existence (HEAD: 204 or 404), list (`$top`, `nextLink`)
//! and delete (202 with a `Location` to poll; the group and its resources are gone when it
//! answers).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{json, Value};

use super::{api_version, guid, location, normalise_location, subscription_of, ArmQuery};
use crate::api::{parse_body, reply, ApiError, Caller, Cloud, Ctx};
use crate::model::azure::{group_key, ResourceGroup};
use crate::model::{Meta, Record};

pub(super) fn router() -> Router<Arc<Cloud>> {
    let mut r = Router::new();
    for collection in ["resourcegroups", "resourceGroups"] {
        r = r
            .route(
                &format!("/subscriptions/{{subscription}}/{collection}"),
                get(list),
            )
            .route(
                &format!("/subscriptions/{{subscription}}/{collection}/{{name}}"),
                get(show).head(exists).put(create_or_update).delete(delete),
            );
    }
    r
}

fn body(g: &ResourceGroup) -> Value {
    let mut v = json!({
        "id": format!("/subscriptions/{}/resourceGroups/{}", guid(&g.meta.project_id), g.name),
        "name": g.name,
        "type": "Microsoft.Resources/resourceGroups",
        "location": g.location,
        "properties": {"provisioningState": "Succeeded"},
    });
    if !g.tags.is_empty() {
        v["tags"] = json!(g.tags);
    }
    if let Some(m) = &g.managed_by {
        v["managedBy"] = json!(m);
    }
    v
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(
        "ResourceGroupNotFound",
        format!("Resource group '{name}' could not be found."),
    )
}

/// ARM's rule for names: 1 to 90 letters, digits, `_`, `-`, `.`, `(` and `)`, not ending in a
/// period.
fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = (1..=90).contains(&name.chars().count())
        && !name.ends_with('.')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Resource group name '{name}' is invalid: 1 to 90 letters, digits, underscores, hyphens, periods and parentheses, not ending in a period."
        ))
        .with_kind("InvalidResourceGroupName"))
    }
}

fn find(cloud: &Cloud, caller: &Caller, name: &str) -> Option<ResourceGroup> {
    cloud
        .store
        .read(|v| ResourceGroup::get(v, &group_key(&caller.project_id, name)))
}

async fn show(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((subscription, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    let g = find(&cloud, &caller, &name).ok_or_else(|| not_found(&name))?;
    Ok(reply(StatusCode::OK, body(&g)))
}

async fn exists(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((subscription, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    Ok(match find(&cloud, &caller, &name) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    })
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Put {
    location: Option<String>,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    managed_by: Option<String>,
}

async fn create_or_update(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((subscription, name)): Path<(String, String)>,
    raw: Bytes,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    check_name(&name)?;
    let put: Put = parse_body(&raw)
        .map_err(|e| ApiError::bad_request(e.message).with_kind("InvalidRequestContent"))?;
    let Some(asked) = put.location.filter(|l| !l.trim().is_empty()) else {
        return Err(ApiError::bad_request(
            "The 'location' property is required for this definition.",
        )
        .with_kind("LocationRequired"));
    };
    let ours = location(&cloud);
    if normalise_location(&asked) != ours {
        return Err(ApiError::bad_request(format!(
            "The provided location '{asked}' is not available for resource group. List of available regions is '{ours}'."
        ))
        .with_kind("LocationNotAvailableForResourceGroup"));
    }
    let project = caller.project_id.clone();
    let (group, created) = cloud
        .write(move |tx| {
            let key = group_key(&project, &name);
            match ResourceGroup::get(tx, &key) {
                Some(mut g) => {
                    if let Some(tags) = put.tags {
                        g.tags = tags;
                    }
                    if put.managed_by.is_some() {
                        g.managed_by = put.managed_by;
                    }
                    g.touch();
                    g.put(tx)?;
                    Ok((g, false))
                }
                None => {
                    let g = ResourceGroup {
                        meta: Meta::new(project),
                        name,
                        location: ours,
                        tags: put.tags.unwrap_or_default(),
                        managed_by: put.managed_by,
                    };
                    g.put(tx)?;
                    Ok((g, true))
                }
            }
        })
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(reply(status, body(&group)))
}

async fn list(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(subscription): Path<String>,
    query: ArmQuery,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    if query.get("$filter").is_some() {
        return Err(ApiError::bad_request(
            "The local cloud does not implement $filter on resource groups; list them all and filter in the client.",
        )
        .with_kind("InvalidFilterInQueryString"));
    }
    let top = match query.get("$top") {
        None => 1000,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "The value '{t}' of $top is not a number from 1 to 1000."
                ))
                .with_kind("InvalidTopInQueryString")
            })?,
    };
    let skip = query
        .get("$skiptoken")
        .map(|s| s.parse::<usize>())
        .transpose()
        .map_err(|_| {
            ApiError::bad_request("The $skiptoken is not one this cloud gave.")
                .with_kind("InvalidSkipToken")
        })?
        .unwrap_or(0);
    let mut groups = cloud
        .store
        .read(|v| ResourceGroup::list_where(v, "project_id", &caller.project_id));
    groups.sort_by_key(|g| g.name.to_lowercase());
    let page: Vec<Value> = groups.iter().skip(skip).take(top).map(body).collect();
    let mut out = json!({"value": page});
    if skip + top < groups.len() {
        out["nextLink"] = json!(format!(
            "{}/subscriptions/{}/resourcegroups?api-version={}&$top={top}&$skiptoken={}",
            cloud.base_url,
            guid(&caller.project_id),
            api_version(&query),
            skip + top
        ));
    }
    Ok(reply(StatusCode::OK, out))
}

async fn delete(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((subscription, name)): Path<(String, String)>,
    query: ArmQuery,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    let project = caller.project_id.clone();
    let version = api_version(&query);
    let c = cloud.clone();
    let location_url = cloud
        .write(move |tx| {
            let key = group_key(&project, &name);
            let group = ResourceGroup::get(tx, &key).ok_or_else(|| not_found(&name))?;
            // As ARM: the group's resources go with it.
            super::resources::remove_group_resources(tx, &c, &caller, &group.name)?;
            ResourceGroup::delete(tx, &key);
            super::finished_operation(tx, &c, &project, &version)
        })
        .await?;
    let mut r = StatusCode::ACCEPTED.into_response();
    if let Ok(v) = HeaderValue::from_str(&location_url) {
        r.headers_mut().insert("location", v);
    }
    // Retry-After 0 (or none) would make Microsoft's clients wait 30 s between polls.
    r.headers_mut()
        .insert("retry-after", HeaderValue::from_static("1"));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_arm_rules() {
        assert!(check_name("rg-1.(a)_b").is_ok());
        for bad in ["", "ends.", "a/b", "a b", &"x".repeat(91)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
