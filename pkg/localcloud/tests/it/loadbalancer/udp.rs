//! UDP listeners: sessions per client and allowed CIDRs.

use super::*;

/// A UDP server that answers every datagram with its name.
async fn udp_backend(name: &'static str) -> SocketAddr {
    let s = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = s.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((_, from)) = s.recv_from(&mut buf).await {
            let _ = s.send_to(name.as_bytes(), from).await;
        }
    });
    addr
}

/// An ACTIVE load balancer `dns` on a network (no subnet): its ID, its VIP, and a UDP port free
/// on the VIP.
async fn udp_lb(c: &TestCloud) -> (String, String, u16) {
    let lb = c
        .create_lb(json!({"name": "dns", "vip_network_id": "net"}))
        .await;
    let port = {
        let s = std::net::UdpSocket::bind((lb.vip.as_str(), 0)).unwrap();
        s.local_addr().unwrap().port()
    };
    (lb.id, lb.vip, port)
}

#[tokio::test]
async fn udp_listener_keeps_a_session_per_client() {
    let c = cloud("127.1.205.0/24").await;
    let (lb, vip, port) = udp_lb(&c).await;
    c.add_to_lb(
        &lb,
        "listeners",
        json!({"listener": {"loadbalancer_id": lb, "protocol": "UDP", "protocol_port": port}}),
    )
    .await;
    let pool = c.add_lb_pool(&lb, "UDP").await;
    let listener = c
        .get(&format!("{LBAAS}/listeners?loadbalancer_id={lb}"))
        .await
        .first_id("listeners");
    update_listener(&c, &lb, &listener, json!({"default_pool_id": pool})).await;
    for name in ["uno", "dos"] {
        let a = udp_backend(name).await;
        c.add_to_lb(
            &lb,
            &format!("pools/{pool}/members"),
            json!({"member": {"address": "127.0.0.1", "protocol_port": a.port()}}),
        )
        .await;
    }
    let vip: SocketAddr = format!("{vip}:{port}").parse().unwrap();
    let mut names = Vec::new();
    for _ in 0..2 {
        let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(vip).await.unwrap();
        let mut buf = [0u8; 64];
        let mut first = String::new();
        // The same client stays on its member for the whole session.
        for _ in 0..3 {
            client.send(b"hello").await.unwrap();
            let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf))
                .await
                .unwrap()
                .unwrap();
            let got = String::from_utf8_lossy(&buf[..n]).into_owned();
            if first.is_empty() {
                first = got.clone();
            }
            assert_eq!(got, first);
        }
        names.push(first);
    }
    names.sort();
    assert_eq!(names, ["dos", "uno"]);
    c.shutdown().await;
}

/// A UDP listener's `allowed_cidrs` drops datagrams from other sources (no answer, no session),
/// counts them in `localcloud_lb_listener_refused_total`, and admits everyone again when lifted.
#[tokio::test]
async fn udp_allowed_cidrs_drop_other_sources() {
    let c = cloud("127.1.206.0/24").await;
    let (lb, vip, port) = udp_lb(&c).await;
    let backend = udp_backend("uno").await;
    let listener = c
        .add_listener_and_pool(
            &lb,
            json!({"protocol": "UDP", "protocol_port": port, "allowed_cidrs": ["127.0.0.3/32"]}),
            json!({"protocol": "UDP", "lb_algorithm": "ROUND_ROBIN"}),
            &[json!({"address": "127.0.0.1", "protocol_port": backend.port()})],
        )
        .await
        .listener;

    let vip: SocketAddr = format!("{vip}:{port}").parse().unwrap();
    // One datagram from `source`; its answer, or None when nothing comes back within 1s.
    let ask = |source: &'static str| async move {
        let client = tokio::net::UdpSocket::bind((source, 0)).await.unwrap();
        client.connect(vip).await.unwrap();
        client.send(b"hello").await.unwrap();
        let mut buf = [0u8; 64];
        match tokio::time::timeout(Duration::from_secs(1), client.recv(&mut buf)).await {
            Ok(Ok(n)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            _ => None,
        }
    };
    assert_eq!(ask("127.0.0.3").await.as_deref(), Some("uno"));
    assert_eq!(
        ask("127.0.0.4").await,
        None,
        "a datagram from outside allowed_cidrs was answered"
    );
    let metrics = c.metrics().await;
    let refused = metrics
        .lines()
        .find(|l| l.starts_with("localcloud_lb_listener_refused_total") && l.contains(&listener))
        .unwrap_or_else(|| panic!("no refused counter for {listener}:\n{metrics}"));
    assert!(refused.ends_with(" 1"), "{refused}");

    update_listener(&c, &lb, &listener, json!({"allowed_cidrs": null})).await;
    // The listener is ACTIVE with the lifted list, but a new client's first datagram opens a
    // session (a socket to the member) and on a loaded machine its answer may take longer than
    // the 1 s `ask` waits (CI failed so): ask again, for at most 10 s, until one is answered.
    let mut answered = None;
    for _ in 0..10 {
        answered = ask("127.0.0.4").await;
        if answered.is_some() {
            break;
        }
    }
    assert_eq!(answered.as_deref(), Some("uno"), "still dropped after 10 s");
    c.shutdown().await;
}
