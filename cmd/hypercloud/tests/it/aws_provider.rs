//! The `aws` provider in the real binary, against moto, Amazon's metadata mock and the real
//! apiserver (pkg/testenv), in both layouts:
//!
//! - external: the cloud-controller-manager initialises tainted Nodes named by their private
//!   DNS names from EC2 (provider ID `aws:///<zone>/<id>`, zone/region/instance-type labels,
//!   addresses), taints a stopped instance's NotReady Node as shut down and deletes the Node of
//!   a terminated one;
//! - in-tree: kubelet-helper learns its instance from IMDS (the mock, IMDSv2-only), its name
//!   and facts from EC2, and registers the Node with them.
#![cfg(feature = "aws")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hypercloud_testenv::aws::{Cloud, MetadataMock, MockInstance};
use hypercloud_testenv::nodes::{
    self, create_tainted, has_taint, provider_id, set_ready, TAINT_UNINITIALIZED,
};
use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::Node;
use kube::api::DeleteParams;
use kube::Api;

use crate::BIN;
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// Moto accepts any signature; the binary gets credentials from its environment.
/// The secret key the personalities are given: distinctive, so a copy of it in a log is found.
const SECRET_KEY: &str = "Sk-hypercloud-aws-test-3f9c1e";

fn with_credentials(cmd: &mut Command) {
    cmd.env("AWS_ACCESS_KEY_ID", "AKIDHYPERCLOUDTEST")
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent");
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ccm_initialises_nodes_from_ec2_and_follows_their_lifecycle() {
    let _group = hypercloud_testenv::group("aws_provider").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-aws")
        .await
        .expect("testenv");
    let cloud = Cloud::start(2, 0);
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("cloud.conf");
    std::fs::write(&conf, cloud.conf("instance-cache-ttl = 0s")).unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let names: Vec<String> = (0..2)
        .map(|i| cloud.field(i, "PrivateDnsName").to_owned())
        .collect();
    for n in &names {
        // Left over from an earlier run on the same apiserver.
        let _ = nodes.delete(n, &DeleteParams::default()).await;
        create_tainted(&nodes, n).await;
        set_ready(&nodes, n, true).await;
    }
    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=aws")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .arg("--leader-elect=false")
        .arg("--secure-port=0")
        .arg("--controllers=cloud-node,cloud-node-lifecycle")
        .arg("--node-monitor-period=1s")
        // Every library's debug and trace lines: the secret key must be in none of them.
        .arg("--v=10");
    with_credentials(&mut cmd);
    let ccm = Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.path().join("ccm.log"),
        Stdout::Log,
    );

    for (i, n) in names.iter().enumerate() {
        let node = nodes::wait_for(
            &nodes,
            n,
            "node initialised from EC2",
            Duration::from_secs(60),
            // As upstream, the taint goes (with labels and provider ID) before the status
            // patch with the cloud's addresses: wait for both.
            |n| {
                !has_taint(n, TAINT_UNINITIALIZED)
                    && n.status
                        .as_ref()
                        .and_then(|s| s.addresses.as_ref())
                        .is_some_and(|a| !a.is_empty())
            },
        )
        .await;
        let id = cloud.field(i, "InstanceId");
        assert_eq!(
            provider_id(&node),
            Some(format!("aws:///us-east-1a/{id}").as_str())
        );
        assert_eq!(
            label(&node, "topology.kubernetes.io/zone"),
            Some("us-east-1a")
        );
        assert_eq!(
            label(&node, "topology.kubernetes.io/region"),
            Some("us-east-1")
        );
        assert_eq!(
            label(&node, "node.kubernetes.io/instance-type"),
            Some("m5.large")
        );
        let addrs: Vec<(String, String)> = node
            .status
            .and_then(|s| s.addresses)
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert!(
            addrs.contains(&(
                "InternalIP".into(),
                cloud.field(i, "PrivateIpAddress").into()
            )),
            "{addrs:?}"
        );
        assert!(
            addrs.contains(&("InternalDNS".into(), n.clone())),
            "{addrs:?}"
        );
    }

    // Stopped + NotReady: the shutdown taint; started and Ready again: gone.
    let stopped = cloud.field(1, "InstanceId");
    cloud
        .moto
        .cli(&["ec2", "stop-instances", "--instance-ids", stopped]);
    set_ready(&nodes, &names[1], false).await;
    nodes::wait_for(
        &nodes,
        &names[1],
        "shutdown taint",
        Duration::from_secs(60),
        |n| has_taint(n, SHUTDOWN),
    )
    .await;
    // Terminated: the Node is deleted; the running one stays.
    cloud
        .moto
        .cli(&["ec2", "terminate-instances", "--instance-ids", stopped]);
    let gone = names[1].clone();
    let api = nodes.clone();
    eventually(
        "node of the terminated instance deleted",
        Duration::from_secs(60),
        move || {
            let api = api.clone();
            let gone = gone.clone();
            async move {
                api.get_opt(&gone)
                    .await
                    .ok()
                    .flatten()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    assert!(nodes.get_opt(&names[0]).await.unwrap().is_some());
    let _ = nodes.delete(&names[0], &DeleteParams::default()).await;
    // #35: the credential stays out of a --v=10 log, which has the SDK's own debug lines.
    let log = ccm.log();
    assert!(
        log.contains("DEBUG aws_sdk_ec2") && log.contains("DEBUG aws_runtime"),
        "a --v=10 log, with the AWS SDK's own debug lines"
    );
    assert!(
        !log.contains(SECRET_KEY),
        "the secret access key is in the log"
    );
}

#[tokio::test]
async fn kubelet_helper_in_tree_gets_identity_from_imds_then_ec2() {
    let _group = hypercloud_testenv::group("aws_provider").await;
    let env = hypercloud_testenv::TestEnv::new("kh-aws")
        .await
        .expect("testenv");
    let cloud = Cloud::start(2, 0);
    // This "machine" is instance 1, and its metadata service wants IMDSv2 tokens.
    let me = MockInstance::from_moto(&cloud.instances[1]);
    let mock = MetadataMock::start(&me, true);
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("cloud.conf");
    std::fs::write(
        &conf,
        hypercloud_testenv::aws::cloud_conf(cloud.moto.url(), mock.url(), ""),
    )
    .unwrap();
    let name = cloud.field(1, "PrivateDnsName").to_owned();
    let nodes: Api<Node> = Api::all(env.client());
    let _ = nodes.delete(&name, &DeleteParams::default()).await;
    let mut cmd = Command::new(BIN);
    cmd.arg("kubelet-helper")
        .arg("--cloud-provider=aws")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .arg("--hostname-override=not-the-node-name")
        .arg("--once")
        .env_remove("RUST_LOG");
    with_credentials(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        mock.log()
    );
    assert!(
        stdout.contains(&format!("registered node {name}")),
        "{stdout}"
    );
    let node = nodes
        .get(&name)
        .await
        .expect("node registered under its private DNS name");
    let id = cloud.field(1, "InstanceId");
    assert_eq!(
        provider_id(&node),
        Some(format!("aws:///us-east-1a/{id}").as_str())
    );
    assert_eq!(
        label(&node, "topology.kubernetes.io/zone"),
        Some("us-east-1a")
    );
    assert_eq!(
        label(&node, "node.kubernetes.io/instance-type"),
        Some("m5.large")
    );
    assert!(!has_taint(&node, TAINT_UNINITIALIZED));
    // The identity came with a token: the mock refuses requests without one.
    assert!(mock.log().contains("/latest/api/token"), "{}", mock.log());
    let _ = nodes.delete(&name, &DeleteParams::default()).await;
    let _ = Path::new("");
}
