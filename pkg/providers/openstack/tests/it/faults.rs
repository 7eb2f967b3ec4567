//! Fault injection by the local cloud (its `--inject-*` settings): calls succeed through 5xx,
//! 429 and latency within the bounded retries, and fail clearly when the faults persist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use hypercloud_cloudprovider::{Error, Interface};
use hypercloud_localcloud::faults::{Latency, Rate};
use reqwest::Method;
use serde_json::json;
use support::{node, Cloud};

const FAST_RETRIES: &str =
    "[Hypercloud]\nserver-cache-ttl = 0s\nmax-attempts = 12\nretry-base-delay = 5ms\n";

#[tokio::test]
async fn every_capability_succeeds_through_random_server_errors() {
    let mut cloud = Cloud::start_with(|mut c| {
        c.faults.error_rate = "0.3".parse::<Rate>().unwrap();
        c
    })
    .await;
    let id = cloud.create_server("flaky", "2", Some("az-2")).await;
    let v = cloud
        .ok(
            Method::POST,
            &format!("/volume/v3/{}/volumes", cloud.project),
            Some(json!({"volume": {"size": 1, "availability_zone": "az-2"}})),
        )
        .await;
    let vol = v["volume"]["id"].as_str().unwrap().to_owned();
    let router = cloud.router_id().await;
    // Every service, Keystone included, now fails 30% of requests with a 500.
    cloud.restart().await;
    let os = cloud.provider_with(&format!("[Route]\nrouter-id = {router}\n{FAST_RETRIES}"));
    os.initialize(None).await.unwrap();
    let n = node("flaky", None);
    let mut logical = 1;
    for _ in 0..10 {
        let md = os
            .instances_v2()
            .unwrap()
            .instance_metadata(&n)
            .await
            .unwrap();
        assert_eq!(md.provider_id, format!("openstack:///{id}"));
        assert_eq!(
            os.volumes().volume_zone(&vol).await.unwrap().failure_domain,
            "az-2"
        );
        assert_eq!(os.routes().unwrap().list_routes("k").await.unwrap(), vec![]);
        // listing servers, volume, router, listing servers for the routes
        logical += 4;
    }
    let calls = os.api_calls();
    // With 41 requests at a 30% error rate, no retry at all has probability 0.7^41 < 1e-6.
    assert!(
        calls > logical,
        "{calls} calls for {logical} requests: no retries?"
    );
    println!("error rate 0.3: {logical} requests took {calls} attempts");
    cloud.shutdown().await;
}

#[tokio::test]
async fn persistent_server_errors_fail_after_the_bounded_attempts() {
    let mut cloud = Cloud::start_with(|mut c| {
        c.faults.error_rate = "compute=1".parse::<Rate>().unwrap();
        c
    })
    .await;
    cloud.restart().await;
    let os = cloud.provider_with("[Hypercloud]\nmax-attempts = 3\nretry-base-delay = 5ms\n");
    os.initialize(None).await.unwrap();
    let e = os
        .instances()
        .unwrap()
        .node_addresses("any")
        .await
        .unwrap_err();
    let Error::Cloud {
        status,
        operation,
        source,
        ..
    } = &e
    else {
        panic!("{e:?}");
    };
    let message = source.to_string();
    assert_eq!(*status, Some(500));
    assert_eq!(operation, "list servers");
    assert!(message.contains("injected"), "{message}");
    assert!(message.ends_with("(after 3 attempts)"), "{message}");
    assert_eq!(os.api_calls(), 1 + 3);
    cloud.shutdown().await;
}

#[tokio::test]
async fn throttling_is_retried_after_the_retry_after_delay() {
    let mut cloud = Cloud::start_with(|mut c| {
        c.faults.throttle_rate = "compute=1".parse::<Rate>().unwrap();
        c
    })
    .await;
    cloud.restart().await;
    let os = cloud.provider_with("[Hypercloud]\nmax-attempts = 2\nretry-base-delay = 5ms\n");
    os.initialize(None).await.unwrap();
    let t = Instant::now();
    let e = os
        .instances()
        .unwrap()
        .node_addresses("x")
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cloud {
                status: Some(429),
                ..
            }
        ),
        "{e}"
    );
    // Retry-After: 1 was honoured rather than the 5ms backoff.
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(os.api_calls(), 1 + 2);

    // 30% of the requests throttled: the look-ups still succeed.
    cloud.config.faults.throttle_rate = "compute=0.3".parse::<Rate>().unwrap();
    cloud.restart().await;
    cloud.config.faults = Default::default();
    let os = cloud.provider_with(FAST_RETRIES);
    let t = Instant::now();
    for _ in 0..3 {
        assert!(matches!(
            os.instances().unwrap().node_addresses("nobody").await,
            Err(Error::InstanceNotFound)
        ));
    }
    let (calls, took) = (os.api_calls(), t.elapsed());
    // 1 token + 3 listings without throttling (a fresh listing settles absence).
    let retries = calls - 4;
    assert!(
        took >= Duration::from_secs(retries),
        "{retries} retries in {took:?}"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn latency_is_absorbed() {
    let mut cloud = Cloud::start_with(|mut c| {
        c.faults.latency = "compute=300ms".parse::<Latency>().unwrap();
        c
    })
    .await;
    cloud.create_server("slow", "1", None).await;
    cloud.restart().await;
    let os = cloud.provider_with("");
    os.initialize(None).await.unwrap();
    let t = Instant::now();
    let md = os
        .instances_v2()
        .unwrap()
        .instance_metadata(&node("slow", None))
        .await
        .unwrap();
    assert_eq!(md.instance_type, "m1.tiny");
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(os.api_calls(), 2);
    cloud.shutdown().await;
}
