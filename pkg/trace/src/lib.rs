//! Cloud-call traces as sequence diagrams: `hypercloud trace render`.
//!
//! Every personality run with `--trace-cloud-calls FILE` writes one
//! [`TraceRecord`] a line for each provider call
//! (`hypercloud_cloudprovider::Instrumented`). This crate reads such files, normalises the
//! calls so that two runs of the same scenario give the same picture ([`normalise`]),
//! decides participants and message order ([`diagram`]), and prints the result as Mermaid
//! text ([`mermaid`]) or as an SVG drawn by our own small renderer ([`svg`]). Upstream has no
//! equivalent; it plays the role of the sequence diagrams in the cloud-provider KEPs, made
//! from what the code really did.
//!
//! ```
//! use hypercloud_trace::{parse, render, Format, Options};
//! let line = r#"{"ts_unix_ms":1,"component":"kubelet-helper","provider":"local","method":"instance_id","args":{"name":"node-1"},"result":"/5d32d0c5-6634-4083-8f42-86b960d6e5e7","error":null,"latency_ms":0.5}"#;
//! let records = parse(line, "trace.jsonl".as_ref()).expect("one record");
//! let text = render(&records, &Options::default(), Format::Mermaid);
//! assert!(text.contains("kubelet_helper->>cloud_local: instance_id(node-{n})"));
//! assert!(text.contains("cloud_local-->>kubelet_helper: /{uuid}"));
//! ```
//!
//! Start here: [`parse`] and [`render`], then [`build`] (participants and order).
//!
//! The same traces live: `hypercloud trace serve` ([`serve`]) follows the files as they grow
//! ([`live`]), watches the cluster objects the calls change ([`objects`]) and shows both on a
//! page served on loopback, two layouts side by side with their differences explained
//! ([`compare`]).
//!
//! Not here: recording the calls (`hypercloud_cloudprovider::Instrumented` writes them) or the
//! committed diagrams (`hack/update-diagrams.sh` regenerates `docs/diagrams/`).

pub mod compare;
pub mod diagram;
pub mod live;
pub mod mermaid;
pub mod normalise;
pub mod objects;
pub mod serve;
pub mod svg;

use std::path::{Path, PathBuf};

use hypercloud_cloudprovider::TraceRecord;

pub use diagram::{build, Diagram, Options, Order};

/// Errors of reading traces.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A trace file could not be read.
    #[error("cannot read trace file {}", path.display())]
    ReadTrace {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a trace record.
    #[error("{}:{line}: not a cloud-call trace record: {message}", path.display())]
    ParseRecord {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What serde_json said (its position is within the line, so its text belongs to
        /// this message rather than to a separate cause).
        message: String,
    },
    /// Nothing to draw: no records and no declared participant.
    #[error("no cloud calls in {files} (and no --participant to show instead)")]
    NothingToDraw {
        /// The files read, comma-separated.
        files: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What to print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Mermaid `sequenceDiagram` text.
    #[default]
    Mermaid,
    /// An SVG image.
    Svg,
}

/// Parses the text of one trace file: one JSON record a line, blank lines skipped; `path`
/// only names the file in errors.
pub fn parse(text: &str, path: &Path) -> Result<Vec<TraceRecord>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| Error::ParseRecord {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

/// The largest trace file read: traces are held whole, and a day of a busy controller's calls
/// stays well below this.
pub const MAX_TRACE_FILE_BYTES: u64 = 256 << 20;

/// Reads and parses every file (regular files of at most [`MAX_TRACE_FILE_BYTES`]), records
/// of all files together.
pub fn read_files(paths: &[PathBuf]) -> Result<Vec<TraceRecord>> {
    let mut records = Vec::new();
    for path in paths {
        let text = hypercloud_cloudprovider::input::read_limited_text(path, MAX_TRACE_FILE_BYTES)
            .map_err(|source| Error::ReadTrace {
            path: path.clone(),
            source,
        })?;
        records.extend(parse(&text, path)?);
    }
    Ok(records)
}

/// Draws `records` in `format`.
pub fn render(records: &[TraceRecord], options: &Options, format: Format) -> String {
    let d = build(records, options);
    match format {
        Format::Mermaid => mermaid::render(&d),
        Format::Svg => svg::render(&d),
    }
}

/// Reads `paths` and draws them: what `hypercloud trace render` does.
pub fn render_files(paths: &[PathBuf], options: &Options, format: Format) -> Result<String> {
    let records = read_files(paths)?;
    if records.is_empty() && options.participants.is_empty() {
        return Err(Error::NothingToDraw {
            files: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(render(&records, options, format))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A trace like the ones `hack/local-up.sh --smoke --mode in-tree` records, with every
    /// instance-specific value drawn from `rng`.
    fn scenario(rng: &mut fastrand::Rng) -> Vec<TraceRecord> {
        let base = 1_700_000_000_000 + rng.u64(0..1_000_000_000);
        let uuid = |rng: &mut fastrand::Rng| {
            let hex: String = (0..32)
                .map(|_| char::from_digit(rng.u32(0..16), 16).unwrap_or('0'))
                .collect();
            format!(
                "{}-{}-{}-{}-{}",
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..]
            )
        };
        let rec = |ts: u64, component: &str, method: &str, args, result, error: Option<&str>| {
            TraceRecord {
                ts_unix_ms: ts,
                component: component.into(),
                provider: "local".into(),
                method: method.into(),
                args,
                result,
                error: error.map(String::from),
                latency_ms: 0.0,
            }
        };
        // Node names need not be 1..3: only their number differs between runs.
        let first = rng.u32(1..50);
        let nodes: Vec<String> = (first..first + 3).map(|n| format!("node-{n}")).collect();
        let mut out = Vec::new();
        let mut t = base;
        for (i, node) in nodes.iter().enumerate() {
            let ip = format!("10.{}.{}.{}", rng.u8(0..255), rng.u8(0..255), i + 2);
            let id = uuid(rng);
            let mut tick = || {
                t += rng.u64(0..50);
                t
            };
            let kh = "kubelet-helper";
            out.push(rec(
                tick(),
                kh,
                "initialize",
                json!({"client": false}),
                None,
                None,
            ));
            out.push(rec(
                tick(),
                kh,
                "current_node_name",
                json!({"hostname": node}),
                Some(json!(node)),
                None,
            ));
            out.push(rec(
                tick(),
                kh,
                "instance_id",
                json!({"name": node}),
                Some(json!(format!("/{id}"))),
                None,
            ));
            out.push(rec(
                tick(),
                kh,
                "node_addresses",
                json!({"name": node}),
                Some(json!([{"address": ip, "type": "InternalIP"}])),
                None,
            ));
            out.push(rec(
                tick(),
                kh,
                "instance_type",
                json!({"name": node}),
                Some(json!("m1.small")),
                None,
            ));
            out.push(rec(
                tick(),
                kh,
                "get_zone_by_node_name",
                json!({"name": node}),
                Some(json!({"failureDomain": "nova", "region": "RegionOne"})),
                None,
            ));
        }
        let kcm = "kube-controller-manager";
        out.push(rec(
            base + rng.u64(0..500),
            kcm,
            "initialize",
            json!({"client": false}),
            None,
            None,
        ));
        // The lifecycle controller makes a timing-dependent number of passes.
        for _ in 0..rng.u32(1..4) {
            let start = base + rng.u64(0..2000);
            for node in &nodes {
                out.push(rec(
                    start + rng.u64(0..5),
                    kcm,
                    "instance_exists",
                    json!({"node": node}),
                    Some(json!(true)),
                    None,
                ));
                out.push(rec(
                    start + rng.u64(0..5),
                    kcm,
                    "instance_shutdown",
                    json!({"node": node}),
                    Some(json!(false)),
                    None,
                ));
            }
        }
        out.push(rec(
            base + rng.u64(0..3000),
            kcm,
            "get_load_balancer",
            json!({"cluster": "kubernetes", "service": "default/web"}),
            None,
            Some(&format!(
                "local: get load balancer a{} failed (HTTP 503) [request req-{}]: busy",
                uuid(rng).replace('-', ""),
                uuid(rng)
            )),
        ));
        rng.shuffle(&mut out);
        out
    }

    #[test]
    fn shuffled_and_perturbed_runs_give_byte_identical_output() {
        let options = Options {
            participants: vec!["kubelet-helper".into(), "apiserver-plugin".into()],
            title: Some("in-tree".into()),
            order: Order::Canonical,
        };
        let mut rng = fastrand::Rng::with_seed(7);
        let first = scenario(&mut rng);
        let mermaid = render(&first, &options, Format::Mermaid);
        let svg = render(&first, &options, Format::Svg);
        for _ in 0..50 {
            let other = scenario(&mut rng);
            assert_ne!(other, first, "the runs really differ");
            assert_eq!(render(&other, &options, Format::Mermaid), mermaid);
            assert_eq!(render(&other, &options, Format::Svg), svg);
        }
        assert_eq!(
            mermaid,
            "sequenceDiagram
    %% Generated by `hypercloud trace render` from cloud-call traces; do not edit.
    title in-tree
    participant kubelet_helper as kubelet-helper
    participant apiserver_plugin as apiserver-plugin
    participant kube_controller_manager as kube-controller-manager
    participant cloud_local as local (cloud)
    Note over apiserver_plugin: no cloud calls
    kubelet_helper->>cloud_local: initialize(client=false)
    cloud_local-->>kubelet_helper: ok
    kubelet_helper->>cloud_local: current_node_name(node-{n}) ×3
    cloud_local-->>kubelet_helper: node-{n}
    kubelet_helper->>cloud_local: instance_id(node-{n}) ×3
    cloud_local-->>kubelet_helper: /{uuid}
    kubelet_helper->>cloud_local: node_addresses(node-{n}) ×3
    cloud_local-->>kubelet_helper: [{address: {ip}, type: InternalIP}]
    kubelet_helper->>cloud_local: instance_type(node-{n}) ×3
    cloud_local-->>kubelet_helper: m1.small
    kubelet_helper->>cloud_local: get_zone_by_node_name(node-{n}) ×3
    cloud_local-->>kubelet_helper: {failureDomain: nova, region: RegionOne}
    kube_controller_manager->>cloud_local: initialize(client=false)
    cloud_local-->>kube_controller_manager: ok
    kube_controller_manager->>cloud_local: instance_exists(node-{n}) ×3
    cloud_local-->>kube_controller_manager: true
    kube_controller_manager->>cloud_local: instance_shutdown(node-{n}) ×3
    cloud_local-->>kube_controller_manager: false
    kube_controller_manager->>cloud_local: get_load_balancer(kubernetes, default/web)
    cloud_local--xkube_controller_manager: error: get load balancer {id} failed (HTTP 503)
"
        );
        let names = svg::tests::check_xml(&svg).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names.first().map(String::as_str), Some("svg"));
        let d = build(&first, &options);
        for p in &d.participants {
            assert!(mermaid.contains(&format!("participant {} as {}", p.id, p.label)));
            assert!(svg.contains(&format!(">{}</text>", p.label)), "{}", p.label);
        }
        for s in &d.steps {
            if let diagram::Step::Call(c) = s {
                assert!(mermaid.contains(&c.request), "{}", c.request);
                let in_svg = c.request.replace('&', "&amp;").replace('"', "&quot;");
                assert!(svg.contains(&format!(">{in_svg}</text>")), "{}", c.request);
                assert!(
                    svg.contains(&format!(">{}</text>", c.response)),
                    "{}",
                    c.response
                );
            }
        }
    }

    #[test]
    fn bad_lines_are_named_by_file_and_line() {
        let good = r#"{"ts_unix_ms":1,"component":"c","provider":"p","method":"m","args":{},"result":null,"error":null,"latency_ms":0.1}"#;
        let text = format!("{good}\n\n{good}\n{{\"ts_unix_ms\": \"soon\"}}\n");
        let err = parse(&text, Path::new("dir/trace-c.jsonl")).expect_err("bad line");
        assert!(
            matches!(&err, Error::ParseRecord { line: 4, .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("dir/trace-c.jsonl:4: not a cloud-call trace record:"),
            "{err}"
        );
        assert_eq!(
            parse(&format!("{good}\n\n"), Path::new("x"))
                .expect("ok")
                .len(),
            1
        );
    }

    #[test]
    fn files_are_read_together_and_missing_ones_are_named() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = dir.path().join("trace-a.jsonl");
        let b = dir.path().join("trace-b.jsonl");
        std::fs::write(&a, r#"{"ts_unix_ms":2,"component":"kubelet-helper","provider":"local","method":"initialize","args":{},"result":null,"error":null,"latency_ms":0.1}"#).expect("write");
        std::fs::write(&b, r#"{"ts_unix_ms":1,"component":"cloud-controller-manager","provider":"local","method":"initialize","args":{},"result":null,"error":null,"latency_ms":0.1}"#).expect("write");
        let text =
            render_files(&[a.clone(), b], &Options::default(), Format::Mermaid).expect("render");
        assert!(
            text.contains("kubelet_helper->>cloud_local: initialize()"),
            "{text}"
        );
        assert!(
            text.contains("cloud_controller_manager->>cloud_local: initialize()"),
            "{text}"
        );
        let missing = dir.path().join("nope.jsonl");
        let err = render_files(&[a, missing.clone()], &Options::default(), Format::Svg)
            .expect_err("missing");
        assert!(
            matches!(&err, Error::ReadTrace { path, .. } if *path == missing),
            "{err:?}"
        );
        let empty = dir.path().join("empty.jsonl");
        std::fs::write(&empty, "").expect("write");
        assert!(matches!(
            render_files(
                std::slice::from_ref(&empty),
                &Options::default(),
                Format::Mermaid
            ),
            Err(Error::NothingToDraw { .. })
        ));
        let only_declared = Options {
            participants: vec!["kubelet-helper".into()],
            ..Options::default()
        };
        let text =
            render_files(&[empty], &only_declared, Format::Mermaid).expect("a note is something");
        assert!(
            text.contains("Note over kubelet_helper: no cloud calls"),
            "{text}"
        );
    }
}
