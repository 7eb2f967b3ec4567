//! The SDK's default credential chain as the provider uses it (instance role from the
//! metadata mock, the shared credentials file, the environment: each wins over the next), and
//! what AWS errors look like: the error code, HTTP status and request ID in the message,
//! throttling retried with backoff up to the configured attempts. A proxy in front of moto
//! records the access key of every request and injects `RequestLimitExceeded`.
//!
//! One test: it changes this process's environment. Its group keeps the other tests of this
//! binary out while it runs, and the environment is restored when it ends.

#![allow(clippy::unwrap_used)]

use crate::support;

use hypercloud_cloudprovider::{Error, Interface, Route};
use hypercloud_testenv::aws::FaultProxy;
use support::{s, World};

/// The variables the test sets or clears.
const VARS: [&str; 15] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_MAX_ATTEMPTS",
    "AWS_RETRY_MODE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
];

/// Puts [`VARS`] back as they were when it was made, when dropped (also on a failed assertion).
struct RestoreEnv(Vec<(&'static str, Option<std::ffi::OsString>)>);

impl RestoreEnv {
    fn save() -> Self {
        Self(VARS.iter().map(|v| (*v, std::env::var_os(v))).collect())
    }
}

impl Drop for RestoreEnv {
    fn drop(&mut self) {
        for (v, value) in &self.0 {
            match value {
                Some(value) => std::env::set_var(v, value),
                None => std::env::remove_var(v),
            }
        }
    }
}

fn clear_env() {
    for v in VARS {
        std::env::remove_var(v);
    }
    std::env::set_var("AWS_CONFIG_FILE", "/nonexistent/aws-config");
    std::env::set_var(
        "AWS_SHARED_CREDENTIALS_FILE",
        "/nonexistent/aws-credentials",
    );
}

#[tokio::test]
async fn credential_chain_errors_and_throttling() {
    let _group = hypercloud_testenv::group("credentials_errors").await;
    let _restore = RestoreEnv::save();
    clear_env();
    let w = World::start(1, 0);
    let proxy = FaultProxy::start(w.moto.url()).await;
    let conf = support::cloud_conf(proxy.url(), w.mock.url(), "");
    let name = s(&w.instances[0], "PrivateDnsName").to_owned();

    // 1. Nothing in the environment or files: the instance role served by the metadata mock.
    let aws = support::provider(&conf);
    aws.instances()
        .expect("v1")
        .node_addresses(&name)
        .await
        .expect("addresses via the IMDS role");
    assert_eq!(
        proxy.access_keys().last().map(String::as_str),
        Some("AKIDFROMIMDSROLE")
    );

    // 2. The shared credentials file wins over the instance role.
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("credentials");
    std::fs::write(
        &file,
        "[default]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = s3cret\n",
    )
    .expect("write credentials");
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &file);
    let aws = support::provider(&conf);
    aws.instances()
        .expect("v1")
        .node_addresses(&name)
        .await
        .expect("addresses via the file");
    assert_eq!(
        proxy.access_keys().last().map(String::as_str),
        Some("AKIDFROMFILE")
    );

    // 3. The environment wins over both.
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDFROMENV");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "s3cret");
    let aws = support::provider(&conf);
    aws.instances()
        .expect("v1")
        .node_addresses(&name)
        .await
        .expect("addresses via env");
    assert_eq!(
        proxy.access_keys().last().map(String::as_str),
        Some("AKIDFROMENV")
    );

    // 4. Throttling is retried: two RequestLimitExceeded answers, then success.
    let aws = support::provider(&conf);
    let before = proxy.actions().len();
    proxy.throttle_next(2);
    aws.instances()
        .expect("v1")
        .node_addresses(&name)
        .await
        .expect("retried past throttling");
    let actions = &proxy.actions()[before..];
    assert_eq!(
        actions, ["DescribeInstances"; 3],
        "two throttled attempts and one that passed"
    );
    assert_eq!(aws.request_counts().ec2(), 3);

    // 5. ... up to the configured attempts; then the error carries code, status, request ID.
    let aws = support::provider(&support::cloud_conf(
        proxy.url(),
        w.mock.url(),
        "max-attempts = 2",
    ));
    proxy.throttle_next(5);
    let err = aws
        .instances()
        .expect("v1")
        .node_addresses(&name)
        .await
        .expect_err("throttled beyond max-attempts");
    proxy.throttle_next(0);
    match &err {
        Error::Cloud {
            operation,
            status,
            request_id,
            source,
            ..
        } => {
            let message = source.to_string();
            assert_eq!(operation, "DescribeInstances");
            assert_eq!(*status, Some(503));
            assert!(
                request_id
                    .as_deref()
                    .is_some_and(|r| r.starts_with("hypercloud-throttle-")),
                "{err}"
            );
            assert!(message.starts_with("RequestLimitExceeded: "), "{err}");
        }
        other => panic!("not a cloud error: {other:?}"),
    }
    assert_eq!(aws.request_counts().ec2(), 2);

    // 6. An error from moto itself: its code and request ID come through.
    let aws = support::provider(&support::cloud_conf(
        proxy.url(),
        w.mock.url(),
        "[Global]\nRouteTableID = rtb-00000000deadbeef",
    ));
    let err = aws
        .routes()
        .expect("routes")
        .create_route(
            "kubernetes",
            "hint",
            &Route {
                target_node: name.clone(),
                destination_cidr: "10.244.1.0/24".into(),
                ..Default::default()
            },
        )
        .await
        .expect_err("no such route table");
    let text = hypercloud_cloudprovider::Chain(&err).to_string();
    assert!(text.contains("InvalidRouteTableID.NotFound"), "{text}");
    assert!(
        matches!(&err, Error::Cloud { request_id: Some(r), .. } if !r.is_empty()),
        "{err:?}"
    );
}
