//! Node registration against the real kube-apiserver (pkg/testenv), in both layouts.

use std::collections::BTreeMap;

use hypercloud_cloudprovider::fake::FakeCloud;
use hypercloud_cloudprovider::wellknown::{
    ANNOTATION_PROVIDED_NODE_IP, LABEL_TOPOLOGY_ZONE, TAINT_UNINITIALIZED,
};
use hypercloud_kubelet::registration::{
    cloud_facts, initial_node, node_name, register, sync_addresses, Mode, NodeInput, Registered,
    LABEL_HOSTNAME,
};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use kube::api::{Api, DeleteParams};

fn cloud_config(node: &str) -> String {
    format!(
        "region: RegionOne\ninstances:\n  - name: {node}\n    id: id-{node}\n    instanceType: m1.small\n    zone: az-1\n    \
         addresses: [{{type: InternalIP, address: 10.0.0.21}}]\n"
    )
}

/// Registers the Node `input` describes, which must be new: the Node sent, the Nodes' API and
/// the Node as the apiserver has it.
async fn register_new(env: &TestEnv, input: &NodeInput) -> (Node, Api<Node>, Node) {
    let node = initial_node(input);
    assert_eq!(
        register(env.client(), &node, input)
            .await
            .expect("register"),
        Registered::Created
    );
    let api: Api<Node> = Api::all(env.client());
    let got = api.get(&input.node_name).await.expect("get");
    (node, api, got)
}

#[tokio::test]
async fn in_tree_registration_carries_cloud_facts_and_syncs_addresses() {
    let env = TestEnv::new("kubelet-in-tree").await.expect("testenv");
    let name = env.unique_name("kh-intree");
    let cloud = FakeCloud::from_config_bytes(cloud_config(&name).as_bytes(), "t").expect("config");
    let node_name = node_name(Some(&cloud), &name).await.expect("name");
    let facts = cloud_facts(&cloud, &node_name, None).await.expect("facts");
    let input = NodeInput {
        node_name: node_name.clone(),
        hostname: name.clone(),
        provider_id: None,
        node_ip: None,
        labels: BTreeMap::new(),
        mode: Mode::InTree(facts),
    };
    let (node, api, got) = register_new(&env, &input).await;
    assert_eq!(
        got.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some(format!("fake:///id-{name}").as_str())
    );
    let labels = got.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels.get(LABEL_TOPOLOGY_ZONE).map(String::as_str),
        Some("az-1")
    );
    assert_eq!(labels.get(LABEL_HOSTNAME), Some(&name));
    let status = got.status.clone().expect("status");
    let addresses = status.addresses.expect("addresses");
    assert_eq!(addresses[0].address, "10.0.0.21");
    // Not gce: no NetworkUnavailable at registration, whatever routes the provider has.
    assert!(!status
        .conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "NetworkUnavailable"));

    // Registering again (a kubelet restart) changes nothing.
    assert_eq!(
        register(env.client(), &node, &input).await.expect("again"),
        Registered::Unchanged
    );

    // The cloud changes the address: the sync writes once, then not again.
    let new = vec![NodeAddress {
        type_: "InternalIP".into(),
        address: "10.0.0.99".into(),
    }];
    assert!(sync_addresses(env.client(), &node_name, &new)
        .await
        .expect("sync"));
    assert!(!sync_addresses(env.client(), &node_name, &new)
        .await
        .expect("sync again"));
    let got = api.get_status(&node_name).await.expect("get");
    assert_eq!(got.status.and_then(|s| s.addresses), Some(new));

    api.delete(&node_name, &DeleteParams::default())
        .await
        .expect("delete");
    env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn external_registration_makes_no_cloud_call_and_taints() {
    let env = TestEnv::new("kubelet-external").await.expect("testenv");
    let name = env.unique_name("kh-ext");
    let input = NodeInput {
        node_name: node_name(None, &name).await.expect("name"),
        hostname: name.clone(),
        provider_id: Some(format!("fake:///id-{name}")),
        node_ip: Some("10.0.0.21".into()),
        labels: BTreeMap::from([("example.com/pool".to_string(), "a".to_string())]),
        mode: Mode::External,
    };
    let (node, api, got) = register_new(&env, &input).await;
    // Its own addresses until the cloud-controller-manager sets the cloud's, which keeps the
    // Hostname: the external Node ends up with the addresses an in-tree one has.
    let addresses: Vec<(String, String)> = got
        .status
        .clone()
        .and_then(|s| s.addresses)
        .expect("addresses")
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        vec![
            ("InternalIP".to_string(), "10.0.0.21".to_string()),
            ("Hostname".to_string(), name.clone())
        ]
    );
    let spec = got.spec.expect("spec");
    let taints = spec.taints.expect("taints");
    assert!(taints
        .iter()
        .any(|t| t.key == TAINT_UNINITIALIZED && t.effect == "NoSchedule"));
    assert_eq!(spec.provider_id, Some(format!("fake:///id-{name}")));
    let ann = got.metadata.annotations.expect("annotations");
    assert_eq!(
        ann.get(ANNOTATION_PROVIDED_NODE_IP).map(String::as_str),
        Some("10.0.0.21")
    );
    assert_eq!(
        got.metadata
            .labels
            .expect("labels")
            .get("example.com/pool")
            .map(String::as_str),
        Some("a")
    );

    // An existing node whose kubelet-owned label drifted gets one label patch.
    let mut drifted = input.clone();
    drifted.hostname = format!("{name}-renamed");
    assert_eq!(
        register(env.client(), &node, &drifted)
            .await
            .expect("again"),
        Registered::UpdatedLabels
    );
    let got = api.get(&name).await.expect("get");
    assert_eq!(
        got.metadata.labels.expect("labels").get(LABEL_HOSTNAME),
        Some(&drifted.hostname)
    );

    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    env.cleanup().await.expect("cleanup");
}
