//! What a malformed or dangling write does to each dialect over HTTP: a body of the wrong shape
//! is a 400 in the service's format and changes nothing, Compute Engine's `set*` calls require
//! the current fingerprint (412 `conditionNotMet`), ranges and references are checked as the
//! real APIs check them, and a path with a control character is refused by every service.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{TestCloud, LBAAS};

const GCE: &str = "/compute/v1/projects/demo";

/// The first zone and the region of the GCE dialect.
async fn zone_and_region(c: &TestCloud) -> (String, String) {
    let zones = c.get(&format!("{GCE}/zones")).await;
    let zone = zones.body["items"][0]["name"].as_str().unwrap().to_owned();
    let regions = c.get(&format!("{GCE}/regions")).await;
    let region = regions.body["items"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    (zone, region)
}

/// A GCE error answer: `status`, GCE's body, and `reason`.
fn assert_gce_error(r: &crate::support::Reply, status: u16, reason: &str, what: &str) {
    assert_eq!(r.status.as_u16(), status, "{what}: {}", r.body);
    assert_eq!(r.body["error"]["code"], status, "{what}: {}", r.body);
    assert_eq!(
        r.body["error"]["errors"][0]["reason"], reason,
        "{what}: {}",
        r.body
    );
}

#[tokio::test]
async fn gce_set_calls_refuse_bodies_of_the_wrong_shape_and_stale_fingerprints() {
    let c = TestCloud::start().await;
    let (zone, _) = zone_and_region(&c).await;
    let instances = format!("{GCE}/zones/{zone}/instances");
    let r = c
        .post(
            &instances,
            json!({"name": "victim", "machineType": format!("zones/{zone}/machineTypes/m1.small"),
                "metadata": {"items": [{"key": "ssh-keys", "value": "core:ssh-ed25519 AAAA"}]},
                "tags": {"items": ["web"]}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let victim = format!("{instances}/victim");
    // A `set*` call with a fingerprint and items.
    let set = async |call: &str, fingerprint: &Value, items: Value| {
        c.post(call, json!({"fingerprint": fingerprint, "items": items}))
            .await
    };
    let fp = c.get(GCE).await.body["commonInstanceMetadata"]["fingerprint"].clone();
    let r = set(
        &format!("{GCE}/setCommonInstanceMetadata"),
        &fp,
        json!([{"key": "project-key", "value": "v"}]),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    let state = || async {
        let i = c.get(&victim).await.body;
        let p = c.get(GCE).await.body;
        (
            i["metadata"].clone(),
            i["tags"].clone(),
            p["commonInstanceMetadata"].clone(),
        )
    };
    let before = state().await;
    let calls = [
        format!("{victim}/setMetadata"),
        format!("{victim}/setTags"),
        format!("{GCE}/setCommonInstanceMetadata"),
    ];
    for call in &calls {
        for body in [
            "null",
            "7",
            "\"items\"",
            "[]",
            "true",
            "{\"items\": \"x\"}",
            "{\"items\": [7]}",
            "{\"items\": null, \"fingerprint\": 5}",
            "{\"unknown\": []}",
        ] {
            let r = c.bytes(Method::POST, call, body).await;
            assert_gce_error(&r, 400, "invalid", &format!("{call} {body}"));
        }
        // No fingerprint, or a stale one: 412, as Compute Engine answers.
        for body in [
            "{\"items\": []}",
            "{\"items\": [], \"fingerprint\": \"AAAAAAAAAAA=\"}",
        ] {
            let r = c.bytes(Method::POST, call, body).await;
            assert_gce_error(&r, 412, "conditionNotMet", &format!("{call} {body}"));
        }
    }
    assert_eq!(
        state().await,
        before,
        "a refused set* call changed something"
    );

    // With the current fingerprint the call goes through, and the fingerprint moves on.
    let fp = before.0["fingerprint"].clone();
    let set_metadata = format!("{victim}/setMetadata");
    let r = set(
        &set_metadata,
        &fp,
        json!([{"key": "role", "value": "node"}]),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let after = c.get(&victim).await.body["metadata"].clone();
    assert_eq!(after["items"], json!([{"key": "role", "value": "node"}]));
    assert_ne!(after["fingerprint"], fp);
    // The old fingerprint is stale now.
    let r = set(&set_metadata, &fp, json!([])).await;
    assert_gce_error(&r, 412, "conditionNotMet", "a stale fingerprint");
    c.shutdown().await;
}

/// Names of a GCE collection's items.
async fn gce_names(c: &TestCloud, path: &str) -> Vec<String> {
    let r = c.get(path).await;
    assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
    r.body["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| i["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn gce_inserts_check_ranges_types_and_references() {
    let c = TestCloud::start().await;
    let (zone, region) = zone_and_region(&c).await;
    let firewalls = format!("{GCE}/global/firewalls");
    let fw = |extra: Value| {
        let mut b = json!({"name": "fw", "network": "global/networks/default",
            "allowed": [{"IPProtocol": "tcp", "ports": ["80"]}]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let bad_firewalls = [
        (fw(json!({"priority": 65_536})), "priority"),
        (fw(json!({"priority": -1})), "priority"),
        (fw(json!({"priority": "high"})), "priority"),
        (
            fw(json!({"allowed": [{"IPProtocol": "tcp", "ports": ["0"]}]})),
            "ports",
        ),
        (
            fw(json!({"allowed": [{"IPProtocol": "tcp", "ports": ["90-80"]}]})),
            "ports",
        ),
        (
            fw(json!({"allowed": [{"IPProtocol": "tcp", "ports": ["65536"]}]})),
            "ports",
        ),
        (
            fw(json!({"allowed": [{"IPProtocol": "icmp", "ports": ["80"]}]})),
            "ports",
        ),
        (fw(json!({"allowed": [{"ports": ["80"]}]})), "IPProtocol"),
        (fw(json!({"allowed": "tcp"})), "allowed"),
        (fw(json!({"direction": "SIDEWAYS"})), "direction"),
        (fw(json!({"sourceRanges": "0.0.0.0/0"})), "sourceRanges"),
        (fw(json!({"targetTags": [7]})), "targetTags"),
    ];
    for (body, field) in bad_firewalls {
        let r = c.post(&firewalls, body.clone()).await;
        let reason = r.body["error"]["errors"][0]["reason"]
            .as_str()
            .unwrap_or_default();
        let reason = if reason == "required" {
            "required"
        } else {
            "invalid"
        };
        assert_gce_error(&r, 400, reason, &body.to_string());
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{body}: {message}");
    }
    assert!(gce_names(&c, &firewalls).await.is_empty());

    let checks = format!("{GCE}/global/httpHealthChecks");
    for body in [
        json!({"name": "hc", "port": 0}),
        json!({"name": "hc", "port": 65_536}),
        json!({"name": "hc", "checkIntervalSec": 0}),
        json!({"name": "hc", "checkIntervalSec": 301}),
        json!({"name": "hc", "checkIntervalSec": 5, "timeoutSec": 6}),
        json!({"name": "hc", "unhealthyThreshold": 11}),
        json!({"name": "hc", "requestPath": "healthz"}),
        json!({"name": "hc", "port": "80"}),
    ] {
        let r = c.post(&checks, body.clone()).await;
        assert_gce_error(&r, 400, "invalid", &body.to_string());
    }
    assert!(gce_names(&c, &checks).await.is_empty());
    // A short interval without a timeout: the timeout follows it (accepted).
    let r = c
        .post(&checks, json!({"name": "fast", "checkIntervalSec": 1}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(c.get(&format!("{checks}/fast")).await.body["timeoutSec"], 1);

    // Dangling references: 404 naming what is missing, nothing made.
    let pools = format!("{GCE}/regions/{region}/targetPools");
    let r = c
        .post(
            &pools,
            json!({"name": "pool", "healthChecks": ["global/httpHealthChecks/missing"]}),
        )
        .await;
    assert_gce_error(&r, 404, "notFound", "a pool with a missing health check");
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("httpHealthChecks/missing"));
    let r = c
        .post(
            &pools,
            json!({"name": "pool", "instances": [format!("zones/{zone}/instances/missing")]}),
        )
        .await;
    assert_gce_error(&r, 404, "notFound", "a pool with a missing instance");
    assert!(gce_names(&c, &pools).await.is_empty());
    let rules = format!("{GCE}/regions/{region}/forwardingRules");
    for target in [
        format!("regions/{region}/targetPools/missing"),
        "global/targetHttpProxies/x".to_owned(),
    ] {
        let r = c
            .post(
                &rules,
                json!({"name": "rule", "portRange": "80", "target": target}),
            )
            .await;
        assert!(
            r.status == StatusCode::NOT_FOUND || r.status == StatusCode::BAD_REQUEST,
            "{target}: {}",
            r.body
        );
    }
    assert!(gce_names(&c, &rules).await.is_empty());

    // Network and broadcast addresses of the external subnet are not addresses to reserve.
    let public = c.network_id("public").await;
    let subnets = c
        .get(&format!("/network/v2.0/subnets?network_id={public}"))
        .await;
    let cidr = subnets.body["subnets"][0]["cidr"].as_str().unwrap();
    let (network, broadcast) = network_and_broadcast(cidr);
    let addresses = format!("{GCE}/regions/{region}/addresses");
    for address in [network, broadcast, "not-an-ip".to_owned()] {
        let r = c
            .post(&addresses, json!({"name": "addr", "address": address}))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{address}: {}", r.body);
    }
    assert!(gce_names(&c, &addresses).await.is_empty());
    c.shutdown().await;
}

/// The network and broadcast addresses of an IPv4 CIDR.
fn network_and_broadcast(cidr: &str) -> (String, String) {
    let (addr, len) = cidr.split_once('/').unwrap();
    let addr: std::net::Ipv4Addr = addr.parse().unwrap();
    let len: u32 = len.parse().unwrap();
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    let net = u32::from(addr) & mask;
    (
        std::net::Ipv4Addr::from(net).to_string(),
        std::net::Ipv4Addr::from(net | !mask).to_string(),
    )
}

/// A snapshot of what the OpenStack services hold, to show a refused write changed nothing.
async fn openstack_state(c: &TestCloud) -> Vec<Value> {
    let mut all = Vec::new();
    for path in [
        "/network/v2.0/ports".to_owned(),
        "/network/v2.0/floatingips".to_owned(),
        "/network/v2.0/security-group-rules".to_owned(),
        format!("{LBAAS}/listeners"),
        format!("{LBAAS}/pools"),
        format!("{LBAAS}/healthmonitors"),
    ] {
        let r = c.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
        all.push(r.body);
    }
    all
}

#[tokio::test]
async fn openstack_writes_check_ranges_addresses_and_references() {
    let c = TestCloud::start().await;
    let private = c.network_id("private").await;
    let public = c.network_id("public").await;
    let subnet_of = |net: String| {
        let c = &c;
        async move {
            let r = c
                .get(&format!("/network/v2.0/subnets?network_id={net}"))
                .await;
            (
                r.body["subnets"][0]["id"].as_str().unwrap().to_owned(),
                r.body["subnets"][0]["cidr"].as_str().unwrap().to_owned(),
            )
        }
    };
    let (private_subnet, private_cidr) = subnet_of(private.clone()).await;
    let (_, public_cidr) = subnet_of(public.clone()).await;
    // An Octavia tree to hang children on.
    let lb_id = c
        .create_lb(json!({"name": "lb", "vip_subnet_id": private_subnet}))
        .await
        .id;
    let pool_id = c.add_lb_pool(&lb_id, "TCP").await;
    let sg_id = c
        .neutron_create("security_group", json!({"name": "g"}))
        .await
        .id("security_group");

    let before = openstack_state(&c).await;
    let (net_addr, broadcast) = network_and_broadcast(&private_cidr);
    let (pub_net, pub_broadcast) = network_and_broadcast(&public_cidr);
    let rule = |extra: Value| {
        let mut r = json!({"security_group_id": sg_id, "direction": "ingress", "protocol": "tcp"});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        json!({ "security_group_rule": r })
    };
    let refused: Vec<(&str, String, Value, u16, &str)> = vec![
        // Neutron: network and broadcast addresses, missing networks, port ranges.
        (
            "POST",
            "/network/v2.0/ports".into(),
            json!({"port": {"network_id": private, "fixed_ips": [{"ip_address": net_addr}]}}),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/ports".into(),
            json!({"port": {"network_id": private, "fixed_ips": [{"subnet_id": private_subnet, "ip_address": broadcast}]}}),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/ports".into(),
            json!({"port": {"network_id": "00000000-0000-0000-0000-000000000000"}}),
            404,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/floatingips".into(),
            json!({"floatingip": {"floating_network_id": public, "floating_ip_address": pub_net}}),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/floatingips".into(),
            json!({"floatingip": {"floating_network_id": public, "floating_ip_address": pub_broadcast}}),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/security-group-rules".into(),
            rule(json!({"port_range_min": 0, "port_range_max": 80})),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/security-group-rules".into(),
            rule(json!({"port_range_min": 90, "port_range_max": 80})),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/security-group-rules".into(),
            rule(json!({"port_range_min": 1, "port_range_max": 65_536})),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/security-group-rules".into(),
            rule(json!({"protocol": "icmp", "port_range_min": 256})),
            400,
            "NeutronError",
        ),
        (
            "POST",
            "/network/v2.0/security-group-rules".into(),
            rule(json!({"remote_group_id": "00000000-0000-0000-0000-000000000000"})),
            404,
            "NeutronError",
        ),
        // Octavia: ports, monitor settings, missing parents and subnets.
        (
            "POST",
            format!("{LBAAS}/listeners"),
            json!({"listener": {"loadbalancer_id": lb_id, "protocol": "TCP", "protocol_port": 0}}),
            400,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/listeners"),
            json!({"listener": {"loadbalancer_id": lb_id, "protocol": "TCP", "protocol_port": 65_536}}),
            400,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/listeners"),
            json!({"listener": {"loadbalancer_id": "00000000-0000-0000-0000-000000000000", "protocol": "TCP", "protocol_port": 80}}),
            404,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/pools/{pool_id}/members"),
            json!({"member": {"address": "127.0.0.1", "protocol_port": 0}}),
            400,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/pools/{pool_id}/members"),
            json!({"member": {"address": "127.0.0.1", "protocol_port": 80, "subnet_id": "00000000-0000-0000-0000-000000000000"}}),
            404,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/pools/00000000-0000-0000-0000-000000000000/members"),
            json!({"member": {"address": "127.0.0.1", "protocol_port": 80}}),
            404,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/healthmonitors"),
            json!({"healthmonitor": {"pool_id": pool_id, "type": "TCP", "delay": 5, "timeout": 3, "max_retries": 11}}),
            400,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/healthmonitors"),
            json!({"healthmonitor": {"pool_id": pool_id, "type": "TCP", "delay": -1, "timeout": 3, "max_retries": 3}}),
            400,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/healthmonitors"),
            json!({"healthmonitor": {"pool_id": pool_id, "type": "TCP", "delay": 5, "timeout": 3, "max_retries": 3, "url_path": "/"}}),
            400,
            "faultstring",
        ),
        (
            "POST",
            format!("{LBAAS}/healthmonitors"),
            json!({"healthmonitor": {"pool_id": pool_id, "type": "HTTP", "delay": 5, "timeout": 3, "max_retries": 3, "expected_codes": "204-200"}}),
            400,
            "faultstring",
        ),
    ];
    for (method, path, body, status, key) in refused {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let r = c
            .raw(method, &path, Some(body.clone()), Some(&c.token))
            .await;
        assert_eq!(r.status.as_u16(), status, "{path} {body}: {}", r.body);
        assert!(r.body.get(key).is_some(), "{path} {body}: {}", r.body);
    }
    assert_eq!(
        openstack_state(&c).await,
        before,
        "a refused write changed something"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn every_service_refuses_control_characters_in_paths() {
    let c = TestCloud::start().await;
    let servers_before = c.get("/compute/v2.1/servers").await.body;
    let cases = [
        (
            Method::DELETE,
            "/compute/v2.1/servers/x%0D%0AX-Evil:%201",
            "badRequest",
        ),
        (Method::GET, "/compute/v2.1/servers/%00", "badRequest"),
        (Method::PUT, "/network/v2.0/ports/a%0Ab", "NeutronError"),
        (
            Method::DELETE,
            "/load-balancer/v2/lbaas/pools/%7F",
            "faultstring",
        ),
        (Method::GET, "/identity/v3/projects/%1B", "error"),
        (
            Method::POST,
            "/compute/v1/projects/demo/zones/nova%0D/instances",
            "error",
        ),
        (Method::GET, "/subscriptions/a%0Ab/resourcegroups", "error"),
    ];
    for (method, path, key) in cases {
        let r = c
            .raw(method.clone(), path, Some(json!({})), Some(&c.token))
            .await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "{method} {path}: {}",
            r.body
        );
        assert!(r.body.get(key).is_some(), "{method} {path}: {}", r.body);
    }
    assert_eq!(c.get("/compute/v2.1/servers").await.body, servers_before);
    c.shutdown().await;
}
