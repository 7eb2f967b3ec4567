//! Service load balancers on the local cloud's Octavia API, with real traffic through its L4
//! data plane (VIPs are loopback addresses; members are test servers on 127.0.0.0/8).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hypercloud_cloudprovider::{Interface, Layout};
use hypercloud_providers_openstack::OpenStack;
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeStatus, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reqwest::Method;
use support::Cloud;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A TCP server on `ip:port` answering `name` to every connection.
async fn backend(ip: &str, port: u16, name: &'static str) {
    let l = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    tokio::spawn(async move {
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
}

/// What the server behind `addr` answers (retrying briefly while the data plane settles).
async fn ask(addr: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(Ok(mut s)) =
            tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await
        {
            let mut out = String::new();
            if tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out))
                .await
                .is_ok_and(|r| r.is_ok())
                && !out.is_empty()
            {
                return Some(out);
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A provider for `cloud` with `extra` config, the catalog read (so Octavia is known).
async fn ready(cloud: &Cloud, extra: &str) -> Arc<OpenStack> {
    let os = cloud.provider_with(extra);
    os.initialize(None).await.unwrap();
    os
}

/// One Node at 127.0.0.1 whose node port answers `name`: (node port, a free Service port,
/// the Nodes).
async fn one_node(name: &'static str) -> (u16, u16, [Node; 1]) {
    let np = free_port("127.0.0.1");
    backend("127.0.0.1", np, name).await;
    // The Service's port is the listener's on the VIP: a test cloud's first VIP is 127.0.100.1
    // in every test (each has its own cloud on the default pool), so the port is picked free
    // there, not on 127.0.0.1, where another test's listener would not be seen (a listener
    // that could not bind put a load balancer in ERROR once).
    (np, free_port("127.0.100.1"), [node("node-1", "127.0.0.1")])
}

fn node(name: &str, ip: &str) -> Node {
    let mut n = support::node(name, None);
    n.status = Some(NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "Hostname".into(),
                address: name.into(),
            },
            NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            },
        ]),
        ..Default::default()
    });
    n
}

fn service(ports: &[(u16, u16)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some("1b4e28ba-2fa1-11d2-883f-00163e6fbc11".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .enumerate()
                    .map(|(i, (port, node_port))| ServicePort {
                        name: Some(format!("p{i}")),
                        protocol: Some("TCP".into()),
                        port: i32::from(*port),
                        node_port: Some(i32::from(*node_port)),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn lbs(cloud: &Cloud) -> Vec<serde_json::Value> {
    cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/loadbalancers", None)
        .await["loadbalancers"]
        .as_array()
        .unwrap()
        .clone()
}

async fn members(cloud: &Cloud) -> Vec<String> {
    let pools = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/pools", None)
        .await;
    let mut out = Vec::new();
    for p in pools["pools"].as_array().unwrap() {
        let id = p["id"].as_str().unwrap();
        let m = cloud
            .ok(
                Method::GET,
                &format!("/load-balancer/v2/lbaas/pools/{id}/members"),
                None,
            )
            .await;
        for m in m["members"].as_array().unwrap() {
            out.push(format!(
                "{}:{}",
                m["address"].as_str().unwrap(),
                m["protocol_port"]
            ));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn service_load_balancer_carries_real_traffic_and_converges() {
    let cloud = Cloud::start().await;
    let os = cloud.provider_with("");
    assert!(
        os.load_balancer().is_none(),
        "unknown until the catalog has been read"
    );
    os.initialize(None).await.unwrap();
    let lb = os.load_balancer().expect("the local cloud has Octavia");

    // Backends: one per Service port, at its node port on 127.0.0.1.
    let (np_a, np_b) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    backend("127.0.0.1", np_a, "alpha").await;
    backend("127.0.0.1", np_b, "beta").await;
    let (port_a, port_b) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    let svc = service(&[(port_a, np_a), (port_b, np_b)]);
    let nodes = [node("node-1", "127.0.0.1"), node("node-2", "127.0.0.1")];

    assert_eq!(
        lb.get_load_balancer_name("kubernetes", &svc),
        "kube_service_kubernetes_shop_web"
    );
    assert_eq!(
        lb.get_load_balancer("kubernetes", &svc).await.unwrap(),
        None
    );

    let t = Instant::now();
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    eprintln!("ensure_load_balancer (create, 2 ports): {:?}", t.elapsed());
    let vip = status.ingress.as_ref().unwrap()[0].ip.clone().unwrap();
    assert!(vip.starts_with("127."), "VIP {vip} is a loopback address");
    assert_eq!(
        lb.get_load_balancer("kubernetes", &svc).await.unwrap(),
        Some(status.clone())
    );
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["name"], "kube_service_kubernetes_shop_web");
    let lb_id = all[0]["id"].clone();

    // Real traffic through the VIP.
    assert_eq!(
        ask(&format!("{vip}:{port_a}")).await.as_deref(),
        Some("alpha")
    );
    assert_eq!(
        ask(&format!("{vip}:{port_b}")).await.as_deref(),
        Some("beta")
    );
    // Two nodes with the same address are one member.
    assert_eq!(members(&cloud).await, {
        let mut m = vec![format!("127.0.0.1:{np_a}"), format!("127.0.0.1:{np_b}")];
        m.sort();
        m
    });

    // Ensuring again converges without recreating anything.
    let calls = os.api_calls();
    let t = Instant::now();
    let again = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    eprintln!(
        "ensure_load_balancer (no change): {:?}, {} API calls",
        t.elapsed(),
        os.api_calls() - calls
    );
    assert_eq!(again, status);
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["id"], lb_id);
    assert_eq!(all[0]["listeners"].as_array().unwrap().len(), 2);

    // Node set change: the members follow, and so does the traffic.
    backend("127.0.0.2", np_a, "alpha-on-node-3").await;
    backend("127.0.0.2", np_b, "beta-on-node-3").await;
    let t = Instant::now();
    lb.update_load_balancer("kubernetes", &svc, &[node("node-3", "127.0.0.2")])
        .await
        .unwrap();
    eprintln!("update_load_balancer (member change): {:?}", t.elapsed());
    assert_eq!(members(&cloud).await, {
        let mut m = vec![format!("127.0.0.2:{np_a}"), format!("127.0.0.2:{np_b}")];
        m.sort();
        m
    });
    assert_eq!(
        ask(&format!("{vip}:{port_a}")).await.as_deref(),
        Some("alpha-on-node-3")
    );

    // A port removed from the Service: its listener and pool go, the rest stays.
    let one_port = service(&[(port_a, np_a)]);
    lb.ensure_load_balancer("kubernetes", &one_port, &nodes)
        .await
        .unwrap();
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["id"], lb_id);
    assert_eq!(all[0]["listeners"].as_array().unwrap().len(), 1);
    assert_eq!(all[0]["pools"].as_array().unwrap().len(), 1);
    assert_eq!(members(&cloud).await, vec![format!("127.0.0.1:{np_a}")]);
    assert_eq!(
        ask(&format!("{vip}:{port_a}")).await.as_deref(),
        Some("alpha")
    );

    // Delete: gone from the API and the VIP port closed; deleting again succeeds.
    let t = Instant::now();
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    eprintln!("ensure_load_balancer_deleted: {:?}", t.elapsed());
    assert_eq!(
        lb.get_load_balancer("kubernetes", &svc).await.unwrap(),
        None
    );
    assert!(lbs(&cloud).await.is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(format!("{vip}:{port_a}"))
        .await
        .is_ok()
    {
        assert!(
            Instant::now() < deadline,
            "VIP port still open after delete"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
}

#[tokio::test]
async fn health_monitors_follow_create_monitor() {
    let cloud = Cloud::start().await;
    let with = cloud.provider_with(
        "[LoadBalancer]\ncreate-monitor = true\nmonitor-delay = 2s\nmonitor-timeout = 1s\nmonitor-max-retries = 3\nlb-method = LEAST_CONNECTIONS\n",
    );
    with.initialize(None).await.unwrap();
    let (np, port, nodes) = one_node("monitored").await;
    let svc = service(&[(port, np)]);
    let status = with
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let vip = status.ingress.as_ref().unwrap()[0].ip.clone().unwrap();
    let monitors = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/healthmonitors", None)
        .await;
    let m = &monitors["healthmonitors"].as_array().unwrap()[0];
    assert_eq!(m["type"], "TCP");
    assert_eq!(m["delay"], 2);
    assert_eq!(m["timeout"], 1);
    assert_eq!(m["max_retries"], 3);
    assert_eq!(m["name"], "monitor_0_kube_service_kubernetes_shop_web");
    let pools = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/pools", None)
        .await;
    assert_eq!(pools["pools"][0]["lb_algorithm"], "LEAST_CONNECTIONS");
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("monitored")
    );

    // The same Service ensured by a provider without create-monitor: the monitor goes, the
    // algorithm returns to the default, the load balancer stays.
    let without = cloud.provider_with("");
    without.initialize(None).await.unwrap();
    let again = without
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(again, status);
    let monitors = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/healthmonitors", None)
        .await;
    assert!(monitors["healthmonitors"].as_array().unwrap().is_empty());
    let pools = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/pools", None)
        .await;
    assert_eq!(pools["pools"][0]["lb_algorithm"], "ROUND_ROBIN");
    assert_eq!(lbs(&cloud).await.len(), 1);
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("monitored")
    );
}

/// The public network's id (the local cloud's floating IP pool).
async fn public_network(cloud: &Cloud) -> String {
    cloud
        .ok(Method::GET, "/network/v2.0/networks?name=public", None)
        .await["networks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn floating_ips(cloud: &Cloud) -> Vec<serde_json::Value> {
    cloud
        .ok(Method::GET, "/network/v2.0/floatingips", None)
        .await["floatingips"]
        .as_array()
        .unwrap()
        .clone()
}

fn annotate(mut svc: Service, key: &str, value: &str) -> Service {
    svc.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
    svc
}

fn ingress_ip(status: &k8s_openapi::api::core::v1::LoadBalancerStatus) -> String {
    status.ingress.as_ref().unwrap()[0].ip.clone().unwrap()
}

/// In-tree the load balancer is named `a<uid>` (children `listener_<name>_<i>`); the external
/// provider then finds it under that legacy name and adopts it (same Octavia id, tagged with
/// its own name, traffic uninterrupted) instead of creating a second one, and deletes it.
#[tokio::test]
async fn in_tree_names_and_external_adoption_of_legacy_load_balancers() {
    let cloud = Cloud::start().await;
    let in_tree = cloud.provider_with_in("", Layout::InTree);
    in_tree.initialize(None).await.unwrap();
    let (np, port, nodes) = one_node("legacy").await;
    let svc = service(&[(port, np)]);
    let lb = in_tree.load_balancer().unwrap();
    let legacy = "a1b4e28ba2fa111d2883f00163e6fbc1";
    assert_eq!(lb.get_load_balancer_name("kubernetes", &svc), legacy);
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let vip = ingress_ip(&status);
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["name"], legacy);
    assert_eq!(
        all[0]["description"],
        format!("Kubernetes external service {legacy}")
    );
    let id = all[0]["id"].clone();
    let listeners = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/listeners", None)
        .await;
    assert_eq!(
        listeners["listeners"][0]["name"],
        format!("listener_{legacy}_0")
    );
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("legacy")
    );

    // The cloud-controller-manager takes over: the same load balancer, adopted.
    let external = cloud.provider_with("");
    external.initialize(None).await.unwrap();
    let ext = external.load_balancer().unwrap();
    assert_eq!(
        ext.get_load_balancer("kubernetes", &svc).await.unwrap(),
        Some(status.clone())
    );
    let calls = external.api_calls();
    let again = ext
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    eprintln!(
        "external ensure adopting a legacy load balancer: {} API calls",
        external.api_calls() - calls
    );
    assert_eq!(again, status);
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1, "no second load balancer: {all:?}");
    assert_eq!(all[0]["id"], id);
    assert_eq!(all[0]["name"], legacy, "OCCM tags, it does not rename");
    assert!(
        all[0]["tags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "kube_service_kubernetes_shop_web"),
        "{:?}",
        all[0]["tags"]
    );
    let listeners = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/listeners", None)
        .await;
    let l = &listeners["listeners"][0];
    assert_eq!(l["name"], format!("listener_{legacy}_0"), "not renamed");
    assert_eq!(
        l["tags"],
        serde_json::json!(["kube_service_kubernetes_shop_web"])
    );
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("legacy")
    );

    // With the id annotation the look-up is by id, whatever the name.
    let annotated = annotate(
        svc.clone(),
        "loadbalancer.openstack.org/load-balancer-id",
        id.as_str().unwrap(),
    );
    ext.update_load_balancer("kubernetes", &annotated, &nodes)
        .await
        .unwrap();
    // An id that no longer exists is an error for ensure (no second load balancer)...
    let gone = annotate(
        svc.clone(),
        "loadbalancer.openstack.org/load-balancer-id",
        "0e4b2a38-7d5f-4c1e-9a3b-2f6d8c1e5a70",
    );
    let e = ext
        .ensure_load_balancer("kubernetes", &gone, &nodes)
        .await
        .unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("does not exist"),
        "{e}"
    );
    // ...and nothing to do for get and delete.
    assert_eq!(
        ext.get_load_balancer("kubernetes", &gone).await.unwrap(),
        None
    );
    ext.ensure_load_balancer_deleted("kubernetes", &gone)
        .await
        .unwrap();
    assert_eq!(lbs(&cloud).await.len(), 1);

    // The external provider deletes the adopted load balancer: its legacy name carries the
    // Service's UID (OCCM v1.34 would leave it; see docs/openstack-provider.md).
    ext.ensure_load_balancer_deleted("kubernetes", &annotated)
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
}

/// A floating IP from `floating-network-id` on the VIP port is the ingress IP and carries
/// real traffic; the internal annotation releases it; `keep-floatingip` keeps it past the
/// delete, and `spec.loadBalancerIP` attaches that kept address to the next load balancer.
#[tokio::test]
async fn floating_ips_carry_traffic_and_follow_the_annotations() {
    let (cloud, os) = with_floating_ips().await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("via-fip").await;
    let svc = service(&[(port, np)]);

    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let fip = ingress_ip(&status);
    assert!(fip.starts_with("127.24.4."), "a public address: {fip}");
    let all = lbs(&cloud).await;
    let vip = all[0]["vip_address"].as_str().unwrap().to_owned();
    assert_ne!(fip, vip);
    let fips = floating_ips(&cloud).await;
    assert_eq!(fips.len(), 1);
    assert_eq!(fips[0]["port_id"], all[0]["vip_port_id"]);
    assert!(fips[0]["description"]
        .as_str()
        .unwrap()
        .starts_with("Floating IP for Kubernetes external service shop/web"));
    // Real traffic through the floating IP.
    assert_eq!(
        ask(&format!("{fip}:{port}")).await.as_deref(),
        Some("via-fip")
    );
    assert_eq!(
        lb.get_load_balancer("kubernetes", &svc).await.unwrap(),
        Some(status.clone())
    );
    // Ensuring again keeps the same floating IP.
    assert_eq!(
        lb.ensure_load_balancer("kubernetes", &svc, &nodes)
            .await
            .unwrap(),
        status
    );
    assert_eq!(floating_ips(&cloud).await.len(), 1);

    // Internal: the floating IP (ours) is deleted and the VIP is the ingress.
    let internal = annotate(
        svc.clone(),
        "service.beta.kubernetes.io/openstack-internal-load-balancer",
        "true",
    );
    let st = lb
        .ensure_load_balancer("kubernetes", &internal, &nodes)
        .await
        .unwrap();
    assert_eq!(ingress_ip(&st), vip);
    assert!(floating_ips(&cloud).await.is_empty());
    let bad = annotate(
        svc.clone(),
        "service.beta.kubernetes.io/openstack-internal-load-balancer",
        "yes",
    );
    let e = lb
        .ensure_load_balancer("kubernetes", &bad, &nodes)
        .await
        .unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("openstack-internal-load-balancer"),
        "{e}"
    );

    // External again, then deleted with keep-floatingip: the address stays, unattached.
    let st = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let kept = ingress_ip(&st);
    assert!(kept.starts_with("127.24.4."), "{kept}");
    let keep = annotate(
        svc.clone(),
        "loadbalancer.openstack.org/keep-floatingip",
        "true",
    );
    lb.ensure_load_balancer_deleted("kubernetes", &keep)
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
    let fips = floating_ips(&cloud).await;
    assert_eq!(fips.len(), 1);
    assert_eq!(fips[0]["floating_ip_address"], kept.as_str());
    assert!(fips[0]["port_id"].is_null(), "{:?}", fips[0]);

    // spec.loadBalancerIP names the kept address: attached to the new load balancer.
    let mut pinned = svc.clone();
    pinned.spec.as_mut().unwrap().load_balancer_ip = Some(kept.clone());
    let st = lb
        .ensure_load_balancer("kubernetes", &pinned, &nodes)
        .await
        .unwrap();
    assert_eq!(ingress_ip(&st), kept);
    assert_eq!(floating_ips(&cloud).await.len(), 1);
    assert_eq!(
        ask(&format!("{kept}:{port}")).await.as_deref(),
        Some("via-fip")
    );

    // A plain delete releases it (it is ours).
    lb.ensure_load_balancer_deleted("kubernetes", &pinned)
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
    assert!(floating_ips(&cloud).await.is_empty());
}

/// External: the load balancer's id and address go to the Service's annotations with one
/// merge patch through the client given to `initialize`, as OCCM's service patcher; an
/// up-to-date Service is not patched again, and in-tree nothing is written.
#[tokio::test]
async fn external_layout_writes_the_load_balancer_id_to_the_service() {
    use http::{Request, Response};
    use kube::client::Body;

    let cloud = Cloud::start().await;
    let (mock, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(mock, "default");
    let os = cloud.provider_with("");
    os.initialize(Some(client)).await.unwrap();
    let lb = os.load_balancer().unwrap();
    let np = free_port("127.0.0.1");
    let svc = service(&[(free_port("127.0.0.1"), np)]);
    let nodes = [node("node-1", "127.0.0.1")];

    let apiserver = tokio::spawn(async move {
        let (request, send) = handle.next_request().await.expect("a request");
        let method = request.method().to_string();
        let uri = request.uri().to_string();
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        send.send_response(
            Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(Body::from(
                    serde_json::to_vec(&serde_json::json!({
                        "apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": "web", "namespace": "shop"}
                    }))
                    .unwrap(),
                ))
                .unwrap(),
        );
        (method, uri, body, handle)
    });
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let id = lbs(&cloud).await[0]["id"].as_str().unwrap().to_owned();
    let vip = ingress_ip(&status);
    let (method, uri, body, mut handle) = apiserver.await.unwrap();
    // Ensured again with the annotations in place: no patch.
    let annotated = annotate(
        annotate(
            svc.clone(),
            "loadbalancer.openstack.org/load-balancer-id",
            &id,
        ),
        "loadbalancer.openstack.org/load-balancer-address",
        &vip,
    );
    lb.ensure_load_balancer("kubernetes", &annotated, &nodes)
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(100), handle.next_request())
            .await
            .is_err(),
        "an up-to-date Service is not patched"
    );
    assert_eq!(method, "PATCH");
    assert!(
        uri.starts_with("/api/v1/namespaces/shop/services/web"),
        "{uri}"
    );
    assert_eq!(
        body,
        serde_json::json!({"metadata": {"annotations": {
            "loadbalancer.openstack.org/load-balancer-id": id,
            "loadbalancer.openstack.org/load-balancer-address": vip,
        }}})
    );
    lb.ensure_load_balancer_deleted("kubernetes", &annotated)
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
}

/// The most used `loadbalancer.openstack.org/*` annotations reach Octavia: the pool's
/// algorithm, the listeners' connection limit and timeouts, and the health monitor (on,
/// settings, off), each converging on a later ensure; a bad value is an error naming it.
#[tokio::test]
async fn service_annotations_set_listeners_pools_and_monitors() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("annotated").await;
    let mut svc = service(&[(port, np)]);
    for (k, v) in [
        ("lb-method", "LEAST_CONNECTIONS"),
        ("connection-limit", "100"),
        ("timeout-client-data", "1000"),
        ("timeout-member-connect", "2000"),
        ("timeout-member-data", "3000"),
        ("timeout-tcp-inspect", "10"),
        ("enable-health-monitor", "true"),
        ("health-monitor-delay", "7"),
        ("health-monitor-timeout", "2"),
        ("health-monitor-max-retries", "4"),
        ("health-monitor-max-retries-down", "2"),
    ] {
        svc = annotate(svc, &format!("loadbalancer.openstack.org/{k}"), v);
    }
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let get = |kind: &'static str| {
        let cloud = &cloud;
        async move {
            cloud
                .ok(
                    Method::GET,
                    &format!("/load-balancer/v2/lbaas/{kind}"),
                    None,
                )
                .await[kind][0]
                .clone()
        }
    };
    let l = get("listeners").await;
    assert_eq!(
        (
            &l["connection_limit"],
            &l["timeout_client_data"],
            &l["timeout_member_connect"],
            &l["timeout_member_data"],
            &l["timeout_tcp_inspect"]
        ),
        (
            &100.into(),
            &1000.into(),
            &2000.into(),
            &3000.into(),
            &10.into()
        )
    );
    assert_eq!(get("pools").await["lb_algorithm"], "LEAST_CONNECTIONS");
    let m = get("healthmonitors").await;
    assert_eq!(
        (
            &m["delay"],
            &m["timeout"],
            &m["max_retries"],
            &m["max_retries_down"]
        ),
        (&7.into(), &2.into(), &4.into(), &2.into())
    );
    let vip = ingress_ip(&status);
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("annotated")
    );

    // An explicit hostname is the ingress instead of the address.
    let named = annotate(
        svc.clone(),
        "loadbalancer.openstack.org/hostname",
        "web.example.org",
    );
    let st = lb
        .ensure_load_balancer("kubernetes", &named, &nodes)
        .await
        .unwrap();
    let ingress = &st.ingress.as_ref().unwrap()[0];
    assert_eq!(
        (ingress.hostname.as_deref(), ingress.ip.as_deref()),
        (Some("web.example.org"), None)
    );

    // Unchanged: no write at all.
    let calls = os.api_calls();
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    eprintln!(
        "ensure with annotations (no change): {} API calls",
        os.api_calls() - calls
    );

    // Changed: the listener and the monitor are updated in place, then the monitor goes.
    // The VIP subnet annotation is read at creation: here the public subnet's.
    let public_subnet = cloud
        .ok(
            Method::GET,
            "/network/v2.0/subnets?name=public-subnet",
            None,
        )
        .await["subnets"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut elsewhere = annotate(
        service(&[(free_port("127.0.0.1"), np)]),
        "loadbalancer.openstack.org/subnet-id",
        &public_subnet,
    );
    elsewhere.metadata.name = Some("elsewhere".into());
    let st = lb
        .ensure_load_balancer("kubernetes", &elsewhere, &nodes)
        .await
        .unwrap();
    let placed = lbs(&cloud)
        .await
        .into_iter()
        .find(|l| l["name"] == "kube_service_kubernetes_shop_elsewhere")
        .unwrap();
    assert_eq!(placed["vip_subnet_id"], public_subnet.as_str(), "{st:?}");
    lb.ensure_load_balancer_deleted("kubernetes", &elsewhere)
        .await
        .unwrap();
    let svc = annotate(svc, "loadbalancer.openstack.org/connection-limit", "200");
    let svc = annotate(svc, "loadbalancer.openstack.org/health-monitor-delay", "9");
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(get("listeners").await["connection_limit"], 200);
    assert_eq!(get("listeners").await["id"], l["id"]);
    assert_eq!(get("healthmonitors").await["delay"], 9);
    assert_eq!(get("healthmonitors").await["id"], m["id"]);
    let off = annotate(
        svc.clone(),
        "loadbalancer.openstack.org/enable-health-monitor",
        "false",
    );
    lb.ensure_load_balancer("kubernetes", &off, &nodes)
        .await
        .unwrap();
    assert!(get("healthmonitors").await.is_null());

    for (key, value) in [
        ("connection-limit", "lots"),
        ("timeout-client-data", "-1"),
        ("health-monitor-max-retries", "11"),
        ("enable-health-monitor", "on"),
    ] {
        let key = format!("loadbalancer.openstack.org/{key}");
        let e = lb
            .ensure_load_balancer("kubernetes", &annotate(svc.clone(), &key, value), &nodes)
            .await
            .unwrap_err();
        assert!(
            hypercloud_cloudprovider::Chain(&e)
                .to_string()
                .contains(&key),
            "{e}"
        );
    }
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
}

/// `loadBalancerSourceRanges` become the listeners' `allowed_cidrs`, which the local cloud's
/// data plane enforces: a client outside the ranges is refused, inside it gets through.
/// In-tree (no managed security groups) a restriction is an error, as the legacy provider's.
#[tokio::test]
async fn source_ranges_refuse_disallowed_clients() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("allowed").await;
    let with_ranges = |ranges: &[&str]| {
        let mut s = service(&[(port, np)]);
        s.spec.as_mut().unwrap().load_balancer_source_ranges =
            Some(ranges.iter().map(|r| (*r).to_owned()).collect());
        s
    };
    let status = lb
        .ensure_load_balancer("kubernetes", &with_ranges(&["10.0.0.0/8"]), &nodes)
        .await
        .unwrap();
    let vip = ingress_ip(&status);
    let listener = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/listeners", None)
        .await["listeners"][0]
        .clone();
    assert_eq!(listener["allowed_cidrs"], serde_json::json!(["10.0.0.0/8"]));
    // The test's client connects from 127.0.0.1: outside 10.0.0.0/8.
    assert_eq!(ask(&format!("{vip}:{port}")).await, None);

    lb.ensure_load_balancer("kubernetes", &with_ranges(&["127.0.0.0/8"]), &nodes)
        .await
        .unwrap();
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("allowed")
    );
    // No ranges: open to everyone again.
    lb.ensure_load_balancer("kubernetes", &with_ranges(&["10.0.0.0/8"]), &nodes)
        .await
        .unwrap();
    lb.ensure_load_balancer("kubernetes", &with_ranges(&[]), &nodes)
        .await
        .unwrap();
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("allowed")
    );
    lb.ensure_load_balancer_deleted("kubernetes", &with_ranges(&[]))
        .await
        .unwrap();

    let in_tree = cloud.provider_with_in("", Layout::InTree);
    in_tree.initialize(None).await.unwrap();
    let e = in_tree
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &with_ranges(&["10.0.0.0/8"]), &nodes)
        .await
        .unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("source range restrictions"),
        "{e}"
    );
    assert!(lbs(&cloud).await.is_empty());
}

/// A TCP server on `ip:port` answering every connection with an HTTP `status` line.
async fn health_endpoint(ip: &str, port: u16, status: &'static str) {
    let l = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(format!("HTTP/1.0 {status}\r\n\r\n").as_bytes())
                    .await;
                let _ = s.shutdown().await;
            });
        }
    });
}

/// `externalTrafficPolicy: Local` with a health monitor: the monitor is `HTTP GET /healthz`
/// on the health-check node port of each member (kube-proxy's answer: 200 only where the
/// Service has local endpoints), so traffic goes only to the node that answers 200.
#[tokio::test]
async fn external_traffic_policy_local_probes_the_health_check_node_port() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let (np, hc) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    backend("127.0.0.1", np, "node-with-endpoint").await;
    health_endpoint("127.0.0.1", hc, "200 OK").await;
    backend("127.0.0.2", np, "node-without-endpoint").await;
    health_endpoint("127.0.0.2", hc, "503 Service Unavailable").await;
    let port = free_port("127.0.0.1");
    let mut svc = annotate(
        service(&[(port, np)]),
        "loadbalancer.openstack.org/enable-health-monitor",
        "true",
    );
    svc = annotate(svc, "loadbalancer.openstack.org/health-monitor-delay", "1");
    svc = annotate(
        svc,
        "loadbalancer.openstack.org/health-monitor-timeout",
        "1",
    );
    svc = annotate(
        svc,
        "loadbalancer.openstack.org/health-monitor-max-retries-down",
        "1",
    );
    let spec = svc.spec.as_mut().unwrap();
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(i32::from(hc));
    let nodes = [node("node-a", "127.0.0.1"), node("node-b", "127.0.0.2")];
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let m = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/healthmonitors", None)
        .await["healthmonitors"][0]
        .clone();
    assert_eq!(
        (&m["type"], &m["url_path"]),
        (&"HTTP".into(), &"/healthz".into())
    );
    let pool = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/pools", None)
        .await["pools"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let members = cloud
        .ok(
            Method::GET,
            &format!("/load-balancer/v2/lbaas/pools/{pool}/members"),
            None,
        )
        .await;
    for m in members["members"].as_array().unwrap() {
        assert_eq!(m["monitor_port"], i64::from(hc), "{m}");
    }
    // Once the monitor has marked node-b down, every request lands on node-a.
    let vip = ingress_ip(&status);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut streak = 0;
    while streak < 10 {
        assert!(Instant::now() < deadline, "node-b still gets traffic");
        match ask(&format!("{vip}:{port}")).await.as_deref() {
            Some("node-with-endpoint") => streak += 1,
            _ => streak = 0,
        }
    }

    // Back to Cluster: a plain TCP monitor, members without a monitor port.
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Cluster".into());
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let m = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/healthmonitors", None)
        .await["healthmonitors"][0]
        .clone();
    assert_eq!(m["type"], "TCP");
    let members = cloud
        .ok(
            Method::GET,
            &format!("/load-balancer/v2/lbaas/pools/{pool}/members"),
            None,
        )
        .await;
    for m in members["members"].as_array().unwrap() {
        assert!(m["monitor_port"].is_null(), "{m}");
    }
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
}

/// What the server behind `addr` answers a client bound to `source` (None: refused).
async fn ask_from(source: &str, addr: &str) -> Option<String> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let mut s = tokio::time::timeout(
        Duration::from_secs(2),
        socket.connect(addr.parse().unwrap()),
    )
    .await
    .ok()?
    .ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    (!out.is_empty()).then_some(out)
}

/// The Neutron port of `server` (its one interface).
async fn port_of_server(cloud: &Cloud, server: &str) -> serde_json::Value {
    cloud
        .ok(
            Method::GET,
            &format!("/network/v2.0/ports?device_id={server}"),
            None,
        )
        .await["ports"][0]
        .clone()
}

/// A server `name` of the local cloud and its Node (provider ID set), a node port on the
/// server's fixed address answering `answer`: (server id, node port, the Nodes).
async fn server_node(cloud: &Cloud, name: &str, answer: &'static str) -> (String, u16, [Node; 1]) {
    let server = cloud.create_server(name, "1", None).await;
    let node_ip = port_of_server(cloud, &server).await["fixed_ips"][0]["ip_address"]
        .as_str()
        .unwrap()
        .to_owned();
    let np = free_port(&node_ip);
    backend(&node_ip, np, answer).await;
    let mut n = node(name, &node_ip);
    n.spec.as_mut().unwrap().provider_id = Some(format!("openstack:///{server}"));
    (server, np, [n])
}

/// `manage-security-groups = true`, as OCCM: a group `lb-sg-<uid>-<ns>-<name>` whose only rules
/// open the node port from the members' subnet, put on the node server's port, converged when
/// the node port changes, and taken off the port and deleted with the load balancer. The
/// source ranges still refuse a disallowed client through the data plane.
#[tokio::test]
async fn manage_security_groups_opens_node_ports_to_the_load_balancer() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "[LoadBalancer]\nmanage-security-groups = true\n").await;
    let lb = os.load_balancer().unwrap();
    let (server, np, nodes) = server_node(&cloud, "sg-node", "guarded").await;
    let port_of_server = || port_of_server(&cloud, &server);
    let node_ip = port_of_server().await["fixed_ips"][0]["ip_address"]
        .as_str()
        .unwrap()
        .to_owned();
    let port = free_port("127.0.0.1");
    let with = |np: u16, ranges: &[&str]| {
        let mut s = service(&[(port, np)]);
        s.spec.as_mut().unwrap().load_balancer_source_ranges =
            Some(ranges.iter().map(|r| (*r).to_owned()).collect());
        s
    };
    let status = lb
        .ensure_load_balancer("kubernetes", &with(np, &["127.0.0.3/32"]), &nodes)
        .await
        .unwrap();
    let vip = ingress_ip(&status);

    let group_name = "lb-sg-1b4e28ba-2fa1-11d2-883f-00163e6fbc11-shop-web";
    let group = || async {
        let found = cloud
            .ok(
                Method::GET,
                &format!("/network/v2.0/security-groups?name={group_name}"),
                None,
            )
            .await["security_groups"]
            .as_array()
            .unwrap()
            .clone();
        assert!(found.len() <= 1, "{found:?}");
        found.into_iter().next()
    };
    let sg = group().await.expect("the load balancer's security group");
    let sg_id = sg["id"].as_str().unwrap().to_owned();
    let subnet_cidr = cloud
        .ok(
            Method::GET,
            "/network/v2.0/subnets?name=private-subnet",
            None,
        )
        .await["subnets"][0]["cidr"]
        .as_str()
        .unwrap()
        .to_owned();
    let rules = |sg: &serde_json::Value| -> Vec<(String, i64, String, String)> {
        let mut r: Vec<_> = sg["security_group_rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["direction"].as_str().unwrap().to_owned(),
                    r["port_range_min"].as_i64().unwrap_or(0),
                    r["protocol"].as_str().unwrap_or("any").to_owned(),
                    r["remote_ip_prefix"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        r.sort();
        r
    };
    // Neutron's default egress rules are gone; only the node port from the member subnet.
    assert_eq!(
        rules(&sg),
        [(
            "ingress".to_string(),
            i64::from(np),
            "tcp".to_string(),
            subnet_cidr.clone()
        )]
    );
    let groups = port_of_server().await["security_groups"].clone();
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == sg_id.as_str()),
        "{groups}"
    );
    assert_eq!(
        ask_from("127.0.0.3", &format!("{vip}:{port}"))
            .await
            .as_deref(),
        Some("guarded")
    );
    assert_eq!(ask_from("127.0.0.4", &format!("{vip}:{port}")).await, None);

    // Another node port: the rule follows, nothing else changes.
    let np2 = free_port(&node_ip);
    backend(&node_ip, np2, "guarded-2").await;
    lb.ensure_load_balancer("kubernetes", &with(np2, &["127.0.0.3/32"]), &nodes)
        .await
        .unwrap();
    let sg = group().await.unwrap();
    assert_eq!(sg["id"], sg_id.as_str());
    assert_eq!(
        rules(&sg),
        [(
            "ingress".to_string(),
            i64::from(np2),
            "tcp".to_string(),
            subnet_cidr
        )]
    );
    assert_eq!(
        ask_from("127.0.0.3", &format!("{vip}:{port}"))
            .await
            .as_deref(),
        Some("guarded-2")
    );

    lb.ensure_load_balancer_deleted("kubernetes", &with(np2, &[]))
        .await
        .unwrap();
    assert!(
        group().await.is_none(),
        "the group outlived its load balancer"
    );
    let groups = port_of_server().await["security_groups"].clone();
    assert!(
        !groups
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == sg_id.as_str()),
        "{groups}"
    );
    assert!(lbs(&cloud).await.is_empty());
}

/// With the local cloud enforcing members' security groups (`enforce_member_security_groups`,
/// as Neutron's firewall): the node server's port carries only the project's `default` group,
/// which admits nobody from outside the group, so the load balancer reaches no member; the
/// same Service under `manage-security-groups = true` gets the per-load-balancer group opening
/// the node port to the members' subnet, and traffic flows; a rule narrower than the members'
/// subnet (the VIP address alone) does not let the load balancer in.
#[tokio::test]
async fn member_security_groups_refuse_the_load_balancer_until_the_managed_group_opens_the_node_port(
) {
    let cloud = Cloud::start_with(|mut c| {
        c.enforce_member_security_groups = true;
        c
    })
    .await;
    let (server, np, nodes) = server_node(&cloud, "sg-enforced", "behind-a-group").await;
    let node_port = port_of_server(&cloud, &server).await;
    let port_id = node_port["id"].as_str().unwrap().to_owned();
    let port = free_port("127.0.0.1");
    let svc = service(&[(port, np)]);

    // Unmanaged: the default group's ingress rules admit only ports of the group itself.
    let plain = ready(&cloud, "").await;
    let status = plain
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let vip = ingress_ip(&status);
    let target = format!("{vip}:{port}");
    assert_eq!(
        ask(&target).await,
        None,
        "the default group let the load balancer in"
    );

    // A group of our own opening the node port to the VIP address alone: the amphora's source
    // is its port on the members' subnet, not the VIP, so this does not admit it either.
    let narrow = cloud
        .ok(
            Method::POST,
            "/network/v2.0/security-groups",
            Some(serde_json::json!({"security_group": {"name": "vip-only"}})),
        )
        .await["security_group"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    cloud
        .ok(
            Method::POST,
            "/network/v2.0/security-group-rules",
            Some(serde_json::json!({"security_group_rule": {
                "security_group_id": narrow, "direction": "ingress", "protocol": "tcp",
                "port_range_min": np, "port_range_max": np,
                "remote_ip_prefix": format!("{vip}/32")}})),
        )
        .await;
    let default_group = node_port["security_groups"][0].as_str().unwrap().to_owned();
    cloud
        .ok(
            Method::PUT,
            &format!("/network/v2.0/ports/{port_id}"),
            Some(serde_json::json!({"port": {"security_groups": [default_group, narrow]}})),
        )
        .await;
    assert_eq!(
        ask(&target).await,
        None,
        "a rule for the VIP alone let the amphora in"
    );

    // manage-security-groups: the provider's group opens the node port to the members' subnet.
    let managed = ready(&cloud, "[LoadBalancer]\nmanage-security-groups = true\n").await;
    managed
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let mut answer = None;
    // The data plane follows the port change asynchronously: a hang guard, not a timing.
    for _ in 0..100 {
        answer = ask(&target).await;
        if answer.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(answer.as_deref(), Some("behind-a-group"));

    // Deleting the load balancer takes the group off the port: refused again on a new one.
    managed
        .load_balancer()
        .unwrap()
        .ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    let status = plain
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let target = format!("{}:{port}", ingress_ip(&status));
    assert_eq!(ask(&target).await, None);
}

/// A member that parses what the load balancer sends before the client's bytes: on
/// `127.0.0.1:port`, it reads each connection to its end and answers `v1 <addr>`, `v2 <addr>`
/// (the PROXY header's source) or `none`, then `|` and the client's bytes after the header.
async fn proxy_protocol_backend(port: u16) {
    let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut data = Vec::new();
                let _ = s.read_to_end(&mut data).await;
                let answer = parse_proxy_header(&data);
                let _ = s.write_all(answer.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
}

/// `v1 ip:port|rest`, `v2 ip:port|rest` or `none|rest` (the PROXY protocol spec's formats).
fn parse_proxy_header(data: &[u8]) -> String {
    const V2: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
    let rest = |from: usize| String::from_utf8_lossy(&data[from..]).into_owned();
    if data.starts_with(b"PROXY ") {
        let end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let line = std::str::from_utf8(&data[..end]).unwrap();
        let f: Vec<&str> = line.split(' ').collect();
        // PROXY TCP4 <src> <dst> <sport> <dport>
        assert_eq!(f.len(), 6, "{line}");
        return format!(
            "v1 {}:{} to {}:{}|{}",
            f[2],
            f[4],
            f[3],
            f[5],
            rest(end + 2)
        );
    }
    if data.starts_with(V2) {
        assert_eq!(data[12], 0x21, "version 2, PROXY command");
        assert_eq!(data[13], 0x11, "TCP over IPv4");
        let len = usize::from(u16::from_be_bytes([data[14], data[15]]));
        let a = &data[16..16 + len];
        let src = std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]);
        let dst = std::net::Ipv4Addr::new(a[4], a[5], a[6], a[7]);
        let sport = u16::from_be_bytes([a[8], a[9]]);
        let dport = u16::from_be_bytes([a[10], a[11]]);
        return format!("v2 {src}:{sport} to {dst}:{dport}|{}", rest(16 + len));
    }
    format!("none|{}", rest(0))
}

/// Connects to `addr` from `127.0.0.1`, sends `hello`, half-closes; returns the client's own
/// address and the answer (retrying briefly while the data plane settles).
async fn ask_with_source(addr: &str) -> (std::net::SocketAddr, String) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let me = socket.local_addr().unwrap();
        if let Ok(Ok(mut s)) = tokio::time::timeout(
            Duration::from_secs(2),
            socket.connect(addr.parse().unwrap()),
        )
        .await
        {
            let _ = s.write_all(b"hello").await;
            let _ = s.shutdown().await;
            let mut out = String::new();
            if tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out))
                .await
                .is_ok_and(|r| r.is_ok())
                && !out.is_empty()
            {
                return (me, out);
            }
        }
        assert!(Instant::now() < deadline, "no answer from {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The one pool's and the one listener's Octavia records.
async fn pool_and_listener(cloud: &Cloud) -> (serde_json::Value, serde_json::Value) {
    let pools = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/pools", None)
        .await["pools"]
        .clone();
    let listeners = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/listeners", None)
        .await["listeners"]
        .clone();
    assert_eq!(pools.as_array().unwrap().len(), 1, "{pools}");
    assert_eq!(listeners.as_array().unwrap().len(), 1, "{listeners}");
    (pools[0].clone(), listeners[0].clone())
}

#[tokio::test]
async fn proxy_protocol_gives_members_the_clients_address() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let np = free_port("127.0.0.1");
    proxy_protocol_backend(np).await;
    let port = free_port("127.0.0.1");
    let nodes = [node("node-1", "127.0.0.1")];
    let key = "loadbalancer.openstack.org/proxy-protocol";
    // v1, then v2 on the same load balancer (the pool is replaced), then off.
    for (value, pool_protocol, version) in [
        (Some("true"), "PROXY", "v1"),
        (Some("v2"), "PROXYV2", "v2"),
        (None, "TCP", "none"),
    ] {
        let mut svc = service(&[(port, np)]);
        if let Some(v) = value {
            svc = annotate(svc, key, v);
        }
        let status = lb
            .ensure_load_balancer("kubernetes", &svc, &nodes)
            .await
            .unwrap();
        let vip = ingress_ip(&status);
        // OCCM: kube-proxy must not bypass a load balancer that adds a PROXY header.
        let ip_mode = status.ingress.as_ref().unwrap()[0].ip_mode.clone();
        let proxied = version != "none";
        assert_eq!(ip_mode.as_deref(), proxied.then_some("Proxy"), "{value:?}");
        let (pool, listener) = pool_and_listener(&cloud).await;
        assert_eq!(pool["protocol"], pool_protocol, "{value:?}");
        assert_eq!(listener["protocol"], "TCP");
        assert_eq!(members(&cloud).await, vec![format!("127.0.0.1:{np}")]);
        let (me, answer) = ask_with_source(&format!("{vip}:{port}")).await;
        let expected = match version {
            "none" => "none|hello".to_owned(),
            v => format!("{v} {me} to {vip}:{port}|hello"),
        };
        assert_eq!(answer, expected, "{value:?}");
    }
    assert_eq!(lbs(&cloud).await.len(), 1, "one load balancer throughout");
    lb.ensure_load_balancer_deleted("kubernetes", &service(&[(port, np)]))
        .await
        .unwrap();
    cloud.shutdown().await;
}

/// An HTTP/1.1 member on `127.0.0.1:port`: per request of a keep-alive connection it answers
/// the request's `X-Forwarded-For` values (joined by `,`, or `none`) and its body's length.
async fn forwarded_for_backend(port: u16) {
    let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (r, mut w) = s.into_split();
                let mut r = tokio::io::BufReader::new(r);
                while let Some((head, body)) = read_http_message(&mut r).await {
                    let xff: Vec<String> = head
                        .lines()
                        .filter_map(|l| l.split_once(':'))
                        .filter(|(k, _)| k.eq_ignore_ascii_case("x-forwarded-for"))
                        .map(|(_, v)| v.trim().to_owned())
                        .collect();
                    let text = format!(
                        "{} body={}",
                        if xff.is_empty() {
                            "none".to_owned()
                        } else {
                            xff.join(",")
                        },
                        body.len()
                    );
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if w.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// One HTTP/1 message (head, `Content-Length` body); `None` at the end of the stream.
async fn read_http_message<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
) -> Option<(String, Vec<u8>)> {
    use tokio::io::AsyncBufReadExt;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let len = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.trim().parse::<usize>().unwrap());
    let mut body = vec![0; len];
    r.read_exact(&mut body).await.ok()?;
    Some((head, body))
}

/// Two requests on one connection to `addr` (the second with a body and a forged
/// `X-Forwarded-For`): the two answers' bodies.
async fn two_requests(addr: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await
        {
            let (r, mut w) = s.into_split();
            let mut r = tokio::io::BufReader::new(r);
            let mut out = Vec::new();
            let requests = [
                "GET / HTTP/1.1\r\nHost: web\r\n\r\n".to_owned(),
                "POST /form HTTP/1.1\r\nHost: web\r\nX-Forwarded-For: 10.9.9.9\r\nContent-Length: 5\r\n\r\nhello".to_owned(),
            ];
            for req in &requests {
                if w.write_all(req.as_bytes()).await.is_err() {
                    break;
                }
                match tokio::time::timeout(Duration::from_secs(2), read_http_message(&mut r)).await
                {
                    Ok(Some((_, body))) => out.push(String::from_utf8(body).unwrap()),
                    _ => break,
                }
            }
            if out.len() == requests.len() {
                return out;
            }
        }
        assert!(Instant::now() < deadline, "no answers from {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn x_forwarded_for_gives_members_the_clients_address_on_every_request() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let np = free_port("127.0.0.1");
    forwarded_for_backend(np).await;
    let port = free_port("127.0.0.1");
    let nodes = [node("node-1", "127.0.0.1")];
    let key = "loadbalancer.openstack.org/x-forwarded-for";
    // Plain TCP first: the member sees no header; then the annotation switches the listener
    // to HTTP (replaced on the same port), then back.
    for (value, protocol, seen) in [
        (None, "TCP", ["none body=0", "10.9.9.9 body=5"]),
        (
            Some("true"),
            "HTTP",
            ["127.0.0.1 body=0", "10.9.9.9,127.0.0.1 body=5"],
        ),
        (Some("false"), "TCP", ["none body=0", "10.9.9.9 body=5"]),
    ] {
        let mut svc = service(&[(port, np)]);
        if let Some(v) = value {
            svc = annotate(svc, key, v);
        }
        let status = lb
            .ensure_load_balancer("kubernetes", &svc, &nodes)
            .await
            .unwrap();
        let (pool, listener) = pool_and_listener(&cloud).await;
        assert_eq!(listener["protocol"], protocol, "{value:?}");
        assert_eq!(pool["protocol"], protocol, "{value:?}");
        let headers = if protocol == "HTTP" {
            serde_json::json!({"X-Forwarded-For": "true"})
        } else {
            serde_json::json!({})
        };
        assert_eq!(listener["insert_headers"], headers, "{value:?}");
        let vip = ingress_ip(&status);
        assert_eq!(
            two_requests(&format!("{vip}:{port}")).await,
            seen,
            "{value:?}"
        );
    }
    assert_eq!(lbs(&cloud).await.len(), 1, "one load balancer throughout");
    lb.ensure_load_balancer_deleted("kubernetes", &service(&[(port, np)]))
        .await
        .unwrap();
    cloud.shutdown().await;
}

#[tokio::test]
async fn session_affinity_client_ip_keeps_a_client_on_one_member() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let np = free_port("127.0.0.1");
    backend("127.0.0.1", np, "node-1").await;
    backend("127.0.0.2", np, "node-2").await;
    let port = free_port("127.0.0.1");
    let nodes = [node("node-1", "127.0.0.1"), node("node-2", "127.0.0.2")];
    for affinity in [None, Some("ClientIP"), Some("None")] {
        let mut svc = service(&[(port, np)]);
        svc.spec.as_mut().unwrap().session_affinity = affinity.map(str::to_owned);
        let status = lb
            .ensure_load_balancer("kubernetes", &svc, &nodes)
            .await
            .unwrap();
        let (pool, _) = pool_and_listener(&cloud).await;
        assert_eq!(pool["lb_algorithm"], "ROUND_ROBIN");
        let sticky = affinity == Some("ClientIP");
        if sticky {
            assert_eq!(pool["session_persistence"]["type"], "SOURCE_IP");
        } else {
            assert!(pool["session_persistence"].is_null(), "{pool}");
        }
        let vip = ingress_ip(&status);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..6 {
            seen.insert(ask(&format!("{vip}:{port}")).await.unwrap());
        }
        // Round robin alternates between the two; persistence keeps one.
        assert_eq!(
            seen.len(),
            if sticky { 1 } else { 2 },
            "{affinity:?}: {seen:?}"
        );
    }
    lb.ensure_load_balancer_deleted("kubernetes", &service(&[(port, np)]))
        .await
        .unwrap();
    cloud.shutdown().await;
}

/// The `subnet_id` of each member of the one pool.
async fn member_subnets(cloud: &Cloud) -> Vec<serde_json::Value> {
    let pools = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/pools", None)
        .await;
    let id = pools["pools"][0]["id"].as_str().unwrap().to_owned();
    let m = cloud
        .ok(
            Method::GET,
            &format!("/load-balancer/v2/lbaas/pools/{id}/members"),
            None,
        )
        .await;
    m["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["subnet_id"].clone())
        .collect()
}

#[tokio::test]
async fn node_selector_and_member_subnet_choose_the_members() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let np = free_port("127.0.0.1");
    backend("127.0.0.1", np, "node-1").await;
    backend("127.0.0.2", np, "node-2").await;
    let port = free_port("127.0.0.1");
    let mut nodes = [node("node-1", "127.0.0.1"), node("node-2", "127.0.0.2")];
    nodes[1].metadata.labels = Some([("role".to_owned(), "lb".to_owned())].into());
    // A second subnet on the private network for the members.
    let (_, subnet) = cloud.private_subnet("members", "127.2.0.0/16").await;
    let svc = annotate(
        annotate(
            service(&[(port, np)]),
            "loadbalancer.openstack.org/node-selector",
            "role=lb",
        ),
        "loadbalancer.openstack.org/member-subnet-id",
        &subnet,
    );
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let vip = ingress_ip(&status);
    assert_eq!(members(&cloud).await, vec![format!("127.0.0.2:{np}")]);
    assert_eq!(
        member_subnets(&cloud).await,
        vec![serde_json::json!(subnet)]
    );
    for _ in 0..4 {
        assert_eq!(
            ask(&format!("{vip}:{port}")).await.as_deref(),
            Some("node-2")
        );
    }
    // Without the annotations: every node, on no particular subnet (node-2's member is
    // replaced: a member's subnet cannot change).
    let plain = service(&[(port, np)]);
    lb.update_load_balancer("kubernetes", &plain, &nodes)
        .await
        .unwrap();
    assert_eq!(
        members(&cloud).await,
        vec![format!("127.0.0.1:{np}"), format!("127.0.0.2:{np}")]
    );
    assert_eq!(
        member_subnets(&cloud).await,
        vec![serde_json::Value::Null, serde_json::Value::Null]
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..4 {
        seen.insert(ask(&format!("{vip}:{port}")).await.unwrap());
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    // An unknown member subnet is Octavia's 404, and the error says so.
    let bad = annotate(
        plain.clone(),
        "loadbalancer.openstack.org/member-subnet-id",
        "no-such-subnet",
    );
    let e = lb
        .ensure_load_balancer("kubernetes", &bad, &nodes)
        .await
        .unwrap_err();
    let e = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(e.contains("no-such-subnet"), "{e}");
    lb.ensure_load_balancer_deleted("kubernetes", &plain)
        .await
        .unwrap();
    cloud.shutdown().await;
}

#[tokio::test]
async fn availability_zone_places_the_load_balancer() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("zoned").await;
    let key = "loadbalancer.openstack.org/availability-zone";
    // Octavia's availability zones (here the cloud's: nova, az-2).
    let zones = cloud
        .ok(
            Method::GET,
            "/load-balancer/v2/lbaas/availabilityzones",
            None,
        )
        .await;
    assert_eq!(zones["availability_zones"][1]["name"], "nova", "{zones}");
    let bad = annotate(service(&[(port, np)]), key, "az-9");
    let e = lb
        .ensure_load_balancer("kubernetes", &bad, &nodes)
        .await
        .unwrap_err();
    let e = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(e.contains("Invalid availability zone"), "{e}");
    assert!(lbs(&cloud).await.is_empty());
    let svc = annotate(service(&[(port, np)]), key, "az-2");
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(lbs(&cloud).await[0]["availability_zone"], "az-2");
    assert_eq!(
        ask(&format!("{}:{port}", ingress_ip(&status)))
            .await
            .as_deref(),
        Some("zoned")
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    cloud.shutdown().await;
}

#[tokio::test]
async fn port_id_makes_the_vip_adopt_an_existing_port() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("adopted").await;
    let key = "loadbalancer.openstack.org/port-id";
    // A port of the user's on a subnet holding the local cloud's VIP pool.
    let (private, subnet) = cloud.private_subnet("vips", "127.0.100.0/24").await;
    let vip_port = cloud
        .ok(
            Method::POST,
            "/network/v2.0/ports",
            Some(
                serde_json::json!({"port": {"network_id": private, "name": "my-vip",
                "fixed_ips": [{"subnet_id": subnet, "ip_address": "127.0.100.240"}]}}),
            ),
        )
        .await["port"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let bad = annotate(service(&[(port, np)]), key, "no-such-port");
    let e = lb
        .ensure_load_balancer("kubernetes", &bad, &nodes)
        .await
        .unwrap_err();
    let e = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(e.contains("Port no-such-port not found"), "{e}");
    let svc = annotate(service(&[(port, np)]), key, &vip_port);
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let octavia = &lbs(&cloud).await[0];
    assert_eq!(octavia["vip_port_id"], vip_port.as_str());
    assert_eq!(octavia["vip_address"], "127.0.100.240");
    assert_eq!(octavia["vip_subnet_id"], subnet.as_str());
    assert_eq!(ingress_ip(&status), "127.0.100.240");
    assert_eq!(
        ask(&format!("127.0.100.240:{port}")).await.as_deref(),
        Some("adopted")
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
    // The port was the user's: it stays (Octavia deletes only the VIP ports it made).
    cloud
        .ok(
            Method::GET,
            &format!("/network/v2.0/ports/{vip_port}"),
            None,
        )
        .await;
    cloud.shutdown().await;
}

/// `svc` renamed to `name` (a new UID), annotated to share load balancer `id`.
fn sharer(svc: Service, name: &str, uid_tail: &str, id: &str) -> Service {
    let mut svc = svc;
    svc.metadata.name = Some(name.into());
    svc.metadata.uid = Some(format!("6a1e28ba-2fa1-11d2-883f-00163e6f{uid_tail}"));
    annotate(svc, "loadbalancer.openstack.org/load-balancer-id", id)
}

fn chain(e: &hypercloud_cloudprovider::Error) -> String {
    hypercloud_cloudprovider::Chain(e).to_string()
}

/// OCCM's shared load balancers: a second Service naming the first one's load balancer gets
/// its own listener beside the first one's and the same floating IP; conflicts, internal
/// sharers and one Service too many are refused by the annotation's name; deleting the owner
/// leaves the load balancer serving the sharer, and the last Service out deletes it.
#[tokio::test]
async fn services_share_a_load_balancer_by_the_id_annotation() {
    let cloud = Cloud::start().await;
    let public = public_network(&cloud).await;
    let os = ready(
        &cloud,
        &format!("[LoadBalancer]\nfloating-network-id = {public}\nmax-shared-lb = 3\n"),
    )
    .await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("first").await;
    let first = service(&[(port, np)]);
    let status = lb
        .ensure_load_balancer("kubernetes", &first, &nodes)
        .await
        .unwrap();
    let fip = ingress_ip(&status);
    let id = lbs(&cloud).await[0]["id"].as_str().unwrap().to_owned();

    let np2 = free_port("127.0.0.1");
    backend("127.0.0.1", np2, "second").await;
    let port2 = free_port("127.0.0.1");
    let second = sharer(service(&[(port2, np2)]), "second", "bc12", &id);
    let shared = lb
        .ensure_load_balancer("kubernetes", &second, &nodes)
        .await
        .unwrap();
    assert_eq!(ingress_ip(&shared), fip, "the owner's floating IP");
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1, "no second load balancer");
    let tags = all[0]["tags"].as_array().unwrap();
    assert!(
        tags.contains(&"kube_service_kubernetes_shop_web".into())
            && tags.contains(&"kube_service_kubernetes_shop_second".into()),
        "{tags:?}"
    );
    let listeners = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/listeners", None)
        .await;
    let mut by_port: Vec<(i64, String)> = listeners["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["protocol_port"].as_i64().unwrap(),
                l["tags"][0].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    by_port.sort();
    let mut want = vec![
        (
            i64::from(port),
            "kube_service_kubernetes_shop_web".to_owned(),
        ),
        (
            i64::from(port2),
            "kube_service_kubernetes_shop_second".to_owned(),
        ),
    ];
    want.sort();
    assert_eq!(by_port, want);
    // Real traffic: each Service's port reaches its own backend through the one address.
    assert_eq!(
        ask(&format!("{fip}:{port}")).await.as_deref(),
        Some("first")
    );
    assert_eq!(
        ask(&format!("{fip}:{port2}")).await.as_deref(),
        Some("second")
    );
    // Converging either Service again leaves the other's listener alone.
    lb.ensure_load_balancer("kubernetes", &first, &nodes)
        .await
        .unwrap();
    lb.update_load_balancer("kubernetes", &second, &nodes)
        .await
        .unwrap();
    assert_eq!(
        ask(&format!("{fip}:{port2}")).await.as_deref(),
        Some("second")
    );

    // A port another Service's listener holds: refused by name, nothing changed.
    let clash = sharer(service(&[(port, np2)]), "clash", "cc12", &id);
    let e = chain(
        &lb.ensure_load_balancer("kubernetes", &clash, &nodes)
            .await
            .unwrap_err(),
    );
    assert!(
        e.contains("annotation loadbalancer.openstack.org/load-balancer-id")
            && e.contains(&format!(
                "port {port} of load balancer {id} is another Service's listener"
            )),
        "{e}"
    );
    assert_eq!(lbs(&cloud).await[0]["tags"].as_array().unwrap().len(), 2);
    // An internal Service may not share.
    let internal = annotate(
        sharer(
            service(&[(free_port("127.0.0.1"), np2)]),
            "inner",
            "dc12",
            &id,
        ),
        "service.beta.kubernetes.io/openstack-internal-load-balancer",
        "true",
    );
    let e = chain(
        &lb.ensure_load_balancer("kubernetes", &internal, &nodes)
            .await
            .unwrap_err(),
    );
    assert!(e.contains("an internal Service cannot share"), "{e}");
    // A third sharer fits max-shared-lb = 3; a fourth does not.
    let port3 = free_port("127.0.0.1");
    let third = sharer(service(&[(port3, np2)]), "third", "ec12", &id);
    lb.ensure_load_balancer("kubernetes", &third, &nodes)
        .await
        .unwrap();
    let fourth = sharer(
        service(&[(free_port("127.0.0.1"), np2)]),
        "fourth",
        "fc12",
        &id,
    );
    let e = chain(
        &lb.ensure_load_balancer("kubernetes", &fourth, &nodes)
            .await
            .unwrap_err(),
    );
    assert!(
        e.contains(&format!(
            "load balancer {id} is already shared by 3 Services ([LoadBalancer] max-shared-lb = 3)"
        )),
        "{e}"
    );
    // Deleting a Service that never joined touches nothing.
    lb.ensure_load_balancer_deleted("kubernetes", &fourth)
        .await
        .unwrap();
    lb.ensure_load_balancer_deleted("kubernetes", &third)
        .await
        .unwrap();

    // The owner goes first: the load balancer and its floating IP stay for the sharer.
    lb.ensure_load_balancer_deleted("kubernetes", &first)
        .await
        .unwrap();
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1);
    assert_eq!(
        all[0]["tags"],
        serde_json::json!(["kube_service_kubernetes_shop_second"])
    );
    assert_eq!(floating_ips(&cloud).await.len(), 1);
    assert_eq!(
        ask(&format!("{fip}:{port2}")).await.as_deref(),
        Some("second")
    );
    assert_eq!(
        ask(&format!("{fip}:{port}")).await,
        None,
        "the owner's listener is gone"
    );
    assert_eq!(
        lb.get_load_balancer("kubernetes", &second).await.unwrap(),
        Some(shared)
    );
    // The last Service out deletes it, with the floating IP OCCM's description marks.
    lb.ensure_load_balancer_deleted("kubernetes", &second)
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
    assert!(floating_ips(&cloud).await.is_empty());
    cloud.shutdown().await;
}

/// A load balancer made outside Kubernetes, shared by a Service: the Service's listener comes
/// and goes, the load balancer stays (OCCM deletes only what a provider made).
#[tokio::test]
async fn a_users_load_balancer_is_shared_but_never_deleted() {
    let cloud = Cloud::start().await;
    let os = ready(&cloud, "").await;
    let lb = os.load_balancer().unwrap();
    let subnet = cloud
        .ok(
            Method::GET,
            "/network/v2.0/subnets?name=private-subnet",
            None,
        )
        .await["subnets"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let made = cloud
        .ok(
            Method::POST,
            "/load-balancer/v2/lbaas/loadbalancers",
            Some(
                serde_json::json!({"loadbalancer": {"name": "users-own", "vip_subnet_id": subnet}}),
            ),
        )
        .await;
    let id = made["loadbalancer"]["id"].as_str().unwrap().to_owned();
    let (np, port, nodes) = one_node("on-users-lb").await;
    let svc = sharer(service(&[(port, np)]), "guest", "a012", &id);
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let vip = ingress_ip(&status);
    assert_eq!(vip, made["loadbalancer"]["vip_address"].as_str().unwrap());
    assert_eq!(
        ask(&format!("{vip}:{port}")).await.as_deref(),
        Some("on-users-lb")
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1, "the user's load balancer stays");
    assert_eq!(all[0]["tags"], serde_json::json!([]));
    let listeners = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/listeners", None)
        .await;
    assert!(listeners["listeners"].as_array().unwrap().is_empty());
    cloud.shutdown().await;
}

/// `flavor-id` (annotation, else `[LoadBalancer] flavor-id`) is the new load balancer's Octavia
/// flavor; an unknown one is Octavia's 400 and nothing is created.
#[tokio::test]
async fn flavor_id_chooses_the_octavia_flavor() {
    let cloud = Cloud::start().await;
    let flavors = cloud
        .ok(
            Method::GET,
            "/load-balancer/v2/lbaas/flavors?name=amphora-ha",
            None,
        )
        .await;
    let ha = flavors["flavors"][0]["id"].as_str().unwrap().to_owned();
    let single = cloud
        .ok(
            Method::GET,
            "/load-balancer/v2/lbaas/flavors?name=amphora-single",
            None,
        )
        .await["flavors"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let os = ready(&cloud, &format!("[LoadBalancer]\nflavor-id = {single}\n")).await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("flavoured").await;
    let key = "loadbalancer.openstack.org/flavor-id";
    let bad = annotate(service(&[(port, np)]), key, "no-such-flavor");
    let e = chain(
        &lb.ensure_load_balancer("kubernetes", &bad, &nodes)
            .await
            .unwrap_err(),
    );
    assert!(e.contains("Invalid flavor_id"), "{e}");
    assert!(lbs(&cloud).await.is_empty());
    let svc = annotate(service(&[(port, np)]), key, &ha);
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(lbs(&cloud).await[0]["flavor_id"], ha.as_str());
    assert_eq!(
        ask(&format!("{}:{port}", ingress_ip(&status)))
            .await
            .as_deref(),
        Some("flavoured")
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
    // Without the annotation, the config's flavor.
    let plain = service(&[(port, np)]);
    lb.ensure_load_balancer("kubernetes", &plain, &nodes)
        .await
        .unwrap();
    assert_eq!(lbs(&cloud).await[0]["flavor_id"], single.as_str());
    lb.ensure_load_balancer_deleted("kubernetes", &plain)
        .await
        .unwrap();
    cloud.shutdown().await;
}

/// The local cloud's answered requests (`localcloud_api_requests_total`) by `METHOD route
/// code`, Keystone's left out (a token is asked once, whenever it expires).
async fn cloud_requests(cloud: &Cloud) -> std::collections::BTreeMap<String, f64> {
    let text = cloud
        .http
        .get(format!("{}/metrics", cloud.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("localcloud_api_requests_total{"))
        .filter_map(|l| l.rsplit_once("} "))
        .filter_map(|(labels, v)| {
            let get = |k: &str| labels.split(&format!("{k}=\"")).nth(1)?.split('"').next();
            let service = get("service")?;
            if service == "identity" || service == "other" {
                return None;
            }
            let key = format!("{} {} {}", get("method")?, get("route")?, get("code")?);
            Some((key, v.parse::<f64>().ok()?))
        })
        .collect()
}

/// What `cloud` answered between `before` and now, by `METHOD route code`.
async fn requests_since(
    cloud: &Cloud,
    before: &std::collections::BTreeMap<String, f64>,
) -> std::collections::BTreeMap<String, f64> {
    cloud_requests(cloud)
        .await
        .into_iter()
        .map(|(k, v)| {
            let d = v - before.get(&k).unwrap_or(&0.0);
            (k, d)
        })
        .filter(|(_, d)| *d > 0.0)
        .collect()
}

/// Issue #34's budget, pinned by counts: a new Service's load balancer is the look-ups by
/// name, ONE create of the whole tree (Octavia's single-call create, as OCCM sends it: the
/// listener with its pool, members and monitor), the wait for ACTIVE and the floating IP; the
/// sync the service controller runs for the provider's own annotation write reads the load
/// balancer once and nothing else; a later ensure reads everything again and changes
/// nothing; the deletion is one cascade DELETE and the floating IP's release.
#[tokio::test]
async fn a_new_service_costs_one_create_of_the_whole_tree() {
    use http::{Request, Response};
    use kube::client::Body;
    use std::collections::BTreeMap;

    const LB: &str = "/load-balancer/v2/lbaas/loadbalancers";
    const LB_ID: &str = "/load-balancer/v2/lbaas/loadbalancers/{id}";
    let cloud = Cloud::start().await;
    let public = public_network(&cloud).await;
    let subnet = cloud
        .ok(
            Method::GET,
            "/network/v2.0/subnets?name=private-subnet",
            None,
        )
        .await["subnets"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (mock, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let os = cloud.provider_with(&format!(
        "[LoadBalancer]\nsubnet-id = {subnet}\nfloating-network-id = {public}\ncreate-monitor = true\n"
    ));
    os.initialize(Some(kube::Client::new(mock, "default")))
        .await
        .unwrap();
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("whole-tree").await;
    let svc = service(&[(port, np)]);
    // The apiserver takes the annotation patch.
    let apiserver = tokio::spawn(async move {
        let (request, send) = handle.next_request().await.expect("the annotation patch");
        assert_eq!(request.method(), "PATCH");
        send.send_response(
            Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(Body::from(
                    serde_json::to_vec(&serde_json::json!({
                        "apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": "web", "namespace": "shop"}
                    }))
                    .unwrap(),
                ))
                .unwrap(),
        );
        handle
    });

    let before = cloud_requests(&cloud).await;
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let mut create = requests_since(&cloud, &before).await;
    // The wait's polls depend on how fast the cloud settles: at least one, not counted.
    let polls = create.remove(&format!("GET {LB_ID} 200")).unwrap_or(0.0);
    assert!(polls >= 1.0, "waited for ACTIVE: {create:?}");
    assert_eq!(
        create,
        BTreeMap::from([
            // By name, then by the legacy in-tree name (OCCM looks both up too).
            (format!("GET {LB} 200"), 2.0),
            (format!("POST {LB} 201"), 1.0),
            ("POST /network/v2.0/floatingips 201".to_owned(), 1.0),
        ]),
        "a create sends the look-ups, one POST of the whole tree and the floating IP"
    );
    let _handle = apiserver.await.unwrap();
    let fip = ingress_ip(&status);
    assert!(fip.starts_with("127.24.4."), "a floating IP: {fip}");
    // The tree is whole: listener, pool with its member, monitor; traffic flows.
    let all = lbs(&cloud).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["listeners"].as_array().unwrap().len(), 1);
    assert_eq!(all[0]["pools"].as_array().unwrap().len(), 1);
    assert_eq!(members(&cloud).await, vec![format!("127.0.0.1:{np}")]);
    let pools = cloud
        .ok(Method::GET, "/load-balancer/v2/lbaas/pools", None)
        .await;
    assert!(
        pools["pools"][0]["healthmonitor_id"].is_string(),
        "the monitor came with the tree: {pools}"
    );
    assert_eq!(
        ask(&format!("{fip}:{port}")).await.as_deref(),
        Some("whole-tree")
    );

    // The sync for the annotation write: one read of the load balancer.
    let id = all[0]["id"].as_str().unwrap().to_owned();
    let annotated = annotate(
        annotate(
            svc.clone(),
            "loadbalancer.openstack.org/load-balancer-id",
            &id,
        ),
        "loadbalancer.openstack.org/load-balancer-address",
        &fip,
    );
    let before = cloud_requests(&cloud).await;
    let again = lb
        .ensure_load_balancer("kubernetes", &annotated, &nodes)
        .await
        .unwrap();
    assert_eq!(again, status);
    assert_eq!(
        requests_since(&cloud, &before).await,
        BTreeMap::from([(format!("GET {LB_ID} 200"), 1.0)]),
        "the sync for the provider's own annotation write reads the load balancer once"
    );

    // Any later ensure reads the tree and the floating IP again and, all in place, writes
    // nothing.
    let before = cloud_requests(&cloud).await;
    let third = lb
        .ensure_load_balancer("kubernetes", &annotated, &nodes)
        .await
        .unwrap();
    assert_eq!(third, status);
    let reads = requests_since(&cloud, &before).await;
    assert!(
        reads.keys().all(|k| k.starts_with("GET ")),
        "nothing changed, nothing written: {reads:?}"
    );
    for route in [
        "GET /load-balancer/v2/lbaas/listeners 200",
        "GET /load-balancer/v2/lbaas/pools 200",
        "GET /load-balancer/v2/lbaas/pools/{id}/members 200",
        "GET /network/v2.0/floatingips 200",
    ] {
        assert_eq!(reads.get(route), Some(&1.0), "{route} in {reads:?}");
    }

    // The service controller's deletion: whether it exists (the load balancer and, beside
    // it, the floating IP its status names: one look-up, not a second one by the VIP port),
    // then the deletion, which reads neither again: the floating IP and the cascade DELETE,
    // the wait (the local cloud deletes at once: one poll) and the managed security group's
    // look-up.
    let deleted = with_status(annotated, &status);
    let before = cloud_requests(&cloud).await;
    assert_eq!(
        lb.get_load_balancer("kubernetes", &deleted).await.unwrap(),
        Some(status)
    );
    lb.ensure_load_balancer_deleted("kubernetes", &deleted)
        .await
        .unwrap();
    let delete = requests_since(&cloud, &before).await;
    assert_eq!(
        delete,
        BTreeMap::from([
            (format!("GET {LB_ID} 200"), 1.0),
            ("GET /network/v2.0/floatingips 200".to_owned(), 1.0),
            ("DELETE /network/v2.0/floatingips/{id} 204".to_owned(), 1.0),
            (format!("DELETE {LB_ID} 204"), 1.0),
            (format!("GET {LB_ID} 404"), 1.0),
            ("GET /network/v2.0/security-groups 200".to_owned(), 1.0),
        ]),
        "the deletion after get_load_balancer reads nothing twice"
    );
    assert!(lbs(&cloud).await.is_empty());
    assert!(floating_ips(&cloud).await.is_empty());
}

/// The Service with `status` as its status.
fn with_status(
    mut svc: Service,
    status: &k8s_openapi::api::core::v1::LoadBalancerStatus,
) -> Service {
    svc.status = Some(k8s_openapi::api::core::v1::ServiceStatus {
        load_balancer: Some(status.clone()),
        ..Default::default()
    });
    svc
}

/// A cloud, and a provider that gives each load balancer a floating IP from `public`.
async fn with_floating_ips() -> (Cloud, Arc<OpenStack>) {
    let cloud = Cloud::start().await;
    let public = public_network(&cloud).await;
    let os = ready(
        &cloud,
        &format!("[LoadBalancer]\nfloating-network-id = {public}\n"),
    )
    .await;
    (cloud, os)
}

/// A status naming an address that is not the load balancer's floating IP (stale, or another
/// Service's) is not trusted: the floating IP is then looked up by the VIP port, and the
/// answer is the load balancer's own.
#[tokio::test]
async fn a_stale_status_address_falls_back_to_the_vip_port() {
    let (cloud, os) = with_floating_ips().await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("stale-status").await;
    let svc = service(&[(port, np)]);
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let fip = ingress_ip(&status);
    let mut stale = status.clone();
    stale.ingress.as_mut().unwrap()[0].ip = Some("127.24.4.250".into());
    let before = cloud_requests(&cloud).await;
    assert_eq!(
        lb.get_load_balancer("kubernetes", &with_status(svc.clone(), &stale))
            .await
            .unwrap()
            .as_ref()
            .map(ingress_ip),
        Some(fip.clone())
    );
    let reads = requests_since(&cloud, &before).await;
    assert_eq!(
        reads.get("GET /network/v2.0/floatingips 200"),
        Some(&2.0),
        "by the status's address, then by the VIP port: {reads:?}"
    );
    // The right floating IP goes with the load balancer.
    lb.ensure_load_balancer_deleted("kubernetes", &with_status(svc, &stale))
        .await
        .unwrap();
    assert!(lbs(&cloud).await.is_empty());
    assert!(floating_ips(&cloud).await.is_empty());
}

/// `provider-requires-serial-api-calls = true` (OCCM's switch for Octavia providers that
/// refuse the single-call create): the load balancer is created bare, then its listener,
/// pool and members each in their own call, to the same result.
#[tokio::test]
async fn serial_api_calls_create_the_tree_call_by_call() {
    const LBAAS: &str = "/load-balancer/v2/lbaas";
    let cloud = Cloud::start().await;
    let os = ready(
        &cloud,
        "[LoadBalancer]\nprovider-requires-serial-api-calls = true\n",
    )
    .await;
    let lb = os.load_balancer().unwrap();
    let (np, port, nodes) = one_node("serial").await;
    let svc = service(&[(port, np)]);
    let before = cloud_requests(&cloud).await;
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let create = requests_since(&cloud, &before).await;
    for route in [
        format!("POST {LBAAS}/loadbalancers 201"),
        format!("POST {LBAAS}/listeners 201"),
        format!("POST {LBAAS}/pools 201"),
        format!("PUT {LBAAS}/pools/{{id}}/members 202"),
    ] {
        assert_eq!(create.get(&route), Some(&1.0), "{route} in {create:?}");
    }
    assert_eq!(members(&cloud).await, vec![format!("127.0.0.1:{np}")]);
    assert_eq!(
        ask(&format!("{}:{port}", ingress_ip(&status)))
            .await
            .as_deref(),
        Some("serial")
    );
}
