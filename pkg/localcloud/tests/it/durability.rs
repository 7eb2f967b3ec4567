//! State survives restarts, concurrent writers are safe, and one state dir has one server.
#![allow(clippy::unwrap_used)]

use crate::support;

use hypercloud_localcloud::{Error, Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::json;
use support::TestCloud;

#[tokio::test]
async fn everything_survives_a_restart() {
    let mut cloud = TestCloud::start().await;
    let server = cloud.create_server("keep-me", json!({})).await;
    cloud
        .post(
            &format!("/compute/v2.1/servers/{server}/action"),
            json!({"os-stop": null}),
        )
        .await;
    let vol = cloud
        .create_volume(json!({"size": 3, "name": "keep"}))
        .await;
    cloud.attach_volume(&server, &vol).await;
    let router = cloud.neutron_id("routers", "router1").await;
    cloud.put(&format!("/network/v2.0/routers/{router}/add_extraroutes"), json!({"router": {"routes": [{"destination": "10.244.0.0/24", "nexthop": "127.1.0.2"}]}})).await;
    let old_token = cloud.token.clone();

    cloud.restart().await;

    // Tokens are durable too: a client does not need to log in again.
    assert_eq!(cloud.token, old_token);
    let s = cloud.get(&format!("/compute/v2.1/servers/{server}")).await;
    assert_eq!(s.status, StatusCode::OK, "token or server lost: {}", s.body);
    assert_eq!(s.body["server"]["status"], "SHUTOFF");
    assert_eq!(
        s.body["server"]["addresses"]["private"][0]["addr"],
        "127.1.0.2"
    );
    let v = cloud.get(&format!("{}/{vol}", cloud.volumes())).await;
    assert_eq!(v.body["volume"]["status"], "in-use");
    let r = cloud.get(&format!("/network/v2.0/routers/{router}")).await;
    assert_eq!(
        r.body["router"]["routes"],
        json!([{"destination": "10.244.0.0/24", "nexthop": "127.1.0.2"}])
    );
    // Seeds are not duplicated.
    assert_eq!(
        cloud.get("/network/v2.0/networks").await.count("networks"),
        2
    );
    // The next address continues after the stored ones.
    let second = cloud.create_server("after", json!({})).await;
    let s = cloud.get(&format!("/compute/v2.1/servers/{second}")).await;
    assert_eq!(
        s.body["server"]["addresses"]["private"][0]["addr"],
        "127.1.0.3"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn a_second_server_on_the_same_state_dir_is_refused() {
    let cloud = TestCloud::start().await;
    let second = Server::bind(ServerConfig::ephemeral(cloud.dir.path())).await;
    assert!(
        matches!(second, Err(Error::StateDirInUse { .. })),
        "{second:?}"
    );
    cloud.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_get_distinct_addresses_and_all_persist() {
    let mut cloud = TestCloud::start().await;
    let n = 40;
    let mut tasks = Vec::new();
    for i in 0..n {
        let http = cloud.http.clone();
        let url = format!("{}/compute/v2.1/servers", cloud.url);
        let token = cloud.token.clone();
        tasks.push(tokio::spawn(async move {
            let resp = http
                .post(url)
                .header("x-auth-token", token)
                .json(&json!({"server": {"name": format!("c{i}"), "flavorRef": "1"}}))
                .send()
                .await
                .unwrap();
            resp.status()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::ACCEPTED);
    }
    cloud.restart().await;
    let all = cloud.get("/compute/v2.1/servers/detail").await.body["servers"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(all.len(), n);
    let mut ips: Vec<String> = all
        .iter()
        .map(|s| {
            s["addresses"]["private"][0]["addr"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), n, "two servers got the same address");
    cloud.shutdown().await;
}

#[tokio::test]
async fn api_over_tls_when_given_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _, http) = support::tls_config(dir.path());
    let handle = Server::bind(config).await.unwrap();
    assert!(
        handle.api_url().starts_with("https://127.0.0.1:"),
        "{}",
        handle.api_url()
    );
    let resp = http
        .get(format!("{}/identity/v3", handle.api_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body: serde_json::Value = resp.json().await.unwrap();
    let href = body["version"]["links"][0]["href"].as_str().unwrap();
    assert!(href.starts_with("https://"), "{href}");
    // A client that does not trust the certificate is refused; plain HTTP gets no answer.
    assert!(reqwest::get(format!("{}/identity/v3", handle.api_url()))
        .await
        .is_err());
    let plain = handle.api_url().replace("https://", "http://");
    assert!(reqwest::get(format!("{plain}/identity/v3")).await.is_err());
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_tls_files_are_a_clear_start_up_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let mut config = ServerConfig::ephemeral(dir.path().join("state"));
    config.tls = Some(hypercloud_localcloud::TlsFiles {
        cert_file: missing.clone(),
        key_file: missing,
    });
    let err = Server::bind(config).await.unwrap_err();
    // Read by the bounded reader for every operator-given file (#29): the error names the
    // flag and the file.
    assert!(matches!(err, Error::ReadInput(_)), "{err}");
    assert!(err.to_string().contains("--tls-cert-file"), "{err}");
    assert!(err.to_string().contains("missing.pem"), "{err}");
}
