//! Child resources shown inline in their parent (see [`super`]).

use super::*;

/// A child resource shown inline in its parent (`virtualNetworks/{v}/subnets/{s}`): read from
/// the parent's body, changed by changing the parent.
pub(super) async fn child_call(
    call: Call,
    group: ResourceGroup,
    kind: Kind,
    parent: String,
    collection: &'static str,
    child: Option<String>,
) -> Result<Response, ApiError> {
    let key = resource_key(&call.caller.project_id, &group.name, kind.ty(), &parent);
    let child_missing = {
        let parent = parent.clone();
        move |c: &str| {
            ApiError::not_found(
                "NotFound",
                format!("Resource {collection} with name {c} not found in {parent}."),
            )
        }
    };
    let find_in = move |v: &Value, c: &str| {
        v["properties"][collection]
            .as_array()
            .and_then(|a| {
                a.iter().find(|x| {
                    x["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(c))
                })
            })
            .cloned()
    };
    if call.method == Method::GET {
        let s = scope(&call.cloud, &call.caller);
        let parent_body = call
            .cloud
            .store
            .read(|v| ArmResource::get(v, &key).map(|res| body(v, &s, &res)))
            .ok_or_else(|| not_found(kind, &group.name, &parent))?;
        return match &child {
            None => {
                let items = parent_body["properties"][collection]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let path = format!(
                    "{}/{collection}",
                    parent_body["id"].as_str().unwrap_or_default()
                );
                paged(&call, &path, items)
            }
            Some(c) => find_in(&parent_body, c)
                .map(|v| reply(StatusCode::OK, v))
                .ok_or_else(|| child_missing(c)),
        };
    }
    let Some(child) = child else {
        return Err(method_not_allowed(&call.method));
    };
    if !matches!(call.method, Method::PUT | Method::DELETE)
        || !kind.children().contains(&collection)
    {
        return Err(method_not_allowed(&call.method));
    }
    check_name(&child)?;
    let cloud = call.cloud.clone();
    let call = Arc::new(call);
    if fails(&call, kind) {
        let id = format!(
            "{}/{collection}/{child}",
            scope(&call.cloud, &call.caller).id_of(&group.name, kind, &parent)
        );
        return failed_change(call, kind, key, id).await;
    }
    let c2 = call.clone();
    cloud
        .write(move |tx| {
            let call = c2;
            let s = scope(&call.cloud, &call.caller);
            let res =
                ArmResource::get(tx, &key).ok_or_else(|| not_found(kind, &group.name, &parent))?;
            preconditions(&call.headers, Some(&res))?;
            let mut props = res.properties.as_object().cloned().unwrap_or_default();
            let mut items: Vec<Value> = props
                .get(collection)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let at = items.iter().position(|x| {
                x["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(&child))
            });
            let deleting = call.method == Method::DELETE;
            if deleting {
                let Some(i) = at else {
                    return Ok(StatusCode::NO_CONTENT.into_response());
                };
                items.remove(i);
            } else {
                let v = json_body(&call.body)?;
                let child_props = match &v["properties"] {
                    Value::Null => json!({}),
                    p @ Value::Object(_) => p.clone(),
                    _ => {
                        return Err(invalid(
                            "InvalidRequestContent",
                            "The request content was invalid: properties must be an object.",
                        ))
                    }
                };
                let name = at
                    .and_then(|i| items[i]["name"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| child.clone());
                let element = json!({"name": name, "properties": child_props});
                match at {
                    Some(i) => items[i] = element,
                    None => items.push(element),
                }
            }
            props.insert(collection.into(), Value::Array(items));
            let want = Desired {
                location: None,
                tags: None,
                sku: res.sku.clone(),
                zones: Some(res.zones.clone()),
                properties: props,
            };
            let updated = apply(tx, &s, &group, kind, &parent, Some(res), want)?;
            let mut response = if deleting {
                StatusCode::ACCEPTED.into_response()
            } else {
                let b = body(tx, &s, &updated);
                let element = find_in(&b, &child).ok_or_else(|| child_missing(&child))?;
                let status = if at.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::CREATED
                };
                reply(status, element)
            };
            long_running(tx, &call, kind, &mut response, deleting)?;
            Ok(response)
        })
        .await
}
