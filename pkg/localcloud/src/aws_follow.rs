//! What `local-cloud serve --follow-aws-elb` is given (the flags' types, below `config` and
//! `api`): moto's endpoint, and how its instance addresses map onto loopback. The follower
//! itself is `api/aws.rs`.

use std::net::Ipv4Addr;
use std::str::FromStr;
use std::time::Duration;

/// What `--follow-aws-elb` asks for: where moto is, and how its addresses map to this machine.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsFollow {
    /// moto's URL (EC2, ELB and ELBv2 on one endpoint).
    pub endpoint: String,
    /// The region the requests are signed for.
    pub region: String,
    /// Instance private addresses (`from`) reached at loopback ones (`to`).
    pub address_map: Vec<AddressMap>,
    /// Time between polls.
    pub interval: Duration,
}

/// `10.0.0.0/16=127.10.0.0/16`: an IPv4 prefix mapped onto a loopback prefix of the same length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressMap {
    from: Ipv4Addr,
    to: Ipv4Addr,
    prefix: u8,
}

impl AddressMap {
    fn mask(&self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0)
    }

    /// `ip` moved into the target prefix, if it lies in the source one.
    pub fn apply(&self, ip: Ipv4Addr) -> Option<Ipv4Addr> {
        let mask = self.mask();
        (u32::from(ip) & mask == u32::from(self.from) & mask)
            .then(|| Ipv4Addr::from((u32::from(self.to) & mask) | (u32::from(ip) & !mask)))
    }
}

impl FromStr for AddressMap {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let cidr = |c: &str| -> Result<(Ipv4Addr, u8), String> {
            let (ip, len) = c
                .split_once('/')
                .ok_or_else(|| format!("{c:?} is not an IPv4 CIDR (a.b.c.d/len)"))?;
            let ip: Ipv4Addr = ip
                .parse()
                .map_err(|_| format!("{ip:?} is not an IPv4 address"))?;
            let len: u8 = len
                .parse()
                .ok()
                .filter(|l| (8..=32).contains(l))
                .ok_or_else(|| format!("prefix length {len:?} is not within 8..=32"))?;
            Ok((ip, len))
        };
        let (from, to) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not FROM_CIDR=TO_CIDR"))?;
        let ((from, a), (to, b)) = (cidr(from)?, cidr(to)?);
        if a != b {
            return Err(format!(
                "the prefixes of {s:?} differ in length (/{a} and /{b})"
            ));
        }
        if !to.is_loopback() {
            return Err(format!(
                "{to} is not a loopback address: members must be reachable on this machine"
            ));
        }
        Ok(AddressMap {
            from,
            to,
            prefix: a,
        })
    }
}

/// Where an address of moto's instances is reached: the first map that covers it, else itself.
#[cfg_attr(not(feature = "aws-follow"), allow(dead_code))]
pub(crate) fn map_address(maps: &[AddressMap], ip: &str) -> String {
    let Ok(v4) = ip.parse::<Ipv4Addr>() else {
        return ip.to_owned();
    };
    maps.iter()
        .find_map(|m| m.apply(v4))
        .map_or_else(|| ip.to_owned(), |m| m.to_string())
}
