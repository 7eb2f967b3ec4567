//! Build facts for `hypercloud version` and the personalities' `--version=raw`: the git commit,
//! whether the sources differed from it (`gitTreeState` clean or dirty), the build date and the
//! compiler, as upstream's `-ldflags -X k8s.io/component-base/version.*` stamps them. The
//! sources (`cmd/`, `pkg/`, the manifests and the lock file) are watched, so the tree state is
//! that of the sources the binary was built from; hack/local-up.sh reuses a clean build of HEAD. The date is `SOURCE_DATE_EPOCH` when set, else the commit time of HEAD, never the
//! wall clock: two builds of one commit are the same bytes (hack/image.sh checks that). Outside
//! a git checkout (a source archive) the commit is `unknown` unless `HYPERCLOUD_GIT_COMMIT`
//! says.

use std::path::PathBuf;
use std::process::Command;

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn git(args: &[&str]) -> Option<String> {
    output(Command::new("git").args(args))
}

/// `YYYY-MM-DDTHH:MM:SSZ` of seconds since the epoch (proleptic Gregorian, UTC).
fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=HYPERCLOUD_GIT_COMMIT");
    for watched in [
        "src",
        "../../pkg",
        "../../Cargo.toml",
        "../../Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={watched}");
    }
    // A new commit changes HEAD (a branch switch) or the branch's ref (a commit on it).
    if let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--absolute-git-dir"]),
        git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
    ) {
        let mut watch = vec![PathBuf::from(&git_dir).join("HEAD")];
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(PathBuf::from(&common).join(r));
        }
        watch.push(PathBuf::from(&common).join("packed-refs"));
        for p in watch.into_iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }

    let commit = std::env::var("HYPERCLOUD_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    // Tracked or new files under the sources that differ from the commit.
    let status = Command::new("git")
        .args(["status", "--porcelain", "--"])
        .args([
            "../../cmd",
            "../../pkg",
            "../../Cargo.toml",
            "../../Cargo.lock",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let tree_state = match status {
        Some(o) if o.stdout.iter().all(u8::is_ascii_whitespace) => "clean",
        Some(_) => "dirty",
        None => "unknown",
    };
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .or_else(|| git(&["log", "-1", "--format=%ct", "HEAD"]).and_then(|s| s.parse().ok()));
    let date = epoch.map_or_else(|| "unknown".into(), rfc3339);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = output(Command::new(rustc).arg("-V")).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HYPERCLOUD_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=HYPERCLOUD_GIT_TREE_STATE={tree_state}");
    println!("cargo:rustc-env=HYPERCLOUD_BUILD_DATE={date}");
    println!("cargo:rustc-env=HYPERCLOUD_RUSTC_VERSION={rustc_version}");
}
