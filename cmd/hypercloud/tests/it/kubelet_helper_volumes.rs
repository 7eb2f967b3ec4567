//! `kubelet-helper`'s cloud part of mounting (in-tree, `local` provider) together with the
//! controller-manager's attach/detach controller: the real binaries, the real apiserver
//! (pkg/testenv, this binary's own) and a real `hypercloud local-cloud serve`. The kubelet
//! helper registers its Node from the instance metadata, reports the pod's Cinder volume in
//! `volumesInUse`, waits until it is attached to its own instance and reports the device;
//! when the pod goes it drops the volume from `volumesInUse` and the controller detaches it.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::localcloud::{cli_json, state_dir, Serve};
use hypercloud_testenv::process::{personality, Proc, Stdout};

use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use serde_json::json;

use crate::volume_fixtures;
use crate::BIN;
use volume_fixtures::{attach_fixture, attached, attached_servers, pod, start_kcm};

const PLUGIN: &str = "kubernetes.io/cinder";

fn start_kubelet(dir: &Path, kubeconfig: &Path, cloud_conf: &Path) -> Proc {
    let mut cmd = personality(BIN, "kubelet-helper");
    cmd.arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", cloud_conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--v=2");
    Proc::spawn_with("kubelet-helper", cmd, dir.join("kubelet.log"), Stdout::Log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_helper_waits_for_the_attach_and_reports_the_device() {
    let _group = hypercloud_testenv::group("kubelet_helper_volumes").await;
    let env = hypercloud_testenv::TestEnv::new("kubelet-volumes")
        .await
        .expect("testenv");
    let tmp = tempfile::tempdir().unwrap();
    let state = state_dir(&tmp);
    let serve = Serve::start(BIN, &state, &[]);
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, serve.cloud_conf()).unwrap();
    let node_name = env.unique_name("kv-node");
    let instance = cli_json(
        BIN,
        &state,
        &["instance", "create", &node_name, "-o", "json"],
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The kubelet finds out who it is from the metadata service, naming its instance as the
    // local cloud lets a caller on this one machine do.
    let kubelet_conf = tmp.path().join("kubelet-cloud.conf");
    std::fs::write(
        &kubelet_conf,
        format!(
            "{}[Metadata]\nsearch-order = metadataService\nmetadata-url = {}\ninstance-id = {instance}\n",
            serve.cloud_conf(),
            serve.metadata_url
        ),
    )
    .unwrap();
    let volume = cli_json(
        BIN,
        &state,
        &["volume", "create", "kv-data", "--size", "1", "-o", "json"],
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
    let pp = PostParams::default();
    // The kubelet registers the Node.
    let pv_name = env.unique_name("kv-pv");
    attach_fixture(
        &client,
        ns,
        &[],
        &pv_name,
        json!({"cinder": {"volumeID": volume, "fsType": "ext4"}}),
    )
    .await;

    let kubelet = start_kubelet(tmp.path(), env.control_plane().kubeconfig(), &kubelet_conf);
    let registered = eventually(
        "the kubelet to register its Node",
        Duration::from_secs(60),
        || async { nodes.get_opt(&node_name).await.unwrap() },
    )
    .await;
    assert_eq!(
        registered
            .spec
            .unwrap()
            .provider_id
            .unwrap()
            .rsplit('/')
            .next(),
        Some(instance.as_str())
    );

    // The pod first, then the controller: the kubelet reports the volume in use and waits.
    pods.create(&pp, &pod("web", &node_name, "data"))
        .await
        .unwrap();
    eventually("the kubelet to wait for the attach", Duration::from_secs(30), || async {
        kubelet.log().contains(&format!("volume {unique} (volume {pv_name:?}, pods {ns}/web): reported in use; waiting for it to be attached")).then_some(())
    })
    .await;
    let in_use = nodes
        .get_status(&node_name)
        .await
        .unwrap()
        .status
        .unwrap()
        .volumes_in_use;
    assert_eq!(in_use, Some(vec![unique.clone()]));
    assert_eq!(
        attached_servers(&state, &volume),
        ("available".to_owned(), vec![])
    );

    let kcm = start_kcm(BIN, tmp.path(), env.control_plane().kubeconfig(), &conf);
    let said = eventually(
        "the kubelet to report the device",
        Duration::from_secs(60),
        || async {
            kubelet
                .log()
                .lines()
                .find(|l| l.starts_with(&format!("volume {unique} ")) && l.contains("is attached"))
                .map(str::to_owned)
        },
    )
    .await;
    assert!(
        said.contains("is attached to this node's instance at /dev/vdb"),
        "{said}"
    );
    assert!(
        said.contains("a real kubelet would now format /dev/vdb"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "/var/lib/kubelet/plugins/kubernetes.io/cinder/mounts/{volume}"
        )),
        "{said}"
    );
    assert_eq!(
        attached(&nodes, &node_name).await,
        [(unique.clone(), "/dev/vdb".to_owned())]
    );
    assert_eq!(
        attached_servers(&state, &volume),
        ("in-use".to_owned(), vec![instance.clone()])
    );

    // The pod goes: the kubelet drops the volume from volumesInUse, the controller detaches.
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(
        "the kubelet to let the volume go",
        Duration::from_secs(30),
        || async {
            kubelet
                .log()
                .contains(&format!(
                    "volume {unique}: no pod on this node uses it any more"
                ))
                .then_some(())
        },
    )
    .await;
    eventually(
        "Cinder to show the volume detached",
        Duration::from_secs(60),
        || async {
            let (status, servers) = attached_servers(&state, &volume);
            (status == "available" && servers.is_empty()).then_some(())
        },
    )
    .await;
    assert!(attached(&nodes, &node_name).await.is_empty());
    let in_use = nodes
        .get_status(&node_name)
        .await
        .unwrap()
        .status
        .unwrap()
        .volumes_in_use;
    assert!(in_use.unwrap_or_default().is_empty());
    drop(kcm);
    drop(kubelet);
    serve.terminate();
    let _ = nodes.delete(&node_name, &DeleteParams::default()).await;
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
}
