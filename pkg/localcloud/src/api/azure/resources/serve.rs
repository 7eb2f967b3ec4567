//! The routes and the handlers of resources and their actions (see [`super`]).

use super::*;

/// The routes: everything below a group's `providers` and the subscription's.
pub(in crate::api::azure) fn router() -> Router<Arc<Cloud>> {
    let mut r = Router::new()
        .route(
            "/subscriptions/{subscription}/providers/{*rest}",
            any(subscription_scoped),
        )
        .route(
            "/subscriptions/{subscription}/resources",
            get(list_resources),
        );
    for collection in ["resourcegroups", "resourceGroups"] {
        r = r
            .route(
                &format!(
                    "/subscriptions/{{subscription}}/{collection}/{{group}}/providers/{{*rest}}"
                ),
                any(group_scoped),
            )
            .route(
                &format!("/subscriptions/{{subscription}}/{collection}/{{group}}/resources"),
                get(list_resources),
            );
    }
    r
}

/// A parsed path below `providers/`: the kind, the names along it and what is left.
pub(super) struct ArmPath {
    pub kind: Kind,
    /// The resource's name; `None` for the collection.
    pub name: Option<String>,
    /// The child collection (or action) after the name, and the child's name.
    pub tail: Option<(String, Option<String>)>,
}

pub(super) fn parse_path(rest: &str) -> Option<ArmPath> {
    let segs: Vec<&str> = rest.split('/').collect();
    if segs.len() < 2 || segs.len() > 5 || segs.iter().any(|s| s.is_empty()) {
        return None;
    }
    let kind = Kind::find(segs[0], segs[1])?;
    Some(ArmPath {
        kind,
        name: segs.get(2).map(|s| (*s).to_owned()),
        tail: segs
            .get(3)
            .map(|c| ((*c).to_owned(), segs.get(4).map(|s| (*s).to_owned()))),
    })
}

pub(super) fn no_route(rest: &str) -> ApiError {
    // ARM answers an unknown type 400, not 404 (a 404 would read as a missing resource).
    invalid(
        "InvalidResourceType",
        format!(
            "The resource type '{rest}' could not be found here (local cloud: {}).",
            Kind::ALL.map(Kind::ty).join(", ")
        ),
    )
}

/// Everything a handler is given.
pub(super) struct Call {
    pub cloud: Arc<Cloud>,
    pub caller: Caller,
    pub method: Method,
    pub headers: HeaderMap,
    pub query: ArmQuery,
    pub body: Bytes,
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn group_scoped(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((subscription, group, rest)): Path<(String, String, String)>,
    method: Method,
    headers: HeaderMap,
    query: ArmQuery,
    raw: Bytes,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    let group = cloud
        .store
        .read(|v| ResourceGroup::get(v, &group_key(&caller.project_id, &group)))
        .ok_or_else(|| {
            ApiError::not_found(
                "ResourceGroupNotFound",
                format!("Resource group '{group}' could not be found."),
            )
        })?;
    let path = parse_path(&rest).ok_or_else(|| no_route(&rest))?;
    let call = Call {
        cloud,
        caller,
        method,
        headers,
        query,
        body: raw,
    };
    match (&path.name, &path.tail) {
        (None, _) if call.method == Method::GET => Ok(list_group(&call, &group, path.kind)),
        (Some(name), None) => one(call, group, path.kind, name.clone()).await,
        (Some(name), Some((sub, child))) => {
            let collection = path
                .kind
                .children()
                .iter()
                .copied()
                .chain(path.kind.read_only_children().iter().copied())
                .find(|c| c.eq_ignore_ascii_case(sub));
            match collection {
                Some(collection) => {
                    child_call(
                        call,
                        group,
                        path.kind,
                        name.clone(),
                        collection,
                        child.clone(),
                    )
                    .await
                }
                None if child.is_none() => {
                    action(call, group, path.kind, name.clone(), sub.clone()).await
                }
                None => Err(no_route(&rest)),
            }
        }
        _ => Err(method_not_allowed(&call.method)),
    }
}

pub(super) fn method_not_allowed(m: &Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("The HTTP method '{m}' is not supported here."),
    )
}

/// One page of `items` (`$skiptoken` from, at most `$top` or 100), with a `nextLink` back to
/// `path` when more follow.
pub(super) fn paged(call: &Call, path: &str, items: Vec<Value>) -> Result<Response, ApiError> {
    let top = match call.query.get("$top") {
        None => 100,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| {
                invalid(
                    "InvalidTopInQueryString",
                    format!("The value '{t}' of $top is not a number from 1 to 1000."),
                )
            })?,
    };
    let skip = match call.query.get("$skiptoken") {
        None => 0,
        Some(s) => s.parse::<usize>().map_err(|_| {
            invalid(
                "InvalidSkipToken",
                "The $skiptoken is not one this cloud gave.",
            )
        })?,
    };
    let total = items.len();
    let page: Vec<Value> = items.into_iter().skip(skip).take(top).collect();
    let mut out = json!({"value": page});
    if skip + top < total {
        out["nextLink"] = json!(format!(
            "{}{path}?api-version={}&$top={top}&$skiptoken={}",
            call.cloud.base_url,
            api_version(&call.query),
            skip + top
        ));
    }
    Ok(reply(StatusCode::OK, out))
}

pub(super) fn list_group(call: &Call, group: &ResourceGroup, kind: Kind) -> Response {
    let s = scope(&call.cloud, &call.caller);
    let items = call.cloud.store.read(|v| {
        let mut res = ArmResource::list_where(
            v,
            "scope",
            &resource_scope(s.project_id, &group.name, kind.ty()),
        );
        res.sort_by_key(|r| r.name.to_lowercase());
        res.iter().map(|r| body(v, &s, r)).collect::<Vec<_>>()
    });
    let path = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/{}",
        s.subscription,
        group.name,
        kind.ty()
    );
    paged(call, &path, items).unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn subscription_scoped(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path((subscription, rest)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    query: ArmQuery,
    raw: Bytes,
) -> Result<Response, ApiError> {
    subscription_of(&cloud, &caller, &subscription)?;
    let call = Call {
        cloud,
        caller,
        method,
        headers,
        query,
        body: raw,
    };
    if call.method != Method::GET {
        return Err(method_not_allowed(&call.method));
    }
    let segs: Vec<&str> = rest.split('/').collect();
    let s = scope(&call.cloud, &call.caller);
    match segs.as_slice() {
        [ns, ty] => {
            let kind = Kind::find(ns, ty).ok_or_else(|| no_route(&rest))?;
            let items = call.cloud.store.read(|v| {
                let mut res: Vec<ArmResource> = ArmResource::list_where(v, "type", kind.ty())
                    .into_iter()
                    .filter(|r| r.meta.project_id == s.project_id)
                    .collect();
                res.sort_by_key(|r| (r.group.to_lowercase(), r.name.to_lowercase()));
                res.iter().map(|r| body(v, &s, r)).collect::<Vec<_>>()
            });
            let path = format!("/subscriptions/{}/providers/{}", s.subscription, kind.ty());
            paged(&call, &path, items)
        }
        [_, locations, loc, what, id] if locations.eq_ignore_ascii_case("locations") => {
            check_location(&s, loc)?;
            operation(&call, what, id)
        }
        [ns, locations, loc, sizes]
            if locations.eq_ignore_ascii_case("locations")
                && sizes.eq_ignore_ascii_case("vmSizes")
                && ns.eq_ignore_ascii_case("Microsoft.Compute") =>
        {
            check_location(&s, loc)?;
            Ok(reply(
                StatusCode::OK,
                json!({"value": crate::api::azure::compute::vm_sizes()}),
            ))
        }
        _ => Err(no_route(&rest)),
    }
}

/// Checks `If-Match` and `If-None-Match` against the resource as it is.
pub(super) fn preconditions(
    headers: &HeaderMap,
    current: Option<&ArmResource>,
) -> Result<(), ApiError> {
    let failed =
        |m: String| ApiError::new(StatusCode::PRECONDITION_FAILED, "PreconditionFailed", m);
    if let Some(want) = headers.get("if-match").and_then(|v| v.to_str().ok()) {
        match current {
            None => {
                return Err(failed(
                    "The resource does not exist; If-Match cannot be met.".into(),
                ))
            }
            Some(c) if want.trim() != "*" && want.trim() != c.etag => {
                return Err(failed(format!(
                    "The If-Match etag {want} does not match the resource's etag {}.",
                    c.etag
                )))
            }
            _ => {}
        }
    }
    if let Some(none) = headers.get("if-none-match").and_then(|v| v.to_str().ok()) {
        if let Some(c) = current {
            if none.trim() == "*" || none.trim() == c.etag {
                return Err(failed(
                    "The resource exists; If-None-Match cannot be met.".into(),
                ));
            }
        }
    }
    Ok(())
}

/// A request body as JSON, or ARM's 400 for one that is not.
pub(super) fn json_body(raw: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(raw).map_err(|e| {
        invalid(
            "InvalidRequestContent",
            format!("The request content was invalid and could not be deserialized: {e}"),
        )
    })
}

/// Reads a PUT body.
pub(super) fn desired(raw: &[u8]) -> Result<Desired, ApiError> {
    desired_of(json_body(raw)?)
}

/// What a PUT body (or a resource with a PATCH merged into it) asks for.
pub(super) fn desired_of(v: Value) -> Result<Desired, ApiError> {
    let Value::Object(mut o) = v else {
        return Err(invalid(
            "InvalidRequestContent",
            "The request content was invalid: a JSON object is expected.",
        ));
    };
    let location = string(&o, "location", "location")?.map(str::to_owned);
    let tags = match o.remove("tags") {
        None | Some(Value::Null) => None,
        Some(t) => Some(serde_json::from_value(t).map_err(|_| {
            invalid(
                "InvalidRequestContent",
                "The request content was invalid: tags must map names to strings.",
            )
        })?),
    };
    let sku = o.remove("sku").filter(|v| !v.is_null());
    if sku.as_ref().is_some_and(|s| !s.is_object()) {
        return Err(invalid(
            "InvalidRequestContent",
            "The request content was invalid: sku must be an object.",
        ));
    }
    let zones = match o.remove("zones") {
        None | Some(Value::Null) => None,
        Some(z) => Some(serde_json::from_value(z).map_err(|_| {
            invalid(
                "InvalidRequestContent",
                "The request content was invalid: zones must be a list of strings.",
            )
        })?),
    };
    let properties = match o.remove("properties") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return Err(invalid(
                "InvalidRequestContent",
                "The request content was invalid: properties must be an object.",
            ))
        }
    };
    Ok(Desired {
        location,
        tags,
        sku,
        zones,
        properties,
    })
}

/// What the resource is, as a PUT body would say it (the base a PATCH merges into).
pub(super) fn as_desired(res: &ArmResource) -> Value {
    let mut v = json!({"location": res.location, "tags": res.tags, "properties": res.properties});
    if let Some(sku) = &res.sku {
        v["sku"] = sku.clone();
    }
    if !res.zones.is_empty() {
        v["zones"] = json!(res.zones);
    }
    v
}

/// RFC 7396 merge patch.
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Some(t) = target.as_object_mut() {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Applies `want` to the resource `existing` (or a new one called `name`), through the type's
/// own rules, and stores it.
pub(super) fn apply(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    group: &ResourceGroup,
    kind: Kind,
    name: &str,
    existing: Option<ArmResource>,
    mut want: Desired,
) -> Result<ArmResource, ApiError> {
    if let Some(l) = &want.location {
        check_location(s, l)?;
    }
    let mut res = match existing.clone() {
        Some(r) => r,
        None => {
            if want.location.is_none() {
                return Err(invalid(
                    "LocationRequired",
                    "The location property is required for this definition.",
                ));
            }
            ArmResource {
                meta: Meta::new(s.project_id),
                group: group.name.clone(),
                kind: kind.ty().into(),
                name: name.to_owned(),
                scope: resource_scope(s.project_id, &group.name, kind.ty()),
                location: s.location.clone(),
                tags: Default::default(),
                etag: String::new(),
                sku: None,
                zones: Vec::new(),
                backing: None,
                children: Default::default(),
                status: None,
                properties: json!({}),
            }
        }
    };
    if let Some(t) = want.tags.clone() {
        res.tags = t;
    }
    if kind.is_network() {
        crate::api::azure::network::apply(tx, s, kind, &mut res, existing.as_ref(), &mut want)?;
    } else {
        crate::api::azure::compute::apply(tx, s, kind, &mut res, existing.as_ref(), &mut want)?;
    }
    res.properties = Value::Object(want.properties);
    res.sku = want.sku;
    res.etag = new_etag();
    if existing.is_some() {
        res.touch();
    }
    res.put(tx)?;
    crate::api::azure::network::after_change(tx, s, kind)?;
    // What the hook changed of the resource itself (a load balancer's frontends).
    Ok(ArmResource::get(tx, &res.key()).unwrap_or(res))
}

/// Takes the resource away through the type's own rules (refusing while it is in use).
pub(super) fn remove(tx: &mut Tx<'_>, s: &Scope<'_>, res: &ArmResource) -> Result<(), ApiError> {
    let kind = kind_of(res);
    if kind.is_network() {
        crate::api::azure::network::remove(tx, s, res)?;
    } else {
        crate::api::azure::compute::remove(tx, s, res)?;
    }
    ArmResource::delete(tx, &res.key());
    crate::api::azure::network::after_change(tx, s, kind)
}

/// The resources of a group, for the group's deletion: each taken away, dependents first.
pub(crate) fn remove_group_resources(
    tx: &mut Tx<'_>,
    cloud: &Cloud,
    caller: &Caller,
    group: &str,
) -> Result<(), ApiError> {
    let s = scope(cloud, caller);
    let order = [
        Kind::VirtualMachine,
        Kind::NetworkInterface,
        Kind::LoadBalancer,
        Kind::Disk,
        Kind::AvailabilitySet,
        Kind::PublicIp,
        Kind::VirtualNetwork,
        Kind::SecurityGroup,
        Kind::RouteTable,
    ];
    for kind in order {
        let scope_key = resource_scope(s.project_id, group, kind.ty());
        for res in ArmResource::list_where(tx, "scope", &scope_key) {
            remove(tx, &s, &res)?;
        }
    }
    Ok(())
}

pub(super) async fn one(
    call: Call,
    group: ResourceGroup,
    kind: Kind,
    name: String,
) -> Result<Response, ApiError> {
    let key = resource_key(&call.caller.project_id, &group.name, kind.ty(), &name);
    match call.method.clone() {
        Method::GET | Method::HEAD => {
            let s = scope(&call.cloud, &call.caller);
            let v = call.cloud.store.read(|v| {
                ArmResource::get(v, &key).map(|res| {
                    let mut b = body(v, &s, &res);
                    if kind == Kind::VirtualMachine
                        && call
                            .query
                            .get("$expand")
                            .is_some_and(|e| e.eq_ignore_ascii_case("instanceView"))
                    {
                        b["properties"]["instanceView"] =
                            crate::api::azure::compute::instance_view(v, &s, &res);
                    }
                    b
                })
            });
            let v = v.ok_or_else(|| not_found(kind, &group.name, &name))?;
            Ok(reply(StatusCode::OK, v))
        }
        Method::PUT | Method::PATCH => {
            check_name(&name)?;
            let patch = call.method == Method::PATCH;
            let cloud = call.cloud.clone();
            let call = Arc::new(call);
            if fails(&call, kind) {
                let id = scope(&call.cloud, &call.caller).id_of(&group.name, kind, &name);
                return failed_change(call, kind, key, id).await;
            }
            let c2 = call.clone();
            cloud
                .write(move |tx| {
                    let call = c2;
                    let s = scope(&call.cloud, &call.caller);
                    let existing = ArmResource::get(tx, &key);
                    preconditions(&call.headers, existing.as_ref())?;
                    let want = if patch {
                        let current = existing
                            .as_ref()
                            .ok_or_else(|| not_found(kind, &group.name, &name))?;
                        let p = json_body(&call.body)?;
                        let mut merged = as_desired(current);
                        merge_patch(&mut merged, &p);
                        // ARM replaces the tags a PATCH gives, whole.
                        if p["tags"].is_object() {
                            merged["tags"] = p["tags"].clone();
                        }
                        desired_of(merged)?
                    } else {
                        desired(&call.body)?
                    };
                    let created = existing.is_none();
                    let res = apply(tx, &s, &group, kind, &name, existing, want)?;
                    let status = if created && !patch && kind.created_answers_201() {
                        StatusCode::CREATED
                    } else {
                        StatusCode::OK
                    };
                    let mut response = reply(status, body(tx, &s, &res));
                    if kind.long_running() {
                        long_running(tx, &call, kind, &mut response, false)?;
                    }
                    Ok(response)
                })
                .await
        }
        Method::DELETE => {
            let cloud = call.cloud.clone();
            let call = Arc::new(call);
            if fails(&call, kind) {
                let id = scope(&call.cloud, &call.caller).id_of(&group.name, kind, &name);
                return failed_change(call, kind, key, id).await;
            }
            let c2 = call.clone();
            cloud
                .write(move |tx| {
                    let call = c2;
                    let s = scope(&call.cloud, &call.caller);
                    let Some(res) = ArmResource::get(tx, &key) else {
                        return Ok(StatusCode::NO_CONTENT.into_response());
                    };
                    preconditions(&call.headers, Some(&res))?;
                    remove(tx, &s, &res)?;
                    if !kind.long_running() {
                        return Ok(StatusCode::OK.into_response());
                    }
                    let mut response = StatusCode::ACCEPTED.into_response();
                    long_running(tx, &call, kind, &mut response, true)?;
                    Ok(response)
                })
                .await
        }
        m => Err(method_not_allowed(&m)),
    }
}

/// A POST action on a resource (`virtualMachines/{vm}/deallocate`) or a GET of one of its
/// views (`virtualMachines/{vm}/instanceView`).
pub(super) async fn action(
    call: Call,
    group: ResourceGroup,
    kind: Kind,
    name: String,
    what: String,
) -> Result<Response, ApiError> {
    let key = resource_key(&call.caller.project_id, &group.name, kind.ty(), &name);
    if kind != Kind::VirtualMachine {
        return Err(no_route(&what));
    }
    if call.method == Method::GET && what.eq_ignore_ascii_case("instanceView") {
        let s = scope(&call.cloud, &call.caller);
        let v = call.cloud.store.read(|v| {
            ArmResource::get(v, &key)
                .map(|res| crate::api::azure::compute::instance_view(v, &s, &res))
        });
        return v
            .map(|v| reply(StatusCode::OK, v))
            .ok_or_else(|| not_found(kind, &group.name, &name));
    }
    if call.method != Method::POST {
        return Err(method_not_allowed(&call.method));
    }
    let cloud = call.cloud.clone();
    let call = Arc::new(call);
    if fails(&call, kind) {
        let id = scope(&call.cloud, &call.caller).id_of(&group.name, kind, &name);
        return failed_change(call, kind, key, id).await;
    }
    let c2 = call.clone();
    cloud
        .write(move |tx| {
            let call = c2;
            let s = scope(&call.cloud, &call.caller);
            let mut res =
                ArmResource::get(tx, &key).ok_or_else(|| not_found(kind, &group.name, &name))?;
            crate::api::azure::compute::action(tx, &s, &mut res, &what)?;
            res.etag = new_etag();
            res.touch();
            res.put(tx)?;
            let mut response = StatusCode::ACCEPTED.into_response();
            long_running(tx, &call, kind, &mut response, true)?;
            Ok(response)
        })
        .await
}
