//! An IP network (`10.244.0.0/16`, `fd00::/48`), as Go's `net.IPNet` from `ParseCIDR`: the
//! route controller asks which routes fall in `--cluster-cidr`, node IPAM cuts the cluster CIDR
//! into node CIDRs. Addresses are kept as 128-bit numbers (IPv4 in the low 32 bits), so both
//! families share one arithmetic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// An IP network; the host bits are zero, so equal networks compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    net: u128,
    prefix: u8,
    v4: bool,
}

impl Cidr {
    /// Parses `10.244.0.0/16` or `fd00::/64`; host bits are dropped, as Go's ParseCIDR's
    /// network.
    pub fn parse(s: &str) -> Result<Cidr> {
        let bad = || Error::ParseCidr { cidr: s.into() };
        let (ip, prefix) = s.trim().split_once('/').ok_or_else(bad)?;
        let addr: IpAddr = ip.parse().map_err(|_| bad())?;
        // Digits only: Go refuses `+8` and ` 8`, which Rust's integer parser would take.
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let (bits, v4) = match addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)), true),
            IpAddr::V6(a) => (u128::from(a), false),
        };
        Cidr::new(bits, prefix, v4).ok_or_else(bad)
    }

    /// The network of `bits`/`prefix` (host bits cleared); `None` when the prefix is longer
    /// than the family's addresses.
    pub(crate) fn new(bits: u128, prefix: u8, v4: bool) -> Option<Cidr> {
        let width = if v4 { 32 } else { 128 };
        if prefix > width {
            return None;
        }
        let c = Cidr { net: 0, prefix, v4 };
        Some(Cidr {
            net: bits & c.mask(),
            ..c
        })
    }

    /// The network `bits`/`prefix` in this one's family (a prefix past the family's width is
    /// taken as the full width).
    pub(crate) fn sibling(&self, bits: u128, prefix: u8) -> Cidr {
        let prefix = prefix.min(self.width());
        let c = Cidr { prefix, ..*self };
        Cidr {
            net: bits & c.mask(),
            ..c
        }
    }

    /// IPv4 (else IPv6).
    pub fn is_ipv4(&self) -> bool {
        self.v4
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Address length in bits: 32 or 128.
    pub fn width(&self) -> u8 {
        if self.v4 {
            32
        } else {
            128
        }
    }

    /// The network address as a number.
    pub(crate) fn network(&self) -> u128 {
        self.net
    }

    /// The last address as a number.
    pub(crate) fn last(&self) -> u128 {
        self.net | self.host_mask()
    }

    /// The prefix bits set, within the family's width.
    fn mask(&self) -> u128 {
        self.all() & !self.host_mask()
    }

    /// The host bits set.
    fn host_mask(&self) -> u128 {
        let host_bits = u32::from(self.width() - self.prefix);
        1u128.checked_shl(host_bits).map_or(u128::MAX, |b| b - 1) & self.all()
    }

    fn all(&self) -> u128 {
        if self.v4 {
            u128::from(u32::MAX)
        } else {
            u128::MAX
        }
    }

    fn ip(&self, bits: u128) -> IpAddr {
        if self.v4 {
            // Within 32 bits by construction.
            IpAddr::V4(Ipv4Addr::from((bits & u128::from(u32::MAX)) as u32))
        } else {
            IpAddr::V6(Ipv6Addr::from(bits))
        }
    }

    /// Whether `ip` is inside.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (bits, v4) = match ip {
            IpAddr::V4(a) => (u128::from(u32::from(a)), true),
            IpAddr::V6(a) => (u128::from(a), false),
        };
        v4 == self.v4 && bits & self.mask() == self.net
    }

    /// Whether the two share an address (then one contains the other).
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.v4 == other.v4
            && (self.contains(other.ip(other.net)) || other.contains(self.ip(self.net)))
    }

    /// The first and the last address.
    pub fn first_and_last(&self) -> (IpAddr, IpAddr) {
        (self.ip(self.net), self.ip(self.last()))
    }
}

/// `10.244.1.0/24`, `fd00:1::/64`: Go's `IPNet.String()` for these networks.
impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.ip(self.net), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).expect("cidr")
    }

    #[test]
    fn parse_drops_host_bits_and_refuses_garbage() {
        assert_eq!(c("10.244.3.4/16"), c("10.244.0.0/16"));
        assert_eq!(c("10.244.3.4/16").to_string(), "10.244.0.0/16");
        assert_eq!(c("fd00:10::ff/56").to_string(), "fd00:10::/56");
        assert_eq!(c("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(c("::/0").to_string(), "::/0");
        assert_eq!(c("10.1.2.3/32").to_string(), "10.1.2.3/32");
        for bad in [
            "10.0.0.0/33",
            "fd00::/129",
            "nope",
            "10.0.0.0",
            "10.0.0.0/+8",
            "10.0.0.0/",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn contains_overlaps_first_and_last() {
        let net = c("10.244.0.0/16");
        assert!(net.contains("10.244.3.4".parse().expect("ip")));
        assert!(!net.contains("10.245.0.1".parse().expect("ip")));
        assert!(!net.contains("fd00::1".parse().expect("ip")));
        assert!(net.overlaps(&c("10.244.7.0/24")));
        assert!(net.overlaps(&c("10.0.0.0/8")));
        assert!(!net.overlaps(&c("10.245.0.0/24")));
        assert!(!net.overlaps(&c("::/0")));
        assert_eq!(
            net.first_and_last(),
            (
                "10.244.0.0".parse().expect("ip"),
                "10.244.255.255".parse().expect("ip")
            )
        );
        assert!(c("0.0.0.0/0").contains("1.2.3.4".parse().expect("ip")));
        assert!(c("::/0").contains("fd00::1".parse().expect("ip")));
    }
}
