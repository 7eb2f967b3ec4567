//! Compute v2.1 over HTTP: servers, actions, filters, pagination, microversions, flavors,
//! zones, addresses, interfaces, volume attachments and bad input.
#![allow(clippy::unwrap_used)]

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::json;
use support::{assert_fault, TestCloud};

#[tokio::test]
async fn version_discovery_and_microversions() {
    let cloud = TestCloud::start().await;
    let r = cloud.raw(Method::GET, "/compute/v2.1", None, None).await;
    assert_eq!(r.body["version"]["version"], "2.79");
    assert_eq!(r.body["version"]["min_version"], "2.1");
    let resp = cloud
        .request(Method::GET, "/compute/v2.1/servers/detail")
        .header("openstack-api-version", "compute 2.60")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["openstack-api-version"], "compute 2.60");
    let resp = cloud
        .request(Method::GET, "/compute/v2.1/servers")
        .header("openstack-api-version", "compute 2.200")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_ACCEPTABLE);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["notAcceptable"]["code"], 406);
    cloud.shutdown().await;
}

#[tokio::test]
async fn flavors_and_zones() {
    let cloud = TestCloud::start_with(|mut c| {
        c.availability_zones = Some(vec!["nova".into(), "zone-b".into()]);
        c
    })
    .await;
    let r = cloud.get("/compute/v2.1/flavors/detail").await;
    let names: Vec<&str> = r.body["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"m1.small") && names.contains(&"m1.tiny"),
        "{names:?}"
    );
    let r = cloud.get("/compute/v2.1/flavors/2").await;
    assert_eq!(r.body["flavor"]["ram"], 2048);
    assert_eq!(
        cloud.get("/compute/v2.1/flavors/99").await.status,
        StatusCode::NOT_FOUND
    );
    let r = cloud.get("/compute/v2.1/os-availability-zone").await;
    let zones: Vec<&str> = r.body["availabilityZoneInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["zoneName"].as_str().unwrap())
        .collect();
    assert_eq!(zones, ["nova", "zone-b"]);
    let id = cloud
        .create_server("in-b", json!({"availability_zone": "zone-b"}))
        .await;
    let r = cloud.get(&format!("/compute/v2.1/servers/{id}")).await;
    assert_eq!(r.body["server"]["OS-EXT-AZ:availability_zone"], "zone-b");
    cloud.shutdown().await;
}

#[tokio::test]
async fn server_lifecycle_with_addresses_and_stop_start() {
    let cloud = TestCloud::start().await;
    let net = cloud.network_id("private").await;
    let r = cloud
        .post(
            "/compute/v2.1/servers",
            json!({"server": {"name": "node-1", "flavorRef": "2", "networks": [{"uuid": net, "fixed_ip": "127.1.0.10"}], "metadata": {"role": "worker"}}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert!(r.headers.get("location").is_some());
    let id = r.id("server");

    let s = cloud.get(&format!("/compute/v2.1/servers/{id}")).await.body["server"].clone();
    assert_eq!(s["name"], "node-1");
    assert_eq!(s["status"], "ACTIVE");
    assert_eq!(s["metadata"]["role"], "worker");
    assert_eq!(s["flavor"]["id"], "2");
    assert_eq!(s["addresses"]["private"][0]["addr"], "127.1.0.10");
    assert_eq!(s["addresses"]["private"][0]["OS-EXT-IPS:type"], "fixed");

    let ips = cloud.get(&format!("/compute/v2.1/servers/{id}/ips")).await;
    assert_eq!(ips.body["addresses"]["private"][0]["addr"], "127.1.0.10");
    let on = cloud
        .get(&format!("/compute/v2.1/servers/{id}/ips/private"))
        .await;
    assert_eq!(on.body["private"][0]["addr"], "127.1.0.10");
    assert_eq!(
        cloud
            .get(&format!("/compute/v2.1/servers/{id}/ips/public"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let ifs = cloud
        .get(&format!("/compute/v2.1/servers/{id}/os-interface"))
        .await;
    let port = &ifs.body["interfaceAttachments"][0];
    assert_eq!(port["net_id"], net.as_str());
    assert_eq!(port["fixed_ips"][0]["ip_address"], "127.1.0.10");
    let port_id = port["port_id"].as_str().unwrap();
    let ports = cloud
        .get(&format!("/network/v2.0/ports?device_id={id}"))
        .await;
    assert_eq!(ports.body["ports"][0]["id"], port_id);

    // stop / start, with Nova's 409 when the state does not allow it
    let action = format!("/compute/v2.1/servers/{id}/action");
    assert_eq!(
        cloud.post(&action, json!({"os-stop": null})).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        cloud.get(&format!("/compute/v2.1/servers/{id}")).await.body["server"]["status"],
        "SHUTOFF"
    );
    let again = cloud.post(&action, json!({"os-stop": null})).await;
    assert_fault(
        &again,
        StatusCode::CONFLICT,
        "conflictingRequest",
        "stopped twice",
    );
    let shutoff = cloud
        .get("/compute/v2.1/servers/detail?status=SHUTOFF")
        .await;
    assert_eq!(shutoff.count("servers"), 1);
    assert_eq!(
        cloud.post(&action, json!({"os-start": null})).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        cloud.post(&action, json!({"os-start": null})).await.status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        cloud.post(&action, json!({"os-fly": null})).await.status,
        StatusCode::BAD_REQUEST
    );

    // rename
    let r = cloud
        .put(
            &format!("/compute/v2.1/servers/{id}"),
            json!({"server": {"name": "node-1b"}}),
        )
        .await;
    assert_eq!(r.body["server"]["name"], "node-1b");

    // delete frees the port and the address
    assert_eq!(
        cloud
            .delete(&format!("/compute/v2.1/servers/{id}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    for gone in [
        format!("/compute/v2.1/servers/{id}"),
        format!("/network/v2.0/ports/{port_id}"),
    ] {
        assert_eq!(
            cloud.get(&gone).await.status,
            StatusCode::NOT_FOUND,
            "{gone}"
        );
    }
    let again = cloud
        .post("/compute/v2.1/servers", json!({"server": {"name": "reuse", "flavorRef": "2", "networks": [{"uuid": net, "fixed_ip": "127.1.0.10"}]}}))
        .await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.body);
    cloud.shutdown().await;
}

#[tokio::test]
async fn list_filters_and_pagination() {
    let cloud = TestCloud::start().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(cloud.create_server(&format!("pool-{i}"), json!({})).await);
    }
    cloud.create_server("other", json!({})).await;
    let r = cloud.get("/compute/v2.1/servers?name=pool-").await;
    assert_eq!(r.count("servers"), 5);
    let r = cloud
        .get("/compute/v2.1/servers/detail?name=%5Eother%24")
        .await;
    assert_eq!(r.count("servers"), 1);
    assert_eq!(r.body["servers"][0]["name"], "other");
    let r = cloud
        .get("/compute/v2.1/servers/detail?ip=127.1.0.2%24")
        .await;
    assert_eq!(r.count("servers"), 1);

    // Walk all pages of 2 following the next links; newest first.
    let mut seen = Vec::new();
    let mut path = "/compute/v2.1/servers?limit=2".to_owned();
    loop {
        let r = cloud.get(&path).await;
        let page = r.body["servers"].as_array().unwrap().clone();
        assert!(page.len() <= 2);
        seen.extend(page.iter().map(|s| s["name"].as_str().unwrap().to_owned()));
        match r.body["servers_links"][0]["href"].as_str() {
            Some(href) => path = href.strip_prefix(&cloud.url).unwrap().to_owned(),
            None => break,
        }
    }
    assert_eq!(
        seen,
        ["other", "pool-4", "pool-3", "pool-2", "pool-1", "pool-0"]
    );
    let r = cloud.get("/compute/v2.1/servers?marker=nope").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = cloud.get("/compute/v2.1/servers?limit=x").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    cloud.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_rejected_with_nova_errors_and_changes_nothing() {
    let cloud = TestCloud::start().await;
    // Bodies that are not JSON, sent without a content type.
    for text in ["{not json", ""] {
        let resp = cloud
            .request(Method::POST, "/compute/v2.1/servers")
            .body(text)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["badRequest"]["code"], 400, "{body}");
    }
    for (body, why) in [
        (
            json!({"server": {"name": "x", "flavorRef": "2", "colour": "red"}}),
            "unknown field",
        ),
        (json!({"server": {"flavorRef": "2"}}), "missing name"),
        (json!({"server": {"name": "x"}}), "missing flavorRef"),
        (
            json!({"server": {"name": "x", "flavorRef": "42"}}),
            "unknown flavor",
        ),
        (
            json!({"server": {"name": "x", "flavorRef": "2", "availability_zone": "mars"}}),
            "unknown zone",
        ),
        (
            json!({"server": {"name": "x", "flavorRef": "2", "networks": [{"uuid": "00000000-0000-0000-0000-000000000000"}]}}),
            "unknown network",
        ),
        (
            json!({"server": {"name": "x", "flavorRef": "2", "networks": [{"uuid": "x", "bogus": 1}]}}),
            "unknown nic field",
        ),
        (json!({"servers": {}}), "wrong key"),
    ] {
        let r = cloud.post("/compute/v2.1/servers", body).await;
        assert_fault(&r, StatusCode::BAD_REQUEST, "badRequest", why);
    }
    // An address already taken is a conflict, and the failed create leaves no port behind.
    let net = cloud.network_id("private").await;
    let ports_before = cloud.get("/network/v2.0/ports").await.count("ports");
    let r = cloud
        .post("/compute/v2.1/servers", json!({"server": {"name": "gw", "flavorRef": "2", "networks": [{"uuid": net}, {"uuid": net, "fixed_ip": "127.1.0.1"}]}}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(
        cloud.get("/network/v2.0/ports").await.count("ports"),
        ports_before
    );
    assert_eq!(
        cloud.get("/compute/v2.1/servers").await.body["servers"],
        json!([])
    );

    let missing = "00000000-0000-0000-0000-000000000000";
    for path in [
        format!("/compute/v2.1/servers/{missing}"),
        format!("/compute/v2.1/servers/{missing}/ips"),
        format!("/compute/v2.1/servers/{missing}/os-interface"),
    ] {
        let r = cloud.get(&path).await;
        assert_fault(&r, StatusCode::NOT_FOUND, "itemNotFound", &path);
    }
    assert_eq!(
        cloud
            .delete(&format!("/compute/v2.1/servers/{missing}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        cloud
            .post(
                &format!("/compute/v2.1/servers/{missing}/action"),
                json!({"os-stop": null})
            )
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let r = cloud.get("/compute/v2.1/no-such-thing").await;
    assert_fault(
        &r,
        StatusCode::NOT_FOUND,
        "itemNotFound",
        "an unknown collection",
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn microversion_2_47_embeds_the_flavor_and_2_37_requires_networks() {
    let cloud = TestCloud::start().await;
    let id = cloud.create_server("mv", json!({})).await;
    let resp = cloud
        .request(Method::GET, &format!("/compute/v2.1/servers/{id}"))
        .header("openstack-api-version", "compute 2.79")
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["server"]["flavor"]["original_name"], "m1.small");
    assert_eq!(body["server"]["flavor"]["vcpus"], 1);
    let resp = cloud
        .request(Method::POST, "/compute/v2.1/servers")
        .header("openstack-api-version", "compute 2.37")
        .json(&json!({"server": {"name": "n", "flavorRef": "2"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = cloud
        .request(Method::POST, "/compute/v2.1/servers")
        .header("x-openstack-nova-api-version", "2.37")
        .json(&json!({"server": {"name": "n", "flavorRef": "2", "networks": "none"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    assert_eq!(resp.headers()["x-openstack-nova-api-version"], "2.37");
    cloud.shutdown().await;
}

#[tokio::test]
async fn volume_attachments_through_nova() {
    let cloud = TestCloud::start().await;
    let server = cloud.create_server("db", json!({})).await;
    let vol = cloud
        .create_volume(json!({"size": 2, "name": "data"}))
        .await;
    let path = format!("/compute/v2.1/servers/{server}/os-volume_attachments");
    let r = cloud.attach_volume(&server, &vol).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["volumeAttachment"]["device"], "/dev/vdb");
    assert_eq!(r.body["volumeAttachment"]["serverId"], server.as_str());
    let again = cloud.attach_volume(&server, &vol).await;
    assert_eq!(
        again.status,
        StatusCode::BAD_REQUEST,
        "in-use volume attached twice"
    );
    let v = cloud.get(&format!("{}/{vol}", cloud.volumes())).await;
    assert_eq!(v.body["volume"]["status"], "in-use");
    assert_eq!(
        v.body["volume"]["attachments"][0]["server_id"],
        server.as_str()
    );
    let s = cloud.get(&format!("/compute/v2.1/servers/{server}")).await;
    assert_eq!(
        s.body["server"]["os-extended-volumes:volumes_attached"][0]["id"],
        vol.as_str()
    );
    assert_eq!(cloud.get(&path).await.count("volumeAttachments"), 1);
    assert_eq!(
        cloud.get(&format!("{path}/{vol}")).await.body["volumeAttachment"]["volumeId"],
        vol.as_str()
    );

    assert_eq!(
        cloud.delete(&format!("{path}/{vol}")).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        cloud.get(&format!("{}/{vol}", cloud.volumes())).await.body["volume"]["status"],
        "available"
    );
    assert_eq!(
        cloud.delete(&format!("{path}/{vol}")).await.status,
        StatusCode::NOT_FOUND
    );
    let missing = cloud.attach_volume(&server, "nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // Deleting a server detaches its volumes.
    cloud.attach_volume(&server, &vol).await;
    cloud
        .delete(&format!("/compute/v2.1/servers/{server}"))
        .await;
    let v = cloud.get(&format!("{}/{vol}", cloud.volumes())).await;
    assert_eq!(v.body["volume"]["status"], "available");
    assert_eq!(v.body["volume"]["attachments"], json!([]));
    cloud.shutdown().await;
}

#[tokio::test]
async fn images_are_listed_and_image_refs_are_checked() {
    let cloud = TestCloud::start().await;
    let images = cloud.get("/image/v2/images").await;
    assert_eq!(images.status, StatusCode::OK);
    let image = images.body["images"][0].clone();
    assert_eq!(image["status"], "active");
    let id = image["id"].as_str().unwrap().to_owned();
    let by_ids = cloud
        .get(&format!("/image/v2/images?id=in:{id},other"))
        .await;
    assert_eq!(by_ids.count("images"), 1);
    assert_eq!(
        cloud.get(&format!("/image/v2/images/{id}")).await.body["name"],
        image["name"]
    );
    let missing = cloud.get("/image/v2/images/nope").await;
    assert_fault(&missing, StatusCode::NOT_FOUND, "error", "an unknown image");

    let server = cloud
        .create_server("from-image", json!({"imageRef": id}))
        .await;
    let s = cloud.get(&format!("/compute/v2.1/servers/{server}")).await;
    assert_eq!(s.body["server"]["image"]["id"], id.as_str());
    let bad = cloud
        .post(
            "/compute/v2.1/servers",
            json!({"server": {"name": "x", "flavorRef": "1", "imageRef": "no-such-image"}}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(cloud.get("/compute/v2.1/servers").await.count("servers"), 1);
    cloud.shutdown().await;
}

#[tokio::test]
async fn single_interface_keypairs_and_volume_types() {
    let cloud = TestCloud::start().await;
    let id = cloud.create_server("one", json!({})).await;
    let ifs = cloud
        .get(&format!("/compute/v2.1/servers/{id}/os-interface"))
        .await;
    let port = ifs.body["interfaceAttachments"][0]["port_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let one = cloud
        .get(&format!("/compute/v2.1/servers/{id}/os-interface/{port}"))
        .await;
    assert_eq!(one.body["interfaceAttachment"]["port_id"], port.as_str());
    let none = cloud
        .get(&format!("/compute/v2.1/servers/{id}/os-interface/nope"))
        .await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    assert_eq!(
        cloud.get("/compute/v2.1/os-keypairs").await.body["keypairs"],
        json!([])
    );
    let types = cloud
        .get(&format!("/volume/v3/{}/types", cloud.project))
        .await;
    assert_eq!(types.body["volume_types"][0]["name"], "lvmdriver-1");
    let bad_type = cloud
        .post(
            &cloud.volumes(),
            json!({"volume": {"size": 1, "volume_type": "gold"}}),
        )
        .await;
    assert_eq!(bad_type.status, StatusCode::NOT_FOUND);
    cloud.shutdown().await;
}

/// The value of the `localcloud_api_requests_total` series with exactly these labels (0 if
/// absent).
fn requests_total(metrics: &str, service: &str, method: &str, route: &str, code: u16) -> u64 {
    let series = format!(
        "localcloud_api_requests_total{{service=\"{service}\",method=\"{method}\",route=\"{route}\",code=\"{code}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.parse().unwrap())
}

#[tokio::test]
async fn requests_are_counted_on_metrics() {
    let cloud = TestCloud::start().await;
    let before = cloud.metrics().await;
    let detail = "/compute/v2.1/servers/detail";
    let one = "/compute/v2.1/servers/{id}";
    assert_eq!(requests_total(&before, "compute", "GET", detail, 200), 0);

    for _ in 0..3 {
        assert_eq!(cloud.get(detail).await.status, StatusCode::OK);
    }
    let r = cloud.get("/compute/v2.1/servers/no-such-server").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = cloud
        .raw(Method::GET, "/compute/v2.1/servers/x", None, None)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = cloud.get("/compute/v2.1/no-such-collection").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = cloud
        .raw(Method::GET, "/openstack/latest/meta_data.json", None, None)
        .await;
    // The API listener does not serve metadata; the metadata listener counts into the same
    // family.
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let md = cloud
        .http
        .get(format!("{}/openstack", cloud.metadata_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(md.status(), StatusCode::OK);

    let after = cloud.metrics().await;
    for (service, method, route, code, want) in [
        ("compute", "GET", detail, 200, 3),
        ("compute", "GET", one, 404, 1),
        ("compute", "GET", one, 401, 1),
        ("compute", "GET", "unmatched", 404, 1),
        ("metadata", "GET", "/openstack", 200, 1),
        // The login of TestCloud::start, before the first scrape.
        ("identity", "POST", "/identity/v3/auth/tokens", 201, 1),
        // The first scrape itself (the second is answered after it renders).
        ("other", "GET", "/metrics", 200, 1),
    ] {
        assert_eq!(
            requests_total(&after, service, method, route, code),
            want,
            "{service} {method} {route} {code}: {after}"
        );
    }
    cloud.shutdown().await;
}
