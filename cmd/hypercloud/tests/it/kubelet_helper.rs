//! `kubelet-helper` against the real kube-apiserver (pkg/testenv): the built binary registers
//! its Node in-tree (facts from the fake cloud) and external (taint, no cloud call).

use std::process::Command;

use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};

use crate::BIN;

fn run(args: &[String]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("kubelet-helper")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run kubelet-helper");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn in_tree_and_external_registration_through_the_binary() {
    let _group = hypercloud_testenv::group("kubelet_helper").await;
    let env = TestEnv::new("kubelet-helper-bin").await.expect("testenv");
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let dir = tempfile::tempdir().expect("tmp");
    let in_tree = env.unique_name("kh-bin-a");
    let external = env.unique_name("kh-bin-b");
    let cfg = dir.path().join("fake.yaml");
    std::fs::write(
        &cfg,
        format!(
            "region: RegionOne\ninstances:\n  - name: {in_tree}\n    id: id-a\n    instanceType: m1.small\n    zone: az-1\n    \
             addresses: [{{type: InternalIP, address: 10.0.0.31}}]\n"
        ),
    )
    .expect("write config");
    let trace = dir.path().join("calls.jsonl");

    let (code, stdout, stderr) = run(&[
        "--cloud-provider=fake".into(),
        format!("--cloud-config={}", cfg.display()),
        format!("--trace-cloud-calls={}", trace.display()),
        format!("--kubeconfig={kubeconfig}"),
        format!("--hostname-override={in_tree}"),
        "--node-labels=example.com/pool=a".into(),
        "--once".into(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("kubelet-helper: registered node {in_tree}")),
        "{stdout}"
    );
    let api: Api<Node> = Api::all(env.client());
    let node = api.get(&in_tree).await.expect("node registered");
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some("fake:///id-a")
    );
    let labels = node.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("az-1")
    );
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("m1.small")
    );
    assert_eq!(
        labels.get("example.com/pool").map(String::as_str),
        Some("a")
    );
    let addresses = node.status.and_then(|s| s.addresses).expect("addresses");
    assert_eq!(addresses[0].address, "10.0.0.31");
    let methods: Vec<String> = std::fs::read_to_string(&trace)
        .expect("trace")
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["method"]
                .as_str()
                .expect("method")
                .to_string()
        })
        .collect();
    assert!(
        methods.contains(&"current_node_name".to_string()),
        "{methods:?}"
    );
    assert!(
        methods.contains(&"node_addresses".to_string()),
        "{methods:?}"
    );

    // Running again is a kubelet restart: nothing to change.
    let (code, stdout, stderr) = run(&[
        "--cloud-provider=fake".into(),
        format!("--cloud-config={}", cfg.display()),
        format!("--kubeconfig={kubeconfig}"),
        format!("--hostname-override={in_tree}"),
        "--node-labels=example.com/pool=a".into(),
        "--once".into(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("found up to date node {in_tree}")),
        "{stdout}"
    );

    let ext_trace = dir.path().join("external.jsonl");
    let (code, stdout, stderr) = run(&[
        "--cloud-provider=external".into(),
        format!("--trace-cloud-calls={}", ext_trace.display()),
        format!("--kubeconfig={kubeconfig}"),
        format!("--hostname-override={external}"),
        "--node-ip=10.0.0.32".into(),
        "--provider-id=fake:///id-b".into(),
        "--once".into(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("registered node {external}")),
        "{stdout}"
    );
    assert!(!ext_trace.exists(), "external mode must make no cloud call");
    let node = api.get(&external).await.expect("node registered");
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .expect("taints");
    assert!(taints
        .iter()
        .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized"));
    assert_eq!(
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("alpha.kubernetes.io/provided-node-ip"))
            .map(String::as_str),
        Some("10.0.0.32")
    );

    // A node IP the cloud does not have is an error naming it.
    let (code, _, stderr) = run(&[
        "--cloud-provider=fake".into(),
        format!("--cloud-config={}", cfg.display()),
        format!("--kubeconfig={kubeconfig}"),
        format!("--hostname-override={in_tree}"),
        "--node-ip=10.9.9.9".into(),
        "--once".into(),
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("matches ip: 10.9.9.9"), "{stderr}");

    for n in [&in_tree, &external] {
        api.delete(n, &DeleteParams::default())
            .await
            .expect("delete");
    }
    env.cleanup().await.expect("cleanup");
}
