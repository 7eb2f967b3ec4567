//! The proxy: TCP listeners that copy each connection to a member (half-close passes
//! through), UDP listeners with one session per client, and the member choice by the pool's
//! algorithm (or its `SOURCE_IP` session persistence). As haproxy in an amphora, a `PROXY` or
//! `PROXYV2` pool gets a PROXY protocol v1 (text) or v2 (binary) header with the client's
//! address before the first byte, and an `HTTP` listener with `insert_headers` adds
//! `X-Forwarded-For` (and `-Port`, `-Proto`) to every request of a keep-alive connection
//! (`http`). Only loopback members are ever contacted, and every socket it opens is bound to
//! loopback.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use hypercloud_cloudprovider::throttle::AcceptBackoff;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use super::http::{self, Insert};

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
    /// The pool's protocol: `PROXY`/`PROXYV2` members get a PROXY protocol header first.
    pub(super) protocol: RwLock<String>,
    /// `session_persistence: {"type": "SOURCE_IP"}`: the same client keeps its member.
    pub(super) source_ip_persistence: AtomicBool,
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
        let sticky = self.source_ip_persistence.load(Ordering::Relaxed);
        let first = match algorithm.as_str() {
            _ if sticky => source_hash(client, up.len()),
            "LEAST_CONNECTIONS" => {
                let start = self.next.fetch_add(1, Ordering::Relaxed) % up.len();
                (0..up.len())
                    .map(|i| (start + i) % up.len())
                    .min_by_key(|&i| up[i].active.load(Ordering::Relaxed))
                    .unwrap_or(0)
            }
            "SOURCE_IP" => source_hash(client, up.len()),
            _ => self.next.fetch_add(1, Ordering::Relaxed) % up.len(),
        };
        up.rotate_left(first);
        up
    }
}

/// The member index for `client` among `n`: the same client, the same member while the
/// members stay the same (haproxy's `balance source`, and its stick table on `src`).
fn source_hash(client: IpAddr, n: usize) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    client.hash(&mut h);
    (h.finish() % n as u64) as usize
}

/// Which PROXY protocol header a pool's members expect, by the pool's protocol.
fn proxy_header_of(protocol: &str) -> Option<ProxyVersion> {
    match protocol {
        "PROXY" => Some(ProxyVersion::V1),
        "PROXYV2" => Some(ProxyVersion::V2),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProxyVersion {
    V1,
    V2,
}

/// The PROXY protocol header (haproxy's `send-proxy` / `send-proxy-v2`) for a TCP connection
/// from `client` to `local` (the VIP or floating IP the client reached).
pub(super) fn proxy_header(
    version: ProxyVersion,
    client: SocketAddr,
    local: SocketAddr,
) -> Vec<u8> {
    // One family on both sides (an IPv4-mapped client on an IPv6 socket counts as IPv4).
    let v4 = |a: SocketAddr| match a.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(a, |v4| SocketAddr::new(IpAddr::V4(v4), a.port())),
        IpAddr::V4(_) => a,
    };
    let (client, local) = match (v4(client), v4(local)) {
        (c @ SocketAddr::V4(_), l @ SocketAddr::V4(_)) => (c, l),
        (c, l) => (
            SocketAddr::new(IpAddr::V6(to_v6(c.ip())), c.port()),
            SocketAddr::new(IpAddr::V6(to_v6(l.ip())), l.port()),
        ),
    };
    match version {
        ProxyVersion::V1 => {
            let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
            format!(
                "PROXY {family} {} {} {} {}\r\n",
                client.ip(),
                local.ip(),
                client.port(),
                local.port()
            )
            .into_bytes()
        }
        ProxyVersion::V2 => {
            let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
            // Version 2, command PROXY.
            h.push(0x21);
            let mut addrs = Vec::with_capacity(36);
            match (client.ip(), local.ip()) {
                (IpAddr::V4(c), IpAddr::V4(l)) => {
                    // TCP over IPv4.
                    h.push(0x11);
                    addrs.extend_from_slice(&c.octets());
                    addrs.extend_from_slice(&l.octets());
                }
                (c, l) => {
                    // TCP over IPv6.
                    h.push(0x21);
                    addrs.extend_from_slice(&to_v6(c).octets());
                    addrs.extend_from_slice(&to_v6(l).octets());
                }
            }
            addrs.extend_from_slice(&client.port().to_be_bytes());
            addrs.extend_from_slice(&local.port().to_be_bytes());
            h.extend_from_slice(&(addrs.len() as u16).to_be_bytes());
            h.extend_from_slice(&addrs);
            h
        }
    }
}

fn to_v6(ip: IpAddr) -> std::net::Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
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

/// What an `HTTP` listener adds to each request (`insert_headers`); all off for other listeners.
pub(super) type InsertSlot = Arc<RwLock<Insert>>;

pub(super) async fn serve_tcp(
    listener: tokio::net::TcpListener,
    pool: PoolSlot,
    allowed: AllowedSlot,
    insert: InsertSlot,
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
        let (candidates, header) = pool
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| {
                let protocol = p.protocol.read().unwrap_or_else(|e| e.into_inner());
                (p.pick(peer.ip()), proxy_header_of(&protocol))
            })
            .unwrap_or_default();
        let insert = *insert.read().unwrap_or_else(|e| e.into_inner());
        let stats = stats.clone();
        tokio::spawn(async move {
            stats.active.fetch_add(1, Ordering::Relaxed);
            let front = Front {
                peer,
                header,
                insert,
            };
            proxy(client, candidates, front, &stats).await;
            stats.active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// What the member side of one client connection gets besides its bytes.
pub(super) struct Front {
    /// The client's address.
    pub(super) peer: SocketAddr,
    /// The pool's PROXY protocol, if any.
    pub(super) header: Option<ProxyVersion>,
    /// The `HTTP` listener's inserted headers.
    pub(super) insert: Insert,
}

pub(super) async fn proxy(
    mut client: TcpStream,
    candidates: Vec<Arc<MemberRt>>,
    front: Front,
    stats: &ListenerStats,
) {
    let _ = client.set_nodelay(true);
    // The address the client reached: the VIP or a floating IP.
    let Ok(local) = client.local_addr() else {
        return;
    };
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
        let mut sent_header = 0;
        if let Some(version) = front.header {
            let header = proxy_header(version, front.peer, local);
            if let Err(error) = backend.write_all(&header).await {
                tracing::debug!(member = %member.addr, %error, "writing the PROXY header failed");
                member.active.fetch_sub(1, Ordering::Relaxed);
                return;
            }
            sent_header = header.len() as u64;
        }
        let copied = if front.insert.any() {
            http::forward(client, backend, front.peer, local, front.insert).await
        } else {
            tokio::io::copy_bidirectional(&mut client, &mut backend).await
        };
        member.active.fetch_sub(1, Ordering::Relaxed);
        if let Ok((up, down)) = copied {
            let up = up + sent_header;
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

    #[test]
    fn proxy_headers_carry_the_client_and_the_address_it_reached() {
        let client: SocketAddr = "127.0.0.1:40000".parse().expect("an address");
        let vip: SocketAddr = "127.0.100.2:80".parse().expect("an address");
        assert_eq!(
            proxy_header(ProxyVersion::V1, client, vip),
            b"PROXY TCP4 127.0.0.1 127.0.100.2 40000 80\r\n"
        );
        let v2 = proxy_header(ProxyVersion::V2, client, vip);
        assert_eq!(&v2[..12], b"\r\n\r\n\0\r\nQUIT\n");
        assert_eq!(&v2[12..16], &[0x21, 0x11, 0, 12]);
        assert_eq!(
            &v2[16..],
            &[127, 0, 0, 1, 127, 0, 100, 2, 0x9c, 0x40, 0, 80]
        );
        let v6: SocketAddr = "[::1]:5".parse().expect("an address");
        assert_eq!(
            proxy_header(ProxyVersion::V1, v6, v6),
            b"PROXY TCP6 ::1 ::1 5 5\r\n"
        );
        assert_eq!(proxy_header(ProxyVersion::V2, v6, v6).len(), 16 + 36);
    }
}
