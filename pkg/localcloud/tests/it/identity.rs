//! Identity v3 over HTTP: discovery, tokens, catalog, application credentials, expiry.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use support::{assert_fault, assert_neutron_error, find, password_auth, subject_token, TestCloud};

#[tokio::test]
async fn discovery_documents_point_at_v3() {
    let cloud = TestCloud::start().await;
    let r = cloud.raw(Method::GET, "/identity", None, None).await;
    assert_eq!(r.status, StatusCode::MULTIPLE_CHOICES);
    assert_eq!(r.body["versions"]["values"][0]["id"], "v3.14");
    let href = r.body["versions"]["values"][0]["links"][0]["href"]
        .as_str()
        .unwrap();
    assert_eq!(href, format!("{}/identity/v3/", cloud.url));
    let r = cloud.raw(Method::GET, "/identity/v3", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["version"]["status"], "stable");
    cloud.shutdown().await;
}

#[tokio::test]
async fn password_token_carries_catalog_and_wrong_credentials_get_401() {
    let cloud = TestCloud::start().await;
    let r = cloud.authenticate(password_auth("hypercloud")).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert!(r.headers.get("x-subject-token").is_some());
    let token = &r.body["token"];
    assert_eq!(token["user"]["name"], "admin");
    assert_eq!(token["project"]["name"], "demo");
    assert_eq!(token["methods"], json!(["password"]));
    let types: Vec<&str> = token["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
    for t in [
        "identity",
        "compute",
        "network",
        "block-storage",
        "volumev3",
    ] {
        assert!(types.contains(&t), "{t} missing from {types:?}");
    }
    let compute = find(&token["catalog"], "type", "compute");
    let public = find(&compute["endpoints"], "interface", "public");
    assert_eq!(public["url"], format!("{}/compute/v2.1", cloud.url));
    assert_eq!(public["region"], "RegionOne");

    let bad = cloud.authenticate(password_auth("nope")).await;
    assert_fault(&bad, StatusCode::UNAUTHORIZED, "error", "a wrong password");
    assert!(bad.headers.get("x-subject-token").is_none());

    let mut unknown_user = password_auth("hypercloud");
    unknown_user["auth"]["identity"]["password"]["user"]["name"] = json!("mallory");
    let mut unknown_project = password_auth("hypercloud");
    unknown_project["auth"]["scope"]["project"]["name"] = json!("other");
    for auth in [unknown_user, unknown_project] {
        let r = cloud.authenticate(auth).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }

    let r = cloud.authenticate(json!({"auth": {}})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("identity"));
    cloud.shutdown().await;
}

#[tokio::test]
async fn services_require_a_valid_token() {
    let cloud = TestCloud::start().await;
    let r = cloud
        .raw(Method::GET, "/compute/v2.1/servers", None, None)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.headers.get("www-authenticate").is_some());
    let r = cloud
        .raw(
            Method::GET,
            "/network/v2.0/networks",
            None,
            Some("not-a-token"),
        )
        .await;
    assert_neutron_error(&r, StatusCode::UNAUTHORIZED, "Unauthorized");
    let r = cloud.get("/network/v2.0/networks").await;
    assert_eq!(r.status, StatusCode::OK);
    cloud.shutdown().await;
}

#[tokio::test]
async fn tokens_validate_revoke_and_expire() {
    let mut cloud = TestCloud::start_with(|mut c| {
        // Expiry has one-second resolution: 2s keeps the token valid for the first check
        // even when the login lands at the end of a second.
        c.token_ttl = Duration::from_secs(2);
        c
    })
    .await;
    // Validate: GET with X-Subject-Token.
    assert_eq!(
        cloud.subject_token_call(Method::GET, &cloud.token).await,
        StatusCode::OK
    );
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let r = cloud.get("/compute/v2.1/servers").await;
    assert_eq!(
        r.status,
        StatusCode::UNAUTHORIZED,
        "expired token still accepted"
    );

    cloud.login().await;
    let old = cloud.token.clone();
    cloud.login().await;
    assert_eq!(
        cloud.subject_token_call(Method::DELETE, &old).await,
        StatusCode::NO_CONTENT
    );
    let r = cloud
        .raw(Method::GET, "/compute/v2.1/servers", None, Some(&old))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    cloud.shutdown().await;
}

#[tokio::test]
async fn application_credentials_authenticate_until_deleted() {
    let cloud = TestCloud::start().await;
    let r = cloud.authenticate(password_auth("hypercloud")).await;
    let user_id = r.body["token"]["user"]["id"].as_str().unwrap().to_owned();
    let path = format!("/identity/v3/users/{user_id}/application_credentials");
    let r = cloud
        .post(&path, json!({"application_credential": {"name": "ccm"}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.id("application_credential");
    let secret = r.str("application_credential", "secret");
    let dup = cloud
        .post(&path, json!({"application_credential": {"name": "ccm"}}))
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT);

    let by_id = json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {"id": id, "secret": secret}}}});
    let r = cloud.authenticate(by_id.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(
        r.body["token"]["methods"],
        json!(["application_credential"])
    );
    assert_eq!(r.body["token"]["project"]["id"], cloud.project.as_str());
    let app_token = subject_token(&r);
    let flavors_with_app_token = async || {
        cloud
            .raw(Method::GET, "/compute/v2.1/flavors", None, Some(&app_token))
            .await
            .status
    };
    assert_eq!(flavors_with_app_token().await, StatusCode::OK);

    let by_name = json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {
        "name": "ccm", "user": {"name": "admin", "domain": {"name": "Default"}}, "secret": secret}}}});
    assert_eq!(
        cloud.authenticate(by_name).await.status,
        StatusCode::CREATED
    );
    let wrong = json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {"id": id, "secret": "x"}}}});
    assert_eq!(
        cloud.authenticate(wrong).await.status,
        StatusCode::UNAUTHORIZED
    );

    let listed = cloud.get(&path).await;
    assert_eq!(listed.count("application_credentials"), 1);
    assert!(
        listed.body["application_credentials"][0]
            .get("secret")
            .is_none(),
        "secret must only be shown at creation"
    );

    assert_eq!(
        cloud.delete(&format!("{path}/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        cloud.authenticate(by_id).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(flavors_with_app_token().await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        cloud.get(&format!("{path}/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    cloud.shutdown().await;
}

#[tokio::test]
async fn catalog_and_projects_endpoints() {
    let cloud = TestCloud::start().await;
    let r = cloud.get("/identity/v3/auth/catalog").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["type"] == "image"));
    let r = cloud.get("/identity/v3/projects").await;
    assert_eq!(r.body["projects"][0]["name"], "demo");
    let r = cloud
        .get(&format!("/identity/v3/projects/{}", cloud.project))
        .await;
    assert_eq!(r.body["project"]["id"], cloud.project.as_str());
    let r = cloud.get("/identity/v3/projects/nope").await;
    assert_fault(&r, StatusCode::NOT_FOUND, "error", "an unknown project");
    cloud.shutdown().await;
}
