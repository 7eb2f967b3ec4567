//! IPv4 address arithmetic and allocation within a subnet.

use super::*;

/// `10.0.0.0/24` → (network address, prefix length).
pub(crate) fn parse_cidr(cidr: &str) -> Option<(Ipv4Addr, u32)> {
    let (addr, len) = cidr.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    if len > 32 {
        return None;
    }
    Some((Ipv4Addr::from(u32::from(addr) & mask(len)), len))
}

pub(super) fn mask(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

pub(crate) fn in_cidr(ip: Ipv4Addr, cidr: &str) -> bool {
    parse_cidr(cidr).is_some_and(|(net, len)| u32::from(ip) & mask(len) == u32::from(net))
}

/// Whether `ip` is the network or the broadcast address of `cidr`, which Neutron never gives
/// a port or floating IP (`check_subnet_ip`; /31 and /32 have neither).
pub(crate) fn is_network_or_broadcast(ip: Ipv4Addr, cidr: &str) -> bool {
    parse_cidr(cidr).is_some_and(|(net, len)| {
        let broadcast = u32::from(net) | !mask(len);
        len < 31 && (ip == net || u32::from(ip) == broadcast)
    })
}

/// `s` as an IPv4 address; 400 naming `field` otherwise.
pub(super) fn parse_ip(field: &str, s: &str) -> Result<Ipv4Addr, ApiError> {
    s.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "Invalid input for {field}. Reason: '{s}' is not a valid IPv4 address."
        ))
    })
}

/// Addresses already taken in `subnet`: ports, floating IPs and (unless `gateway_free`) the
/// gateway.
pub(super) fn used_ips(r: &impl Read, subnet: &Subnet, gateway_free: bool) -> HashSet<Ipv4Addr> {
    let mut used: HashSet<Ipv4Addr> = r
        .list::<Port>(PORTS)
        .into_iter()
        .flat_map(|p| p.fixed_ips)
        .filter(|f| f.subnet_id == subnet.meta.id)
        .filter_map(|f| f.ip_address.parse().ok())
        .collect();
    used.extend(
        r.list::<FloatingIp>(FLOATING_IPS)
            .into_iter()
            .filter_map(|f| f.floating_ip_address.parse::<Ipv4Addr>().ok())
            .filter(|ip| in_cidr(*ip, &subnet.cidr)),
    );
    if !gateway_free {
        if let Some(gw) = subnet.gateway_ip.as_deref().and_then(|g| g.parse().ok()) {
            used.insert(gw);
        }
    }
    used
}

/// Picks `wanted` (checking it) or the lowest free address of the subnet's pools. Only a
/// router interface (`for_router`) may take the gateway address.
pub(super) fn allocate_ip(
    r: &impl Read,
    subnet: &Subnet,
    wanted: Option<&str>,
    for_router: bool,
) -> Result<String, ApiError> {
    let used = used_ips(r, subnet, for_router);
    if let Some(wanted) = wanted {
        let ip = parse_ip("ip_address", wanted)?;
        if !in_cidr(ip, &subnet.cidr) || is_network_or_broadcast(ip, &subnet.cidr) {
            return Err(ApiError::bad_request(format!(
                "IP address {ip} is not a valid IP for the specified subnet."
            ))
            .with_kind("InvalidIpForSubnet"));
        }
        if used.contains(&ip) {
            return Err(ApiError::conflict(
                "IpAddressAlreadyAllocated",
                format!(
                    "IP address {ip} already allocated in subnet {}",
                    subnet.meta.id
                ),
            ));
        }
        return Ok(ip.to_string());
    }
    for pool in &subnet.allocation_pools {
        let (Ok(start), Ok(end)) = (pool.start.parse::<Ipv4Addr>(), pool.end.parse::<Ipv4Addr>())
        else {
            continue;
        };
        for n in u32::from(start)..=u32::from(end) {
            let ip = Ipv4Addr::from(n);
            if !used.contains(&ip) {
                return Ok(ip.to_string());
            }
        }
    }
    Err(ApiError::conflict(
        "IpAddressGenerationFailure",
        format!(
            "No more IP addresses available on network {}.",
            subnet.network_id
        ),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cidr_math() {
        assert_eq!(
            parse_cidr("10.0.0.7/24"),
            Some((Ipv4Addr::new(10, 0, 0, 0), 24))
        );
        assert!(parse_cidr("10.0.0.0/33").is_none());
        assert!(in_cidr(Ipv4Addr::new(10, 0, 0, 200), "10.0.0.0/24"));
        assert!(!in_cidr(Ipv4Addr::new(10, 0, 1, 1), "10.0.0.0/24"));
        assert!(is_network_or_broadcast(
            Ipv4Addr::new(10, 0, 0, 0),
            "10.0.0.0/24"
        ));
        assert!(is_network_or_broadcast(
            Ipv4Addr::new(10, 0, 0, 255),
            "10.0.0.0/24"
        ));
        assert!(!is_network_or_broadcast(
            Ipv4Addr::new(10, 0, 0, 1),
            "10.0.0.0/24"
        ));
        assert!(!is_network_or_broadcast(
            Ipv4Addr::new(10, 0, 0, 1),
            "10.0.0.0/31"
        ));
        let (gw, pools) = default_pools("10.0.0.0/24").unwrap();
        assert_eq!(gw.as_deref(), Some("10.0.0.1"));
        assert_eq!(
            pools,
            vec![Pool {
                start: "10.0.0.2".into(),
                end: "10.0.0.254".into()
            }]
        );
    }
}
