//! Route tables (see [`super`]).

use super::*;

// ---- route tables --------------------------------------------------------------------------

pub(super) fn apply_route_table(want: &mut Desired) -> Result<(), ApiError> {
    let routes = children_of(&want.properties, "routes")?;
    let mut cleaned = Vec::new();
    for (name, mut p) in routes {
        let prefix = string(&p, "addressPrefix", "addressPrefix")?
            .unwrap_or_default()
            .to_owned();
        if parse_cidr(&prefix).is_none() {
            return Err(invalid("InvalidRouteAddressPrefix", format!("Route {name} has an invalid AddressPrefix {prefix}: an IPv4 CIDR is expected (service tags are not available on the local cloud).")));
        }
        let hop = string(&p, "nextHopType", "nextHopType")?
            .unwrap_or_default()
            .to_owned();
        let hop = ["VirtualNetworkGateway", "VnetLocal", "Internet", "VirtualAppliance", "None"]
            .into_iter()
            .find(|h| h.eq_ignore_ascii_case(&hop))
            .ok_or_else(|| invalid("InvalidRequestFormat", format!("Route {name} has nextHopType '{hop}': one of VirtualNetworkGateway, VnetLocal, Internet, VirtualAppliance, None is expected.")))?;
        let ip = string(&p, "nextHopIpAddress", "nextHopIpAddress")?
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        match (hop, &ip) {
            ("VirtualAppliance", None) => return Err(invalid("VirtualApplianceNextHopIpAddressMissing", format!("Route {name} has nextHopType VirtualAppliance but no nextHopIpAddress."))),
            ("VirtualAppliance", Some(a)) if a.parse::<Ipv4Addr>().is_err() => return Err(invalid("InvalidNextHopIpAddress", format!("Route {name} has an invalid nextHopIpAddress {a}."))),
            ("VirtualAppliance", _) => {}
            (_, Some(_)) => return Err(invalid("NextHopIpAddressNotAllowed", format!("Route {name}: nextHopIpAddress can only be set for nextHopType VirtualAppliance."))),
            _ => {}
        }
        p.insert("nextHopType".into(), json!(hop));
        p.remove("provisioningState");
        cleaned.push(json!({"name": name, "properties": p}));
    }
    want.properties
        .insert("routes".into(), Value::Array(cleaned));
    want.properties
        .entry("disableBgpRoutePropagation")
        .or_insert(json!(false));
    Ok(())
}

pub(super) fn route_table_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = props(res);
    show_children(&mut p, s, res, "routes", |_, _| {});
    p.insert("resourceGuid".into(), json!(res.meta.id));
    let subnets = subnets_referring(r, s, "routeTable", &s.id(res));
    if !subnets.is_empty() {
        p.insert("subnets".into(), Value::Array(subnets));
    }
    Value::Object(p)
}
