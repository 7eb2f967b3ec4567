//! Block Storage v3 over HTTP: volumes, zones, extend, pagination and Cinder's errors.
#![allow(clippy::unwrap_used)]

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::json;
use support::TestCloud;

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
    let id = v["id"].as_str().unwrap().to_owned();
    let got = cloud.get(&format!("{vols}/{id}")).await;
    assert_eq!(got.body["volume"]["status"], "available");
    assert_eq!(got.body["volume"]["name"], "pv-1");
    assert_eq!(got.body["volume"]["metadata"]["k"], "v");

    let r = cloud
        .post(
            &format!("{vols}/{id}/action"),
            json!({"os-extend": {"new_size": 8}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let got = cloud.get(&format!("{vols}/{id}")).await;
    assert_eq!(got.body["volume"]["size"], 8);
    assert_eq!(
        got.body["volume"]["status"], "available",
        "extending is over"
    );
    let shrink = cloud
        .post(
            &format!("{vols}/{id}/action"),
            json!({"os-extend": {"new_size": 2}}),
        )
        .await;
    assert_eq!(shrink.status, StatusCode::BAD_REQUEST);

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
    assert_eq!(by_zone.body["volumes"].as_array().unwrap().len(), 1);
    let zones = cloud
        .get(&format!(
            "/volume/v3/{}/os-availability-zone",
            cloud.project
        ))
        .await;
    assert_eq!(
        zones.body["availabilityZoneInfo"].as_array().unwrap().len(),
        2
    );

    assert_eq!(
        cloud.delete(&format!("{vols}/{id}")).await.status,
        StatusCode::ACCEPTED
    );
    let gone = cloud.get(&format!("{vols}/{id}")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(gone.body["itemNotFound"]["code"], 404);
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
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{why}: {}", r.body);
        assert_eq!(r.body["badRequest"]["code"], 400, "{why}");
    }
    let r = cloud.bytes(Method::POST, &vols, "[1,2").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(cloud.get(&vols).await.body["volumes"], json!([]));

    // An attached volume cannot be deleted.
    let server = cloud.create_server("s", json!({})).await;
    let id = cloud.post(&vols, json!({"volume": {"size": 1}})).await.body["volume"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    cloud
        .post(
            &format!("/compute/v2.1/servers/{server}/os-volume_attachments"),
            json!({"volumeAttachment": {"volumeId": id}}),
        )
        .await;
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
    assert_eq!(first.body["volumes"].as_array().unwrap().len(), 3);
    let next = first.body["volumes_links"][0]["href"].as_str().unwrap();
    let rest = cloud.get(next.strip_prefix(&cloud.url).unwrap()).await;
    assert_eq!(rest.body["volumes"].as_array().unwrap().len(), 1);
    assert!(rest.body.get("volumes_links").is_none());
    cloud.shutdown().await;
}
