//! Keystone v2.0 with Rackspace's API-key sign-in, judged by Rackspace's own keystoneauth
//! plugin with openstacksdk (hack/conformance/rackspace_conformance.py, rackspaceauth from
//! hack/python-tools.sh rackspace), and its request and answer shapes over HTTP.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::TestCloud;

#[tokio::test]
async fn rackspaceauth_and_openstacksdk_sign_in_with_an_api_key_and_list_servers() {
    let python = hypercloud_testenv::venv_python("venv-rackspace", "rackspaceauth.v2", "rackspace");
    let c = TestCloud::start().await;
    let id = c.create_server("rax-a", json!({})).await;
    let script = hypercloud_testenv::repo_root().join("hack/conformance/rackspace_conformance.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(format!("{}/identity/v2.0/", c.url))
        .arg("admin")
        .arg("hypercloud")
        .arg("rax-a")
        .arg(&id)
        .output()
        .await
        .unwrap();
    hypercloud_testenv::conformance_passed(&out, &script, "\nok");
}

async fn tokens(c: &TestCloud, auth: Value) -> (StatusCode, Value) {
    let r = c
        .http
        .post(format!("{}/identity/v2.0/tokens", c.url))
        .json(&json!({ "auth": auth }))
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

#[tokio::test]
async fn v2_tokens_take_passwords_and_api_keys_and_name_what_is_wrong() {
    let c = TestCloud::start().await;
    let (status, pw) = tokens(
        &c,
        json!({"passwordCredentials": {"username": "admin", "password": "hypercloud"}, "tenantName": "demo"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{pw}");
    let token = pw["access"]["token"]["id"].as_str().unwrap().to_owned();
    assert_eq!(pw["access"]["token"]["tenant"]["id"], c.project.as_str());
    assert!(pw["access"]["token"]["expires"]
        .as_str()
        .unwrap()
        .ends_with(".000Z"));
    let names: Vec<&str> = pw["access"]["serviceCatalog"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(
        names.contains(&"cloudServersOpenStack") && names.contains(&"cloudBlockStorage"),
        "{names:?}"
    );
    let compute = &pw["access"]["serviceCatalog"][0]["endpoints"][0];
    assert_eq!(compute["region"], "RegionOne");
    assert_eq!(compute["tenantId"], c.project.as_str());
    // The v2 token is a token of the cloud: Nova takes it.
    let servers = c
        .raw(
            reqwest::Method::GET,
            "/compute/v2.1/servers",
            None,
            Some(&token),
        )
        .await;
    assert_eq!(servers.status, StatusCode::OK, "{}", servers.body);

    // The API key, to the user's own token only.
    let user = pw["access"]["user"]["id"].as_str().unwrap();
    let path =
        format!("/identity/v2.0/users/{user}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials");
    let key = c.raw(reqwest::Method::GET, &path, None, Some(&token)).await;
    assert_eq!(key.status, StatusCode::OK, "{}", key.body);
    let api_key = key.body["RAX-KSKEY:apiKeyCredentials"]["apiKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let anonymous = c.raw(reqwest::Method::GET, &path, None, None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let other = c
        .raw(
            reqwest::Method::GET,
            "/identity/v2.0/users/someone-else/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials",
            None,
            Some(&token),
        )
        .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN, "{}", other.body);

    let (status, by_key) = tokens(
        &c,
        json!({"RAX-KSKEY:apiKeyCredentials": {"username": "admin", "apiKey": api_key}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{by_key}");
    assert_eq!(
        by_key["access"]["token"]["RAX-AUTH:authenticatedBy"],
        json!(["APIKEY"])
    );

    for (auth, status, says) in [
        (
            json!({"RAX-KSKEY:apiKeyCredentials": {"username": "admin", "apiKey": "nope"}}),
            401,
            "api key is invalid",
        ),
        (
            json!({"passwordCredentials": {"username": "admin", "password": "nope"}}),
            401,
            "Unable to authenticate",
        ),
        (
            json!({"passwordCredentials": {"username": "admin", "password": "hypercloud"}, "tenantId": "nope"}),
            401,
            "Tenant nope",
        ),
        (
            json!({"passwordCredentials": {"username": "admin"}}),
            400,
            "needs username and password",
        ),
        (
            json!({"token": {"id": "x"}}),
            400,
            "passwordCredentials or RAX-KSKEY",
        ),
    ] {
        let (got, body) = tokens(&c, auth.clone()).await;
        assert_eq!(got.as_u16(), status, "{auth}: {body}");
        let message = body.as_object().unwrap().values().next().unwrap()["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(says), "{auth}: {message}");
    }

    // Validation answers the token's access without a catalog; a bad token is 404.
    let v = c
        .raw(
            reqwest::Method::GET,
            &format!("/identity/v2.0/tokens/{token}"),
            None,
            Some(&token),
        )
        .await;
    assert_eq!(v.status, StatusCode::OK, "{}", v.body);
    assert!(v.body["access"].get("serviceCatalog").is_none());
    let gone = c
        .raw(
            reqwest::Method::GET,
            "/identity/v2.0/tokens/nope",
            None,
            Some(&token),
        )
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let versions = c.raw(reqwest::Method::GET, "/identity", None, None).await;
    assert!(
        versions.body.to_string().contains("\"v2.0\""),
        "{}",
        versions.body
    );
}
