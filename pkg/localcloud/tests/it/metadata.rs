//! The metadata service and config drives.
#![allow(clippy::unwrap_used)]

use crate::support;

use serde_json::{json, Value};
use support::TestCloud;

#[tokio::test]
async fn metadata_service_answers_for_the_named_or_addressed_instance() {
    let cloud = TestCloud::start().await;
    let net = cloud.network_id("private").await;
    let id = cloud
        .create_server("node-a", json!({"availability_zone": "nova", "networks": [{"uuid": net, "fixed_ip": "127.1.0.77"}]}))
        .await;
    let vol = cloud.create_volume(json!({"size": 1})).await;
    cloud.attach_volume(&id, &vol).await;
    let md = cloud.metadata_url();
    let get = |path: &str, header: (&'static str, String)| {
        let req = cloud
            .http
            .get(format!("{md}{path}"))
            .header(header.0, header.1);
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    let (status, body) = get(
        "/openstack/latest/meta_data.json",
        ("x-instance-id", id.clone()),
    )
    .await;
    assert_eq!(status, 200);
    let meta: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(meta["uuid"], id.as_str());
    assert_eq!(meta["name"], "node-a");
    assert_eq!(meta["availability_zone"], "nova");
    assert_eq!(meta["devices"][0]["serial"], vol.as_str());

    let (_, body) = get(
        "/openstack/latest/network_data.json",
        ("x-instance-id", "node-a".into()),
    )
    .await;
    let net_data: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(net_data["networks"][0]["ip_address"], "127.1.0.77");
    assert_eq!(net_data["networks"][0]["netmask"], "255.255.0.0");

    let fwd = ("x-forwarded-for", "127.1.0.77".to_owned());
    assert_eq!(
        get("/latest/meta-data/local-ipv4", fwd.clone()).await,
        (200, "127.1.0.77".into())
    );
    assert_eq!(
        get("/latest/meta-data/placement/availability-zone", fwd.clone()).await,
        (200, "nova".into())
    );
    assert_eq!(
        get("/latest/meta-data/instance-type", fwd.clone()).await,
        (200, "m1.small".into())
    );
    let (_, ec2_id) = get("/latest/meta-data/instance-id", fwd.clone()).await;
    assert!(ec2_id.starts_with("i-") && ec2_id.len() == 10, "{ec2_id}");
    assert_eq!(
        get("/2009-04-04/meta-data/hostname", fwd.clone()).await,
        (200, "node-a".into())
    );
    let (_, index) = get("/latest/meta-data/", fwd).await;
    assert!(index.lines().any(|l| l == "instance-id"));

    // Unknown callers get 404, not someone else's metadata.
    assert_eq!(
        get(
            "/openstack/latest/meta_data.json",
            ("x-forwarded-for", "127.1.0.200".into())
        )
        .await
        .0,
        404
    );
    assert_eq!(
        get(
            "/openstack/latest/meta_data.json",
            ("x-instance-id", "ghost".into())
        )
        .await
        .0,
        404
    );
    assert_eq!(
        get(
            "/latest/meta-data/no-such-key",
            ("x-instance-id", id.clone())
        )
        .await
        .0,
        404
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn config_drive_is_written_on_create_repaired_on_start_and_removed_on_delete() {
    let mut cloud = TestCloud::start().await;
    let id = cloud
        .create_server("cd-node", json!({"metadata": {"a": "b"}}))
        .await;
    let dir = cloud
        .dir
        .path()
        .join("config-drive")
        .join(&id)
        .join("openstack/latest");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta_data.json")).unwrap()).unwrap();
    assert_eq!(meta["uuid"], id.as_str());
    assert_eq!(meta["name"], "cd-node");
    assert_eq!(meta["availability_zone"], "nova");
    assert_eq!(meta["meta"]["a"], "b");
    let net: Value =
        serde_json::from_slice(&std::fs::read(dir.join("network_data.json")).unwrap()).unwrap();
    assert_eq!(net["networks"][0]["ip_address"], "127.1.0.2");
    // A config drive lost (as in a crash before the page cache reached the disk) is rewritten
    // from the durable state at the next start.
    std::fs::remove_dir_all(cloud.dir.path().join("config-drive").join(&id)).unwrap();
    cloud.restart().await;
    assert!(
        dir.join("meta_data.json").exists(),
        "config drive not repaired on start"
    );
    cloud.delete(&format!("/compute/v2.1/servers/{id}")).await;
    assert!(!cloud.dir.path().join("config-drive").join(&id).exists());
    cloud.shutdown().await;
}
