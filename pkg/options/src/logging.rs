//! `-v/--v` and `--logging-format`: klog-compatible verbosity on top of `tracing`.
//!
//! klog levels map onto tracing levels for hypercloud's own crates: 0-1 info, 2-3 debug
//! (steady-state detail), 4+ trace (every request); dependencies stay at warn until 6.
//! `RUST_LOG`, when set, overrides the mapping.

use clap::{Args, ValueEnum};
use tracing_subscriber::EnvFilter;

use crate::{Error, Result};

/// Log output format (upstream `--logging-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LoggingFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// Logging flags.
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Logging flags")]
pub struct LoggingOptions {
    /// Number for the log level verbosity (klog levels: 2 for steady-state detail, 4 for
    /// debugging, 6 and up for request-level detail from libraries too).
    #[arg(short = 'v', long = "v", value_name = "LEVEL", default_value_t = 0)]
    pub v: u8,

    /// Sets the log format.
    #[arg(long = "logging-format", value_enum, value_name = "FORMAT", default_value_t = LoggingFormat::Text)]
    pub logging_format: LoggingFormat,
}

impl LoggingOptions {
    /// The tracing filter directive for `-v`.
    pub fn filter_directive(&self) -> String {
        let own = match self.v {
            0 | 1 => "info",
            2 | 3 => "debug",
            _ => "trace",
        };
        let deps = match self.v {
            0..=5 => "warn",
            6 | 7 => "info",
            _ => "debug",
        };
        format!("{deps},hypercloud={own},hypercloud_cloudprovider={own},hypercloud_options={own},hypercloud_localcloud={own},hypercloud_testenv={own}")
    }

    /// Installs the global subscriber, writing to stderr.
    pub fn init(&self) -> Result<()> {
        let filter = match std::env::var("RUST_LOG") {
            Ok(v) if !v.is_empty() => EnvFilter::new(v),
            _ => EnvFilter::new(self.filter_directive()),
        };
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        let installed = match self.logging_format {
            LoggingFormat::Text => builder.try_init(),
            LoggingFormat::Json => builder.json().try_init(),
        };
        installed.map_err(|e| Error::InitLogging(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        l: LoggingOptions,
    }

    #[test]
    fn v_accepts_klog_spellings() {
        for args in [
            &["t", "-v", "4"][..],
            &["t", "--v=4"],
            &["t", "-v=4"],
            &["t", "--v", "4"],
        ] {
            assert_eq!(T::try_parse_from(args).expect("parse").l.v, 4, "{args:?}");
        }
        assert!(T::try_parse_from(["t", "--v=loud"]).is_err());
    }

    #[test]
    fn levels_map_to_tracing() {
        let d = |v| {
            LoggingOptions {
                v,
                ..Default::default()
            }
            .filter_directive()
        };
        assert!(d(0).contains("hypercloud=info"));
        assert!(d(2).contains("hypercloud=debug"));
        assert!(d(4).contains("hypercloud=trace"));
        assert!(d(4).starts_with("warn,"));
        assert!(d(8).starts_with("debug,"));
    }

    #[test]
    fn logging_format_is_validated() {
        let t = T::try_parse_from(["t", "--logging-format=json"]).expect("json");
        assert_eq!(t.l.logging_format, LoggingFormat::Json);
        let err = T::try_parse_from(["t", "--logging-format=xml"])
            .err()
            .expect("bad");
        assert!(err.to_string().contains("xml"));
    }
}
