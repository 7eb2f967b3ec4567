//! Integration tests of the cloudstack provider against the local cloud's CloudStack dialect,
//! started in process on free ports: instances and zones, a load balancer that carries real
//! traffic and whose firewall rules follow `loadBalancerSourceRanges`, the virtual router's
//! metadata, and the errors a wrong secret key and a job that never ends make.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use hypercloud_cloudprovider::{Chain, CloudConfig, Error, Interface};
use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use hypercloud_providers_cloudstack::{CloudStack, Config};
use hypercloud_testenv::localcloud::Nova;
use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Cloud {
    handle: ServerHandle,
    _dir: tempfile::TempDir,
    nova: Nova,
    http: reqwest::Client,
    keys: (String, String),
}

impl Cloud {
    async fn start(f: impl FnOnce(ServerConfig) -> ServerConfig) -> Cloud {
        let dir = tempfile::tempdir().unwrap();
        let handle = Server::bind(f(ServerConfig::ephemeral(dir.path())))
            .await
            .unwrap();
        let nova = Nova::login(handle.api_url()).await;
        let http = reqwest::Client::new();
        let keys = keys(&http, handle.api_url()).await;
        Cloud {
            handle,
            _dir: dir,
            nova,
            http,
            keys,
        }
    }

    fn provider(&self, extra: &str) -> CloudStack {
        let text = format!(
            "[Global]\napi-url = {}/client/api\napi-key = {}\nsecret-key = {}\n{extra}",
            self.handle.api_url(),
            self.keys.0,
            self.keys.1
        );
        CloudStack::new(config(&text)).unwrap()
    }

    /// A CloudStack command with the operator's session (a Keystone token as `sessionkey`).
    async fn session(&self, params: &[(&str, &str)]) -> Value {
        session(&self.http, self.handle.api_url(), params).await
    }

    async fn fixed_ip(&self, id: &str) -> String {
        let v = self
            .nova
            .call(reqwest::Method::GET, &format!("/servers/{id}/ips"), None)
            .await;
        v["addresses"].as_object().unwrap().values().next().unwrap()[0]["addr"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

fn config(text: &str) -> Config {
    let cc = CloudConfig {
        origin: "test cloudstack.conf".into(),
        bytes: text.as_bytes().to_vec(),
    };
    Config::from_cloud_config(Some(&cc)).unwrap()
}

async fn session(http: &reqwest::Client, url: &str, params: &[(&str, &str)]) -> Value {
    let auth = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}},
        "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}});
    let r = http
        .post(format!("{url}/identity/v3/auth/tokens"))
        .json(&auth)
        .send()
        .await
        .unwrap();
    let token = r.headers()["x-subject-token"].to_str().unwrap().to_owned();
    let mut all: Vec<(&str, &str)> = vec![("response", "json"), ("sessionkey", &token)];
    all.extend_from_slice(params);
    let v: Value = http
        .get(format!("{url}/client/api"))
        .query(&all)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v.as_object().unwrap().values().next().unwrap().clone()
}

/// The admin's API and secret keys, as `local-cloud cloudstack-keys` reads them.
async fn keys(http: &reqwest::Client, url: &str) -> (String, String) {
    let users = session(
        http,
        url,
        &[("command", "listUsers"), ("username", "admin")],
    )
    .await;
    let id = users["user"][0]["id"].as_str().unwrap().to_owned();
    let k = session(http, url, &[("command", "getUserKeys"), ("id", &id)]).await;
    (
        k["userkeys"]["apikey"].as_str().unwrap().to_owned(),
        k["userkeys"]["secretkey"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn vms_are_instances_with_their_zone_offering_and_state() {
    let c = Cloud::start(|c| c).await;
    let a = c.nova.server("cs-a", json!({})).await;
    let ip = c.fixed_ip(&a).await;
    let p = c.provider("");
    assert_eq!(p.provider_name(), "cloudstack");
    let i = p.instances().unwrap();
    assert_eq!(i.instance_id("cs-a").await.unwrap(), a);
    let addrs: Vec<(String, String)> = i
        .node_addresses("cs-a")
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(addrs[0], ("InternalIP".to_owned(), ip.clone()));
    assert_eq!(addrs[1].0, "Hostname");
    assert!(!i.instance_type("cs-a").await.unwrap().is_empty());
    assert!(matches!(
        i.instance_id("cs-b").await,
        Err(Error::InstanceNotFound)
    ));

    let z = p.zones().unwrap();
    let zone = z.get_zone_by_node_name("cs-a").await.unwrap();
    assert_eq!(
        (zone.failure_domain.as_str(), zone.region.as_str()),
        ("nova", "nova")
    );
    let pid = format!("cloudstack://{a}");
    assert_eq!(z.get_zone_by_provider_id(&pid).await.unwrap(), zone);
    let configured = c.provider("zone = elsewhere\n");
    assert_eq!(
        configured.zones().unwrap().get_zone().await.unwrap().region,
        "elsewhere"
    );

    assert!(i.instance_exists_by_provider_id(&pid).await.unwrap());
    assert!(!i.instance_shutdown_by_provider_id(&pid).await.unwrap());
    c.nova
        .call(
            reqwest::Method::POST,
            &format!("/servers/{a}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert!(i.instance_shutdown_by_provider_id(&pid).await.unwrap());
    c.nova
        .call(reqwest::Method::DELETE, &format!("/servers/{a}"), None)
        .await;
    assert!(!i.instance_exists_by_provider_id(&pid).await.unwrap());
    let other = Chain(
        &i.instance_exists_by_provider_id("aws:///i-1")
            .await
            .unwrap_err(),
    )
    .to_string();
    assert!(
        other.contains("is not a cloudstack://<vm id> provider ID"),
        "{other}"
    );
}

#[tokio::test]
async fn metadata_alone_answers_for_the_kubelet_s_own_vm() {
    let c = Cloud::start(|c| c).await;
    let a = c.nova.server("cs-a", json!({})).await;
    let ip = c.fixed_ip(&a).await;
    let md = c.handle.metadata_addr().unwrap();
    let p = CloudStack::new(config(&format!(
        "[Hypercloud]\nmetadata-url = http://{md}/cloudstack/{a}\n"
    )))
    .unwrap();
    assert!(
        p.load_balancer().is_none(),
        "no API: no load balancers, as upstream"
    );
    let i = p.instances().unwrap();
    assert_eq!(i.instance_id("anything").await.unwrap(), a);
    let addrs = i.node_addresses("anything").await.unwrap();
    assert!(
        addrs
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == ip),
        "{addrs:?}"
    );
    assert_eq!(p.zones().unwrap().get_zone().await.unwrap().region, "nova");
    // What the kubelet-helper asks: its own Node's zone, by name.
    assert_eq!(
        p.zones()
            .unwrap()
            .get_zone_by_node_name("anything")
            .await
            .unwrap()
            .failure_domain,
        "nova"
    );
    assert!(!i.instance_type("anything").await.unwrap().is_empty());
}

/// A TCP server on `addr` that answers every connection with `name` and closes.
async fn backend(addr: SocketAddr, name: &'static str) {
    let l = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(name.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
}

/// What answers at `addr` (`None`: refused, or closed without a word).
async fn ask(addr: SocketAddr) -> Option<String> {
    let s = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await;
    let mut s = s.ok()?.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    (!out.is_empty()).then_some(out)
}

async fn answers(addr: SocketAddr, want: Option<&str>) {
    for _ in 0..50 {
        if ask(addr).await.as_deref() == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{addr} never answered {want:?}");
}

async fn free_port(ip: &str) -> u16 {
    let l = TcpListener::bind((ip, 0)).await.unwrap();
    l.local_addr().unwrap().port()
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn service(port: u16, node_port: u16, ranges: &[&str]) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "8a2f0c1e-0000-4000-8000-000000000001"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": port, "nodePort": node_port, "protocol": "TCP"}],
                 "loadBalancerSourceRanges": ranges},
    }))
    .unwrap()
}

#[tokio::test]
async fn load_balancers_carry_traffic_through_rules_and_firewall_rules() {
    let c = Cloud::start(|c| ServerConfig {
        lb_vip_pool: "127.1.237.0/24".parse().unwrap(),
        ..c
    })
    .await;
    let a = c.nova.server("cs-a", json!({})).await;
    let b = c.nova.server("cs-b", json!({})).await;
    let (ip_a, ip_b) = (c.fixed_ip(&a).await, c.fixed_ip(&b).await);
    let node_port = free_port(&ip_a).await;
    backend(format!("{ip_a}:{node_port}").parse().unwrap(), "cs-a").await;
    backend(format!("{ip_b}:{node_port}").parse().unwrap(), "cs-b").await;
    let p = c.provider("");
    let lb = p.load_balancer().unwrap();
    let nodes = [node("cs-a"), node("cs-b")];
    let port = free_port("127.24.4.1").await;

    // Open to loopback sources: traffic reaches a Node's node port through the public IP.
    let svc = service(port, node_port, &["127.0.0.0/8"]);
    let status = lb.ensure_load_balancer("k", &svc, &nodes).await.unwrap();
    let ip = status.ingress.unwrap()[0].ip.clone().unwrap();
    let through: SocketAddr = format!("{ip}:{port}").parse().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..100 {
        if let Some(who) = ask(through).await {
            seen.insert(who);
        }
        if seen.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        seen.iter().map(String::as_str).collect::<Vec<_>>(),
        ["cs-a", "cs-b"],
        "both Nodes get traffic"
    );
    let rules = c.session(&[("command", "listLoadBalancerRules")]).await;
    let rule = &rules["loadbalancerrule"][0];
    assert_eq!(rule["privateport"], node_port.to_string(), "{rules}");
    assert_eq!(rule["publicport"], port.to_string());
    let fw = c
        .session(&[
            ("command", "listFirewallRules"),
            ("ipaddressid", rule["publicipid"].as_str().unwrap()),
        ])
        .await;
    assert_eq!(fw["firewallrule"][0]["cidrlist"], "127.0.0.0/8", "{fw}");
    // The same again changes nothing.
    assert_eq!(
        lb.ensure_load_balancer("k", &svc, &nodes)
            .await
            .unwrap()
            .ingress
            .unwrap()[0]
            .ip,
        Some(ip.clone())
    );

    // Sources the firewall does not admit get nothing.
    let closed = service(port, node_port, &["10.0.0.0/8"]);
    lb.ensure_load_balancer("k", &closed, &nodes).await.unwrap();
    answers(through, None).await;
    let fw = c
        .session(&[
            ("command", "listFirewallRules"),
            ("ipaddressid", rule["publicipid"].as_str().unwrap()),
        ])
        .await;
    assert_eq!(fw["count"], 1, "the old firewall rule went: {fw}");

    // One Node left: the rule's VMs follow; traffic reaches it.
    lb.ensure_load_balancer("k", &svc, &nodes).await.unwrap();
    lb.update_load_balancer("k", &svc, &nodes[1..])
        .await
        .unwrap();
    let members = c
        .session(&[
            ("command", "listLoadBalancerRuleInstances"),
            ("id", rule["id"].as_str().unwrap()),
        ])
        .await;
    assert_eq!(
        members["loadbalancerruleinstance"].as_array().map(Vec::len),
        Some(1),
        "{members}"
    );
    assert_eq!(members["loadbalancerruleinstance"][0]["id"], b.as_str());
    answers(through, Some("cs-b")).await;

    // Refused settings are named before any call.
    let local: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "8a2f0c1e-0000-4000-8000-000000000001"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                 "ports": [{"port": port, "nodePort": node_port}]},
    }))
    .unwrap();
    let e = lb
        .ensure_load_balancer("k", &local, &nodes)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("externalTrafficPolicy"), "{e}");

    // Deleted: nothing left, the IP released, the address silent.
    lb.ensure_load_balancer_deleted("k", &svc).await.unwrap();
    assert!(lb.get_load_balancer("k", &svc).await.unwrap().is_none());
    let ips = c
        .session(&[("command", "listPublicIpAddresses"), ("ipaddress", &ip)])
        .await;
    assert!(ips.get("publicipaddress").is_none(), "{ips}");
    answers(through, None).await;
    lb.ensure_load_balancer_deleted("k", &svc).await.unwrap();
}

#[tokio::test]
async fn a_wrong_secret_and_a_job_that_never_ends_are_named() {
    let c = Cloud::start(|c| ServerConfig {
        cloudstack_stuck_jobs: true,
        lb_vip_pool: "127.1.238.0/24".parse().unwrap(),
        ..c
    })
    .await;
    c.nova.server("cs-a", json!({})).await;
    let wrong = CloudStack::new(config(&format!(
        "[Global]\napi-url = {}/client/api\napi-key = {}\nsecret-key = not-the-secret\n",
        c.handle.api_url(),
        c.keys.0
    )))
    .unwrap();
    let e = Chain(
        &wrong
            .instances()
            .unwrap()
            .instance_id("cs-a")
            .await
            .unwrap_err(),
    )
    .to_string();
    assert!(
        e.contains("errorcode 401") && e.contains("secret-key"),
        "{e}"
    );
    assert!(!e.contains("not-the-secret"), "the secret leaked: {e}");

    let p = c.provider("[Hypercloud]\njob-timeout = 1s\n");
    let svc = service(80, 30080, &[]);
    let e = Chain(
        &p.load_balancer()
            .unwrap()
            .ensure_load_balancer("k", &svc, &[node("cs-a")])
            .await
            .unwrap_err(),
    )
    .to_string();
    assert!(
        e.contains("did not finish within 1s") && e.contains("job-timeout"),
        "{e}"
    );
}
