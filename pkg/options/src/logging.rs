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
            .with_writer(BoundedStderr {
                format: self.logging_format,
            });
        let installed = match self.logging_format {
            LoggingFormat::Text => builder.try_init(),
            LoggingFormat::Json => builder.json().try_init(),
        };
        installed.map_err(|e| Error::InitLogging(e.to_string()))
    }
}

/// The longest log line written, in bytes (newline included); longer events are cut and
/// marked, so no input (a huge error body, a flood of headers) makes a line without bound.
pub const MAX_LOG_LINE_BYTES: usize = 16 * 1024;
/// In JSON lines that would be too long, each string value is cut to this many bytes first,
/// so the line stays one valid JSON object with every field present.
pub const MAX_LOG_VALUE_BYTES: usize = 2 * 1024;

/// stderr, one bounded line per event.
#[derive(Clone, Copy, Debug)]
struct BoundedStderr {
    format: LoggingFormat,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BoundedStderr {
    type Writer = BoundedLine;

    fn make_writer(&'a self) -> Self::Writer {
        BoundedLine {
            format: self.format,
        }
    }
}

/// Writes each formatted event (the formatter hands over one whole event per `write`) as
/// [`bound_line`] makes it.
struct BoundedLine {
    format: LoggingFormat,
}

impl std::io::Write for BoundedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = bound_line(self.format, buf);
        std::io::stderr().lock().write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The line written for one formatted event: newlines inside a text event escaped (a value
/// cannot forge a line of its own), and at most [`MAX_LOG_LINE_BYTES`], the cut marked with
/// `…[truncated N bytes]`. A JSON event too long has its string values cut instead, so it
/// stays valid JSON; if it is still too long, only its timestamp, level, target and a cut
/// message remain, with `"truncated": true`.
pub fn bound_line(format: LoggingFormat, event: &[u8]) -> Vec<u8> {
    let body = event.strip_suffix(b"\n").unwrap_or(event);
    let mut line = match format {
        LoggingFormat::Text => {
            let mut escaped = Vec::with_capacity(body.len().min(MAX_LOG_LINE_BYTES) + 32);
            for &b in body {
                match b {
                    b'\n' => escaped.extend_from_slice(b"\\n"),
                    b'\r' => escaped.extend_from_slice(b"\\r"),
                    _ => escaped.push(b),
                }
                if escaped.len() > MAX_LOG_LINE_BYTES {
                    break;
                }
            }
            let total = body.len();
            cut_text(escaped, total, MAX_LOG_LINE_BYTES - 1)
        }
        LoggingFormat::Json if body.len() < MAX_LOG_LINE_BYTES => body.to_vec(),
        LoggingFormat::Json => bound_json(body),
    };
    line.push(b'\n');
    line
}

/// `bytes` (the start of something `total` bytes long) cut to at most `max` bytes at a
/// character boundary, with the marker, when it does not fit.
fn cut_text(mut bytes: Vec<u8>, total: usize, max: usize) -> Vec<u8> {
    if bytes.len() <= max {
        return bytes;
    }
    let mut end = max.saturating_sub(48);
    while end > 0 && (bytes[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    bytes.truncate(end);
    bytes.extend_from_slice(format!("…[truncated {} bytes]", total.saturating_sub(end)).as_bytes());
    bytes
}

fn cut_str(s: &str, max: usize) -> String {
    String::from_utf8(cut_text(s.as_bytes().to_vec(), s.len(), max))
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn bound_json(body: &[u8]) -> Vec<u8> {
    fn cut_values(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) if s.len() > MAX_LOG_VALUE_BYTES => {
                *s = cut_str(s, MAX_LOG_VALUE_BYTES);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(cut_values),
            serde_json::Value::Object(map) => map.values_mut().for_each(cut_values),
            _ => {}
        }
    }
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(body) else {
        // Not JSON (cannot happen with the JSON formatter): cut as text.
        return cut_text(
            body[..body.len().min(MAX_LOG_LINE_BYTES)].to_vec(),
            body.len(),
            MAX_LOG_LINE_BYTES - 1,
        );
    };
    cut_values(&mut value);
    let line = value.to_string().into_bytes();
    if line.len() < MAX_LOG_LINE_BYTES {
        return line;
    }
    let keep = |k: &str| value.get(k).cloned().unwrap_or(serde_json::Value::Null);
    let message = value
        .pointer("/fields/message")
        .and_then(|m| m.as_str())
        .map(|m| cut_str(m, 1024))
        .unwrap_or_default();
    serde_json::json!({
        "timestamp": keep("timestamp"),
        "level": keep("level"),
        "target": keep("target"),
        "fields": {"message": message},
        "truncated": true,
    })
    .to_string()
    .into_bytes()
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
    fn long_and_multi_line_events_become_one_bounded_line() {
        let huge = "x".repeat(10 * MAX_LOG_LINE_BYTES);
        let text = format!("2026 WARN hypercloud: body={huge}\n");
        let line = bound_line(LoggingFormat::Text, text.as_bytes());
        assert!(line.len() <= MAX_LOG_LINE_BYTES, "{}", line.len());
        let line = String::from_utf8(line).expect("utf-8");
        assert!(line.starts_with("2026 WARN hypercloud: body=xxx"));
        assert!(
            line.ends_with("bytes]\n") && line.contains("…[truncated "),
            "{}",
            &line[line.len() - 60..]
        );
        assert_eq!(line.matches('\n').count(), 1);

        let forged = "INFO ok=1\nERROR hypercloud: forged\r\n";
        let line = bound_line(LoggingFormat::Text, forged.as_bytes());
        assert_eq!(line, b"INFO ok=1\\nERROR hypercloud: forged\\r\n");

        let short = "INFO fine\n";
        assert_eq!(
            bound_line(LoggingFormat::Text, short.as_bytes()),
            short.as_bytes()
        );

        // Multi-byte characters are cut at a boundary.
        let wide = format!("{}\n", "é".repeat(MAX_LOG_LINE_BYTES));
        let line = bound_line(LoggingFormat::Text, wide.as_bytes());
        assert!(line.len() <= MAX_LOG_LINE_BYTES);
        String::from_utf8(line).expect("still UTF-8");
    }

    #[test]
    fn long_json_events_stay_valid_json_with_their_fields() {
        let event = serde_json::json!({
            "timestamp": "t", "level": "WARN", "target": "hypercloud",
            "fields": {"message": "request failed", "body": "y".repeat(100_000), "status": 500},
        });
        let line = bound_line(LoggingFormat::Json, format!("{event}\n").as_bytes());
        assert!(line.len() <= MAX_LOG_LINE_BYTES, "{}", line.len());
        let v: serde_json::Value = serde_json::from_slice(&line).expect("valid JSON");
        assert_eq!(v["fields"]["message"], "request failed");
        assert_eq!(v["fields"]["status"], 500);
        let body = v["fields"]["body"].as_str().expect("body");
        assert!(
            body.len() <= MAX_LOG_VALUE_BYTES && body.contains("…[truncated "),
            "{body}"
        );

        let many: serde_json::Map<String, serde_json::Value> = (0..100)
            .map(|i| (format!("f{i}"), serde_json::Value::String("z".repeat(4000))))
            .collect();
        let event =
            serde_json::json!({"timestamp": "t", "level": "WARN", "target": "x", "fields": many});
        let line = bound_line(LoggingFormat::Json, event.to_string().as_bytes());
        assert!(line.len() <= MAX_LOG_LINE_BYTES, "{}", line.len());
        let v: serde_json::Value = serde_json::from_slice(&line).expect("valid JSON");
        assert_eq!(v["truncated"], true);
        assert_eq!(v["level"], "WARN");
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
