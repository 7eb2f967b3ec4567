//! Instances, InstancesV2 and Zones against a real local cloud, including the batching figure:
//! cloud calls per node when many nodes are initialised.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use hypercloud_cloudprovider::{capabilities, Error, Interface};
use support::{node, Cloud};

fn addr(v: &[k8s_openapi::api::core::v1::NodeAddress], kind: &str) -> Vec<String> {
    v.iter()
        .filter(|a| a.type_ == kind)
        .map(|a| a.address.clone())
        .collect()
}

#[tokio::test]
async fn instances_v2_answers_from_the_cloud_and_follows_its_state() {
    let cloud = Cloud::start().await;
    let id = cloud.create_server("node-a", "3", Some("az-2")).await;
    let fip = cloud.add_floating_ip(&id).await;
    // Cache off: every look-up sees the cloud's current state.
    let os = cloud.provider_with("[Hypercloud]\nserver-cache-ttl = 0s\n");
    os.initialize(None).await.unwrap();
    let supported: Vec<_> = capabilities(os.as_ref())
        .into_iter()
        .filter(|c| c.supported)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        supported,
        vec![
            "instances",
            "instances-v2",
            "load-balancer",
            "zones",
            "pv-labeler",
            "volumes",
            "attach-detach"
        ]
    );

    let v2 = os.instances_v2().unwrap();
    let n = node("node-a", None);
    let md = v2.instance_metadata(&n).await.unwrap();
    assert_eq!(md.provider_id, format!("openstack:///{id}"));
    assert_eq!(md.instance_type, "m1.medium");
    assert_eq!(md.zone, "az-2");
    assert_eq!(md.region, "RegionOne");
    let internal = addr(&md.node_addresses, "InternalIP");
    assert_eq!(internal.len(), 1, "{:?}", md.node_addresses);
    assert!(internal[0].starts_with("127.1.0."), "{internal:?}");
    assert_eq!(addr(&md.node_addresses, "ExternalIP"), vec![fip]);
    assert!(v2.instance_exists(&n).await.unwrap());
    assert!(!v2.instance_shutdown(&n).await.unwrap());

    // By provider ID, in both spellings upstream accepts.
    let by_id = node("renamed-node-object", Some(&md.provider_id));
    assert_eq!(v2.instance_metadata(&by_id).await.unwrap(), md);
    let regional = node("x", Some(&format!("openstack://RegionOne/{id}")));
    assert!(v2.instance_exists(&regional).await.unwrap());
    let elsewhere = node("x", Some(&format!("openstack://RegionTwo/{id}")));
    assert!(!v2.instance_exists(&elsewhere).await.unwrap());

    cloud.server_action(&id, "os-stop").await;
    assert!(v2.instance_shutdown(&n).await.unwrap());
    assert!(v2.instance_shutdown(&by_id).await.unwrap());
    cloud.server_action(&id, "os-start").await;
    assert!(!v2.instance_shutdown(&by_id).await.unwrap());

    cloud.delete_server(&id).await;
    assert!(!v2.instance_exists(&n).await.unwrap());
    assert!(!v2.instance_exists(&by_id).await.unwrap());
    assert!(matches!(
        v2.instance_metadata(&n).await,
        Err(Error::InstanceNotFound)
    ));
    assert!(matches!(
        v2.instance_shutdown(&by_id).await,
        Err(Error::InstanceNotFound)
    ));
    cloud.shutdown().await;
}

#[tokio::test]
async fn instances_v1_and_zones() {
    let cloud = Cloud::start().await;
    let id = cloud.create_server("node-b", "1", None).await;
    let os = cloud.provider_with("");
    let i = os.instances().unwrap();
    let pid = format!("openstack:///{id}");
    let addrs = i.node_addresses("node-b").await.unwrap();
    assert_eq!(addrs, i.node_addresses_by_provider_id(&pid).await.unwrap());
    assert_eq!(addr(&addrs, "InternalIP").len(), 1);
    assert!(addr(&addrs, "ExternalIP").is_empty());
    assert_eq!(i.instance_id("node-b").await.unwrap(), format!("/{id}"));
    assert_eq!(i.instance_type("node-b").await.unwrap(), "m1.tiny");
    assert_eq!(
        i.instance_type_by_provider_id(&pid).await.unwrap(),
        "m1.tiny"
    );
    assert!(i.instance_exists_by_provider_id(&pid).await.unwrap());
    assert!(!i.instance_shutdown_by_provider_id(&pid).await.unwrap());
    let ghost = "openstack:///00000000-0000-0000-0000-000000000000";
    assert!(!i.instance_exists_by_provider_id(ghost).await.unwrap());
    assert!(matches!(
        i.node_addresses("no-such-node").await,
        Err(Error::InstanceNotFound)
    ));
    assert!(matches!(
        i.add_ssh_key_to_all_instances("core", b"ssh-ed25519 AAA")
            .await,
        Err(Error::NotImplemented)
    ));
    assert!(i
        .instance_exists_by_provider_id("aws:///i-123")
        .await
        .is_err());

    // A server created after the listing was cached is still found by name.
    let late = cloud.create_server("node-late", "2", Some("az-2")).await;
    let z = os.zones().unwrap();
    let zone = z.get_zone_by_node_name("node-late").await.unwrap();
    assert_eq!(zone.failure_domain, "az-2");
    assert_eq!(zone.region, "RegionOne");
    let zone = z
        .get_zone_by_provider_id(&format!("openstack:///{late}"))
        .await
        .unwrap();
    assert_eq!(zone.failure_domain, "az-2");
    assert_eq!(
        z.get_zone_by_node_name("node-b")
            .await
            .unwrap()
            .failure_domain,
        "nova"
    );
    assert!(matches!(
        z.get_zone_by_node_name("ghost").await,
        Err(Error::InstanceNotFound)
    ));
    assert!(os.clusters().is_none());
    // The catalog (read by the calls above) has the local cloud's Octavia.
    assert!(os.load_balancer().is_some());
    cloud.shutdown().await;
}

/// 100 nodes initialised concurrently (as the cloud-node controller's workers would) cost one
/// authentication and one server listing, not one call per node.
#[tokio::test]
async fn one_listing_answers_for_a_hundred_nodes() {
    const N: usize = 100;
    let cloud = Cloud::start().await;
    for i in 0..N {
        cloud
            .create_server(&format!("batch-{i:03}"), "2", None)
            .await;
    }
    let os = cloud.provider_with("[Hypercloud]\nserver-cache-ttl = 30s\n");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..N {
        let os = os.clone();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let md = os
                .instances_v2()
                .unwrap()
                .instance_metadata(&node(&format!("batch-{i:03}"), None))
                .await
                .unwrap();
            (md, t.elapsed())
        }));
    }
    let mut ids = std::collections::BTreeSet::new();
    let mut slowest = Duration::ZERO;
    for t in tasks {
        let (md, took) = t.await.unwrap();
        assert_eq!(md.instance_type, "m1.small");
        ids.insert(md.provider_id);
        slowest = slowest.max(took);
    }
    let elapsed = started.elapsed();
    assert_eq!(ids.len(), N, "every node got its own instance");
    let calls = os.api_calls();
    // 1 Keystone token + 1 GET /servers/detail.
    assert_eq!(calls, 2, "cloud calls for {N} nodes");
    // A second pass (the periodic address refresh) inside the TTL costs nothing.
    for i in 0..N {
        os.instances()
            .unwrap()
            .node_addresses(&format!("batch-{i:03}"))
            .await
            .unwrap();
    }
    assert_eq!(os.api_calls(), 2);
    // A node missing from the cached listing is asked for once by name (it may be newer).
    assert!(matches!(
        os.instances().unwrap().node_addresses("not-a-vm").await,
        Err(Error::InstanceNotFound)
    ));
    assert_eq!(os.api_calls(), 3);
    println!(
        "batching: {N} nodes -> {calls} cloud calls ({:.2} per node); all metadata in {elapsed:?}, slowest node {slowest:?}",
        calls as f64 / N as f64
    );

    // Without the cache (TTL 0) the same work costs about one listing per node: the figure
    // the cache saves.
    let uncached = cloud.provider_with("[Hypercloud]\nserver-cache-ttl = 0s\n");
    let t = Instant::now();
    for i in 0..10 {
        uncached
            .instances_v2()
            .unwrap()
            .instance_metadata(&node(&format!("batch-{i:03}"), None))
            .await
            .unwrap();
    }
    let per_call = t.elapsed() / 10;
    assert_eq!(uncached.api_calls(), 11);
    // Absent from a listing made just now: no second question.
    assert!(matches!(
        uncached
            .instances()
            .unwrap()
            .node_addresses("not-a-vm")
            .await,
        Err(Error::InstanceNotFound)
    ));
    assert_eq!(uncached.api_calls(), 12);
    println!("uncached: 10 nodes -> 11 cloud calls; mean latency per look-up (listing {N} servers) {per_call:?}");
    // One small request (GET /volumes/{id}, answered 404) for the per-request latency.
    let t = Instant::now();
    for _ in 0..20 {
        assert!(matches!(
            uncached.volumes().volume_zone("missing").await,
            Err(Error::DiskNotFound)
        ));
    }
    println!("single GET round trip: {:?}", t.elapsed() / 20);
    cloud.shutdown().await;
}
