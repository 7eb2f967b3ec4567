//! Neutron routers: gateway, interfaces and extra routes (`routes`, `add_extraroutes`,
//! `remove_extraroutes`).

use super::*;

impl View for Router_ {
    fn view(&self, r: &impl Read) -> Value {
        let gateway = self.gateway_network_id.as_ref().map(|net| {
            let ips: Vec<FixedIp> = r
                .list::<Port>(PORTS)
                .into_iter()
                .filter(|p| p.device_id == self.meta.id && p.device_owner == OWNER_ROUTER_GATEWAY)
                .flat_map(|p| p.fixed_ips)
                .collect();
            json!({"network_id": net, "enable_snat": true, "external_fixed_ips": ips})
        });
        self.meta.neutron_view(
            json!({
                "id": self.meta.id, "name": self.name, "status": "ACTIVE", "admin_state_up": self.admin_state_up,
                "external_gateway_info": gateway, "routes": self.routes, "description": self.description,
                "distributed": false, "ha": false, "availability_zones": ["nova"],
                "availability_zone_hints": [], "flavor_id": null,
            }),
        )
    }
}

pub(crate) fn new_router(
    tx: &mut Tx<'_>,
    name: &str,
    project_id: &str,
    gateway: Option<String>,
) -> Result<Router_, ApiError> {
    let router = Router_ {
        meta: Meta::new(project_id),
        name: name.into(),
        admin_state_up: true,
        gateway_network_id: None,
        routes: vec![],
        description: String::new(),
    };
    tx.put(ROUTERS, &router.meta.id, &router)?;
    set_gateway(tx, router, gateway)
}

pub(super) fn set_gateway(
    tx: &mut Tx<'_>,
    mut router: Router_,
    network_id: Option<String>,
) -> Result<Router_, ApiError> {
    if router.gateway_network_id == network_id {
        return Ok(router);
    }
    for p in tx.list::<Port>(PORTS) {
        if p.device_id == router.meta.id && p.device_owner == OWNER_ROUTER_GATEWAY {
            tx.delete(PORTS, &p.meta.id);
        }
    }
    if let Some(net_id) = &network_id {
        let net = find::<Network>(tx, net_id)?;
        if !net.external {
            return Err(ApiError::bad_request(format!(
                "Bad router request: Network {net_id} is not an external network."
            )));
        }
        create_port(
            tx,
            PortSpec {
                network_id: net_id.clone(),
                name: String::new(),
                fixed_ips: vec![],
                device_id: router.meta.id.clone(),
                device_owner: OWNER_ROUTER_GATEWAY.into(),
                project_id: String::new(),
            },
        )?;
    }
    router.gateway_network_id = network_id;
    tx.put(ROUTERS, &router.meta.id.clone(), &router)?;
    Ok(router)
}

pub(crate) fn add_interface_on_subnet(
    tx: &mut Tx<'_>,
    router: &Router_,
    subnet_id: &str,
) -> Result<Port, ApiError> {
    let subnet = find::<Subnet>(tx, subnet_id)?;
    if router_subnets(tx, &router.meta.id)
        .iter()
        .any(|s| s.meta.id == subnet.meta.id)
    {
        return Err(ApiError::bad_request(format!(
            "Bad router request: Router already has a port on subnet {subnet_id}."
        )));
    }
    let ip = subnet.gateway_ip.clone();
    create_port(
        tx,
        PortSpec {
            network_id: subnet.network_id.clone(),
            name: String::new(),
            fixed_ips: vec![(Some(subnet.meta.id.clone()), ip)],
            device_id: router.meta.id.clone(),
            device_owner: OWNER_ROUTER_INTERFACE.into(),
            project_id: router.meta.project_id.clone(),
        },
    )
}

/// Subnets the router is attached to (interfaces and gateway).
pub(super) fn router_subnets(r: &impl Read, router_id: &str) -> Vec<Subnet> {
    let ports: Vec<Port> = r
        .list::<Port>(PORTS)
        .into_iter()
        .filter(|p| p.device_id == router_id && p.device_owner.starts_with("network:router"))
        .collect();
    r.list::<Subnet>(SUBNETS)
        .into_iter()
        .filter(|s| {
            ports
                .iter()
                .any(|p| p.fixed_ips.iter().any(|f| f.subnet_id == s.meta.id))
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
pub(super) struct GatewayBody {
    network_id: String,
    enable_snat: Option<bool>,
    external_fixed_ips: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
pub(super) struct RouterBody {
    name: Option<String>,
    admin_state_up: Option<bool>,
    #[serde(default, deserialize_with = "crate::api::nullable")]
    external_gateway_info: Option<Option<GatewayBody>>,
    routes: Option<Vec<HostRoute>>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    distributed: Option<bool>,
    ha: Option<bool>,
    availability_zone_hints: Option<Value>,
    flavor_id: Option<Value>,
}

impl Create for Router_ {
    type Body = RouterBody;

    fn check(b: &RouterBody) -> Result<(), ApiError> {
        if b.routes.is_some() {
            return Err(ApiError::bad_request(
                "Attribute 'routes' not allowed in POST",
            ));
        }
        Ok(())
    }

    fn create(tx: &mut Tx<'_>, caller: &Caller, b: RouterBody) -> Result<Self, ApiError> {
        let project_id = b.project_id.clone().or(b.tenant_id.clone());
        let gateway = b.external_gateway_info.flatten().map(|g| g.network_id);
        let mut r = new_router(
            tx,
            b.name.as_deref().unwrap_or(""),
            &project_of(caller, &project_id),
            gateway,
        )?;
        r.admin_state_up = b.admin_state_up.unwrap_or(true);
        r.description = b.description.unwrap_or_default();
        tx.put(ROUTERS, &r.meta.id.clone(), &r)?;
        Ok(r)
    }
}

/// Checks routes as Neutron does: valid CIDR and address, nexthop on a subnet the router is
/// attached to.
pub(super) fn check_routes(
    r: &impl Read,
    router_id: &str,
    routes: &[HostRoute],
) -> Result<Vec<HostRoute>, ApiError> {
    let subnets = router_subnets(r, router_id);
    let mut out: Vec<HostRoute> = Vec::new();
    for route in routes {
        let (net, len) = parse_cidr(&route.destination).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid input for routes. Reason: '{}' is not a valid IP subnet.",
                route.destination
            ))
        })?;
        let nexthop = parse_ip("routes", &route.nexthop)?;
        if !subnets.iter().any(|s| in_cidr(nexthop, &s.cidr)) {
            return Err(ApiError::bad_request(format!(
                "Invalid format for routes: {{'destination': '{}', 'nexthop': '{}'}}, the nexthop is not connected with router",
                route.destination, route.nexthop
            ))
            .with_kind("InvalidRoutes"));
        }
        let normal = HostRoute {
            destination: format!("{net}/{len}"),
            nexthop: nexthop.to_string(),
        };
        if !out.contains(&normal) {
            out.push(normal);
        }
    }
    Ok(out)
}

impl Update for Router_ {
    type Body = RouterBody;

    fn update(&mut self, tx: &mut Tx<'_>, b: RouterBody) -> Result<(), ApiError> {
        if let Some(gw) = b.external_gateway_info {
            *self = set_gateway(tx, self.clone(), gw.map(|g| g.network_id))?;
        }
        set_given!(self <- b: name, admin_state_up, description);
        if let Some(routes) = b.routes {
            self.routes = check_routes(tx, &self.meta.id, &routes)?;
        }
        Ok(())
    }
}

impl Release for Router_ {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        let id = &self.meta.id;
        let ports: Vec<Port> = tx
            .list::<Port>(PORTS)
            .into_iter()
            .filter(|p| &p.device_id == id)
            .collect();
        if ports
            .iter()
            .any(|p| p.device_owner == OWNER_ROUTER_INTERFACE)
        {
            return Err(ApiError::conflict(
                "RouterInUse",
                format!("Router {id} still has ports"),
            ));
        }
        if tx
            .list::<FloatingIp>(FLOATING_IPS)
            .iter()
            .any(|f| f.router_id.as_deref() == Some(id.as_str()))
        {
            return Err(ApiError::conflict(
                "RouterInUse",
                format!("Router {id} still has floating IPs associated"),
            ));
        }
        for p in ports {
            tx.delete(PORTS, &p.meta.id);
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InterfaceBody {
    subnet_id: Option<String>,
    port_id: Option<String>,
}

pub(super) fn interface_info(router: &Router_, port: &Port) -> Value {
    let subnet_ids: Vec<&str> = port
        .fixed_ips
        .iter()
        .map(|f| f.subnet_id.as_str())
        .collect();
    json!({
        "id": router.meta.id, "tenant_id": router.meta.project_id, "project_id": router.meta.project_id,
        "port_id": port.meta.id, "network_id": port.network_id,
        "subnet_id": subnet_ids.first(), "subnet_ids": subnet_ids,
    })
}

pub(super) async fn add_router_interface(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: InterfaceBody = parse_body(&body)?;
    let info = cloud
        .write(move |tx| {
            let router = find::<Router_>(tx, &id)?;
            let port = match (b.subnet_id, b.port_id) {
                (Some(subnet_id), None) => add_interface_on_subnet(tx, &router, &subnet_id)?,
                (None, Some(port_id)) => {
                    let mut port = find::<Port>(tx, &port_id)?;
                    if !port.device_id.is_empty() {
                        return Err(ApiError::conflict(
                            "PortInUse",
                            format!("Port {port_id} is already in use by {}", port.device_id),
                        ));
                    }
                    port.device_id = router.meta.id.clone();
                    port.device_owner = OWNER_ROUTER_INTERFACE.into();
                    port.touch();
                    tx.put(PORTS, &port_id, &port)?;
                    port
                }
                _ => return Err(ApiError::bad_request(
                    "Bad router request: Either subnet_id or port_id must be specified, not both",
                )),
            };
            Ok(interface_info(&router, &port))
        })
        .await?;
    Ok(reply(StatusCode::OK, info))
}

pub(super) async fn remove_router_interface(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: InterfaceBody = parse_body(&body)?;
    let info = cloud
        .write(move |tx| {
            let router = find::<Router_>(tx, &id)?;
            let interfaces: Vec<Port> = tx
                .list::<Port>(PORTS)
                .into_iter()
                .filter(|p| p.device_id == id && p.device_owner == OWNER_ROUTER_INTERFACE)
                .collect();
            let port = match (&b.subnet_id, &b.port_id) {
                (Some(s), _) => interfaces.into_iter().find(|p| p.fixed_ips.iter().any(|f| &f.subnet_id == s)),
                (None, Some(p)) => interfaces.into_iter().find(|i| &i.meta.id == p),
                (None, None) => return Err(ApiError::bad_request("Bad router request: Either subnet_id or port_id must be specified")),
            }
            .ok_or_else(|| {
                ApiError::not_found("RouterInterfaceNotFound", format!("Router {id} does not have an interface with {}", b.subnet_id.clone().or(b.port_id.clone()).unwrap_or_default()))
            })?;
            let subnets: Vec<Subnet> = port.fixed_ips.iter().filter_map(|f| tx.get::<Subnet>(SUBNETS, &f.subnet_id)).collect();
            for route in &router.routes {
                if let Ok(hop) = route.nexthop.parse::<Ipv4Addr>() {
                    if subnets.iter().any(|s| in_cidr(hop, &s.cidr)) {
                        return Err(ApiError::conflict(
                            "RouterInterfaceInUseByRoute",
                            format!("Router interface for subnet on router {id} cannot be deleted, as it is required by one or more routes."),
                        ));
                    }
                }
            }
            tx.delete(PORTS, &port.meta.id);
            Ok(interface_info(&router, &port))
        })
        .await?;
    Ok(reply(StatusCode::OK, info))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RoutesOnly {
    routes: Vec<HostRoute>,
}

pub(super) async fn add_extraroutes(
    state: Ctx,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    change_routes(state, path, body, true).await
}

pub(super) async fn remove_extraroutes(
    state: Ctx,
    path: Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    change_routes(state, path, body, false).await
}

/// Neutron's extraroute-atomic: add or remove a set of routes in one step, without a
/// read-modify-write race between clients.
pub(super) async fn change_routes(
    State(cloud): Ctx,
    Path(id): Path<String>,
    body: Bytes,
    add: bool,
) -> Result<Response, ApiError> {
    let b: RoutesOnly = parse_wrapped(&body, "router")?;
    change(&cloud, id, move |tx, r: &mut Router_| {
        if add {
            for route in check_routes(tx, &r.meta.id, &b.routes)? {
                if !r.routes.contains(&route) {
                    r.routes.push(route);
                }
            }
        } else {
            let remove: Vec<HostRoute> = b
                .routes
                .iter()
                .map(|route| {
                    let dest = parse_cidr(&route.destination)
                        .map_or(route.destination.clone(), |(n, l)| format!("{n}/{l}"));
                    HostRoute {
                        destination: dest,
                        nexthop: route.nexthop.clone(),
                    }
                })
                .collect();
            r.routes.retain(|route| !remove.contains(route));
        }
        Ok(())
    })
    .await
}
