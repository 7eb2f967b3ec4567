//! ARM's generic resource lists (`/subscriptions/{s}/resources` and a group's `.../resources`),
//! which the az CLI asks to find a resource by name and type: every resource of the
//! subscription (or group) with its `id`, `name`, `type`, `location`, `tags`, `sku` and
//! `zones`, filtered by `$filter` clauses `resourceType eq '...'`, `name eq '...'`,
//! `resourceGroup eq '...'` and `location eq '...'` joined by `and` (other filters are refused
//! by name).

use super::*;

/// One `field eq 'value'` clause.
struct Clause {
    field: &'static str,
    value: String,
}

fn parse_filter(filter: &str) -> Result<Vec<Clause>, ApiError> {
    let refuse = |c: &str| {
        invalid(
            "InvalidFilterInQueryString",
            format!("The $filter clause '{c}' is not available on the local cloud: resourceType, name, resourceGroup and location with eq, joined by and."),
        )
    };
    let mut out = Vec::new();
    let lower = filter.to_lowercase();
    let mut rest = filter;
    let mut at = 0;
    while !rest.trim().is_empty() {
        let end = lower[at..].find(" and ").map_or(filter.len(), |i| at + i);
        let clause = filter[at..end].trim();
        let (field, value) = clause.split_once(" eq ").ok_or_else(|| refuse(clause))?;
        let field = ["resourceType", "name", "resourceGroup", "location"]
            .into_iter()
            .find(|f| f.eq_ignore_ascii_case(field.trim()))
            .ok_or_else(|| refuse(clause))?;
        let value = value
            .trim()
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .ok_or_else(|| refuse(clause))?;
        out.push(Clause {
            field,
            value: value.replace("''", "'"),
        });
        at = (end + " and ".len()).min(filter.len());
        rest = &filter[at..];
    }
    Ok(out)
}

fn admits(clauses: &[Clause], res: &ArmResource) -> bool {
    clauses.iter().all(|c| {
        let have = match c.field {
            "resourceType" => &res.kind,
            "name" => &res.name,
            "resourceGroup" => &res.group,
            _ => &res.location,
        };
        have.eq_ignore_ascii_case(&c.value)
    })
}

/// `GET /subscriptions/{s}/resources` and `GET /subscriptions/{s}/resourceGroups/{g}/resources`.
pub(super) async fn list_resources(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    Path(p): Path<Vec<(String, String)>>,
    query: ArmQuery,
) -> Result<Response, ApiError> {
    let param = |k: &str| {
        p.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let subscription = param("subscription");
    subscription_of(&cloud, &caller, &subscription)?;
    let group = p.iter().any(|(n, _)| n == "group").then(|| param("group"));
    if let Some(g) = &group {
        cloud
            .store
            .read(|v| ResourceGroup::get(v, &group_key(&caller.project_id, g)))
            .ok_or_else(|| {
                ApiError::not_found(
                    "ResourceGroupNotFound",
                    format!("Resource group '{g}' could not be found."),
                )
            })?;
    }
    let clauses = query
        .get("$filter")
        .map(parse_filter)
        .transpose()?
        .unwrap_or_default();
    let s = scope(&cloud, &caller);
    let mut all = cloud.store.read(|v| {
        ArmResource::list_where(v, "project_id", &caller.project_id)
            .into_iter()
            .filter(|r| {
                group
                    .as_ref()
                    .is_none_or(|g| r.group.eq_ignore_ascii_case(g))
                    && admits(&clauses, r)
            })
            .collect::<Vec<_>>()
    });
    all.sort_by_key(|r| {
        (
            r.group.to_lowercase(),
            r.kind.clone(),
            r.name.to_lowercase(),
        )
    });
    let items: Vec<Value> = all
        .iter()
        .map(|r| {
            let mut v = json!({"id": s.id(r), "name": r.name, "type": r.kind, "location": r.location, "tags": r.tags});
            if let Some(sku) = &r.sku {
                v["sku"] = sku.clone();
            }
            if !r.zones.is_empty() {
                v["zones"] = json!(r.zones);
            }
            v
        })
        .collect();
    let path = match &group {
        Some(g) => format!(
            "/subscriptions/{}/resourceGroups/{g}/resources",
            s.subscription
        ),
        None => format!("/subscriptions/{}/resources", s.subscription),
    };
    let call = Call {
        cloud: cloud.clone(),
        caller,
        method: Method::GET,
        headers: HeaderMap::new(),
        query,
        body: Bytes::new(),
    };
    paged(&call, &path, items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_take_eq_clauses_joined_by_and() {
        let c = parse_filter("resourceGroup eq 'rg' and name eq 'pip' AND resourceType eq 'Microsoft.Network/publicIPAddresses'")
            .expect("parsed");
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].field, c[1].value.as_str()), ("resourceGroup", "pip"));
        assert_eq!(c[2].value, "Microsoft.Network/publicIPAddresses");
        for bad in [
            "tagName eq 'x'",
            "name ne 'x'",
            "name eq x",
            "substringof('a', name)",
        ] {
            assert!(parse_filter(bad).is_err(), "{bad}");
        }
    }
}
