//! Benchmark (not a test) of the local cloud's load-balancer data plane on loopback: bulk
//! throughput, request/response round trips on one connection, and connect + one round trip,
//! each directly to the backend and through a listener (VIP 127.0.110.1).
//!
//! `cargo run --release --example lb_bench -p hypercloud-localcloud [-- <MiB>]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hypercloud_localcloud::ServerConfig;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// The integration tests' fixture: the local cloud in process, logged in.
#[path = "../tests/it/support.rs"]
mod support;

use support::{echo_backend, free_port, TestCloud};

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
    let c = TestCloud::start_with(|c| ServerConfig {
        lb_vip_pool: "127.0.110.0/24".parse().unwrap(),
        metadata_listen: None,
        ..c
    })
    .await;

    let backend = echo_backend().await;
    let lb = c
        .create_lb(json!({"name": "bench", "vip_network_id": "bench"}))
        .await;
    let port = free_port(&lb.vip).await;
    c.add_listener_and_pool(
        &lb.id,
        json!({"protocol": "TCP", "protocol_port": port}),
        json!({"protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}),
        &[json!({"address": "127.0.0.1", "protocol_port": backend.port()})],
    )
    .await;
    let vip: SocketAddr = format!("{}:{port}", lb.vip).parse().unwrap();

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
    c.shutdown().await;
}
