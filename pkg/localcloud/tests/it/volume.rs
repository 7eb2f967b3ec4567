//! Block Storage v3 over HTTP: volumes, zones, extend, pagination and Cinder's errors.
#![allow(clippy::unwrap_used)]

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::json;
use support::{assert_fault, TestCloud};

#[tokio::test]
async fn volumes_crud_with_zone_and_size() {
    let cloud = TestCloud::start_with(|mut c| {
        c.availability_zones = Some(vec!["nova".into(), "az-2".into()]);
        c
    })
    .await;
    let r = cloud.raw(Method::GET, "/volume/v3/", None, None).await;
    assert_eq!(r.body["versions"][0]["id"], "v3.0");
    let vols = cloud.volumes();
    let r = cloud.post(&vols, json!({"volume": {"size": 5, "name": "pv-1", "availability_zone": "az-2", "metadata": {"k": "v"}}})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let v = r.body["volume"].clone();
    assert_eq!(v["size"], 5);
    assert_eq!(v["availability_zone"], "az-2");
    // Cinder answers a create with `creating`; the volume is `available` by the next request.
    assert_eq!(v["status"], "creating");
    let id = r.id("volume");
    let got = cloud.get(&format!("{vols}/{id}")).await;
    assert_eq!(got.body["volume"]["status"], "available");
    assert_eq!(got.body["volume"]["name"], "pv-1");
    assert_eq!(got.body["volume"]["metadata"]["k"], "v");

    let action = format!("{vols}/{id}/action");
    let extend = async |size: u64| {
        cloud
            .post(&action, json!({"os-extend": {"new_size": size}}))
            .await
            .status
    };
    assert_eq!(extend(8).await, StatusCode::ACCEPTED);
    let got = cloud.get(&format!("{vols}/{id}")).await;
    assert_eq!(got.body["volume"]["size"], 8);
    assert_eq!(
        got.body["volume"]["status"], "available",
        "extending is over"
    );
    assert_eq!(extend(2).await, StatusCode::BAD_REQUEST);

    let r = cloud
        .put(
            &format!("{vols}/{id}"),
            json!({"volume": {"name": "pv-1b"}}),
        )
        .await;
    assert_eq!(r.body["volume"]["name"], "pv-1b");
    let by_zone = cloud
        .get(&format!("{vols}/detail?availability_zone=az-2"))
        .await;
    assert_eq!(by_zone.count("volumes"), 1);
    let zones = cloud
        .get(&format!(
            "/volume/v3/{}/os-availability-zone",
            cloud.project
        ))
        .await;
    assert_eq!(zones.count("availabilityZoneInfo"), 2);

    assert_eq!(
        cloud.delete(&format!("{vols}/{id}")).await.status,
        StatusCode::ACCEPTED
    );
    let gone = cloud.get(&format!("{vols}/{id}")).await;
    assert_fault(
        &gone,
        StatusCode::NOT_FOUND,
        "itemNotFound",
        "a deleted volume",
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn bad_volume_requests_change_nothing() {
    let cloud = TestCloud::start().await;
    let vols = cloud.volumes();
    for (body, why) in [
        (json!({"volume": {"name": "no-size"}}), "missing size"),
        (json!({"volume": {"size": 0}}), "zero size"),
        (json!({"volume": {"size": "big"}}), "size not a number"),
        (
            json!({"volume": {"size": 1, "availability_zone": "mars"}}),
            "unknown zone",
        ),
        (json!({"vol": {"size": 1}}), "wrong key"),
    ] {
        let r = cloud.post(&vols, body).await;
        assert_fault(&r, StatusCode::BAD_REQUEST, "badRequest", why);
    }
    let r = cloud.bytes(Method::POST, &vols, "[1,2").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(cloud.get(&vols).await.body["volumes"], json!([]));

    // An attached volume cannot be deleted.
    let server = cloud.create_server("s", json!({})).await;
    let id = cloud.create_volume(json!({"size": 1})).await;
    cloud.attach_volume(&server, &id).await;
    let r = cloud.delete(&format!("{vols}/{id}")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        cloud.get(&format!("{vols}/{id}")).await.body["volume"]["status"],
        "in-use"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn volume_pagination() {
    let cloud = TestCloud::start().await;
    let vols = cloud.volumes();
    for i in 0..4 {
        cloud
            .post(
                &vols,
                json!({"volume": {"size": 1, "name": format!("v{i}")}}),
            )
            .await;
    }
    let first = cloud.get(&format!("{vols}?limit=3")).await;
    assert_eq!(first.count("volumes"), 3);
    let next = first.body["volumes_links"][0]["href"].as_str().unwrap();
    let rest = cloud.get(next.strip_prefix(&cloud.url).unwrap()).await;
    assert_eq!(rest.count("volumes"), 1);
    assert!(rest.body.get("volumes_links").is_none());
    cloud.shutdown().await;
}
