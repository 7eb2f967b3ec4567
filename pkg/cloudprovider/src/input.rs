//! Reading the files an operator hands us (`--cloud-config`, `clouds.yaml`, the leader
//! migration configuration, config-drive metadata, CA bundles): none may be larger than
//! [`MAX_INPUT_FILE_BYTES`], so a wrong path (a disk image, `/dev/zero`) is a clear error
//! instead of memory exhaustion.

use std::io::Read as _;
use std::path::Path;

/// The largest input file read: 1 MiB.
pub const MAX_INPUT_FILE_BYTES: u64 = 1 << 20;

/// Reads `path`, refusing more than [`MAX_INPUT_FILE_BYTES`] (`InvalidData`, saying the
/// limit); callers name the file in their error, as for any other read failure.
pub fn read_input_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INPUT_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the {MAX_INPUT_FILE_BYTES}-byte (1 MiB) limit for input files"),
        ));
    }
    Ok(bytes)
}

/// [`read_input_file`] as UTF-8 text.
pub fn read_input_text(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_input_file(path)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text: {e}"),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
        assert!(err.to_string().contains("1 MiB"), "{err}");
        // An endless file stops at the limit too.
        let err = read_input_file(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("limit"), "{err}");
    }
}
