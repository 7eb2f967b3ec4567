//! The `csi-driver` personality against a real `hypercloud local-cloud serve` (the `local`
//! OpenStack provider, so `cinder.csi.openstack.org`): every CSI call through the driver's
//! unix socket, each checked from the cloud's side with the official `openstack` CLI, and
//! the bad inputs the spec gives codes for.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use hypercloud_csi::proto::*;
use hypercloud_csi::Client;
use hypercloud_testenv::localcloud::{
    cli_json, mounts_under, openstack_json, state_dir, LoopGuard, MountGuard, Serve,
};
use hypercloud_testenv::process::{run, Proc};
use serde_json::Value;
use tonic::Code;

use crate::csi_fixture::{code, csi_sanity, mount_cap, start_driver, DriverCloud, GIB};
use crate::BIN;

fn volume_show(state: &Path, id: &str) -> Value {
    openstack_json(state, &["volume", "show", id])
}

fn attached_servers(v: &Value) -> Vec<String> {
    v["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["server_id"].as_str().unwrap().to_owned())
        .collect()
}

/// A backed local cloud (volumes are sparse files, attached ones loop devices linked in the
/// instance's devices directory), one instance `node` and the driver playing that node.
/// Dropped in field order: the driver, the mounts under the test's directory, the cloud,
/// the loop devices left, the directory.
struct Fixture {
    driver: Proc,
    client: Client,
    _mounts: MountGuard,
    serve: Serve,
    _loops: LoopGuard,
    state: PathBuf,
    conf: PathBuf,
    server_id: String,
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

async fn fixture(node: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let state = state_dir(&tmp);
    let loops = LoopGuard(state.clone());
    let serve = Serve::start_backed(BIN, &state, &[]);
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(&conf, serve.cloud_conf()).unwrap();
    let server_id = create_server(&state, node);
    let dir = tmp.path().to_path_buf();
    let mounts = MountGuard(dir.clone());
    let devices = serve.devices_of(&server_id);
    let cloud = DriverCloud {
        provider: "local",
        conf: &conf,
        env: &[],
        devices: Some(&devices),
    };
    let (driver, client) = start_driver(&dir, &cloud, node).await;
    Fixture {
        driver,
        client,
        _mounts: mounts,
        serve,
        _loops: loops,
        state,
        conf,
        server_id,
        dir,
        _tmp: tmp,
    }
}

fn create_server(state: &Path, name: &str) -> String {
    cli_json(BIN, state, &["instance", "create", name, "-o", "json"])["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cinder_csi_lifecycle_seen_from_the_cloud() {
    let _group = hypercloud_testenv::group("csi_driver").await;
    let f = fixture("csi-node-1").await;
    let c = &f.client;

    let info = c.get_plugin_info(GetPluginInfoRequest {}).await.unwrap();
    assert_eq!(info.name, "cinder.csi.openstack.org");
    assert!(!info.vendor_version.is_empty());

    let node = c.node_get_info(NodeGetInfoRequest {}).await.unwrap();
    assert_eq!(node.node_id, f.server_id);
    assert_eq!(node.max_volumes_per_node, 256);
    let zone = node.accessible_topology.as_ref().unwrap().segments
        ["topology.cinder.csi.openstack.org/zone"]
        .clone();
    assert!(!zone.is_empty());

    // CreateVolume: 1.5 GiB rounds up to 2; the zone from the topology requirement.
    let cap = mount_cap(volume_capability::Mode::SingleNodeWriter);
    let create = CreateVolumeRequest {
        name: "pvc-csi-1".into(),
        capacity_range: Some(CapacityRange {
            required_bytes: GIB + GIB / 2,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap.clone()],
        parameters: [("csi.storage.k8s.io/pvc/name".to_owned(), "data".to_owned())].into(),
        accessibility_requirements: Some(TopologyRequirement {
            requisite: vec![],
            preferred: node.accessible_topology.clone().into_iter().collect(),
        }),
        ..Default::default()
    };
    let vol = c
        .create_volume(create.clone())
        .await
        .unwrap()
        .volume
        .unwrap();
    assert_eq!(vol.capacity_bytes, 2 * GIB);
    let shown = volume_show(&f.state, &vol.volume_id);
    assert_eq!(shown["name"], "pvc-csi-1");
    assert_eq!(shown["size"], 2);
    assert_eq!(shown["availability_zone"], zone.as_str());
    assert_eq!(
        shown["properties"]["kubernetes.io/created-for/pvc/name"], "data",
        "{shown}"
    );
    // Idempotent by name; another size under the same name is AlreadyExists.
    let again = c
        .create_volume(create.clone())
        .await
        .unwrap()
        .volume
        .unwrap();
    assert_eq!(again.volume_id, vol.volume_id);
    let mut bigger = create.clone();
    bigger.capacity_range = Some(CapacityRange {
        required_bytes: 5 * GIB,
        limit_bytes: 0,
    });
    assert_eq!(
        c.create_volume(bigger).await.unwrap_err().code(),
        Code::AlreadyExists
    );

    // Attach: the cloud shows it attached to the node's server.
    let published = c
        .controller_publish_volume(ControllerPublishVolumeRequest {
            volume_id: vol.volume_id.clone(),
            node_id: node.node_id.clone(),
            volume_capability: Some(cap.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(published.publish_context["DevicePath"].starts_with("/dev/"));
    let shown = volume_show(&f.state, &vol.volume_id);
    assert_eq!(shown["status"], "in-use");
    assert_eq!(attached_servers(&shown), vec![f.server_id.clone()]);
    // Again: idempotent.
    c.controller_publish_volume(ControllerPublishVolumeRequest {
        volume_id: vol.volume_id.clone(),
        node_id: node.node_id.clone(),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    })
    .await
    .unwrap();

    let listed = c.list_volumes(ListVolumesRequest::default()).await.unwrap();
    let entry = listed
        .entries
        .iter()
        .find(|e| e.volume.as_ref().unwrap().volume_id == vol.volume_id)
        .unwrap();
    assert_eq!(
        entry.status.as_ref().unwrap().published_node_ids,
        vec![f.server_id.clone()]
    );
    let valid = c
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: vol.volume_id.clone(),
            volume_capabilities: vec![cap.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(valid.confirmed.is_some(), "{valid:?}");

    // Growing an attached volume is refused: the driver advertises OFFLINE expansion.
    let grow = ControllerExpandVolumeRequest {
        volume_id: vol.volume_id.clone(),
        capacity_range: Some(CapacityRange {
            required_bytes: 3 * GIB,
            limit_bytes: 0,
        }),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    };
    assert_eq!(
        code(c.controller_expand_volume(grow.clone()).await),
        Code::FailedPrecondition
    );
    assert_eq!(volume_show(&f.state, &vol.volume_id)["size"], 2);

    // A second server cannot take it while attached here.
    let other = cli_json(
        BIN,
        &f.state,
        &["instance", "create", "csi-node-2", "-o", "json"],
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = c
        .controller_publish_volume(ControllerPublishVolumeRequest {
            volume_id: vol.volume_id.clone(),
            node_id: other.clone(),
            volume_capability: Some(cap.clone()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    // Deleting an attached volume is refused.
    assert_eq!(
        c.delete_volume(DeleteVolumeRequest {
            volume_id: vol.volume_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .code(),
        Code::FailedPrecondition
    );

    // Detach (twice: idempotent), then delete (twice).
    for _ in 0..2 {
        c.controller_unpublish_volume(ControllerUnpublishVolumeRequest {
            volume_id: vol.volume_id.clone(),
            node_id: node.node_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let shown = volume_show(&f.state, &vol.volume_id);
    assert_eq!(shown["status"], "available");
    assert!(attached_servers(&shown).is_empty());
    // Detached, it grows: the cloud holds the new size.
    let grown = c.controller_expand_volume(grow.clone()).await.unwrap();
    assert_eq!(grown.capacity_bytes, 3 * GIB);
    assert!(grown.node_expansion_required);
    assert_eq!(volume_show(&f.state, &vol.volume_id)["size"], 3);
    for _ in 0..2 {
        c.delete_volume(DeleteVolumeRequest {
            volume_id: vol.volume_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let all = openstack_json(&f.state, &["volume", "list"]);
    assert!(
        !all.as_array()
            .unwrap()
            .iter()
            .any(|v| v["ID"] == vol.volume_id.as_str()),
        "{all}"
    );
    drop(f.driver);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_specs_codes() {
    let _group = hypercloud_testenv::group("csi_driver").await;
    let f = fixture("csi-node-3").await;
    let c = &f.client;
    let cap = mount_cap(volume_capability::Mode::SingleNodeWriter);
    let create = |name: &str, bytes: i64, cap: VolumeCapability| CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap],
        ..Default::default()
    };

    assert_eq!(
        code(c.create_volume(create("", GIB, cap.clone())).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            c.create_volume(CreateVolumeRequest {
                volume_capabilities: vec![],
                ..create("no-caps", GIB, cap.clone())
            })
            .await
        ),
        Code::InvalidArgument
    );
    // Beyond the cloud's limit; a limit below what whole GiB allow.
    let err = c
        .create_volume(create("huge", 2000 * GIB, cap.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange);
    assert!(err.message().contains("1000 GiB"), "{err:?}");
    assert_eq!(
        code(
            c.create_volume(CreateVolumeRequest {
                capacity_range: Some(CapacityRange {
                    required_bytes: 1,
                    limit_bytes: 1,
                }),
                ..create("tiny", 1, cap.clone())
            })
            .await
        ),
        Code::OutOfRange
    );
    // Parameters the driver would not act on are refused by name.
    let err = c
        .create_volume(CreateVolumeRequest {
            mutable_parameters: [("iops".to_owned(), "3000".to_owned())].into(),
            ..create("mutable", GIB, cap.clone())
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("\"iops\""), "{err:?}");
    // Unsupported capabilities: several writers, an unknown file system.
    let err = c
        .create_volume(create(
            "multi",
            GIB,
            mount_cap(volume_capability::Mode::MultiNodeMultiWriter),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("MultiNodeMultiWriter"), "{err:?}");
    let mut ntfs = cap.clone();
    ntfs.access_type = Some(volume_capability::AccessType::Mount(
        volume_capability::MountVolume {
            fs_type: "ntfs".into(),
            ..Default::default()
        },
    ));
    assert_eq!(
        code(c.create_volume(create("ntfs", GIB, ntfs)).await),
        Code::InvalidArgument
    );
    // Unknown volume and node IDs.
    let unknown = "00000000-0000-0000-0000-000000000000";
    assert_eq!(
        code(
            c.controller_publish_volume(ControllerPublishVolumeRequest {
                volume_id: unknown.into(),
                node_id: f.server_id.clone(),
                volume_capability: Some(cap.clone()),
                ..Default::default()
            })
            .await
        ),
        Code::NotFound
    );
    let vol = c
        .create_volume(create("real", GIB, cap.clone()))
        .await
        .unwrap()
        .volume
        .unwrap();
    assert_eq!(
        code(
            c.controller_publish_volume(ControllerPublishVolumeRequest {
                volume_id: vol.volume_id.clone(),
                node_id: unknown.into(),
                volume_capability: Some(cap.clone()),
                ..Default::default()
            })
            .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(
            c.validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
                volume_id: unknown.into(),
                volume_capabilities: vec![cap.clone()],
                ..Default::default()
            })
            .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(
            c.controller_expand_volume(ControllerExpandVolumeRequest {
                volume_id: unknown.into(),
                capacity_range: Some(CapacityRange {
                    required_bytes: 2 * GIB,
                    limit_bytes: 0
                }),
                ..Default::default()
            })
            .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(
            c.node_get_volume_stats(NodeGetVolumeStatsRequest {
                volume_id: vol.volume_id.clone(),
                volume_path: f.dir.join("nowhere").display().to_string(),
                ..Default::default()
            })
            .await
        ),
        Code::NotFound
    );
    // Growing to a size of 0, or beyond the cloud's limit.
    for bytes in [0, 2000 * GIB] {
        let err = c
            .controller_expand_volume(ControllerExpandVolumeRequest {
                volume_id: vol.volume_id.clone(),
                capacity_range: Some(CapacityRange {
                    required_bytes: bytes,
                    limit_bytes: 0,
                }),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::OutOfRange, "{bytes}: {err:?}");
    }
    // Not served: snapshots.
    let err = c
        .call::<_, DeleteVolumeResponse>(
            "/csi.v1.Controller/DeleteSnapshot",
            DeleteVolumeRequest::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    // Still serving after all of that.
    c.probe(ProbeRequest {}).await.unwrap();
    c.delete_volume(DeleteVolumeRequest {
        volume_id: vol.volume_id,
        ..Default::default()
    })
    .await
    .unwrap();
}

#[test]
fn bad_flags_and_files_exit_2_naming_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("not-a-socket");
    std::fs::write(&file, "keep me").unwrap();
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(
        &conf,
        "[Global]\nauth-url=http://127.0.0.1:1/identity/v3\nusername=u\npassword=p\nregion=r\n",
    )
    .unwrap();
    let endpoint = format!("--endpoint=unix://{}", file.display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--cloud-provider=openstack".into(),
                format!("--cloud-config={}", conf.display()),
                endpoint,
            ],
            "not a socket",
        ),
        (
            vec!["--cloud-provider=openstack".into()],
            "needs a cloud config",
        ),
        (
            vec![
                "--cloud-provider=openstack".into(),
                "--cloud-config=/nonexistent/cloud.conf".into(),
            ],
            "/nonexistent/cloud.conf",
        ),
        (vec!["--cloud-provider=external".into()], "external"),
        (
            vec![
                "--cloud-provider=openstack".into(),
                "--endpoint=tcp://127.0.0.1:9000".into(),
            ],
            "only unix sockets",
        ),
        (
            vec![
                "--cloud-provider=openstack".into(),
                "--max-volumes-per-node=0".into(),
            ],
            "max-volumes-per-node",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["csi-driver"];
        all.extend(args.iter().map(String::as_str));
        let (code, out, err) = run(BIN, &all);
        assert_eq!(code, 2, "{all:?}: {out}{err}");
        assert!(err.contains(needle), "{all:?}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

/// The CSI spec's conformance suite, unchanged (csi-sanity, built by hack/csi-tools.sh),
/// against the driver on the local cloud. Its summary line is printed for the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_on_the_local_cloud() {
    let _group = hypercloud_testenv::group("csi_driver").await;
    let f = fixture("csi-sanity-node").await;
    csi_sanity(&f.dir, &f.driver, &[], 50).await;
    // The suite cleans up after itself: no volume is left in the cloud.
    let left = openstack_json(&f.state, &["volume", "list"]);
    assert_eq!(left.as_array().unwrap().len(), 0, "{left}");
}

/// Stages and publishes `volume` (attached to the node of `c`) under `dir`; returns the
/// (staging, target) paths.
async fn stage_and_publish(
    c: &Client,
    volume: &str,
    dir: &Path,
    ctx: &ControllerPublishVolumeResponse,
) -> (PathBuf, PathBuf) {
    let cap = mount_cap(volume_capability::Mode::SingleNodeWriter);
    let staging = dir.join("globalmount");
    let target = dir.join("pod/mount");
    c.node_stage_volume(NodeStageVolumeRequest {
        volume_id: volume.into(),
        publish_context: ctx.publish_context.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    c.node_publish_volume(NodePublishVolumeRequest {
        volume_id: volume.into(),
        publish_context: ctx.publish_context.clone(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap),
        ..Default::default()
    })
    .await
    .unwrap();
    (staging, target)
}

async fn unpublish_and_unstage(c: &Client, volume: &str, staging: &Path, target: &Path) {
    c.node_unpublish_volume(NodeUnpublishVolumeRequest {
        volume_id: volume.into(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();
    c.node_unstage_volume(NodeUnstageVolumeRequest {
        volume_id: volume.into(),
        staging_target_path: staging.display().to_string(),
    })
    .await
    .unwrap();
}

/// The node side on real block devices: node 1 formats the attached disk (a loop device of
/// the volume's sparse file), mounts it and writes; after unpublish, unstage and detach, the
/// volume grows offline and node 2 (another instance, its own driver) mounts it, finds the
/// data and grows the file system with NodeExpandVolume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_written_on_one_node_is_read_on_another() {
    let _group = hypercloud_testenv::group("csi_driver").await;
    let f = fixture("csi-data-1").await;
    let c = &f.client;
    let cap = mount_cap(volume_capability::Mode::SingleNodeWriter);
    let vol = c
        .create_volume(CreateVolumeRequest {
            name: "pvc-data".into(),
            volume_capabilities: vec![cap.clone()],
            ..Default::default()
        })
        .await
        .unwrap()
        .volume
        .unwrap();
    let id = vol.volume_id.clone();
    let publish = |node: String| ControllerPublishVolumeRequest {
        volume_id: id.clone(),
        node_id: node,
        volume_capability: Some(cap.clone()),
        ..Default::default()
    };
    let ctx = c
        .controller_publish_volume(publish(f.server_id.clone()))
        .await
        .unwrap();
    let link = f.serve.device_link(&f.server_id, &id);
    let device = std::fs::canonicalize(&link).unwrap();
    assert!(
        device.display().to_string().starts_with("/dev/loop"),
        "{device:?}"
    );

    let n1 = f.dir.join("node1");
    let (staging, target) = stage_and_publish(c, &id, &n1, &ctx).await;
    let mounts = mounts_under(&f.dir);
    assert!(
        mounts.contains(&staging) && mounts.contains(&target),
        "{mounts:?}"
    );
    let (code, fs, _) = run(
        "blkid",
        &["-o", "value", "-s", "TYPE", &device.display().to_string()],
    );
    assert_eq!((code, fs.trim()), (0, "ext4"));
    std::fs::write(target.join("greeting"), "written on node 1\n").unwrap();
    // Idempotent: staging and publishing again change nothing.
    stage_and_publish(c, &id, &n1, &ctx).await;
    let stats = c
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            ..Default::default()
        })
        .await
        .unwrap();
    let total_before = stats.usage[0].total;
    assert!(total_before > GIB / 2 && total_before <= GIB, "{stats:?}");
    unpublish_and_unstage(c, &id, &staging, &target).await;
    assert!(mounts_under(&f.dir).is_empty());
    assert!(!target.exists());
    c.controller_unpublish_volume(ControllerUnpublishVolumeRequest {
        volume_id: id.clone(),
        node_id: f.server_id.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(!link.exists());
    // Offline growth to 2 GiB.
    let grown = c
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            volume_capability: Some(cap.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(grown.capacity_bytes, 2 * GIB);

    // Node 2: another instance with its own driver.
    let server2 = create_server(&f.state, "csi-data-2");
    std::fs::create_dir_all(f.dir.join("n2")).unwrap();
    let devices2 = f.serve.devices_of(&server2);
    let cloud2 = DriverCloud {
        provider: "local",
        conf: &f.conf,
        env: &[],
        devices: Some(&devices2),
    };
    let (driver2, c2) = start_driver(&f.dir.join("n2"), &cloud2, "csi-data-2").await;
    let node2 = c2.node_get_info(NodeGetInfoRequest {}).await.unwrap();
    assert_eq!(node2.node_id, server2);
    let ctx2 = c
        .controller_publish_volume(publish(server2.clone()))
        .await
        .unwrap();
    let n2 = f.dir.join("node2");
    let (staging2, target2) = stage_and_publish(&c2, &id, &n2, &ctx2).await;
    assert_eq!(
        std::fs::read_to_string(target2.join("greeting")).unwrap(),
        "written on node 1\n"
    );
    let expanded = c2
        .node_expand_volume(NodeExpandVolumeRequest {
            volume_id: id.clone(),
            volume_path: target2.display().to_string(),
            volume_capability: Some(cap.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(expanded.capacity_bytes, 2 * GIB);
    let after = c2
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target2.display().to_string(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(after.usage[0].total > total_before + GIB / 2, "{after:?}");
    unpublish_and_unstage(&c2, &id, &staging2, &target2).await;
    c.controller_unpublish_volume(ControllerUnpublishVolumeRequest {
        volume_id: id.clone(),
        node_id: server2,
        ..Default::default()
    })
    .await
    .unwrap();
    c.delete_volume(DeleteVolumeRequest {
        volume_id: id,
        ..Default::default()
    })
    .await
    .unwrap();
    drop(driver2);
}
