//! Volumes backed by real block devices (`--volume-backing=sparse-file`): each volume record
//! has a sparse file `<state-dir>/volumes/<id>.img` of its size, and while it is attached the
//! file is a loop device that the instance "sees" through the links a guest's udev would make,
//! `<state-dir>/devices/<server-id>/virtio-<id[:20]>` (Nova's virtio-blk serial is the volume
//! ID cut to 20 bytes) and, for Compute Engine attachments, `google-<deviceName>`. A node-side
//! plugin stages and mounts those devices, so data written through them outlives a detach,
//! a migration and a restart of the cloud. Upstream equivalent: Cinder's LVM driver with its
//! iSCSI target and Nova's libvirt volume driver, on one machine.
//!
//! One decision in one place: [`Backing::follow`] makes the files, loop devices and links
//! match the committed volume records after every write (the API handlers of both dialects
//! only write records), and [`Backing::sync_all`] does the same for every record at start.
//!
//! No loop device outlives the server: the server keeps `/dev/loopN` open while it is attached
//! and sets autoclear on it (`losetup -d` on an open device), so the kernel frees it when the
//! last user closes it, also when the server is killed; a device a node still has mounted is
//! freed at its unmount.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::volume::{Volume, VOLUMES};
use crate::store::{Change, Read, Store};

const GIB: u64 = 1 << 30;

/// How volumes are backed (`--volume-backing`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum VolumeBacking {
    /// Volumes are records only (hold no data).
    #[default]
    None,
    /// A sparse file per volume, a loop device per attached volume.
    SparseFile,
}

impl VolumeBacking {
    /// The flag's spelling (`none`, `sparse-file`).
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeBacking::None => "none",
            VolumeBacking::SparseFile => "sparse-file",
        }
    }
}

impl std::fmt::Display for VolumeBacking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An attached volume's loop device, held open so that it is freed when the server goes.
#[derive(Debug)]
struct Loop {
    dev: PathBuf,
    held: File,
    links: BTreeSet<PathBuf>,
}

/// The backing of one server's volumes. See the module docs.
#[derive(Debug)]
pub(crate) struct Backing {
    mode: VolumeBacking,
    volumes_dir: PathBuf,
    devices_dir: PathBuf,
    /// Why loop devices cannot be made here (not root, no `/dev/loop-control`, no `losetup`);
    /// `None` when they can.
    no_loops: Option<String>,
    /// Attached volumes' loop devices by volume ID; the lock also orders the syncs.
    loops: Mutex<BTreeMap<String, Loop>>,
}

impl Backing {
    /// The backing of the server on `state_dir`; with `sparse-file`, checks once whether loop
    /// devices can be made and logs a warning naming why not.
    pub fn new(mode: VolumeBacking, state_dir: &Path) -> Self {
        let no_loops = match mode {
            VolumeBacking::None => None,
            VolumeBacking::SparseFile => loop_devices_unavailable(),
        };
        if let Some(reason) = &no_loops {
            tracing::warn!(
                %reason,
                "volume backing: no loop devices; volumes get their sparse files, attachments get no device link"
            );
        }
        Backing {
            mode,
            volumes_dir: state_dir.join("volumes"),
            devices_dir: state_dir.join("devices"),
            no_loops,
            loops: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn mode(&self) -> VolumeBacking {
        self.mode
    }

    /// `<state-dir>/devices` when volumes are backed: `<dir>/<server-id>/` holds an instance's
    /// by-id links.
    pub fn devices_dir(&self) -> Option<&Path> {
        (self.mode == VolumeBacking::SparseFile).then_some(self.devices_dir.as_path())
    }

    /// Why attachments get no loop device, if they do not.
    pub fn loop_devices_unavailable(&self) -> Option<&str> {
        self.no_loops.as_deref()
    }

    /// The backing file of a volume.
    pub fn file(&self, volume_id: &str) -> PathBuf {
        self.volumes_dir.join(format!("{volume_id}.img"))
    }

    /// Brings the volumes among `changes` (committed by one write) in line with their records.
    pub fn follow(&self, store: &Store, changes: &[Change]) {
        if self.mode == VolumeBacking::None {
            return;
        }
        let ids: BTreeSet<&str> = changes
            .iter()
            .filter(|c| c.kind == VOLUMES)
            .map(|c| c.id.as_str())
            .collect();
        if ids.is_empty() {
            return;
        }
        let mut loops = self.lock();
        for id in ids {
            // Read under the lock: two writes of one volume that race here both apply the
            // newest record.
            let volume = store.read(|r| r.get::<Volume>(VOLUMES, id));
            self.sync(&mut loops, id, volume.as_ref());
        }
    }

    /// At start: every volume gets its file, every attachment its loop device and links;
    /// links and files of what no longer exists are removed.
    pub fn sync_all(&self, store: &Store) {
        if self.mode == VolumeBacking::None {
            return;
        }
        let volumes: Vec<Volume> = store.read(|r| r.list::<Volume>(VOLUMES));
        let mut loops = self.lock();
        // Links are derived state: made again below for the attachments there are.
        if let Ok(servers) = std::fs::read_dir(&self.devices_dir) {
            for dir in servers.flatten() {
                if let Err(error) = std::fs::remove_dir_all(dir.path()) {
                    tracing::warn!(dir = %dir.path().display(), %error, "volume backing: cannot remove stale device links");
                }
            }
        }
        let known: BTreeSet<PathBuf> = volumes.iter().map(|v| self.file(&v.meta.id)).collect();
        if let Ok(files) = std::fs::read_dir(&self.volumes_dir) {
            for f in files.flatten() {
                let path = f.path();
                if path.extension().is_some_and(|e| e == "img") && !known.contains(&path) {
                    tracing::info!(file = %path.display(), "volume backing: removing the file of a deleted volume");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        for v in &volumes {
            self.sync(&mut loops, &v.meta.id, Some(v));
        }
    }

    /// Lets go of every loop device (clean shutdown): each is freed at once unless a node
    /// still has it mounted, then at its unmount.
    pub fn release_all(&self) {
        let mut loops = self.lock();
        let ids: Vec<String> = loops.keys().cloned().collect();
        for id in ids {
            if let Some(l) = loops.remove(&id) {
                self.release(&id, l, false);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Loop>> {
        self.loops
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes one volume's file, loop device and links match its record (`None`: deleted).
    /// Failures are logged: the record is committed, and the next start tries again.
    fn sync(&self, loops: &mut BTreeMap<String, Loop>, id: &str, volume: Option<&Volume>) {
        let file = self.file(id);
        let Some(v) = volume else {
            if let Some(l) = loops.remove(id) {
                self.release(id, l, true);
            }
            match std::fs::remove_file(&file) {
                Ok(()) => tracing::info!(volume = %id, "volume backing: removed the file"),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(error) => {
                    tracing::error!(volume = %id, file = %file.display(), %error, "volume backing: cannot remove the file")
                }
            }
            return;
        };
        let grown = match ensure_file(&file, v.size.saturating_mul(GIB)) {
            Ok(grown) => grown,
            Err(error) => {
                tracing::error!(volume = %id, file = %file.display(), %error, "volume backing: cannot create or grow the file");
                return;
            }
        };
        let wanted: BTreeSet<PathBuf> = v
            .attachments
            .iter()
            .filter(|a| !a.detaching)
            .flat_map(|a| {
                let dir = self.devices_dir.join(&a.server_id);
                let serial: String = id.chars().take(20).collect();
                let mut links = vec![dir.join(format!("virtio-{serial}"))];
                if let Some(name) = &a.device_name {
                    links.push(dir.join(format!("google-{name}")));
                }
                links
            })
            .collect();
        if wanted.is_empty() || self.no_loops.is_some() {
            if let Some(l) = loops.remove(id) {
                self.release(id, l, true);
            }
            return;
        }
        if !loops.contains_key(id) {
            match open_loop(&file) {
                Ok((dev, open)) => {
                    tracing::info!(volume = %id, device = %dev.display(), "volume backing: loop device set up");
                    loops.insert(
                        id.to_owned(),
                        Loop {
                            dev,
                            held: open,
                            links: BTreeSet::new(),
                        },
                    );
                }
                Err(error) => {
                    tracing::error!(volume = %id, file = %file.display(), %error, "volume backing: cannot set up a loop device");
                    return;
                }
            }
        }
        let Some(l) = loops.get_mut(id) else { return };
        if grown {
            // The loop device keeps the size it was set up with until told.
            if let Err(error) = losetup(&["--set-capacity".as_ref(), l.dev.as_os_str()]) {
                tracing::warn!(volume = %id, device = %l.dev.display(), %error, "volume backing: cannot resize the loop device");
            }
        }
        for gone in l.links.difference(&wanted) {
            remove_link(gone);
        }
        for link in &wanted {
            if let Err(error) = make_link(&l.dev, link) {
                tracing::error!(volume = %id, link = %link.display(), %error, "volume backing: cannot make the device link");
            }
        }
        l.links = wanted;
    }

    /// Removes a loop device's links and lets go of it. `log` says so (not at shutdown).
    fn release(&self, id: &str, l: Loop, log: bool) {
        for link in &l.links {
            remove_link(link);
        }
        let Loop { dev, held, .. } = l;
        drop(held);
        // Freed at our close unless someone else has it open (a node that did not unmount):
        // then `losetup -d` (again) makes sure it goes at their last close.
        let file = self.file(id);
        if !wait_unbound(&dev, &file, Duration::from_millis(500)) {
            let _ = losetup(&["-d".as_ref(), dev.as_os_str()]);
            if !wait_unbound(&dev, &file, Duration::from_millis(100)) {
                tracing::warn!(volume = %id, device = %dev.display(), "volume backing: loop device still in use (mounted by a node that did not unmount?); released lazily, the kernel frees it at its last close");
                return;
            }
        }
        if log {
            tracing::info!(volume = %id, device = %dev.display(), "volume backing: loop device released");
        }
    }
}

/// Creates the sparse file of `len` bytes, or grows it to `len` (never shrinks); whether it
/// grew an existing file.
fn ensure_file(file: &Path, len: u64) -> io::Result<bool> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(file)?;
    let had = f.metadata()?.len();
    if had < len {
        f.set_len(len)?;
        return Ok(had > 0);
    }
    Ok(false)
}

fn make_link(dev: &Path, link: &Path) -> io::Result<()> {
    if std::fs::read_link(link).is_ok_and(|to| to == dev) {
        return Ok(());
    }
    if let Some(dir) = link.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(link) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::os::unix::fs::symlink(dev, link)
}

fn remove_link(link: &Path) {
    let _ = std::fs::remove_file(link);
    // The instance's directory goes with its last link.
    if let Some(dir) = link.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// Why loop devices cannot be set up here, if they cannot.
fn loop_devices_unavailable() -> Option<String> {
    let control = Path::new("/dev/loop-control");
    if !control.exists() {
        return Some("/dev/loop-control does not exist (no loop driver)".into());
    }
    if let Err(e) = OpenOptions::new().read(true).write(true).open(control) {
        return Some(format!(
            "cannot open /dev/loop-control ({e}); loop devices need root"
        ));
    }
    match Command::new("losetup").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!("losetup --version failed with {}", out.status)),
        Err(e) => Some(format!("cannot run losetup ({e})")),
    }
}

fn losetup(args: &[&std::ffi::OsStr]) -> io::Result<String> {
    let out = Command::new("losetup").args(args).output()?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(io::Error::other(format!(
            "losetup {} failed with {}: {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            out.status,
            stderr.trim().chars().take(200).collect::<String>()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The loop devices whose backing file is `file`, from `/sys/block/loop*/loop/backing_file`.
pub(crate) fn loops_of(file: &Path) -> Vec<PathBuf> {
    let Ok(file) = file.canonicalize() else {
        return Vec::new();
    };
    let Ok(blocks) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = blocks
        .flatten()
        .filter(|b| b.file_name().to_string_lossy().starts_with("loop"))
        .filter(|b| {
            std::fs::read_to_string(b.path().join("loop/backing_file"))
                .is_ok_and(|f| Path::new(f.trim_end()) == file)
        })
        .map(|b| Path::new("/dev").join(b.file_name()))
        .collect();
    found.sort();
    found
}

/// Until `dev` no longer backs `file` (true) or `timeout` passes (false): the kernel frees an
/// autoclear device at its last close, not always before `close` returns.
fn wait_unbound(dev: &Path, file: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if !loops_of(file).iter().any(|d| d == dev) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A loop device for `file`, held open with autoclear set: the one already backing it (left
/// by a server that was killed while a node had it mounted), else a new one.
fn open_loop(file: &Path) -> io::Result<(PathBuf, File)> {
    let dev = match loops_of(file).into_iter().next() {
        Some(dev) => dev,
        None => PathBuf::from(losetup(&[
            "--find".as_ref(),
            "--show".as_ref(),
            file.as_os_str(),
        ])?),
    };
    let open = OpenOptions::new().read(true).write(true).open(&dev)?;
    // On a device that is open (ours), `losetup -d` sets autoclear instead of detaching.
    losetup(&["-d".as_ref(), dev.as_os_str()])?;
    Ok((dev, open))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn files_are_sparse_and_only_grow() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("v/a.img");
        assert!(!ensure_file(&f, GIB).unwrap(), "a new file did not grow");
        let m = std::fs::metadata(&f).unwrap();
        assert_eq!(m.len(), GIB);
        use std::os::unix::fs::MetadataExt;
        assert!(m.blocks() <= 8, "{} blocks allocated", m.blocks());
        assert!(ensure_file(&f, 2 * GIB).unwrap());
        assert!(!ensure_file(&f, GIB).unwrap());
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 2 * GIB);
    }

    #[test]
    fn the_flag_spells_the_modes() {
        use clap::ValueEnum;
        assert_eq!(
            VolumeBacking::from_str("sparse-file", false),
            Ok(VolumeBacking::SparseFile)
        );
        assert!(VolumeBacking::from_str("sparse", false).is_err());
        assert_eq!(VolumeBacking::default().to_string(), "none");
    }
}
