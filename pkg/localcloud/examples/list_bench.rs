//! Benchmark (not a test) of the local cloud's Octavia list calls as the number of load
//! balancers grows: `GET /v2/lbaas/loadbalancers?name=X` (what the openstack provider asks on
//! every ensure), `?vip_port_id=X`, the unfiltered list and one page of it (`limit=50`), at 1 and
//! 200 load balancers, each with a listener and a pool (single-call create). Median of 30 calls.
//!
//! `cargo run --example list_bench -p hypercloud-localcloud [-- <count>...]` (default 1 200)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use hypercloud_localcloud::ServerConfig;
use serde_json::{json, Value};

// The integration tests' fixture: the local cloud in process, logged in.
#[path = "../tests/it/support.rs"]
mod support;

use support::{TestCloud, LBAAS};

/// Median of 30 `GET`s of `path`, each answered with `want` load balancers.
async fn median_ms(c: &TestCloud, path: &str, want: usize) -> f64 {
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let v = c.get(path).await.body;
        times.push(t.elapsed());
        assert_eq!(
            v["loadbalancers"].as_array().map(Vec::len),
            Some(want),
            "{path}"
        );
    }
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let counts = if counts.is_empty() {
        vec![1, 200]
    } else {
        counts
    };
    println!("| load balancers | ?name=X | ?vip_port_id=X | unfiltered | limit=50 |");
    println!("|---|---|---|---|---|");
    for n in counts {
        let c = TestCloud::start_with(|c| ServerConfig {
            lb_vip_pool: "127.0.120.0/22".parse().unwrap(),
            metadata_listen: None,
            ..c
        })
        .await;
        let mut last = Value::Null;
        for i in 0..n {
            let body = json!({"loadbalancer": {"name": format!("lb-{i}"), "vip_network_id": "net",
                "listeners": [{"protocol": "TCP", "protocol_port": 20000 + i,
                    "default_pool": {"protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}}]}});
            last = c.post(&format!("{LBAAS}/loadbalancers"), body).await.body;
            assert!(last["loadbalancer"]["id"].is_string(), "{last}");
        }
        let name = format!("lb-{}", n - 1);
        let port = last["loadbalancer"]["vip_port_id"].as_str().unwrap_or("");
        let lbs = format!("{LBAAS}/loadbalancers");
        let by_name = median_ms(&c, &format!("{lbs}?name={name}"), 1).await;
        let by_port = median_ms(
            &c,
            &format!("{lbs}?vip_port_id={port}"),
            usize::from(!port.is_empty()),
        )
        .await;
        let all = median_ms(&c, &lbs, n).await;
        let page = median_ms(&c, &format!("{lbs}?limit=50"), n.min(50)).await;
        println!("| {n} | {by_name:.2} ms | {by_port:.2} ms | {all:.2} ms | {page:.2} ms |");
        c.shutdown().await;
    }
}
