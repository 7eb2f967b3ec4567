//! Neutron ports with fixed IPs allocated from their subnets; the port creation shared by the
//! port API, Nova (server interfaces) and routers.

use super::*;

impl View for Port {
    fn view(&self, _: &impl Read) -> Value {
        let status = if self.device_id.is_empty() {
            "DOWN"
        } else {
            "ACTIVE"
        };
        self.meta.neutron_view(
            json!({
                "id": self.meta.id, "name": self.name, "network_id": self.network_id,
                "mac_address": self.mac_address, "fixed_ips": self.fixed_ips, "device_id": self.device_id,
                "device_owner": self.device_owner, "admin_state_up": self.admin_state_up,
                "status": status, "description": self.description,
                "allowed_address_pairs": self.allowed_address_pairs, "security_groups": self.security_groups,
                "binding:vnic_type": "normal", "binding:host_id": "", "binding:vif_type": "unbound",
                "binding:vif_details": {}, "binding:profile": {}, "port_security_enabled": true,
                "extra_dhcp_opts": [], "dns_name": "", "dns_assignment": [],
            }),
        )
    }
}

pub(crate) fn random_mac() -> String {
    format!(
        "fa:16:3e:{:02x}:{:02x}:{:02x}",
        fastrand::u8(..),
        fastrand::u8(..),
        fastrand::u8(..)
    )
}

/// What a new port asks for.
pub(crate) struct PortSpec {
    pub network_id: String,
    pub name: String,
    pub fixed_ips: Vec<(Option<String>, Option<String>)>,
    pub device_id: String,
    pub device_owner: String,
    pub project_id: String,
}

/// Creates a port with its fixed IPs (shared by the port API, Nova and routers).
pub(crate) fn create_port(tx: &mut Tx<'_>, spec: PortSpec) -> Result<Port, ApiError> {
    find::<Network>(tx, &spec.network_id)?;
    let subnets: Vec<Subnet> = tx
        .list::<Subnet>(SUBNETS)
        .into_iter()
        .filter(|s| s.network_id == spec.network_id)
        .collect();
    let mut wanted = spec.fixed_ips;
    if wanted.is_empty() {
        if let Some(first) = subnets.first() {
            wanted.push((Some(first.meta.id.clone()), None));
        }
    }
    let mut fixed_ips = Vec::new();
    for (subnet_id, ip) in wanted {
        let subnet = match (&subnet_id, &ip) {
            (Some(id), _) => subnets.iter().find(|s| &s.meta.id == id).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid input for operation: Failed to create port on network {}, because fixed_ips included invalid subnet {id}.",
                    spec.network_id
                ))
                .with_kind("InvalidInput")
            })?,
            (None, Some(ip)) => {
                let parsed = parse_ip("fixed_ips", ip)?;
                subnets.iter().find(|s| in_cidr(parsed, &s.cidr)).ok_or_else(|| {
                    ApiError::bad_request(format!("IP address {ip} is not a valid IP for any subnet on network {}.", spec.network_id))
                        .with_kind("InvalidIpForNetwork")
                })?
            }
            (None, None) => continue,
        };
        // Our own earlier picks in this port are not in the store yet.
        let mut ip_address = allocate_ip(
            tx,
            subnet,
            ip.as_deref(),
            spec.device_owner == OWNER_ROUTER_INTERFACE,
        )?;
        while fixed_ips
            .iter()
            .any(|f: &FixedIp| f.ip_address == ip_address)
        {
            if ip.is_some() {
                return Err(ApiError::conflict(
                    "IpAddressAlreadyAllocated",
                    format!("IP address {ip_address} given twice"),
                ));
            }
            let n = u32::from(parse_ip("fixed_ips", &ip_address)?) + 1;
            ip_address = Ipv4Addr::from(n).to_string();
        }
        fixed_ips.push(FixedIp {
            subnet_id: subnet.meta.id.clone(),
            ip_address,
        });
    }
    // Neutron gives a port that names no group its project's default group, except the ports
    // of Neutron's own devices (router interfaces and gateways, DHCP: `network:*`).
    let security_groups = if spec.device_owner.starts_with("network:") {
        Vec::new()
    } else {
        vec![ensure_default_group(tx, &spec.project_id)?]
    };
    let port = Port {
        meta: Meta::new(spec.project_id),
        name: spec.name,
        network_id: spec.network_id,
        mac_address: random_mac(),
        fixed_ips,
        device_id: spec.device_id,
        device_owner: spec.device_owner,
        admin_state_up: true,
        description: String::new(),
        allowed_address_pairs: Vec::new(),
        security_groups,
    };
    tx.put(PORTS, &port.meta.id, &port)?;
    Ok(port)
}

/// Removes a port and whatever points at it (floating IP associations).
pub(crate) fn delete_port_cascade(tx: &mut Tx<'_>, port_id: &str) -> Result<(), ApiError> {
    tx.delete(PORTS, port_id);
    for mut fip in tx.list::<FloatingIp>(FLOATING_IPS) {
        if fip.port_id.as_deref() == Some(port_id) {
            fip.port_id = None;
            fip.fixed_ip_address = None;
            fip.router_id = None;
            fip.touch();
            tx.put(FLOATING_IPS, &fip.meta.id.clone(), &fip)?;
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FixedIpBody {
    subnet_id: Option<String>,
    ip_address: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
pub(super) struct PortBody {
    network_id: Option<String>,
    name: Option<String>,
    fixed_ips: Option<Vec<FixedIpBody>>,
    device_id: Option<String>,
    device_owner: Option<String>,
    admin_state_up: Option<bool>,
    description: Option<String>,
    mac_address: Option<String>,
    allowed_address_pairs: Option<Vec<Value>>,
    security_groups: Option<Vec<String>>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    port_security_enabled: Option<bool>,
    #[serde(rename = "binding:host_id")]
    _host_id: Option<Value>,
    #[serde(rename = "binding:vnic_type")]
    _vnic_type: Option<Value>,
    #[serde(rename = "binding:profile")]
    _profile: Option<Value>,
    dns_name: Option<Value>,
    extra_dhcp_opts: Option<Value>,
    qos_policy_id: Option<Value>,
}

pub(super) async fn create_port_api(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: PortBody = parse_wrapped(&body, "port")?;
    let network_id = required(&b.network_id, "network_id")?;
    let project_id = b.project_id.clone().or(b.tenant_id.clone());
    let port = cloud
        .write(move |tx| {
            let fixed_ips = b
                .fixed_ips
                .unwrap_or_default()
                .into_iter()
                .map(|f| (f.subnet_id, f.ip_address))
                .collect();
            let mut p = create_port(
                tx,
                PortSpec {
                    network_id,
                    name: b.name.unwrap_or_default(),
                    fixed_ips,
                    device_id: b.device_id.unwrap_or_default(),
                    device_owner: b.device_owner.unwrap_or_default(),
                    project_id: project_of(&caller, &project_id),
                },
            )?;
            if let Some(mac) = b.mac_address {
                p.mac_address = mac;
            }
            p.admin_state_up = b.admin_state_up.unwrap_or(true);
            p.description = b.description.unwrap_or_default();
            p.allowed_address_pairs = b.allowed_address_pairs.unwrap_or_default();
            if let Some(groups) = b.security_groups {
                p.security_groups = known_groups(tx, groups)?;
            }
            tx.put(PORTS, &p.meta.id.clone(), &p)?;
            Ok(p)
        })
        .await?;
    Ok(created(&cloud, &port))
}

impl Update for Port {
    type Body = PortBody;

    fn check(b: &PortBody) -> Result<(), ApiError> {
        if b.network_id.is_some() {
            return Err(ApiError::bad_request(
                "Cannot update read-only attribute network_id",
            ));
        }
        if b.fixed_ips.is_some() {
            return Err(ApiError::bad_request("Changing fixed_ips of an existing port is not supported by the local cloud; create a new port"));
        }
        Ok(())
    }

    fn update(&mut self, tx: &mut Tx<'_>, b: PortBody) -> Result<(), ApiError> {
        set_given!(self <- b: name, device_id, device_owner, admin_state_up, description,
            mac_address, allowed_address_pairs);
        if let Some(v) = b.security_groups {
            self.security_groups = known_groups(tx, v)?;
        }
        Ok(())
    }
}

impl Release for Port {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        let id = &self.meta.id;
        if self.device_owner == OWNER_ROUTER_INTERFACE || self.device_owner == OWNER_ROUTER_GATEWAY
        {
            return Err(ApiError::conflict(
                "PortInUse",
                format!(
                    "Port {id} cannot be deleted directly via the port API: has device owner {}.",
                    self.device_owner
                ),
            ));
        }
        delete_port_cascade(tx, id)
    }
}

/// `groups` if each is a security group of this cloud (404 `SecurityGroupNotFound` otherwise).
fn known_groups(r: &impl Read, groups: Vec<String>) -> Result<Vec<String>, ApiError> {
    for g in &groups {
        find::<SecurityGroup>(r, g)?;
    }
    Ok(groups)
}

/// The `device_owner` Octavia gives the ports of its VIPs.
pub(crate) const OWNER_OCTAVIA: &str = "Octavia";

/// Creates the Neutron port of load balancer `lb_id`'s VIP, as Octavia's network driver does:
/// named `octavia-lb-<id>`, device `lb-<id>`, owner `Octavia`, with the VIP as its fixed IP on
/// `subnet`. (The VIP comes from the local VIP pool, which need not lie in the subnet's CIDR.)
pub(crate) fn create_vip_port(
    tx: &mut Tx<'_>,
    lb_id: &str,
    project_id: &str,
    subnet: &Subnet,
    vip: &str,
) -> Result<Port, ApiError> {
    let port = Port {
        meta: Meta::new(project_id),
        name: format!("octavia-lb-{lb_id}"),
        network_id: subnet.network_id.clone(),
        mac_address: random_mac(),
        fixed_ips: vec![FixedIp {
            subnet_id: subnet.meta.id.clone(),
            ip_address: vip.to_owned(),
        }],
        device_id: format!("lb-{lb_id}"),
        device_owner: OWNER_OCTAVIA.to_owned(),
        admin_state_up: true,
        description: String::new(),
        allowed_address_pairs: Vec::new(),
        security_groups: Vec::new(),
    };
    tx.put(PORTS, &port.meta.id.clone(), &port)?;
    Ok(port)
}

/// Deletes load balancer `lb_id`'s VIP port if this cloud made it (Octavia deletes the VIP
/// port it created, not one the user gave), disassociating its floating IPs.
pub(crate) fn delete_vip_port(tx: &mut Tx<'_>, lb_id: &str, port_id: &str) -> Result<(), ApiError> {
    match tx.get::<Port>(PORTS, port_id) {
        Some(p) if p.device_owner == OWNER_OCTAVIA && p.device_id == format!("lb-{lb_id}") => {
            delete_port_cascade(tx, port_id)
        }
        _ => Ok(()),
    }
}
