//! The cloud-controller-manager against a misbehaving cloud: a real `local-cloud serve` behind
//! a small HTTP proxy in this test that, for a while, answers every request 429 with absurd
//! `Retry-After` values (huge numbers, infinity, negative, garbage, HTTP dates far in the
//! future) or 5xx. The CCM must not panic, `/healthz` must stay truthful (200 while it lives
//! and works), and once the proxy turns normal every LoadBalancer Service converges with
//! exactly one load balancer each, and none is left after the Services are deleted.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use hypercloud_testenv::localcloud::{cli_json, state_dir, Serve};
use hypercloud_testenv::nodes::{self, create_tainted, has_taint, set_ready, TAINT_UNINITIALIZED};
use hypercloud_testenv::process::{free_port, personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use serde_json::json;

use crate::proxy::{Fault, Proxy};
use crate::BIN;

/// What the proxy answers while faulty, in turn: status and `Retry-After`.
const FAULTS: &[Fault] = &[
    (429, Some("99999999999999999999999999")),
    (429, Some("1e400")),
    (429, Some("-5")),
    (429, Some("soon")),
    (429, Some("Fri, 31 Dec 9999 23:59:59 GMT")),
    (503, Some("NaN")),
    (429, Some("18446744073709551616")),
    (500, None),
    (502, None),
    (503, Some("inf")),
];

fn lb_service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 80}]}
    }))
    .unwrap()
}

async fn healthz(http: &reqwest::Client, port: u16) -> Option<u16> {
    http.get(format!("https://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .ok()
        .map(|r| r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ccm_survives_absurd_retry_after_and_5xx_and_converges() {
    let _group = hypercloud_testenv::group("fault_proxy").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-fault-proxy")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let state = state_dir(&tmp);
    let serve = Serve::start(BIN, &state, &["--lb-vip-pool", "127.0.122.0/24"]);
    let node = env.unique_name("fp-node");
    cli_json(
        BIN,
        &state,
        &["instance", "create", &node, "--zone", "nova", "-o", "json"],
    );
    let proxy = Proxy::start(&serve.api_url, FAULTS).await;
    // Through the proxy; Retry-After honoured up to 2s so the test stays short (the clamp,
    // not the length, is under test), one retry per request.
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nauth-url = {}/identity/v3\n[Hypercloud]\nmax-retry-after = 2s\nmax-attempts = 2\nrequest-timeout = 10s\n",
            proxy.url
        ),
    )
    .unwrap();

    let nodes: Api<Node> = Api::all(env.client());
    create_tainted(&nodes, &node).await;
    set_ready(&nodes, &node, true).await;
    let port = free_port();
    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .arg("--leader-elect=false")
        .arg(format!("--secure-port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg("--controllers=cloud-node,service")
        .arg("--v=2");
    let mut ccm = Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        tmp.path().join("ccm.log"),
        Stdout::Null,
    );
    nodes::wait_for(
        &nodes,
        &node,
        "the Node to be initialised",
        Duration::from_secs(60),
        |n| !has_taint(n, TAINT_UNINITIALIZED),
    )
    .await;

    // The cloud misbehaves while the Services are created.
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    assert_eq!(healthz(&http, port).await, Some(200), "{}", ccm.log());
    proxy.set_faulty(true);
    let services: Api<Service> = Api::namespaced(env.client(), env.namespace());
    let names = ["fp-a", "fp-b", "fp-c", "fp-d", "fp-e"];
    for name in names {
        services
            .create(&PostParams::default(), &lb_service(name))
            .await
            .unwrap();
    }
    let faulty_until = Instant::now() + Duration::from_secs(12);
    while Instant::now() < faulty_until {
        assert!(ccm.running(), "the CCM exited under faults:\n{}", ccm.log());
        assert_eq!(
            healthz(&http, port).await,
            Some(200),
            "/healthz of a live, working CCM"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    proxy.set_faulty(false);
    let faults = proxy.faults_served();
    assert!(
        faults >= FAULTS.len(),
        "only {faults} faulty answers were served"
    );
    let log = ccm.log();
    assert!(
        log.contains("Retry-After clamped"),
        "no clamped Retry-After logged:\n{log}"
    );

    // Every Service converges, with exactly one load balancer each.
    for name in names {
        let suffix = format!("_{}_{name}", env.namespace());
        eventually(
            &format!("{name} to get an ingress IP"),
            Duration::from_secs(90),
            || {
                let services = services.clone();
                async move {
                    let s = services.get(name).await.ok()?;
                    s.status?.load_balancer?.ingress?.first()?.ip.clone()
                }
            },
        )
        .await;
        assert_eq!(
            serve.load_balancers(&suffix).len(),
            1,
            "load balancers of {name}"
        );
    }
    assert!(ccm.running());
    assert_eq!(healthz(&http, port).await, Some(200));

    // Deleted, none is left behind.
    for name in names {
        services
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    for name in names {
        eventually(
            &format!("{name} to be gone"),
            Duration::from_secs(60),
            || {
                let services = services.clone();
                async move { services.get_opt(name).await.ok()?.is_none().then_some(()) }
            },
        )
        .await;
    }
    let left = serve.load_balancers(&format!("_{}_", env.namespace()));
    assert!(left.is_empty(), "orphaned load balancers: {left:?}");
    let log = ccm.log();
    assert!(!log.contains("panicked"), "{log}");
    assert!(ccm.running());
    eprintln!("{faults} faulty answers served; CCM converged");

    nodes.delete(&node, &DeleteParams::default()).await.unwrap();
    env.cleanup().await.unwrap();
}
