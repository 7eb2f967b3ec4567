//! Fault injection: latency, 5xx and 429, globally and per service; faulted requests change
//! nothing.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use hypercloud_localcloud::faults::{Latency, Rate};
use hypercloud_localcloud::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::json;
use support::{assert_fault, TestCloud};

#[tokio::test]
async fn latency_is_added_per_service() {
    let cloud = TestCloud::start_with(|mut c| {
        c.faults.latency = "network=500ms".parse::<Latency>().unwrap();
        c
    })
    .await;
    let t = Instant::now();
    assert_eq!(
        cloud.get("/network/v2.0/networks").await.status,
        StatusCode::OK
    );
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let t = Instant::now();
    assert_eq!(
        cloud.get("/compute/v2.1/flavors").await.status,
        StatusCode::OK
    );
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "compute was delayed: {:?}",
        t.elapsed()
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn error_rate_one_fails_every_request_in_the_service_format_without_side_effects() {
    // Start clean to get a token, then restart the same state dir with faults on compute only.
    let mut cloud = TestCloud::start_then_restart_with(|c| {
        c.faults.error_rate = "compute=1".parse::<Rate>().unwrap();
    })
    .await;
    let r = cloud
        .post(
            "/compute/v2.1/servers",
            json!({"server": {"name": "x", "flavorRef": "1"}}),
        )
        .await;
    assert_fault(
        &r,
        StatusCode::INTERNAL_SERVER_ERROR,
        "computeFault",
        "create under faults",
    );
    assert_eq!(
        cloud.get("/network/v2.0/networks").await.status,
        StatusCode::OK
    );
    // Nothing was created: no port on the network either.
    let ports = cloud
        .get("/network/v2.0/ports?device_owner=compute:nova")
        .await;
    assert_eq!(ports.body["ports"], json!([]));
    cloud.restart_with(|c| c.faults = Default::default()).await;
    assert_eq!(
        cloud.get("/compute/v2.1/servers").await.body["servers"],
        json!([])
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn throttling_answers_429_with_retry_after() {
    let cloud = TestCloud::start_then_restart_with(|c| {
        c.faults.throttle_rate = "1".parse::<Rate>().unwrap();
    })
    .await;
    let r = cloud.get("/network/v2.0/networks").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(r.body["NeutronError"]["type"], "OverQuota");
    let r = cloud.get(&cloud.volumes()).await;
    assert_fault(
        &r,
        StatusCode::TOO_MANY_REQUESTS,
        "overLimit",
        "volumes throttled",
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn partial_error_rate_fails_some_requests() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::ephemeral(dir.path());
    config.faults.error_rate = "identity=0.5".parse::<Rate>().unwrap();
    let handle = Server::bind(config).await.unwrap();
    let http = reqwest::Client::new();
    let mut failed = 0;
    let n = 200;
    for _ in 0..n {
        let resp = http
            .get(format!("{}/identity/v3", handle.api_url()))
            .send()
            .await
            .unwrap();
        match resp.status() {
            StatusCode::OK => {}
            StatusCode::INTERNAL_SERVER_ERROR => failed += 1,
            other => panic!("unexpected {other}"),
        }
    }
    // Binomial(200, 0.5): outside [60, 140] has probability below 1e-8.
    assert!((60..=140).contains(&failed), "{failed} of {n} failed");
    handle.shutdown().await.unwrap();
}
