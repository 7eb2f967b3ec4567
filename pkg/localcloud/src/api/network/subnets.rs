//! Neutron subnets: CIDR, gateway and allocation pools; records and handlers.

use super::*;

impl View for Subnet {
    fn view(&self, _: &impl Read) -> Value {
        self.meta.neutron_view(
            json!({
                "id": self.meta.id, "name": self.name, "network_id": self.network_id, "cidr": self.cidr,
                "ip_version": 4, "gateway_ip": self.gateway_ip, "allocation_pools": self.allocation_pools,
                "enable_dhcp": self.enable_dhcp, "dns_nameservers": self.dns_nameservers,
                "host_routes": self.host_routes, "description": self.description,
                "ipv6_ra_mode": null, "ipv6_address_mode": null, "subnetpool_id": null,
                "service_types": [], "segment_id": null, "dns_publish_fixed_ip": false,
            }),
        )
    }
}

pub(super) fn default_pools(cidr: &str) -> Result<(Option<String>, Vec<Pool>), ApiError> {
    let (net, len) = parse_cidr(cidr).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Invalid input for cidr. Reason: '{cidr}' is not a valid IP subnet."
        ))
    })?;
    if len > 30 {
        return Err(ApiError::bad_request(format!(
            "Invalid input for cidr. Reason: '{cidr}' is too small for a subnet."
        )));
    }
    let first = u32::from(net);
    let last = first | !mask(len);
    Ok((
        Some(Ipv4Addr::from(first + 1).to_string()),
        vec![Pool {
            start: Ipv4Addr::from(first + 2).to_string(),
            end: Ipv4Addr::from(last - 1).to_string(),
        }],
    ))
}

pub(crate) fn new_subnet(
    tx: &mut Tx<'_>,
    name: &str,
    network_id: &str,
    cidr: &str,
    project_id: &str,
) -> Result<Subnet, ApiError> {
    let (gateway_ip, allocation_pools) = default_pools(cidr)?;
    let s = Subnet {
        meta: Meta::new(project_id),
        name: name.into(),
        network_id: network_id.into(),
        cidr: cidr.into(),
        gateway_ip,
        allocation_pools,
        enable_dhcp: true,
        dns_nameservers: vec![],
        host_routes: vec![],
        description: String::new(),
    };
    tx.put(SUBNETS, &s.meta.id, &s)?;
    Ok(s)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
// Some fields are accepted because OpenStack accepts them, but not modelled.
#[allow(dead_code)]
pub(super) struct SubnetBody {
    network_id: Option<String>,
    cidr: Option<String>,
    ip_version: Option<u8>,
    name: Option<String>,
    #[serde(default, deserialize_with = "crate::api::nullable")]
    gateway_ip: Option<Option<String>>,
    allocation_pools: Option<Vec<Pool>>,
    enable_dhcp: Option<bool>,
    dns_nameservers: Option<Vec<String>>,
    host_routes: Option<Vec<HostRoute>>,
    description: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    subnetpool_id: Option<Value>,
    ipv6_ra_mode: Option<Value>,
    ipv6_address_mode: Option<Value>,
    service_types: Option<Value>,
    segment_id: Option<Value>,
    dns_publish_fixed_ip: Option<bool>,
}

pub(super) async fn create_subnet(
    State(cloud): Ctx,
    axum::Extension(caller): CallerExt,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: SubnetBody = parse_wrapped(&body, "subnet")?;
    let network_id = required(&b.network_id, "network_id")?;
    let cidr = b.cidr.clone().ok_or_else(|| {
        ApiError::bad_request(
            "Bad subnet request: a subnetpool must be specified in the absence of a cidr.",
        )
    })?;
    match b.ip_version {
        Some(4) => {}
        Some(6) => {
            return Err(ApiError::bad_request(
                "IPv6 subnets are not supported by the local cloud.",
            ))
        }
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "Invalid input for ip_version. Reason: {v} is not in [4, 6]."
            )))
        }
        None => {
            return Err(ApiError::bad_request(
                "Failed to parse request. Required attribute 'ip_version' not specified",
            ))
        }
    }
    let project_id = b.project_id.clone().or(b.tenant_id.clone());
    let subnet = cloud
        .write(move |tx| {
            find::<Network>(tx, &network_id)?;
            let (net, len) = parse_cidr(&cidr).ok_or_else(|| ApiError::bad_request(format!("Invalid input for cidr. Reason: '{cidr}' is not a valid IP subnet.")))?;
            let cidr = format!("{net}/{len}");
            for other in tx.list::<Subnet>(SUBNETS).into_iter().filter(|s| s.network_id == network_id) {
                if let Some((o, olen)) = parse_cidr(&other.cidr) {
                    if in_cidr(o, &cidr) || in_cidr(net, &format!("{o}/{olen}")) {
                        return Err(ApiError::bad_request(format!(
                            "Invalid input for operation: Requested subnet with cidr: {cidr} for network: {network_id} overlaps with another subnet."
                        )));
                    }
                }
            }
            let mut s = new_subnet(tx, b.name.as_deref().unwrap_or(""), &network_id, &cidr, &project_of(&caller, &project_id))?;
            if let Some(gw) = b.gateway_ip {
                if let Some(g) = &gw {
                    let ip = parse_ip("gateway_ip", g)?;
                    if !in_cidr(ip, &cidr) {
                        return Err(ApiError::bad_request(format!("Invalid input: gateway {g} is not in {cidr}")));
                    }
                }
                s.gateway_ip = gw;
            }
            if let Some(pools) = b.allocation_pools {
                for p in &pools {
                    let (start, end) = (
                        parse_ip("allocation_pools", &p.start)?,
                        parse_ip("allocation_pools", &p.end)?,
                    );
                    if !in_cidr(start, &cidr) || !in_cidr(end, &cidr) || start > end {
                        return Err(ApiError::bad_request(format!("The allocation pool {}-{} spans beyond the subnet cidr {cidr}.", p.start, p.end)).with_kind("OutOfBoundsAllocationPool"));
                    }
                }
                s.allocation_pools = pools;
            }
            s.enable_dhcp = b.enable_dhcp.unwrap_or(true);
            s.dns_nameservers = b.dns_nameservers.unwrap_or_default();
            s.host_routes = b.host_routes.unwrap_or_default();
            s.description = b.description.unwrap_or_default();
            tx.put(SUBNETS, &s.meta.id.clone(), &s)?;
            Ok(s)
        })
        .await?;
    Ok(created(&cloud, &subnet))
}

impl Update for Subnet {
    type Body = SubnetBody;

    fn check(b: &SubnetBody) -> Result<(), ApiError> {
        if b.cidr.is_some() || b.network_id.is_some() || b.ip_version.is_some() {
            return Err(ApiError::bad_request(
                "Cannot update read-only attribute cidr, network_id or ip_version",
            ));
        }
        Ok(())
    }

    fn update(&mut self, _: &mut Tx<'_>, b: SubnetBody) -> Result<(), ApiError> {
        set_given!(self <- b: name, enable_dhcp, dns_nameservers, host_routes, description,
            gateway_ip);
        Ok(())
    }
}

impl Release for Subnet {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        let id = &self.meta.id;
        if tx
            .list::<Port>(PORTS)
            .iter()
            .any(|p| p.fixed_ips.iter().any(|f| &f.subnet_id == id))
        {
            return Err(ApiError::conflict(
                "SubnetInUse",
                format!("Unable to complete operation on subnet {id}: One or more ports have an IP allocation from this subnet."),
            ));
        }
        Ok(())
    }
}
