//! `--volume-backing=sparse-file`: each volume is a sparse file in the state dir, an attached
//! one a loop device linked as the instance's `devices/<server>/virtio-<id[:20]>` (and
//! `google-<deviceName>` for GCE attachments); data written through the device survives a
//! detach and an attach; no loop device is left behind, not even by a killed server. These
//! need root (loop devices), as hack/test.sh and CI run them; every test detaches the loop
//! devices of its state dir when it ends, also when it fails ([`LoopGuard`]).

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hypercloud_localcloud::{ServerConfig, VolumeBacking};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::TestCloud;

const GIB: u64 = 1 << 30;

/// Detaches, when dropped, every loop device whose backing file lies under `dir` (the
/// state dir), so a failing test leaks none.
struct LoopGuard(PathBuf);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        for (dev, _) in loops_under(&self.0) {
            let _ = std::process::Command::new("losetup")
                .arg("-d")
                .arg(&dev)
                .status();
        }
    }
}

/// Loop devices whose backing file is under `dir` (also a deleted one), with that file.
fn loops_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let mut found = Vec::new();
    for b in std::fs::read_dir("/sys/block").unwrap().flatten() {
        if !b.file_name().to_string_lossy().starts_with("loop") {
            continue;
        }
        if let Ok(f) = std::fs::read_to_string(b.path().join("loop/backing_file")) {
            if f.starts_with(&*dir.to_string_lossy()) {
                found.push((Path::new("/dev").join(b.file_name()), f.trim_end().into()));
            }
        }
    }
    found
}

/// `losetup -j FILE`: the loop devices backed by `file`.
fn losetup_j(file: &Path) -> String {
    let out = std::process::Command::new("losetup")
        .arg("-j")
        .arg(file)
        .output()
        .expect("run losetup -j");
    assert!(out.status.success(), "losetup -j {}", file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Until no loop device is backed by a file under `dir` (the kernel frees autoclear devices
/// at last close, a moment after it).
async fn assert_no_loops(dir: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !loops_under(dir).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(loops_under(dir), vec![], "{what}: loop devices left");
}

fn need_loop_devices() {
    assert!(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/loop-control")
            .is_ok(),
        "these tests need loop devices: run them as root (hack/test.sh and CI do)"
    );
}

async fn backed_cloud() -> (TestCloud, LoopGuard) {
    need_loop_devices();
    let cloud = TestCloud::start_with(|mut c: ServerConfig| {
        c.volume_backing = VolumeBacking::SparseFile;
        c
    })
    .await;
    let guard = LoopGuard(cloud.dir.path().to_owned());
    (cloud, guard)
}

fn file_of(cloud: &TestCloud, volume: &str) -> PathBuf {
    cloud.dir.path().join(format!("volumes/{volume}.img"))
}

fn link_of(cloud: &TestCloud, server: &str, name: &str) -> PathBuf {
    cloud.dir.path().join(format!("devices/{server}/{name}"))
}

fn virtio(volume: &str) -> String {
    format!("virtio-{}", &volume[..20])
}

/// The loop device `link` points at, checked to be backed by `file`, with autoclear set.
fn device_of(link: &Path, file: &Path) -> PathBuf {
    let dev = std::fs::read_link(link).unwrap_or_else(|e| panic!("{}: {e}", link.display()));
    let name = dev.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("loop"),
        "{} -> {}",
        link.display(),
        dev.display()
    );
    let sys = Path::new("/sys/block").join(&name).join("loop");
    let backing = std::fs::read_to_string(sys.join("backing_file")).unwrap();
    assert_eq!(
        Path::new(backing.trim_end()),
        file.canonicalize().unwrap(),
        "{} backs {name}",
        backing.trim_end()
    );
    assert_eq!(
        std::fs::read_to_string(sys.join("autoclear"))
            .unwrap()
            .trim(),
        "1",
        "{name} is freed at its last close"
    );
    dev
}

fn device_size(dev: &Path) -> u64 {
    let name = dev.file_name().unwrap().to_string_lossy().into_owned();
    let sectors: u64 = std::fs::read_to_string(format!("/sys/block/{name}/size"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    sectors * 512
}

const PATTERN_AT: u64 = 3 * (1 << 20);

fn write_pattern(dev: &Path, pattern: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(dev).unwrap();
    f.seek(SeekFrom::Start(PATTERN_AT)).unwrap();
    f.write_all(pattern).unwrap();
    f.sync_all().unwrap();
}

fn read_pattern(dev: &Path, len: usize) -> Vec<u8> {
    let mut f = std::fs::File::open(dev).unwrap();
    f.seek(SeekFrom::Start(PATTERN_AT)).unwrap();
    let mut buf = vec![0; len];
    f.read_exact(&mut buf).unwrap();
    buf
}

async fn detach(cloud: &TestCloud, server: &str, volume: &str) {
    let r = cloud
        .delete(&format!(
            "/compute/v2.1/servers/{server}/os-volume_attachments/{volume}"
        ))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
}

#[tokio::test]
async fn a_backed_volume_is_a_sparse_file_and_its_data_outlives_a_detach() {
    let (cloud, _guard) = backed_cloud().await;
    let vols = cloud.volumes();
    let id = cloud.create_volume(json!({"size": 1})).await;
    let file = file_of(&cloud, &id);
    let m = std::fs::metadata(&file).expect("the volume's file");
    assert_eq!(m.len(), GIB);
    assert!(m.blocks() <= 8, "sparse: {} blocks allocated", m.blocks());

    let r = cloud
        .post(
            &format!("{vols}/{id}/action"),
            json!({"os-extend": {"new_size": 2}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 * GIB, "grown");

    let server = cloud.create_server("s", json!({})).await;
    let r = cloud.attach_volume(&server, &id).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["volumeAttachment"]["device"], "/dev/vdb",
        "the API's device is unchanged"
    );
    let link = link_of(&cloud, &server, &virtio(&id));
    let dev = device_of(&link, &file);
    assert_eq!(device_size(&dev), 2 * GIB);
    assert!(
        losetup_j(&file).contains(&*dev.to_string_lossy()),
        "{}",
        losetup_j(&file)
    );

    // Extending an attached volume (Cinder 3.42) grows the device in place.
    let r = cloud
        .request(Method::POST, &format!("{vols}/{id}/action"))
        .header("openstack-api-version", "volume 3.42")
        .json(&json!({"os-extend": {"new_size": 3}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 3 * GIB);
    assert_eq!(device_size(&dev), 3 * GIB, "the loop device grew");

    let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    write_pattern(&dev, &pattern);
    detach(&cloud, &server, &id).await;
    assert!(!link.exists(), "the link goes with the attachment");
    assert!(
        !cloud.dir.path().join("devices").join(&server).exists(),
        "and the instance's empty directory"
    );
    assert_no_loops(cloud.dir.path(), "after detach").await;
    assert_eq!(losetup_j(&file), "");

    let r = cloud.attach_volume(&server, &id).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let dev = device_of(&link, &file);
    assert_eq!(read_pattern(&dev, pattern.len()), pattern, "data read back");
    detach(&cloud, &server, &id).await;

    let r = cloud.delete(&format!("{vols}/{id}")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert!(!file.exists(), "the file goes with the volume");
    assert_no_loops(cloud.dir.path(), "after delete").await;
    cloud.shutdown().await;
}

/// A device a node still holds (mounted, say) when it is detached is released lazily: the
/// link goes at once, the device at its last close.
#[tokio::test]
async fn a_device_still_in_use_at_detach_is_freed_at_its_last_close() {
    let (cloud, _guard) = backed_cloud().await;
    let id = cloud.create_volume(json!({"size": 1})).await;
    let server = cloud.create_server("s", json!({})).await;
    cloud.attach_volume(&server, &id).await;
    let link = link_of(&cloud, &server, &virtio(&id));
    let dev = device_of(&link, &file_of(&cloud, &id));
    let held = std::fs::File::open(&dev).unwrap();
    detach(&cloud, &server, &id).await;
    assert!(!link.exists());
    assert_eq!(
        loops_under(cloud.dir.path()).len(),
        1,
        "still bound while held"
    );
    drop(held);
    assert_no_loops(cloud.dir.path(), "after the last close").await;
    cloud.shutdown().await;
}

/// Deleting a server detaches its volumes, and with them the devices; a restart makes the
/// links of the attachments there are again and removes stale ones; a clean shutdown leaves
/// no loop device.
#[tokio::test]
async fn links_are_made_again_at_start_and_stale_ones_removed() {
    let (mut cloud, _guard) = backed_cloud().await;
    let id = cloud.create_volume(json!({"size": 1})).await;
    let server = cloud.create_server("s", json!({})).await;
    cloud.attach_volume(&server, &id).await;
    let link = link_of(&cloud, &server, &virtio(&id));
    let file = file_of(&cloud, &id);
    device_of(&link, &file);
    let stale = link_of(&cloud, "gone-server", "virtio-0123456789abcdefghij");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/dev/loop0", &stale).unwrap();
    let orphan = file_of(&cloud, "deleted-volume");
    std::fs::write(&orphan, b"").unwrap();

    cloud.handle.take().unwrap().shutdown().await.unwrap();
    assert_no_loops(cloud.dir.path(), "after shutdown").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let handle = loop {
        // Kept-alive connections of the old server can hold its lock for a moment.
        match hypercloud_localcloud::Server::bind(cloud.config.clone()).await {
            Err(hypercloud_localcloud::Error::StateDirInUse { .. })
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => break other.unwrap(),
        }
    };
    cloud.url = handle.api_url().to_owned();
    cloud.handle = Some(handle);
    let dev = device_of(&link, &file);
    assert!(dev.exists());
    assert!(!stale.exists(), "stale link removed");
    assert!(!orphan.exists(), "a deleted volume's file removed");
    let info: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cloud.dir.path().join("server.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        info["devicesDir"],
        cloud.dir.path().join("devices").display().to_string()
    );
    assert_eq!(info["volume_backing"], "sparse-file");

    let r = cloud
        .delete(&format!("/compute/v2.1/servers/{server}"))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert!(!link.exists());
    assert_no_loops(cloud.dir.path(), "after the server's delete").await;
    cloud.shutdown().await;
}

/// Compute Engine: `disks.insert` makes the file, `attachDisk` the `google-<deviceName>` link
/// beside the virtio one, `detachDisk` and `disks.delete` undo them.
#[tokio::test]
async fn gce_disks_are_backed_too() {
    let (cloud, _guard) = backed_cloud().await;
    let gce = "/compute/v1/projects/demo";
    let zones = cloud.get(&format!("{gce}/zones")).await;
    let zone = zones.body["items"][0]["name"].as_str().unwrap().to_owned();
    let z = format!("{gce}/zones/{zone}");
    let r = cloud
        .post(
            &format!("{z}/instances"),
            json!({"name": "vm", "machineType": format!("zones/{zone}/machineTypes/m1.small")}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = cloud
        .post(
            &format!("{z}/disks"),
            json!({"name": "data", "sizeGb": "2"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let volume = cloud
        .get(&format!("{}/detail?name=data", cloud.volumes()))
        .await;
    let id = volume.body["volumes"][0]["id"].as_str().unwrap().to_owned();
    let file = file_of(&cloud, &id);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 * GIB);
    let servers = cloud.get("/compute/v2.1/servers?name=vm").await;
    let server = servers.body["servers"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let disk = cloud.get(&format!("{z}/disks/data")).await;
    let source = disk.body["selfLink"].as_str().unwrap().to_owned();
    let r = cloud
        .post(
            &format!("{z}/instances/vm/attachDisk"),
            json!({"source": source, "deviceName": "pd-data"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let google = link_of(&cloud, &server, "google-pd-data");
    let dev = device_of(&google, &file);
    assert_eq!(
        device_of(&link_of(&cloud, &server, &virtio(&id)), &file),
        dev
    );

    let r = cloud
        .post(
            &format!("{z}/instances/vm/detachDisk?deviceName=pd-data"),
            json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(!google.exists());
    assert_no_loops(cloud.dir.path(), "after detachDisk").await;
    let r = cloud.delete(&format!("{z}/disks/data")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(!file.exists());
    cloud.shutdown().await;
}

/// Where [`child_server`] serves, when the test binary runs it as a child process.
const CHILD_STATE: &str = "HYPERCLOUD_TEST_BACKING_CHILD_STATE";

/// Not a test of its own: the server [`a_killed_server_leaves_no_loop_device`] kills, run
/// as a child process of the test binary (it returns at once unless that test started it).
#[tokio::test]
#[ignore = "run by a_killed_server_leaves_no_loop_device as its child"]
async fn child_server() {
    let Some(dir) = std::env::var_os(CHILD_STATE) else {
        return;
    };
    let mut config = ServerConfig::ephemeral(PathBuf::from(dir));
    config.volume_backing = VolumeBacking::SparseFile;
    let _handle = hypercloud_localcloud::Server::bind(config).await.unwrap();
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

#[tokio::test]
async fn a_killed_server_leaves_no_loop_device() {
    need_loop_devices();
    let dir = tempfile::tempdir().unwrap();
    let _guard = LoopGuard(dir.path().to_owned());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "backing::child_server",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_STATE, dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Kill(&mut child);
    let info = dir.path().join("server.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = loop {
        let text = std::fs::read_to_string(&info).unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            if v["pid"] == child.0.id() {
                break v["api_url"].as_str().unwrap().to_owned();
            }
        }
        assert!(Instant::now() < deadline, "the child server did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut cloud = TestCloud {
        handle: None,
        dir,
        http: reqwest::Client::new(),
        url,
        token: String::new(),
        project: String::new(),
        config: ServerConfig::ephemeral("/nonexistent"),
    };
    cloud.login().await;
    let id = cloud.create_volume(json!({"size": 1})).await;
    let server = cloud.create_server("s", json!({})).await;
    cloud.attach_volume(&server, &id).await;
    let link = link_of(&cloud, &server, &virtio(&id));
    device_of(&link, &file_of(&cloud, &id));
    // A second volume that a node still has open (mounted, say) when the server dies.
    let busy = cloud.create_volume(json!({"size": 1})).await;
    cloud.attach_volume(&server, &busy).await;
    let busy_link = link_of(&cloud, &server, &virtio(&busy));
    let busy_dev = device_of(&busy_link, &file_of(&cloud, &busy));
    let held = std::fs::File::open(&busy_dev).unwrap();
    assert_eq!(loops_under(cloud.dir.path()).len(), 2);

    drop(child); // SIGKILL
    let deadline = Instant::now() + Duration::from_secs(5);
    while loops_under(cloud.dir.path()).len() > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left: Vec<PathBuf> = loops_under(cloud.dir.path())
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    assert_eq!(left, vec![busy_dev.clone()], "only the held device is left");

    // The next server on the state sets the attachments' devices up again, taking over the
    // one still in use rather than making a second device of the same file.
    let mut config = ServerConfig::ephemeral(cloud.dir.path());
    config.volume_backing = VolumeBacking::SparseFile;
    let handle = hypercloud_localcloud::Server::bind(config).await.unwrap();
    device_of(&link, &file_of(&cloud, &id));
    assert_eq!(device_of(&busy_link, &file_of(&cloud, &busy)), busy_dev);
    assert_eq!(loops_under(cloud.dir.path()).len(), 2);
    drop(held);
    handle.shutdown().await.unwrap();
    assert_no_loops(cloud.dir.path(), "after shutdown").await;
}
