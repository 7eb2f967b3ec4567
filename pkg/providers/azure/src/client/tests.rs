//! The client against a scripted transport (no network): what it sends, how it follows
//! long-running operations and lists, and what it makes of bad answers. Time is paused, so
//! `Retry-After` pauses cost nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;

use std::sync::{Arc, Mutex};

use azure_core::credentials::AccessToken;
use azure_core::http::headers::{HeaderName, HeaderValue};
use azure_core::http::{AsyncRawResponse, HttpClient, StatusCode};
use serde_json::json;

use super::*;
use crate::models::VirtualMachine;

/// A reply: status, headers, body.
type Reply = (u16, Vec<(&'static str, String)>, Vec<u8>);
type Handler = dyn Fn(&str, usize) -> Reply + Send + Sync;

/// Answers each request with `handler(request line, index)`; records the request lines.
struct Script {
    handler: Box<Handler>,
    seen: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Script")
    }
}

#[async_trait::async_trait]
impl HttpClient for Script {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let auth = request
            .headers()
            .get_optional_str(&headers::AUTHORIZATION)
            .unwrap_or("")
            .to_owned();
        assert_eq!(auth, "Bearer tok", "every call carries the token");
        let line = format!("{} {}", request.method(), request.url());
        let n = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(line.clone());
            seen.len() - 1
        };
        let (status, hs, body) = (self.handler)(&line, n);
        let hs: HashMap<HeaderName, HeaderValue> = hs
            .into_iter()
            .map(|(k, v)| (HeaderName::from(k.to_owned()), HeaderValue::from(v)))
            .collect();
        Ok(AsyncRawResponse::from_bytes(
            StatusCode::from(status),
            hs.into(),
            body,
        ))
    }
}

#[derive(Debug)]
struct Fixed;

#[async_trait::async_trait]
impl TokenCredential for Fixed {
    async fn get_token(
        &self,
        scopes: &[&str],
        _: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        assert_eq!(scopes, ["https://management.core.windows.net//.default"]);
        Ok(AccessToken::new(
            "tok",
            azure_core::time::OffsetDateTime::now_utc() + azure_core::time::Duration::hours(1),
        ))
    }
}

const SUB: &str = "00000000-0000-0000-0000-000000000001";
const VM: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1";

fn arm_with(
    handler: impl Fn(&str, usize) -> Reply + Send + Sync + 'static,
    timeout: Duration,
) -> (Arm, Arc<Script>) {
    let config = Config::parse(
        &format!(
            r#"{{"tenantId": "t", "subscriptionId": "{SUB}", "resourceGroup": "rg",
                "location": "westeurope", "aadClientId": "c", "aadClientSecret": "s",
                "cloudProviderBackoff": true, "cloudProviderBackoffRetries": 3,
                "cloudProviderBackoffDuration": 1}}"#
        ),
        "test",
    )
    .unwrap();
    let env = Environment::of_cloud(crate::config::Cloud::Public).unwrap();
    let env = Environment {
        resource_manager_endpoint: "https://arm.test/".into(),
        ..env
    };
    let script = Arc::new(Script {
        handler: Box::new(handler),
        seen: Mutex::new(Vec::new()),
    });
    let transport = azure_core::http::Transport::new(script.clone());
    let arm = Arm::build(&config, &env, Arc::new(Fixed), transport, timeout).unwrap();
    (arm, script)
}

fn scripted(handler: impl Fn(&str, usize) -> Reply + Send + Sync + 'static) -> (Arm, Arc<Script>) {
    arm_with(handler, Duration::from_secs(600))
}

fn ok(v: serde_json::Value) -> Reply {
    (200, vec![], v.to_string().into_bytes())
}

fn arm_err(status: u16, code: &str) -> Reply {
    let body = json!({"error": {"code": code, "message": format!("{code} happened")}});
    (status, vec![], body.to_string().into_bytes())
}

fn seen(s: &Script) -> Vec<String> {
    s.seen.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn get_sends_the_api_version_and_types_the_answer() {
    let (arm, script) = scripted(|_, _| {
        ok(
            json!({"id": VM, "name": "vm1", "location": "westeurope", "zones": null,
            "properties": {"hardwareProfile": {"vmSize": "Standard_B1s"},
                "instanceView": {"statuses": [{"code": "ProvisioningState/succeeded"},
                                              {"code": "PowerState/deallocated"}]},
                "futureField": {"x": 1}}}),
        )
    });
    let vm: VirtualMachine = arm
        .get_with(VM, &[("$expand", "instanceView")])
        .await
        .unwrap();
    assert_eq!(vm.power_state(), Some("deallocated"));
    assert_eq!(
        seen(&script),
        [format!(
            "GET https://arm.test{VM}?api-version=2024-07-01&%24expand=instanceView"
        )]
    );
    assert_eq!(arm.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_404_is_not_found_and_other_errors_keep_code_and_status() {
    let (arm, _) = scripted(|line, _| {
        if line.contains("vm1") {
            arm_err(404, "ResourceNotFound")
        } else {
            arm_err(409, "OperationNotAllowed")
        }
    });
    let e = arm.get::<VirtualMachine>(VM).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert_eq!(e.code(), Some("ResourceNotFound"));
    assert_eq!(
        e.to_string(),
        "GET virtualMachines/vm1 (resource group rg): not found (HTTP 404 ResourceNotFound): ResourceNotFound happened"
    );
    let e = arm
        .post_action(&VM.replace("vm1", "vm2"), "restart")
        .await
        .unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(409), Some("OperationNotAllowed"))
    );
    assert!(!e.is_not_found());
    assert!(
        e.to_string()
            .starts_with("POST virtualMachines/vm2/restart"),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn put_polls_the_async_operation_then_reads_the_resource() {
    let aao = "https://arm.test/subscriptions/s/providers/Microsoft.Compute/locations/l/operations/op1?api-version=2024-07-01";
    let (arm, script) = scripted(move |line, n| match n {
        0 => {
            assert!(line.starts_with("PUT "), "{line}");
            (
                201,
                vec![
                    ("azure-asyncoperation", aao.into()),
                    ("retry-after", "3".into()),
                ],
                json!({"name": "vm1", "properties": {"provisioningState": "Creating"}})
                    .to_string()
                    .into_bytes(),
            )
        }
        1 => ok(json!({"status": "InProgress"})),
        2 => ok(json!({"status": "succeeded"})),
        _ => ok(json!({"name": "vm1", "properties": {"provisioningState": "Succeeded"}})),
    });
    let started = tokio::time::Instant::now();
    let vm: VirtualMachine = arm
        .put(VM, &json!({"location": "westeurope"}))
        .await
        .unwrap();
    assert_eq!(
        vm.properties.provisioning_state.as_deref(),
        Some("Succeeded")
    );
    let lines = seen(&script);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[1], format!("GET {aao}"), "polled verbatim");
    assert_eq!(
        lines[3],
        format!("GET https://arm.test{VM}?api-version=2024-07-01")
    );
    // First poll at once; the second after the server's default (5 s, none was given).
    assert_eq!(started.elapsed(), lro::DEFAULT_POLL);
}

#[tokio::test(start_paused = true)]
async fn a_failed_operation_carries_its_error_and_a_status_less_one_is_refused() {
    let (arm, _) = scripted(|_, n| match n {
        0 => (
            201,
            vec![(
                "azure-asyncoperation",
                "https://arm.test/op?api-version=1".into(),
            )],
            b"{}".to_vec(),
        ),
        _ => ok(
            json!({"status": "Failed", "error": {"code": "AllocationFailed", "message": "no room"}}),
        ),
    });
    let e = arm
        .put::<_, VirtualMachine>(VM, &json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "PUT virtualMachines/vm1 (resource group rg): the operation ended Failed: AllocationFailed: no room"
    );
    let (arm, _) = scripted(|_, n| match n {
        0 => (
            202,
            vec![(
                "azure-asyncoperation",
                "https://arm.test/op?api-version=1".into(),
            )],
            vec![],
        ),
        _ => ok(json!({"name": "op"})),
    });
    let e = arm.delete(VM).await.unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
    assert!(e.to_string().contains("has no status"), "{e}");
    let (arm, _) = scripted(|_, _| (202, vec![("location", "http://arm.test/op".into())], vec![]));
    let e = arm.delete(VM).await.unwrap_err();
    assert!(e.to_string().contains("is not https"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn delete_polls_location_until_it_stops_answering_202() {
    let (arm, script) = scripted(|_, n| match n {
        0 => (
            202,
            vec![
                (
                    "location",
                    "https://arm.test/operationResults/1?api-version=1".into(),
                ),
                ("retry-after", "2".into()),
            ],
            vec![],
        ),
        1 | 2 => (202, vec![("retry-after", "2".into())], vec![]),
        _ => (204, vec![], vec![]),
    });
    let started = tokio::time::Instant::now();
    arm.delete(VM).await.unwrap();
    assert_eq!(seen(&script).len(), 4);
    assert_eq!(started.elapsed(), Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn without_headers_a_put_follows_the_provisioning_state() {
    let states = ["Creating", "Updating", "Succeeded"];
    let (arm, script) = scripted(move |_, n| {
        let s = states[n.min(2)];
        (
            if n == 0 { 201 } else { 200 },
            vec![],
            json!({"properties": {"provisioningState": s}})
                .to_string()
                .into_bytes(),
        )
    });
    let vm: VirtualMachine = arm.put(VM, &json!({})).await.unwrap();
    assert_eq!(
        vm.properties.provisioning_state.as_deref(),
        Some("Succeeded")
    );
    // The first answer, two polls, the final read.
    assert_eq!(seen(&script).len(), 4);
    // A 200 without a state and without headers is done at once.
    let (arm, script) = scripted(|_, _| ok(json!({"name": "vm1"})));
    let _: VirtualMachine = arm.put(VM, &json!({})).await.unwrap();
    assert_eq!(seen(&script).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_operation_that_never_ends_times_out_naming_its_state() {
    let (arm, _) = arm_with(
        |_, n| match n {
            0 => (
                202,
                vec![(
                    "azure-asyncoperation",
                    "https://arm.test/op?api-version=1".into(),
                )],
                vec![],
            ),
            _ => (
                200,
                vec![("retry-after", "1".into())],
                br#"{"status": "InProgress"}"#.to_vec(),
            ),
        },
        Duration::from_secs(30),
    );
    let e = arm.post_action(VM, "deallocate").await.unwrap_err();
    let Error::OperationTimedOut { source, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(source.state, "InProgress");
    assert!((25..=32).contains(&source.polls), "{source:?}");
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("still InProgress"),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn throttling_and_server_errors_are_retried_then_given_up() {
    let (arm, script) = scripted(|_, n| match n {
        0 | 1 => (
            429,
            vec![("retry-after", "7".into())],
            json!({"error": {"code": "TooManyRequests", "message": "slow down"}})
                .to_string()
                .into_bytes(),
        ),
        _ => ok(json!({"name": "vm1"})),
    });
    let started = tokio::time::Instant::now();
    let vm: VirtualMachine = arm.get(VM).await.unwrap();
    assert_eq!(vm.name.as_deref(), Some("vm1"));
    assert_eq!(seen(&script).len(), 3);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(14),
        "Retry-After honoured"
    );

    let (arm, script) = scripted(|_, _| (503, vec![], b"<html>upstream down</html>".to_vec()));
    let e = arm.get::<VirtualMachine>(VM).await.unwrap_err();
    assert_eq!(seen(&script).len(), 3, "cloudProviderBackoffRetries: 3");
    assert!(
        matches!(
            e,
            Error::Arm {
                status: 503,
                attempts: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .ends_with("HTTP 503 : <html>upstream down</html> (gave up after 3 attempts)"),
        "{e}"
    );
    // Not worth repeating: once.
    let (arm, script) = scripted(|_, _| arm_err(400, "InvalidParameter"));
    assert!(arm.get::<VirtualMachine>(VM).await.is_err());
    assert_eq!(seen(&script).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn bad_answers_are_errors_not_panics() {
    let (arm, _) = scripted(|_, _| (200, vec![], b"<html>login</html>".to_vec()));
    let e = arm.get::<VirtualMachine>(VM).await.unwrap_err();
    assert!(matches!(e, Error::Decode { .. }), "{e:?}");
    assert!(e.to_string().contains("<html>login</html>"), "{e}");
    let (arm, _) = scripted(|_, _| {
        ok(json!({"properties": {"storageProfile": {"dataDisks": [{"lun": "zero"}]}}}))
    });
    let e = arm.get::<VirtualMachine>(VM).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("at properties.storageProfile.dataDisks[0].lun"),
        "{e}"
    );
    let (arm, _) = scripted(|_, _| (200, vec![], vec![]));
    let e = arm.get::<VirtualMachine>(VM).await.unwrap_err();
    assert!(e.to_string().contains("(an empty answer)"), "{e}");
    let (arm, _) = scripted(|_, _| (200, vec![], vec![b' '; (OBJECT_LIMIT + 1) as usize]));
    let e = arm.get::<VirtualMachine>(VM).await.unwrap_err();
    assert!(matches!(e, Error::ReadBody { .. }), "{e:?}");
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("larger than the limit"),
        "{e}"
    );
    let (arm, _) = scripted(|_, _| (500, vec![], vec![b'x'; 1 << 20]));
    let e = arm.get::<VirtualMachine>(VM).await.unwrap_err();
    assert!(e.to_string().len() < 600, "only an excerpt is quoted: {e}");
}

#[tokio::test(start_paused = true)]
async fn lists_follow_next_links_verbatim_and_stop_on_a_repeat() {
    let next = "https://arm.test/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces?api-version=2024-05-01&%24top=1&%24skiptoken=1";
    let (arm, script) = scripted(move |_, n| match n {
        0 => ok(json!({"value": [{"name": "a"}], "nextLink": next})),
        _ => ok(json!({"value": [{"name": "b"}]})),
    });
    let nics: Vec<crate::models::NetworkInterface> = arm
        .list_with(
            &arm.resource_id("rg", "Microsoft.Network/networkInterfaces", ""),
            &[("$top", "1")],
        )
        .await
        .unwrap();
    let names: Vec<_> = nics.iter().filter_map(|n| n.name.as_deref()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(seen(&script)[1], format!("GET {next}"));
    let (arm, _) = scripted(|_, _| ok(json!({"value": null, "nextLink": "https://arm.test/same"})));
    let e = arm.list::<VirtualMachine>(VM).await.unwrap_err();
    assert!(matches!(e, Error::Paginate(_)), "{e:?}");
    let (arm, _) = scripted(|_, _| ok(json!({})));
    assert!(
        arm.list::<VirtualMachine>(VM).await.unwrap().is_empty(),
        "no value: empty"
    );
}

#[test]
fn api_versions_follow_the_resource_provider() {
    assert_eq!(api_version(VM), COMPUTE_API_VERSION);
    assert_eq!(
        api_version(&VM.replace("virtualMachines/vm1", "disks/d1")),
        DISKS_API_VERSION
    );
    assert_eq!(
        api_version(
            "/subscriptions/s/resourceGroups/rg/providers/microsoft.network/loadBalancers/lb"
        ),
        NETWORK_API_VERSION
    );
    assert_eq!(
        api_version("/subscriptions/s/resourcegroups/rg"),
        RESOURCES_API_VERSION
    );
    assert_eq!(
        describe("DELETE", "/subscriptions/s/resourceGroups/rg"),
        "DELETE resourceGroups/rg"
    );
    assert_eq!(
        describe(
            "list",
            "/subscriptions/s/providers/Microsoft.Network/publicIPAddresses"
        ),
        "list publicIPAddresses"
    );
}

#[test]
fn options_read_the_ca_bundle_as_microsofts_clients_do() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let o = ArmOptions::from_lookup(env(&[
        ("SSL_CERT_FILE", "/b.pem"),
        ("REQUESTS_CA_BUNDLE", "/a.pem"),
    ]));
    assert_eq!(
        o.ca_file,
        Some(("REQUESTS_CA_BUNDLE".into(), PathBuf::from("/a.pem")))
    );
    let o = ArmOptions::from_lookup(env(&[
        ("SSL_CERT_FILE", "/b.pem"),
        ("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:9"),
    ]));
    assert_eq!(
        o.ca_file,
        Some(("SSL_CERT_FILE".into(), PathBuf::from("/b.pem")))
    );
    assert_eq!(o.imds_endpoint, "http://127.0.0.1:9");
    let o = ArmOptions::from_lookup(env(&[("REQUESTS_CA_BUNDLE", " ")]));
    assert_eq!(
        (o.ca_file, o.imds_endpoint.as_str()),
        (None, "http://169.254.169.254")
    );
    let missing = ArmOptions {
        ca_file: Some(("REQUESTS_CA_BUNDLE".into(), "/nonexistent/hc/ca.pem".into())),
        ..ArmOptions::default()
    };
    let e = missing.http().unwrap_err();
    assert!(
        hypercloud_cloudprovider::Chain(&e)
            .to_string()
            .contains("REQUESTS_CA_BUNDLE"),
        "{e}"
    );
}

#[test]
fn backoff_maps_onto_the_shared_policy() {
    let p = retry_policy(None);
    assert_eq!(p.attempts, 1);
    let p = retry_policy(Some(Backoff {
        retries: 6,
        exponent: 1.5,
        duration: Duration::from_secs(5),
        jitter: 1.0,
    }));
    assert_eq!((p.attempts, p.first_delay), (6, Duration::from_secs(5)));
    assert_eq!(p.max_delay, Duration::from_secs_f64(5.0 * 1.5f64.powi(5)));
    assert_eq!(p.max_retry_after, MAX_RETRY_AFTER);
}

/// The provider's capabilities are `async_trait`s: the client and its calls must be `Send`.
#[test]
fn the_client_and_its_calls_are_send() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let (arm, _) = scripted(|_, _| ok(json!({})));
    send_sync(&arm);
    send(arm.get::<VirtualMachine>(VM));
    send(arm.put::<_, VirtualMachine>(VM, &json!({})));
    send(arm.list::<VirtualMachine>(VM));
    send(arm.delete(VM));
    send(arm.post_action(VM, "start"));
    send(arm.authenticate());
}
