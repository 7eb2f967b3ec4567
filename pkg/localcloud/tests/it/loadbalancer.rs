//! Load Balancer v2 (Octavia) API and the data plane behind it, with real sockets on 127.0.0.x:
//! traffic through the VIP, round robin, health monitors taking a dead member out, cascade
//! delete closing the port, restart re-opening listeners, and Octavia's 400/404/409.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{echo_backend, find, free_port, wait_for, wait_lb_active, TestCloud, LBAAS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

mod access;
mod udp;

async fn cloud(pool: &str) -> TestCloud {
    let pool = pool.parse().unwrap();
    TestCloud::start_with(|c| hypercloud_localcloud::ServerConfig {
        lb_vip_pool: pool,
        ..c
    })
    .await
}

/// A TCP server that answers every connection with its name and closes.
async fn backend(name: &'static str) -> (SocketAddr, JoinHandle<()>) {
    backend_at("127.0.0.1:0".parse().unwrap(), name).await
}

/// [`backend`] on `addr`.
async fn backend_at(addr: SocketAddr, name: &'static str) -> (SocketAddr, JoinHandle<()>) {
    let l = TcpListener::bind(addr).await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = s.write_all(name.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, task)
}

/// `step`, failing as `{step} timed out` when it takes over 5s.
async fn within<T>(
    step: &str,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(Duration::from_secs(5), f)
        .await
        .map_err(|_| std::io::Error::other(format!("{step} timed out")))?
}

/// Connects to `addr` and reads what the backend says.
async fn ask(addr: SocketAddr) -> std::io::Result<String> {
    read_answer(within("connect", TcpStream::connect(addr)).await?).await
}

/// Everything the backend says on `s` until it closes.
async fn read_answer(mut s: TcpStream) -> std::io::Result<String> {
    let mut out = String::new();
    within("read", s.read_to_string(&mut out)).await?;
    Ok(out)
}

/// Waits until nothing accepts connections on `addr` any more.
async fn wait_closed(addr: SocketAddr) {
    wait_for("port closed", Duration::from_secs(5), async || {
        TcpStream::connect(addr).await.is_err()
    })
    .await;
}

struct Lb {
    lb: String,
    vip: SocketAddr,
    listener: String,
    pool: String,
}

/// The ID of the seeded `private-subnet`.
async fn private_subnet(c: &TestCloud) -> String {
    c.neutron_id("subnets", "private-subnet").await
}

/// A load balancer with one TCP listener and a ROUND_ROBIN pool of `members`.
async fn make_lb(c: &TestCloud, members: &[SocketAddr]) -> Lb {
    let subnet = private_subnet(c).await;
    let new = c
        .create_lb(json!({"name": "web", "vip_subnet_id": subnet}))
        .await;
    assert_eq!(
        new.reply.body["loadbalancer"]["provisioning_status"],
        "PENDING_CREATE"
    );
    let port = free_port(&new.vip).await;
    let members: Vec<Value> = members
        .iter()
        .map(|m| json!({"address": m.ip().to_string(), "protocol_port": m.port(), "subnet_id": subnet}))
        .collect();
    let tree = c
        .add_listener_and_pool(
            &new.id,
            json!({"name": "http", "protocol": "TCP", "protocol_port": port}),
            json!({"name": "web", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}),
            &members,
        )
        .await;
    for r in &tree.members {
        assert_eq!(r.body["member"]["operating_status"], "NO_MONITOR");
    }
    Lb {
        vip: format!("{}:{port}", new.vip).parse().unwrap(),
        lb: new.id,
        listener: tree.listener,
        pool: tree.pool,
    }
}

/// Updates `listener` of `lb` with the fields in `update`, asserts 200 and waits until `lb` is
/// ACTIVE again.
async fn update_listener(c: &TestCloud, lb: &str, listener: &str, update: Value) {
    let r = c
        .put(
            &format!("{LBAAS}/listeners/{listener}"),
            json!({ "listener": update }),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    wait_lb_active(c, lb).await;
}

async fn member_status(c: &TestCloud, pool: &str) -> Vec<(u16, String)> {
    let r = c.get(&format!("{LBAAS}/pools/{pool}/members")).await;
    let mut out: Vec<(u16, String)> = r.body["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["protocol_port"].as_u64().unwrap() as u16,
                m["operating_status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn traffic_round_robins_health_monitor_ejects_and_cascade_delete_closes() {
    let c = cloud("127.0.101.0/24").await;
    let (a, _a_task) = backend("alpha").await;
    let (b, b_task) = backend("bravo").await;
    let lb = make_lb(&c, &[a, b]).await;
    assert_eq!(lb.vip.ip().to_string(), "127.0.101.1");

    // Round robin: strictly alternating.
    let mut seen = Vec::new();
    for _ in 0..10 {
        seen.push(ask(lb.vip).await.unwrap());
    }
    assert_eq!(seen.iter().filter(|s| *s == "alpha").count(), 5, "{seen:?}");
    assert_eq!(seen.iter().filter(|s| *s == "bravo").count(), 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] != w[1]), "{seen:?}");

    // The API shapes.
    let r = c.get(&format!("{LBAAS}/loadbalancers")).await;
    assert_eq!(r.count("loadbalancers"), 1);
    assert_eq!(
        r.body["loadbalancers"][0]["listeners"][0]["id"],
        lb.listener
    );
    assert_eq!(r.body["loadbalancers"][0]["pools"][0]["id"], lb.pool);
    assert_eq!(r.body["loadbalancers"][0]["operating_status"], "ONLINE");
    assert_eq!(r.body["loadbalancers"][0]["provider"], "amphora");
    let r = c.get(&format!("{LBAAS}/listeners/{}", lb.listener)).await;
    assert_eq!(r.body["listener"]["default_pool_id"], lb.pool);
    assert_eq!(r.body["listener"]["loadbalancers"][0]["id"], lb.lb);

    // A health monitor: both members come ONLINE.
    let r = c
        .post(
            &format!("{LBAAS}/healthmonitors"),
            json!({"healthmonitor": {"pool_id": lb.pool, "type": "TCP", "delay": 1, "timeout": 1,
                "max_retries": 2, "max_retries_down": 2}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    wait_lb_active(&c, &lb.lb).await;
    wait_for("members ONLINE", Duration::from_secs(5), async || {
        member_status(&c, &lb.pool)
            .await
            .iter()
            .all(|(_, s)| s == "ONLINE")
    })
    .await;

    // Stop bravo: within delay × max_retries_down (+ margin) it is ERROR, all traffic to alpha.
    b_task.abort();
    let _ = b_task.await;
    let stopped = Instant::now();
    wait_for("bravo ERROR", Duration::from_secs(2 + 3), async || {
        member_status(&c, &lb.pool)
            .await
            .contains(&(b.port(), "ERROR".to_owned()))
    })
    .await;
    eprintln!("bravo marked ERROR after {:?}", stopped.elapsed());
    for _ in 0..6 {
        assert_eq!(ask(lb.vip).await.unwrap(), "alpha");
    }
    let r = c
        .get(&format!("{LBAAS}/loadbalancers/{}/status", lb.lb))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let tree = &r.body["statuses"]["loadbalancer"];
    assert_eq!(tree["operating_status"], "DEGRADED", "{tree}");
    assert_eq!(
        tree["listeners"][0]["pools"][0]["operating_status"],
        "DEGRADED"
    );
    assert_eq!(
        tree["listeners"][0]["pools"][0]["health_monitor"]["type"],
        "TCP"
    );
    let members = tree["listeners"][0]["pools"][0]["members"]
        .as_array()
        .unwrap();
    assert!(members
        .iter()
        .any(|m| m["protocol_port"] == b.port() && m["operating_status"] == "ERROR"));

    // Metrics.
    let text = c.metrics().await;
    assert!(text.contains(&format!("address=\"{b}\"}} 0")), "{text}");
    assert!(text.contains(&format!("address=\"{a}\"}} 1")), "{text}");
    assert!(
        text.contains("localcloud_lb_listener_connections_total{"),
        "{text}"
    );

    // Bravo back: ONLINE again and back in rotation.
    let (_, _b2) = backend_at(b, "bravo").await;
    wait_for("bravo ONLINE", Duration::from_secs(2 + 3), async || {
        member_status(&c, &lb.pool)
            .await
            .iter()
            .all(|(_, s)| s == "ONLINE")
    })
    .await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(ask(lb.vip).await.unwrap());
    }
    assert!(seen.contains(&"bravo".to_owned()), "{seen:?}");

    // Delete without cascade: 400 (it has children); with cascade: gone and the port closed.
    let r = c.delete(&format!("{LBAAS}/loadbalancers/{}", lb.lb)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["faultcode"], "Client");
    let r = c
        .delete(&format!("{LBAAS}/loadbalancers/{}?cascade=true", lb.lb))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    wait_closed(lb.vip).await;
    assert_eq!(
        c.get(&format!("{LBAAS}/loadbalancers/{}", lb.lb))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        c.get(&format!("{LBAAS}/pools/{}", lb.pool)).await.status,
        StatusCode::NOT_FOUND
    );
    c.shutdown().await;
}

#[tokio::test]
async fn listeners_reopen_after_a_restart() {
    let mut c = cloud("127.0.102.0/24").await;
    let (a, _a_task) = backend("alpha").await;
    let lb = make_lb(&c, &[a]).await;
    assert_eq!(ask(lb.vip).await.unwrap(), "alpha");
    c.restart().await;
    c.login().await;
    wait_for("listener re-opened", Duration::from_secs(5), async || {
        ask(lb.vip).await.is_ok_and(|s| s == "alpha")
    })
    .await;
    let r = c.get(&format!("{LBAAS}/loadbalancers/{}", lb.lb)).await;
    assert_eq!(r.body["loadbalancer"]["provisioning_status"], "ACTIVE");

    // Deleting the listener alone closes its port; the load balancer stays.
    let r = c
        .delete(&format!("{LBAAS}/listeners/{}", lb.listener))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    wait_closed(lb.vip).await;
    wait_lb_active(&c, &lb.lb).await;
    c.shutdown().await;
}

#[tokio::test]
async fn member_changes_keep_established_connections() {
    let c = cloud("127.0.103.0/24").await;
    // An echo backend: the connection stays open while the client writes.
    let echo = echo_backend().await;
    let (other, _o) = backend("other").await;
    let lb = make_lb(&c, &[echo]).await;
    let mut s = TcpStream::connect(lb.vip).await.unwrap();
    s.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"ping");

    // Replace the members (batch update as the OpenStack CCM does): echo goes, other comes.
    let r = c
        .put(
            &format!("{LBAAS}/pools/{}/members", lb.pool),
            json!({"members": [{"address": "127.0.0.1", "protocol_port": other.port()}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    wait_lb_active(&c, &lb.lb).await;
    assert_eq!(ask(lb.vip).await.unwrap(), "other");
    // The established connection still works, and half-close passes through.
    s.write_all(b"pong").await.unwrap();
    s.shutdown().await.unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, b"pong");
    c.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_octavias_errors() {
    let c = cloud("127.0.104.0/24").await;
    let r = c
        .post(
            &format!("{LBAAS}/loadbalancers"),
            json!({"loadbalancer": {"name": "x"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["faultcode"], "Client");
    assert!(r.body["faultstring"].as_str().unwrap().contains("VIP"));
    assert!(r.body.get("debuginfo").is_some());
    let r = c
        .post(
            &format!("{LBAAS}/loadbalancers"),
            json!({"loadbalancer": {"vip_network_id": "n", "bogus": 1}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

    let r = c.get(&format!("{LBAAS}/loadbalancers/nope")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.body["faultstring"], "Load Balancer nope not found.");
    let r = c.get(&format!("{LBAAS}/pools/nope/members")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = c.get(&format!("{LBAAS}/nothing-here")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.body["faultcode"], "Client");
    let r = c
        .raw(Method::GET, &format!("{LBAAS}/loadbalancers"), None, None)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);

    let (a, _a) = backend("alpha").await;
    let lb = make_lb(&c, &[a]).await;
    let port = lb.vip.port();
    for (body, status) in [
        (
            json!({"listener": {"loadbalancer_id": lb.lb, "protocol": "FOO", "protocol_port": 80}}),
            400,
        ),
        (
            json!({"listener": {"loadbalancer_id": lb.lb, "protocol": "TCP", "protocol_port": 70000}}),
            400,
        ),
        (
            json!({"listener": {"loadbalancer_id": lb.lb, "protocol": "TCP"}}),
            400,
        ),
        (
            json!({"listener": {"loadbalancer_id": "nope", "protocol": "TCP", "protocol_port": 80}}),
            404,
        ),
        (
            json!({"listener": {"loadbalancer_id": lb.lb, "protocol": "TCP", "protocol_port": port}}),
            409,
        ),
    ] {
        let r = c.post(&format!("{LBAAS}/listeners"), body.clone()).await;
        assert_eq!(r.status.as_u16(), status, "{body} → {}", r.body);
        assert!(r.body["faultstring"].is_string(), "{}", r.body);
    }
    // Immutable attributes, a second default pool for the listener, a duplicate member: 409; an
    // algorithm Octavia does not know: 400.
    for (method, path, body, status) in [
        (
            Method::PUT,
            format!("{LBAAS}/listeners/{}", lb.listener),
            json!({"listener": {"protocol_port": port.wrapping_add(1)}}),
            StatusCode::CONFLICT,
        ),
        (
            Method::PUT,
            format!("{LBAAS}/loadbalancers/{}", lb.lb),
            json!({"loadbalancer": {"vip_address": "127.0.104.77"}}),
            StatusCode::CONFLICT,
        ),
        (
            Method::POST,
            format!("{LBAAS}/pools"),
            json!({"pool": {"listener_id": lb.listener, "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}}),
            StatusCode::CONFLICT,
        ),
        (
            Method::POST,
            format!("{LBAAS}/pools/{}/members", lb.pool),
            json!({"member": {"address": "127.0.0.1", "protocol_port": a.port()}}),
            StatusCode::CONFLICT,
        ),
        (
            Method::POST,
            format!("{LBAAS}/pools"),
            json!({"pool": {"loadbalancer_id": lb.lb, "protocol": "TCP", "lb_algorithm": "RANDOM"}}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let r = c.raw(method, &path, Some(body), Some(&c.token)).await;
        assert_eq!(r.status, status, "{}", r.body);
    }

    // While PENDING_UPDATE, further changes are refused with 409.
    let rename = |n: &str| json!({"loadbalancer": {"name": n}});
    let path = format!("{LBAAS}/loadbalancers/{}", lb.lb);
    let (r1, r2) = tokio::join!(c.put(&path, rename("a")), c.put(&path, rename("b")),);
    let mut statuses = [r1.status.as_u16(), r2.status.as_u16()];
    statuses.sort();
    assert!(
        statuses == [200, 409] || statuses == [200, 200],
        "{statuses:?}"
    );
    let r = c
        .put(&format!("{LBAAS}/loadbalancers/{}", lb.lb), rename("c"))
        .await;
    if r.status == StatusCode::CONFLICT {
        assert!(r.body["faultstring"]
            .as_str()
            .unwrap()
            .contains("is immutable and cannot be updated"));
    }
    wait_lb_active(&c, &lb.lb).await;

    // The catalog lists the service.
    let r = c.get("/identity/v3/auth/catalog").await;
    let lbs = find(&r.body["catalog"], "type", "load-balancer");
    assert!(lbs["endpoints"][0]["url"]
        .as_str()
        .unwrap()
        .ends_with("/load-balancer"));
    c.shutdown().await;
}

/// `2018-08-23T20:05:21`: Octavia's timestamps carry no zone suffix and no fraction.
fn assert_octavia_time(v: &Value, what: &str) {
    for k in ["created_at", "updated_at"] {
        let t = v[k].as_str().unwrap_or_else(|| panic!("{what} {k}: {v}"));
        let b = t.as_bytes();
        let shape_ok = t.len() == 19
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                _ => c.is_ascii_digit(),
            });
        assert!(
            shape_ok,
            "{what} {k} is {t:?}, not like 2018-08-23T20:05:21"
        );
    }
}

#[tokio::test]
async fn single_call_create_builds_the_whole_tree_and_carries_traffic() {
    let c = cloud("127.1.205.0/24").await;
    let (a, _a_task) = backend("alpha").await;
    let (b, _b_task) = backend("bravo").await;
    let vip = "127.1.205.7";
    let port = free_port(vip).await;
    let other_port = free_port(vip).await;
    let subnet = private_subnet(&c).await;
    let member = |s: SocketAddr| json!({"address": s.ip().to_string(), "protocol_port": s.port()});
    let r = c
        .post(
            &format!("{LBAAS}/loadbalancers"),
            json!({"loadbalancer": {
                "name": "tree", "vip_subnet_id": subnet, "vip_address": vip,
                "listeners": [{
                    "name": "tcp", "protocol": "TCP", "protocol_port": port,
                    "default_pool": {
                        "name": "web", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                        "members": [member(a), member(b)],
                        "healthmonitor": {"type": "TCP", "delay": 1, "timeout": 1, "max_retries": 1}
                    }
                }],
                "pools": [{"name": "spare", "protocol": "TCP", "lb_algorithm": "LEAST_CONNECTIONS",
                           "members": [member(a)]}]
            }}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let body = &r.body["loadbalancer"];
    assert_eq!(body["provisioning_status"], "PENDING_CREATE");
    assert_eq!(body["listeners"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["pools"].as_array().unwrap().len(), 2, "{body}");
    let lb = r.id("loadbalancer");
    let listener = body["listeners"][0]["id"].as_str().unwrap().to_owned();
    let web = find(&body["pools"], "name", "web");
    assert_eq!(body["listeners"][0]["default_pool_id"], web["id"]);
    assert_eq!(web["members"].as_array().unwrap().len(), 2, "{web}");
    assert_eq!(web["healthmonitor"]["type"], "TCP", "{web}");
    let pool = web["id"].as_str().unwrap().to_owned();
    wait_lb_active(&c, &lb).await;

    // Every object of the tree is ACTIVE and listed where the separate calls would put it.
    let r = c
        .get(&format!("{LBAAS}/listeners?loadbalancer_id={lb}"))
        .await;
    assert_eq!(r.body["listeners"][0]["id"], listener);
    assert_eq!(r.body["listeners"][0]["provisioning_status"], "ACTIVE");
    let r = c.get(&format!("{LBAAS}/pools?loadbalancer_id={lb}")).await;
    assert_eq!(r.count("pools"), 2, "{}", r.body);
    let r = c.get(&format!("{LBAAS}/healthmonitors")).await;
    assert_eq!(r.body["healthmonitors"][0]["pools"][0]["id"], pool);
    wait_for("members ONLINE", Duration::from_secs(5), async || {
        member_status(&c, &pool)
            .await
            .iter()
            .all(|(_, s)| s == "ONLINE")
    })
    .await;

    // Traffic through the VIP reaches both members.
    let addr: SocketAddr = format!("{vip}:{port}").parse().unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(ask(addr).await.unwrap());
    }
    assert!(
        seen.contains(&"alpha".to_owned()) && seen.contains(&"bravo".to_owned()),
        "{seen:?}"
    );

    // A bad nested object refuses the whole create, naming the field, and stores nothing.
    let r = c
        .post(
            &format!("{LBAAS}/loadbalancers"),
            json!({"loadbalancer": {"vip_subnet_id": subnet, "listeners": [{
                "protocol": "TCP", "protocol_port": other_port,
                "default_pool": {"protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                                 "members": [{"address": "127.0.0.1", "protocol_port": 0}]}}]}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(
        r.body["faultstring"]
            .as_str()
            .unwrap()
            .contains("protocol_port"),
        "{}",
        r.body
    );
    let r = c.get(&format!("{LBAAS}/loadbalancers")).await;
    assert_eq!(r.count("loadbalancers"), 1, "{}", r.body);

    // Octavia's timestamp form on every kind.
    for (path, key) in [
        ("loadbalancers", "loadbalancers"),
        ("listeners", "listeners"),
        ("pools", "pools"),
        ("healthmonitors", "healthmonitors"),
        (&format!("pools/{pool}/members") as &str, "members"),
    ] {
        let r = c.get(&format!("{LBAAS}/{path}")).await;
        let items = r.body[key].as_array().unwrap();
        assert!(!items.is_empty(), "{path}: {}", r.body);
        for item in items {
            assert_octavia_time(item, path);
        }
    }

    // Cascade delete removes the tree.
    let r = c
        .delete(&format!("{LBAAS}/loadbalancers/{lb}?cascade=true"))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = c.get(&format!("{LBAAS}/pools")).await;
    assert_eq!(r.count("pools"), 0, "{}", r.body);
}

#[tokio::test]
async fn the_vip_is_a_neutron_port_and_a_floating_ip_on_it_carries_traffic() {
    let c = cloud("127.1.206.0/24").await;
    let (a, _a_task) = backend("alpha").await;
    let vip = "127.1.206.9";
    let port = free_port(vip).await;
    let subnet = private_subnet(&c).await;
    let private = c.network_id("private").await;
    let public = c.network_id("public").await;
    let r = c
        .post(
            &format!("{LBAAS}/loadbalancers"),
            json!({"loadbalancer": {"name": "fip", "vip_subnet_id": subnet, "vip_address": vip,
                "listeners": [{"protocol": "TCP", "protocol_port": port, "default_pool": {
                    "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                    "members": [{"address": a.ip().to_string(), "protocol_port": a.port()}]}}]}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let lb = r.id("loadbalancer");
    let vip_port = r.str("loadbalancer", "vip_port_id");
    assert_eq!(r.body["loadbalancer"]["vip_network_id"], private.as_str());
    wait_lb_active(&c, &lb).await;

    // The VIP port exists in Neutron, owned by Octavia, with the VIP as its fixed IP.
    let p = c.get(&format!("/network/v2.0/ports/{vip_port}")).await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.body);
    assert_eq!(p.body["port"]["device_owner"], "Octavia");
    assert_eq!(p.body["port"]["device_id"], format!("lb-{lb}"));
    assert_eq!(p.body["port"]["network_id"], private.as_str());
    assert_eq!(p.body["port"]["fixed_ips"][0]["ip_address"], vip);
    assert_eq!(p.body["port"]["fixed_ips"][0]["subnet_id"], subnet.as_str());
    let r = c.get("/network/v2.0/ports?device_owner=Octavia").await;
    assert_eq!(r.count("ports"), 1, "{}", r.body);

    // A floating IP on the public network, associated with the VIP port at creation.
    let r = c
        .neutron_create(
            "floatingip",
            json!({"floating_network_id": public, "port_id": vip_port}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let fip_id = r.id("floatingip");
    let fip = r.str("floatingip", "floating_ip_address");
    assert_eq!(r.body["floatingip"]["fixed_ip_address"], vip);
    assert!(fip.starts_with("127.24.4."), "{fip}");
    let through: SocketAddr = format!("{fip}:{port}").parse().unwrap();
    wait_for(
        "traffic through the floating IP",
        Duration::from_secs(5),
        async || ask(through).await.is_ok_and(|s| s == "alpha"),
    )
    .await;

    // Disassociated (PUT port_id null): the floating IP stops answering; re-associated, again.
    let serving = async |port: Value, answers: bool| {
        let r = c.set_floating_ip_port(&fip_id, port).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        wait_for(
            "the floating IP to follow",
            Duration::from_secs(5),
            async || ask(through).await.is_ok_and(|s| s == "alpha") == answers,
        )
        .await;
    };
    serving(Value::Null, false).await;
    serving(json!(vip_port), true).await;
    // The VIP itself still answers.
    assert_eq!(
        ask(format!("{vip}:{port}").parse().unwrap()).await.unwrap(),
        "alpha"
    );

    // Deleting the load balancer deletes its VIP port and leaves the floating IP unassociated.
    let r = c
        .delete(&format!("{LBAAS}/loadbalancers/{lb}?cascade=true"))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let p = c.get(&format!("/network/v2.0/ports/{vip_port}")).await;
    assert_eq!(p.status, StatusCode::NOT_FOUND, "{}", p.body);
    let r = c.get(&format!("/network/v2.0/floatingips/{fip_id}")).await;
    assert_eq!(r.body["floatingip"]["port_id"], Value::Null, "{}", r.body);
    wait_for(
        "floating IP closed after delete",
        Duration::from_secs(5),
        async || ask(through).await.is_err(),
    )
    .await;
}

/// Octavia's flavors: listed and shown (with filters, as the CLI looks names up), a load
/// balancer created with one carries its `flavor_id`, an unknown or disabled flavor is
/// Octavia's 400 and creates nothing.
#[tokio::test]
async fn flavors_are_listed_and_checked_when_a_load_balancer_asks_for_one() {
    let c = cloud("127.0.108.0/24").await;
    let all = c.get(&format!("{LBAAS}/flavors")).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    let names: Vec<&str> = all.body["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["amphora-single", "amphora-ha", "amphora-retired"]);
    let ha = c.get(&format!("{LBAAS}/flavors?name=amphora-ha")).await;
    let ha = ha.body["flavors"].as_array().unwrap();
    assert_eq!(ha.len(), 1);
    let ha_id = ha[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(ha[0]["enabled"], true);
    let enabled = c.get(&format!("{LBAAS}/flavors?enabled=false")).await;
    assert_eq!(enabled.body["flavors"].as_array().unwrap().len(), 1);
    let one = c.get(&format!("{LBAAS}/flavors/{ha_id}")).await;
    assert_eq!(one.body["flavor"]["name"], "amphora-ha");
    let none = c.get(&format!("{LBAAS}/flavors/nope")).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    assert_eq!(none.body["faultstring"], "Flavor nope not found.");

    let subnet = private_subnet(&c).await;
    let lb = c
        .create_lb(json!({"name": "flavoured", "vip_subnet_id": subnet, "flavor_id": ha_id}))
        .await;
    let shown = c.get(&format!("{LBAAS}/loadbalancers/{}", lb.id)).await;
    assert_eq!(shown.body["loadbalancer"]["flavor_id"], ha_id.as_str());

    let retired = names_to_id(&all.body, "amphora-retired");
    for (flavor, says) in [
        (
            "nope".to_owned(),
            "Validation failure: Invalid flavor_id.".to_owned(),
        ),
        (
            retired.clone(),
            format!("The selected flavor is not allowed in this deployment: {retired}"),
        ),
    ] {
        let r = c
            .post(
                &format!("{LBAAS}/loadbalancers"),
                json!({"loadbalancer": {"name": "refused", "vip_subnet_id": subnet, "flavor_id": flavor}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(r.body["faultstring"], says.as_str());
    }
    let list = c.get(&format!("{LBAAS}/loadbalancers?name=refused")).await;
    assert_eq!(list.body["loadbalancers"].as_array().unwrap().len(), 0);
}

fn names_to_id(flavors: &Value, name: &str) -> String {
    flavors["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}
