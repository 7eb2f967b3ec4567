//! The aws data plane: a LoadBalancer Service on `aws` (the cloud-controller-manager makes a
//! classic ELB in moto) carries real traffic through `local-cloud serve --follow-aws-elb`,
//! which serves the ELB's listener on a loopback VIP named in `<state-dir>/aws-elb-hosts`:
//! requests reach the Nodes' instances (their moto addresses mapped onto loopback), an
//! instance that fails the ELB's health check (`externalTrafficPolicy: Local`: HTTP `/healthz`
//! on the health-check node port, at the `healthcheck-path` the Service asks for) stops getting
//! traffic, and deleting the Service closes the listener.
#![cfg(feature = "aws")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hypercloud_testenv::aws::Cloud;
use hypercloud_testenv::nodes::{self, create_tainted, has_taint, set_ready, TAINT_UNINITIALIZED};
use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::BIN;

const CREDENTIALS: [(&str, &str); 4] = [
    ("AWS_ACCESS_KEY_ID", "AKIDHYPERCLOUDTEST"),
    ("AWS_SECRET_ACCESS_KEY", "secret"),
    ("AWS_CONFIG_FILE", "/nonexistent"),
    ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
];

/// A tiny HTTP server on `addr`: answers `body`, or 503 while `failing` is set or when the
/// request is not for `path` (when given).
async fn serve(
    addr: SocketAddr,
    body: String,
    failing: Arc<AtomicBool>,
    path: Option<&'static str>,
) {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let (body, failing) = (body.clone(), failing.clone());
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]);
                let wrong_path = path.is_some_and(|p| !request.starts_with(&format!("GET {p} ")));
                let status = if failing.load(Ordering::Relaxed) || wrong_path {
                    "503 Service Unavailable"
                } else {
                    "200 OK"
                };
                let reply = format!(
                    "HTTP/1.0 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
}

/// GET / through `addr`; the body, or None when nothing answers.
async fn get(addr: SocketAddr) -> Option<String> {
    let go = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(b"GET / HTTP/1.0\r\nHost: elb\r\n\r\n")
            .await
            .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        let (head, body) = out.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.0 200").then(|| body.to_owned())
    };
    tokio::time::timeout(Duration::from_secs(5), go)
        .await
        .ok()
        .flatten()
}

/// The VIP `<state-dir>/aws-elb-hosts` gives `name`.
fn vip_of(state: &std::path::Path, name: &str) -> Option<String> {
    let hosts = std::fs::read_to_string(state.join("aws-elb-hosts")).ok()?;
    hosts.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.split_once(' ')
            .filter(|(_, n)| *n == name)
            .map(|(ip, _)| ip.to_owned())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elb_listener_carries_traffic_follows_health_and_closes() {
    let _group = hypercloud_testenv::group("aws_data_plane").await;
    let env = hypercloud_testenv::TestEnv::new("aws-data-plane")
        .await
        .expect("testenv");
    let cloud = Cloud::start(2, 0);
    let dir = tempfile::tempdir().unwrap();
    // The VPC is 10.N.0.0/16: its addresses are reached at 127.N.0.0/16, VIPs come from
    // 127.N.250.0/24.
    let n: u8 = cloud
        .field(0, "PrivateIpAddress")
        .split('.')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let map = |ip: &str| ip.replacen(&format!("10.{n}."), &format!("127.{n}."), 1);
    let state = dir.path().join("local-cloud");
    let mut lc = std::process::Command::new(BIN);
    lc.args(["local-cloud", "serve", "--state-dir"])
        .arg(&state)
        .args(["--listen", "127.0.0.1:0", "--no-metadata"])
        .arg(format!("--lb-vip-pool=127.{n}.250.0/24"))
        .arg(format!("--follow-aws-elb={}", cloud.moto.url()))
        .arg(format!(
            "--follow-aws-address-map=10.{n}.0.0/16=127.{n}.0.0/16"
        ))
        .arg("--follow-aws-interval=500ms");
    for (k, v) in CREDENTIALS {
        lc.env(k, v);
    }
    let _lc = Proc::spawn_with(
        "local-cloud",
        lc,
        dir.path().join("local-cloud.log"),
        Stdout::Log,
    );

    let conf = dir.path().join("cloud.conf");
    std::fs::write(&conf, cloud.conf("instance-cache-ttl = 0s")).unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let names: Vec<String> = (0..2)
        .map(|i| cloud.field(i, "PrivateDnsName").to_owned())
        .collect();
    for name in &names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
        create_tainted(&nodes, name).await;
        set_ready(&nodes, name, true).await;
    }
    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=aws")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .args(["--leader-elect=false", "--secure-port=0"])
        .arg("--controllers=cloud-node,service")
        .arg("--v=2");
    for (k, v) in CREDENTIALS {
        cmd.env(k, v);
    }
    let _ccm = Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.path().join("ccm.log"),
        Stdout::Null,
    );
    for name in &names {
        nodes::wait_for(
            &nodes,
            name,
            "node initialised from EC2",
            Duration::from_secs(60),
            |n| !has_taint(n, TAINT_UNINITIALIZED),
        )
        .await;
    }

    let services: Api<Service> = Api::namespaced(env.client(), env.namespace());
    let port = 20000 + u16::from(n);
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hello", "annotations": {
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval": "5",
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-timeout": "2",
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold": "2",
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-unhealthy-threshold": "2",
            "service.beta.kubernetes.io/aws-load-balancer-healthcheck-path": "/ready",
        }},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                 "ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": 8080}]},
    }))
    .unwrap();
    let svc = services.create(&PostParams::default(), &svc).await.unwrap();
    let spec = svc.spec.clone().unwrap();
    let node_port = u16::try_from(spec.ports.unwrap()[0].node_port.unwrap()).unwrap();
    let hc_port = u16::try_from(spec.health_check_node_port.unwrap()).unwrap();
    // kube-proxy's part on each Node: the node port answers with the Node's name, the
    // health-check node port says whether the Node has a ready endpoint.
    let mut failing = Vec::new();
    for i in 0..2 {
        let ip = map(cloud.field(i, "PrivateIpAddress"));
        let fail = Arc::new(AtomicBool::new(false));
        let addr = |p: u16| SocketAddr::new(ip.parse().unwrap(), p);
        serve(
            addr(node_port),
            format!("backend-{i}"),
            Arc::new(AtomicBool::new(false)),
            None,
        )
        .await;
        // Only /ready answers 200: a check of another path fails every instance.
        serve(addr(hc_port), "ok".into(), fail.clone(), Some("/ready")).await;
        failing.push(fail);
    }

    let api = services.clone();
    let host = eventually(
        "the Service's ingress hostname",
        Duration::from_secs(90),
        || {
            let api = api.clone();
            async move {
                let s = api.get("hello").await.ok()?;
                s.status?.load_balancer?.ingress?.first()?.hostname.clone()
            }
        },
    )
    .await;
    let elbs = cloud.moto.cli(&["elb", "describe-load-balancers"]);
    let d = elbs["LoadBalancerDescriptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["DNSName"] == host.as_str())
        .unwrap_or_else(|| panic!("no ELB named {host}: {elbs}"))
        .clone();
    assert_eq!(
        d["HealthCheck"]["Target"],
        format!("HTTP:{hc_port}/ready").as_str()
    );
    let vip = eventually(
        "the ELB's VIP in aws-elb-hosts",
        Duration::from_secs(30),
        || {
            let v = vip_of(&state, &host);
            async move { v }
        },
    )
    .await;
    let through: SocketAddr = format!("{vip}:{port}").parse().unwrap();

    // Both instances answer through the ELB's listener.
    let seen = eventually(
        "both backends through the ELB",
        Duration::from_secs(60),
        || async move {
            let mut seen = BTreeSet::new();
            for _ in 0..8 {
                seen.insert(get(through).await?);
            }
            (seen.len() == 2).then_some(seen)
        },
    )
    .await;
    assert_eq!(
        seen,
        BTreeSet::from(["backend-0".into(), "backend-1".into()])
    );

    // Instance 1 fails its health check (it still serves its node port): it stops getting
    // traffic.
    failing[1].store(true, Ordering::Relaxed);
    eventually(
        "only backend-0 through the ELB",
        Duration::from_secs(60),
        || async move {
            for _ in 0..8 {
                if get(through).await? != "backend-0" {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    // Healthy again: back in rotation.
    failing[1].store(false, Ordering::Relaxed);
    eventually(
        "backend-1 back through the ELB",
        Duration::from_secs(60),
        || async move {
            for _ in 0..8 {
                if get(through).await.as_deref() == Some("backend-1") {
                    return Some(());
                }
            }
            None
        },
    )
    .await;

    // The Service goes: the ELB goes from moto, its listener closes, its name leaves the file.
    services
        .delete("hello", &DeleteParams::default())
        .await
        .unwrap();
    let host2 = host.clone();
    let state2 = state.clone();
    eventually("the ELB's listener closed", Duration::from_secs(90), || {
        let (host, state) = (host2.clone(), state2.clone());
        async move {
            let closed = tokio::net::TcpStream::connect(through).await.is_err();
            (closed && vip_of(&state, &host).is_none()).then_some(())
        }
    })
    .await;
    let left = cloud.moto.cli(&["elb", "describe-load-balancers"]);
    assert_eq!(
        left["LoadBalancerDescriptions"].as_array().map(Vec::len),
        Some(0),
        "{left}"
    );
    for name in &names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
    env.cleanup().await.expect("cleanup");
}
