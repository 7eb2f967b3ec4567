//! Parsing and dispatch: `hypercloud <personality> [flags]`, or a personality's own name as
//! `argv[0]` (a symlink), plus the multi-call helpers (`--list`, `providers`, `version`,
//! `completion`, `trace`). Exit codes: 0 success, 1 runtime failure, 2 bad flags, bad config or an
//! unknown name (as clap and the Kubernetes components do).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Command, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::personality::{self, Invocation, Personality};
use crate::{
    apiserver_plugin, cloud, cloud_controller_manager, controller_manager, csi_driver,
    kubelet_helper, local_cloud, trace, version,
};

const ABOUT: &str =
    "One binary for every Kubernetes component that talks to a cloud, in-tree and external.";

const AFTER_HELP: &str = "\
The personality can also be chosen by the name the binary is invoked under: a symlink named
kubelet-helper, apiserver-plugin, controller-manager (or kube-controller-manager),
cloud-controller-manager, csi-driver or local-cloud runs that personality (hack/install-symlinks.sh DIR).";

/// `hypercloud`.
#[derive(Parser, Debug)]
#[command(name = "hypercloud", version, about = ABOUT, after_help = AFTER_HELP, arg_required_else_help = true)]
struct Cli {
    /// Print the personality names (the names symlinks may have) and exit.
    #[arg(long)]
    list: bool,

    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    KubeletHelper(kubelet_helper::Args),
    ApiserverPlugin(apiserver_plugin::Args),
    #[command(alias = "kube-controller-manager")]
    ControllerManager(controller_manager::Args),
    CloudControllerManager(cloud_controller_manager::Args),
    CsiDriver(csi_driver::Args),
    LocalCloud(local_cloud::Args),
    Trace(trace::Args),
    /// List the cloud providers compiled into this binary.
    Providers,
    /// Print the version, git commit, build date, compiler, the Kubernetes API version and the
    /// compiled-in providers.
    Version(version::Args),
    /// What a personality's `--version` asked to print (not a subcommand of its own).
    #[command(skip)]
    PrintVersion(String),
    /// Print a shell completion script (e.g. `source <(hypercloud completion bash)`).
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

impl Cmd {
    /// The personalities that serve and keep working until stopped, where a panicked task
    /// must end the process ([`exit_on_panic`]). The local cloud is left out: a request that
    /// panics there fails alone (its own supervision is its module's concern).
    fn is_long_running(&self) -> bool {
        matches!(
            self,
            Cmd::KubeletHelper(_)
                | Cmd::ApiserverPlugin(_)
                | Cmd::ControllerManager(_)
                | Cmd::CloudControllerManager(_)
                | Cmd::CsiDriver(_)
        ) || matches!(self, Cmd::Trace(a) if a.is_long_running())
    }
}

/// The full command, with per-personality default adjustments and every personality's
/// `--version`.
fn command() -> Command {
    let mut cmd = Cli::command();
    for (p, _, _) in personality::TABLE {
        // `--version` alone must quit before clap asks for local-cloud's subcommand; without
        // one, parsing its matches still fails naming the missing subcommand.
        cmd = cmd.mut_subcommand(p.name(), |c| {
            let required = c.is_subcommand_required_set() || c.is_arg_required_else_help_set();
            c.arg(version::flag())
                .subcommand_required(false)
                .arg_required_else_help(required)
        });
    }
    cmd.term_width(100)
        .mut_subcommand(
            Personality::ControllerManager.name(),
            controller_manager::adjust,
        )
        .mut_subcommand(
            Personality::ApiserverPlugin.name(),
            apiserver_plugin::adjust,
        )
        .mut_subcommand(Personality::CloudControllerManager.name(), |c| {
            c.about(cloud_controller_manager::about())
        })
}

/// A personality's command on its own, for symlink invocations: same flags, own name.
fn personality_command(p: Personality, invoked_as: &str) -> Command {
    command()
        .find_subcommand(p.name())
        .cloned()
        .unwrap_or_else(|| Command::new(p.name()))
        .name(invoked_as.to_string())
        .bin_name(invoked_as.to_string())
        .term_width(100)
}

/// Entry point: parse `argv`, run, and turn the outcome into an exit code.
pub fn main(argv: Vec<OsString>) -> ExitCode {
    let argv0 = argv.first().cloned().unwrap_or_else(|| "hypercloud".into());
    let parsed = match personality::resolve(&argv0) {
        Invocation::Multicall => parse_multicall(argv),
        Invocation::Personality(p, name) => parse_personality(p, &name, argv).map(|c| (c, name)),
        Invocation::Unknown(name) => {
            eprintln!(
                "hypercloud: unknown personality {name:?} (the name this binary was invoked under); known names: {}. Or run `hypercloud <personality>`.",
                personality::all_names().join(", ")
            );
            return ExitCode::from(2);
        }
    };
    match parsed {
        Ok((cmd, name)) => run(cmd, &name),
        Err(e) => {
            let code = e.exit_code();
            if e.use_stderr() {
                // Clap quotes the value it refused: a huge one makes no line over the limit.
                eprint_bounded(&e.render().to_string());
            } else {
                let _ = e.print();
            }
            ExitCode::from(u8::try_from(code).unwrap_or(2))
        }
    }
}

fn parse_multicall(argv: Vec<OsString>) -> Result<(Cmd, String), clap::Error> {
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(argv)?;
    if let Some((name, m)) = matches.subcommand() {
        if let Some(text) = version::requested(m, name) {
            return Ok((Cmd::PrintVersion(text), name.to_string()));
        }
    }
    let cli = Cli::from_arg_matches(&matches).map_err(|e| match matches.subcommand_name() {
        // An error in a personality's flags (local-cloud without its subcommand) shows that
        // personality's usage.
        Some(name) => match cmd.find_subcommand_mut(name) {
            Some(sub) => e.format(sub),
            None => e.format(&mut cmd),
        },
        None => e.format(&mut cmd),
    })?;
    if cli.list {
        return Ok((Cmd::Version(version::Args::default()), "--list".into()));
    }
    match cli.command {
        Some(c) => {
            let name = matches
                .subcommand_name()
                .unwrap_or("hypercloud")
                .to_string();
            Ok((c, name))
        }
        None => Err(cmd.error(
            clap::error::ErrorKind::MissingSubcommand,
            "a personality or command is required",
        )),
    }
}

fn parse_personality(
    p: Personality,
    invoked_as: &str,
    argv: Vec<OsString>,
) -> Result<Cmd, clap::Error> {
    let mut cmd = personality_command(p, invoked_as);
    let m = cmd.try_get_matches_from_mut(argv)?;
    if let Some(text) = version::requested(&m, invoked_as) {
        return Ok(Cmd::PrintVersion(text));
    }
    let parsed = match p {
        Personality::KubeletHelper => {
            kubelet_helper::Args::from_arg_matches(&m).map(Cmd::KubeletHelper)
        }
        Personality::ApiserverPlugin => {
            apiserver_plugin::Args::from_arg_matches(&m).map(Cmd::ApiserverPlugin)
        }
        Personality::ControllerManager => {
            controller_manager::Args::from_arg_matches(&m).map(Cmd::ControllerManager)
        }
        Personality::CloudControllerManager => {
            cloud_controller_manager::Args::from_arg_matches(&m).map(Cmd::CloudControllerManager)
        }
        Personality::CsiDriver => csi_driver::Args::from_arg_matches(&m).map(Cmd::CsiDriver),
        Personality::LocalCloud => local_cloud::Args::from_arg_matches(&m).map(Cmd::LocalCloud),
    };
    parsed.map_err(|e| e.format(&mut cmd))
}

fn run(cmd: Cmd, name: &str) -> ExitCode {
    if name == "--list" {
        for line in personality::listing() {
            println!("{line}");
        }
        return ExitCode::SUCCESS;
    }
    if cmd.is_long_running() {
        exit_on_panic(name);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hypercloud: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cmd {
            Cmd::KubeletHelper(a) => kubelet_helper::run(a, name).await,
            Cmd::ApiserverPlugin(a) => apiserver_plugin::run(a, name).await,
            Cmd::ControllerManager(a) => controller_manager::run(a, name).await,
            Cmd::CloudControllerManager(a) => cloud_controller_manager::run(a, name).await,
            Cmd::CsiDriver(a) => csi_driver::run(a, name).await,
            Cmd::LocalCloud(a) => local_cloud::run(a).await,
            Cmd::Trace(a) => trace::run(a).await,
            Cmd::Providers => {
                providers();
                Ok(())
            }
            Cmd::Version(a) => version::run(&a),
            Cmd::PrintVersion(text) => {
                print!("{text}");
                Ok(())
            }
            Cmd::Completion { shell } => {
                let mut c = command();
                clap_complete::generate(shell, &mut c, "hypercloud", &mut std::io::stdout());
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint_bounded(&format!("{name}: error: {}", render(&e)));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// Writes `text` to stderr, each line as a log line is written: at most
/// [`hypercloud_options::MAX_LOG_LINE_BYTES`], a cut marked (an error quoting a huge flag
/// value or file name stays one bounded line).
fn eprint_bounded(text: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    for line in text.lines() {
        let _ = err.write_all(&hypercloud_options::bound_line(
            hypercloud_options::LoggingFormat::Text,
            line.as_bytes(),
        ));
    }
}

/// Exit code of a process whose task panicked (Rust's own for a panicking main thread).
pub const PANIC_EXIT_CODE: i32 = 101;

/// A panic anywhere (a controller worker, the kube client's rate-limit layer, leader-election
/// renewal, the admin server) ends the process: logged, then exit 101. Without this a tokio
/// task that panics dies alone, and the process stays up with `/healthz` answering 200 and
/// no work done, which no liveness probe would ever restart. Debug builds (the tests) get
/// this too, unlike `panic = "abort"`.
fn exit_on_panic(name: &str) {
    let name = name.to_string();
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        hypercloud_metrics::mark_panicked();
        default(info);
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        tracing::error!(component = %name, %thread, panic = %info, "a task panicked; exiting");
        eprintln!("{name}: fatal: a task panicked ({info}); exiting with code {PANIC_EXIT_CODE}");
        std::process::exit(PANIC_EXIT_CODE);
    }));
}

fn providers() {
    for p in cloud::registry().list() {
        match p.deprecation {
            None => println!("{:<12} {}", p.name, p.description),
            Some(d) => println!("{:<12} {} (deprecated: {d})", p.name, p.description),
        }
    }
    println!(
        "{:<12} no provider in this component; the cloud-controller-manager does the cloud work",
        "external"
    );
}

/// The error and its causes on one line, as every component prints errors
/// ([`hypercloud_cloudprovider::Chain`]).
fn render(err: &anyhow::Error) -> String {
    hypercloud_cloudprovider::Chain(err.as_ref()).to_string()
}

/// 2 for errors in what the user gave (flags, config files, trace files, names), 1 otherwise.
fn exit_code(err: &anyhow::Error) -> u8 {
    use hypercloud_cloudprovider::Error as P;
    use hypercloud_options::Error as O;
    for cause in err.chain() {
        let usage = cause.is::<cloud::UsageError>()
            || cause.is::<hypercloud_controllers::names::UnknownController>()
            || cause.is::<hypercloud_trace::Error>()
            || cause.is::<hypercloud_trace::live::Error>()
            || cause.is::<hypercloud_trace::compare::Error>()
            || matches!(
                cause.downcast_ref::<hypercloud_trace::serve::Error>(),
                Some(
                    hypercloud_trace::serve::Error::NotLoopback(_)
                        | hypercloud_trace::serve::Error::Source(_)
                        | hypercloud_trace::serve::Error::Compare(_)
                )
            )
            || matches!(
                cause.downcast_ref::<P>(),
                Some(
                    P::UnknownProvider { .. }
                        | P::ReadCloudConfig { .. }
                        | P::InvalidCloudConfig { .. }
                        | P::InvalidSetting { .. }
                        | P::MissingCloudConfig { .. }
                        | P::OpenTraceFile { .. }
                )
            )
            || matches!(
                cause.downcast_ref::<O>(),
                Some(
                    O::InvalidFlag { .. }
                        | O::ParseMaster { .. }
                        | O::LoadKubeconfig { .. }
                        | O::ReadKubeconfig { .. }
                )
            )
            // A file given by flag, key or variable that is missing, not a regular file or
            // over its limit, wherever it was read.
            || cause.is::<hypercloud_cloudprovider::input::InputFileError>()
            || matches!(
                cause.downcast_ref::<hypercloud_metrics::Error>(),
                Some(hypercloud_metrics::Error::ReadTlsFile(_))
            )
            || matches!(
                cause.downcast_ref::<hypercloud_localcloud::Error>(),
                Some(hypercloud_localcloud::Error::ReadInput(_))
            )
            || hypercloud_cloudprovider::input::Refused::is_refusal(cause);
        if usage {
            return 2;
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
        for (p, name, _) in personality::TABLE {
            personality_command(*p, name).debug_assert();
        }
    }

    #[test]
    fn controller_manager_gets_its_own_defaults() {
        let m = command()
            .try_get_matches_from(["hypercloud", "controller-manager"])
            .expect("parse");
        let (_, sub) = m.subcommand().expect("sub");
        let args = controller_manager::Args::from_arg_matches(sub).expect("args");
        assert_eq!(args.controllers.secure_serving.secure_port, 10257);
        assert_eq!(
            args.controllers.leader_election.resource_name,
            "kube-controller-manager"
        );
        let m = command()
            .try_get_matches_from(["hypercloud", "cloud-controller-manager"])
            .expect("parse");
        let (_, sub) = m.subcommand().expect("sub");
        let args = cloud_controller_manager::Args::from_arg_matches(sub).expect("args");
        assert_eq!(args.controllers.secure_serving.secure_port, 10258);
    }

    #[test]
    fn render_skips_repeated_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let e: anyhow::Error = hypercloud_cloudprovider::Error::ReadCloudConfig {
            path: "/x".into(),
            source: io,
        }
        .into();
        assert_eq!(
            render(&e.context("starting")),
            "starting: --cloud-config: cannot read /x: gone"
        );
    }

    #[test]
    fn exit_codes_classify_user_errors() {
        let usage: anyhow::Error = cloud::UsageError("x".into()).into();
        assert_eq!(exit_code(&usage), 2);
        let unknown: anyhow::Error = hypercloud_cloudprovider::Error::UnknownProvider {
            name: "x".into(),
            known: "fake".into(),
        }
        .into();
        assert_eq!(exit_code(&unknown.context("starting")), 2);
        let runtime: anyhow::Error = hypercloud_cloudprovider::Error::NotImplemented.into();
        assert_eq!(exit_code(&runtime), 1);
        let trace: anyhow::Error =
            hypercloud_trace::Error::NothingToDraw { files: "x".into() }.into();
        assert_eq!(exit_code(&trace), 2);
    }
}
