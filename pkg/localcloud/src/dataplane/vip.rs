//! The VIP pool: where load balancer VIPs come from, and the rules a VIP must follow so that
//! the data plane only ever listens on loopback: the pool lies inside 127.0.0.0/8 (every 127.x
//! address is local on Linux without configuration; no flag allows another range), and a VIP
//! is a host address of the pool (not its network or broadcast address, not 0.0.0.0).

use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

/// The addresses VIPs are allocated from, e.g. `127.0.100.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VipPool {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl Default for VipPool {
    fn default() -> Self {
        VipPool {
            network: Ipv4Addr::new(127, 0, 100, 0),
            prefix: 24,
        }
    }
}

impl FromStr for VipPool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a CIDR such as 127.0.100.0/24"))?;
        let network: Ipv4Addr = addr.parse().map_err(|e| format!("{addr:?}: {e}"))?;
        let prefix: u8 = prefix.parse().map_err(|e| format!("{prefix:?}: {e}"))?;
        let pool = VipPool { network, prefix };
        pool.check()?;
        Ok(pool)
    }
}

impl std::fmt::Display for VipPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl VipPool {
    /// Whether the pool is usable: a prefix between /8 and /30 inside 127.0.0.0/8.
    pub fn check(&self) -> Result<(), String> {
        if !(8..=30).contains(&self.prefix) {
            return Err(format!(
                "prefix /{} must be between /8 and /30",
                self.prefix
            ));
        }
        if !self.network.is_loopback() {
            return Err(format!(
                "{self} is not inside 127.0.0.0/8: load balancer listeners bind their VIPs, and the local cloud listens on loopback only"
            ));
        }
        Ok(())
    }

    fn base(&self) -> u32 {
        u32::from(self.network) & (u32::MAX << (32 - u32::from(self.prefix.clamp(1, 32))))
    }

    fn size(&self) -> u32 {
        1u32 << (32 - u32::from(self.prefix.clamp(1, 31)))
    }

    /// The first host address of the pool not in `used`.
    pub(crate) fn allocate(&self, used: &[String]) -> Option<Ipv4Addr> {
        let base = self.base();
        (1..self.size().saturating_sub(1))
            .map(|i| Ipv4Addr::from(base + i))
            .find(|a| !used.iter().any(|u| u == &a.to_string()))
    }

    /// Why `vip` cannot be a VIP from this pool (a phrase to follow the address), if it cannot.
    pub(crate) fn refuse(&self, vip: IpAddr) -> Option<String> {
        let v4 = match vip {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(_) => return Some(format!("is not an IPv4 address of the VIP pool {self}")),
        };
        if v4.is_unspecified() {
            return Some("is not a host address".into());
        }
        if !v4.is_loopback() {
            return Some(format!(
                "is not a loopback address (the VIP pool is {self})"
            ));
        }
        let n = u32::from(v4);
        if n < self.base() || n - self.base() >= self.size() {
            return Some(format!("is outside the VIP pool {self}"));
        }
        if n == self.base() {
            return Some(format!("is the network address of the VIP pool {self}"));
        }
        if n == self.base() + (self.size() - 1) {
            return Some(format!("is the broadcast address of the VIP pool {self}"));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_must_be_loopback() {
        assert!("127.0.100.0/24".parse::<VipPool>().is_ok());
        assert!("127.0.0.0/8".parse::<VipPool>().is_ok());
        for bad in [
            "10.0.0.0/24",
            "0.0.0.0/8",
            "192.168.1.0/24",
            "127.0.0.0/31",
            "127.0.0.0/7",
        ] {
            assert!(bad.parse::<VipPool>().is_err(), "{bad}");
        }
    }

    #[test]
    fn vips_are_host_addresses_of_the_pool() {
        let pool: VipPool = "127.0.100.0/24".parse().expect("pool");
        let refuse = |a: &str| pool.refuse(a.parse().expect("ip"));
        assert_eq!(refuse("127.0.100.1"), None);
        assert_eq!(refuse("127.0.100.254"), None);
        for bad in [
            "0.0.0.0",
            "10.0.0.1",
            "127.0.101.1",
            "127.0.99.255",
            "127.0.100.0",
            "127.0.100.255",
            "::1",
            "::",
        ] {
            assert!(refuse(bad).is_some(), "{bad}");
        }
        assert_eq!(pool.allocate(&[]), Some(Ipv4Addr::new(127, 0, 100, 1)));
    }
}
