//! A Node's life against the real kube-apiserver, with the calls hypercloud's controllers make:
//! create, merge-patch labels and taints under a resourceVersion precondition, strategic-merge
//! patch of the status subresource (addresses, a condition), watch, delete.

use futures::{StreamExt, TryStreamExt};
use hypercloud_testenv::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, ResourceExt, WatchEvent,
    WatchParams,
};
use serde_json::json;
use std::time::Duration;

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[tokio::test]
async fn node_create_patch_watch_delete() {
    let env = TestEnv::new("node-create-patch-watch-delete")
        .await
        .expect("test env");
    let nodes: Api<Node> = Api::all(env.client());
    let name = env.unique_name("node");
    let only_this = format!("metadata.name={name}");

    // Watch from "now", limited to this node, before anything happens to it.
    let listed = nodes
        .list_metadata(&ListParams::default().fields(&only_this))
        .await
        .expect("list nodes");
    assert!(listed.items.is_empty(), "{name} exists before the test");
    let from = listed
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let mut events = nodes
        .watch(
            &WatchParams::default().fields(&only_this).timeout(60),
            &from,
        )
        .await
        .expect("watch nodes")
        .boxed();

    // Registered as the kubelet does in external mode: tainted until the cloud initialises it.
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
        "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
    }))
    .expect("node json");
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    let created_version = created.resource_version().expect("resourceVersion");

    // Labels and taints, only if nobody changed the node since we read it.
    let init = json!({
        "metadata": {
            "resourceVersion": created_version,
            "labels": {
                "topology.kubernetes.io/zone": "zone-a",
                "node.kubernetes.io/instance-type": "m1.small",
            },
        },
        "spec": {
            "providerID": format!("openstack:///{name}"),
            "taints": [{ "key": "example.com/dedicated", "value": "ci", "effect": "NoSchedule" }],
        },
    });
    let patched = nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&init))
        .await
        .expect("merge patch labels and taints");
    assert_eq!(
        patched
            .labels()
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("zone-a")
    );
    assert_eq!(patched.labels().get("kubernetes.io/hostname"), Some(&name));
    let spec = patched.spec.clone().expect("spec");
    assert_eq!(spec.provider_id, Some(format!("openstack:///{name}")));
    let taints: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(taints, ["example.com/dedicated"]);

    // The same precondition with the now stale resourceVersion is refused with a conflict.
    let stale =
        json!({ "metadata": { "resourceVersion": created_version, "labels": { "stale": "yes" } } });
    match nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&stale))
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("stale resourceVersion was not refused: {other:?}"),
    }

    // Status through the status subresource, as the cloud node controllers patch it.
    let now = "2026-01-01T00:00:00Z";
    let status = json!({
        "status": {
            "addresses": [
                { "type": "InternalIP", "address": "10.0.0.5" },
                { "type": "Hostname", "address": name },
            ],
            "conditions": [{
                "type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated",
                "message": "route created by hypercloud", "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
        },
    });
    let with_status = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&status))
        .await
        .expect("patch node status");
    let node_status = with_status.status.clone().expect("status");
    let addresses: Vec<(String, String)> = node_status
        .addresses
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        [
            ("InternalIP".to_owned(), "10.0.0.5".to_owned()),
            ("Hostname".to_owned(), name.clone())
        ]
    );
    let conditions = node_status.conditions.unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False"),
        "{conditions:?}"
    );
    // The status subresource leaves labels alone.
    assert_eq!(with_status.labels(), patched.labels());

    nodes
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete node");
    assert!(
        nodes.get_opt(&name).await.expect("get node").is_none(),
        "{name} still there after delete"
    );

    // The watch saw it all, in order.
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.try_next().await.expect("watch event") {
            match event {
                WatchEvent::Added(n) => seen.push(("ADDED", n)),
                WatchEvent::Modified(n) => seen.push(("MODIFIED", n)),
                WatchEvent::Deleted(n) => {
                    seen.push(("DELETED", n));
                    break;
                }
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(status) => panic!("watch error: {status:?}"),
            }
        }
    })
    .await
    .expect("watch events within 30s");
    let kinds: Vec<&str> = seen.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]);
    assert_eq!(seen[1].1.labels(), patched.labels());
    assert!(seen[2]
        .1
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .is_some());
    assert!(seen.iter().all(|(_, n)| n.name_any() == name));

    env.cleanup().await.expect("cleanup");
}

#[tokio::test]
async fn each_test_gets_its_own_namespace_and_cleanup_deletes_it() {
    let first = TestEnv::new("namespace-a").await.expect("test env a");
    let second = TestEnv::new("namespace-a").await.expect("test env b");
    assert_ne!(first.namespace(), second.namespace());
    assert_ne!(first.unique_name("node"), second.unique_name("node"));

    let config_maps: Api<ConfigMap> = Api::namespaced(first.client(), first.namespace());
    let cm: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "c" }, "data": { "k": "v" } }))
            .expect("configmap json");
    config_maps
        .create(&PostParams::default(), &cm)
        .await
        .expect("create configmap in the test namespace");
    let other: Api<ConfigMap> = Api::namespaced(second.client(), second.namespace());
    assert!(other.get_opt("c").await.expect("get").is_none());

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(first.client());
    let name = first.namespace().to_owned();
    first.cleanup().await.expect("cleanup");
    // Deleted, or Terminating: there is no namespace controller without a kube-controller-manager.
    if let Some(ns) = namespaces.get_opt(&name).await.expect("get namespace") {
        assert!(
            ns.metadata.deletion_timestamp.is_some(),
            "{name} not being deleted"
        );
    }
    drop(second);
}
