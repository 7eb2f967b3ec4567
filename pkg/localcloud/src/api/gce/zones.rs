//! Zones (the availability zones), the one region (the cloud's) and machine types (the
//! flavors), read-only as on GCE.

use super::*;
use crate::defaults::FLAVORS;

pub(super) fn routes(p: &str) -> Router<Arc<Cloud>> {
    Router::new()
        .route(&format!("{p}/zones"), get(list_zones))
        .route(&format!("{p}/zones/{{zone}}"), get(get_zone))
        .route(&format!("{p}/regions"), get(list_regions))
        .route(&format!("{p}/regions/{{region}}"), get(get_region))
        .route(
            &format!("{p}/zones/{{zone}}/machineTypes"),
            get(list_machine_types),
        )
        .route(
            &format!("{p}/zones/{{zone}}/machineTypes/{{name}}"),
            get(get_machine_type),
        )
}

fn zone_view(s: &Scope<'_>, zone: &str) -> Value {
    json!({
        "kind": "compute#zone", "id": m::numeric_id(zone).to_string(), "name": zone, "description": zone,
        "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"), "status": "UP",
        "region": s.link(&format!("regions/{}", s.region())), "selfLink": s.link(&format!("zones/{zone}")),
        "availableCpuPlatforms": ["Intel Broadwell"], "supportsPzs": false,
    })
}

async fn list_zones(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    read(&cloud, &p, |r, s| {
        let items = zones(r).iter().map(|z| zone_view(s, z)).collect();
        s.list_reply("compute#zoneList", "zones", items, &q)
    })
}

async fn get_zone(State(cloud): Ctx, Path(p): Params_) -> Reply {
    read_zonal(&cloud, &p, |_, s, zone| ok(zone_view(s, zone)))
}

fn region_view(s: &Scope<'_>, r: &impl Read) -> Value {
    let region = s.region();
    let zones: Vec<String> = zones(r)
        .iter()
        .map(|z| s.link(&format!("zones/{z}")))
        .collect();
    json!({
        "kind": "compute#region", "id": m::numeric_id(region).to_string(), "name": region, "description": region,
        "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"), "status": "UP", "zones": zones,
        "quotas": [], "selfLink": s.link(&format!("regions/{region}")), "supportsPzs": false,
    })
}

async fn list_regions(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    read(&cloud, &p, |r, s| {
        s.list_reply("compute#regionList", "regions", vec![region_view(s, r)], &q)
    })
}

async fn get_region(State(cloud): Ctx, Path(p): Params_) -> Reply {
    read(&cloud, &p, |r, s| {
        check_region(&cloud, s.project, param(&p, "region"))?;
        ok(region_view(s, r))
    })
}

fn machine_type_view(s: &Scope<'_>, zone: &str, f: &crate::defaults::Flavor) -> Value {
    json!({
        "kind": "compute#machineType", "id": m::numeric_id(f.name).to_string(), "name": f.name,
        "description": format!("{} vCPU, {} MB RAM", f.vcpus, f.ram_mb),
        "creationTimestamp": m::timestamp("2013-07-23T11:33:21Z"),
        "guestCpus": f.vcpus, "memoryMb": f.ram_mb, "imageSpaceGb": 0, "maximumPersistentDisks": 16,
        "maximumPersistentDisksSizeGb": "65536", "zone": zone, "isSharedCpu": false,
        "selfLink": s.link(&format!("zones/{zone}/machineTypes/{}", f.name)),
    })
}

async fn list_machine_types(State(cloud): Ctx, Path(p): Params_, Query(q): ListQuery) -> Reply {
    let what = ("compute#machineTypeList", "machineTypes");
    list_zonal(&cloud, &p, &q, what, |_, s, zone| {
        FLAVORS
            .iter()
            .map(|f| machine_type_view(s, zone, f))
            .collect()
    })
}

async fn get_machine_type(State(cloud): Ctx, Path(p): Params_) -> Reply {
    read_zonal(&cloud, &p, |_, s, zone| {
        let name = param(&p, "name");
        let f = FLAVORS.iter().find(|f| f.name == name).ok_or_else(|| {
            s.project
                .not_found(&format!("zones/{zone}/machineTypes/{name}"))
        })?;
        ok(machine_type_view(s, zone, f))
    })
}
