//! The `hypercloud` binary under its personality names, and the processes started from it:
//! each writes stdout and stderr to a log file, is killed when dropped, and prints that log
//! when the test is failing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// A running process of the binary.
pub struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Starts `cmd`, its output going to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Proc {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc {
            name: name.into(),
            child,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until its output contains `needle`; the output then. Fails when the process
    /// exits first or after `limit`.
    pub fn wait_for_output(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "{} exited with {status} before printing {needle:?}",
                    self.name
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} did not print {needle:?} within {limit:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- {} log ({}) ---\n{}--- end of {} log ---",
                self.name,
                self.log.display(),
                self.log(),
                self.name
            );
        }
    }
}

/// A port free on 127.0.0.1 right now, for a server that cannot be told to pick one.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}
