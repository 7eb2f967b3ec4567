//! Files handed to us by flag, config key or environment variable (issue #29, classes 1, 2, 5).
//!
//! - Every file any personality reads, given as `/dev/zero`, as a FIFO nobody writes to and as
//!   a file one byte over its limit: the process exits 2 within [`WAIT`], naming the flag (or
//!   variable, or key) and the problem, without its memory growing past [`MAX_RSS_KIB`]. The
//!   cases are one table ([`cases`]): a new file flag is one line.
//! - Values the AWS SDK would build headers from (credential variables, shared files): a
//!   control character is refused by name at start-up (exit 2), the value never echoed; before,
//!   the SDK panicked (exit 101).
//! - SSH keys and users that would add entries to GCE's `ssh-keys`: refused by name, the
//!   project metadata unchanged; a restart with the same key appends nothing.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::support::{peak_rss_kib, BIN};

/// The binary under test: [`BIN`], or `$HYPERCLOUD_TEST_BIN` (a copy taken right after the
/// build, where several checkouts share one target directory and overwrite each other's).
fn bin() -> String {
    std::env::var("HYPERCLOUD_TEST_BIN").unwrap_or_else(|_| BIN.to_owned())
}
use hypercloud_testenv::process::free_port;

/// How long a refusal may take; a process still running after it hangs (a FIFO read).
const WAIT: Duration = Duration::from_secs(20);
/// Peak RSS a refusing process may reach: the debug binary starts well below it, and reading
/// `/dev/zero` goes far beyond it within a second.
const MAX_RSS_KIB: u64 = 200 * 1024;
const MIB: u64 = 1 << 20;
/// `hypercloud trace render`'s limit (pkg/trace `MAX_TRACE_FILE_BYTES`).
const TRACE_LIMIT: u64 = 256 * MIB;

/// What a run left behind.
struct Outcome {
    code: Option<i32>,
    stderr: String,
    peak_kib: u64,
}

/// Runs `cmd` to its end (killed after [`WAIT`], which fails the test), sampling its peak
/// memory meanwhile.
fn run_bounded(mut cmd: Command, dir: &Path, label: &str) -> Outcome {
    let err_path = dir.join(format!("stderr-{}", fastrand_name()));
    let err_file = std::fs::File::create(&err_path).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file);
    let mut child = cmd.spawn().unwrap();
    let started = Instant::now();
    let mut peak_kib = 0;
    let code = loop {
        if let Some(kib) = peak_rss_kib(child.id()) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > WAIT {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
            panic!("{label}: still running after {WAIT:?} (a silent hang); stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    Outcome {
        code,
        stderr,
        peak_kib,
    }
}

fn fastrand_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// The files and directories every case shares.
struct Fx {
    dir: tempfile::TempDir,
    fifo: PathBuf,
    /// A kubeconfig for a server nobody runs (nothing is contacted before the refusal).
    kubeconfig: PathBuf,
    /// A small regular file (the other half of a cert/key pair).
    ok: PathBuf,
}

impl Fx {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success(), "mkfifo");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text(None)).unwrap();
        let ok = dir.path().join("ok.pem");
        std::fs::write(&ok, "not used\n").unwrap();
        Fx {
            dir,
            fifo,
            kubeconfig,
            ok,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A fresh file name in the fixture's directory.
    fn fresh(&self, stem: &str) -> PathBuf {
        self.path().join(format!("{stem}-{}", fastrand_name()))
    }

    /// A sparse file one byte over `limit`.
    fn big(&self, limit: u64) -> PathBuf {
        let p = self.fresh("big");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(limit + 1).unwrap();
        p
    }
}

fn kubeconfig_text(ca: Option<&Path>) -> String {
    let ca = match ca {
        Some(p) => format!("certificate-authority: '{}'", p.display()),
        None => "insecure-skip-tls-verify: true".into(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:1', {ca}}}}}]\n\
         users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
    )
}

/// Variables of the test's own environment that would change what the binary reads.
const SCRUB: &[&str] = &[
    "KUBECONFIG",
    "HYPERCLOUD_KUBECONFIG",
    "HYPERCLOUD_MASTER",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
];

/// `hypercloud NAME ARGS`, with HOME in the fixture (no ~/.kube/config, no ~/.aws).
fn hypercloud(fx: &Fx, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args).env("HOME", fx.path());
    for v in SCRUB {
        c.env_remove(v);
    }
    c
}

/// A controller manager (`cloud-controller-manager` or `controller-manager`) on the fake
/// provider, serving on loopback, without the kubeconfig (the case adds one or not).
fn manager(fx: &Fx, name: &str) -> Command {
    manager_on(fx, name, "fake")
}

/// [`manager`] on `provider`.
fn manager_on(fx: &Fx, name: &str, provider: &str) -> Command {
    manager_electing(fx, name, provider, false)
}

/// [`manager_on`], with leader election on or off (leader migration requires it on).
fn manager_electing(fx: &Fx, name: &str, provider: &str, leader_elect: bool) -> Command {
    let port = free_port();
    // Two free ports drawn one after the other can be the same one (both listeners are closed).
    let webhook_port = loop {
        let p = free_port();
        if p != port {
            break p;
        }
    };
    let mut c = hypercloud(
        fx,
        &[
            name,
            &format!("--cloud-provider={provider}"),
            &format!("--leader-elect={leader_elect}"),
            "--authentication-skip-lookup",
            "--bind-address=127.0.0.1",
        ],
    );
    c.arg(format!("--secure-port={port}"));
    if name == "cloud-controller-manager" {
        c.args(["--webhook-bind-address=127.0.0.1"])
            .arg(format!("--webhook-secure-port={webhook_port}"));
    }
    c
}

fn ccm(fx: &Fx) -> Command {
    ccm_on(fx, "fake")
}

/// The cloud-controller-manager on `provider`, with the fixture's kubeconfig.
fn ccm_on(fx: &Fx, provider: &str) -> Command {
    let mut c = manager_on(fx, "cloud-controller-manager", provider);
    c.arg(format!("--kubeconfig={}", fx.kubeconfig.display()));
    c
}

fn plugin(fx: &Fx) -> Command {
    plugin_on(fx, "fake")
}

/// The apiserver-plugin on `provider`, serving on loopback.
fn plugin_on(fx: &Fx, provider: &str) -> Command {
    let mut c = hypercloud(
        fx,
        &[
            "apiserver-plugin",
            &format!("--cloud-provider={provider}"),
            "--bind-address=127.0.0.1",
        ],
    );
    c.arg(format!("--secure-port={}", free_port()))
        .arg(format!("--cert-dir={}", fx.fresh("certs").display()));
    c
}

fn arg(flag: &str, p: &Path) -> String {
    format!("{flag}={}", p.display())
}

/// A config file for a provider, written into the fixture.
fn conf(fx: &Fx, text: &str) -> PathBuf {
    let p = fx.fresh("cloud.conf");
    std::fs::write(&p, text).unwrap();
    p
}

/// An aws.conf that contacts nothing but loopback (and nothing before the checks).
fn aws_conf(fx: &Fx) -> PathBuf {
    conf(
        fx,
        "[Global]\nZone = us-east-1a\nKubernetesClusterID = hostile\n\
         [ServiceOverride \"1\"]\nService = ec2\nRegion = us-east-1\nURL = http://127.0.0.1:1\nSigningRegion = us-east-1\n\
         [ServiceOverride \"2\"]\nService = elasticloadbalancing\nRegion = us-east-1\nURL = http://127.0.0.1:1\nSigningRegion = us-east-1\n\
         [Hypercloud]\nmetadata-endpoint = http://127.0.0.1:1\n",
    )
}

fn aws_ccm(fx: &Fx) -> Command {
    let mut c = ccm_on(fx, "aws");
    c.arg(arg("--cloud-config", &aws_conf(fx)));
    c
}

/// One file a personality reads: how to hand it `bad`, what the error must name, its limit.
struct Case {
    name: &'static str,
    names: &'static str,
    limit: u64,
    command: fn(&Fx, &Path) -> Command,
}

/// Every file every personality reads from a flag, variable or config key.
fn cases() -> Vec<Case> {
    let c = |name, names, command| Case {
        name,
        names,
        limit: MIB,
        command,
    };
    let mut cases = vec![
        // The Kubernetes client, every way it is given.
        c("ccm --kubeconfig", "--kubeconfig", |fx, bad| {
            let mut c = manager(fx, "cloud-controller-manager");
            c.arg(arg("--kubeconfig", bad));
            c
        }),
        c("ccm $HYPERCLOUD_KUBECONFIG", "--kubeconfig", |fx, bad| {
            let mut c = manager(fx, "cloud-controller-manager");
            c.env("HYPERCLOUD_KUBECONFIG", bad);
            c
        }),
        c("ccm $KUBECONFIG", "KUBECONFIG", |fx, bad| {
            let mut c = manager(fx, "cloud-controller-manager");
            c.env("KUBECONFIG", bad);
            c
        }),
        c("ccm ~/.kube/config", "~/.kube/config", |fx, bad| {
            let home = fx.fresh("home");
            std::fs::create_dir_all(home.join(".kube")).unwrap();
            std::os::unix::fs::symlink(bad, home.join(".kube/config")).unwrap();
            let mut c = manager(fx, "cloud-controller-manager");
            c.env("HOME", home);
            c
        }),
        c(
            "kubeconfig certificate-authority",
            "--kubeconfig",
            |fx, bad| {
                let kc = fx.fresh("kubeconfig-ca");
                std::fs::write(&kc, kubeconfig_text(Some(bad))).unwrap();
                let mut c = manager(fx, "cloud-controller-manager");
                c.arg(arg("--kubeconfig", &kc));
                c
            },
        ),
        c(
            "ccm --authentication-kubeconfig",
            "--authentication-kubeconfig",
            |fx, bad| {
                let mut c = ccm(fx);
                c.arg(arg("--authentication-kubeconfig", bad));
                c
            },
        ),
        c(
            "ccm --authorization-kubeconfig",
            "--authorization-kubeconfig",
            |fx, bad| {
                let mut c = ccm(fx);
                c.arg(arg("--authorization-kubeconfig", bad));
                c
            },
        ),
        c(
            "controller-manager --kubeconfig",
            "--kubeconfig",
            |fx, bad| {
                let mut c = manager(fx, "controller-manager");
                c.arg(arg("--kubeconfig", bad));
                c
            },
        ),
        c("kubelet-helper --kubeconfig", "--kubeconfig", |fx, bad| {
            let mut c = hypercloud(
                fx,
                &["kubelet-helper", "--cloud-provider=external", "--once"],
            );
            c.arg(arg("--kubeconfig", bad));
            c
        }),
        c(
            "apiserver-plugin --kubeconfig",
            "--kubeconfig",
            |fx, bad| {
                let mut c = plugin(fx);
                c.arg(arg("--kubeconfig", bad));
                c
            },
        ),
        // --cloud-config, every personality that reads it.
        c("ccm --cloud-config", "--cloud-config", |fx, bad| {
            let mut c = ccm(fx);
            c.arg(arg("--cloud-config", bad));
            c
        }),
        c(
            "kubelet-helper --cloud-config",
            "--cloud-config",
            |fx, bad| {
                let mut c = hypercloud(fx, &["kubelet-helper", "--cloud-provider=fake", "--once"]);
                c.arg(arg("--kubeconfig", &fx.kubeconfig))
                    .arg(arg("--cloud-config", bad));
                c
            },
        ),
        c(
            "apiserver-plugin --cloud-config",
            "--cloud-config",
            |fx, bad| {
                let mut c = plugin(fx);
                c.arg(arg("--kubeconfig", &fx.kubeconfig))
                    .arg(arg("--cloud-config", bad));
                c
            },
        ),
        // The admin server's TLS and client authentication.
        c("ccm --tls-cert-file", "--tls-cert-file", |fx, bad| {
            let mut c = ccm(fx);
            c.arg(arg("--tls-cert-file", bad))
                .arg(arg("--tls-private-key-file", &fx.ok));
            c
        }),
        c(
            "ccm --tls-private-key-file",
            "--tls-private-key-file",
            |fx, bad| {
                let mut c = ccm(fx);
                c.arg(arg("--tls-cert-file", &fx.ok))
                    .arg(arg("--tls-private-key-file", bad));
                c
            },
        ),
        c(
            "controller-manager --tls-cert-file",
            "--tls-cert-file",
            |fx, bad| {
                let mut c = manager(fx, "controller-manager");
                c.arg(arg("--kubeconfig", &fx.kubeconfig))
                    .arg(arg("--tls-cert-file", bad))
                    .arg(arg("--tls-private-key-file", &fx.ok));
                c
            },
        ),
        c("ccm --tls-sni-cert-key", "--tls-sni-cert-key", |fx, bad| {
            let mut c = ccm(fx);
            c.arg(format!(
                "--tls-sni-cert-key={},{}",
                bad.display(),
                fx.ok.display()
            ));
            c
        }),
        c("ccm --client-ca-file", "--client-ca-file", |fx, bad| {
            let mut c = ccm(fx);
            c.arg(arg("--client-ca-file", bad));
            c
        }),
        c(
            "ccm --requestheader-client-ca-file",
            "--requestheader-client-ca-file",
            |fx, bad| {
                let mut c = ccm(fx);
                c.arg(arg("--requestheader-client-ca-file", bad));
                c
            },
        ),
        // The webhook servers.
        c(
            "ccm --webhook-tls-cert-file",
            "--webhook-tls-cert-file",
            |fx, bad| {
                let mut c = ccm(fx);
                c.arg(arg("--webhook-tls-cert-file", bad))
                    .arg(arg("--webhook-tls-private-key-file", &fx.ok));
                c
            },
        ),
        c(
            "ccm --webhook-tls-private-key-file",
            "--webhook-tls-private-key-file",
            |fx, bad| {
                let mut c = ccm(fx);
                c.arg(arg("--webhook-tls-cert-file", &fx.ok))
                    .arg(arg("--webhook-tls-private-key-file", bad));
                c
            },
        ),
        c(
            "apiserver-plugin --tls-cert-file",
            "--tls-cert-file",
            |fx, bad| {
                let mut c = plugin(fx);
                c.arg(arg("--kubeconfig", &fx.kubeconfig))
                    .arg(arg("--tls-cert-file", bad))
                    .arg(arg("--tls-private-key-file", &fx.ok));
                c
            },
        ),
        c(
            "apiserver-plugin --ssh-keyfile (.pub)",
            "--ssh-keyfile",
            |fx, bad| {
                let key = fx.fresh("tunnel");
                let mut public = key.clone().into_os_string();
                public.push(".pub");
                std::os::unix::fs::symlink(bad, public).unwrap();
                let mut c = plugin(fx);
                c.arg(arg("--kubeconfig", &fx.kubeconfig))
                    .arg("--ssh-user=core")
                    .arg(arg("--ssh-keyfile", &key));
                c
            },
        ),
        // Leader migration.
        c(
            "ccm --leader-migration-config",
            "--leader-migration-config",
            |fx, bad| {
                let mut c = manager_electing(fx, "cloud-controller-manager", "fake", true);
                c.arg(format!("--kubeconfig={}", fx.kubeconfig.display()))
                    .arg("--enable-leader-migration")
                    .arg(arg("--leader-migration-config", bad));
                c
            },
        ),
        // The local cloud's own TLS.
        c(
            "local-cloud --tls-cert-file",
            "--tls-cert-file",
            |fx, bad| local_cloud(fx, bad, &fx.ok),
        ),
        c(
            "local-cloud --tls-private-key-file",
            "--tls-private-key-file",
            |fx, bad| local_cloud(fx, &fx.ok, bad),
        ),
        c(
            "local-cloud --tls-client-ca",
            "--tls-client-ca",
            |fx, bad| {
                let state = fx.fresh("local-cloud");
                let mut c = hypercloud(fx, &["local-cloud"]);
                c.arg("--state-dir")
                    .arg(&state)
                    .args([
                        "serve",
                        "--listen=127.0.0.1:0",
                        "--metadata-listen=127.0.0.1:0",
                        "--tls-self-signed",
                    ])
                    .arg(arg("--tls-client-ca", bad));
                c
            },
        ),
        // Providers: files their config or environment names.
        c(
            "openstack [Global] ca-file",
            "[Global] ca-file",
            |fx, bad| {
                let conf = conf(
                    fx,
                    &format!(
                        "[Global]\nauth-url = http://127.0.0.1:1/v3\nusername = u\npassword = p\n\
                     tenant-name = t\ndomain-name = Default\nregion = RegionOne\nca-file = {}\n",
                        bad.display()
                    ),
                );
                let mut c = ccm_on(fx, "openstack");
                c.arg(arg("--cloud-config", &conf));
                c
            },
        ),
        c("vsphere ca-file", "ca-file", |fx, bad| {
            let conf = conf(
                fx,
                &format!(
                    "[Global]\nuser = \"u\"\npassword = \"p\"\nport = \"1\"\ndatacenters = \"DC0\"\n\n\
                     [VirtualCenter \"127.0.0.1\"]\nca-file = \"{}\"\n",
                    bad.display()
                ),
            );
            let mut c = ccm_on(fx, "vsphere");
            c.arg(arg("--cloud-config", &conf));
            c
        }),
        c("aws $AWS_CONFIG_FILE", "AWS_CONFIG_FILE", |fx, bad| {
            let mut c = aws_ccm(fx);
            c.env("AWS_CONFIG_FILE", bad);
            c
        }),
        c(
            "aws $AWS_SHARED_CREDENTIALS_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            |fx, bad| {
                let mut c = aws_ccm(fx);
                c.env("AWS_SHARED_CREDENTIALS_FILE", bad);
                c
            },
        ),
        c("aws ~/.aws/credentials", "~/.aws/credentials", |fx, bad| {
            let home = fx.fresh("home");
            std::fs::create_dir_all(home.join(".aws")).unwrap();
            std::os::unix::fs::symlink(bad, home.join(".aws/credentials")).unwrap();
            let mut c = aws_ccm(fx);
            c.env("HOME", home);
            c
        }),
        c(
            "aws $AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            |fx, bad| {
                let mut c = aws_ccm(fx);
                c.env("AWS_WEB_IDENTITY_TOKEN_FILE", bad)
                    .env("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/x");
                c
            },
        ),
        c(
            "aws web_identity_token_file in AWS_CONFIG_FILE",
            "web_identity_token_file",
            |fx, bad| {
                let config = conf(
                fx,
                &format!(
                    "[default]\nrole_arn = arn:aws:iam::123456789012:role/x\nweb_identity_token_file = {}\n",
                    bad.display()
                ),
            );
                let mut c = aws_ccm(fx);
                c.env("AWS_CONFIG_FILE", config);
                c
            },
        ),
    ];
    cases.push(Case {
        name: "trace render",
        names: "trace file",
        limit: TRACE_LIMIT,
        command: |fx, bad| {
            let mut c = hypercloud(fx, &["trace", "render"]);
            c.arg(bad);
            c
        },
    });
    cases
}

fn local_cloud(fx: &Fx, cert: &Path, key: &Path) -> Command {
    let state = fx.fresh("local-cloud");
    let mut c = hypercloud(fx, &["local-cloud"]);
    c.arg("--state-dir")
        .arg(&state)
        .args([
            "serve",
            "--listen=127.0.0.1:0",
            "--metadata-listen=127.0.0.1:0",
        ])
        .arg(arg("--tls-cert-file", cert))
        .arg(arg("--tls-private-key-file", key));
    c
}

/// Runs every case with each hostile file; collects every failure, so one run shows them all.
fn check_cases(filter: impl Fn(&Case) -> bool) {
    let fx = Fx::new();
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in cases().iter().filter(|c| filter(c)) {
        let big = fx.big(case.limit);
        for (kind, bad, reason) in [
            (
                "/dev/zero",
                PathBuf::from("/dev/zero"),
                "not a regular file (a character device)",
            ),
            ("a FIFO", fx.fifo.clone(), "not a regular file (a FIFO)"),
            ("a file over the limit", big.clone(), "larger than the"),
        ] {
            ran += 1;
            let label = format!("{} with {kind}", case.name);
            let out = run_bounded((case.command)(&fx, &bad), fx.path(), &label);
            let mut wrong = Vec::new();
            if out.code != Some(2) {
                wrong.push(format!("exit code {:?}, not 2", out.code));
            }
            if !out.stderr.contains(case.names) {
                wrong.push(format!("stderr does not name {:?}", case.names));
            }
            if !out.stderr.contains(reason) {
                wrong.push(format!("stderr does not say {reason:?}"));
            }
            if out.peak_kib > MAX_RSS_KIB {
                wrong.push(format!("peak RSS {} KiB > {MAX_RSS_KIB} KiB", out.peak_kib));
            }
            if !wrong.is_empty() {
                failures.push(format!(
                    "{label}: {}\n  stderr: {}",
                    wrong.join("; "),
                    out.stderr.trim().lines().last().unwrap_or_default()
                ));
            }
        }
    }
    assert!(ran > 0, "no case matched");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn is_provider_case(c: &Case) -> bool {
    c.name.starts_with("aws") || c.name.starts_with("openstack") || c.name.starts_with("vsphere")
}

/// Kubernetes client, admin server, webhook, leader migration, SSH key, local cloud and trace
/// files: refused by name, never hanging, bounded.
#[test]
fn hostile_files_of_every_personality_are_refused_by_name() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check_cases(|c| !is_provider_case(c));
}

/// Files that provider configs and SDK environments name: the same.
#[test]
fn hostile_files_named_by_provider_configs_are_refused_by_name() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    check_cases(is_provider_case);
}

/// The table holds every file flag the personalities define: a new `FILE`/`PATH` flag without
/// a case fails here.
#[test]
fn every_file_flag_has_a_case() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let names: Vec<&str> = cases().iter().map(|c| c.names).collect();
    // Flags that name no file read at start: outputs, directories, the trace output.
    let not_inputs = [
        "--ca-bundle-file",
        "--cert-dir",
        "--webhook-cert-dir",
        "--trace-cloud-calls",
        "--output",
        "--config-drive-dir",
        "--state-dir",
    ];
    let mut missing = Vec::new();
    for p in [
        "cloud-controller-manager",
        "controller-manager",
        "kubelet-helper",
        "apiserver-plugin",
        "local-cloud serve",
    ] {
        let mut args: Vec<&str> = p.split(' ').collect();
        args.push("--help");
        let out = Command::new(bin()).args(&args).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        for line in help.lines() {
            let line = line.trim_start();
            let Some(flag) = line.strip_prefix("--") else {
                continue;
            };
            let (flag, rest) = flag.split_once([' ', '=']).unwrap_or((flag, ""));
            let flag = format!("--{flag}");
            let takes_file = rest.starts_with("<FILE>") || rest.starts_with("<PATH>");
            if takes_file && !not_inputs.contains(&flag.as_str()) && !names.contains(&flag.as_str())
            {
                missing.push(format!("{p} {flag}"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "file flags without a hostile case: {missing:?}"
    );
}

/// Credential and setting values the AWS SDK would put into headers: a control character is
/// refused at start-up by name (exit 2; the SDK panicked, exit 101), the secret never echoed.
#[test]
fn aws_values_with_control_characters_are_refused_by_name_without_echoing_them() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let fx = Fx::new();
    let secret = "s3cr3tVALUE";
    let mut failures = Vec::new();
    for (var, value) in [
        ("AWS_SECRET_ACCESS_KEY", format!("{secret}\nx")),
        ("AWS_ACCESS_KEY_ID", format!("{secret}\r")),
        ("AWS_SESSION_TOKEN", format!("{secret}\u{1}")),
        ("AWS_REGION", format!("us-east-1\n{secret}")),
        ("AWS_PROFILE", format!("{secret}\n")),
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:1/\n{secret}")),
        ("AWS_SDK_UA_APP_ID", format!("{secret}\u{7f}")),
    ] {
        let mut c = aws_ccm(&fx);
        c.env("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
            .env(
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            )
            .env(var, &value);
        let out = run_bounded(c, fx.path(), var);
        if out.code != Some(2)
            || !out.stderr.contains(&format!("aws: {var}: "))
            || out.stderr.contains(secret)
        {
            failures.push(format!("{var}: exit {:?}: {}", out.code, out.stderr.trim()));
        }
    }
    // The shared credentials file, line by line.
    let creds = conf(
        &fx,
        &format!("[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = {secret}\u{7}x\n"),
    );
    let mut c = aws_ccm(&fx);
    c.env("AWS_SHARED_CREDENTIALS_FILE", &creds);
    let out = run_bounded(c, fx.path(), "shared credentials");
    if out.code != Some(2)
        || !out.stderr.contains("AWS_SHARED_CREDENTIALS_FILE line 3")
        || out.stderr.contains(secret)
    {
        failures.push(format!(
            "credentials file: exit {:?}: {}",
            out.code,
            out.stderr.trim()
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kubeconfig token with a control character: refused at start naming the flag, not left
/// to fail (or panic) at the first request.
#[test]
fn kubeconfig_token_with_a_control_character_is_refused_by_name() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let fx = Fx::new();
    let kc = fx.fresh("kubeconfig-token");
    std::fs::write(
        &kc,
        kubeconfig_text(None).replace("token: t", "token: \"t\\nInjected: yes\""),
    )
    .unwrap();
    let mut c = manager(&fx, "cloud-controller-manager");
    c.arg(arg("--kubeconfig", &kc));
    let out = run_bounded(c, fx.path(), "token");
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--kubeconfig") && out.stderr.contains("control character"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("Injected"), "{}", out.stderr);
}

/// A real `ssh-keygen -t ed25519` public key.
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEi4f6mL8jK/UVooVHPrQrgtpH7wEnDmdRlOjVSrHcW1 me@host";

/// Writes `public` as `<dir>/NAME.pub`; returns the `--ssh-keyfile` value.
fn keyfile(fx: &Fx, public: &str) -> PathBuf {
    let key = fx.fresh("tunnel");
    let mut p = key.clone().into_os_string();
    p.push(".pub");
    std::fs::write(p, public).unwrap();
    key
}

/// Users and keys that would add entries to a cloud's key list are refused at start, by flag.
#[test]
fn injected_ssh_users_and_keys_are_refused_by_name() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    let fx = Fx::new();
    let good = keyfile(&fx, &format!("{KEY}\n"));
    let mut failures = Vec::new();
    for user in ["evil:x", "core\nroot", "Root", "", "a b", &"a".repeat(33)] {
        let mut c = plugin(&fx);
        c.arg(arg("--kubeconfig", &fx.kubeconfig))
            .arg(format!("--ssh-user={user}"))
            .arg(arg("--ssh-keyfile", &good));
        let out = run_bounded(c, fx.path(), "ssh user");
        if out.code != Some(2) || !out.stderr.contains("--ssh-user: ") {
            failures.push(format!(
                "user {user:?}: exit {:?}: {}",
                out.code,
                out.stderr.trim()
            ));
        }
    }
    for (what, public) in [
        ("two lines", format!("{KEY}\nroot:{KEY}\n")),
        ("a carriage return", format!("{KEY}\rroot:{KEY}")),
        ("not a key", "hello world\n".to_owned()),
        ("an unknown type", KEY.replace("ssh-ed25519 ", "ssh-foo ")),
        (
            "a blob of another type",
            KEY.replace("ssh-ed25519 ", "ssh-rsa "),
        ),
        (
            "a blob that is not base64",
            "ssh-ed25519 !!!! me\n".to_owned(),
        ),
        (
            "a control character in the comment",
            format!("{KEY}\u{1b}[2J\n"),
        ),
    ] {
        let mut c = plugin(&fx);
        c.arg(arg("--kubeconfig", &fx.kubeconfig))
            .arg("--ssh-user=core")
            .arg(arg("--ssh-keyfile", &keyfile(&fx, &public)));
        let out = run_bounded(c, fx.path(), what);
        if out.code != Some(2) || !out.stderr.contains("--ssh-keyfile: ") {
            failures.push(format!(
                "{what}: exit {:?}: {}",
                out.code,
                out.stderr.trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Against the local cloud's GCE dialect: refused keys and users leave the project's `ssh-keys`
/// as it was; a valid key is added once, and restarts (even with another comment) append
/// nothing.
#[cfg(feature = "gce")]
#[test]
fn gce_ssh_keys_are_unchanged_by_refused_keys_and_not_repeated_on_restart() {
    let _group = hypercloud_testenv::group_blocking("hostile");
    use hypercloud_testenv::localcloud::{http, Serve};
    use serde_json::Value;

    let fx = Fx::new();
    let serve = Serve::start(
        bin(),
        &fx.path().join("cloud"),
        &[
            "--availability-zones",
            "us-central1-a",
            "--region",
            "us-central1",
        ],
    );
    let conf = conf(
        &fx,
        &format!(
            "[global]\nproject-id = demo\nlocal-zone = us-central1-a\nnetwork-name = private\n\
             api-endpoint = {}/compute/v1/\n[Hypercloud]\nanonymous = true\nmetadata-endpoint = {}\n",
            serve.api_url, serve.metadata_url
        ),
    );
    let project = || -> (String, Value) {
        let url = format!("{}/compute/v1/projects/demo", serve.api_url);
        let (status, _, body) = http("GET", &url, &[], None);
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        let meta = v["commonInstanceMetadata"].clone();
        let keys = meta["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["key"] == "ssh-keys")
            .and_then(|i| i["value"].as_str())
            .unwrap_or_default()
            .to_owned();
        (keys, meta)
    };
    let plugin_gce = |user: &str, key: &Path| {
        let mut c = plugin_on(&fx, "gce");
        c.arg(arg("--cloud-config", &conf))
            .arg(arg("--kubeconfig", &fx.kubeconfig))
            .arg(format!("--ssh-user={user}"))
            .arg(arg("--ssh-keyfile", key));
        c
    };
    let (before, meta_before) = project();

    // Refused: nothing reaches the cloud.
    let injected = keyfile(&fx, &format!("{KEY}\nroot:{KEY} root@evil\n"));
    let good = keyfile(&fx, &format!("{KEY}\n"));
    for (user, key) in [
        ("core", &injected),
        ("core\nroot", &good),
        ("evil:x", &good),
    ] {
        let out = run_bounded(plugin_gce(user, key), fx.path(), "refused");
        assert_eq!(out.code, Some(2), "{user:?}: {}", out.stderr);
    }
    let (after, meta_after) = project();
    assert_eq!(after, before, "ssh-keys changed by a refused key");
    assert_eq!(meta_after["fingerprint"], meta_before["fingerprint"]);

    // A valid key: added once.
    let entry = format!("core:{KEY} core@core");
    let run_until_settled = |key: &Path, log_line: &str| {
        let log = fx.fresh("plugin.log");
        let mut c = plugin_gce("core", key);
        let out = std::fs::File::create(&log).unwrap();
        c.stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .env("RUST_LOG", "info");
        let mut child = c.spawn().unwrap();
        let started = Instant::now();
        let text = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains(log_line) {
                break text;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("apiserver-plugin exited ({status}) before {log_line:?}:\n{text}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no {log_line:?} within 60 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let _ = child.kill();
        let _ = child.wait();
        text
    };
    run_until_settled(&good, "added an SSH key to the project metadata");
    let (once, meta_once) = project();
    assert_eq!(once.matches(&entry).count(), 1, "{once:?}");
    assert_eq!(once.lines().count(), before.lines().count() + 1, "{once:?}");

    // Restarts, with the same key and with the same key under another comment: nothing added.
    let recommented = keyfile(&fx, &KEY.replace("me@host", "other comment"));
    for key in [&good, &recommented] {
        run_until_settled(key, "SSH key already in the project metadata");
    }
    let (again, meta_again) = project();
    assert_eq!(again, once, "a restart changed ssh-keys");
    assert_eq!(meta_again["fingerprint"], meta_once["fingerprint"]);
}
