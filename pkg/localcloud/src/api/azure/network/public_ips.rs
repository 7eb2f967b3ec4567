//! Public IP addresses (see [`super`]).

use super::*;

// ---- public IP addresses ------------------------------------------------------------------

pub(super) fn dns_label_ok(l: &str) -> bool {
    let b = l.as_bytes();
    (3..=63).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.last().is_some_and(|c| c.is_ascii_alphanumeric())
}

pub(super) fn apply_public_ip(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &mut ArmResource,
    existing: Option<&ArmResource>,
    want: &mut Desired,
) -> Result<(), ApiError> {
    let sku_name = crate::api::azure::arm::sku_of(
        want,
        existing,
        "public IP address",
        &["Basic", "Standard"],
        "Basic",
        (
            "InvalidRequestFormat",
            Some("PublicIPAddressSkuCannotBeChanged"),
        ),
    )?;
    want.sku = Some(json!({"name": sku_name, "tier": "Regional"}));
    let p = &mut want.properties;
    let method = string(
        p,
        "publicIPAllocationMethod",
        "properties.publicIPAllocationMethod",
    )?
    .unwrap_or(if sku_name == "Standard" {
        "Static"
    } else {
        "Dynamic"
    })
    .to_owned();
    let method = match method.to_lowercase().as_str() {
        "static" => "Static",
        "dynamic" => "Dynamic",
        _ => {
            return Err(invalid(
                "InvalidRequestFormat",
                format!("publicIPAllocationMethod '{method}' is not one of Static, Dynamic."),
            ))
        }
    };
    if sku_name == "Standard" && method != "Static" {
        return Err(invalid(
            "StandardSkuPublicIPAddressesMustBeStatic",
            format!(
                "Standard sku publicIp {} must specify publicIPAllocationMethod as Static.",
                res.name
            ),
        ));
    }
    if let Some(v) = string(
        p,
        "publicIPAddressVersion",
        "properties.publicIPAddressVersion",
    )? {
        if !v.eq_ignore_ascii_case("IPv4") {
            return Err(invalid(
                "InvalidRequestFormat",
                format!(
                    "publicIPAddressVersion {v} is not available on the local cloud (IPv4 only)."
                ),
            ));
        }
    }
    let idle = int(
        p,
        "idleTimeoutInMinutes",
        "properties.idleTimeoutInMinutes",
        4..=30,
    )?
    .unwrap_or(4);
    p.insert("publicIPAllocationMethod".into(), json!(method));
    p.insert("publicIPAddressVersion".into(), json!("IPv4"));
    p.insert("idleTimeoutInMinutes".into(), json!(idle));
    for k in [
        "ipAddress",
        "ipConfiguration",
        "provisioningState",
        "resourceGuid",
    ] {
        p.remove(k);
    }
    if let Some(dns) = obj(p, "dnsSettings", "properties.dnsSettings")?.cloned() {
        if let Some(label) = string(
            &dns,
            "domainNameLabel",
            "properties.dnsSettings.domainNameLabel",
        )? {
            if !dns_label_ok(label) {
                return Err(invalid("InvalidDomainNameLabel", format!("The domain name label {label} is invalid. It must conform to the following regular expression: ^[a-z][a-z0-9-]{{1,61}}[a-z0-9]$.")));
            }
            let taken = ArmResource::list_where(tx, "type", Kind::PublicIp.ty())
                .into_iter()
                .any(|o| {
                    o.meta.id != res.meta.id
                        && o.properties["dnsSettings"]["domainNameLabel"].as_str() == Some(label)
                });
            if taken {
                return Err(invalid("DnsRecordInUse", format!("DNS record {label}.{}.cloudapp.azure.com is already used by another public IP.", s.location)));
            }
            let fqdn = format!("{label}.{}.cloudapp.azure.com", s.location);
            p.insert(
                "dnsSettings".into(),
                json!({"domainNameLabel": label, "fqdn": fqdn}),
            );
        }
    }
    if res.backing.is_none() {
        let external = external_network(tx)?;
        let fip = new_floating_ip(
            tx,
            FloatingIpSpec {
                network_id: external.meta.id,
                subnet_id: None,
                address: None,
                project_id: s.project_id.to_owned(),
                port_id: None,
                fixed_ip: None,
                description: PUBLIC_IP.into(),
            },
        )?;
        res.backing = Some(fip.meta.id);
    }
    Ok(())
}

pub(super) fn remove_public_ip(tx: &mut Tx<'_>, res: &ArmResource) -> Result<(), ApiError> {
    let Some(id) = &res.backing else {
        return Ok(());
    };
    if let Some(fip) = tx.get::<FloatingIp>(FLOATING_IPS, id) {
        if fip.port_id.is_some() {
            return Err(invalid(
                "PublicIPAddressInUse",
                format!("Public IP address {} can not be deleted since it is still allocated to a resource.", res.name),
            ));
        }
    }
    tx.delete(FLOATING_IPS, id);
    Ok(())
}

pub(super) fn public_ip_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = props(res);
    p.insert("resourceGuid".into(), json!(res.meta.id));
    let fip = res
        .backing
        .as_ref()
        .and_then(|id| r.get::<FloatingIp>(FLOATING_IPS, id));
    if let Some(f) = &fip {
        p.insert("ipAddress".into(), json!(f.floating_ip_address));
    }
    if let Some(user) = public_ip_user(r, s, res) {
        p.insert("ipConfiguration".into(), id_ref(user));
    }
    Value::Object(p)
}
