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

pub fn run(args: Args) -> anyhow::Result<()> {
    let Command::Render(RenderArgs {
        format,
        output,
        participants,
        title,
        order,
        files,
    }) = args.command;
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
