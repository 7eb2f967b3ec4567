//! Runs the built binary under every personality name (symlinks) and as subcommands, with
//! good and bad input, and checks exit codes and messages.
//!
//! The controller managers and the kubelet-helper print their start-up report, then build the
//! Kubernetes client; here they get a kubeconfig that does not exist, so they stop right after
//! the report with exit 2 naming it (tests/it/ccm_runtime.rs and tests/it/kubelet_helper.rs run
//! them for real).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::BIN;

const FAKE_CONFIG: &str = "\
region: RegionOne
zone: nova
instances:
  - name: node-1
    instanceType: m1.small
    addresses: [{type: InternalIP, address: 10.0.0.11}]
disabled: [routes]
";

/// Makes the components that need a cluster stop after their report (see the module docs).
const NO_KUBECONFIG: &str = "--kubeconfig=/nonexistent/kubeconfig";

/// Whether `name` needs the API server after its report: the controller managers (which run
/// until signalled), the kubelet-helper (which registers its Node) and the apiserver-plugin
/// (whose checks read StorageClasses and PVs).
fn needs_cluster(name: &str) -> bool {
    name.ends_with("controller-manager") || name == "kubelet-helper" || name == "apiserver-plugin"
}

/// A component that printed its report and then stopped at the missing kubeconfig.
fn assert_stopped_after_report(r: &Run, what: &str) {
    assert_eq!(r.code, 2, "{what}: {}", r.stderr);
    assert!(
        r.stderr
            .contains("--kubeconfig: cannot load /nonexistent/kubeconfig"),
        "{what}: {}",
        r.stderr
    );
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(program: &Path, args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(program)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("HYPERCLOUD_CLOUD_PROVIDER")
        .env_remove("HYPERCLOUD_CLOUD_CONFIG")
        .output()
        .expect("run hypercloud");
    Run {
        code: status.code().expect("exit code"),
        stdout: String::from_utf8(stdout).expect("utf8"),
        stderr: String::from_utf8(stderr).expect("utf8"),
    }
}

fn hc(args: &[&str]) -> Run {
    run(Path::new(BIN), args)
}

/// A temp dir with symlinks to the binary under `names`, made by hack/install-symlinks.sh.
fn symlinks() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = hypercloud_testenv::repo_root().join("hack/install-symlinks.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(dir.path())
        .env("HYPERCLOUD_BIN", BIN)
        .output()
        .expect("run install-symlinks.sh");
    assert!(
        out.status.success(),
        "install-symlinks.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.path().to_path_buf();
    (dir, path)
}

fn config_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write config");
    p
}

#[test]
fn every_symlink_name_runs_its_personality() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let (_guard, dir) = symlinks();
    let cfg = config_file(&dir, "fake.yaml", FAKE_CONFIG);
    let cfg_flag = format!("--cloud-config={}", cfg.display());
    for name in [
        "kubelet-helper",
        "apiserver-plugin",
        "controller-manager",
        "kube-controller-manager",
        "cloud-controller-manager",
    ] {
        let link = dir.join(name);
        assert!(link.is_symlink(), "{name} link missing");
        let mut args = vec!["--cloud-provider=fake", cfg_flag.as_str()];
        if needs_cluster(name) {
            args.push(NO_KUBECONFIG);
        }
        let r = run(&link, &args);
        if needs_cluster(name) {
            assert_stopped_after_report(&r, name);
        } else {
            assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        }
        assert!(
            r.stdout
                .starts_with(&format!("{name}: cloud provider \"fake\" initialized")),
            "{name}: {}",
            r.stdout
        );
        assert!(
            r.stdout.contains("  routes         not supported"),
            "{name}: {}",
            r.stdout
        );
        assert!(
            r.stdout.contains("  load-balancer  supported"),
            "{name}: {}",
            r.stdout
        );
        // The symlink's help names the symlink, not `hypercloud <sub>`.
        let help = run(&link, &["--help"]);
        assert_eq!(help.code, 0);
        assert!(
            help.stdout.contains(&format!("Usage: {name} [OPTIONS]")),
            "{name}: {}",
            help.stdout
        );
    }
    let lc = run(&dir.join("local-cloud"), &["--help"]);
    assert_eq!(lc.code, 0, "{}", lc.stderr);
    assert!(lc.stdout.contains("Usage: local-cloud"), "{}", lc.stdout);
    assert!(lc.stdout.contains("serve"), "{}", lc.stdout);
}

/// `hypercloud version` in each format, and every personality's `--version[=raw]` under its
/// symlink name and as a subcommand, as upstream components print them; a value other than
/// true, false or raw is refused by name.
#[test]
fn version_as_a_command_and_as_every_personality_flag() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let (_guard, dir) = symlinks();
    let version = env!("CARGO_PKG_VERSION");
    let text = hc(&["version"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    for line in [
        "git commit: ",
        "build date: ",
        "rustc: rustc ",
        "platform: linux/",
    ] {
        assert!(text.stdout.contains(line), "{line:?} in {}", text.stdout);
    }
    let json = hc(&["version", "-o", "json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("version -o json");
    assert_eq!(v["gitVersion"], format!("v{version}"));
    assert_eq!(v["kubernetesAPI"], "v1.34");
    assert!(
        v["providers"].as_array().expect("providers").len() >= 2,
        "{v}"
    );
    // The commit is this checkout's (what build.rs stamped), unless built outside git.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(hypercloud_testenv::repo_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if let Some(head) = head {
        // A commit made since the binary was built may have moved HEAD on: a hex commit is
        // all that can be required then.
        let commit = v["gitCommit"].as_str().expect("gitCommit");
        assert!(
            commit == head || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())),
            "{commit} (HEAD {head})"
        );
    }
    let yaml = hc(&["version", "--output=yaml"]);
    assert!(yaml.stdout.contains("gitVersion: v"), "{}", yaml.stdout);
    let bad = hc(&["version", "-o", "xml"]);
    assert_eq!(bad.code, 2);

    for name in [
        "kubelet-helper",
        "apiserver-plugin",
        "controller-manager",
        "cloud-controller-manager",
        "local-cloud",
    ] {
        let short = run(&dir.join(name), &["--version"]);
        assert_eq!(short.code, 0, "{name}: {}", short.stderr);
        assert_eq!(short.stdout, format!("{name} {version}\n"));
        let sub = hc(&[name, "--version"]);
        assert_eq!(sub.stdout, format!("{name} {version}\n"), "{}", sub.stderr);
        let raw = run(&dir.join(name), &["--version=raw"]);
        assert_eq!(raw.code, 0, "{name}: {}", raw.stderr);
        assert!(
            raw.stdout
                .starts_with(&format!("version.Info{{GitVersion:\"v{version}\"")),
            "{name}: {}",
            raw.stdout
        );
        let refused = run(&dir.join(name), &["--version=v1.2.3"]);
        assert_eq!(refused.code, 2, "{name}: {}", refused.stdout);
        assert!(refused.stderr.contains("--version"), "{}", refused.stderr);
    }
    // local-cloud without its subcommand still says so.
    let lc = hc(&["local-cloud", "--v=1"]);
    assert_eq!(lc.code, 2);
    assert!(lc.stderr.contains("subcommand"), "{}", lc.stderr);
}

#[test]
fn subcommands_run_the_same_personalities() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = config_file(dir.path(), "fake.yaml", FAKE_CONFIG);
    let cfg_flag = format!("--cloud-config={}", cfg.display());
    let r = hc(&[
        "cloud-controller-manager",
        "--cloud-provider=fake",
        &cfg_flag,
        "--controllers=*,-route",
        NO_KUBECONFIG,
    ]);
    assert_stopped_after_report(&r, "cloud-controller-manager");
    assert!(
        r.stdout
            .contains("cloud-controller-manager: cloud provider \"fake\""),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("service-lb-controller            enabled"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("node-route-controller"), "{}", r.stdout);
    // The alias works as a subcommand too.
    let r = hc(&[
        "kube-controller-manager",
        "--cloud-provider=fake",
        &cfg_flag,
        NO_KUBECONFIG,
    ]);
    assert_stopped_after_report(&r, "kube-controller-manager");
    assert!(
        !r.stdout.contains("cloud-node-controller "),
        "KCM has no cloud-node controller: {}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("cloud-node-lifecycle-controller  enabled"),
        "{}",
        r.stdout
    );
}

#[test]
fn external_mode_per_personality() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let r = hc(&["kubelet-helper", "--cloud-provider=external", NO_KUBECONFIG]);
    assert_stopped_after_report(&r, "kubelet-helper");
    assert!(
        r.stdout
            .contains("node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule"),
        "{}",
        r.stdout
    );
    let r = hc(&[
        "controller-manager",
        "--cloud-provider=external",
        NO_KUBECONFIG,
    ]);
    assert_stopped_after_report(&r, "controller-manager");
    assert!(r.stdout.contains("cloud controllers: none"), "{}", r.stdout);
    let r = hc(&["cloud-controller-manager", "--cloud-provider=external"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--cloud-provider=external"),
        "{}",
        r.stderr
    );
    let r = hc(&["apiserver-plugin", "--cloud-provider=external"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--cloud-provider=external"),
        "{}",
        r.stderr
    );
    let r = hc(&["cloud-controller-manager"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--cloud-provider cannot be empty"),
        "{}",
        r.stderr
    );
}

#[test]
fn multicall_helpers() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let r = hc(&["--list"]);
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        vec![
            "kubelet-helper",
            "apiserver-plugin",
            "controller-manager (alias: kube-controller-manager)",
            "cloud-controller-manager",
            "csi-driver",
            "local-cloud"
        ]
    );
    let r = hc(&["providers"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.lines().any(|l| l.starts_with("fake ")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.lines().any(|l| l.starts_with("external ")),
        "{}",
        r.stdout
    );
    let r = hc(&["version"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout
            .starts_with(&format!("hypercloud {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("kubernetes API: v1.34"), "{}", r.stdout);
    let r = hc(&["completion", "bash"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("cloud-controller-manager"),
        "completion lacks subcommands"
    );
    assert!(
        r.stdout.contains("--cloud-provider"),
        "completion lacks flags"
    );
    let r = hc(&[]);
    assert_eq!(r.code, 2, "no arguments is a usage error");
    assert!(r.stderr.contains("Usage: hypercloud"), "{}", r.stderr);
}

#[test]
fn unknown_provider_lists_compiled_in_providers_and_exits_2() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let r = hc(&["cloud-controller-manager", "--cloud-provider=nope"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("unknown cloud provider \"nope\"; compiled-in providers: "),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("fake"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"));
}

#[test]
fn missing_cloud_config_is_named() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let r = hc(&[
        "kubelet-helper",
        "--cloud-provider=fake",
        "--cloud-config=/nonexistent/cloud.yaml",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("--cloud-config: cannot read /nonexistent/cloud.yaml"),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("No such file").count(),
        1,
        "cause printed once: {}",
        r.stderr
    );
}

#[test]
fn unreadable_cloud_config_is_named() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let dir = tempfile::tempdir().expect("tmp");
    // A directory cannot be read as a file, even by root.
    let r = hc(&[
        "kubelet-helper",
        "--cloud-provider=fake",
        &format!("--cloud-config={}", dir.path().display()),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("cannot read {}", dir.path().display())),
        "{}",
        r.stderr
    );
}

#[test]
fn invalid_cloud_config_names_file_line_and_field() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let dir = tempfile::tempdir().expect("tmp");
    let bad = config_file(
        dir.path(),
        "bad.yaml",
        "region: r1\ninstances:\n  - name: n1\n    shutdwn: true\n",
    );
    let r = hc(&[
        "controller-manager",
        "--cloud-provider=fake",
        &format!("--cloud-config={}", bad.display()),
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains(&bad.display().to_string()),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("shutdwn"), "{}", r.stderr);
    assert!(r.stderr.contains("line 4"), "{}", r.stderr);
    let bad = config_file(dir.path(), "bad.json", "{\"region\": 5, ");
    let r = hc(&[
        "cloud-controller-manager",
        "--cloud-provider=fake",
        &format!("--cloud-config={}", bad.display()),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("bad.json"), "{}", r.stderr);
}

#[test]
fn unknown_personality_name_lists_names() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let dir = tempfile::tempdir().expect("tmp");
    let link = dir.path().join("kube-scheduler");
    std::os::unix::fs::symlink(BIN, &link).expect("symlink");
    let r = run(&link, &[]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("unknown personality \"kube-scheduler\""),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("cloud-controller-manager"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("kube-controller-manager"), "{}", r.stderr);
}

/// Numbers that do not fit, bad CIDRs and oversized or wrong files: exit 2 before anything
/// starts, naming the flag (or file, or key) and the allowed range; never a panic.
#[test]
fn out_of_range_inputs_are_usage_errors_naming_flag_and_range() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let dir = tempfile::tempdir().expect("tmp");
    let ccm = |extra: &[&str]| {
        let mut args = vec![
            "cloud-controller-manager",
            "--cloud-provider=fake",
            NO_KUBECONFIG,
        ];
        args.extend_from_slice(extra);
        hc(&args)
    };
    for (args, named, range) in [
        (
            &["--kube-api-qps=1e-30"][..],
            "--kube-api-qps",
            "0.01 to 1000000",
        ),
        (&["--kube-api-qps=inf"], "--kube-api-qps", "0.01 to 1000000"),
        (&["--kube-api-qps=NaN"], "--kube-api-qps", "0.01 to 1000000"),
        (
            &["--kube-api-burst=4000000000"],
            "--kube-api-burst",
            "1 to 1000000",
        ),
        (
            &["--leader-elect-lease-duration=9999999999h"],
            "--leader-elect-lease-duration",
            "2562047h47m16.854775807s",
        ),
        (
            &["--node-monitor-period=99999999999999999999999999999s"],
            "--node-monitor-period",
            "out of range",
        ),
        (
            &["--route-reconciliation-period=-5s"],
            "--route-reconciliation-period",
            "negative",
        ),
        (
            &["--cluster-cidr=10.0.0.0/33"],
            "--cluster-cidr",
            "10.0.0.0/33",
        ),
        (
            &["--cluster-cidr=10.244.0.0/16,banana"],
            "--cluster-cidr",
            "banana",
        ),
    ] {
        let r = ccm(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(named),
            "{args:?} should name {named}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains(range),
            "{args:?} should give {range}: {}",
            r.stderr
        );
        // Before anything starts: no start-up report.
        assert!(
            !r.stdout.contains("capabilities:"),
            "{args:?}: {}",
            r.stdout
        );
    }
    let r = hc(&["kubelet-helper", "--kube-api-qps=1e-30"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--kube-api-qps"), "{}", r.stderr);

    let big = dir.path().join("big.yaml");
    std::fs::write(&big, format!("region: r\n#{}\n", "x".repeat(1 << 20))).expect("write");
    let unknown = config_file(dir.path(), "hook.yaml", "panicOn: [teleport]\n");
    let migration = config_file(
        dir.path(),
        "migration.yaml",
        "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: Bad_Name\ncontrollerLeaders:\n  - {name: service, component: kcm}\n  - {name: service, component: '*'}\n",
    );
    for (args, wants) in [
        (
            vec![format!("--cloud-config={}", big.display())],
            vec![big.display().to_string(), "1 MiB".into()],
        ),
        (
            vec![format!("--cloud-config={}", unknown.display())],
            vec!["panicOn: unknown method \"teleport\"".to_string()],
        ),
        (
            vec![
                "--enable-leader-migration".into(),
                format!("--leader-migration-config={}", migration.display()),
            ],
            vec![
                "leaderName: Invalid value: \"Bad_Name\"".to_string(),
                "controllerLeaders[0].component: Unsupported value: \"kcm\"".into(),
                "controllerLeaders[1].name: Duplicate value: \"service\"".into(),
            ],
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = ccm(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        for want in wants {
            assert!(
                r.stderr.contains(&want),
                "{args:?} should say {want}: {}",
                r.stderr
            );
        }
    }
}

#[test]
fn bad_flags_are_usage_errors() {
    let _group = hypercloud_testenv::group_blocking("cli");
    for args in [
        &[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--leader-elect-lease-duration=15",
        ][..],
        &[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--no-such-flag",
        ],
        &[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--controllers=*,-teleport",
        ],
        &[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--allocate-node-cidrs",
        ],
        // Node IPAM: only the range allocator; upstream's checks of the CIDR flags.
        &[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--cidr-allocator-type=CloudAllocator",
        ],
        &[
            "controller-manager",
            "--cloud-provider=fake",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.0.0.0/8,10.1.0.0/16",
        ],
        &[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=fd00::/32",
            "--node-cidr-mask-size-ipv6=64",
        ],
        &[
            "cloud-controller-manager",
            "--cloud-provider=fake",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--node-cidr-mask-size-ipv4=33",
        ],
        &["kubelet-helper", "--kube-api-qps=-1"],
        &["kubelet-helper", "--logging-format=xml"],
    ] {
        let r = hc(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{args:?}: {}", r.stderr);
        let flag = args.last().expect("flag").split('=').next().expect("name");
        let named = if flag == "--controllers" {
            "teleport"
        } else if flag == "--allocate-node-cidrs" {
            "--cluster-cidr"
        } else {
            flag
        };
        assert!(
            r.stderr.contains(named),
            "{args:?} should name {named}: {}",
            r.stderr
        );
    }
}

#[test]
fn trace_cloud_calls_writes_json_lines_naming_the_component() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = config_file(dir.path(), "fake.yaml", FAKE_CONFIG);
    let trace = dir.path().join("calls.jsonl");
    for component in ["kubelet-helper", "cloud-controller-manager"] {
        let cloud_config = format!("--cloud-config={}", cfg.display());
        let trace_flag = format!("--trace-cloud-calls={}", trace.display());
        let mut args = vec![
            component,
            "--cloud-provider=fake",
            cloud_config.as_str(),
            trace_flag.as_str(),
        ];
        if needs_cluster(component) {
            args.push(NO_KUBECONFIG);
        }
        let r = hc(&args);
        if needs_cluster(component) {
            assert_stopped_after_report(&r, component);
        } else {
            assert_eq!(r.code, 0, "{}", r.stderr);
        }
    }
    let text = std::fs::read_to_string(&trace).expect("trace written");
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(records.len(), 2, "{text}");
    assert_eq!(records[0]["component"], "kubelet-helper");
    assert_eq!(records[1]["component"], "cloud-controller-manager");
    for r in &records {
        assert_eq!(r["provider"], "fake");
        assert_eq!(r["method"], "initialize");
        assert!(r["latency_ms"].as_f64().expect("latency") >= 0.0);
    }
    let r = hc(&[
        "cloud-controller-manager",
        "--cloud-provider=fake",
        &format!(
            "--trace-cloud-calls={}",
            dir.path().join("no/such/dir/t.jsonl").display()
        ),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--trace-cloud-calls"), "{}", r.stderr);
}

#[test]
fn cloud_node_manager_refuses_bad_flags_and_config_by_name() {
    let _group = hypercloud_testenv::group_blocking("cli");
    let dir = tempfile::tempdir().expect("tmp");
    let cnm = |args: &[&str]| {
        let mut all = vec!["kubelet-helper", "cloud-node-manager", NO_KUBECONFIG];
        all.extend_from_slice(args);
        hc(&all)
    };
    let r = cnm(&[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--cloud-config"), "{}", r.stderr);
    let r = cnm(&["--cloud-config=/nonexistent/azure.json"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--cloud-config: cannot read /nonexistent/azure.json"),
        "{}",
        r.stderr
    );
    let broken = config_file(dir.path(), "broken.json", "{\"subscriptionId\": ");
    let r = cnm(&[&format!("--cloud-config={}", broken.display())]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("broken.json"), "{}", r.stderr);
    let partial = config_file(dir.path(), "partial.json", "{\"tenantId\": \"t\"}");
    let r = cnm(&[&format!("--cloud-config={}", partial.display())]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("subscriptionId is required"),
        "{}",
        r.stderr
    );
    for bad in [
        "--use-instance-metadata=maybe",
        "--node-status-update-frequency=soon",
        "--wait-routes=yes please",
        "--no-such-flag",
    ] {
        let r = cnm(&["--cloud-config=/nonexistent/azure.json", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        let flag = bad.split('=').next().expect("flag");
        assert!(r.stderr.contains(flag), "{bad}: {}", r.stderr);
    }
    // A good file, then the missing kubeconfig stops it.
    let good = config_file(
        dir.path(),
        "azure.json",
        "{\"tenantId\": \"t\", \"subscriptionId\": \"s\", \"resourceGroup\": \"g\", \"location\": \"l\", \"aadClientId\": \"c\", \"aadClientSecret\": \"x\"}",
    );
    let r = cnm(&[&format!("--cloud-config={}", good.display())]);
    assert_stopped_after_report(&r, "cloud-node-manager");
}
