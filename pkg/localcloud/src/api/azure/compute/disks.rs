//! Managed disks (see [`super`]).

use super::*;

// ---- disks ---------------------------------------------------------------------------------

/// The availability zone of Azure zone `z` (`"1"` is the cloud's first).
pub(super) fn zone_of(
    r: &impl Read,
    zones: &[String],
    what: &str,
) -> Result<Option<String>, ApiError> {
    match zones {
        [] => Ok(None),
        [z] => {
            let known = known_zones(r);
            z.parse::<usize>()
                .ok()
                .filter(|n| (1..=known.len()).contains(n))
                .map(|n| Some(known[n - 1].clone()))
                .ok_or_else(|| {
                    invalid(
                        "InvalidParameter",
                        format!("The requested zone '{z}' of {what} is not available in this location: zones 1 to {} are.", known.len()),
                    )
                })
        }
        _ => Err(invalid(
            "InvalidParameter",
            format!("{what} may name one zone, not {}.", zones.len()),
        )),
    }
}

pub(super) fn apply_disk(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &mut ArmResource,
    existing: Option<&ArmResource>,
    want: &mut Desired,
) -> Result<(), ApiError> {
    let sku = crate::api::azure::arm::sku_of(
        want,
        existing,
        "disk",
        DISK_SKUS,
        "Standard_LRS",
        ("InvalidParameter", None),
    )?;
    want.sku = Some(
        json!({"name": sku, "tier": if sku.starts_with("Premium") { "Premium" } else { "Standard" }}),
    );
    let zones = want.zones.clone().unwrap_or_default();
    if let Some(old) = existing {
        if old.zones != zones {
            return Err(change_not_allowed("zones"));
        }
    }
    let az = zone_of(tx, &zones, &format!("disk {}", res.name))?;
    res.zones = zones;
    let p = &mut want.properties;
    let creation = obj(p, "creationData", "properties.creationData")?
        .cloned()
        .unwrap_or_default();
    let option = string(
        &creation,
        "createOption",
        "properties.creationData.createOption",
    )?
    .unwrap_or("Empty");
    if !option.eq_ignore_ascii_case("Empty") {
        return Err(invalid("InvalidParameter", format!("The value '{option}' of properties.creationData.createOption is not available on the local cloud: only Empty disks are made here.")));
    }
    p.insert("creationData".into(), json!({"createOption": "Empty"}));
    let size = int(p, "diskSizeGB", "properties.diskSizeGB", 1..=32767)?;
    let volume = res
        .backing
        .as_ref()
        .and_then(|id| tx.get::<Volume>(VOLUMES, id));
    let size = match (size, &volume) {
        (None, None) => {
            return Err(invalid(
                "InvalidParameter",
                "Required parameter 'diskSizeGB' is missing (null).",
            ))
        }
        (None, Some(v)) => v.size as i64,
        (Some(n), _) => n,
    };
    p.insert("diskSizeGB".into(), json!(size));
    for k in [
        "diskState",
        "diskSizeBytes",
        "uniqueId",
        "timeCreated",
        "provisioningState",
    ] {
        p.remove(k);
    }
    let size = u64::try_from(size).unwrap_or(1);
    match volume {
        Some(mut v) => {
            if size < v.size {
                return Err(invalid("BadRequest", format!("Disk resizing is allowed only when creating a VM or changing disk size to a larger value: diskSizeGB {size} is smaller than {}.", v.size)));
            }
            if size != v.size {
                v.size = size;
                v.meta.touch();
                tx.put(VOLUMES, &v.meta.id.clone(), &v)?;
            }
        }
        None => {
            let v = Volume {
                meta: Meta::new(s.project_id),
                name: Some(res.name.clone()),
                description: Some(format!("Azure managed disk {}", s.id(res))),
                size,
                status: volume::AVAILABLE.into(),
                availability_zone: crate::api::zones::check_zone(tx, az)?,
                volume_type: volume::VOLUME_TYPE.into(),
                user_id: s.user_id.to_owned(),
                metadata: BTreeMap::new(),
                attachments: Vec::new(),
                multiattach: false,
            };
            tx.put(VOLUMES, &v.meta.id, &v)?;
            res.backing = Some(v.meta.id);
        }
    }
    Ok(())
}

pub(super) fn disk_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = res.properties.as_object().cloned().unwrap_or_default();
    let v = res
        .backing
        .as_ref()
        .and_then(|id| r.get::<Volume>(VOLUMES, id));
    let size = v.as_ref().map_or(0, |v| v.size);
    p.insert("diskSizeGB".into(), json!(size));
    p.insert("diskSizeBytes".into(), json!(size << 30));
    p.insert("uniqueId".into(), json!(res.meta.id));
    p.insert(
        "timeCreated".into(),
        json!(azure_time(&res.meta.created_at)),
    );
    let attached = v.as_ref().is_some_and(|v| !v.attachments.is_empty());
    p.insert(
        "diskState".into(),
        json!(if attached { "Attached" } else { "Unattached" }),
    );
    p.entry("encryption")
        .or_insert(json!({"type": "EncryptionAtRestWithPlatformKey"}));
    p.entry("networkAccessPolicy").or_insert(json!("AllowAll"));
    p.entry("publicNetworkAccess").or_insert(json!("Enabled"));
    let _ = s;
    Value::Object(p)
}

/// A disk's top-level `managedBy`: the VM it is attached to.
pub(crate) fn managed_by(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Option<String> {
    let v = res
        .backing
        .as_ref()
        .and_then(|id| r.get::<Volume>(VOLUMES, id))?;
    let a = v.attachments.first()?;
    vm_of_server(r, &a.server_id).map(|vm| s.id(&vm))
}
