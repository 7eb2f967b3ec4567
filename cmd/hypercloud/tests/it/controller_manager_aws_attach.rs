//! The attach/detach controller of the `controller-manager` personality with the `aws`
//! provider: a pod's `awsElasticBlockStore` volume is attached to its Node's instance (the
//! volume's attachment as `aws ec2 describe-volumes` shows it, the Node's `volumesAttached`
//! with the device EC2 reports) and detached when the pod goes; also through a proxy
//! (proxy.rs) that answers `AttachVolume` and `DetachVolume` with EC2's 5xx and throttling
//! errors (`RequestLimitExceeded`), more of them than the SDK's own three attempts absorb, and
//! leaves an attach stuck (`DescribeVolumes` says `attaching` past the provider's attachment
//! wait, and the instance's block devices say so too for a while): the controller retries with
//! back-off and converges, the volume is attached once (one `AttachVolume` reaches EC2; the
//! retries after the stuck attach find the volume in the instance's block device mappings,
//! wait while it is `attaching` there and then reuse its device) and left attached nowhere. As
//! `controller_manager_attach_detach`, no scheduler or kubelet runs: the pod is bound by hand
//! and nothing has the volume mounted.
#![cfg(feature = "aws")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hypercloud_testenv::aws::{cloud_conf, Cloud};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use kube::api::DeleteParams;
use kube::Api;
use serde_json::{json, Value};

use crate::proxy::{ErrorBody, Fault, Proxy};
use crate::volume_fixtures::{
    attach_fixture, attach_turn, delete_pod_until_detached, run_pod_until_attached,
    start_controller_manager, MOTO_ENV,
};
use crate::BIN;

const PLUGIN: &str = "kubernetes.io/aws-ebs";

/// What the proxy answers `AttachVolume` and `DetachVolume` with: one more fault than the
/// SDK's three attempts, so that the first call fails to the controller and its retry meets
/// one fault more before it passes.
const ATTACH_FAULTS: &[Fault] = &[(503, None), (500, None), (429, Some("1")), (503, None)];
const DETACH_FAULTS: &[Fault] = &[(500, None), (503, Some("1")), (429, None), (500, None)];
/// How many `DescribeVolumes` answers say `attaching` instead of `attached`: more than the
/// provider's look before `AttachVolume` and its 11 looks while waiting for the attachment, so
/// that the wait gives up; then EC2's truth passes again.
const STUCK_DESCRIBES: usize = 14;
/// How many `DescribeInstances` answers say the instance's block devices are `attaching`, as
/// EC2 does while an attach is stuck: the provider's look before each of the two failed
/// attaches, then the two after the stuck one, which find the volume on the instance but not
/// attached yet and ask to be retried (no second `AttachVolume`).
const STUCK_INSTANCE_LOOKS: usize = 4;
/// The misbehaving run cuts the EBS waits' pauses further (to about 4s for the attachment
/// wait in all), so that the stuck attach gives up sooner.
const FAST_WAITS: &str = "volume-wait-scale = 0.002";

/// The most EC2 requests an attach (with the device path) and a detach may cost; measured 5
/// and 3 (2026-11-27).
const ATTACH_BUDGET: usize = 6;
const DETACH_BUDGET: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ebs_volumes_attached_to_the_pods_node_and_detached_after() {
    attach_and_detach("kcm-aws-attach", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ebs_attach_and_detach_converge_through_errors_throttling_and_a_stuck_attach() {
    attach_and_detach("kcm-aws-attach-faults", true).await;
}

/// The volume as `aws ec2 describe-volumes` shows it.
fn volume(cloud: &Cloud, id: &str) -> Value {
    let v = cloud
        .moto
        .cli(&["ec2", "describe-volumes", "--volume-ids", id]);
    v["Volumes"][0].clone()
}

/// The instance's block device mappings that name the volume, as `describe-instances` shows
/// them: (device, status).
fn mappings_of(cloud: &Cloud, instance: &str, id: &str) -> Vec<(String, String)> {
    let i = cloud
        .moto
        .cli(&["ec2", "describe-instances", "--instance-ids", instance]);
    i["Reservations"][0]["Instances"][0]["BlockDeviceMappings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["Ebs"]["VolumeId"] == id)
        .map(|m| {
            (
                m["DeviceName"].as_str().unwrap().to_owned(),
                m["Ebs"]["Status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The pod's volume attached to its Node and detached after, the controller-manager speaking
/// to moto through the proxy; `misbehave`: the proxy fails the attach and the detach and
/// leaves the attach stuck.
async fn attach_and_detach(name: &str, misbehave: bool) {
    let _group = hypercloud_testenv::group("controller_manager_attach_detach").await;
    let _turn = attach_turn("aws").await;
    let env = hypercloud_testenv::TestEnv::new(name)
        .await
        .expect("testenv");
    let cloud = Cloud::start(1, 0);
    let proxy = Proxy::start(cloud.moto.url(), &[]).await;
    proxy.error_body(ErrorBody::Ec2);
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("cloud.conf");
    let extra = if misbehave { FAST_WAITS } else { "" };
    std::fs::write(&conf, cloud_conf(&proxy.url, cloud.mock.url(), extra)).unwrap();
    let instance = cloud.field(0, "InstanceId").to_owned();
    let node_name = cloud.field(0, "PrivateDnsName").to_owned();
    let zone = cloud.instances[0]["Placement"]["AvailabilityZone"]
        .as_str()
        .unwrap()
        .to_owned();
    let created = cloud.moto.cli(&[
        "ec2",
        "create-volume",
        "--availability-zone",
        &zone,
        "--size",
        "1",
    ]);
    let id = created["VolumeId"].as_str().unwrap().to_owned();
    let volume_id = format!("aws://{zone}/{id}");

    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), env.namespace());
    // The Node is named by its instance's private DNS name, as on AWS.
    let pv_name = env.unique_name("aws-pv");
    attach_fixture(
        &client,
        env.namespace(),
        &[(&node_name, format!("aws:///{zone}/{instance}"))],
        &pv_name,
        json!({"awsElasticBlockStore": {"volumeID": volume_id, "fsType": "ext4"}}),
    )
    .await;

    let kcm = start_controller_manager(
        BIN,
        tmp.path(),
        env.control_plane().kubeconfig(),
        "aws",
        &conf,
        "attachdetach",
        MOTO_ENV,
    );
    let rules = misbehave.then(|| {
        (
            proxy.fail_next("POST", "Action=AttachVolume", ATTACH_FAULTS),
            proxy.rewrite_next(
                "POST",
                "Action=DescribeVolumes",
                STUCK_DESCRIBES,
                "<status>attached</status>",
                "<status>attaching</status>",
            ),
            proxy.rewrite_next(
                "POST",
                "Action=DescribeInstances",
                STUCK_INSTANCE_LOOKS,
                "<status>attached</status>",
                "<status>attaching</status>",
            ),
            proxy.fail_next("POST", "Action=DetachVolume", DETACH_FAULTS),
        )
    });
    // Added after the fault rules, these see only the requests that reach EC2.
    let attaches = proxy.rewrite_next("POST", "Action=AttachVolume", usize::MAX, "", "");
    let detaches = proxy.rewrite_next("POST", "Action=DetachVolume", usize::MAX, "", "");

    let before_attach = proxy.requests();
    // Upstream's first device name, as EC2 reports it.
    assert_eq!(
        run_pod_until_attached(&pods, &nodes, "web", &node_name).await,
        [(format!("{PLUGIN}/{volume_id}"), "/dev/xvdba".to_owned())]
    );
    let attach_requests = proxy.requests() - before_attach;
    // Attached once: one AttachVolume reached EC2, one attachment, however many times the
    // controller asked.
    assert_eq!(
        attaches.served(),
        1,
        "AttachVolume requests that reached EC2"
    );
    let v = volume(&cloud, &id);
    assert_eq!(v["State"], "in-use", "{v}");
    assert_eq!(v["Attachments"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["Attachments"][0]["InstanceId"], instance.as_str(), "{v}");
    assert_eq!(v["Attachments"][0]["Device"], "/dev/xvdba", "{v}");
    assert_eq!(v["Attachments"][0]["State"], "attached", "{v}");
    assert_eq!(
        mappings_of(&cloud, &instance, &id),
        [("/dev/xvdba".to_owned(), "attached".to_owned())]
    );
    if let Some((failed, stuck, stuck_instance, _)) = &rules {
        assert_eq!(failed.served(), ATTACH_FAULTS.len());
        assert!(
            stuck.served() > 11,
            "the stuck attach: {} answers",
            stuck.served()
        );
        assert_eq!(stuck_instance.served(), STUCK_INSTANCE_LOOKS);
        let log = kcm.log();
        assert!(
            log.contains("not attached on instance"),
            "the attachment wait did not give up:\n{log}"
        );
        assert!(
            log.contains("is attaching on instance"),
            "no retry found the volume attaching:\n{log}"
        );
        assert!(
            log.contains("attaching or detaching volumes, retrying"),
            "the controller did not retry:\n{log}"
        );
    }

    let before_detach = proxy.requests();
    delete_pod_until_detached(&pods, &nodes, "web", &node_name).await;
    eventually(
        "EC2 to show the volume detached",
        Duration::from_secs(60),
        || async { (volume(&cloud, &id)["State"] == "available").then_some(()) },
    )
    .await;
    let v = volume(&cloud, &id);
    assert!(
        v["Attachments"].as_array().is_none_or(|a| a.is_empty()),
        "{v}"
    );
    assert_eq!(mappings_of(&cloud, &instance, &id), []);
    assert_eq!(
        detaches.served(),
        1,
        "DetachVolume requests that reached EC2"
    );
    if let Some((_, _, _, detach)) = &rules {
        assert_eq!(detach.served(), DETACH_FAULTS.len());
    } else {
        // What an attach and a detach cost in EC2 requests (the closing note of issue 31
        // quotes them): a budget, so that a change that adds calls is seen.
        let detach_requests = proxy.requests() - before_detach;
        eprintln!("aws cloud requests: attach {attach_requests}, detach {detach_requests}");
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
    let _ = nodes.delete(&node_name, &DeleteParams::default()).await;
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
    env.cleanup().await.unwrap();
}
