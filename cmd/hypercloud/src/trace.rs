//! `trace`: tools for the files written by `--trace-cloud-calls` (pkg/trace).

use std::path::PathBuf;

use anyhow::Context;
use hypercloud_trace::{Format, Options, Order};

/// Tools for cloud-call traces (the JSON lines written with --trace-cloud-calls).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Draw traces as a sequence diagram (Mermaid text or SVG).
    ///
    /// Shows which component called which cloud method with what outcome. Instance-specific
    /// values (UUIDs, IPs, ports, node numbers, times) become placeholders and repeated calls
    /// are drawn once, so two runs of the same scenario give the same bytes.
    Render(RenderArgs),
    /// Show the calls as they happen: a page on loopback with a live sequence diagram.
    ///
    /// Follows trace files as they grow (a directory: every *.jsonl in it, also those that
    /// appear later), and with --kubeconfig the Nodes, Services and PersistentVolumes the calls
    /// change. With --compare DIR (a hack/compare-modes.sh directory) the in-tree and the
    /// external run side by side, their differences explained. The page is compiled into the
    /// binary and makes no request outside its own address.
    Serve(ServeArgs),
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where to serve the page: a loopback address and port (port 0 picks a free one; the
    /// address is printed).
    #[arg(long, value_name = "ADDRESS:PORT", default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// Watch the cluster objects the calls change (Nodes, Services, PersistentVolumes) on the
    /// apiserver this kubeconfig names.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// A hack/compare-modes.sh directory: DIR/in-tree and DIR/external side by side, with
    /// DIR/modes.diff's differences.
    #[arg(long, value_name = "DIR")]
    pub compare: Option<PathBuf>,
    /// The differences upstream has too, each explained by the comment above it
    /// (hack/lib/expected-mode-differences.txt); needs --compare.
    #[arg(long, value_name = "FILE", requires = "compare")]
    pub expected_differences: Option<PathBuf>,
    /// How many events the server keeps (older ones are dropped, and the page says so).
    #[arg(long, value_name = "N", default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(100..=10_000_000))]
    pub max_events: u32,
    /// How often the files are looked at, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub poll_interval_ms: u64,
    /// The page's title.
    #[arg(long, default_value = "hypercloud: cloud calls as they happen")]
    pub title: String,
    /// Trace files or directories, each optionally LAYOUT=PATH; none with --compare.
    #[arg(value_name = "SOURCE", required_unless_present = "compare")]
    pub sources: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// Output format [default: svg when --output ends in .svg, else mermaid].
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Write to this file instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Show this component even if it made no cloud call, with a "no cloud calls" note
    /// (e.g. kubelet-helper with --cloud-provider=external). Repeatable.
    #[arg(long = "participant", value_name = "COMPONENT")]
    pub participants: Vec<String>,
    /// A title for the diagram.
    #[arg(long)]
    pub title: Option<String>,
    /// Message order: canonical (by component, then by method in the order a node or
    /// service meets them; stable across runs) or time (first occurrence; not stable).
    #[arg(long, value_enum, default_value_t = OrderArg::Canonical)]
    pub order: OrderArg,
    /// Trace files (JSON lines), e.g. one per component.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FormatArg {
    Mermaid,
    Svg,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum OrderArg {
    Canonical,
    Time,
}

impl Args {
    /// Whether this command serves until stopped.
    pub fn is_long_running(&self) -> bool {
        matches!(self.command, Command::Serve(_))
    }
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Render(a) => render(a),
        Command::Serve(a) => serve(a).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    use hypercloud_trace::serve::{self, Comparison, Config};
    let (mut sources, comparison) = match &args.compare {
        Some(dir) => {
            let (s, c) = Comparison::read(dir, args.expected_differences.as_deref())?;
            (s, Some(c))
        }
        None => (Vec::new(), None),
    };
    sources.extend(args.sources.iter().map(|s| serve::parse_source(s)));
    let client = match &args.kubeconfig {
        Some(path) => Some(
            hypercloud_options::KubeClientOptions {
                kubeconfig: Some(path.clone()),
                ..Default::default()
            }
            .client()
            .await?,
        ),
        None => None,
    };
    let config = Config {
        listen: args.listen,
        sources,
        comparison,
        max_events: args.max_events as usize,
        title: args.title,
        poll_interval: std::time::Duration::from_millis(args.poll_interval_ms),
    };
    let mut stop = crate::runtime::shutdown_signal();
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    serve::serve(
        config,
        client,
        |addr| {
            use std::io::Write as _;
            println!("trace view: http://{addr}/");
            let _ = std::io::stdout().flush();
        },
        shutdown,
    )
    .await?;
    Ok(())
}

fn render(args: RenderArgs) -> anyhow::Result<()> {
    let RenderArgs {
        format,
        output,
        participants,
        title,
        order,
        files,
    } = args;
    let format = match format {
        Some(FormatArg::Mermaid) => Format::Mermaid,
        Some(FormatArg::Svg) => Format::Svg,
        None if output
            .as_ref()
            .is_some_and(|o| o.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"))) =>
        {
            Format::Svg
        }
        None => Format::Mermaid,
    };
    let options = Options {
        participants,
        title,
        order: match order {
            OrderArg::Canonical => Order::Canonical,
            OrderArg::Time => Order::Time,
        },
    };
    let text = hypercloud_trace::render_files(&files, &options, format)?;
    match output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("--output: cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}
