//! The `hypercloud` binary under its personality names. The processes started from it are
//! `hypercloud_testenv::process::Proc`s: each writes stdout and stderr to a log file, is killed
//! when dropped, and prints that log when the test is failing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `hypercloud` binary cargo built beside this test: the test executable is
/// `target/<profile>/deps/<test>-<hash>`, the binary `target/<profile>/hypercloud`.
pub fn hypercloud() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps");
    let bin = profile_dir.join(format!("hypercloud{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "the hypercloud binary is missing at {}: run `cargo build -p hypercloud` first \
         (`cargo test --workspace` builds it)",
        bin.display()
    );
    bin
}

/// A directory of symlinks to the binary, one per personality name and alias it lists
/// (what `hack/install-symlinks.sh` makes), so components start under their own names.
#[derive(Clone)]
pub struct Bin {
    dir: std::sync::Arc<tempfile::TempDir>,
    target: PathBuf,
}

impl Bin {
    pub fn install() -> Bin {
        let target = hypercloud();
        let out = Command::new(&target).arg("--list").output().unwrap();
        assert!(out.status.success(), "hypercloud --list: {out:?}");
        let dir = tempfile::tempdir().unwrap();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            // `controller-manager (alias: kube-controller-manager)`
            let mut names: Vec<&str> = line.split_whitespace().take(1).collect();
            if let Some((_, aliases)) = line.split_once("(alias: ") {
                names.extend(aliases.trim_end_matches(')').split(',').map(str::trim));
            }
            for name in names {
                std::os::unix::fs::symlink(&target, dir.path().join(name)).unwrap();
            }
        }
        Bin {
            dir: std::sync::Arc::new(dir),
            target,
        }
    }

    /// The symlink of the personality `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A command for the personality `name`, run through its symlink, with an environment
    /// free of `HYPERCLOUD_*` settings (every flag is also read from one) and of `RUST_LOG`.
    pub fn command(&self, name: &str) -> Command {
        let link = self.dir.path().join(name);
        assert!(
            link.exists(),
            "{name} is not a personality of {}",
            self.target.display()
        );
        let mut cmd = Command::new(link);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("HYPERCLOUD_") {
                cmd.env_remove(key);
            }
        }
        cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
        cmd
    }
}

/// Runs a command to completion, asserting success; its output.
pub fn run(mut cmd: Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed with {}:\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
