//! What a hostile client cannot do: use an unscoped token on a project-scoped service, reach
//! another project's volumes through the URL, place a VIP off loopback or outside the pool,
//! or make the data plane listen on a non-loopback address (checked in /proc/net).

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{self, subject_token, wait_lb_active, TestCloud, LBAAS};

#[tokio::test]
async fn unscoped_tokens_are_refused_by_project_scoped_services() {
    let c = TestCloud::start().await;
    let mut auth = support::password_auth(&c.config.password);
    auth["auth"]["scope"] = json!("unscoped");
    let r = c.authenticate(auth).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert!(r.body["token"].get("project").is_none(), "{}", r.body);
    assert!(r.body["token"].get("catalog").is_none(), "{}", r.body);
    let unscoped = subject_token(&r);

    for path in [
        "/compute/v2.1/servers".to_owned(),
        "/network/v2.0/networks".to_owned(),
        c.volumes(),
        "/image/v2/images".to_owned(),
        format!("{LBAAS}/loadbalancers"),
    ] {
        let r = c.raw(Method::GET, &path, None, Some(&unscoped)).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {}", r.body);
        // The scoped token still works.
        assert_eq!(c.get(&path).await.status, StatusCode::OK, "{path}");
    }
    // Keystone still validates the unscoped token itself.
    assert_eq!(
        c.subject_token_call(Method::GET, &unscoped).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn another_projects_volume_path_is_refused() {
    let c = TestCloud::start().await;
    let other = "0123456789abcdef0123456789abcdef";
    for path in [
        format!("/volume/v3/{other}/volumes"),
        format!("/volume/v3/{other}/volumes/detail"),
        format!("/volume/v3/{other}/types"),
    ] {
        let r = c.get(&path).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.body);
        assert_eq!(r.body["badRequest"]["message"], "Malformed request url");
    }
    let r = c
        .post(
            &format!("/volume/v3/{other}/volumes"),
            json!({"volume": {"size": 1}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(c.get(&c.volumes()).await.body["volumes"], json!([]));
}

/// Local addresses of this process's listening TCP sockets and bound UDP sockets, from
/// /proc/net (rows whose inode is one of our file descriptors).
fn bound_addresses() -> BTreeSet<String> {
    let ours: BTreeSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut out = BTreeSet::new();
    for (file, listen_only) in [
        ("/proc/net/tcp", true),
        ("/proc/net/tcp6", true),
        ("/proc/net/udp", false),
        ("/proc/net/udp6", false),
    ] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || !ours.contains(cols[9]) {
                continue;
            }
            if listen_only && cols[3] != "0A" {
                continue;
            }
            out.insert(cols[1].to_owned());
        }
    }
    out
}

/// Whether a /proc/net address (`0100007F:1F90`, or 32 hex digits for IPv6) is loopback.
fn is_loopback(hex_addr: &str) -> bool {
    let ip = hex_addr.split(':').next().unwrap_or_default();
    match ip.len() {
        // IPv4 in host (little-endian) order: 127.x.y.z ends with 7F.
        8 => ip.ends_with("7F"),
        // ::1, or ::ffff:127.x.y.z
        32 => {
            ip == "00000000000000000000000001000000"
                || (ip.starts_with("0000000000000000FFFF0000") && ip.ends_with("7F"))
        }
        _ => false,
    }
}

#[test]
fn proc_net_addresses_are_read_right() {
    assert!(is_loopback("0100007F:1F90"));
    assert!(is_loopback("0164007F:0050"));
    assert!(!is_loopback("00000000:1F90"));
    assert!(!is_loopback("0100A8C0:0050"));
    assert!(is_loopback("00000000000000000000000001000000:0050"));
    assert!(!is_loopback("00000000000000000000000000000000:0050"));
}

#[tokio::test]
async fn vips_stay_in_the_loopback_pool_and_listeners_bind_only_loopback() {
    let c = TestCloud::start().await;
    let create = |vip: &str| json!({"loadbalancer": {"vip_network_id": "n", "vip_address": vip}});
    for vip in [
        "0.0.0.0",
        "10.0.0.5",
        "192.0.2.1",
        "127.0.101.5",
        "127.0.100.0",
        "127.0.100.255",
        "::",
        "::1",
    ] {
        let r = c.post(&format!("{LBAAS}/loadbalancers"), create(vip)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{vip}: {}", r.body);
        let msg = r.body["faultstring"].as_str().unwrap();
        assert!(msg.contains("vip_address"), "{vip}: {msg}");
    }
    // A VIP inside the pool but outside the named subnet (private, 127.1.0.0/16) is refused
    // as Octavia refuses it.
    let subnet = c.neutron_id("subnets", "private-subnet").await;
    let r = c
        .post(
            &format!("{LBAAS}/loadbalancers"),
            json!({"loadbalancer": {"vip_subnet_id": subnet, "vip_address": "127.0.100.9"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        c.get(&format!("{LBAAS}/loadbalancers")).await.body["loadbalancers"],
        json!([])
    );

    // A good VIP, TCP and UDP listeners: every new socket is on loopback.
    let r = c
        .post(&format!("{LBAAS}/loadbalancers"), create("127.0.100.77"))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let lb = r.id("loadbalancer");
    for protocol in ["TCP", "UDP"] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let r = c
                .post(
                    &format!("{LBAAS}/listeners"),
                    json!({"listener": {"loadbalancer_id": lb, "protocol": protocol, "protocol_port": 18080}}),
                )
                .await;
            if r.status == StatusCode::CREATED {
                break;
            }
            assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
            assert!(std::time::Instant::now() < deadline, "LB stayed PENDING");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    wait_lb_active(&c, &lb).await;
    // 127.0.100.77:18080 as /proc/net writes it.
    let vip = "4D64007F:46A0";
    let bound = bound_addresses();
    assert!(
        bound.contains(vip),
        "no socket on 127.0.100.77:18080: {bound:?}"
    );
    // Every socket this process listens on (this test's cloud, the other tests' clouds
    // running in parallel, the listeners just opened) is on loopback.
    let off_loopback: Vec<&String> = bound.iter().filter(|a| !is_loopback(a)).collect();
    assert!(
        off_loopback.is_empty(),
        "sockets bound off loopback: {off_loopback:?}"
    );
    assert_eq!(
        c.get(&format!("{LBAAS}/loadbalancers/{lb}")).await.body["loadbalancer"]["vip_address"],
        "127.0.100.77"
    );
}
