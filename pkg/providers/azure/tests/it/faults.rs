//! The local cloud's fault injection (`--inject-throttle-rate azure=...`,
//! `--inject-error-rate azure=...`) against the client's retries: 429 with `Retry-After` and
//! 500 are tried again with `cloudProviderBackoff*`, and after the configured attempts the
//! error names the call, ARM's code and the attempts. The token is had before the faults
//! start (the cloud restarts on the same state and address with them); the credential keeps it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hypercloud_localcloud::faults::{Faults, PerService, Rate};
use hypercloud_localcloud::Service;
use hypercloud_providers_azure::models::ResourceGroup;
use hypercloud_providers_azure::{client, Arm, Error};
use serde_json::json;

use crate::support::{Cloud, LOCATION};

fn rate(r: f64) -> Rate {
    Rate(PerService {
        global: None,
        services: BTreeMap::from([(Service::Azure, r)]),
    })
}

const RETRIES_3: &str = r#", "cloudProviderBackoff": true, "cloudProviderBackoffRetries": 3,
    "cloudProviderBackoffDuration": 1, "cloudProviderBackoffExponent": 1"#;
const RETRIES_12: &str = r#", "cloudProviderBackoff": true, "cloudProviderBackoffRetries": 12,
    "cloudProviderBackoffDuration": 1, "cloudProviderBackoffExponent": 1"#;

#[tokio::test]
async fn throttling_and_server_errors_are_retried_and_given_up_on() {
    let mut cloud = Cloud::start().await;
    let (config3, env) = cloud.config(&cloud.azure_json("hypercloud", RETRIES_3));
    let (config12, _) = cloud.config(&cloud.azure_json("hypercloud", RETRIES_12));
    let options = cloud.options();
    let credential = client::new_credential(&config3, &env, &options).unwrap();
    let arm3 = Arm::with_credential(&config3, &env, credential.clone(), &options).unwrap();
    let arm12 = Arm::with_credential(&config12, &env, credential, &options).unwrap();
    let rg = arm3.resource_group_id("faults");
    let _: ResourceGroup = arm3.put(&rg, &json!({"location": LOCATION})).await.unwrap();

    // A quarter of the calls throttled: every read still succeeds, some after a retry.
    cloud
        .restart_with(Faults {
            throttle_rate: rate(0.25),
            ..Faults::default()
        })
        .await;
    let calls = 16;
    for _ in 0..calls {
        let g: ResourceGroup = arm12.get(&rg).await.unwrap();
        assert_eq!(g.name.as_deref(), Some("faults"));
    }
    assert!(
        arm12.requests() > calls,
        "{} requests for {calls} calls: no 429 was retried",
        arm12.requests()
    );

    // Always throttled: three attempts a second apart (Retry-After: 1), then ARM's error.
    cloud
        .restart_with(Faults {
            throttle_rate: rate(1.0),
            ..Faults::default()
        })
        .await;
    let (before, started) = (arm3.requests(), Instant::now());
    let e = arm3.get::<ResourceGroup>(&rg).await.unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(arm3.requests() - before, 3);
    assert!(
        matches!(&e, Error::Arm { status: 429, attempts: 3, code, .. } if code == "OverQuota"),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("GET resourceGroups/faults: HTTP 429 OverQuota: Rate limit exceeded"),
        "{e}"
    );
    assert!(e.to_string().ends_with("(gave up after 3 attempts)"), "{e}");

    // Always failing: the same, with the 500.
    cloud
        .restart_with(Faults {
            error_rate: rate(1.0),
            ..Faults::default()
        })
        .await;
    let before = arm3.requests();
    let e = arm3.delete(&rg).await.unwrap_err();
    assert_eq!(arm3.requests() - before, 3);
    assert!(
        matches!(
            e,
            Error::Arm {
                status: 500,
                attempts: 3,
                ..
            }
        ),
        "{e:?}"
    );

    cloud.restart_with(Faults::default()).await;
    arm3.delete(&rg).await.unwrap();
    cloud.shutdown().await;
}
