//! What the `csi-driver` tests share, for every cloud: starting the driver and waiting for
//! Probe, the lifecycle every cloud's driver goes through (each step checked from the cloud's
//! side by a look-up the cloud's test gives, with the cloud's own client), and csi-sanity.
#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::time::Duration;

use hypercloud_csi::proto::*;
use hypercloud_csi::Client;
use hypercloud_testenv::process::{personality, Proc, Stdout};
use tonic::Code;

use crate::BIN;

pub const GIB: i64 = 1 << 30;

/// A mount capability (the driver's default file system) with `mode`.
pub fn mount_cap(mode: volume_capability::Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(volume_capability::AccessType::Mount(
            volume_capability::MountVolume::default(),
        )),
        access_mode: Some(volume_capability::AccessMode { mode: mode as i32 }),
    }
}

/// The cloud a driver is started for.
pub struct DriverCloud<'a> {
    /// `--cloud-provider`.
    pub provider: &'a str,
    /// `--cloud-config`.
    pub conf: &'a Path,
    /// Added to the driver's environment (credentials for a simulator).
    pub env: &'a [(&'a str, &'a str)],
    /// `--device-dir`: where the instance's disks appear (a backed local cloud's devices
    /// directory of the instance); `None`: `dir/devices`, which the cloud never fills (the node
    /// side then records what a real node would mount).
    pub devices: Option<&'a Path>,
}

/// Starts `hypercloud csi-driver` for `cloud` on `dir/csi.sock`, as node `node`, its log in
/// `dir/csi-driver.log`, and waits until it answers Probe.
pub async fn start_driver(dir: &Path, cloud: &DriverCloud<'_>, node: &str) -> (Proc, Client) {
    std::fs::create_dir_all(dir).unwrap();
    let socket = dir.join("csi.sock");
    let mut cmd = personality(BIN, "csi-driver");
    cmd.arg(format!("--cloud-provider={}", cloud.provider))
        .arg(format!("--cloud-config={}", cloud.conf.display()))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg(format!("--node-name={node}"))
        .arg(format!(
            "--device-dir={}",
            cloud
                .devices
                .map_or_else(|| dir.join("devices"), Path::to_path_buf)
                .display()
        ))
        .arg("--v=4")
        .envs(cloud.env.iter().copied());
    let mut proc = Proc::spawn_with("csi-driver", cmd, dir.join("csi-driver.log"), Stdout::Log);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        assert!(proc.running(), "csi-driver exited:\n{}", proc.log());
        if socket.exists() {
            if let Ok(c) = Client::connect_path(&socket).await {
                if c.probe(ProbeRequest {}).await.is_ok() {
                    return (proc, c);
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "csi-driver did not answer Probe in 30 s:\n{}",
            proc.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A volume as the cloud's own client shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its size in GiB.
    pub size_gib: u64,
    /// The instances it is attached to, as the driver's node IDs name them.
    pub attached_to: Vec<String>,
}

/// What the lifecycle expects of one cloud's driver.
pub struct Expect<'a> {
    /// `GetPluginInfo.name`.
    pub driver: &'a str,
    /// `NodeGetInfo.node_id`: the instance ID the cloud's attacher takes.
    pub node_id: &'a str,
    /// The topology key and the node's zone.
    pub topology: (&'a str, &'a str),
    /// `NodeGetInfo.max_volumes_per_node`.
    pub max_volumes_per_node: i64,
    /// Whether the cloud grows volumes (vSphere's in-tree volumes do not).
    pub grows: bool,
    /// Whether the cloud reports a volume's size, so that a second CreateVolume of the name
    /// with another size is AlreadyExists (vcsim does not report a VMDK's).
    pub reports_size: bool,
    /// The volume as the cloud shows it; `None` when it does not exist.
    pub look: &'a (dyn Fn(&str) -> Option<Seen> + Sync),
    /// How many requests the driver has sent the cloud so far.
    pub requests: &'a (dyn Fn() -> usize + Sync),
    /// The most requests a look-up by ID, by name and of every volume may cost (the
    /// provider's `find_volumes`: ValidateVolumeCapabilities, a repeated CreateVolume and
    /// ListVolumes ask nothing else of the cloud).
    pub find_budget: FindBudget,
}

/// Requests per `find_volumes` filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindBudget {
    pub id: usize,
    pub name: usize,
    pub all: usize,
}

/// The status code of a failed call.
pub fn code<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> Code {
    r.unwrap_err().code()
}

/// The CSI lifecycle of one volume on one cloud, each step checked from the cloud's side:
/// NodeGetInfo; CreateVolume (1.5 GiB → 2, idempotent by name, AlreadyExists with another
/// size); ControllerPublish (idempotent); ListVolumes with the published node; offline
/// expansion refused while attached; Unpublish (idempotent); Expand; Delete (idempotent).
pub async fn lifecycle(c: &Client, name: &str, want: &Expect<'_>) {
    let look = want.look;
    let info = c.get_plugin_info(GetPluginInfoRequest {}).await.unwrap();
    assert_eq!(info.name, want.driver);

    let node = c.node_get_info(NodeGetInfoRequest {}).await.unwrap();
    assert_eq!(node.node_id, want.node_id);
    assert_eq!(node.max_volumes_per_node, want.max_volumes_per_node);
    let (key, zone) = want.topology;
    assert_eq!(
        node.accessible_topology.as_ref().unwrap().segments[key],
        zone,
        "{node:?}"
    );

    let cap = mount_cap(volume_capability::Mode::SingleNodeWriter);
    let create = CreateVolumeRequest {
        name: name.into(),
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
    let id = vol.volume_id.clone();
    assert_eq!(vol.capacity_bytes, 2 * GIB);
    assert_eq!(vol.accessible_topology[0].segments[key], zone, "{vol:?}");
    assert_eq!(
        look(&id),
        Some(Seen {
            size_gib: 2,
            attached_to: vec![]
        })
    );
    let before = (want.requests)();
    let again = c
        .create_volume(create.clone())
        .await
        .unwrap()
        .volume
        .unwrap();
    let by_name = (want.requests)() - before;
    assert_eq!(again.volume_id, id);
    if want.reports_size {
        let mut bigger = create.clone();
        bigger.capacity_range = Some(CapacityRange {
            required_bytes: 5 * GIB,
            limit_bytes: 0,
        });
        assert_eq!(code(c.create_volume(bigger).await), Code::AlreadyExists);
    }

    let publish = ControllerPublishVolumeRequest {
        volume_id: id.clone(),
        node_id: node.node_id.clone(),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    };
    for _ in 0..2 {
        let published = c.controller_publish_volume(publish.clone()).await.unwrap();
        assert!(
            published.publish_context["DevicePath"].starts_with("/dev/"),
            "{published:?}"
        );
        assert_eq!(
            look(&id).unwrap().attached_to,
            vec![want.node_id.to_owned()]
        );
    }
    let before = (want.requests)();
    let listed = c.list_volumes(ListVolumesRequest::default()).await.unwrap();
    let all = (want.requests)() - before;
    let entry = listed
        .entries
        .iter()
        .find(|e| e.volume.as_ref().unwrap().volume_id == id)
        .unwrap_or_else(|| panic!("{id} not listed: {listed:?}"));
    assert_eq!(
        entry.status.as_ref().unwrap().published_node_ids,
        vec![want.node_id.to_owned()]
    );
    let before = (want.requests)();
    let valid = c
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: id.clone(),
            volume_capabilities: vec![cap.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    let by_id = (want.requests)() - before;
    assert!(valid.confirmed.is_some(), "{valid:?}");
    let spent = FindBudget {
        id: by_id,
        name: by_name,
        all,
    };
    println!("{}: find_volumes requests {spent:?}", want.driver);
    let b = want.find_budget;
    assert!(
        spent.id <= b.id && spent.name <= b.name && spent.all <= b.all,
        "find_volumes cost {spent:?}, beyond {b:?}"
    );
    let grow = ControllerExpandVolumeRequest {
        volume_id: id.clone(),
        capacity_range: Some(CapacityRange {
            required_bytes: 3 * GIB,
            limit_bytes: 0,
        }),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    };
    if want.grows {
        assert_eq!(
            code(c.controller_expand_volume(grow.clone()).await),
            Code::FailedPrecondition
        );
        assert_eq!(look(&id).unwrap().size_gib, 2);
    }
    // Deleting an attached volume is refused.
    assert_eq!(
        code(
            c.delete_volume(DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            })
            .await
        ),
        Code::FailedPrecondition
    );
    assert!(look(&id).is_some());

    for _ in 0..2 {
        c.controller_unpublish_volume(ControllerUnpublishVolumeRequest {
            volume_id: id.clone(),
            node_id: node.node_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
        assert_eq!(look(&id).unwrap().attached_to, Vec::<String>::new());
    }
    if want.grows {
        let grown = c.controller_expand_volume(grow.clone()).await.unwrap();
        assert_eq!(grown.capacity_bytes, 3 * GIB);
        assert!(grown.node_expansion_required);
        assert_eq!(look(&id).unwrap().size_gib, 3);
    } else {
        let err = c.controller_expand_volume(grow.clone()).await.unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
        assert_eq!(look(&id).unwrap().size_gib, 2);
    }
    for _ in 0..2 {
        c.delete_volume(DeleteVolumeRequest {
            volume_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
        assert_eq!(look(&id), None);
    }
}

/// The CSI spec's conformance suite, unchanged (csi-sanity, built by hack/csi-tools.sh),
/// against the driver on `dir/csi.sock`, skipping `skip` (ginkgo regular expressions: specs
/// a simulator cannot pass, each explained where it is given). Asserts that it passed with at
/// least `min_passed` specs; prints and returns its summary line.
pub async fn csi_sanity(dir: &Path, driver: &Proc, skip: &[&str], min_passed: u32) -> String {
    let sanity = hypercloud_testenv::csi_tool("csi-sanity");
    let socket = dir.join("csi.sock");
    let mut cmd = tokio::process::Command::new(&sanity);
    cmd.arg(format!("--csi.endpoint=unix://{}", socket.display()))
        .arg(format!(
            "--csi.stagingdir={}",
            dir.join("staging").display()
        ))
        .arg(format!("--csi.mountdir={}", dir.join("mount").display()))
        .arg(format!("--csi.testvolumesize={GIB}"))
        .arg("--ginkgo.no-color");
    if !skip.is_empty() {
        cmd.arg(format!("--ginkgo.skip={}", skip.join("|")));
    }
    let out = cmd.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("Ran ") || l.contains("Passed |"))
        .collect();
    let summary = summary.join(" / ");
    println!("csi-sanity: {summary}");
    assert!(
        out.status.success(),
        "csi-sanity failed ({}):\n{stdout}\n{}\n--- driver log ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        driver.log()
    );
    let passed: u32 = summary
        .split(" / ")
        .find_map(|l| l.split(" Passed").next()?.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(
        passed >= min_passed,
        "only {passed} specs passed: {summary}"
    );
    assert!(summary.contains("| 0 Failed |"), "{summary}");
    summary
}
