//! The Azure dialect over TLS: Entra's OpenID configuration and token endpoint, and Resource
//! Manager's subscriptions and resource groups, with ARM's errors; then Microsoft's own SDK
//! (azure-identity, azure-mgmt-resource; hack/conformance/azure_conformance.py) judges it.

use std::path::PathBuf;
use std::process::Command;

use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

pub const TENANT: &str = hypercloud_localcloud::defaults::AZURE_TENANT_ID;
pub const V: &str = "api-version=2024-11-01";
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

pub struct Azure {
    pub handle: ServerHandle,
    pub http: reqwest::Client,
    pub url: String,
    pub ca: PathBuf,
    /// The state directory.
    pub state: PathBuf,
    _dir: tempfile::TempDir,
}

/// A cloud served over TLS with its own CA (`--tls-self-signed`), and a client trusting it.
pub async fn start() -> Azure {
    start_with(|_| {}).await
}

/// [`start`], with the config changed by `f` first.
pub async fn start_with(f: impl FnOnce(&mut ServerConfig)) -> Azure {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut config = ServerConfig {
        tls_self_signed: true,
        ..ServerConfig::ephemeral(&state)
    };
    f(&mut config);
    let handle = Server::bind(config).await.unwrap();
    let ca = handle.tls_ca_file().unwrap().to_owned();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap())
        .build()
        .unwrap();
    let url = handle.api_url().to_owned();
    Azure {
        handle,
        http,
        url,
        ca,
        state,
        _dir: dir,
    }
}

pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Azure {
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let url = if path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("{}{path}", self.url)
        };
        let mut req = self.http.request(method, url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Answer {
            status,
            body,
            headers,
        }
    }

    pub async fn token_form(&self, tenant: &str, form: &[(&str, &str)]) -> Answer {
        let resp = self
            .http
            .post(format!("{}/{tenant}/oauth2/v2.0/token", self.url))
            .form(form)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        Answer {
            status,
            body: resp.json().await.unwrap(),
            headers,
        }
    }

    /// The seeded user's ID, from Keystone.
    pub async fn user_id(&self) -> String {
        let a = self
            .call(
                Method::POST,
                "/identity/v3/auth/tokens",
                None,
                Some(json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": {"name": "Default"}, "password": "hypercloud"}}}}})),
            )
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        a.body["token"]["user"]["id"].as_str().unwrap().to_owned()
    }

    pub async fn token(&self, client: &str, secret: &str) -> String {
        let a = self
            .token_form(
                TENANT,
                &[
                    ("grant_type", "client_credentials"),
                    ("client_id", client),
                    ("client_secret", secret),
                    ("scope", "https://management.azure.com/.default"),
                ],
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert!(a.body["expires_in"].as_u64().unwrap() > 0, "{}", a.body);
        a.body["access_token"].as_str().unwrap().to_owned()
    }
}

/// A token request's tenant and form, and the status, error and description it must get.
type Refusal<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16, &'a str, &'a str);

pub fn guid(hex: &str) -> String {
    uuid::Uuid::try_parse(hex).unwrap().hyphenated().to_string()
}

#[tokio::test]
async fn entra_issues_tokens_to_known_clients_and_names_every_refusal() {
    let az = start().await;
    let oidc = az
        .call(
            Method::GET,
            &format!("/{TENANT}/v2.0/.well-known/openid-configuration"),
            None,
            None,
        )
        .await;
    assert_eq!(oidc.status, StatusCode::OK);
    assert_eq!(
        oidc.body["token_endpoint"],
        format!("{}/{TENANT}/oauth2/v2.0/token", az.url)
    );
    assert!(oidc.body["authorization_endpoint"].is_string());
    let user = guid(&az.user_id().await);
    let token = az.token(&user, "hypercloud").await;
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");

    let refusals: [Refusal<'_>; 7] = [
        (
            TENANT,
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", &user),
                ("client_secret", "wrong"),
                ("scope", "https://management.azure.com/.default"),
            ],
            401,
            "invalid_client",
            "AADSTS7000215",
        ),
        (
            TENANT,
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", "00000000-0000-0000-0000-000000000000"),
                ("client_secret", "x"),
                ("scope", "https://management.azure.com/.default"),
            ],
            400,
            "unauthorized_client",
            "AADSTS700016",
        ),
        (
            "11111111-1111-1111-1111-111111111111",
            vec![("grant_type", "client_credentials")],
            400,
            "invalid_request",
            "AADSTS90002",
        ),
        (
            TENANT,
            vec![("grant_type", "password")],
            400,
            "unsupported_grant_type",
            "AADSTS70003",
        ),
        (
            TENANT,
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", &user),
                ("scope", "openid"),
            ],
            400,
            "invalid_scope",
            "AADSTS1002012",
        ),
        (
            TENANT,
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", &user),
                ("scope", "https://management.azure.com/.default"),
                ("client_assertion", "x.y.z"),
                ("client_assertion_type", JWT_BEARER),
            ],
            400,
            "invalid_request",
            "AADSTS50027",
        ),
        (
            TENANT,
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", &user),
                ("scope", "https://management.azure.com/.default"),
                ("client_assertion", "x.y.z"),
            ],
            400,
            "invalid_request",
            "'client_assertion_type'",
        ),
    ];
    for (tenant, form, status, error, says) in refusals {
        let a = az.token_form(tenant, &form).await;
        assert_eq!(a.status.as_u16(), status, "{form:?}: {}", a.body);
        assert_eq!(a.body["error"], error, "{form:?}: {}", a.body);
        assert!(
            a.body["error_description"].as_str().unwrap().contains(says),
            "{form:?}: {}",
            a.body
        );
    }
    az.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn resource_manager_needs_an_api_version_and_a_token_and_keeps_resource_groups() {
    let az = start().await;
    let user_hex = az.user_id().await;
    let token = az.token(&guid(&user_hex), "hypercloud").await;
    let t = Some(token.as_str());

    let a = az.call(Method::GET, "/subscriptions", t, None).await;
    assert_eq!(
        (a.status, a.body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("MissingApiVersionParameter")),
        "{}",
        a.body
    );
    let a = az
        .call(Method::GET, &format!("/subscriptions?{V}"), None, None)
        .await;
    assert_eq!(
        (a.status, a.body["error"]["code"].clone()),
        (StatusCode::UNAUTHORIZED, json!("AuthenticationFailed")),
        "{}",
        a.body
    );
    assert!(a.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer authorization_uri="));
    let tampered = format!("{}x", &token[..token.len() - 1]);
    let a = az
        .call(
            Method::GET,
            &format!("/subscriptions?{V}"),
            Some(&tampered),
            None,
        )
        .await;
    assert_eq!(
        a.body["error"]["code"], "InvalidAuthenticationToken",
        "{}",
        a.body
    );

    let subs = az
        .call(Method::GET, &format!("/subscriptions?{V}"), t, None)
        .await;
    assert_eq!(subs.status, StatusCode::OK, "{}", subs.body);
    let sub = subs.body["value"][0]["subscriptionId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(subs.body["value"][0]["tenantId"], TENANT);
    assert_eq!(subs.body["value"].as_array().unwrap().len(), 1);
    let other = az
        .call(
            Method::GET,
            &format!("/subscriptions/22222222-2222-2222-2222-222222222222?{V}"),
            t,
            None,
        )
        .await;
    assert_eq!(
        (other.status, other.body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("SubscriptionNotFound"))
    );

    let rg = |name: &str| format!("/subscriptions/{sub}/resourcegroups/{name}?{V}");
    let a = az
        .call(
            Method::PUT,
            &rg("Demo-RG"),
            t,
            Some(json!({"location": "RegionOne", "tags": {"k": "v"}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert_eq!(
        a.body["id"],
        format!("/subscriptions/{sub}/resourceGroups/Demo-RG")
    );
    assert_eq!(a.body["location"], "regionone");
    assert_eq!(a.body["properties"]["provisioningState"], "Succeeded");
    let a = az
        .call(
            Method::PUT,
            &rg("demo-rg"),
            t,
            Some(json!({"location": "regionone", "tags": {"k": "w"}})),
        )
        .await;
    assert_eq!(
        (
            a.status,
            a.body["name"].clone(),
            a.body["tags"]["k"].clone()
        ),
        (StatusCode::OK, json!("Demo-RG"), json!("w")),
        "the same group, found whatever the case"
    );
    let a = az
        .call(
            Method::PUT,
            &rg("elsewhere"),
            t,
            Some(json!({"location": "westeurope"})),
        )
        .await;
    assert_eq!(
        a.body["error"]["code"], "LocationNotAvailableForResourceGroup",
        "{}",
        a.body
    );
    let a = az
        .call(Method::PUT, &rg("nowhere"), t, Some(json!({})))
        .await;
    assert_eq!(a.body["error"]["code"], "LocationRequired", "{}", a.body);
    let a = az
        .call(
            Method::PUT,
            &rg("bad."),
            t,
            Some(json!({"location": "regionone"})),
        )
        .await;
    assert_eq!(
        a.body["error"]["code"], "InvalidResourceGroupName",
        "{}",
        a.body
    );
    az.call(
        Method::PUT,
        &rg("second"),
        t,
        Some(json!({"location": "regionone"})),
    )
    .await;
    assert_eq!(
        az.call(Method::HEAD, &rg("SECOND"), t, None).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        az.call(Method::HEAD, &rg("third"), t, None).await.status,
        StatusCode::NOT_FOUND
    );

    // Paged by $top; the nextLink is followed as given.
    let page = az
        .call(
            Method::GET,
            &format!("/subscriptions/{sub}/resourceGroups?{V}&$top=1"),
            t,
            None,
        )
        .await;
    assert_eq!(page.body["value"][0]["name"], "Demo-RG", "{}", page.body);
    let next = page.body["nextLink"].as_str().unwrap().to_owned();
    assert!(
        next.starts_with("https://") && next.contains("api-version="),
        "{next}"
    );
    let page2 = az.call(Method::GET, &next, t, None).await;
    assert_eq!(page2.body["value"][0]["name"], "second", "{}", page2.body);
    assert!(page2.body.get("nextLink").is_none());

    let del = az.call(Method::DELETE, &rg("second"), t, None).await;
    assert_eq!(del.status, StatusCode::ACCEPTED);
    assert_eq!(del.headers["retry-after"], "1");
    let poll = del.headers["location"].to_str().unwrap().to_owned();
    assert_eq!(
        az.call(Method::GET, &poll, t, None).await.status,
        StatusCode::OK
    );
    let gone = az.call(Method::GET, &rg("second"), t, None).await;
    assert_eq!(
        (gone.status, gone.body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("ResourceGroupNotFound"))
    );
    let again = az.call(Method::DELETE, &rg("second"), t, None).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    az.handle.shutdown().await.unwrap();
}

/// Runs a conformance script of Microsoft's SDK for Python against a fresh cloud, signed in as
/// the cloud's user, and checks it ended with `ok`. With `vm`, a VM of that name is made first
/// (group `imds-rg`) for the script to ask the instance metadata service as.
async fn run_sdk_script(name: &str, ok: &str, timeout_secs: u32, vm: Option<&str>) {
    let python = hypercloud_testenv::venv_python("venv-azure", "azure.mgmt.resource", "azure");
    run_script(python, None, name, ok, timeout_secs, vm).await;
}

/// Runs `name` with `python` (and `AZ`, the az executable, when given) against a fresh cloud;
/// [`run_sdk_script`] says what `vm` is for.
async fn run_script(
    python: PathBuf,
    az_cli: Option<PathBuf>,
    name: &str,
    ok: &str,
    timeout_secs: u32,
    vm: Option<&str>,
) {
    let script = hypercloud_testenv::repo_root()
        .join("hack/conformance")
        .join(name);
    let az = start().await;
    let user = guid(&az.user_id().await);
    // A certificate registered for the user (CertificateCredential), and one that is not.
    let certs = tempfile::tempdir().unwrap();
    let registered = crate::azure_certificates::client_cert(certs.path(), "registered");
    let unregistered = crate::azure_certificates::client_cert(certs.path(), "unregistered");
    crate::azure_certificates::local_cloud(
        &az.state,
        &[
            "entra-certificate",
            "add",
            &user,
            registered.cert_file.to_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    if let Some(vm) = vm {
        let token = az.token(&user, "hypercloud").await;
        crate::azure_imds::arm_vms(&az, &token, "imds-rg", &[vm]).await;
    }
    let imds = format!("http://{}", az.handle.metadata_addr().unwrap());
    let instance = vm.unwrap_or_default().to_owned();
    // On a thread of its own: the cloud answers from this test's runtime meanwhile.
    let (url, ca, run) = (az.url.clone(), az.ca.clone(), script.clone());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(&run)
            .env("AZURE_POD_IDENTITY_AUTHORITY_HOST", imds)
            .env("AZURE_IMDS_INSTANCE", instance)
            .env("AZURE_IMDS_GROUP", "imds-rg")
            .env("AZURE_ENDPOINT", url)
            .env("AZURE_TENANT_ID", TENANT)
            .env("AZURE_CLIENT_ID", user)
            .env("AZURE_CLIENT_SECRET", "hypercloud")
            .env("AZURE_CLIENT_CERTIFICATE_PATH", &registered.cert_and_key)
            .env(
                "AZURE_CLIENT_UNREGISTERED_CERTIFICATE_PATH",
                &unregistered.cert_and_key,
            )
            .env("AZURE_LOCATION", "regionone")
            .env("REQUESTS_CA_BUNDLE", ca)
            .env("AZURE_CONFORMANCE_TIMEOUT", timeout_secs.to_string())
            .env("AZ", az_cli.unwrap_or_default())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    hypercloud_testenv::conformance_passed(&out, &script, ok);
    az.handle.shutdown().await.unwrap();
}

/// Microsoft's SDK for Python, unchanged: azure-identity's ClientSecretCredential and
/// CertificateCredential (with a certificate registered by `local-cloud entra-certificate add`;
/// an unregistered one refused with AADSTS700027) get tokens from the tenant's endpoint,
/// ManagedIdentityCredential one from the instance metadata service as a VM made here, azure-mgmt-resource lists the subscription and creates,
/// reads, lists and deletes resource groups (a long-running delete polled to its end), and a
/// wrong secret and a missing group surface as the SDK's own typed errors.
#[tokio::test]
async fn azure_sdk_conformance() {
    run_sdk_script(
        "azure_conformance.py",
        "azure conformance: ok",
        60,
        Some("imds-vm"),
    )
    .await;
}

/// azure-mgmt-network and azure-mgmt-compute, unchanged, drive every Microsoft.Network and
/// Microsoft.Compute resource the dialect has (virtual networks and subnets, public IPs,
/// security groups, route tables, NICs, availability sets, disks, VMs with their power
/// actions and data disks) through long-running operations, and meet ARM's refusals as the
/// SDK's typed errors (hack/conformance/azure_resources_conformance.py).
#[tokio::test]
async fn azure_resources_sdk_conformance() {
    run_sdk_script(
        "azure_resources_conformance.py",
        "azure resources conformance: ok",
        300,
        None,
    )
    .await;
}

/// azure-mgmt-network makes a Standard load balancer in front of a NIC on loopback addresses,
/// and a TCP server on the NIC's address answers through the public IP: the dialect's load
/// balancers carry real traffic through the data plane, with the pool's probe and the
/// subnet's security group enforced (hack/conformance/azure_lb_conformance.py).
#[tokio::test]
async fn azure_load_balancers_carry_traffic() {
    run_sdk_script(
        "azure_lb_conformance.py",
        "azure lb conformance: ok",
        300,
        None,
    )
    .await;
}

/// `--inject-operation-failure-rate azure=1`: a change is accepted as ARM accepts one, its
/// operation reports Failed with ARM's error, and nothing changed; other services are refused
/// the fault by name.
#[tokio::test]
async fn injected_operation_failures_change_nothing_and_poll_as_failed() {
    let az = start_with(|c| {
        c.faults.operation_failure_rate = "azure=1".parse().unwrap();
    })
    .await;
    let user_hex = az.user_id().await;
    let token = az.token(&guid(&user_hex), "hypercloud").await;
    let t = Some(token.as_str());
    let sub = guid(
        &az.call(Method::GET, &format!("/subscriptions?{V}"), t, None)
            .await
            .body["value"][0]["subscriptionId"]
            .as_str()
            .unwrap()
            .replace('-', ""),
    );
    let rg = format!("/subscriptions/{sub}/resourcegroups/faulty");
    let a = az
        .call(
            Method::PUT,
            &format!("{rg}?{V}"),
            t,
            Some(json!({"location": "regionone"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/v1?{V}");
    let a = az
        .call(
            Method::PUT,
            &vnet,
            t,
            Some(json!({"location": "regionone", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert_eq!(
        a.body["properties"]["provisioningState"], "Creating",
        "{}",
        a.body
    );
    let poll = a.headers["azure-asyncoperation"]
        .to_str()
        .unwrap()
        .to_owned();
    let op = az.call(Method::GET, &poll, t, None).await;
    assert_eq!(op.status, StatusCode::OK, "{}", op.body);
    assert_eq!(op.body["status"], "Failed", "{}", op.body);
    assert_eq!(
        op.body["error"]["code"], "InternalServerError",
        "{}",
        op.body
    );
    let a = az.call(Method::GET, &vnet, t, None).await;
    assert_eq!(
        a.status,
        StatusCode::NOT_FOUND,
        "the failed create made the vnet: {}",
        a.body
    );
    az.handle.shutdown().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (mut config, _, _) = crate::support::tls_config(dir.path());
    config.faults.operation_failure_rate = "compute=1".parse().unwrap();
    let Err(e) = hypercloud_localcloud::Server::bind(config).await else {
        panic!("a compute operation failure rate was taken");
    };
    assert!(e.to_string().contains("operation_failure_rate"), "{e}");
}

/// Microsoft's az CLI, unchanged: `az cloud register` reads the cloud's endpoints, a service
/// principal logs in (a wrong secret refused with its AADSTS code), network commands make a
/// load balancer in front of a NIC, and the VM commands (`show -d`, `get-instance-view`,
/// `deallocate`, `start`, `list`, `delete`) read and drive a VM
/// (hack/conformance/azure_cli_conformance.py).
#[tokio::test]
async fn azure_cli_conformance() {
    let python = hypercloud_testenv::venv_python("venv-azure-cli", "azure.cli.core", "azure-cli");
    let az_cli = python.with_file_name("az");
    run_script(
        python,
        Some(az_cli),
        "azure_cli_conformance.py",
        "azure cli conformance: ok",
        600,
        None,
    )
    .await;
}
