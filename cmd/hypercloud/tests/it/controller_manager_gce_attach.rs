//! The attach/detach controller of the `controller-manager` personality with the `gce`
//! provider: a pod's `gcePersistentDisk` volume is attached to its Node's instance (the
//! instance's `disks[]` as `instances.get` shows it, the Node's `volumesAttached` with the
//! disk's by-id path; the cloud side read with Google's own client, google-cloud-compute through
//! `hack/lib/gce-disk.py`) and detached when the pod goes; also through a proxy (proxy.rs) that
//! answers `instances.attachDisk` and `detachDisk` with 5xx and 429, and leaves an attach
//! stuck (its Operation `RUNNING` past the provider's `operation-timeout`): the controller
//! retries with back-off and converges, the disk is attached once and left attached nowhere. As `controller_manager_attach_detach`, no scheduler or kubelet
//! runs: the pod is bound by hand and nothing has it mounted.
#![cfg(feature = "gce")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hypercloud_testenv::localcloud::{gce_disk, http, state_dir, Serve};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use kube::api::DeleteParams;
use kube::Api;
use serde_json::{json, Value};

use crate::gce_provider::gce_conf;
use crate::proxy::{Fault, Proxy};
use crate::volume_fixtures::{
    attach_fixture, attach_turn, delete_pod_until_detached, run_pod_until_attached,
    start_controller_manager,
};
use crate::BIN;

const PLUGIN: &str = "kubernetes.io/gce-pd";
const ZONE: &str = "us-central1-a";

/// Calls the GCE dialect: the status and the JSON body.
fn gce(serve: &Serve, method: &str, rest: &str, body: Option<&str>) -> (u16, Value) {
    let url = format!("{}/compute/v1/projects/demo/{rest}", serve.api_url);
    let (status, _, text) = http(method, &url, &[], body);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The device names of an instance's disks, over plain HTTP: what the waits poll, cheap enough
/// not to stretch the windows in which the controller's requests are counted (the checks after
/// them use Google's client).
fn devices(serve: &Serve, instance: &str) -> Vec<String> {
    let (status, i) = gce(
        serve,
        "GET",
        &format!("zones/{ZONE}/instances/{instance}"),
        None,
    );
    assert_eq!(status, 200, "{i}");
    i["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["deviceName"].as_str().unwrap().to_owned())
        .collect()
}

/// Where the disk is attached, as Google's client shows it (`disks.get`, then `instances.get`
/// of each of its users): (instance, deviceName) for every entry of a user's `disks[]` that is
/// this disk, and the disk's `users`.
fn attachments(serve: &Serve, disk: &str) -> (Vec<(String, String)>, Vec<String>) {
    let d = gce_disk(&serve.api_url, "demo", ZONE, disk).expect("the disk");
    let at = d["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["instance"].as_str().unwrap().to_owned(),
                a["device_name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let users = serde_json::from_value(d["users"].clone()).unwrap();
    (at, users)
}

/// What the proxy does to `instances.attachDisk`: two faults, then an attach whose Operation
/// stays `RUNNING` (the next `operations.wait` answers too) until the provider gives up.
const ATTACH_FAULTS: &[Fault] = &[(503, None), (429, Some("1"))];
const DETACH_FAULTS: &[Fault] = &[(500, None), (503, Some("1")), (429, Some("2"))];

/// The most Compute Engine requests an attach (with the device path) and a detach may cost;
/// measured 5 and 2 (2026-11-27), the attach counting a second pass of the controller that
/// finds the disk attached.
const ATTACH_BUDGET: usize = 8;
const DETACH_BUDGET: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_disks_attached_to_the_pods_node_and_detached_after() {
    attach_and_detach("kcm-gce-attach", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_attach_and_detach_converge_through_errors_throttling_and_a_stuck_attach() {
    attach_and_detach("kcm-gce-attach-faults", true).await;
}

/// The pod's disk attached to its Node and detached after, the controller-manager speaking to
/// the local cloud through the proxy; `misbehave`: the proxy fails and stalls the attach and
/// fails the detach.
async fn attach_and_detach(name: &str, misbehave: bool) {
    let _group = hypercloud_testenv::group("controller_manager_attach_detach").await;
    let _turn = attach_turn("gce").await;
    let env = hypercloud_testenv::TestEnv::new(name)
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let serve = Serve::start(
        BIN,
        &state_dir(&tmp),
        &["--availability-zones", ZONE, "--region", "us-central1"],
    );
    let proxy = Proxy::start(&serve.api_url, &[]).await;
    let conf = gce_conf(
        tmp.path(),
        &proxy.url,
        &serve.metadata_url,
        false,
        "operation-timeout = 2s\n",
    );
    let instance = env.unique_name("gad");
    let body =
        format!(r#"{{"name": "{instance}", "machineType": "zones/{ZONE}/machineTypes/m1.small"}}"#);
    let (status, op) = gce(
        &serve,
        "POST",
        &format!("zones/{ZONE}/instances"),
        Some(&body),
    );
    assert_eq!(status, 200, "{op}");
    let disk = "gad-data";
    let (status, op) = gce(
        &serve,
        "POST",
        &format!("zones/{ZONE}/disks"),
        Some(&format!(r#"{{"name": "{disk}", "sizeGb": "1"}}"#)),
    );
    assert_eq!(status, 200, "{op}");

    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), env.namespace());
    // The Node is named after its instance, as on GCE.
    let pv_name = env.unique_name("gad-pv");
    attach_fixture(
        &client,
        env.namespace(),
        &[(&instance, format!("gce://demo/{ZONE}/{instance}"))],
        &pv_name,
        json!({"gcePersistentDisk": {"pdName": disk, "fsType": "ext4"}}),
    )
    .await;

    let kcm = start_controller_manager(
        BIN,
        tmp.path(),
        env.control_plane().kubeconfig(),
        "gce",
        &conf,
        "attachdetach",
        &[],
    );
    let rules = misbehave.then(|| {
        (
            proxy.fail_next("POST", "/attachDisk", ATTACH_FAULTS),
            proxy.rewrite_next("POST", "/attachDisk", 1, r#""DONE""#, r#""RUNNING""#),
            proxy.rewrite_next("POST", "/wait", usize::MAX, r#""DONE""#, r#""RUNNING""#),
            proxy.fail_next("POST", "/detachDisk", DETACH_FAULTS),
        )
    });

    let before_attach = proxy.requests();
    assert_eq!(
        run_pod_until_attached(&pods, &nodes, "web", &instance).await,
        [(
            format!("{PLUGIN}/{disk}"),
            format!("/dev/disk/by-id/google-{disk}")
        )]
    );
    let attach_requests = proxy.requests() - before_attach;
    // Attached once: one user, one device, however many times the controller asked.
    assert_eq!(
        attachments(&serve, disk),
        (
            vec![(instance.clone(), disk.to_owned())],
            vec![instance.clone()]
        )
    );
    if let Some((failed, stuck, waits, _)) = &rules {
        assert_eq!(failed.served(), ATTACH_FAULTS.len());
        assert_eq!(stuck.served(), 1, "the stuck attach");
        assert!(
            waits.served() >= 1,
            "no operations.wait for the stuck attach"
        );
        let log = kcm.log();
        assert!(
            log.contains("attaching or detaching volumes, retrying"),
            "the controller did not retry:\n{log}"
        );
    }

    let before_detach = proxy.requests();
    delete_pod_until_detached(&pods, &nodes, "web", &instance).await;
    eventually(
        "the instance to show the disk detached",
        Duration::from_secs(30),
        || async { devices(&serve, &instance).is_empty().then_some(()) },
    )
    .await;
    let detach_requests = proxy.requests() - before_detach;
    assert_eq!(attachments(&serve, disk), (Vec::new(), Vec::new()));
    if let Some((_, _, _, detach)) = &rules {
        assert_eq!(detach.served(), DETACH_FAULTS.len());
    } else {
        // What an attach and a detach cost in Compute Engine requests (the closing note of
        // issue 31 quotes them): a budget, so that a change that adds calls is seen.
        eprintln!("gce cloud requests: attach {attach_requests}, detach {detach_requests}");
        assert!(
            attach_requests <= ATTACH_BUDGET,
            "attach took {attach_requests} requests"
        );
        assert!(
            detach_requests <= DETACH_BUDGET,
            "detach took {detach_requests} requests"
        );
    }

    drop(kcm);
    drop(serve);
    let _ = nodes.delete(&instance, &DeleteParams::default()).await;
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
}
