//! Load balancers (see [`super`]): frontend IP configurations (a public IP, or a subnet for an
//! internal one), backend address pools (the NICs' IP configurations that name them),
//! probes and load-balancing rules, checked as ARM checks them. What carries their traffic is
//! in [`super::lb_traffic`].

use super::*;
use crate::api::azure::arm::Child;

/// The protocols of a probe, and the Octavia monitor each becomes.
const PROBES: &[(&str, &str)] = &[("Tcp", "TCP"), ("Http", "HTTP"), ("Https", "HTTPS")];

/// The name of `id`'s child in `collection` of this load balancer, if `id` names one.
pub(super) fn own_child(
    s: &Scope<'_>,
    lb: &ArmResource,
    collection: &str,
    id: &str,
) -> Option<String> {
    let prefix = format!("{}/{collection}/", s.id(lb));
    let head = id.get(..prefix.len())?;
    if !head.eq_ignore_ascii_case(&prefix) {
        return None;
    }
    let name = &id[prefix.len()..];
    (!name.is_empty() && !name.contains('/')).then(|| name.to_owned())
}

/// Whether `name` is one of `children`' names (any case).
fn named(children: &[Child<'_>], name: &str) -> bool {
    children.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

/// `o[key]` as one of `allowed` (any case, shown as written there).
fn one_of(
    o: &Map<String, Value>,
    key: &str,
    field: &str,
    allowed: &[&'static str],
    default: &'static str,
) -> Result<&'static str, ApiError> {
    match string(o, key, field)? {
        None => Ok(default),
        Some(v) => allowed
            .iter()
            .find(|a| a.eq_ignore_ascii_case(v))
            .copied()
            .ok_or_else(|| {
                invalid(
                    "InvalidRequestFormat",
                    format!("{field} '{v}' is not one of {}.", allowed.join(", ")),
                )
            }),
    }
}

pub(super) fn apply_lb(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &mut ArmResource,
    existing: Option<&ArmResource>,
    want: &mut Desired,
) -> Result<(), ApiError> {
    let sku = crate::api::azure::arm::sku_of(
        want,
        existing,
        "load balancer",
        &["Basic", "Standard"],
        "Basic",
        ("InvalidRequestFormat", Some("CannotChangeLoadBalancerSku")),
    )?;
    want.sku = Some(json!({"name": sku, "tier": "Regional"}));
    let p = want.properties.clone();
    for key in ["inboundNatRules", "inboundNatPools", "outboundRules"] {
        if !list(&p, key, &format!("properties.{key}"))?.is_empty() {
            return Err(invalid("InvalidRequestFormat", format!("Load balancer {}: properties.{key} are not available on the local cloud (load-balancing rules only).", res.name)));
        }
    }
    let lb_id = s.id(res);
    let frontends = children_of(&p, "frontendIPConfigurations")?;
    let mut cleaned_frontends = Vec::new();
    for (name, mut fp) in frontends.clone() {
        let at = format!(
            "load balancer {} frontendIPConfigurations[{name}]",
            res.name
        );
        let public = ref_id(&fp, "publicIPAddress").map(str::to_owned);
        let subnet = ref_id(&fp, "subnet").map(str::to_owned);
        match (&public, &subnet) {
            (Some(id), None) => {
                let pip = resolve(tx, s, id, Kind::PublicIp, None, &at)?.resource;
                let pip_sku = pip
                    .sku
                    .as_ref()
                    .and_then(|v| v["name"].as_str())
                    .unwrap_or("Basic");
                if !pip_sku.eq_ignore_ascii_case(sku) {
                    return Err(invalid("LoadBalancerReferencesPublicIPAddressWithDifferentSku", format!("Load balancer {} of SKU {sku} cannot use public IP address {} of SKU {pip_sku}.", res.name, pip.name)));
                }
                // A public IP serves one frontend or one NIC.
                let frontend_id = format!("{lb_id}/frontendIPConfigurations/{name}");
                if let Some(user) =
                    public_ip_user(tx, s, &pip).filter(|u| !u.eq_ignore_ascii_case(&frontend_id))
                {
                    return Err(invalid(
                        "PublicIPAddressInUse",
                        format!("Public IP address {} is already used by {user}.", pip.name),
                    ));
                }
                fp.remove("privateIPAllocationMethod");
                fp.remove("privateIPAddress");
            }
            (None, Some(id)) => {
                resolve(tx, s, id, Kind::VirtualNetwork, Some("subnets"), &at)?;
                let method = one_of(
                    &fp,
                    "privateIPAllocationMethod",
                    &format!("{at}.privateIPAllocationMethod"),
                    &["Dynamic", "Static"],
                    "Dynamic",
                )?;
                if method == "Static" {
                    let ip = string(&fp, "privateIPAddress", &format!("{at}.privateIPAddress"))?
                        .ok_or_else(|| {
                            invalid(
                                "PrivateIPAddressIsRequired",
                                format!("{at} is Static but names no privateIPAddress."),
                            )
                        })?;
                    let addr: std::net::IpAddr = ip.parse().map_err(|_| {
                        invalid(
                            "InvalidRequestFormat",
                            format!("{at}.privateIPAddress {ip} is not an IP address."),
                        )
                    })?;
                    if let Some(why) = s.cloud.config.lb_vip_pool.refuse(addr) {
                        return Err(invalid("PrivateIPAddressNotInSubnet", format!("{at}.privateIPAddress {ip} {why}: on the local cloud an internal frontend's address is a VIP of its data plane, from the pool {} (--lb-vip-pool).", s.cloud.config.lb_vip_pool)));
                    }
                } else {
                    fp.remove("privateIPAddress");
                }
                fp.insert("privateIPAllocationMethod".into(), json!(method));
            }
            _ => {
                return Err(invalid(
                    "InvalidRequestFormat",
                    format!("{at} must name either a publicIPAddress or a subnet."),
                ))
            }
        }
        fp.remove("provisioningState");
        fp.remove("loadBalancingRules");
        fp.remove("inboundNatRules");
        cleaned_frontends.push(json!({"name": name, "properties": fp}));
    }
    let pools = children_of(&p, "backendAddressPools")?;
    let mut cleaned_pools = Vec::new();
    for (name, bp) in &pools {
        if !list(
            bp,
            "loadBalancerBackendAddresses",
            "loadBalancerBackendAddresses",
        )?
        .is_empty()
        {
            return Err(invalid("InvalidRequestFormat", format!("Backend pool {name}: loadBalancerBackendAddresses (pools by IP address) are not available on the local cloud; name the pool from the NICs' IP configurations.")));
        }
        cleaned_pools.push(json!({"name": name, "properties": {}}));
    }
    let probes = children_of(&p, "probes")?;
    let mut cleaned_probes = Vec::new();
    for (name, mut pp) in probes.clone() {
        let at = format!("load balancer {} probes[{name}]", res.name);
        let protocol = one_of(
            &pp,
            "protocol",
            &format!("{at}.protocol"),
            &["Tcp", "Http", "Https"],
            "Tcp",
        )?;
        let port = int(&pp, "port", &format!("{at}.port"), 1..=65535)?
            .ok_or_else(|| invalid("InvalidRequestFormat", format!("{at}.port is required.")))?;
        let interval = int(
            &pp,
            "intervalInSeconds",
            &format!("{at}.intervalInSeconds"),
            5..=300,
        )?
        .unwrap_or(15);
        let count = int(
            &pp,
            "numberOfProbes",
            &format!("{at}.numberOfProbes"),
            1..=10,
        )?
        .unwrap_or(2);
        let threshold = int(
            &pp,
            "probeThreshold",
            &format!("{at}.probeThreshold"),
            1..=10,
        )?;
        let path = string(&pp, "requestPath", &format!("{at}.requestPath"))?.map(str::to_owned);
        match (protocol, &path) {
            ("Tcp", Some(_)) => {
                return Err(invalid(
                    "InvalidRequestFormat",
                    format!("{at}: requestPath is only for Http and Https probes."),
                ))
            }
            ("Http" | "Https", None) => {
                return Err(invalid(
                    "InvalidRequestFormat",
                    format!("{at}: an {protocol} probe needs a requestPath."),
                ))
            }
            _ => {}
        }
        pp.insert("protocol".into(), json!(protocol));
        pp.insert("port".into(), json!(port));
        pp.insert("intervalInSeconds".into(), json!(interval));
        pp.insert("numberOfProbes".into(), json!(count));
        if let Some(t) = threshold {
            pp.insert("probeThreshold".into(), json!(t));
        }
        pp.remove("provisioningState");
        pp.remove("loadBalancingRules");
        cleaned_probes.push(json!({"name": name, "properties": pp}));
    }
    let rules = children_of(&p, "loadBalancingRules")?;
    let mut cleaned_rules = Vec::new();
    let mut taken: Vec<(String, &str, i64, String)> = Vec::new();
    for (name, mut rp) in rules {
        let at = format!("load balancer {} loadBalancingRules[{name}]", res.name);
        let reference = |rp: &Map<String, Value>,
                         key: &str,
                         collection: &str,
                         have: &[Child<'_>],
                         required: bool|
         -> Result<Option<String>, ApiError> {
            match ref_id(rp, key) {
                None if required => Err(invalid("InvalidRequestFormat", format!("{at}.{key} is required."))),
                None => Ok(None),
                Some(id) => own_child(s, res, collection, id)
                    .filter(|c| named(have, c))
                    .map(Some)
                    .ok_or_else(|| invalid("InvalidResourceReference", format!("Resource {id} referenced by {at}.{key} is not one of load balancer {}'s {collection}.", res.name))),
            }
        };
        let frontend = reference(
            &rp,
            "frontendIPConfiguration",
            "frontendIPConfigurations",
            &frontends,
            true,
        )?
        .unwrap_or_default();
        // az sends the pool twice, as `backendAddressPool` and as a one-element
        // `backendAddressPools`; more than one pool per rule is refused.
        let mut pool_ids: Vec<String> = list(&rp, "backendAddressPools", "backendAddressPools")?
            .iter()
            .filter_map(|p| p["id"].as_str().map(str::to_lowercase))
            .chain(ref_id(&rp, "backendAddressPool").map(str::to_lowercase))
            .collect();
        pool_ids.sort();
        pool_ids.dedup();
        if pool_ids.len() > 1 {
            return Err(invalid("InvalidRequestFormat", format!("{at}: several backend pools per rule are not available on the local cloud; name one.")));
        }
        if ref_id(&rp, "backendAddressPool").is_none() {
            if let Some(first) = list(&rp, "backendAddressPools", "backendAddressPools")?
                .first()
                .cloned()
            {
                rp.insert("backendAddressPool".into(), first);
            }
        }
        reference(
            &rp,
            "backendAddressPool",
            "backendAddressPools",
            &pools,
            false,
        )?;
        reference(&rp, "probe", "probes", &probes, false)?;
        let protocol = one_of(
            &rp,
            "protocol",
            &format!("{at}.protocol"),
            &["Tcp", "Udp", "All"],
            "Tcp",
        )?;
        if protocol == "All" {
            return Err(invalid("InvalidRequestFormat", format!("{at}: protocol All (HA ports) is not available on the local cloud; make one rule per protocol and port.")));
        }
        let front_port = int(
            &rp,
            "frontendPort",
            &format!("{at}.frontendPort"),
            1..=65534,
        )?
        .ok_or_else(|| {
            invalid(
                "InvalidRequestFormat",
                format!("{at}.frontendPort is required."),
            )
        })?;
        let back_port =
            int(&rp, "backendPort", &format!("{at}.backendPort"), 1..=65535)?.unwrap_or(front_port);
        let idle = int(
            &rp,
            "idleTimeoutInMinutes",
            &format!("{at}.idleTimeoutInMinutes"),
            4..=100,
        )?
        .unwrap_or(4);
        let distribution = one_of(
            &rp,
            "loadDistribution",
            &format!("{at}.loadDistribution"),
            &["Default", "SourceIP", "SourceIPProtocol"],
            "Default",
        )?;
        if let Some((other, ..)) = taken.iter().find(|(_, pr, fport, f)| {
            *pr == protocol && *fport == front_port && f.eq_ignore_ascii_case(&frontend)
        }) {
            return Err(invalid("LoadBalancingRuleFrontendPortConflict", format!("Load balancing rules {other} and {name} of load balancer {} use the same frontend IP configuration {frontend}, protocol {protocol} and port {front_port}.", res.name)));
        }
        taken.push((name.to_owned(), protocol, front_port, frontend.clone()));
        rp.insert("protocol".into(), json!(protocol));
        rp.insert("frontendPort".into(), json!(front_port));
        rp.insert("backendPort".into(), json!(back_port));
        rp.insert("idleTimeoutInMinutes".into(), json!(idle));
        rp.insert("loadDistribution".into(), json!(distribution));
        for key in ["enableFloatingIP", "enableTcpReset", "disableOutboundSnat"] {
            match rp.get(key) {
                None | Some(Value::Null) => {
                    rp.insert(key.into(), json!(false));
                }
                Some(Value::Bool(_)) => {}
                Some(_) => {
                    return Err(invalid(
                        "InvalidRequestFormat",
                        format!("{at}.{key} must be true or false."),
                    ))
                }
            }
        }
        rp.remove("provisioningState");
        cleaned_rules.push(json!({"name": name, "properties": rp}));
    }
    let props = &mut want.properties;
    props.insert(
        "frontendIPConfigurations".into(),
        Value::Array(cleaned_frontends),
    );
    props.insert("backendAddressPools".into(), Value::Array(cleaned_pools));
    props.insert("probes".into(), Value::Array(cleaned_probes));
    props.insert("loadBalancingRules".into(), Value::Array(cleaned_rules));
    for key in [
        "inboundNatRules",
        "inboundNatPools",
        "outboundRules",
        "resourceGuid",
        "provisioningState",
    ] {
        props.remove(key);
    }
    // A pool that goes must not still be named by a NIC.
    if let Some(old) = existing {
        for c in old.properties["backendAddressPools"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(n) = c["name"].as_str() else {
                continue;
            };
            if !named(&pools, n) {
                let pool_id = format!("{lb_id}/backendAddressPools/{n}");
                if let Some(user) = pool_members(tx, s, &pool_id).first() {
                    return Err(invalid(
                        "InUseBackendAddressPoolCannotBeDeleted",
                        format!(
                            "Backend address pool {n} of load balancer {} is in use by {}.",
                            res.name, user.id
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Who uses a public IP: a NIC's IP configuration or a load balancer's frontend (IDs).
pub(super) fn public_ip_user(r: &impl Read, s: &Scope<'_>, pip: &ArmResource) -> Option<String> {
    let id = s.id(pip);
    for lb in ArmResource::list_where(r, "type", Kind::LoadBalancer.ty())
        .into_iter()
        .filter(|l| l.meta.project_id == s.project_id)
    {
        for f in lb.properties["frontendIPConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if f["properties"]["publicIPAddress"]["id"]
                .as_str()
                .is_some_and(|x| x.eq_ignore_ascii_case(&id))
            {
                return Some(s.child_id(
                    &lb,
                    "frontendIPConfigurations",
                    f["name"].as_str().unwrap_or_default(),
                ));
            }
        }
    }
    for nic in nics_referring(r, s, "publicIPAddress", &id) {
        for c in nic.properties["ipConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if c["properties"]["publicIPAddress"]["id"]
                .as_str()
                .is_some_and(|x| x.eq_ignore_ascii_case(&id))
            {
                return Some(s.child_id(
                    &nic,
                    "ipConfigurations",
                    c["name"].as_str().unwrap_or_default(),
                ));
            }
        }
    }
    None
}

/// A NIC IP configuration in a backend pool: its ID, its address and its NIC.
pub(super) struct PoolMember {
    pub id: String,
    pub address: String,
    pub nic: ArmResource,
}

/// The NICs' IP configurations that name backend pool `pool_id`.
pub(super) fn pool_members(r: &impl Read, s: &Scope<'_>, pool_id: &str) -> Vec<PoolMember> {
    let mut out = Vec::new();
    for nic in ArmResource::list_where(r, "type", Kind::NetworkInterface.ty())
        .into_iter()
        .filter(|n| n.meta.project_id == s.project_id)
    {
        for c in nic.properties["ipConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let in_pool = c["properties"]["loadBalancerBackendAddressPools"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| {
                    p["id"]
                        .as_str()
                        .is_some_and(|x| x.eq_ignore_ascii_case(pool_id))
                });
            let name = c["name"].as_str().unwrap_or_default();
            if let (true, Some(address)) = (in_pool, nic.children.get(&name.to_lowercase())) {
                out.push(PoolMember {
                    id: s.child_id(&nic, "ipConfigurations", name),
                    address: address.clone(),
                    nic: nic.clone(),
                });
            }
        }
    }
    out
}

pub(super) fn lb_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = props(res);
    let rules: Vec<Value> = p
        .get("loadBalancingRules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let rule_ids = |key: &str, id: &str| -> Vec<Value> {
        rules
            .iter()
            .filter(|r| {
                r["properties"][key]["id"]
                    .as_str()
                    .is_some_and(|x| x.eq_ignore_ascii_case(id))
            })
            .map(|r| {
                id_ref(s.child_id(
                    res,
                    "loadBalancingRules",
                    r["name"].as_str().unwrap_or_default(),
                ))
            })
            .collect()
    };
    let mut shown = |collection: &str, extra: &dyn Fn(&str, &mut Map<String, Value>)| {
        show_children(&mut p, s, res, collection, extra);
    };
    shown("frontendIPConfigurations", &|name, cp| {
        let id = s.child_id(res, "frontendIPConfigurations", name);
        let used = rule_ids("frontendIPConfiguration", &id);
        if !used.is_empty() {
            cp.insert("loadBalancingRules".into(), Value::Array(used));
        }
        if cp.contains_key("subnet") {
            if let Some(vip) = super::lb_traffic::frontend_vip(r, res, name) {
                cp.insert("privateIPAddress".into(), json!(vip));
            }
            cp.insert("privateIPAddressVersion".into(), json!("IPv4"));
        }
    });
    shown("backendAddressPools", &|name, cp| {
        let id = s.child_id(res, "backendAddressPools", name);
        let members: Vec<Value> = pool_members(r, s, &id)
            .into_iter()
            .map(|m| id_ref(m.id))
            .collect();
        if !members.is_empty() {
            cp.insert("backendIPConfigurations".into(), Value::Array(members));
        }
        let used = rule_ids("backendAddressPool", &id);
        if !used.is_empty() {
            cp.insert("loadBalancingRules".into(), Value::Array(used));
        }
    });
    shown("probes", &|name, cp| {
        let used = rule_ids("probe", &s.child_id(res, "probes", name));
        if !used.is_empty() {
            cp.insert("loadBalancingRules".into(), Value::Array(used));
        }
    });
    shown("loadBalancingRules", &|_, _| {});
    p.insert("resourceGuid".into(), json!(res.meta.id));
    for key in ["inboundNatRules", "inboundNatPools", "outboundRules"] {
        p.insert(key.into(), json!([]));
    }
    Value::Object(p)
}

/// The Octavia monitor type of an Azure probe protocol.
pub(super) fn monitor_kind(protocol: &str) -> &'static str {
    PROBES
        .iter()
        .find(|(a, _)| *a == protocol)
        .map_or("TCP", |(_, o)| o)
}

pub(super) fn remove_lb(tx: &mut Tx<'_>, s: &Scope<'_>, res: &ArmResource) -> Result<(), ApiError> {
    let id = s.id(res);
    for c in res.properties["backendAddressPools"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let n = c["name"].as_str().unwrap_or_default();
        if let Some(user) = pool_members(tx, s, &format!("{id}/backendAddressPools/{n}")).first() {
            return Err(invalid("InUseBackendAddressPoolCannotBeDeleted", format!("Backend address pool {n} of load balancer {} is in use by {}; take it out of the NIC's IP configuration first.", res.name, user.id)));
        }
    }
    super::lb_traffic::remove_traffic(tx, res)
}
