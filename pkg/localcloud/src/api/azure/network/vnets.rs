//! Virtual networks and their subnets (see [`super`]).

use super::*;

// ---- virtual networks ---------------------------------------------------------------------

pub(super) fn address_space(p: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let space = obj(p, "addressSpace", "properties.addressSpace")?;
    let prefixes = space
        .map(|o| {
            list(
                o,
                "addressPrefixes",
                "properties.addressSpace.addressPrefixes",
            )
        })
        .transpose()?
        .unwrap_or_default();
    if prefixes.is_empty() {
        return Err(invalid(
            "InvalidRequestFormat",
            "Cannot parse the request: properties.addressSpace.addressPrefixes must name at least one address range.",
        ));
    }
    let mut out = Vec::new();
    for p in prefixes {
        let text = p.as_str().unwrap_or_default();
        let (net, len) = parse_cidr(text).ok_or_else(|| {
            invalid(
                "InvalidAddressPrefixFormat",
                format!("Address prefix {p} of the virtual network is not a valid IPv4 CIDR."),
            )
        })?;
        out.push(format!("{net}/{len}"));
    }
    Ok(out)
}

pub(super) fn overlaps(a: &str, b: &str) -> bool {
    match (parse_cidr(a), parse_cidr(b)) {
        (Some((na, la)), Some((nb, lb))) => {
            let len = la.min(lb);
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            u32::from(na) & m == u32::from(nb) & m
        }
        _ => false,
    }
}

pub(super) fn within(inner: &str, outer: &str) -> bool {
    match (parse_cidr(inner), parse_cidr(outer)) {
        (Some((ni, li)), Some((_, lo))) => li >= lo && in_cidr(ni, outer),
        _ => false,
    }
}

/// The subnet's prefix: `addressPrefix`, or the first of `addressPrefixes`.
pub(super) fn subnet_prefix(name: &str, p: &Map<String, Value>) -> Result<String, ApiError> {
    let text = match string(p, "addressPrefix", "addressPrefix")? {
        Some(t) => t.to_owned(),
        None => list(p, "addressPrefixes", "addressPrefixes")?
            .first()
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                invalid(
                    "InvalidRequestFormat",
                    format!("Cannot parse the request: subnet {name} has no addressPrefix."),
                )
            })?,
    };
    let (net, len) = parse_cidr(&text).filter(|(_, l)| *l <= 29).ok_or_else(|| {
        invalid(
            "InvalidAddressPrefixFormat",
            format!("Subnet {name} has an address prefix {text} that is not an IPv4 CIDR of at most /29."),
        )
    })?;
    Ok(format!("{net}/{len}"))
}

/// A Neutron subnet as an Azure subnet: gateway `.1`, addresses from `.4` to the last but one.
pub(super) fn azure_subnet(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    name: &str,
    network_id: &str,
    cidr: &str,
) -> Result<Subnet, ApiError> {
    let mut subnet = new_subnet(tx, name, network_id, cidr, s.project_id)?;
    if let Some((net, len)) = parse_cidr(cidr) {
        let first = u32::from(net);
        let last = first | !(if len == 0 { 0 } else { u32::MAX << (32 - len) });
        subnet.gateway_ip = Some(Ipv4Addr::from(first + 1).to_string());
        subnet.allocation_pools = vec![Pool {
            start: Ipv4Addr::from(first + 4).to_string(),
            end: Ipv4Addr::from(last - 1).to_string(),
        }];
        tx.put(SUBNETS, &subnet.meta.id, &subnet)?;
    }
    let router = project_router(tx, s)?;
    add_interface_on_subnet(tx, &router, &subnet.meta.id)?;
    Ok(subnet)
}

/// The project's router with an external gateway (made when there is none).
pub(super) fn project_router(tx: &mut Tx<'_>, s: &Scope<'_>) -> Result<Router_, ApiError> {
    if let Some(r) = tx
        .list::<Router_>(ROUTERS)
        .into_iter()
        .find(|r| r.meta.project_id == s.project_id && r.gateway_network_id.is_some())
    {
        return Ok(r);
    }
    let external = external_network(tx)?;
    new_router(tx, ROUTER, s.project_id, Some(external.meta.id))
}

/// Takes a Neutron subnet away with its router interface.
pub(super) fn drop_subnet(tx: &mut Tx<'_>, subnet_id: &str) -> Result<(), ApiError> {
    for p in tx.list::<Port>(PORTS) {
        if p.device_owner == OWNER_ROUTER_INTERFACE
            && p.fixed_ips.iter().any(|f| f.subnet_id == subnet_id)
        {
            delete_port_cascade(tx, &p.meta.id)?;
        }
    }
    tx.delete(SUBNETS, subnet_id);
    Ok(())
}

pub(super) fn apply_vnet(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &mut ArmResource,
    want: &mut Desired,
) -> Result<(), ApiError> {
    let space = address_space(&want.properties)?;
    let subnets = children_of(&want.properties, "subnets")?;
    let mut prefixes: Vec<(String, String)> = Vec::new();
    for (name, p) in &subnets {
        let prefix = subnet_prefix(name, p)?;
        if !space.iter().any(|sp| within(&prefix, sp)) {
            return Err(invalid(
                "NetcfgSubnetRangeOutsideVnet",
                format!("Subnet '{name}' is not valid because its IP address range {prefix} is outside the IP address range of virtual network '{}' ({}).", res.name, space.join(", ")),
            ));
        }
        if let Some((other, _)) = prefixes.iter().find(|(_, p2)| overlaps(&prefix, p2)) {
            return Err(invalid(
                "NetcfgSubnetRangesOverlap",
                format!("Subnet '{name}' is not valid because its IP address range {prefix} overlaps with that of subnet '{other}'."),
            ));
        }
        for (key, kind) in [
            ("networkSecurityGroup", Kind::SecurityGroup),
            ("routeTable", Kind::RouteTable),
        ] {
            if let Some(id) = ref_id(p, key) {
                resolve(tx, s, id, kind, None, &format!("subnet {name}"))?;
            }
        }
        prefixes.push(((*name).to_owned(), prefix));
    }
    let network_id = match &res.backing {
        Some(id) => id.clone(),
        None => new_network(tx, &res.name, s.project_id, false)?.meta.id,
    };
    let mut children = BTreeMap::new();
    // Subnets that go, or whose range changes, must have no NICs.
    for (lower, subnet_id) in &res.children {
        let Some(existing) = tx.get::<Subnet>(SUBNETS, subnet_id) else {
            continue;
        };
        let kept = prefixes.iter().find(|(n, _)| &n.to_lowercase() == lower);
        match kept {
            Some((_, prefix)) if *prefix == existing.cidr => {
                children.insert(lower.clone(), subnet_id.clone());
            }
            _ => {
                if !subnet_users(tx, subnet_id).is_empty() {
                    let code = if kept.is_some() {
                        "InUseSubnetCannotBeUpdated"
                    } else {
                        "InUseSubnetCannotBeDeleted"
                    };
                    return Err(invalid(
                        code,
                        format!(
                            "Subnet {} is in use by network interfaces and cannot be {}.",
                            existing.name,
                            if kept.is_some() { "changed" } else { "deleted" }
                        ),
                    ));
                }
                drop_subnet(tx, subnet_id)?;
            }
        }
    }
    for (name, prefix) in &prefixes {
        let lower = name.to_lowercase();
        if let std::collections::btree_map::Entry::Vacant(e) = children.entry(lower) {
            e.insert(azure_subnet(tx, s, name, &network_id, prefix)?.meta.id);
        }
    }
    res.backing = Some(network_id);
    res.children = children;
    Ok(())
}

pub(super) fn remove_vnet(
    tx: &mut Tx<'_>,
    _s: &Scope<'_>,
    res: &ArmResource,
) -> Result<(), ApiError> {
    for (name, subnet_id) in &res.children {
        if !subnet_users(tx, subnet_id).is_empty() {
            return Err(invalid(
                "InUseSubnetCannotBeDeleted",
                format!("Subnet {name} of virtual network {} is in use by network interfaces and cannot be deleted.", res.name),
            ));
        }
    }
    for subnet_id in res.children.values() {
        drop_subnet(tx, subnet_id)?;
    }
    if let Some(id) = &res.backing {
        tx.delete(NETWORKS, id);
    }
    Ok(())
}

/// The IP configurations (IDs) of the NICs with an address on Neutron subnet `subnet_id`.
pub(super) fn ip_configurations_on(r: &impl Read, s: &Scope<'_>, subnet_id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for port in subnet_users(r, subnet_id) {
        for nic in ArmResource::list_where(r, "backing", &port.meta.id) {
            if nic.kind != Kind::NetworkInterface.ty() {
                continue;
            }
            for f in port.fixed_ips.iter().filter(|f| f.subnet_id == subnet_id) {
                if let Some((name, _)) = nic.children.iter().find(|(_, ip)| **ip == f.ip_address) {
                    let shown = config_name(&nic, name);
                    out.push(id_ref(s.child_id(&nic, "ipConfigurations", &shown)));
                }
            }
        }
    }
    out
}

/// An IP configuration's name as the client wrote it.
pub(super) fn config_name(nic: &ArmResource, lower: &str) -> String {
    nic.properties["ipConfigurations"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .filter_map(|c| c["name"].as_str())
                .find(|n| n.to_lowercase() == lower)
        })
        .unwrap_or(lower)
        .to_owned()
}

pub(super) fn vnet_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = props(res);
    show_children(&mut p, s, res, "subnets", |name, sp| {
        if let Some(subnet_id) = res.children.get(&name.to_lowercase()) {
            let configs = ip_configurations_on(r, s, subnet_id);
            if !configs.is_empty() {
                sp.insert("ipConfigurations".into(), Value::Array(configs));
            }
        }
        sp.entry("privateEndpointNetworkPolicies")
            .or_insert(json!("Disabled"));
        sp.entry("privateLinkServiceNetworkPolicies")
            .or_insert(json!("Enabled"));
    });
    p.insert("resourceGuid".into(), json!(res.meta.id));
    p.entry("enableDdosProtection").or_insert(json!(false));
    p.entry("virtualNetworkPeerings").or_insert(json!([]));
    Value::Object(p)
}
