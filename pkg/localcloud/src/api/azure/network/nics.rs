//! Network interfaces (see [`super`]).

use super::*;

// ---- network interfaces --------------------------------------------------------------------

/// What one IP configuration asks for.
pub(super) struct Config {
    name: String,
    subnet_id: String,
    network_id: String,
    address: Option<String>,
    public_ip: Option<ArmResource>,
}

pub(super) fn apply_nic(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &mut ArmResource,
    want: &mut Desired,
) -> Result<(), ApiError> {
    let configs = children_of(&want.properties, "ipConfigurations")?;
    if configs.is_empty() {
        return Err(invalid(
            "InvalidRequestFormat",
            format!(
                "Network interface {} must have at least one IP configuration.",
                res.name
            ),
        ));
    }
    if let Some(id) = ref_id(&want.properties, "networkSecurityGroup") {
        resolve(
            tx,
            s,
            id,
            Kind::SecurityGroup,
            None,
            &format!("network interface {}", res.name),
        )?;
    }
    let mut wanted: Vec<Config> = Vec::new();
    let mut cleaned = Vec::new();
    let primaries = configs
        .iter()
        .filter(|(_, p)| p.get("primary").and_then(Value::as_bool) == Some(true))
        .count();
    if primaries > 1 {
        return Err(invalid(
            "OnlyOnePrimaryIpConfigurationAllowed",
            format!(
                "Network interface {} has more than one primary IP configuration.",
                res.name
            ),
        ));
    }
    for (i, (name, mut p)) in configs.into_iter().enumerate() {
        let at = format!("network interface {} ipConfigurations[{name}]", res.name);
        let subnet_ref = ref_id(&p, "subnet").ok_or_else(|| {
            invalid(
                "InvalidRequestFormat",
                format!("Cannot parse the request: {at}.subnet is required."),
            )
        })?;
        let vnet = resolve(
            tx,
            s,
            subnet_ref,
            Kind::VirtualNetwork,
            Some("subnets"),
            &at,
        )?;
        let subnet_id = vnet
            .child
            .as_ref()
            .and_then(|c| vnet.resource.children.get(&c.to_lowercase()))
            .cloned()
            .unwrap_or_default();
        let network_id = vnet.resource.backing.clone().unwrap_or_default();
        if wanted.first().is_some_and(|w| w.network_id != network_id) {
            return Err(invalid("IpConfigurationsOfNicMustBelongToSameVnet", format!("The IP configurations of network interface {} are in different virtual networks.", res.name)));
        }
        let method = string(&p, "privateIPAllocationMethod", "privateIPAllocationMethod")?
            .unwrap_or("Dynamic");
        let method = if method.eq_ignore_ascii_case("static") {
            "Static"
        } else if method.eq_ignore_ascii_case("dynamic") {
            "Dynamic"
        } else {
            return Err(invalid(
                "InvalidRequestFormat",
                format!("{at}.privateIPAllocationMethod '{method}' is not one of Static, Dynamic."),
            ));
        };
        let address = match method {
            "Static" => Some(
                string(&p, "privateIPAddress", "privateIPAddress")?
                    .ok_or_else(|| {
                        invalid(
                            "PrivateIPAddressIsRequired",
                            format!("{at} is Static but names no privateIPAddress."),
                        )
                    })?
                    .to_owned(),
            ),
            _ => None,
        };
        let public_ip = ref_id(&p, "publicIPAddress")
            .map(|id| resolve(tx, s, id, Kind::PublicIp, None, &at))
            .transpose()?
            .map(|r| r.resource);
        if !list(
            &p,
            "loadBalancerInboundNatRules",
            "loadBalancerInboundNatRules",
        )?
        .is_empty()
        {
            return Err(invalid("InvalidRequestFormat", format!("{at}: loadBalancerInboundNatRules are not available on the local cloud (load balancers here have load-balancing rules only).")));
        }
        for (j, pool) in list(
            &p,
            "loadBalancerBackendAddressPools",
            "loadBalancerBackendAddressPools",
        )?
        .iter()
        .enumerate()
        {
            let id = pool["id"].as_str().ok_or_else(|| invalid("InvalidRequestFormat", format!("Cannot parse the request: {at}.loadBalancerBackendAddressPools[{j}].id is required.")))?;
            resolve(
                tx,
                s,
                id,
                Kind::LoadBalancer,
                Some("backendAddressPools"),
                &at,
            )?;
        }
        p.insert("privateIPAllocationMethod".into(), json!(method));
        p.insert(
            "primary".into(),
            json!(if primaries == 0 {
                i == 0
            } else {
                p.get("primary").and_then(Value::as_bool) == Some(true)
            }),
        );
        for k in ["provisioningState", "privateIPAddressVersion"] {
            p.remove(k);
        }
        if method == "Dynamic" {
            p.remove("privateIPAddress");
        }
        cleaned.push(json!({"name": name, "properties": p}));
        wanted.push(Config {
            name: name.to_owned(),
            subnet_id,
            network_id,
            address,
            public_ip,
        });
    }
    want.properties
        .insert("ipConfigurations".into(), Value::Array(cleaned));
    for k in [
        "macAddress",
        "virtualMachine",
        "provisioningState",
        "resourceGuid",
    ] {
        want.properties.remove(k);
    }
    let port = match res
        .backing
        .as_ref()
        .and_then(|id| tx.get::<Port>(PORTS, id))
    {
        Some(mut port) => {
            // The addresses stay as they are unless a configuration asks for a change.
            let same = wanted.len() == res.children.len()
                && wanted.iter().zip(port.fixed_ips.iter()).all(|(w, f)| {
                    w.subnet_id == f.subnet_id
                        && res.children.get(&w.name.to_lowercase()) == Some(&f.ip_address)
                        && w.address.as_ref().is_none_or(|a| *a == f.ip_address)
                });
            if !same {
                return Err(invalid("InvalidRequestFormat", format!("Network interface {}: changing the subnets or private addresses of its IP configurations is not available on the local cloud; make a new network interface.", res.name)));
            }
            port.touch();
            tx.put(PORTS, &port.meta.id.clone(), &port)?;
            port
        }
        None => create_port(
            tx,
            PortSpec {
                network_id: wanted[0].network_id.clone(),
                name: res.name.clone(),
                fixed_ips: wanted
                    .iter()
                    .map(|w| (Some(w.subnet_id.clone()), w.address.clone()))
                    .collect(),
                device_id: String::new(),
                device_owner: String::new(),
                project_id: s.project_id.to_owned(),
            },
        )
        .map_err(|e| {
            invalid(
                if e.kind == "IpAddressAlreadyAllocated" {
                    "PrivateIPAddressInUse"
                } else {
                    "InvalidRequestFormat"
                },
                e.message,
            )
        })?,
    };
    res.children = wanted
        .iter()
        .zip(port.fixed_ips.iter())
        .map(|(w, f)| (w.name.to_lowercase(), f.ip_address.clone()))
        .collect();
    // Public IPs: the wanted ones point at this port's addresses, the others no longer do.
    for mut fip in tx.list::<FloatingIp>(FLOATING_IPS) {
        if fip.port_id.as_deref() == Some(port.meta.id.as_str())
            && !wanted.iter().any(|w| {
                w.public_ip.as_ref().and_then(|p| p.backing.as_deref())
                    == Some(fip.meta.id.as_str())
            })
        {
            associate(tx, &mut fip, None, None)?;
            fip.touch();
            tx.put(FLOATING_IPS, &fip.meta.id.clone(), &fip)?;
        }
    }
    for w in &wanted {
        let Some(pip) = &w.public_ip else { continue };
        let Some(mut fip) = pip
            .backing
            .as_ref()
            .and_then(|id| tx.get::<FloatingIp>(FLOATING_IPS, id))
        else {
            continue;
        };
        let address = res.children.get(&w.name.to_lowercase()).cloned();
        if fip.port_id.as_deref() == Some(port.meta.id.as_str()) && fip.fixed_ip_address == address
        {
            continue;
        }
        if fip.port_id.is_some() {
            return Err(invalid(
                "PublicIPAddressInUse",
                format!(
                    "Public IP address {} is already used by another IP configuration.",
                    pip.name
                ),
            ));
        }
        associate(tx, &mut fip, Some(port.meta.id.clone()), address)?;
        fip.touch();
        tx.put(FLOATING_IPS, &fip.meta.id.clone(), &fip)?;
    }
    res.backing = Some(port.meta.id);
    Ok(())
}

pub(super) fn remove_nic(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &ArmResource,
) -> Result<(), ApiError> {
    let Some(port) = res
        .backing
        .as_ref()
        .and_then(|id| tx.get::<Port>(PORTS, id))
    else {
        return Ok(());
    };
    if !port.device_id.is_empty() {
        let vm = vm_of(tx, s, &port.device_id).unwrap_or_else(|| port.device_id.clone());
        return Err(invalid("NicInUse", format!("Network Interface {} is used by existing resource {vm}. In order to delete the network interface, it must be dissociated from the resource.", s.id(res))));
    }
    delete_port_cascade(tx, &port.meta.id)
}

/// A MAC address as Azure writes it (`00-0D-3A-12-34-56`).
pub(super) fn azure_mac(mac: &str) -> String {
    mac.to_uppercase().replace(':', "-")
}

pub(super) fn nic_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = props(res);
    let port = res.backing.as_ref().and_then(|id| r.get::<Port>(PORTS, id));
    show_children(&mut p, s, res, "ipConfigurations", |name, cp| {
        if let Some(ip) = res.children.get(&name.to_lowercase()) {
            cp.insert("privateIPAddress".into(), json!(ip));
        }
        cp.insert("privateIPAddressVersion".into(), json!("IPv4"));
    });
    // IP configurations carry their NIC's etag.
    for c in p
        .get_mut("ipConfigurations")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        c["etag"] = json!(res.etag);
    }
    p.insert("resourceGuid".into(), json!(res.meta.id));
    p.entry("enableIPForwarding").or_insert(json!(false));
    p.entry("enableAcceleratedNetworking")
        .or_insert(json!(false));
    p.entry("nicType").or_insert(json!("Standard"));
    p.entry("dnsSettings")
        .or_insert(json!({"dnsServers": [], "appliedDnsServers": []}));
    if let Some(port) = &port {
        p.insert("macAddress".into(), json!(azure_mac(&port.mac_address)));
        if let Some(vm) = (!port.device_id.is_empty())
            .then(|| vm_of(r, s, &port.device_id))
            .flatten()
        {
            p.insert("virtualMachine".into(), id_ref(vm));
            p.insert(
                "primary".into(),
                json!(is_primary_nic(r, &port.device_id, &s.id(res))),
            );
        }
    }
    Value::Object(p)
}
