//! Health monitors: probe every member of a pool every `delay` seconds (TCP connect, HTTP
//! request with `expected_codes`, UDP-CONNECT), take a member out after `max_retries_down`
//! failures and bring it back after `max_retries` successes, and record the member's
//! operating status in the store. The role of Octavia's health manager and haproxy's checks.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::proxy::{local_for, may_contact, MemberRt, PoolRt};
use crate::model::octavia::{HealthMonitor, Member, Operating, MEMBERS};
use crate::store::{Read, Store};

/// What a running monitor does; a change restarts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MonitorSpec {
    pub kind: String,
    pub delay: Duration,
    pub timeout: Duration,
    /// Successes that bring a member back.
    pub rise: u64,
    /// Failures that take a member out.
    pub fall: u64,
    pub http_method: String,
    pub url_path: String,
    pub expected_codes: String,
}

impl MonitorSpec {
    /// The probe settings of `hm`; `delay` and `timeout` at least 1s (the API keeps them
    /// within Octavia's 32-bit range, so they always fit a `Duration`).
    pub fn of(hm: &HealthMonitor) -> Self {
        MonitorSpec {
            kind: hm.kind.clone(),
            delay: Duration::from_secs(u64::from(hm.delay.max(1))),
            timeout: Duration::from_secs(u64::from(hm.timeout.max(1))),
            rise: u64::from(hm.max_retries.max(1)),
            fall: u64::from(hm.max_retries_down.max(1)),
            http_method: hm.http_method.clone().unwrap_or_else(|| "GET".into()),
            url_path: hm.url_path.clone().unwrap_or_else(|| "/".into()),
            expected_codes: hm.expected_codes.clone().unwrap_or_else(|| "200".into()),
        }
    }

    #[cfg(test)]
    fn tcp() -> Self {
        MonitorSpec {
            kind: "TCP".into(),
            delay: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            rise: 1,
            fall: 1,
            http_method: "GET".into(),
            url_path: "/".into(),
            expected_codes: "200".into(),
        }
    }
}

/// Probes one member once.
async fn probe(addr: SocketAddr, spec: &MonitorSpec, timeout: Duration) -> bool {
    if !may_contact(&addr) {
        return false;
    }
    let kind = spec.kind.as_str();
    if kind == "UDP-CONNECT" {
        // Like Octavia's UDP-CONNECT: a datagram, then only an ICMP port-unreachable fails.
        let check = async {
            let s = tokio::net::UdpSocket::bind(local_for(addr)).await.ok()?;
            s.connect(addr).await.ok()?;
            s.send(b"\n").await.ok()?;
            let mut buf = [0u8; 512];
            match tokio::time::timeout(timeout / 2, s.recv(&mut buf)).await {
                Ok(Err(_)) => Some(false),
                Ok(Ok(_)) | Err(_) => Some(true),
            }
        };
        return matches!(check.await, Some(true));
    }
    let check = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        if kind != "HTTP" {
            return Some(true);
        }
        let (path, method) = (&spec.url_path, &spec.http_method);
        let req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = vec![0u8; 1024];
        let mut n = 0;
        while n < 12 {
            let got = s.read(&mut buf[n..]).await.ok()?;
            if got == 0 {
                break;
            }
            n += got;
        }
        let head = String::from_utf8_lossy(&buf[..n]).into_owned();
        let code: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
        Some(expected(&spec.expected_codes, code))
    };
    matches!(tokio::time::timeout(timeout, check).await, Ok(Some(true)))
}

/// Octavia's `expected_codes`: `200`, `200,202`, `200-204`.
pub(crate) fn expected(codes: &str, code: u16) -> bool {
    codes
        .split(',')
        .map(str::trim)
        .any(|part| match part.split_once('-') {
            Some((a, b)) => match (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
                (Ok(a), Ok(b)) => (a..=b).contains(&code),
                _ => false,
            },
            None => part.parse::<u16>().is_ok_and(|c| c == code),
        })
}

/// A health monitor: probes every member of `pool` every `delay` seconds.
pub(super) async fn monitor(store: Arc<Store>, pool: Arc<PoolRt>, spec: MonitorSpec) {
    let (delay, timeout, rise, fall) = (spec.delay, spec.timeout, spec.rise, spec.fall);
    // member id → (consecutive successes, consecutive failures, reported state)
    let mut state: HashMap<String, (u64, u64, Option<bool>)> = HashMap::new();
    loop {
        let members: Vec<Arc<MemberRt>> = pool
            .members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut probes = tokio::task::JoinSet::new();
        for m in &members {
            let m = m.clone();
            let spec = spec.clone();
            probes.spawn(async move {
                // Neutron drops a probe the member's security groups refuse.
                let ok = m.monitor_admitted.load(Ordering::Relaxed)
                    && probe(m.monitor, &spec, timeout).await;
                (m, ok)
            });
        }
        let mut results = Vec::new();
        while let Some(r) = probes.join_next().await {
            if let Ok(r) = r {
                results.push(r);
            }
        }
        let mut changed: Vec<(String, Operating)> = Vec::new();
        for (m, ok) in results {
            let e = state.entry(m.id.clone()).or_insert((0, 0, None));
            if ok {
                e.0 += 1;
                e.1 = 0;
            } else {
                e.1 += 1;
                e.0 = 0;
            }
            let now_up = match e.2 {
                // A new member counts as up until proven down (haproxy's default).
                None if ok => Some(true),
                Some(false) if e.0 >= rise => Some(true),
                None | Some(true) if e.1 >= fall => Some(false),
                other => other,
            };
            if now_up != e.2 {
                e.2 = now_up;
                if let Some(up) = now_up {
                    m.healthy.store(up, Ordering::Relaxed);
                    tracing::info!(member = %m.id, address = %m.addr, up, "member health changed");
                    changed.push((
                        m.id.clone(),
                        if up {
                            Operating::Online
                        } else {
                            Operating::Error
                        },
                    ));
                }
            }
        }
        state.retain(|id, _| members.iter().any(|m| &m.id == id));
        if !changed.is_empty() {
            let store = store.clone();
            let _ = tokio::task::spawn_blocking(move || {
                store.write(|tx| -> crate::Result<()> {
                    for (id, status) in &changed {
                        if let Some(mut m) = tx.get::<Member>(MEMBERS, id) {
                            if m.common.operating_status != *status {
                                m.common.operating_status = *status;
                                tx.put(MEMBERS, id, &m)?;
                            }
                        }
                    }
                    Ok(())
                })
            })
            .await;
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_loopback_members_are_contacted() {
        assert!(may_contact(&"127.0.0.1:80".parse().expect("addr")));
        assert!(may_contact(&"127.0.100.7:80".parse().expect("addr")));
        assert!(may_contact(&"[::1]:80".parse().expect("addr")));
        assert!(!may_contact(&"10.0.0.2:30080".parse().expect("addr")));
        assert!(!may_contact(&"192.0.2.1:80".parse().expect("addr")));
        // A probe of a simulated address fails without any connection attempt.
        let spec = MonitorSpec::tcp();
        let healthy = probe(
            "10.0.0.2:30080".parse().expect("addr"),
            &spec,
            Duration::from_millis(50),
        )
        .await;
        assert!(!healthy);
    }
}
