//! Reading the files an operator hands us by flag, config key or environment variable
//! (`--cloud-config`, kubeconfigs, CA bundles, TLS certificates and keys, SSH public keys,
//! the leader migration configuration, config-drive metadata, trace files): only regular files,
//! never larger than a stated limit ([`MAX_INPUT_FILE_BYTES`] unless the caller states
//! another), so a wrong path is a clear error instead of memory exhaustion (`/dev/zero`, a disk
//! image) or a silent hang (a FIFO nobody writes to, a terminal).
//!
//! A refusal is an `io::Error` whose inner error is a [`Refused`], so callers that wrap I/O
//! errors keep working; [`read_named`] wraps any failure in an [`InputFileError`] naming the
//! flag, which the binary maps to exit code 2.

use std::fs::{File, Metadata};
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The largest input file read: 1 MiB (upstream's limit for CA bundles, and far above any
/// kubeconfig, certificate or config file).
pub const MAX_INPUT_FILE_BYTES: u64 = 1 << 20;

/// Why a file was not read, inside the `io::Error` the readers return.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// A FIFO, device, socket or directory: reading it could block forever or never end.
    #[error("not a regular file (a {0})")]
    NotRegular(&'static str),
    /// More bytes than the limit.
    #[error("larger than the {limit} limit")]
    TooLarge {
        /// The limit.
        limit: Size,
    },
    /// Not UTF-8 text where text is expected.
    #[error("not UTF-8 text")]
    NotText,
}

impl Refused {
    /// Whether `err` is (or wraps) a refusal of the readers here.
    pub fn is_refusal(err: &(dyn std::error::Error + 'static)) -> bool {
        err.is::<Refused>()
            || err
                .downcast_ref::<std::io::Error>()
                .and_then(|e| e.get_ref())
                .is_some_and(|inner| inner.is::<Refused>())
    }
}

/// A byte count, shown as people say it (`1 MiB`, `64 KiB`, `512 bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MIB: u64 = 1 << 20;
        const KIB: u64 = 1 << 10;
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{} MiB", n / MIB),
            n if n >= KIB && n % KIB == 0 => write!(f, "{} KiB", n / KIB),
            n => write!(f, "{n} bytes"),
        }
    }
}

/// A file given by a flag, config key or environment variable that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{what}: cannot read {}", path.display())]
pub struct InputFileError {
    /// The flag, key or variable that named the file (`--kubeconfig`, `KUBECONFIG`).
    pub what: String,
    /// The file.
    pub path: PathBuf,
    /// Why: an I/O error, or a [`Refused`] inside one.
    pub source: std::io::Error,
}

fn refuse(why: Refused) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, why)
}

fn kind_of(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("directory")
    } else if t.is_fifo() {
        Some("FIFO")
    } else if t.is_char_device() {
        Some("character device")
    } else if t.is_block_device() {
        Some("block device")
    } else if t.is_socket() {
        Some("socket")
    } else {
        Some("special file")
    }
}

fn check(meta: &Metadata, limit: u64) -> std::io::Result<()> {
    if let Some(kind) = kind_of(meta) {
        return Err(refuse(Refused::NotRegular(kind)));
    }
    if meta.len() > limit {
        return Err(refuse(Refused::TooLarge { limit: Size(limit) }));
    }
    Ok(())
}

/// Reads `path`, a regular file of at most `limit` bytes, without ever blocking on it: the
/// type is checked before opening (opening a FIFO waits for a writer), the file is opened
/// non-blocking in case it was swapped meanwhile, and checked again on the open descriptor.
pub fn read_limited(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    check(&std::fs::metadata(path)?, limit)?;
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    check(&file.metadata()?, limit)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    // A regular file may grow while we read (or be a /proc file reporting size 0).
    if bytes.len() as u64 > limit {
        return Err(refuse(Refused::TooLarge { limit: Size(limit) }));
    }
    Ok(bytes)
}

/// [`read_limited`] with the 1 MiB limit.
pub fn read_input_file(path: &Path) -> std::io::Result<Vec<u8>> {
    read_limited(path, MAX_INPUT_FILE_BYTES)
}

/// [`read_input_file`] as UTF-8 text.
pub fn read_input_text(path: &Path) -> std::io::Result<String> {
    read_limited_text(path, MAX_INPUT_FILE_BYTES)
}

/// [`read_limited`] as UTF-8 text.
pub fn read_limited_text(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_limited(path, limit)?).map_err(|_| refuse(Refused::NotText))
}

/// [`read_limited`], the failure naming `what` (the flag, key or variable) and the file.
pub fn read_named(what: &str, path: &Path, limit: u64) -> Result<Vec<u8>, InputFileError> {
    read_limited(path, limit).map_err(|source| InputFileError {
        what: what.to_owned(),
        path: path.to_owned(),
        source,
    })
}

/// [`read_named`] as UTF-8 text.
pub fn read_named_text(what: &str, path: &Path, limit: u64) -> Result<String, InputFileError> {
    read_limited_text(path, limit).map_err(|source| InputFileError {
        what: what.to_owned(),
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn files_up_to_the_limit_are_read_larger_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok");
        std::fs::write(&ok, vec![b'a'; MAX_INPUT_FILE_BYTES as usize]).unwrap();
        assert_eq!(
            read_input_file(&ok).unwrap().len() as u64,
            MAX_INPUT_FILE_BYTES
        );
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; MAX_INPUT_FILE_BYTES as usize + 1]).unwrap();
        let err = read_input_file(&big).unwrap_err();
        assert_eq!(err.to_string(), "larger than the 1 MiB limit");
        assert!(Refused::is_refusal(&err));
        let err = read_limited(&ok, 1000).unwrap_err();
        assert_eq!(err.to_string(), "larger than the 1000 bytes limit");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let started = Instant::now();
        for (path, kind) in [
            (Path::new("/dev/zero"), "character device"),
            (Path::new("/dev/null"), "character device"),
            (fifo.as_path(), "FIFO"),
            (dir.path(), "directory"),
        ] {
            let err = read_input_file(path).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("not a regular file (a {kind})"),
                "{}",
                path.display()
            );
            assert!(Refused::is_refusal(&err));
        }
        // Generous: a FIFO read would block forever, not for a minute.
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn named_errors_say_what_named_the_file() {
        let err = read_named_text("--kubeconfig", Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(err.to_string(), "--kubeconfig: cannot read /dev/zero");
        assert_eq!(
            crate::Chain(&err).to_string(),
            "--kubeconfig: cannot read /dev/zero: not a regular file (a character device)"
        );
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::write(&bin, [0xff, 0xfe]).unwrap();
        let err = read_named_text("KUBECONFIG", &bin, 10).unwrap_err();
        assert!(crate::Chain(&err).to_string().ends_with("not UTF-8 text"));
        let err = read_named("--x", &dir.path().join("missing"), 10).unwrap_err();
        assert!(!Refused::is_refusal(&err.source));
        assert_eq!(err.source.kind(), std::io::ErrorKind::NotFound);
    }
}
