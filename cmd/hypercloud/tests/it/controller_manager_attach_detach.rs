//! The attach/detach controller of the `controller-manager` personality (in-tree, `local`
//! provider): the real binary, the real apiserver (pkg/testenv, this binary's own) and a real
//! `hypercloud local-cloud serve`, checked from both sides: the Nodes' `volumesAttached` and
//! the pods' events, and the Cinder volume as the official `openstack` CLI shows it.
//!
//! No scheduler or kubelet runs: pods are bound by hand (`spec.nodeName`), and the test plays
//! the kubelet's part of the protocol (`node.status.volumesInUse`).
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hypercloud_testenv::localcloud::{cli_json, state_dir, Serve};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

use crate::volume_fixtures;
use crate::BIN;
use volume_fixtures::{attach_fixture, attached, attached_servers, pod, start_kcm};

const PLUGIN: &str = "kubernetes.io/cinder";

/// Events about `pod` with `reason`, newest last.
async fn pod_events(events: &Api<Event>, pod: &str, reason: &str) -> Vec<Event> {
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
                && e.reason.as_deref() == Some(reason)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cinder_volumes_attached_to_the_pods_node_and_detached_after() {
    let _group = hypercloud_testenv::group("controller_manager_attach_detach").await;
    let env = hypercloud_testenv::TestEnv::new("kcm-attach")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let state = state_dir(&tmp);
    let serve = Serve::start(BIN, &state, &[]);
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, serve.cloud_conf()).unwrap();
    let server = |name: &str| {
        cli_json(BIN, &state, &["instance", "create", name, "-o", "json"])["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (s1, s2) = (server("ad-1"), server("ad-2"));
    let volume = cli_json(
        BIN,
        &state,
        &["volume", "create", "ad-data", "--size", "1", "-o", "json"],
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let unique = format!("{PLUGIN}/{volume}");

    let client = env.client();
    let ns = env.namespace();
    let nodes: Api<Node> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    // Two Nodes and a pre-provisioned RWO PV of the volume, bound to a claim (as the binder
    // leaves them).
    let (n1, n2) = (env.unique_name("ad-node-1"), env.unique_name("ad-node-2"));
    let pv_name = env.unique_name("ad-pv");
    attach_fixture(
        &client,
        ns,
        &[
            (&n1, format!("openstack:///{s1}")),
            (&n2, format!("openstack:///{s2}")),
        ],
        &pv_name,
        json!({"cinder": {"volumeID": volume, "fsType": "ext4"}}),
    )
    .await;

    let kcm = start_kcm(BIN, tmp.path(), env.control_plane().kubeconfig(), &conf);

    // A pod bound to node 1: the volume is attached to its instance and recorded.
    pods.create(&pp, &pod("web-1", &n1, "data")).await.unwrap();
    eventually(
        "the volume in node 1's volumesAttached",
        Duration::from_secs(60),
        || async { (!attached(&nodes, &n1).await.is_empty()).then_some(()) },
    )
    .await;
    assert_eq!(
        attached(&nodes, &n1).await,
        [(unique.clone(), "/dev/vdb".to_owned())]
    );
    assert_eq!(
        attached_servers(&state, &volume),
        ("in-use".to_owned(), vec![s1.clone()])
    );
    let ok = eventually("the attach event", Duration::from_secs(30), || async {
        pod_events(&events, "web-1", "SuccessfulAttachVolume")
            .await
            .pop()
    })
    .await;
    assert_eq!(
        ok.note.as_deref(),
        Some(format!("AttachVolume.Attach succeeded for volume {pv_name:?} ").as_str())
    );

    // A second pod of the RWO claim on node 2: refused with upstream's Multi-Attach event.
    pods.create(&pp, &pod("web-2", &n2, "data")).await.unwrap();
    let refused = eventually(
        "the Multi-Attach event",
        Duration::from_secs(30),
        || async {
            pod_events(&events, "web-2", "FailedAttachVolume")
                .await
                .pop()
        },
    )
    .await;
    assert_eq!(refused.type_.as_deref(), Some("Warning"));
    assert_eq!(
        refused.note.as_deref(),
        Some(format!("Multi-Attach error for volume {pv_name:?} Volume is already exclusively attached to one node and can't be attached to another").as_str())
    );
    assert!(attached(&nodes, &n2).await.is_empty());
    assert_eq!(attached_servers(&state, &volume).1, [s1.as_str()]);

    // The kubelet of node 1 still has it mounted when web-1 goes: it stays attached.
    nodes
        .patch_status(
            &n1,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"volumesInUse": [unique]}})),
        )
        .await
        .unwrap();
    pods.delete("web-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(
        "the controller to wait for the unmount",
        Duration::from_secs(30),
        || async {
            kcm.log()
                .lines()
                .any(|l| l.contains("waiting for the kubelet to unmount it") && l.contains(&n1))
                .then_some(())
        },
    )
    .await;
    assert_eq!(attached(&nodes, &n1).await.len(), 1);
    assert_eq!(attached_servers(&state, &volume).1, [s1.as_str()]);

    // Unmounted: detached from node 1, and then attached to node 2 for web-2.
    nodes
        .patch_status(
            &n1,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"volumesInUse": null}})),
        )
        .await
        .unwrap();
    eventually(
        "the volume to move to node 2",
        Duration::from_secs(60),
        || async { (!attached(&nodes, &n2).await.is_empty()).then_some(()) },
    )
    .await;
    assert!(attached(&nodes, &n1).await.is_empty());
    assert_eq!(
        attached(&nodes, &n2).await,
        [(unique.clone(), "/dev/vdb".to_owned())]
    );
    assert_eq!(
        attached_servers(&state, &volume),
        ("in-use".to_owned(), vec![s2.clone()])
    );

    // No pod left: detached, available again.
    pods.delete("web-2", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(
        "the volume to leave node 2",
        Duration::from_secs(60),
        || async { attached(&nodes, &n2).await.is_empty().then_some(()) },
    )
    .await;
    eventually(
        "Cinder to show the volume detached",
        Duration::from_secs(30),
        || async {
            let (status, servers) = attached_servers(&state, &volume);
            (status == "available" && servers.is_empty()).then_some(())
        },
    )
    .await;
    drop(kcm);
    serve.terminate();
    let _ = nodes.delete(&n1, &DeleteParams::default()).await;
    let _ = nodes.delete(&n2, &DeleteParams::default()).await;
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
}
