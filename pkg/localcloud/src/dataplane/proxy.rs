//! The proxy: TCP listeners that copy each connection to a member (half-close passes
//! through), UDP listeners with one session per client, and the member choice by the pool's
//! algorithm. Only loopback members are ever contacted, and every socket it opens is bound to
//! loopback.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use hypercloud_cloudprovider::throttle::AcceptBackoff;
use tokio::net::{TcpSocket, TcpStream};

/// One member as the proxy sees it; kept across reconciles so health and counters persist.
#[derive(Debug)]
pub(super) struct MemberRt {
    pub(super) id: String,
    pub(super) pool_id: String,
    pub(super) addr: SocketAddr,
    /// Where health monitors probe (the member's `monitor_address`/`monitor_port`, else `addr`).
    pub(super) monitor: SocketAddr,
    pub(super) admin_up: AtomicBool,
    /// The member's security groups let the load balancer reach its port (always, unless
    /// `--enforce-member-security-groups`): a member they refuse gets no connection, as when
    /// Neutron drops the amphora's packets.
    pub(super) admitted: AtomicBool,
    /// The same for its monitor port: probes a group refuses fail.
    pub(super) monitor_admitted: AtomicBool,
    /// Weight 0 drains the member: no new connections, as in Octavia.
    pub(super) weight: AtomicU64,
    pub(super) healthy: AtomicBool,
    pub(super) active: AtomicU64,
    pub(super) connections: AtomicU64,
    pub(super) bytes_in: AtomicU64,
    pub(super) bytes_out: AtomicU64,
}

#[derive(Debug)]
pub(super) struct PoolRt {
    pub(super) algorithm: RwLock<String>,
    pub(super) members: RwLock<Vec<Arc<MemberRt>>>,
    pub(super) next: AtomicUsize,
}

/// Whether the data plane may send traffic to `addr`: only loopback members (127.0.0.0/8, ::1).
/// Instances on the default `private` subnet (127.1.0.0/16) have loopback addresses, so a member
/// on a Node's InternalIP is reached; an address on any other subnet belongs to no host here, is
/// never connected to, and its monitor reports it down (operating_status ERROR). This keeps the
/// local cloud from ever sending traffic off the machine.
pub(crate) fn may_contact(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

impl PoolRt {
    /// The members to try for a client, best first.
    fn pick(&self, client: IpAddr) -> Vec<Arc<MemberRt>> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        let mut up: Vec<Arc<MemberRt>> = members
            .iter()
            .filter(|m| {
                may_contact(&m.addr)
                    && m.admin_up.load(Ordering::Relaxed)
                    && m.admitted.load(Ordering::Relaxed)
                    && m.healthy.load(Ordering::Relaxed)
                    && m.weight.load(Ordering::Relaxed) > 0
            })
            .cloned()
            .collect();
        if up.is_empty() {
            return up;
        }
        let algorithm = self
            .algorithm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let first = match algorithm.as_str() {
            "LEAST_CONNECTIONS" => {
                let start = self.next.fetch_add(1, Ordering::Relaxed) % up.len();
                (0..up.len())
                    .map(|i| (start + i) % up.len())
                    .min_by_key(|&i| up[i].active.load(Ordering::Relaxed))
                    .unwrap_or(0)
            }
            "SOURCE_IP" => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                client.hash(&mut h);
                (h.finish() % up.len() as u64) as usize
            }
            _ => self.next.fetch_add(1, Ordering::Relaxed) % up.len(),
        };
        up.rotate_left(first);
        up
    }
}

pub(super) type PoolSlot = Arc<RwLock<Option<Arc<PoolRt>>>>;

/// A listener's `allowed_cidrs` as network/prefix pairs; `None` admits everyone.
pub(super) type AllowedSlot = Arc<RwLock<Option<Vec<(IpAddr, u8)>>>>;

/// Parses `allowed_cidrs` (checked by the API; unparsable entries admit nobody).
pub(super) fn parse_cidrs(cidrs: &[String]) -> Vec<(IpAddr, u8)> {
    cidrs
        .iter()
        .filter_map(|c| {
            let (a, p) = c.split_once('/')?;
            Some((a.parse().ok()?, p.parse().ok()?))
        })
        .collect()
}

/// Whether `ip` lies in one of `cidrs` (IPv4-mapped IPv6 clients count as IPv4).
pub(super) fn admitted(cidrs: &[(IpAddr, u8)], ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    cidrs.iter().any(|(net, prefix)| match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from((*prefix).min(32)))
                .unwrap_or(0);
            u32::from(*n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from((*prefix).min(128)))
                .unwrap_or(0);
            u128::from(*n) & mask == u128::from(a) & mask
        }
        _ => false,
    })
}

#[derive(Debug, Default)]
pub(super) struct ListenerStats {
    pub(super) connections: AtomicU64,
    pub(super) active: AtomicU64,
    pub(super) bytes_in: AtomicU64,
    pub(super) bytes_out: AtomicU64,
    pub(super) no_member: AtomicU64,
    /// Connections (TCP) or datagrams (UDP) from sources outside `allowed_cidrs`.
    pub(super) refused: AtomicU64,
}

pub(super) fn bind_udp(addr: SocketAddr) -> std::io::Result<Arc<tokio::net::UdpSocket>> {
    let socket = std::net::UdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    Ok(Arc::new(tokio::net::UdpSocket::from_std(socket)?))
}

/// The local address to reach `member` from: always loopback (only loopback members are ever
/// contacted, see [`may_contact`]), so no socket of the data plane is bound to a wildcard or
/// external address.
pub(super) fn local_for(member: SocketAddr) -> SocketAddr {
    match member.ip() {
        IpAddr::V4(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
        IpAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0)),
    }
}

/// UDP: one session per client address (like haproxy/LVS in Octavia's UDP listeners), each with
/// its own socket to the member chosen at the first datagram; a session idle for `idle` ends.
///
/// `allowed_cidrs` applies as to TCP (Octavia enforces it with the VIP port's security group,
/// for every protocol): a datagram from another source is dropped before it opens or feeds a
/// session, so a client removed from the list is cut off at once.
pub(super) async fn serve_udp(
    socket: Arc<tokio::net::UdpSocket>,
    pool: PoolSlot,
    allowed: AllowedSlot,
    stats: Arc<ListenerStats>,
    idle: Duration,
) {
    type Sessions = Arc<Mutex<HashMap<SocketAddr, Arc<tokio::net::UdpSocket>>>>;
    let sessions: Sessions = Arc::new(Mutex::new(HashMap::new()));
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, client) = match socket.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(error) => {
                // ICMP errors from earlier sends surface here on Linux; keep serving.
                tracing::debug!(%error, "udp receive failed");
                continue;
            }
        };
        let refused = allowed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|cidrs| !admitted(cidrs, client.ip()));
        if refused {
            tracing::debug!(%client, "udp client not in the listener's allowed_cidrs");
            stats.refused.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let existing = sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&client)
            .cloned();
        let upstream = match existing {
            Some(u) => u,
            None => {
                let candidates = pool
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .map(|p| p.pick(client.ip()))
                    .unwrap_or_default();
                let Some(member) = candidates.into_iter().next() else {
                    stats.no_member.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let up = match tokio::net::UdpSocket::bind(local_for(member.addr)).await {
                    Ok(u) => u,
                    Err(error) => {
                        tracing::warn!(%error, "cannot open a udp session socket");
                        continue;
                    }
                };
                if let Err(error) = up.connect(member.addr).await {
                    tracing::debug!(%error, member = %member.addr, "udp connect failed");
                    continue;
                }
                let up = Arc::new(up);
                stats.connections.fetch_add(1, Ordering::Relaxed);
                stats.active.fetch_add(1, Ordering::Relaxed);
                member.connections.fetch_add(1, Ordering::Relaxed);
                member.active.fetch_add(1, Ordering::Relaxed);
                sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(client, up.clone());
                let (socket, sessions, stats, up2) =
                    (socket.clone(), sessions.clone(), stats.clone(), up.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65_536];
                    loop {
                        match tokio::time::timeout(idle, up2.recv(&mut buf)).await {
                            Ok(Ok(n)) => {
                                let _ = socket.send_to(&buf[..n], client).await;
                                stats.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                                member.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                            }
                            // Refused (ICMP port unreachable) is not fatal for UDP.
                            Ok(Err(_)) => continue,
                            Err(_) => break,
                        }
                    }
                    sessions
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&client);
                    stats.active.fetch_sub(1, Ordering::Relaxed);
                    member.active.fetch_sub(1, Ordering::Relaxed);
                });
                up
            }
        };
        stats.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        let _ = upstream.send(&buf[..n]).await;
    }
}

pub(super) fn bind_tcp(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

pub(super) async fn serve_tcp(
    listener: tokio::net::TcpListener,
    pool: PoolSlot,
    allowed: AllowedSlot,
    stats: Arc<ListenerStats>,
) {
    let mut backoff = AcceptBackoff::new("load balancer listener connection");
    loop {
        let (client, peer) = match listener.accept().await {
            Ok(c) => {
                backoff.succeeded();
                c
            }
            Err(error) => {
                backoff.failed(&error).await;
                continue;
            }
        };
        let refused = allowed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|cidrs| !admitted(cidrs, peer.ip()));
        if refused {
            // haproxy's `tcp-request connection reject`: closed before any byte.
            tracing::debug!(%peer, "client not in the listener's allowed_cidrs");
            stats.refused.fetch_add(1, Ordering::Relaxed);
            drop(client);
            continue;
        }
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let candidates = pool
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| p.pick(peer.ip()))
            .unwrap_or_default();
        let stats = stats.clone();
        tokio::spawn(async move {
            stats.active.fetch_add(1, Ordering::Relaxed);
            proxy(client, candidates, &stats).await;
            stats.active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

pub(super) async fn proxy(
    mut client: TcpStream,
    candidates: Vec<Arc<MemberRt>>,
    stats: &ListenerStats,
) {
    let _ = client.set_nodelay(true);
    for member in candidates {
        let connected =
            tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(member.addr)).await;
        let mut backend = match connected {
            Ok(Ok(s)) => s,
            Ok(Err(error)) => {
                tracing::debug!(member = %member.addr, %error, "member refused, trying the next");
                continue;
            }
            Err(_) => continue,
        };
        let _ = backend.set_nodelay(true);
        member.connections.fetch_add(1, Ordering::Relaxed);
        member.active.fetch_add(1, Ordering::Relaxed);
        let copied = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
        member.active.fetch_sub(1, Ordering::Relaxed);
        if let Ok((up, down)) = copied {
            member.bytes_out.fetch_add(up, Ordering::Relaxed);
            member.bytes_in.fetch_add(down, Ordering::Relaxed);
            stats.bytes_in.fetch_add(up, Ordering::Relaxed);
            stats.bytes_out.fetch_add(down, Ordering::Relaxed);
        }
        return;
    }
    stats.no_member.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_cidrs_match_by_prefix() {
        let cidrs = parse_cidrs(&[
            "127.0.0.0/30".into(),
            "::1/128".into(),
            "10.0.0.0/0x".into(),
        ]);
        assert_eq!(cidrs.len(), 2);
        let ip = |s: &str| s.parse::<IpAddr>().expect("an address");
        assert!(admitted(&cidrs, ip("127.0.0.3")));
        assert!(!admitted(&cidrs, ip("127.0.0.4")));
        assert!(admitted(&cidrs, ip("::1")));
        assert!(admitted(&cidrs, ip("::ffff:127.0.0.1")));
        assert!(!admitted(&cidrs, ip("::2")));
        assert!(admitted(
            &parse_cidrs(&["0.0.0.0/0".into()]),
            ip("127.9.9.9")
        ));
        assert!(!admitted(&[], ip("127.0.0.1")));
    }
}
