//! Credentials against servers that answer what the local cloud never would: a token
//! endpoint answering garbage (HTML, `{}`, a 500, endless bytes) gives a clear error, never a
//! panic; a client certificate's assertion is checked by a stand-in Entra; a managed
//! identity's token comes from a stand-in IMDS and is used on the local cloud.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hypercloud_providers_azure::config::{Config, Environment};
use hypercloud_providers_azure::models::ResourceGroup;
use hypercloud_providers_azure::{Arm, ArmOptions, Error};
use serde_json::{json, Value};

use crate::support::{http_server, tls_server, Cloud, TENANT};

fn env_of(url: &str) -> Environment {
    Environment::parse(
        &json!({"resourceManagerEndpoint": url, "activeDirectoryEndpoint": url,
                "serviceManagementEndpoint": "https://management.azure.com/"})
        .to_string(),
        "test",
    )
    .unwrap()
}

fn config(credential: &str) -> Config {
    Config::parse(
        &format!(
            r#"{{"tenantId": "{TENANT}", "subscriptionId": "s", "resourceGroup": "rg",
                "location": "l"{credential}}}"#
        ),
        "test",
    )
    .unwrap()
}

fn trusting(ca: &std::path::Path) -> ArmOptions {
    ArmOptions {
        ca_file: Some(("test CA".into(), ca.to_owned())),
        ..ArmOptions::default()
    }
}

async fn garbage(State(kind): State<&'static str>) -> Response {
    match kind {
        "html" => (StatusCode::OK, "<html><body>Sign in</body></html>").into_response(),
        "empty" => (StatusCode::OK, "{}").into_response(),
        "500" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "upstream \x1b[31mexploded",
        )
            .into_response(),
        _ => (StatusCode::OK, vec![b'{'; 17 << 20]).into_response(),
    }
}

#[tokio::test]
async fn a_token_endpoint_answering_garbage_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, says) in [
        (
            "html",
            "HTTP 200 and not a JSON object: <html><body>Sign in</body></html>",
        ),
        ("empty", "answered without an access_token"),
        (
            "500",
            "HTTP 500 and not a JSON object: upstream \\u{1b}[31mexploded",
        ),
        ("huge", "larger than the limit"),
    ] {
        let router = Router::new()
            .route(&format!("/{TENANT}/oauth2/v2.0/token"), post(garbage))
            .with_state(kind);
        let (url, ca) = tls_server(router, dir.path()).await;
        let config = config(r#", "aadClientId": "c", "aadClientSecret": "s""#);
        let arm = Arm::new(&config, &env_of(&url), &trusting(&ca)).unwrap();
        let e = arm.authenticate().await.unwrap_err();
        assert!(matches!(e, Error::Authenticate { .. }), "{kind}: {e:?}");
        let chain = hypercloud_cloudprovider::Chain(&e).to_string();
        assert!(chain.contains(says), "{kind}: {chain}");
        assert!(chain.len() < 2000, "{kind}: bounded: {chain}");
        // A call that needs the token fails the same way, naming itself.
        let e = arm
            .get::<ResourceGroup>("/subscriptions/s/resourceGroups/rg")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Authenticate { operation, .. } if operation == "GET resourceGroups/rg"),
            "{kind}: {e:?}"
        );
    }
}

/// What the stand-in Entra saw of a client assertion.
type Seen = Arc<Mutex<Vec<Value>>>;

async fn token_for_assertion(
    State((seen, aud)): State<(Seen, String)>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let jwt = form.get("client_assertion").cloned().unwrap_or_default();
    let part = |i: usize| -> Value {
        jwt.split('.')
            .nth(i)
            .and_then(|p| URL_SAFE_NO_PAD.decode(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null)
    };
    let ok = form.get("client_assertion_type").map(String::as_str)
        == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        && part(0)["alg"] == "RS256"
        && part(1)["aud"] == aud.as_str();
    seen.lock()
        .unwrap()
        .push(json!({"header": part(0), "claims": part(1), "form": form}));
    if ok {
        Json(json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "cert-token"}))
            .into_response()
    } else {
        (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_client",
            "error_description": "AADSTS700027: the assertion is not what was expected"})),
        )
            .into_response()
    }
}

#[tokio::test]
async fn a_client_certificate_signs_the_assertion_entra_expects() {
    let dir = tempfile::tempdir().unwrap();
    let seen: Seen = Arc::default();
    // The token endpoint's URL is known once the server listens; the handler reads it late.
    let aud = Arc::new(Mutex::new(String::new()));
    let aud_late = aud.clone();
    let seen_in = seen.clone();
    let router = Router::new().route(
        &format!("/{TENANT}/oauth2/v2.0/token"),
        post(move |form: Form<HashMap<String, String>>| {
            let state = (seen_in.clone(), aud_late.lock().unwrap().clone());
            token_for_assertion(State(state), form)
        }),
    );
    let (url, ca) = tls_server(router, dir.path()).await;
    *aud.lock().unwrap() = format!("{url}/{TENANT}/oauth2/v2.0/token");
    let cert = fixture("client-cert.pem");
    let config = config(&format!(
        r#", "aadClientId": "app-1", "aadClientCertPath": "{}""#,
        cert.display()
    ));
    let arm = Arm::new(&config, &env_of(&url), &trusting(&ca)).unwrap();
    arm.authenticate().await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["claims"]["iss"], "app-1");
    assert_eq!(
        seen[0]["form"]["scope"],
        "https://management.azure.com//.default"
    );
    assert!(seen[0]["header"]["x5t"].is_string(), "{}", seen[0]);
}

/// A file of tests/fixtures (cargo runs tests in the crate's directory).
fn fixture(name: &str) -> std::path::PathBuf {
    std::env::current_dir()
        .unwrap()
        .join("tests/fixtures")
        .join(name)
}

#[tokio::test]
async fn a_managed_identity_token_comes_from_imds() {
    let cloud = Cloud::start().await;
    // The stand-in IMDS hands out a real token of the cloud, got with the user's secret.
    let secret_arm = cloud.arm("");
    secret_arm.authenticate().await.unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(&cloud.ca).unwrap()).unwrap(),
        )
        .build()
        .unwrap();
    let token: Value = http
        .post(format!("{}/{TENANT}/oauth2/v2.0/token", cloud.url))
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", cloud.client_id.as_str()),
            ("client_secret", "hypercloud"),
            ("scope", "https://management.core.windows.net//.default"),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access = token["access_token"].as_str().unwrap().to_owned();
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let asked_in = asked.clone();
    let imds = Router::new().route(
        "/metadata/identity/oauth2/token",
        get(
            move |headers: HeaderMap, Query(q): Query<HashMap<String, String>>| {
                let access = access.clone();
                asked_in.lock().unwrap().push(format!(
                    "{} {}",
                    q.get("resource").cloned().unwrap_or_default(),
                    q.get("client_id").cloned().unwrap_or_default()
                ));
                async move {
                    if headers.get("metadata").and_then(|v| v.to_str().ok()) != Some("true") {
                        return (
                            StatusCode::BAD_REQUEST,
                            "Required metadata header not specified",
                        )
                            .into_response();
                    }
                    Json(json!({"access_token": access, "expires_in": "86399",
                                "token_type": "Bearer"}))
                    .into_response()
                }
            },
        ),
    );
    let imds_url = http_server(imds).await;
    let json = format!(
        r#"{{"cloud": "AzureStackCloud", "subscriptionId": "{}", "resourceGroup": "rg",
            "location": "regionone", "useManagedIdentityExtension": true,
            "userAssignedIdentityID": "mi-1"}}"#,
        cloud.subscription_id
    );
    let (config, env) = cloud.config(&json);
    let options = ArmOptions {
        imds_endpoint: imds_url.clone(),
        ..cloud.options()
    };
    let arm = Arm::new(&config, &env, &options).unwrap();
    let groups: Vec<ResourceGroup> = arm
        .list(&format!(
            "/subscriptions/{}/resourceGroups",
            cloud.subscription_id
        ))
        .await
        .unwrap();
    assert!(groups.is_empty(), "{groups:?}");
    assert_eq!(
        *asked.lock().unwrap(),
        ["https://management.core.windows.net/ mi-1"],
        "the resource without /.default, the user-assigned identity, asked once"
    );

    // An IMDS that answers garbage: a clear error.
    let bad = http_server(Router::new().route(
        "/metadata/identity/oauth2/token",
        get(|| async { (StatusCode::OK, "<html>captive portal</html>") }),
    ))
    .await;
    let options = ArmOptions {
        imds_endpoint: bad.clone(),
        ..cloud.options()
    };
    let e = Arm::new(&config, &env, &options)
        .unwrap()
        .authenticate()
        .await
        .unwrap_err();
    let chain = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(
        chain.contains(&format!("managed identity token from {bad}"))
            && chain.contains("not JSON")
            && chain.contains("captive portal"),
        "{chain}"
    );
    cloud.shutdown().await;
}
