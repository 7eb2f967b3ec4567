//! The built `hypercloud` binary as a process of a test, as the tests of its personalities and
//! the end-to-end scenarios run it: a [`Proc`] keeps what the process prints in a log file,
//! prints that log when the test panics, and is killed when dropped; SIGTERM, waiting for the
//! exit, a free loopback port, the admin token of the envtest kubeconfig. (Upstream's
//! integration tests mostly start components in-process, e.g. `test/integration/framework`;
//! hypercloud's are tested as the binary an operator runs.)
//!
//! Like the rest of the process-level helpers, these panic with a message saying what failed:
//! they are meant to be called from tests only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `bin PERSONALITY` with `RUST_LOG` removed (logs at the default verbosity, whatever the
/// test's environment says) and `NO_COLOR=1` (a log a test can search).
pub fn personality(bin: impl AsRef<Path>, name: &str) -> Command {
    let mut cmd = Command::new(bin.as_ref());
    cmd.arg(name).env_remove("RUST_LOG").env("NO_COLOR", "1");
    cmd
}

/// Runs `bin ARGS` to completion without `RUST_LOG`: exit code (-1 when killed by a signal),
/// stdout and stderr.
pub fn run(bin: impl AsRef<Path>, args: &[&str]) -> (i32, String, String) {
    let bin = bin.as_ref();
    let out = Command::new(bin)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", bin.display()));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Where a [`Proc`]'s standard output goes; its standard error always goes to its log.
#[derive(Clone, Debug)]
pub enum Stdout {
    /// Into the log too.
    Log,
    /// Nowhere (e.g. the controller managers' start-up report, when only the log is read).
    Null,
    /// A file of its own, read with [`Proc::stdout`].
    File(PathBuf),
}

/// A running process: killed when dropped, its log printed when the test is panicking.
pub struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
    stdout: Stdout,
}

impl Proc {
    /// Starts `cmd` (stdin closed), stdout and stderr going to `log`; `name` names it in
    /// messages.
    pub fn spawn(name: &str, cmd: Command, log: PathBuf) -> Proc {
        Proc::spawn_with(name, cmd, log, Stdout::Log)
    }

    /// Starts `cmd` (stdin closed), stderr going to `log` and stdout as `stdout` says.
    pub fn spawn_with(name: &str, mut cmd: Command, log: PathBuf, stdout: Stdout) -> Proc {
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("creating the log {} of {name}: {e}", log.display()));
        let out = match &stdout {
            Stdout::Log => Stdio::from(
                file.try_clone()
                    .unwrap_or_else(|e| panic!("sharing the log of {name}: {e}")),
            ),
            Stdout::Null => Stdio::null(),
            Stdout::File(path) => Stdio::from(std::fs::File::create(path).unwrap_or_else(|e| {
                panic!("creating the stdout file {} of {name}: {e}", path.display())
            })),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc {
            name: name.into(),
            child,
            log,
            stdout,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Everything in the log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Everything printed on stdout so far, when it goes to a file of its own.
    pub fn stdout(&self) -> String {
        match &self.stdout {
            Stdout::File(path) => std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display())),
            other => panic!("the stdout of {} is not kept apart ({other:?})", self.name),
        }
    }

    /// Sends SIGTERM, asserting that it could be sent.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(
            status.success(),
            "kill -TERM {} ({})",
            self.pid(),
            self.name
        );
    }

    /// SIGKILL, and reaps it.
    pub fn kill9(&mut self) {
        self.child
            .kill()
            .unwrap_or_else(|e| panic!("kill -9 {}: {e}", self.name));
        self.wait();
    }

    /// Waits for it to exit, however long that takes.
    pub fn wait(&mut self) -> ExitStatus {
        self.child
            .wait()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", self.name))
    }

    /// Waits at most `limit` for it to exit (polling every 50 ms); its exit code then, `None`
    /// when it is still running or was killed by a signal.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Asserts that it exits with `code` within `limit` (its log follows, as for every
    /// failure while it is alive).
    pub fn assert_exits(&mut self, code: i32, limit: Duration) {
        let got = self.wait_exit(limit);
        assert_eq!(
            got,
            Some(code),
            "{} exit code within {limit:?} (None: still running or killed)",
            self.name
        );
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.try_wait().is_none()
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child
            .try_wait()
            .unwrap_or_else(|e| panic!("checking on {}: {e}", self.name))
    }

    /// Waits until its log contains `needle`; the log then. Fails when the process exits
    /// first or after `limit`.
    pub fn wait_for_output(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            if let Some(status) = self.try_wait() {
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
        .expect("a free port on 127.0.0.1")
}

/// The bearer token in a kubeconfig (the envtest one has user `envtest-admin-token`, in
/// system:masters), for requests the apiserver must authenticate and authorise.
pub fn admin_token(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    text.lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("kubeconfig has a token user")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c SCRIPT`, its log in `dir`.
    fn sh(dir: &tempfile::TempDir, script: &str, stdout: Stdout) -> Proc {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        Proc::spawn_with("sh", cmd, dir.path().join("sh.log"), stdout)
    }

    #[test]
    fn stdout_kept_apart_from_the_log_and_exit_code_reported() {
        let dir = tempfile::tempdir().expect("tmp");
        let out = Stdout::File(dir.path().join("sh.out"));
        let mut p = sh(&dir, "echo out; echo err >&2; exit 3", out);
        assert_eq!(p.wait_exit(Duration::from_secs(10)), Some(3));
        assert_eq!(p.log(), "err\n");
        assert_eq!(p.stdout(), "out\n");
        assert!(!p.running());
    }

    #[test]
    fn sigterm_stops_a_running_process() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut p = sh(&dir, "echo started; exec sleep 30", Stdout::Log);
        let log = p.wait_for_output("started", Duration::from_secs(10));
        assert_eq!(log, "started\n");
        assert!(p.running());
        p.sigterm();
        // Killed by a signal: no exit code.
        assert_eq!(p.wait_exit(Duration::from_secs(10)), None);
        assert!(!p.running());
    }

    #[test]
    #[should_panic(expected = "exit code within")]
    fn assert_exits_fails_on_another_code() {
        let dir = tempfile::tempdir().expect("tmp");
        sh(&dir, "exit 1", Stdout::Null).assert_exits(0, Duration::from_secs(10));
    }

    #[test]
    fn free_ports_can_be_bound() {
        let port = free_port();
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind the free port");
    }
}
