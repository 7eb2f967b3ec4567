//! Test helper that gives hypercloud's integration tests a real kube-apiserver (backed by a real
//! etcd), the Rust side of `hack/envtest.sh` and hypercloud's counterpart of controller-runtime's
//! `envtest`. A test binary reuses the control plane named by `HYPERCLOUD_TEST_KUBECONFIG` when it
//! is set (as `hack/test.sh` does), and otherwise starts its own once, through
//! `hack/envtest.sh start` into a private run dir, which a watchdog stops when the test binary
//! exits. Each test then gets a [`TestEnv`]: a kube [`Client`], its own namespace with a random
//! suffix (deleted at the end) and [`TestEnv::unique_name`] for cluster-scoped objects. When no
//! control plane can be had, every call fails with an error naming the step that failed, so tests
//! fail instead of being skipped.
//!
//! Beside it, the helpers the process-level tests of the `hypercloud` binary and the e2e
//! scenarios share, each taking the path of the binary (`env!("CARGO_BIN_EXE_hypercloud")` in
//! the binary's tests): [`process`] (a personality as a process, its log kept), [`localcloud`]
//! (a `local-cloud serve` process, its CLI and API), [`cluster`] (the upstream
//! kube-controller-manager and kube-scheduler, and kwok playing the kubelets, as
//! `hack/lib/cluster.sh` starts them), [`leases`], [`nodes`], [`rbac`] (deploy/'s roles applied),
//! [`net`] (a backend and a request through a load balancer), [`aws`] (moto and the EC2 metadata
//! mock), [`vcsim`] (VMware's vCenter simulator and `govc`) and [`wait`].
//! Unlike the control plane above, these
//! panic with a message saying what failed, as the tests calling them would. And [`group`]: one
//! test binary holds the tests of several former test files; tests of different files never run
//! at once.
//!
//! Start here: [`TestEnv`] (what a test gets) and [`ControlPlane`] (how the apiserver is found or
//! started); `hack/envtest.sh` builds and starts the binaries.
//!
//! Not here: the tests themselves (each crate's `tests/`), or anything shipped: every crate uses
//! this one only as a dev-dependency.

pub mod aws;
pub mod cluster;
mod groups;
pub mod leases;
pub mod localcloud;
pub mod net;
pub mod nodes;
pub mod pki;
pub mod process;
pub mod rbac;
pub mod vcsim;
pub mod wait;

pub use groups::{group, group_blocking, GroupGuard};

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Api, Client, Config};
use tokio::sync::OnceCell;

/// The environment variable naming the kubeconfig of a running control plane to reuse.
pub const KUBECONFIG_ENV: &str = "HYPERCLOUD_TEST_KUBECONFIG";

/// The label put on every namespace a [`TestEnv`] creates, so leftovers can be found.
pub const TEST_LABEL: &str = "hypercloud.io/testenv";

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why no control plane or test namespace could be had; each variant is the operation that failed.
#[derive(thiserror::Error)]
pub enum Error {
    /// `hack/envtest.sh start` could not be run at all.
    #[error("envtest: step \"run {script}\" failed")]
    RunEnvtestScript {
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `hack/envtest.sh start` ran and failed at `step`.
    #[error(
        "envtest: step \"{step}\" failed: hack/envtest.sh start exited with {status} (run dir {run_dir}):\n{stderr}"
    )]
    StartControlPlane {
        step: String,
        status: ExitStatus,
        run_dir: PathBuf,
        stderr: String,
    },
    /// `hack/envtest.sh start` succeeded but did not print where its kubeconfig is.
    #[error("envtest: step \"find kubeconfig in the output of hack/envtest.sh start\" failed:\n{stdout}")]
    FindKubeconfig { stdout: String },
    /// The kubeconfig file could not be read or parsed.
    #[error("envtest: step \"read kubeconfig {path}\" failed")]
    ReadKubeconfig {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig could not be turned into a client configuration.
    #[error("envtest: step \"load kubeconfig {path}\" failed")]
    LoadKubeconfig {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    /// No client could be built from the configuration.
    #[error("envtest: step \"create kube client\" failed")]
    CreateClient {
        #[source]
        source: kube::Error,
    },
    /// The control plane did not answer `/version`.
    #[error("envtest: step \"reach kube-apiserver at {kubeconfig}\" failed")]
    ReachApiserver {
        kubeconfig: PathBuf,
        #[source]
        source: kube::Error,
    },
    /// Getting the control plane failed earlier in this test binary; the cause is shared.
    #[error("envtest: step \"get the control plane\" failed earlier in this test binary")]
    ControlPlaneUnavailable {
        #[source]
        source: Arc<Error>,
    },
    /// The test's namespace could not be created.
    #[error("envtest: step \"create namespace {namespace}\" failed")]
    CreateNamespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    /// The test's namespace could not be deleted.
    #[error("envtest: step \"delete namespace {namespace}\" failed")]
    DeleteNamespace {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The name of the step that failed, as `hack/envtest.sh` named it when it was the script.
    pub fn step(&self) -> Option<&str> {
        match self {
            Error::StartControlPlane { step, .. } => Some(step),
            Error::ControlPlaneUnavailable { source } => source.step(),
            _ => None,
        }
    }
}

// Tests print errors with `{:?}` (`expect`, `-> Result`); show the readable message there, with
// its causes (Display names only the failed step; the causes are `source()`).
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)?;
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// How to start a private control plane with `hack/envtest.sh start`.
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// The script; defaults to `hack/envtest.sh` of this clone.
    pub script: PathBuf,
    /// The run dir (`HYPERCLOUD_ENVTEST_DIR`): certificates, etcd data, pids, logs.
    pub run_dir: PathBuf,
    /// Use the binaries in this dir instead of the built ones (`HYPERCLOUD_ENVTEST_BIN`).
    pub bin_dir: Option<PathBuf>,
    /// Stop the control plane when this process exits (`HYPERCLOUD_ENVTEST_OWNER_PID`).
    pub owner_pid: Option<u32>,
}

impl StartOptions {
    /// Start into `run_dir` with the script of this clone, owned by no process.
    pub fn new(run_dir: impl Into<PathBuf>) -> Self {
        StartOptions {
            script: default_script(),
            run_dir: run_dir.into(),
            bin_dir: None,
            owner_pid: None,
        }
    }

    /// The options the shared control plane of a test binary uses: a run dir of its own under
    /// the cache, stopped when this process exits.
    pub fn private() -> Self {
        let cache = cache_dir();
        let pid = std::process::id();
        StartOptions {
            owner_pid: Some(pid),
            ..StartOptions::new(cache.join("envtest/runs").join(format!("test-{pid}")))
        }
    }
}

/// `$HYPERCLOUD_CACHE`, else `$HOME/.cache/hypercloud` (as hack/ scripts pick it), else the
/// temporary directory.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("HYPERCLOUD_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/hypercloud"))
        })
        .unwrap_or_else(std::env::temp_dir)
}

/// The Python of the virtualenv `venv` under the cache (`venv`, `venv-gce`, ...) that
/// hack/python-tools.sh installs; fails the test, naming the script to run, when `import
/// module` fails in it (`install` is that script's argument: `""`, `"gce"`).
pub fn venv_python(venv: &str, module: &str, install: &str) -> PathBuf {
    let python = cache_dir().join(venv).join("bin/python");
    let ok = std::process::Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{module} is not importable in {}; run hack/python-tools.sh {install} (hack/test.sh does)",
        python.display()
    );
    python
}

/// Fails the test unless a conformance script (`hack/conformance/*.py`) exited 0 and printed
/// `ok_line`, showing what it printed; its standard output.
pub fn conformance_passed(out: &std::process::Output, script: &Path, ok_line: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed:\nstdout: {stdout}\nstderr: {stderr}",
        script.display()
    );
    assert!(stdout.contains(ok_line), "{stdout}");
    stdout
}

fn default_script() -> PathBuf {
    std::env::var_os("HYPERCLOUD_ENVTEST_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("hack/envtest.sh"))
}

/// A tool a hack/ script builds and names: `$env_var` when set, else the path the script
/// (`script[0]` under the checkout, with its arguments) prints on stdout, building it first when
/// needed (`hack/helm.sh`, `hack/envtest.sh build-kubectl`).
pub fn tool(env_var: &str, script: &[&str]) -> PathBuf {
    match std::env::var_os(env_var) {
        Some(path) => PathBuf::from(path),
        None => printed_path(script),
    }
}

/// The directory with the upstream CSI tools `csi-sanity`, `csi-provisioner`, `csi-attacher` and
/// `csi-resizer` at the versions pinned in hack/versions.env: `$HYPERCLOUD_CSI_TOOLS_BIN` when
/// set, else what `hack/csi-tools.sh bin` prints, building them first when needed (once per test
/// binary).
pub fn csi_tools_bin_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tool("HYPERCLOUD_CSI_TOOLS_BIN", &["hack/csi-tools.sh", "bin"]))
}

/// The path of one of the upstream CSI tools of [`csi_tools_bin_dir`] (`"csi-provisioner"`, ...);
/// fails the test when that directory has no such file.
pub fn csi_tool(name: &str) -> PathBuf {
    let path = csi_tools_bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} does not exist: hack/csi-tools.sh builds csi-sanity, csi-provisioner, csi-attacher and csi-resizer",
        path.display()
    );
    path
}

/// The directory of the binaries `hack/<script> bin` prints (building them first when
/// needed, as those scripts do).
pub(crate) fn hack_bin_dir(script: &str) -> PathBuf {
    printed_path(&[&format!("hack/{script}"), "bin"])
}

/// Runs `script[0]` (under the checkout) with the rest as arguments and returns the path it
/// printed on stdout; fails the test, with the script's stderr, when it fails.
fn printed_path(script: &[&str]) -> PathBuf {
    let path = repo_root().join(script[0]);
    let out = std::process::Command::new(&path)
        .args(&script[1..])
        .output()
        .unwrap_or_else(|e| panic!("running {script:?}: {e}"));
    assert!(
        out.status.success(),
        "{script:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The checkout's root (where `hack/` is), found when the program runs: from
/// `CARGO_MANIFEST_DIR` as cargo sets it for a test or example it runs, else the working
/// directory, walking up. Not a path compiled in: cargo reuses a build cache made in another
/// checkout (its hashes do not depend on where the checkout is), and a compiled-in path would
/// then name that other checkout's scripts.
pub fn repo_root() -> PathBuf {
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok());
    if let Some(mut dir) = start {
        loop {
            if dir.join("hack/envtest.sh").is_file() {
                return dir;
            }
            if !dir.pop() {
                break;
            }
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A running kube-apiserver: where its kubeconfig is and how to reach it.
#[derive(Clone, Debug)]
pub struct ControlPlane {
    kubeconfig: PathBuf,
    config: Config,
    run_dir: Option<PathBuf>,
}

static SHARED: OnceCell<Result<ControlPlane, Arc<Error>>> = OnceCell::const_new();

impl ControlPlane {
    /// The control plane of this test binary: the one `HYPERCLOUD_TEST_KUBECONFIG` names, or
    /// else one started on first use with [`StartOptions::private`]. A failure is remembered,
    /// so every test of the binary fails with the same step.
    pub async fn shared() -> Result<&'static ControlPlane> {
        let shared = SHARED
            .get_or_init(|| async {
                let plane = match std::env::var_os(KUBECONFIG_ENV) {
                    Some(path) => ControlPlane::from_kubeconfig(PathBuf::from(path)).await,
                    None => ControlPlane::start(&StartOptions::private()).await,
                };
                let plane = plane.map_err(Arc::new)?;
                plane.check_reachable().await.map_err(Arc::new)?;
                Ok(plane)
            })
            .await;
        shared
            .as_ref()
            .map_err(|source| Error::ControlPlaneUnavailable {
                source: Arc::clone(source),
            })
    }

    /// Start a control plane with `hack/envtest.sh start`, building the binaries first if needed.
    pub async fn start(options: &StartOptions) -> Result<ControlPlane> {
        let mut command = tokio::process::Command::new(&options.script);
        command
            .arg("start")
            .env("HYPERCLOUD_ENVTEST_DIR", &options.run_dir)
            .stdin(std::process::Stdio::null());
        if let Some(bin) = &options.bin_dir {
            command.env("HYPERCLOUD_ENVTEST_BIN", bin);
        }
        if let Some(pid) = options.owner_pid {
            command.env("HYPERCLOUD_ENVTEST_OWNER_PID", pid.to_string());
        }
        let output = command
            .output()
            .await
            .map_err(|source| Error::RunEnvtestScript {
                script: options.script.clone(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            return Err(Error::StartControlPlane {
                step: failed_step(&stderr).unwrap_or_else(|| "hack/envtest.sh start".to_owned()),
                status: output.status,
                run_dir: options.run_dir.clone(),
                stderr: tail(&stderr, 30),
            });
        }
        let kubeconfig = exported_kubeconfig(&stdout).ok_or(Error::FindKubeconfig { stdout })?;
        let mut plane = ControlPlane::from_kubeconfig(kubeconfig).await?;
        plane.run_dir = Some(options.run_dir.clone());
        Ok(plane)
    }

    /// A control plane that is already running, reached through this kubeconfig.
    pub async fn from_kubeconfig(path: impl Into<PathBuf>) -> Result<ControlPlane> {
        let path = path.into();
        let kubeconfig = Kubeconfig::read_from(&path).map_err(|source| Error::ReadKubeconfig {
            path: path.clone(),
            source,
        })?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|source| Error::LoadKubeconfig {
                path: path.clone(),
                source,
            })?;
        Ok(ControlPlane {
            kubeconfig: path,
            config,
            run_dir: None,
        })
    }

    async fn check_reachable(&self) -> Result<()> {
        self.client()?
            .apiserver_version()
            .await
            .map_err(|source| Error::ReachApiserver {
                kubeconfig: self.kubeconfig.clone(),
                source,
            })?;
        Ok(())
    }

    /// The kubeconfig file (admin credentials), for tests that run hypercloud as a process.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The client configuration, for tests that build their own clients.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The run dir when this control plane was started here, with its logs.
    pub fn run_dir(&self) -> Option<&Path> {
        self.run_dir.as_deref()
    }

    /// A new admin client. Make one per test: a client belongs to the tokio runtime it was
    /// made on, and every `#[tokio::test]` has its own.
    pub fn client(&self) -> Result<Client> {
        Client::try_from(self.config.clone()).map_err(|source| Error::CreateClient { source })
    }
}

/// `envtest: step "NAME" failed...` → NAME (the last one, which is the one that ended the script).
fn failed_step(stderr: &str) -> Option<String> {
    stderr.lines().rev().find_map(|line| {
        let rest = line.strip_prefix("envtest: step \"")?;
        let end = rest.find("\" failed")?;
        Some(rest[..end].to_owned())
    })
}

/// `export HYPERCLOUD_TEST_KUBECONFIG=PATH` → PATH.
fn exported_kubeconfig(stdout: &str) -> Option<PathBuf> {
    stdout.lines().find_map(|line| {
        line.trim()
            .strip_prefix("export ")?
            .strip_prefix(KUBECONFIG_ENV)?
            .strip_prefix('=')
            .map(|path| PathBuf::from(path.trim_matches('\'').trim_matches('"')))
    })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A random lowercase hex suffix, different for every call.
fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    std::process::id().hash(&mut hasher);
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut hasher);
    std::time::SystemTime::now().hash(&mut hasher);
    format!("{:08x}", hasher.finish() as u32)
}

/// `name` as a DNS-1123 label fragment: lowercase alphanumerics and '-', at most `max` long.
fn dns_label(name: &str, max: usize) -> String {
    let mut label: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(max)
        .collect();
    while label.ends_with('-') {
        label.pop();
    }
    label.trim_start_matches('-').to_owned()
}

/// One test's view of the control plane: a client, a namespace of its own and a suffix for the
/// names of cluster-scoped objects. The namespace is deleted by [`TestEnv::cleanup`], or when
/// the `TestEnv` is dropped (also when the test panics).
pub struct TestEnv {
    plane: &'static ControlPlane,
    client: Client,
    namespace: String,
    suffix: String,
    cleaned_up: bool,
}

impl TestEnv {
    /// Get the shared control plane and create a namespace `t-<test name>-<random suffix>`.
    pub async fn new(test_name: &str) -> Result<TestEnv> {
        let plane = ControlPlane::shared().await?;
        let client = plane.client()?;
        let suffix = random_suffix();
        let namespace = format!("t-{}-{suffix}", dns_label(test_name, 40));
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some([(TEST_LABEL.to_owned(), dns_label(test_name, 63))].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &object)
            .await
            .map_err(|source| Error::CreateNamespace {
                namespace: namespace.clone(),
                source,
            })?;
        Ok(TestEnv {
            plane,
            client,
            namespace,
            suffix,
            cleaned_up: false,
        })
    }

    /// The admin client of this test.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// This test's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The control plane the test runs against.
    pub fn control_plane(&self) -> &'static ControlPlane {
        self.plane
    }

    /// A name for a cluster-scoped object (a Node, a ClusterRole...) no other test uses:
    /// `<base>-<this test's suffix>`.
    pub fn unique_name(&self, base: &str) -> String {
        format!("{}-{}", dns_label(base, 200), self.suffix)
    }

    /// Delete the namespace now and report failure. (Without a kube-controller-manager the
    /// namespace then stays `Terminating`; its name is never reused.)
    pub async fn cleanup(mut self) -> Result<()> {
        self.cleaned_up = true;
        delete_namespace(self.client.clone(), &self.namespace).await
    }
}

async fn delete_namespace(client: Client, namespace: &str) -> Result<()> {
    match Api::<Namespace>::all(client)
        .delete(namespace, &DeleteParams::background())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::DeleteNamespace {
            namespace: namespace.to_owned(),
            source,
        }),
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if self.cleaned_up {
            return;
        }
        // Drop cannot await, and the test's runtime is blocked while we are in here: delete on
        // a thread with its own runtime and its own client.
        let config = self.plane.config.clone();
        let namespace = self.namespace.clone();
        let deleted = std::thread::spawn(move || -> Result<(), String> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| error.to_string())?;
            runtime.block_on(async {
                let client = Client::try_from(config).map_err(|error| error.to_string())?;
                delete_namespace(client, &namespace)
                    .await
                    .map_err(|error| error.to_string())
            })
        })
        .join();
        match deleted {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                eprintln!("testenv: cleanup of namespace {}: {error}", self.namespace)
            }
            Err(_) => eprintln!("testenv: cleanup of namespace {} panicked", self.namespace),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_step_is_the_last_one_named() {
        let stderr = "envtest: start etcd\n\
                      envtest: step \"start etcd\" failed: boom\n\
                      envtest: step \"wait for kube-apiserver /readyz\" failed (see LOG)\n";
        assert_eq!(
            failed_step(stderr).as_deref(),
            Some("wait for kube-apiserver /readyz")
        );
        assert_eq!(failed_step("something else\n"), None);
    }

    #[test]
    fn kubeconfig_is_read_from_the_printed_env() {
        let stdout =
            "export KUBECONFIG=/r/kubeconfig\nexport HYPERCLOUD_TEST_KUBECONFIG=/r/kubeconfig\n";
        assert_eq!(
            exported_kubeconfig(stdout),
            Some(PathBuf::from("/r/kubeconfig"))
        );
        assert_eq!(
            exported_kubeconfig("export KUBECONFIG=/r/kubeconfig\n"),
            None
        );
    }

    #[test]
    fn names_are_dns_labels_and_suffixes_differ() {
        assert_eq!(
            dns_label("Node_Lifecycle::works--", 63),
            "node-lifecycle--works"
        );
        assert_eq!(dns_label("abcdef", 3), "abc");
        assert_ne!(random_suffix(), random_suffix());
        assert_eq!(random_suffix().len(), 8);
    }

    #[test]
    fn error_messages_name_the_step() {
        let error = Error::ControlPlaneUnavailable {
            source: Arc::new(Error::FindKubeconfig {
                stdout: String::new(),
            }),
        };
        assert!(format!("{error:?}").contains("step \"find kubeconfig"));
        assert_eq!(error.step(), None);
    }

    #[test]
    fn display_names_the_operation_and_debug_adds_the_causes() {
        let error = Error::RunEnvtestScript {
            script: PathBuf::from("hack/envtest.sh"),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        };
        assert_eq!(
            error.to_string(),
            "envtest: step \"run hack/envtest.sh\" failed"
        );
        assert_eq!(
            format!("{error:?}"),
            "envtest: step \"run hack/envtest.sh\" failed: no such file"
        );
        let shared = Error::ControlPlaneUnavailable {
            source: Arc::new(error),
        };
        assert_eq!(
            format!("{shared:?}"),
            "envtest: step \"get the control plane\" failed earlier in this test binary: envtest: step \"run hack/envtest.sh\" failed: no such file"
        );
    }
}
