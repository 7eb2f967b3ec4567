//! Neutron floating IPs and their association with ports through a router.

use super::*;

impl View for FloatingIp {
    fn view(&self, _: &impl Read) -> Value {
        let status = if self.port_id.is_some() {
            "ACTIVE"
        } else {
            "DOWN"
        };
        self.meta.neutron_view(json!({
            "id": self.meta.id, "floating_ip_address": self.floating_ip_address,
            "floating_network_id": self.floating_network_id, "port_id": self.port_id,
            "fixed_ip_address": self.fixed_ip_address, "router_id": self.router_id,
            "status": status, "description": self.description, "port_details": null,
            "dns_name": "", "dns_domain": "", "qos_policy_id": null, "port_forwardings": [],
        }))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
pub(super) struct FloatingIpBody {
    floating_network_id: Option<String>,
    #[serde(default, deserialize_with = "crate::api::nullable")]
    port_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::api::nullable")]
    fixed_ip_address: Option<Option<String>>,
    floating_ip_address: Option<String>,
    subnet_id: Option<String>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    dns_name: Option<Value>,
    dns_domain: Option<Value>,
    qos_policy_id: Option<Value>,
}

/// Points `fip` at `port_id` (or nowhere), finding the router that connects them.
pub(crate) fn associate(
    tx: &Tx<'_>,
    fip: &mut FloatingIp,
    port_id: Option<String>,
    fixed_ip: Option<String>,
) -> Result<(), ApiError> {
    let Some(port_id) = port_id else {
        fip.port_id = None;
        fip.fixed_ip_address = None;
        fip.router_id = None;
        return Ok(());
    };
    let port = find::<Port>(tx, &port_id)?;
    let fixed = match fixed_ip {
        Some(ip) => port
            .fixed_ips
            .iter()
            .find(|f| f.ip_address == ip)
            .cloned()
            .ok_or_else(|| {
                ApiError::bad_request(format!("Port {port_id} does not have fixed ip {ip}"))
            })?,
        None => port.fixed_ips.first().cloned().ok_or_else(|| {
            ApiError::bad_request(format!(
                "Bad floatingip request: Port {port_id} does not have any IPv4 address"
            ))
        })?,
    };
    if let Some(other) = tx.list::<FloatingIp>(FLOATING_IPS).into_iter().find(|f| {
        f.meta.id != fip.meta.id
            && f.port_id.as_deref() == Some(port_id.as_str())
            && f.fixed_ip_address.as_deref() == Some(fixed.ip_address.as_str())
    }) {
        return Err(ApiError::conflict(
            "FloatingIPPortAlreadyAssociated",
            format!("Cannot associate floating IP {} with port {port_id} using fixed IP {}, as that fixed IP already has a floating IP {}.", fip.floating_ip_address, fixed.ip_address, other.floating_ip_address),
        ));
    }
    let router = tx.list::<Router_>(ROUTERS).into_iter().find(|r| {
        r.gateway_network_id.as_deref() == Some(fip.floating_network_id.as_str())
            && router_subnets(tx, &r.meta.id)
                .iter()
                .any(|s| s.meta.id == fixed.subnet_id)
    });
    let Some(router) = router else {
        return Err(ApiError::not_found(
            "ExternalGatewayForFloatingIPNotFound",
            format!(
                "External network {} is not reachable from subnet {}.",
                fip.floating_network_id, fixed.subnet_id
            ),
        ));
    };
    fip.port_id = Some(port_id);
    fip.fixed_ip_address = Some(fixed.ip_address);
    fip.router_id = Some(router.meta.id);
    Ok(())
}

/// What a new floating IP is made of.
pub(crate) struct FloatingIpSpec {
    pub network_id: String,
    pub subnet_id: Option<String>,
    /// A wanted address, else the next free one.
    pub address: Option<String>,
    pub project_id: String,
    pub port_id: Option<String>,
    pub fixed_ip: Option<String>,
    pub description: String,
}

/// Allocates and stores a floating IP on an external network, associated with a port if one is
/// given (shared by Neutron's create, the GCE dialect's access configs and addresses).
pub(crate) fn new_floating_ip(
    tx: &mut Tx<'_>,
    spec: FloatingIpSpec,
) -> Result<FloatingIp, ApiError> {
    let net_id = spec.network_id;
    let net = find::<Network>(tx, &net_id)?;
    if !net.external {
        return Err(ApiError::bad_request(format!(
            "Bad floatingip request: Network {net_id} is not a valid external network."
        )));
    }
    let subnet = tx
        .list::<Subnet>(SUBNETS)
        .into_iter()
        .find(|s| {
            s.network_id == net_id && spec.subnet_id.as_ref().is_none_or(|id| id == &s.meta.id)
        })
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Bad floatingip request: Network {net_id} has no subnet to allocate from."
            ))
        })?;
    let address = allocate_ip(tx, &subnet, spec.address.as_deref(), false)?;
    let mut fip = FloatingIp {
        meta: Meta::new(spec.project_id),
        floating_ip_address: address,
        floating_network_id: net_id,
        port_id: None,
        fixed_ip_address: None,
        router_id: None,
        description: spec.description,
    };
    associate(tx, &mut fip, spec.port_id, spec.fixed_ip)?;
    tx.put(FLOATING_IPS, &fip.meta.id.clone(), &fip)?;
    Ok(fip)
}

impl Create for FloatingIp {
    type Body = FloatingIpBody;

    fn check(b: &FloatingIpBody) -> Result<(), ApiError> {
        required(&b.floating_network_id, "floating_network_id").map(drop)
    }

    fn create(tx: &mut Tx<'_>, caller: &Caller, b: FloatingIpBody) -> Result<Self, ApiError> {
        let project_id = b.project_id.clone().or(b.tenant_id.clone());
        new_floating_ip(
            tx,
            FloatingIpSpec {
                network_id: required(&b.floating_network_id, "floating_network_id")?,
                subnet_id: b.subnet_id,
                address: b.floating_ip_address,
                project_id: project_of(caller, &project_id),
                port_id: b.port_id.flatten(),
                fixed_ip: b.fixed_ip_address.flatten(),
                description: b.description.unwrap_or_default(),
            },
        )
    }
}

impl Update for FloatingIp {
    type Body = FloatingIpBody;

    fn check(b: &FloatingIpBody) -> Result<(), ApiError> {
        if b.floating_network_id.is_some() || b.floating_ip_address.is_some() {
            return Err(ApiError::bad_request(
                "Cannot update read-only attribute floating_network_id or floating_ip_address",
            ));
        }
        Ok(())
    }

    fn update(&mut self, tx: &mut Tx<'_>, b: FloatingIpBody) -> Result<(), ApiError> {
        if let Some(port) = b.port_id {
            associate(tx, self, port, b.fixed_ip_address.flatten())?;
        }
        set_given!(self <- b: description);
        Ok(())
    }
}

impl Release for FloatingIp {}
