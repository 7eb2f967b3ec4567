//! Identity v3 over HTTP: discovery, tokens, catalog, application credentials, expiry.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use support::{password_auth, TestCloud};

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
    let r = cloud
        .raw(
            Method::POST,
            "/identity/v3/auth/tokens",
            Some(password_auth("hypercloud")),
            None,
        )
        .await;
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
    let compute = token["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "compute")
        .unwrap();
    let public = compute["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["interface"] == "public")
        .unwrap();
    assert_eq!(public["url"], format!("{}/compute/v2.1", cloud.url));
    assert_eq!(public["region"], "RegionOne");

    let bad = cloud
        .raw(
            Method::POST,
            "/identity/v3/auth/tokens",
            Some(password_auth("nope")),
            None,
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert_eq!(bad.body["error"]["code"], 401);
    assert!(bad.headers.get("x-subject-token").is_none());

    let mut unknown_user = password_auth("hypercloud");
    unknown_user["auth"]["identity"]["password"]["user"]["name"] = json!("mallory");
    let r = cloud
        .raw(
            Method::POST,
            "/identity/v3/auth/tokens",
            Some(unknown_user),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);

    let mut unknown_project = password_auth("hypercloud");
    unknown_project["auth"]["scope"]["project"]["name"] = json!("other");
    let r = cloud
        .raw(
            Method::POST,
            "/identity/v3/auth/tokens",
            Some(unknown_project),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);

    let r = cloud
        .raw(
            Method::POST,
            "/identity/v3/auth/tokens",
            Some(json!({"auth": {}})),
            None,
        )
        .await;
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
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.body["NeutronError"]["type"], "Unauthorized");
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
    let resp = cloud
        .http
        .get(format!("{}/identity/v3/auth/tokens", cloud.url))
        .header("x-auth-token", &cloud.token)
        .header("x-subject-token", &cloud.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
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
    let resp = cloud
        .http
        .delete(format!("{}/identity/v3/auth/tokens", cloud.url))
        .header("x-auth-token", &cloud.token)
        .header("x-subject-token", &old)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let r = cloud
        .raw(Method::GET, "/compute/v2.1/servers", None, Some(&old))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    cloud.shutdown().await;
}

#[tokio::test]
async fn application_credentials_authenticate_until_deleted() {
    let cloud = TestCloud::start().await;
    let r = cloud
        .raw(
            Method::POST,
            "/identity/v3/auth/tokens",
            Some(password_auth("hypercloud")),
            None,
        )
        .await;
    let user_id = r.body["token"]["user"]["id"].as_str().unwrap().to_owned();
    let path = format!("/identity/v3/users/{user_id}/application_credentials");
    let r = cloud
        .post(&path, json!({"application_credential": {"name": "ccm"}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["application_credential"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let secret = r.body["application_credential"]["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let dup = cloud
        .post(&path, json!({"application_credential": {"name": "ccm"}}))
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT);

    let by_id = json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {"id": id, "secret": secret}}}});
    let r = cloud
        .raw(
            Method::POST,
            "/identity/v3/auth/tokens",
            Some(by_id.clone()),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(
        r.body["token"]["methods"],
        json!(["application_credential"])
    );
    assert_eq!(r.body["token"]["project"]["id"], cloud.project.as_str());
    let app_token = r.headers["x-subject-token"].to_str().unwrap().to_owned();
    assert_eq!(
        cloud
            .raw(Method::GET, "/compute/v2.1/flavors", None, Some(&app_token))
            .await
            .status,
        StatusCode::OK
    );

    let by_name = json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {
        "name": "ccm", "user": {"name": "admin", "domain": {"name": "Default"}}, "secret": secret}}}});
    assert_eq!(
        cloud
            .raw(
                Method::POST,
                "/identity/v3/auth/tokens",
                Some(by_name),
                None
            )
            .await
            .status,
        StatusCode::CREATED
    );
    let wrong = json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {"id": id, "secret": "x"}}}});
    assert_eq!(
        cloud
            .raw(Method::POST, "/identity/v3/auth/tokens", Some(wrong), None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );

    let listed = cloud.get(&path).await;
    assert_eq!(
        listed.body["application_credentials"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
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
        cloud
            .raw(Method::POST, "/identity/v3/auth/tokens", Some(by_id), None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        cloud
            .raw(Method::GET, "/compute/v2.1/flavors", None, Some(&app_token))
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
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
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.body["error"]["code"], 404);
    cloud.shutdown().await;
}
