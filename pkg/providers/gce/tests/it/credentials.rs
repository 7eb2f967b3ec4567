//! Credentials against the local cloud requiring tokens: a service-account key the cloud's
//! IAM issued (kept across a restart) gets tokens from its token endpoint and the provider
//! works; a short-lived token is renewed; a key the cloud did not issue is refused with an
//! error naming the key file, never quoting the key; anonymous requests are refused.

use std::time::Duration;

use base64::Engine as _;
use hypercloud_cloudprovider::{Chain, Interface};

use crate::support::{Cloud, ZONE_B};

const EMAIL: &str = "ccm@demo.iam.gserviceaccount.com";

/// A key from the cloud's IAM `keys.create`, written as the key file clients read.
async fn issue_key(cloud: &Cloud, path: &std::path::Path) -> serde_json::Value {
    let url = format!(
        "{}/iam/v1/projects/demo/serviceAccounts/{EMAIL}/keys",
        cloud.handle.api_url()
    );
    let resp = cloud
        .http
        .post(url)
        .json(&serde_json::json!({"privateKeyType": "TYPE_GOOGLE_CREDENTIALS_FILE"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let key: serde_json::Value = resp.json().await.unwrap();
    let file = base64::engine::general_purpose::STANDARD
        .decode(key["privateKeyData"].as_str().unwrap())
        .unwrap();
    std::fs::write(path, &file).unwrap();
    serde_json::from_slice(&file).unwrap()
}

#[tokio::test]
async fn an_issued_key_authenticates_and_short_tokens_are_renewed() {
    let cloud = Cloud::start().await;
    cloud.instance(ZONE_B, "node-1").await;
    let key_path = cloud.dir.path().join("ccm-key.json");
    let file = issue_key(&cloud, &key_path).await;
    assert_eq!(file["type"], "service_account");
    assert_eq!(file["client_email"], EMAIL);

    // The key survives a restart; now tokens are required and live two seconds.
    let cloud = cloud
        .restart_with(|c| {
            c.gce_require_tokens = true;
            c.token_ttl = Duration::from_secs(2);
        })
        .await;
    // The key file names the token endpoint of the first start: point it at this one.
    let mut file = file;
    file["token_uri"] = format!("{}/token", cloud.handle.api_url()).into();
    std::fs::write(&key_path, file.to_string()).unwrap();

    let (status, body) = cloud.get(&format!("zones/{ZONE_B}/instances/node-1")).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["errors"][0]["reason"], "required");
    let anonymous = cloud.provider_with("anonymous = true").unwrap();
    let e = anonymous.initialize(None).await.unwrap_err();
    assert!(Chain(&e).to_string().contains("401"), "{}", Chain(&e));

    let gce = cloud
        .provider_with(&format!("credentials-file = {}", key_path.display()))
        .unwrap();
    gce.initialize(None).await.unwrap();
    let instances = gce.instances().unwrap();
    assert!(instances
        .instance_exists_by_provider_id(&format!("gce://demo/{ZONE_B}/node-1"))
        .await
        .unwrap());
    // Past the first token's life: the provider renews it (the cloud refuses expired ones).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(instances.instance_type("node-1").await.unwrap(), "m1.small");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!instances
        .instance_exists_by_provider_id(&format!("gce://demo/{ZONE_B}/node-2"))
        .await
        .unwrap());
}

#[tokio::test]
async fn a_key_the_cloud_did_not_issue_is_refused_naming_the_file() {
    let cloud = Cloud::start_with(|c| c.gce_require_tokens = true).await;
    let key_path = cloud.dir.path().join("stranger.json");
    let pem = include_str!("../fixtures/test-key.pem");
    let file = serde_json::json!({
        "type": "service_account", "project_id": "demo", "private_key_id": "0123abcd",
        "private_key": pem, "client_email": EMAIL,
        "token_uri": format!("{}/token", cloud.handle.api_url()),
    });
    std::fs::write(&key_path, file.to_string()).unwrap();
    let gce = cloud
        .provider_with(&format!("credentials-file = {}", key_path.display()))
        .unwrap();
    let e = gce.initialize(None).await.unwrap_err();
    let text = Chain(&e).to_string();
    assert!(text.contains("stranger.json"), "{text}");
    assert!(text.contains("invalid_grant"), "{text}");
    let key_body = pem.lines().nth(1).unwrap();
    assert!(
        !text.contains(key_body) && !format!("{e:?}").contains(key_body),
        "{text}"
    );

    // A file that is no key at all stops start-up, naming the file and not its contents.
    std::fs::write(
        &key_path,
        "{\"type\": \"service_account\", \"private_key\": \"SECRET\"}",
    )
    .unwrap();
    let e = cloud
        .provider_with(&format!("credentials-file = {}", key_path.display()))
        .unwrap_err();
    let text = Chain(&e).to_string();
    assert!(
        text.contains("stranger.json") && !text.contains("SECRET"),
        "{text}"
    );
}

#[tokio::test]
async fn on_an_instance_the_metadata_servers_token_is_taken() {
    let cloud = Cloud::start().await;
    let (status, op) = cloud
        .gce(
            reqwest::Method::POST,
            &format!("zones/{ZONE_B}/instances"),
            Some(serde_json::json!({"name": "controller",
                "machineType": format!("zones/{ZONE_B}/machineTypes/m1.small"),
                "networkInterfaces": [{"networkIP": "127.1.252.7"}]})),
        )
        .await;
    assert_eq!(status, 200, "{op}");
    let cloud = cloud.restart_with(|c| c.gce_require_tokens = true).await;
    // token-url unset: the metadata server's default service account, as on a GCE VM (the
    // process is the instance by its source address).
    let gce = cloud
        .provider_with("metadata-source-address = 127.1.252.7")
        .unwrap();
    gce.initialize(None).await.unwrap();
    assert!(gce
        .instances()
        .unwrap()
        .instance_exists_by_provider_id(&format!("gce://demo/{ZONE_B}/controller"))
        .await
        .unwrap());
    // Not an instance: no token, and the error says where it looked.
    let gce = cloud.provider_with("").unwrap();
    let e = gce.initialize(None).await.unwrap_err();
    let text = Chain(&e).to_string();
    assert!(text.contains("service-accounts/default/token"), "{text}");
}
