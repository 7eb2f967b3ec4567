//! Virtual machines (see [`super`]).

use super::*;

// ---- virtual machines ----------------------------------------------------------------------

/// A data disk the VM asks for.
pub(super) struct DataDisk {
    lun: i64,
    disk: ArmResource,
}

pub(super) fn apply_vm(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    res: &mut ArmResource,
    existing: Option<&ArmResource>,
    want: &mut Desired,
) -> Result<(), ApiError> {
    let vm_name = res.name.clone();
    let p = &mut want.properties;
    // Hardware.
    let hw = obj(p, "hardwareProfile", "properties.hardwareProfile")?
        .cloned()
        .unwrap_or_default();
    let size_name =
        string(&hw, "vmSize", "properties.hardwareProfile.vmSize")?.ok_or_else(|| {
            invalid(
                "InvalidParameter",
                "Required parameter 'hardwareProfile.vmSize' is missing (null).",
            )
        })?;
    let vm_size = size(size_name).ok_or_else(|| {
        invalid("InvalidParameter", format!("The value {size_name} provided for the VM size is not valid. The valid sizes in the current region are: {}. (target: vmSize)", SIZES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")))
    })?;
    p.insert("hardwareProfile".into(), json!({"vmSize": vm_size.name}));
    // Placement.
    let zones = want.zones.clone().unwrap_or_default();
    let set_id = ref_id(p, "availabilitySet").map(str::to_owned);
    if let Some(old) = existing {
        if old.zones != zones {
            return Err(change_not_allowed("zones"));
        }
        let old_set = old.properties["availabilitySet"]["id"]
            .as_str()
            .map(str::to_lowercase);
        if old_set != set_id.as_ref().map(|x| x.to_lowercase()) {
            return Err(change_not_allowed("availabilitySet.id"));
        }
    }
    if !zones.is_empty() && set_id.is_some() {
        return Err(invalid("InvalidParameter", "Virtual Machines deployed to an Availability Zone cannot be deployed to an Availability Set."));
    }
    if let Some(id) = &set_id {
        resolve(
            tx,
            s,
            id,
            Kind::AvailabilitySet,
            None,
            &format!("virtual machine {vm_name}"),
        )?;
    }
    let az = zone_of(tx, &zones, &format!("virtual machine {vm_name}"))?;
    res.zones = zones;
    // OS profile: the computer name is fixed once made; the password is never shown.
    let mut os = obj(p, "osProfile", "properties.osProfile")?
        .cloned()
        .unwrap_or_default();
    let computer = string(&os, "computerName", "properties.osProfile.computerName")?
        .unwrap_or(&vm_name)
        .to_owned();
    if let Some(old) = existing {
        let had = old.properties["osProfile"]["computerName"]
            .as_str()
            .unwrap_or(&old.name);
        if !had.eq_ignore_ascii_case(&computer) {
            return Err(change_not_allowed("osProfile.computerName"));
        }
    }
    os.remove("adminPassword");
    os.insert("computerName".into(), json!(computer));
    os.entry("allowExtensionOperations").or_insert(json!(true));
    os.entry("requireGuestProvisionSignal")
        .or_insert(json!(true));
    os.entry("secrets").or_insert(json!([]));
    p.insert("osProfile".into(), Value::Object(os));
    // Network interfaces: each used by this VM only.
    let net = obj(p, "networkProfile", "properties.networkProfile")?
        .cloned()
        .unwrap_or_default();
    let nic_refs = list(
        &net,
        "networkInterfaces",
        "properties.networkProfile.networkInterfaces",
    )?
    .to_vec();
    if nic_refs.is_empty() {
        return Err(invalid("InvalidParameter", format!("Virtual machine {vm_name} must have at least one network interface (properties.networkProfile.networkInterfaces).")));
    }
    let server_id = res.backing.clone();
    let mut ports: Vec<Port> = Vec::new();
    for (i, n) in nic_refs.iter().enumerate() {
        let field = format!("properties.networkProfile.networkInterfaces[{i}]");
        let id = n["id"]
            .as_str()
            .ok_or_else(|| invalid("InvalidParameter", format!("{field}.id is required.")))?;
        let (nic, port) = nic_port(tx, s, id, &field)?;
        if !port.device_id.is_empty() && Some(&port.device_id) != server_id.as_ref() {
            let other = vm_of_server(tx, &port.device_id)
                .map_or_else(|| port.device_id.clone(), |v| s.id(&v));
            return Err(invalid("NicInUse", format!("Network Interface {} is used by existing resource {other}. In order to use it for VM {vm_name}, it must be dissociated from the resource.", s.id(&nic))));
        }
        ports.push(port);
    }
    if let Some(server) = server_id
        .as_ref()
        .and_then(|id| tx.get::<Server>(SERVERS, id))
    {
        let now: Vec<String> = compute::server_ports(tx, &server.meta.id)
            .into_iter()
            .map(|p| p.meta.id)
            .collect();
        let mut asked: Vec<String> = ports.iter().map(|p| p.meta.id.clone()).collect();
        let mut had = now.clone();
        asked.sort();
        had.sort();
        if asked != had {
            return Err(invalid("InvalidParameter", format!("Virtual machine {vm_name}: adding or removing network interfaces is not available on the local cloud; make a new VM.")));
        }
    }
    // Storage: the OS disk as Azure names it, data disks by LUN.
    let mut storage = obj(p, "storageProfile", "properties.storageProfile")?
        .cloned()
        .unwrap_or_default();
    let mut os_disk = obj(&storage, "osDisk", "properties.storageProfile.osDisk")?
        .cloned()
        .unwrap_or_default();
    let old_os_name = existing.and_then(|o| {
        o.properties["storageProfile"]["osDisk"]["name"]
            .as_str()
            .map(str::to_owned)
    });
    let os_name = old_os_name
        .unwrap_or_else(|| format!("{vm_name}_OsDisk_1_{}", res.meta.id.replace('-', "")));
    os_disk.insert("name".into(), json!(os_name));
    os_disk.entry("createOption").or_insert(json!("FromImage"));
    os_disk.entry("osType").or_insert(json!("Linux"));
    os_disk.entry("caching").or_insert(json!("ReadWrite"));
    os_disk.entry("deleteOption").or_insert(json!("Detach"));
    os_disk.entry("diskSizeGB").or_insert(json!(30));
    storage.insert("osDisk".into(), Value::Object(os_disk));
    let mut disks: Vec<DataDisk> = Vec::new();
    let mut shown = Vec::new();
    for (i, d) in list(&storage, "dataDisks", "properties.storageProfile.dataDisks")?
        .to_vec()
        .into_iter()
        .enumerate()
    {
        let field = format!("properties.storageProfile.dataDisks[{i}]");
        let Value::Object(mut d) = d else {
            return Err(invalid(
                "InvalidParameter",
                format!("{field} must be an object."),
            ));
        };
        let lun = int(&d, "lun", &format!("{field}.lun"), 0..=63)?.ok_or_else(|| {
            invalid(
                "InvalidParameter",
                format!("Required parameter '{field}.lun' is missing (null)."),
            )
        })?;
        if disks.iter().any(|x| x.lun == lun) {
            return Err(invalid("InvalidParameter", format!("Two data disks of virtual machine {vm_name} have LUN {lun}; LUNs must be unique.")));
        }
        let option = string(&d, "createOption", &format!("{field}.createOption"))?
            .unwrap_or("Attach")
            .to_owned();
        let disk = if option.eq_ignore_ascii_case("Attach") {
            let id = d
                .get("managedDisk")
                .and_then(|m| m["id"].as_str())
                .ok_or_else(|| {
                    invalid(
                        "InvalidParameter",
                        format!("{field}.managedDisk.id is required to attach a disk."),
                    )
                })?;
            resolve(tx, s, id, Kind::Disk, None, &field)?.resource
        } else if option.eq_ignore_ascii_case("Empty") {
            // An empty disk made for the VM, in its group, found again on the next PUT by name.
            let name = string(&d, "name", &format!("{field}.name"))?.map_or_else(
                || format!("{vm_name}_disk{lun}_{}", &res.meta.id.replace('-', "")[..8]),
                str::to_owned,
            );
            let key = resource_key(s.project_id, &res.group, Kind::Disk.ty(), &name);
            match ArmResource::get(tx, &key) {
                Some(made) => made,
                None => {
                    let size = int(&d, "diskSizeGB", &format!("{field}.diskSizeGB"), 1..=32767)?
                        .ok_or_else(|| {
                            invalid(
                                "InvalidParameter",
                                format!(
                                    "Required parameter '{field}.diskSizeGB' is missing (null)."
                                ),
                            )
                        })?;
                    new_disk(tx, s, &res.group, &name, size, &res.zones)?
                }
            }
        } else {
            return Err(invalid("InvalidParameter", format!("The value '{option}' of {field}.createOption is not available on the local cloud (Attach, Empty).")));
        };
        d.insert("createOption".into(), json!("Attach"));
        d.insert("name".into(), json!(disk.name));
        let mut md = d
            .get("managedDisk")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        md.insert("id".into(), json!(s.id(&disk)));
        md.entry("storageAccountType").or_insert(
            disk.sku
                .as_ref()
                .map_or(json!("Standard_LRS"), |k| k["name"].clone()),
        );
        d.insert("managedDisk".into(), Value::Object(md));
        d.entry("caching").or_insert(json!("None"));
        d.entry("deleteOption").or_insert(json!("Detach"));
        d.entry("toBeDetached").or_insert(json!(false));
        d.remove("diskSizeGB");
        shown.push(Value::Object(d));
        disks.push(DataDisk { lun, disk });
    }
    if disks.len() > vm_size.max_data_disks as usize {
        return Err(not_allowed(format!(
            "The maximum number of data disks allowed to be attached to a VM of size {} is {}.",
            vm_size.name, vm_size.max_data_disks
        )));
    }
    storage.insert("dataDisks".into(), Value::Array(shown));
    p.insert("storageProfile".into(), Value::Object(storage));
    for k in ["vmId", "timeCreated", "instanceView", "provisioningState"] {
        p.remove(k);
    }
    // The server.
    let server_id = match server_id {
        Some(id) => {
            let mut server = compute::find_server(tx, &id)?;
            let flavor = find_flavor(flavor_of(vm_size))
                .map(|f| f.id.to_owned())
                .unwrap_or_default();
            if server.flavor_id != flavor {
                if server.status == compute::ACTIVE {
                    return Err(not_allowed(format!("The VM size of {vm_name} can be changed on the local cloud only while it is stopped or deallocated.")));
                }
                server.flavor_id = flavor;
                server.meta.touch();
                tx.put(SERVERS, &id, &server)?;
            }
            id
        }
        None => {
            let flavor = find_flavor(flavor_of(vm_size))
                .ok_or_else(|| ApiError::internal("the local cloud has lost its flavors"))?;
            let server = Server {
                meta: Meta::new(s.project_id),
                name: computer,
                status: compute::ACTIVE.into(),
                flavor_id: flavor.id.into(),
                image_id: String::new(),
                availability_zone: crate::api::zones::check_zone(tx, az)?,
                user_id: s.user_id.to_owned(),
                metadata: BTreeMap::new(),
                key_name: None,
                description: Some(format!("Azure virtual machine {}", s.id(res))),
                index: compute::next_index(tx)?,
                tags: Vec::new(),
            };
            let nics = ports
                .iter()
                .map(|p| (None, Some(p.meta.id.clone()), None))
                .collect();
            add_server(tx, &server, nics, &s.cloud.config.config_drive_dir())?;
            server.meta.id
        }
    };
    res.backing = Some(server_id.clone());
    // Data disks: attach the new, detach the gone.
    let attached = attached_to(tx, &server_id);
    for v in &attached {
        if !disks
            .iter()
            .any(|d| d.disk.backing.as_deref() == Some(v.meta.id.as_str()))
        {
            volume::begin_detach(tx, &v.meta.id, &server_id)?;
            volume::finish(tx, &v.meta.id)?;
        }
    }
    for d in &disks {
        let Some(vid) = &d.disk.backing else { continue };
        if attached.iter().any(|v| &v.meta.id == vid) {
            continue;
        }
        let v = volume::find_volume(tx, vid)?;
        if let Some(a) = v.attachments.first() {
            let other =
                vm_of_server(tx, &a.server_id).map_or_else(|| a.server_id.clone(), |o| o.name);
            return Err(not_allowed(format!(
                "Disk {} is already attached to VM {other}.",
                d.disk.name
            )));
        }
        volume::attach(
            tx,
            vid,
            &server_id,
            volume::AttachOptions {
                device_name: Some(format!("lun{}", d.lun)),
                ..Default::default()
            },
        )?;
        volume::finish(tx, vid)?;
    }
    Ok(())
}

/// A new empty managed disk of `size` GB in `group`.
pub(super) fn new_disk(
    tx: &mut Tx<'_>,
    s: &Scope<'_>,
    group: &str,
    name: &str,
    size: i64,
    zones: &[String],
) -> Result<ArmResource, ApiError> {
    let mut disk = ArmResource {
        meta: Meta::new(s.project_id),
        group: group.to_owned(),
        kind: Kind::Disk.ty().into(),
        name: name.to_owned(),
        scope: resource_scope(s.project_id, group, Kind::Disk.ty()),
        location: s.location.clone(),
        tags: BTreeMap::new(),
        etag: crate::api::azure::arm::new_etag(),
        sku: None,
        zones: zones.to_vec(),
        backing: None,
        children: BTreeMap::new(),
        status: None,
        properties: json!({}),
    };
    let mut want = Desired {
        location: Some(s.location.clone()),
        zones: Some(zones.to_vec()),
        properties: json!({"creationData": {"createOption": "Empty"}, "diskSizeGB": size})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        ..Default::default()
    };
    apply_disk(tx, s, &mut disk, None, &mut want)?;
    disk.sku = want.sku;
    disk.properties = Value::Object(want.properties);
    disk.put(tx)?;
    Ok(disk)
}

pub(super) fn remove_vm(tx: &mut Tx<'_>, s: &Scope<'_>, res: &ArmResource) -> Result<(), ApiError> {
    let Some(server_id) = &res.backing else {
        return Ok(());
    };
    if tx.get::<Server>(SERVERS, server_id).is_none() {
        return Ok(());
    }
    // The NICs stay (their ports are no longer the server's); disks are detached, and those
    // whose deleteOption is Delete go.
    for mut port in compute::server_ports(tx, server_id) {
        port.device_id.clear();
        port.device_owner.clear();
        port.touch();
        tx.put(PORTS, &port.meta.id.clone(), &port)?;
    }
    let mut doomed = Vec::new();
    for d in res.properties["storageProfile"]["dataDisks"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let delete = d["deleteOption"]
            .as_str()
            .is_some_and(|o| o.eq_ignore_ascii_case("Delete"));
        if let (true, Some(id)) = (delete, d["managedDisk"]["id"].as_str()) {
            if let Ok(r) = resolve(tx, s, id, Kind::Disk, None, "dataDisks") {
                doomed.push(r.resource);
            }
        }
    }
    remove_server(tx, server_id, &s.cloud.config.config_drive_dir())?;
    for disk in doomed {
        if let Some(v) = &disk.backing {
            tx.delete(VOLUMES, v);
        }
        ArmResource::delete(tx, &disk.key());
    }
    Ok(())
}

pub(super) fn vm_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let mut p = res.properties.as_object().cloned().unwrap_or_default();
    p.insert("vmId".into(), json!(res.meta.id));
    p.insert(
        "timeCreated".into(),
        json!(azure_time(&res.meta.created_at)),
    );
    if let Some(disks) = p
        .get_mut("storageProfile")
        .and_then(|v| v.get_mut("dataDisks"))
        .and_then(Value::as_array_mut)
    {
        for d in disks {
            let size = d["managedDisk"]["id"]
                .as_str()
                .and_then(|id| resolve(r, s, id, Kind::Disk, None, "dataDisks").ok())
                .and_then(|disk| disk.resource.backing)
                .and_then(|v| r.get::<Volume>(VOLUMES, &v))
                .map(|v| v.size);
            if let Some(size) = size {
                d["diskSizeGB"] = json!(size);
            }
        }
    }
    Value::Object(p)
}

/// The VM's power state as Azure names it.
pub(super) fn power_state(r: &impl Read, res: &ArmResource) -> &'static str {
    let server = res
        .backing
        .as_ref()
        .and_then(|id| r.get::<Server>(SERVERS, id));
    match server.map(|s| s.status) {
        Some(st) if st == compute::ACTIVE => "running",
        Some(_) if res.status.as_deref() == Some("deallocated") => "deallocated",
        Some(_) => "stopped",
        None => "unknown",
    }
}

/// `instanceView`: the computer name, provisioning and power states, the fault and update
/// domain in an availability set, and the disks.
pub(crate) fn instance_view(r: &impl Read, s: &Scope<'_>, res: &ArmResource) -> Value {
    let power = power_state(r, res);
    let display = match power {
        "running" => "VM running",
        "deallocated" => "VM deallocated",
        "stopped" => "VM stopped",
        _ => "VM status unknown",
    };
    let mut v = json!({
        "computerName": res.properties["osProfile"]["computerName"],
        "osName": "ubuntu", "osVersion": "22.04",
        "hyperVGeneration": "V1",
        "statuses": [
            {"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded", "time": azure_time(&res.meta.updated_at)},
            {"code": format!("PowerState/{power}"), "level": "Info", "displayStatus": display},
        ],
    });
    if let Some(set_id) = res.properties["availabilitySet"]["id"].as_str() {
        if let Ok(set) = resolve(r, s, set_id, Kind::AvailabilitySet, None, "availabilitySet") {
            let faults = set.resource.properties["platformFaultDomainCount"]
                .as_u64()
                .unwrap_or(2)
                .max(1);
            let updates = set.resource.properties["platformUpdateDomainCount"]
                .as_u64()
                .unwrap_or(5)
                .max(1);
            let members = set_members(r, s, &set.resource);
            let place = crate::model::azure::place_in_set(r, res, &members);
            v["platformFaultDomain"] = json!(place % faults);
            v["platformUpdateDomain"] = json!(place % updates);
        }
    }
    let disks: Vec<Value> = std::iter::once(res.properties["storageProfile"]["osDisk"]["name"].clone())
        .chain(res.properties["storageProfile"]["dataDisks"].as_array().into_iter().flatten().map(|d| d["name"].clone()))
        .map(|name| json!({"name": name, "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded"}]}))
        .collect();
    v["disks"] = Value::Array(disks);
    v
}

/// A POST action on a VM: `powerOff`, `deallocate`, `start`, `restart`.
pub(crate) fn action(
    tx: &mut Tx<'_>,
    _s: &Scope<'_>,
    res: &mut ArmResource,
    what: &str,
) -> Result<(), ApiError> {
    let server_id = res.backing.clone().unwrap_or_default();
    let mut server = compute::find_server(tx, &server_id)?;
    let power = power_state(tx, res);
    match what.to_ascii_lowercase().as_str() {
        "poweroff" => {
            server.status = compute::SHUTOFF.into();
            if power != "deallocated" {
                res.status = None;
            }
        }
        "deallocate" => {
            server.status = compute::SHUTOFF.into();
            res.status = Some("deallocated".into());
        }
        "start" => {
            server.status = compute::ACTIVE.into();
            res.status = None;
        }
        "restart" => {
            if power != "running" {
                return Err(not_allowed(format!("Operation 'restart' is not allowed on VM '{}' since the VM is {power}.", res.name)));
            }
        }
        other => {
            return Err(ApiError::not_found(
                "InvalidResourceType",
                format!("The action '{other}' of virtual machines is not available on the local cloud (powerOff, deallocate, start, restart)."),
            ))
        }
    }
    server.meta.touch();
    tx.put(SERVERS, &server_id, &server)?;
    Ok(())
}
