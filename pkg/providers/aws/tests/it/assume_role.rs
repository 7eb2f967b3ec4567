//! `[Global] RoleARN` and `SourceARN`: every EC2 call is signed with the role's credentials,
//! assumed through moto's STS (`AssumeRole`, with `x-amz-source-account` and
//! `x-amz-source-arn`, as upstream sends them) with the default chain's credentials (here the
//! metadata mock's instance role), and assumed again shortly before they expire; a role STS
//! refuses is an error naming the role. A proxy in front of moto records what was sent.

#![allow(clippy::unwrap_used)]

use crate::support;

use hypercloud_cloudprovider::Interface;
use hypercloud_testenv::aws::{FaultProxy, REGION};
use support::{s, World};

const ROLE: &str = "arn:aws:iam::123456789012:role/hypercloud-ccm";
const SOURCE: &str = "arn:aws:eks:us-east-1:123456789012:cluster/demo";

#[tokio::test]
async fn role_arn_is_assumed_through_sts_and_renewed_before_it_expires() {
    let _group = hypercloud_testenv::group("assume_role").await;
    let w = World::start(1, 0);
    let proxy = FaultProxy::start(w.moto.url()).await;
    let conf = support::cloud_conf(
        proxy.url(),
        w.mock.url(),
        &format!(
            "assume-role-duration = 15s\n[Global]\nRoleARN = {ROLE}\nSourceARN = {SOURCE}\n\
             [ServiceOverride \"sts\"]\nService = sts\nRegion = {REGION}\nURL = {}\n",
            proxy.url()
        ),
    );
    let name = s(&w.instances[0], "PrivateDnsName").to_owned();
    let aws = support::provider(&conf);
    let instances = aws.instances().expect("v1");
    instances
        .node_addresses(&name)
        .await
        .expect("addresses as the role");

    let actions = proxy.actions();
    let keys = proxy.access_keys();
    let headers = proxy.headers();
    let at = actions
        .iter()
        .position(|a| a == "AssumeRole")
        .expect("an AssumeRole");
    // AssumeRole signed with the chain's credentials (the instance role), with the headers.
    assert_eq!(keys[at], "AKIDFROMIMDSROLE");
    let header = |name: &str| {
        headers[at]
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        header("x-amz-source-account").as_deref(),
        Some("123456789012")
    );
    assert_eq!(header("x-amz-source-arn").as_deref(), Some(SOURCE));
    let body = &proxy.bodies()[at];
    assert!(body.contains("DurationSeconds=15"), "{body}");
    assert!(body.contains("RoleSessionName=hypercloud-"), "{body}");
    // Everything after it: EC2 with the assumed role's key (moto's start with ASIA).
    let assumed = keys.last().unwrap().clone();
    assert_eq!(
        actions.last().map(String::as_str),
        Some("DescribeInstances")
    );
    assert!(assumed.starts_with("ASIA"), "{assumed}");
    assert_eq!(aws.request_counts().sts(), 1);

    // The SDK's cache keeps the credentials while they are fresh...
    instances.node_addresses(&name).await.expect("again");
    assert_eq!(aws.request_counts().sts(), 1);
    assert_eq!(proxy.access_keys().last(), Some(&assumed));
    // ...and assumes the role again once they are within 5-10 s of their expiry (the cache's
    // 10 s buffer less up to 5 s of jitter): 15 s credentials, 11 s later.
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    instances
        .node_addresses(&name)
        .await
        .expect("after renewal");
    assert_eq!(aws.request_counts().sts(), 2);
    let renewed = proxy.access_keys().last().unwrap().clone();
    assert!(
        renewed.starts_with("ASIA") && renewed != assumed,
        "{renewed} vs {assumed}"
    );

    // An STS that does not answer AssumeRole: the error names the role.
    let bad = support::cloud_conf(
        proxy.url(),
        w.mock.url(),
        &format!(
            "[Global]\nRoleARN = arn:aws:iam::123456789012:role/refused\n\
             [ServiceOverride \"sts\"]\nService = sts\nRegion = {REGION}\nURL = {}/nothing-here\n",
            proxy.url()
        ),
    );
    let aws = support::provider(&bad);
    let err = aws
        .instances()
        .expect("v1")
        .node_addresses(&name)
        .await
        .expect_err("no role");
    let text = hypercloud_cloudprovider::Chain(&err).to_string();
    assert!(
        text.contains("arn:aws:iam::123456789012:role/refused"),
        "{text}"
    );
}
