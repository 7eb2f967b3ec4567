//! The upstream CSI tools `hack/csi-tools.sh` builds ([`hypercloud_testenv::csi_tool`]) run, and
//! each reports the version hack/versions.env pins for it: proof the build is the pinned one
//! (a binary built without the upstream Makefile's `-X main.version` says `unknown`).

use hypercloud_testenv::{csi_tool, repo_root};
use std::process::Command;

/// The value of `key` in hack/versions.env (`KEY=value` lines).
fn pin(key: &str) -> String {
    let env =
        std::fs::read_to_string(repo_root().join("hack/versions.env")).expect("hack/versions.env");
    env.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{key} is not in hack/versions.env"))
        .to_owned()
}

/// Runs `tool` with `arg` and returns its stdout, failing the test when it fails.
fn run(tool: &str, arg: &str) -> String {
    let path = csi_tool(tool);
    let out = Command::new(&path)
        .arg(arg)
        .output()
        .expect("run the CSI tool");
    assert!(
        out.status.success(),
        "{tool} {arg}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn csi_sidecars_report_their_pinned_versions() {
    for (tool, key) in [
        ("csi-provisioner", "CSI_PROVISIONER_VERSION"),
        ("csi-attacher", "CSI_ATTACHER_VERSION"),
        ("csi-resizer", "CSI_RESIZER_VERSION"),
    ] {
        // `fmt.Println(os.Args[0], version)`
        let expected = format!("{} {}\n", csi_tool(tool).display(), pin(key));
        assert_eq!(run(tool, "--version"), expected, "{tool} --version");
    }
}

#[test]
fn csi_sanity_reports_its_pinned_version() {
    let expected = format!("Version = {}\n", pin("CSI_SANITY_VERSION"));
    assert_eq!(run("csi-sanity", "-version"), expected);
}
