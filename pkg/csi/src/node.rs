//! The node side on this machine: find the attached disk among the instance's devices,
//! make a file system on it when it has none, mount it at the staging path and bind-mount it
//! into each target path, as a real node plugin does (with `blkid`, `mkfs.*`, `mount`,
//! `umount`, `resize2fs`/`xfs_growfs` and `blockdev`, which need root).
//!
//! When the cloud gives this machine no device for a volume (moto and vcsim have no disks to
//! give), nothing is mounted: the directories are made, and a file named [`RECORD`] in each
//! says what a real node would have run, so the flow goes on and what was skipped is plain.

use std::path::{Path, PathBuf};

use serde_json::json;
use tonic::Status;

use crate::proto::{volume_usage, VolumeUsage};
use hypercloud_cloudprovider::csi_drivers::{by_id_name, DriverInfo};

/// The file written where a real node would have mounted something.
pub const RECORD: &str = "HYPERCLOUD-NOT-MOUNTED.json";

/// File systems the node can make and grow.
const FS_TYPES: &[&str] = &["ext4", "ext3", "xfs"];

/// The file system used when the capability names none.
const DEFAULT_FS: &str = "ext4";

/// Whether the node can make `fs` (empty: the default).
pub fn check_fs_type(fs: &str) -> Result<(), String> {
    if fs.is_empty() || FS_TYPES.contains(&fs) {
        Ok(())
    } else {
        Err(format!(
            "fs_type {fs:?} is not supported (supported: {})",
            FS_TYPES.join(", ")
        ))
    }
}

/// Where an attached volume is on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Device {
    /// A block device (the by-id link resolved).
    Present(PathBuf),
    /// No device: what was looked for, and the path the cloud reported (`/dev/vdb`).
    Absent {
        looked_for: Option<PathBuf>,
        cloud_path: Option<String>,
    },
}

/// The device of `volume_id` under `device_dir` (the instance's `/dev/disk/by-id`).
pub fn find_device(
    info: &DriverInfo,
    device_dir: &Path,
    volume_id: &str,
    cloud_path: Option<&str>,
) -> Device {
    let looked_for = by_id_name(info, volume_id).map(|n| device_dir.join(n));
    if let Some(link) = &looked_for {
        if let Ok(dev) = std::fs::canonicalize(link) {
            return Device::Present(dev);
        }
    }
    Device::Absent {
        looked_for,
        cloud_path: cloud_path.map(str::to_owned),
    }
}

fn internal(what: &str, e: impl std::fmt::Display) -> Status {
    Status::internal(format!("{what}: {e}"))
}

/// Runs a command; its stderr names the failure.
async fn run(program: &str, args: &[&str]) -> Result<String, Status> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| internal(&format!("running {program}"), e))?;
    if !out.status.success() {
        return Err(Status::internal(format!(
            "{program} {}: {} ({})",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim(),
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Decodes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let oct = &bytes[i + 1..i + 4];
            if let Some(b) = std::str::from_utf8(oct)
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
            {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `path` is a mount point now (`/proc/self/mountinfo`).
pub fn is_mounted(path: &Path) -> Result<bool, Status> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| internal("reading /proc/self/mountinfo", e))?;
    Ok(info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| Path::new(&unescape(m)) == path))
}

fn mkdir(path: &Path) -> Result<(), Status> {
    std::fs::create_dir_all(path).map_err(|e| internal(&format!("creating {}", path.display()), e))
}

fn write_record(dir: &Path, action: &str, real_node_would: String) -> Result<(), Status> {
    let record = json!({
        "mounted": false,
        "action": action,
        "why": "the cloud gave this machine no block device for the volume",
        "aRealNodeWould": real_node_would,
    });
    tracing::info!(path = %dir.display(), action, real_node_would, "no device: recording what a real node would do");
    std::fs::write(dir.join(RECORD), format!("{record:#}\n"))
        .map_err(|e| internal(&format!("writing the record in {}", dir.display()), e))
}

/// The file system on `device`, if any (`blkid` exits 2 for none).
async fn fs_on(device: &Path) -> Result<Option<String>, Status> {
    let dev = device.to_string_lossy();
    let out = tokio::process::Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE", &dev])
        .output()
        .await
        .map_err(|e| internal("running blkid", e))?;
    match out.status.code() {
        Some(0) => {
            Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
                .filter(|s| !s.is_empty()))
        }
        Some(2) => Ok(None),
        _ => Err(Status::internal(format!(
            "blkid {dev}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// NodeStageVolume: formats the device when blank and mounts it at `staging` (a block
/// volume needs no staging). Idempotent: a mounted staging path is left alone.
pub async fn stage(
    device: &Device,
    staging: &Path,
    fs: Option<&str>,
    flags: &[String],
) -> Result<(), Status> {
    let Some(fs) = fs else {
        return Ok(());
    };
    let fs = if fs.is_empty() { DEFAULT_FS } else { fs };
    check_fs_type(fs).map_err(Status::invalid_argument)?;
    mkdir(staging)?;
    if is_mounted(staging)? {
        return Ok(());
    }
    let dev = match device {
        Device::Present(d) => d,
        Device::Absent {
            looked_for,
            cloud_path,
        } => {
            let dev = looked_for
                .as_ref()
                .map(|p| p.display().to_string())
                .or_else(|| cloud_path.clone())
                .unwrap_or_else(|| "the attached disk".into());
            return write_record(
                staging,
                "NodeStageVolume",
                format!(
                    "format {dev} as {fs} if it has no file system, then mount it at {}",
                    staging.display()
                ),
            );
        }
    };
    match fs_on(dev).await? {
        None => {
            let mkfs = format!("mkfs.{fs}");
            let d = dev.to_string_lossy();
            let args: Vec<&str> = match fs {
                "xfs" => vec!["-q", &d],
                _ => vec!["-q", "-F", &d],
            };
            run(&mkfs, &args).await?;
        }
        Some(existing) if existing != fs => {
            return Err(Status::failed_precondition(format!(
                "{} already has a {existing} file system, not the {fs} asked for",
                dev.display()
            )))
        }
        Some(_) => grow_offline(dev, fs).await?,
    }
    let mut args = vec!["-t".to_owned(), fs.to_owned()];
    if !flags.is_empty() {
        args.push("-o".into());
        args.push(flags.join(","));
    }
    args.push(dev.to_string_lossy().into_owned());
    args.push(staging.to_string_lossy().into_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run("mount", &args).await.map(drop)
}

/// The size of the ext file system on `device` in bytes (`dumpe2fs -h`).
async fn ext_fs_bytes(device: &Path) -> Result<u64, Status> {
    let out = run("dumpe2fs", &["-h", &device.to_string_lossy()]).await?;
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    match (field("Block count:"), field("Block size:")) {
        (Some(count), Some(size)) => Ok(count.saturating_mul(size)),
        _ => Err(Status::internal(format!(
            "dumpe2fs -h {}: no block count or size",
            device.display()
        ))),
    }
}

/// The size of the block device in bytes.
async fn device_bytes(device: &Path) -> Result<u64, Status> {
    let size = run("blockdev", &["--getsize64", &device.to_string_lossy()]).await?;
    size.parse::<u64>().map_err(|e| {
        internal(
            &format!("blockdev --getsize64 {} gave {size:?}", device.display()),
            e,
        )
    })
}

/// Grows an unmounted ext file system to a disk that grew while detached (offline
/// expansion: the driver advertises OFFLINE, so the next stage after a resize finds the disk
/// larger than its file system); checked with `e2fsck -f` first, as `resize2fs` requires.
/// XFS grows only mounted: [`expand`] does it.
async fn grow_offline(device: &Path, fs: &str) -> Result<(), Status> {
    if !fs.starts_with("ext") {
        return Ok(());
    }
    let (fs_bytes, dev_bytes) = (ext_fs_bytes(device).await?, device_bytes(device).await?);
    if dev_bytes <= fs_bytes.saturating_add(1 << 20) {
        return Ok(());
    }
    let dev = device.to_string_lossy();
    tracing::info!(device = %dev, fs_bytes, dev_bytes, "growing the file system to the disk");
    let fsck = tokio::process::Command::new("e2fsck")
        .args(["-f", "-p", &dev])
        .output()
        .await
        .map_err(|e| internal("running e2fsck", e))?;
    // 0: clean, 1: errors corrected; anything else needs a human.
    if !matches!(fsck.status.code(), Some(0 | 1)) {
        return Err(Status::internal(format!(
            "e2fsck -f -p {dev}: {} ({})",
            String::from_utf8_lossy(&fsck.stderr).trim(),
            fsck.status
        )));
    }
    run("resize2fs", &[&dev]).await.map(drop)
}

/// Unmounts `path` when mounted and removes a record left there; a missing path is fine.
pub async fn unmount(path: &Path) -> Result<(), Status> {
    if !path.exists() {
        return Ok(());
    }
    if is_mounted(path)? {
        run("umount", &[&path.to_string_lossy()]).await?;
    }
    let record = path.join(RECORD);
    if record.exists() {
        std::fs::remove_file(&record).map_err(|e| internal("removing the record", e))?;
    }
    Ok(())
}

async fn remount_ro(target: &Path) -> Result<(), Status> {
    run(
        "mount",
        &["-o", "remount,bind,ro", &target.to_string_lossy()],
    )
    .await
    .map(drop)
}

/// NodePublishVolume of a file-system volume: bind-mounts `staging` at `target`.
pub async fn publish_mount(staging: &Path, target: &Path, readonly: bool) -> Result<(), Status> {
    mkdir(target)?;
    if is_mounted(target)? {
        return Ok(());
    }
    if !is_mounted(staging)? {
        if staging.join(RECORD).exists() {
            return write_record(
                target,
                "NodePublishVolume",
                format!(
                    "bind-mount {} at {}{}",
                    staging.display(),
                    target.display(),
                    if readonly { " read-only" } else { "" }
                ),
            );
        }
        return Err(Status::failed_precondition(format!(
            "staging_target_path {} is not staged (NodeStageVolume first)",
            staging.display()
        )));
    }
    run(
        "mount",
        &[
            "--bind",
            &staging.to_string_lossy(),
            &target.to_string_lossy(),
        ],
    )
    .await?;
    if readonly {
        remount_ro(target).await?;
    }
    Ok(())
}

/// NodePublishVolume of a block volume: bind-mounts the device onto a file at `target`.
pub async fn publish_block(device: &Device, target: &Path, readonly: bool) -> Result<(), Status> {
    if let Some(parent) = target.parent() {
        mkdir(parent)?;
    }
    let dev = match device {
        Device::Present(d) => d,
        Device::Absent { .. } => {
            mkdir(target)?;
            return write_record(
                target,
                "NodePublishVolume",
                format!(
                    "bind-mount the attached disk onto the file {}",
                    target.display()
                ),
            );
        }
    };
    if target.exists() && is_mounted(target)? {
        return Ok(());
    }
    if !target.exists() {
        std::fs::File::create(target)
            .map_err(|e| internal(&format!("creating {}", target.display()), e))?;
    }
    run(
        "mount",
        &["--bind", &dev.to_string_lossy(), &target.to_string_lossy()],
    )
    .await?;
    if readonly {
        remount_ro(target).await?;
    }
    Ok(())
}

/// NodeUnpublishVolume: unmounts `target` and removes it.
pub async fn unpublish(target: &Path) -> Result<(), Status> {
    if !target.exists() {
        return Ok(());
    }
    unmount(target).await?;
    let removed = if target.is_dir() {
        std::fs::remove_dir(target)
    } else {
        std::fs::remove_file(target)
    };
    removed.map_err(|e| internal(&format!("removing {}", target.display()), e))
}

/// NodeGetVolumeStats: bytes and inodes of the file system at `path`.
pub fn stats(path: &Path) -> Result<Vec<VolumeUsage>, Status> {
    if !path.exists() {
        return Err(Status::not_found(format!(
            "volume_path {} does not exist",
            path.display()
        )));
    }
    let st = rustix::fs::statvfs(path)
        .map_err(|e| internal(&format!("statvfs {}", path.display()), e))?;
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let total = n(st.f_blocks).saturating_mul(n(st.f_frsize));
    let available = n(st.f_bavail).saturating_mul(n(st.f_frsize));
    let free = n(st.f_bfree).saturating_mul(n(st.f_frsize));
    Ok(vec![
        VolumeUsage {
            available,
            total,
            used: total.saturating_sub(free),
            unit: volume_usage::Unit::Bytes as i32,
        },
        VolumeUsage {
            available: n(st.f_favail),
            total: n(st.f_files),
            used: n(st.f_files).saturating_sub(n(st.f_ffree)),
            unit: volume_usage::Unit::Inodes as i32,
        },
    ])
}

/// NodeExpandVolume: grows the file system mounted at `path` to the device's size and
/// returns the device's size in bytes (0 when there is no device).
pub async fn expand(device: &Device, path: &Path, block: bool) -> Result<i64, Status> {
    if !path.exists() {
        return Err(Status::not_found(format!(
            "volume_path {} does not exist",
            path.display()
        )));
    }
    let dev = match device {
        Device::Present(d) => d,
        Device::Absent { .. } => {
            tracing::info!(path = %path.display(), "no device: a real node would now grow the file system to the disk's new size");
            return Ok(0);
        }
    };
    if !block {
        match fs_on(dev).await?.as_deref() {
            Some("xfs") => {
                run("xfs_growfs", &[&path.to_string_lossy()]).await?;
            }
            // Staging grew it already when the disk grew while detached; online growth needs
            // the kernel's resize ioctl (CAP_SYS_RESOURCE).
            Some(fs) if fs.starts_with("ext") => {
                if device_bytes(dev).await? > ext_fs_bytes(dev).await?.saturating_add(1 << 20) {
                    run("resize2fs", &[&dev.to_string_lossy()]).await?;
                }
            }
            other => {
                return Err(Status::failed_precondition(format!(
                    "{} has no file system this driver grows ({other:?})",
                    dev.display()
                )))
            }
        }
    }
    let size = run("blockdev", &["--getsize64", &dev.to_string_lossy()]).await?;
    size.parse::<i64>().map_err(|e| {
        internal(
            &format!("blockdev --getsize64 {} gave {size:?}", dev.display()),
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_decode() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/tail\04"), r"/tail\04");
    }

    #[test]
    fn the_root_is_mounted_and_a_fresh_dir_is_not() {
        assert!(is_mounted(Path::new("/")).expect("mountinfo"));
        let d = tempfile::tempdir().expect("tempdir");
        assert!(!is_mounted(d.path()).expect("mountinfo"));
    }

    #[test]
    fn fs_types_are_checked_by_name() {
        assert!(check_fs_type("").is_ok());
        assert!(check_fs_type("xfs").is_ok());
        assert!(check_fs_type("vfat").expect_err("vfat").contains("vfat"));
    }

    #[test]
    fn a_missing_link_is_absent_with_what_was_looked_for() {
        let cinder = hypercloud_cloudprovider::csi_drivers::for_plugin("kubernetes.io/cinder")
            .expect("cinder");
        let d = tempfile::tempdir().expect("tempdir");
        match find_device(cinder, d.path(), "abc", Some("/dev/vdb")) {
            Device::Absent {
                looked_for,
                cloud_path,
            } => {
                assert_eq!(looked_for, Some(d.path().join("virtio-abc")));
                assert_eq!(cloud_path.as_deref(), Some("/dev/vdb"));
            }
            other => panic!("{other:?}"),
        }
        std::os::unix::fs::symlink("/dev/null", d.path().join("virtio-abc")).expect("link");
        assert_eq!(
            find_device(cinder, d.path(), "abc", None),
            Device::Present(PathBuf::from("/dev/null"))
        );
    }
}
