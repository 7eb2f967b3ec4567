//! Keystone against a real local cloud: password and application-credential auth, clear errors
//! for wrong credentials, token renewal on 401, and the `local` preset.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use hypercloud_cloudprovider::{CloudConfig, Error, Interface, Layout};
use hypercloud_localcloud::store::Read as _;
use hypercloud_providers_openstack::OpenStack;
use reqwest::Method;
use serde_json::{json, Value};
use support::Cloud;

#[tokio::test]
async fn wrong_password_is_a_clear_401_naming_user_and_config() {
    let cloud = Cloud::start().await;
    let conf = cloud
        .global()
        .replace("password = hypercloud", "password = wrong");
    let os = cloud.provider(&conf);
    let err = os.initialize(None).await.unwrap_err();
    let Error::Cloud {
        status, operation, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(*status, Some(401));
    assert_eq!(operation, "authenticate with Keystone");
    let msg = hypercloud_cloudprovider::Chain(&err).to_string();
    assert!(msg.contains("rejected the credentials"), "{msg}");
    assert!(msg.contains("user \"admin\""), "{msg}");
    assert!(msg.contains("test cloud.conf"), "{msg}");
    assert!(!msg.contains("wrong"), "the password leaked: {msg}");
    // Every capability call reports the same, rather than "not found".
    let e = os
        .instances()
        .unwrap()
        .node_addresses("n")
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cloud {
                status: Some(401),
                ..
            }
        ),
        "{e}"
    );
    // One attempt each: a 401 is not retried.
    assert_eq!(os.api_calls(), 2);
    cloud.shutdown().await;
}

#[tokio::test]
async fn unreachable_keystone_is_a_clear_error_after_bounded_attempts() {
    let os = Cloud::start().await;
    let conf = os.global().replace(&os.url, "http://127.0.0.1:1")
        + "[Hypercloud]\nmax-attempts = 2\nretry-base-delay = 10ms\n";
    let p = os.provider(&conf);
    let msg = hypercloud_cloudprovider::Chain(&p.initialize(None).await.unwrap_err()).to_string();
    assert!(msg.contains("authenticate with Keystone failed"), "{msg}");
    assert!(msg.contains("after 2 attempts"), "{msg}");
    assert_eq!(p.api_calls(), 2);
    os.shutdown().await;
}

#[tokio::test]
async fn application_credentials_authenticate() {
    let cloud = Cloud::start().await;
    cloud.create_server("app-node", "1", None).await;
    let v = cloud
        .ok(
            Method::POST,
            &format!(
                "/identity/v3/users/{}/application_credentials",
                cloud.user_id
            ),
            Some(json!({"application_credential": {"name": "ccm", "secret": "s3cret"}})),
        )
        .await;
    let id = v["application_credential"]["id"].as_str().unwrap();
    let by_id = format!(
        "[Global]\nauth-url = {}/identity\napplication-credential-id = {id}\napplication-credential-secret = s3cret\nregion = RegionOne\n",
        cloud.url
    );
    let os = cloud.provider(&by_id);
    os.initialize(None).await.unwrap();
    assert!(os
        .instances()
        .unwrap()
        .instance_type("app-node")
        .await
        .is_ok());
    let by_name = format!(
        "[Global]\nauth-url = {}/identity/v3\napplication-credential-name = ccm\nusername = admin\nuser-domain-name = Default\napplication-credential-secret = s3cret\n",
        cloud.url
    );
    cloud.provider(&by_name).initialize(None).await.unwrap();
    let wrong = by_id.replace("= s3cret", "= nope");
    let e = cloud.provider(&wrong).initialize(None).await.unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("application credential"),
        "{e}"
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn a_revoked_token_is_renewed_once_on_401() {
    let cloud = Cloud::start().await;
    cloud.create_server("n1", "1", None).await;
    let os = cloud.provider_with("[Hypercloud]\nserver-cache-ttl = 0s\n");
    let i = os.instances().unwrap();
    i.instance_type("n1").await.unwrap();
    assert_eq!(os.api_calls(), 2, "token + listing");
    i.instance_type("n1").await.unwrap();
    assert_eq!(os.api_calls(), 3, "the token is cached");
    // Keystone forgets every token (as after a key rotation).
    cloud
        .handle()
        .store()
        .write(|tx| {
            let ids: Vec<String> = tx
                .list::<Value>("tokens")
                .iter()
                .filter_map(|t| t["id"].as_str().map(str::to_owned))
                .collect();
            for id in ids {
                tx.delete("tokens", &id);
            }
            Ok::<_, hypercloud_localcloud::Error>(())
        })
        .unwrap();
    i.instance_type("n1").await.unwrap();
    // 401, new token, listing again.
    assert_eq!(os.api_calls(), 6);
    cloud.shutdown().await;
}

#[tokio::test]
async fn local_preset_needs_only_overrides() {
    let cloud = Cloud::start().await;
    let id = cloud.create_server("local-node", "2", None).await;
    // The preset's credentials and region; only the address differs from the defaults.
    let cc = CloudConfig {
        origin: "override.conf".into(),
        bytes: format!("[Global]\nauth-url = {}/identity/v3\n", cloud.url).into_bytes(),
    };
    let os = OpenStack::local(Some(&cc), Layout::External).unwrap();
    assert_eq!(os.provider_name(), "local");
    os.initialize(None).await.unwrap();
    let md = os
        .instances_v2()
        .unwrap()
        .instance_metadata(&support::node("local-node", None))
        .await
        .unwrap();
    // The scheme is the provider's name on both paths, so in-tree and external agree.
    assert_eq!(md.provider_id, format!("local:///{id}"));
    assert_eq!(md.region, "RegionOne");
    // Upstream's v1 path builds `<provider name>://` + instance_id.
    let v1_id = format!(
        "local://{}",
        os.instances()
            .unwrap()
            .instance_id("local-node")
            .await
            .unwrap()
    );
    assert_eq!(v1_id, md.provider_id);
    assert!(os
        .instances()
        .unwrap()
        .instance_exists_by_provider_id(&v1_id)
        .await
        .unwrap());
    // Without any file: the documented defaults.
    let bare = OpenStack::local(None, Layout::External).unwrap();
    assert_eq!(
        bare.config().keystone_url(),
        "http://127.0.0.1:8800/identity/v3"
    );
    assert_eq!(bare.config().metadata.metadata_url, "http://127.0.0.1:8801");
    // `openstack` itself insists on a config.
    assert!(matches!(
        OpenStack::from_cloud_config(None, Layout::External),
        Err(Error::MissingCloudConfig { .. })
    ));
    cloud.shutdown().await;
}

/// `trust-id`, `trustee-id`, `trustee-password` (OCCM): the provider authenticates as the
/// trustee with the trust as its scope and works in the trust's project; a wrong trustee
/// password names the trustee and trust, not the password; a deleted trust stops it.
#[tokio::test]
async fn a_trust_scoped_token_works_in_the_trusts_project() {
    let cloud = Cloud::start().await;
    cloud.create_server("trust-node", "1", None).await;
    let trustee = cloud
        .ok(
            Method::POST,
            "/identity/v3/users",
            Some(json!({"user": {"name": "ccm-trustee", "password": "tp-41x"}})),
        )
        .await;
    let trustee_id = trustee["user"]["id"].as_str().unwrap().to_owned();
    let trust = cloud
        .ok(
            Method::POST,
            "/identity/v3/OS-TRUST/trusts",
            Some(json!({"trust": {
                "trustor_user_id": cloud.user_id, "trustee_user_id": trustee_id,
                "project_id": cloud.project, "impersonation": false,
                "roles": [{"name": "member"}],
            }})),
        )
        .await;
    let trust_id = trust["trust"]["id"].as_str().unwrap().to_owned();
    let conf = |password: &str| {
        format!(
            "[Global]\nauth-url = {}/identity/v3\ntrust-id = {trust_id}\ntrustee-id = {trustee_id}\ntrustee-password = {password}\nregion = RegionOne\n[Hypercloud]\nserver-cache-ttl = 0s\n",
            cloud.url
        )
    };
    let os = cloud.provider(&conf("tp-41x"));
    os.initialize(None).await.unwrap();
    let i = os.instances().unwrap();
    i.instance_type("trust-node").await.unwrap();
    // The token Keystone issued is the trustee's, scoped by the trust.
    let tokens: Vec<Value> = cloud.handle().store().read(|v| v.list("tokens"));
    assert!(
        tokens
            .iter()
            .any(|t| t["user_id"] == trustee_id.as_str() && t["trust_id"] == trust_id.as_str()),
        "{tokens:?}"
    );

    let e = cloud
        .provider(&conf("not-tp-41x"))
        .initialize(None)
        .await
        .unwrap_err();
    let msg = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(msg.contains(&format!("trustee {trustee_id:?}")), "{msg}");
    assert!(msg.contains(&trust_id), "{msg}");
    assert!(!msg.contains("not-tp-41x"), "the password leaked: {msg}");

    // The trustor deletes the trust: its tokens go, and no new one is issued.
    cloud
        .call(
            Method::DELETE,
            &format!("/identity/v3/OS-TRUST/trusts/{trust_id}"),
            None,
        )
        .await;
    let e = i.instance_type("trust-node").await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cloud {
                status: Some(401),
                ..
            }
        ),
        "{e}"
    );
    cloud.shutdown().await;
}
