//! What this build is: `hypercloud version [-o text|json|yaml]` and every personality's
//! `--version[=raw]`, as upstream's components print `k8s.io/component-base/version.Info`
//! (`--version` the short line, `--version=raw` the whole record). The git commit and the build
//! date are stamped by build.rs.

use clap::{Arg, ArgAction, ArgMatches, ValueEnum};
use serde::Serialize;

use crate::cloud;

/// How `hypercloud version` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// One fact a line.
    #[default]
    Text,
    /// The record as JSON (as `kubectl version -o json`).
    Json,
    /// The record as YAML.
    Yaml,
}

/// `hypercloud version`.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct Args {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// The build's facts: upstream's `version.Info` with the Rust compiler in place of Go's, and
/// what a hypercloud build adds (the Kubernetes API it speaks, the providers compiled in).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Info {
    pub git_version: String,
    pub git_commit: String,
    /// `clean` when the sources were the commit's, `dirty` when they differed.
    pub git_tree_state: String,
    pub build_date: String,
    pub rustc_version: String,
    pub compiler: String,
    pub platform: String,
    #[serde(rename = "kubernetesAPI")]
    pub kubernetes_api: String,
    pub providers: Vec<String>,
}

/// This build's facts.
pub fn info() -> Info {
    Info {
        git_version: format!("v{}", env!("CARGO_PKG_VERSION")),
        git_commit: env!("HYPERCLOUD_GIT_COMMIT").into(),
        git_tree_state: env!("HYPERCLOUD_GIT_TREE_STATE").into(),
        build_date: env!("HYPERCLOUD_BUILD_DATE").into(),
        rustc_version: env!("HYPERCLOUD_RUSTC_VERSION").into(),
        compiler: "rustc".into(),
        platform: format!(
            "{}/{}",
            std::env::consts::OS,
            go_arch(std::env::consts::ARCH)
        ),
        kubernetes_api: format!("v1.{}", k8s_openapi::k8s_if_ge_1_34! { "34" }),
        providers: cloud::registry()
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
    }
}

/// Go's name of an architecture, as upstream's `platform` says it (`linux/amd64`).
fn go_arch(rust: &str) -> &str {
    match rust {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

impl Info {
    /// `hypercloud version`'s text: one fact a line.
    pub fn text(&self) -> String {
        format!(
            "hypercloud {}\ngit commit: {} ({})\nbuild date: {}\nrustc: {}\nplatform: {}\n\
             kubernetes API: {}\nproviders: {}\n",
            env!("CARGO_PKG_VERSION"),
            self.git_commit,
            self.git_tree_state,
            self.build_date,
            self.rustc_version,
            self.platform,
            self.kubernetes_api,
            self.providers.join(", ")
        )
    }

    /// `--version=raw`: the whole record on one line, as upstream prints Go's `%#v` of it.
    pub fn raw(&self) -> String {
        format!(
            "version.Info{{GitVersion:{:?}, GitCommit:{:?}, GitTreeState:{:?}, BuildDate:{:?}, \
             RustcVersion:{:?}, Compiler:{:?}, Platform:{:?}, KubernetesAPI:{:?}, Providers:{:?}}}",
            self.git_version,
            self.git_commit,
            self.git_tree_state,
            self.build_date,
            self.rustc_version,
            self.compiler,
            self.platform,
            self.kubernetes_api,
            self.providers.join(",")
        )
    }
}

/// Prints `hypercloud version`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let info = info();
    match args.output {
        Output::Text => print!("{}", info.text()),
        Output::Json => println!("{}", serde_json::to_string_pretty(&info)?),
        Output::Yaml => print!("{}", serde_yaml::to_string(&info)?),
    }
    Ok(())
}

/// The flag's id and name.
pub const FLAG: &str = "version";

/// The `--version` flag every personality has (upstream component-base's `verflag`).
pub fn flag() -> Arg {
    Arg::new(FLAG)
        .long(FLAG)
        .value_name("version")
        .num_args(0..=1)
        .require_equals(true)
        .default_missing_value("true")
        .value_parser(["true", "false", "raw"])
        .action(ArgAction::Set)
        .help(
            "--version, --version=raw prints version information and quits (upstream's \
             --version=vX.Y.Z, which sets the reported version, is not supported)",
        )
        .help_heading("Global flags")
}

/// What `--version` asks of a personality invoked as `name` (its matches `m`): the text to
/// print before quitting, or `None` to run.
pub fn requested(m: &ArgMatches, name: &str) -> Option<String> {
    match m.try_get_one::<String>(FLAG).ok().flatten()?.as_str() {
        "true" => Some(format!("{name} {}\n", env!("CARGO_PKG_VERSION"))),
        "raw" => Some(format!("{}\n", info().raw())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_names_this_build() {
        let i = info();
        assert_eq!(i.git_version, concat!("v", env!("CARGO_PKG_VERSION")));
        assert!(i.rustc_version.starts_with("rustc "), "{}", i.rustc_version);
        assert!(
            i.build_date == "unknown" || i.build_date.ends_with('Z'),
            "{}",
            i.build_date
        );
        assert_eq!(i.kubernetes_api, "v1.34");
        let raw = i.raw();
        assert!(raw.starts_with("version.Info{GitVersion:\"v"), "{raw}");
        let json = serde_json::to_value(&i).expect("the record serialises");
        for key in [
            "gitVersion",
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "rustcVersion",
            "platform",
            "kubernetesAPI",
            "providers",
        ] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
    }
}
