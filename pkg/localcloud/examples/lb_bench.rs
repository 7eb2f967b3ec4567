//! Benchmark (not a test) of the local cloud's load-balancer data plane on loopback: bulk
//! throughput, request/response round trips on one connection, and connect + one round trip,
//! each directly to the backend and through a listener (VIP 127.0.110.1).
//!
//! `cargo run --release --example lb_bench -p hypercloud-localcloud [-- <MiB>]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hypercloud_localcloud::{Server, ServerConfig};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Echoes everything back.
async fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

async fn api(
    http: &reqwest::Client,
    token: &str,
    method: reqwest::Method,
    url: String,
    body: Value,
) -> Value {
    let r = http
        .request(method, url)
        .header("x-auth-token", token)
        .json(&body)
        .send()
        .await
        .unwrap();
    r.json().await.unwrap_or(Value::Null)
}

async fn wait_active(http: &reqwest::Client, token: &str, url: &str) {
    loop {
        let v: Value = http
            .get(url)
            .header("x-auth-token", token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v["loadbalancer"]["provisioning_status"] == "ACTIVE" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `mib` MiB and reads it back (echo), in parallel; MiB/s one way.
async fn throughput(addr: SocketAddr, mib: usize) -> f64 {
    let s = TcpStream::connect(addr).await.unwrap();
    let (mut r, mut w) = s.into_split();
    let total = mib * 1024 * 1024;
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0;
        while sent < total {
            w.write_all(&chunk).await.unwrap();
            sent += chunk.len();
        }
        w.shutdown().await.unwrap();
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < total {
        let n = r.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        got += n;
    }
    writer.await.unwrap();
    mib as f64 / start.elapsed().as_secs_f64()
}

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(v[v.len() / 2]), us(v[v.len() * 99 / 100]))
}

/// 1-byte round trips on one connection: (median µs, p99 µs).
async fn round_trips(addr: SocketAddr, n: usize) -> (f64, f64) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let mut b = [0u8; 1];
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        s.write_all(b"x").await.unwrap();
        s.read_exact(&mut b).await.unwrap();
        times.push(t.elapsed());
    }
    percentiles(times)
}

/// Connect, one round trip, close: (median µs, p99 µs).
async fn connects(addr: SocketAddr, n: usize) -> (f64, f64) {
    let mut times = Vec::with_capacity(n);
    let mut b = [0u8; 1];
    for _ in 0..n {
        let t = Instant::now();
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        s.write_all(b"x").await.unwrap();
        s.read_exact(&mut b).await.unwrap();
        times.push(t.elapsed());
    }
    percentiles(times)
}

#[tokio::main]
async fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(512);
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        lb_vip_pool: "127.0.110.0/24".parse().unwrap(),
        metadata_listen: None,
        ..ServerConfig::ephemeral(dir.path())
    };
    let handle = Server::bind(config).await.unwrap();
    let base = handle.api_url().to_owned();
    let http = reqwest::Client::new();
    let auth = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}},
        "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}});
    let r = http
        .post(format!("{base}/identity/v3/auth/tokens"))
        .json(&auth)
        .send()
        .await
        .unwrap();
    let token = r.headers()["x-subject-token"].to_str().unwrap().to_owned();
    let lbaas = format!("{base}/load-balancer/v2/lbaas");
    let post = reqwest::Method::POST;

    let backend = echo_server().await;
    let lb = api(
        &http,
        &token,
        post.clone(),
        format!("{lbaas}/loadbalancers"),
        json!({"loadbalancer": {"name": "bench", "vip_network_id": "bench"}}),
    )
    .await;
    let lb_id = lb["loadbalancer"]["id"].as_str().unwrap().to_owned();
    let vip = lb["loadbalancer"]["vip_address"]
        .as_str()
        .unwrap()
        .to_owned();
    let lb_url = format!("{lbaas}/loadbalancers/{lb_id}");
    wait_active(&http, &token, &lb_url).await;
    let port = std::net::TcpListener::bind((vip.as_str(), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let l = api(
        &http,
        &token,
        post.clone(),
        format!("{lbaas}/listeners"),
        json!({"listener": {"loadbalancer_id": lb_id, "protocol": "TCP", "protocol_port": port}}),
    )
    .await;
    wait_active(&http, &token, &lb_url).await;
    let p = api(&http, &token, post.clone(), format!("{lbaas}/pools"),
        json!({"pool": {"listener_id": l["listener"]["id"], "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}})).await;
    wait_active(&http, &token, &lb_url).await;
    let pool_id = p["pool"]["id"].as_str().unwrap().to_owned();
    api(
        &http,
        &token,
        post.clone(),
        format!("{lbaas}/pools/{pool_id}/members"),
        json!({"member": {"address": "127.0.0.1", "protocol_port": backend.port()}}),
    )
    .await;
    wait_active(&http, &token, &lb_url).await;
    let vip: SocketAddr = format!("{vip}:{port}").parse().unwrap();

    // Warm up both paths.
    let _ = round_trips(backend, 200).await;
    let _ = round_trips(vip, 200).await;

    println!("lb_bench: echo backend {backend}, listener {vip}");
    for (name, addr) in [("direct", backend), ("via LB", vip)] {
        let t = throughput(addr, mib).await;
        println!("{name:>8}: throughput {t:8.0} MiB/s ({mib} MiB echoed)");
    }
    for (name, addr) in [("direct", backend), ("via LB", vip)] {
        let (p50, p99) = round_trips(addr, 20_000).await;
        println!("{name:>8}: 1-byte round trip p50 {p50:6.1} µs  p99 {p99:6.1} µs (20000 on one connection)");
    }
    for (name, addr) in [("direct", backend), ("via LB", vip)] {
        let (p50, p99) = connects(addr, 2_000).await;
        println!(
            "{name:>8}: connect + round trip p50 {p50:6.1} µs  p99 {p99:6.1} µs (2000 connections)"
        );
    }
    handle.shutdown().await.unwrap();
}
