//! Traces as they grow: what `hypercloud trace serve` holds and how it reads its files.
//!
//! A [`Follower`] reads trace files (and directories, whose `*.jsonl` files it picks up as
//! they appear) from where it last stopped, a bounded chunk at a time, and turns each complete
//! line into an event of the [`Store`]. The store numbers events (`seq`) and keeps the newest
//! `max_events` of them, so the server's memory stays bounded however large a trace grows;
//! the page asks for events after the last one it has.
//!
//! Bad input does not stop the view: a line that is not a trace record, a line longer than
//! [`MAX_LINE_BYTES`] and a file that shrank (truncated or rewritten) each become an error
//! event naming the file and line, and reading goes on. Only at start is a file refused whose
//! first line is not a trace record: then it is not a trace at all ([`Follower::check_start`]).

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use hypercloud_cloudprovider::TraceRecord;
use serde::Serialize;
use serde_json::Value;

/// The longest line read; a longer one is skipped with an error event (a trace record of a
/// call is a few hundred bytes; a list of every load balancer of a big project a few hundred
/// KiB).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How much of one file one [`Follower::poll`] reads, so one huge file does not keep the
/// others (and the page) waiting.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Errors of following traces.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source named on the command line is missing or unreadable.
    #[error("cannot follow {}: {source}", path.display())]
    OpenSource {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file's first line is not a trace record: it is not a trace.
    #[error("{}:1: not a cloud-call trace record (written by --trace-cloud-calls): {message}", path.display())]
    NotATrace {
        /// The file.
        path: PathBuf,
        /// What serde_json said.
        message: String,
    },
}

/// A file or directory to follow, and which layout's run it belongs to (`--compare`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The path as given.
    pub path: PathBuf,
    /// `in-tree` or `external` when two runs are compared, else none.
    pub layout: Option<String>,
}

/// The cloud service a provider method belongs to (the trait it comes from upstream), which
/// the page filters by.
pub fn cloud_service(method: &str) -> &'static str {
    match method {
        "initialize" | "provider_name" | "has_cluster_id" => "Provider",
        "list_clusters" | "master" => "Clusters",
        m if m.contains("load_balancer") => "LoadBalancer",
        m if m.contains("route") => "Routes",
        m if m.starts_with("get_zone") => "Zones",
        m if m.contains("volume") || m.contains("disk") => "Volumes",
        m if m.starts_with("instance")
            || m.starts_with("node_addresses")
            || m == "current_node_name"
            || m == "add_ssh_key_to_all_instances" =>
        {
            "Instances"
        }
        _ => "Other",
    }
}

/// What an event is.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Body {
    /// A provider call, as recorded.
    Call {
        /// The trace file's name.
        file: String,
        /// [`cloud_service`] of the method.
        service: &'static str,
        /// The record.
        #[serde(flatten)]
        record: TraceRecord,
    },
    /// A cluster object as it changed (`--kubeconfig`).
    Object {
        /// `Node`, `Service` or `PersistentVolume`.
        kind: &'static str,
        /// The namespace, for namespaced kinds.
        namespace: Option<String>,
        /// The name.
        name: String,
        /// Whether this is its deletion (the summary is then its last one).
        deleted: bool,
        /// What the page shows of it.
        summary: Value,
    },
    /// Something that could not be read.
    Error {
        /// Where: `file:line`, or the watch.
        source: String,
        /// A sentence naming the problem.
        message: String,
    },
}

#[derive(Serialize)]
struct Event<'a> {
    seq: u64,
    /// A call's start is its record's own `ts_unix_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    ts_unix_ms: Option<u64>,
    layout: Option<&'a str>,
    #[serde(flatten)]
    body: &'a Body,
}

/// The newest events, numbered, serialised once as they arrive.
pub struct Store {
    max_events: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (seq, the event as JSON).
    events: VecDeque<(u64, Box<str>)>,
    last_seq: u64,
    dropped: u64,
}

/// One answer to "what happened after `seq`".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The events as JSON objects, oldest first.
    pub events: Vec<Box<str>>,
    /// The seq to ask after next.
    pub next: u64,
    /// The oldest seq held (0 when none).
    pub first: u64,
    /// The newest seq held.
    pub latest: u64,
    /// Events dropped to stay within `max_events`.
    pub dropped: u64,
}

impl Page {
    /// The page as the `/api/events` JSON body.
    pub fn to_json(&self) -> String {
        let mut out =
            String::with_capacity(64 + self.events.iter().map(|e| e.len() + 1).sum::<usize>());
        out.push_str("{\"events\":[");
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(e);
        }
        out.push_str(&format!(
            "],\"next\":{},\"first\":{},\"latest\":{},\"dropped\":{}}}",
            self.next, self.first, self.latest, self.dropped
        ));
        out
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Store {
    /// A store keeping at most `max_events` (at least 1).
    pub fn new(max_events: usize) -> Self {
        Self {
            max_events: max_events.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The bound given.
    pub fn max_events(&self) -> usize {
        self.max_events
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the queue half-changed (push and pop
        // are single steps), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an event; returns its seq.
    pub fn push(&self, ts_unix_ms: u64, layout: Option<&str>, body: &Body) -> u64 {
        let mut inner = self.lock();
        let seq = inner.last_seq + 1;
        let json = serde_json::to_string(&Event {
            seq,
            ts_unix_ms: (!matches!(body, Body::Call { .. })).then_some(ts_unix_ms),
            layout,
            body,
        })
        // Every field is a string, number, bool or a serde_json::Value: this cannot fail;
        // should it, the event still says so.
        .unwrap_or_else(|e| {
            format!(
                r#"{{"seq":{seq},"ts_unix_ms":{ts_unix_ms},"layout":null,"type":"error","source":"server","message":{}}}"#,
                Value::String(format!("cannot encode an event: {e}"))
            )
        });
        inner.last_seq = seq;
        inner.events.push_back((seq, json.into_boxed_str()));
        while inner.events.len() > self.max_events {
            inner.events.pop_front();
            inner.dropped += 1;
        }
        seq
    }

    /// Adds an error event.
    pub fn error(
        &self,
        layout: Option<&str>,
        source: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.push(
            now_unix_ms(),
            layout,
            &Body::Error {
                source: source.into(),
                message: message.into(),
            },
        );
    }

    /// At most `limit` events with a seq above `after`.
    pub fn after(&self, after: u64, limit: usize) -> Page {
        let inner = self.lock();
        let first = inner.events.front().map_or(0, |(s, _)| *s);
        let start = inner.events.partition_point(|(s, _)| *s <= after);
        let events: Vec<Box<str>> = inner
            .events
            .range(start..)
            .take(limit)
            .map(|(_, e)| e.clone())
            .collect();
        let next = if events.is_empty() {
            after.max(first.saturating_sub(1)).min(inner.last_seq)
        } else {
            inner.events[start + events.len() - 1].0
        };
        Page {
            events,
            next,
            first,
            latest: inner.last_seq,
            dropped: inner.dropped,
        }
    }
}

/// How far one file has been read.
#[derive(Debug, Clone, Serialize)]
pub struct FileProgress {
    /// The file.
    pub path: PathBuf,
    /// Its layout.
    pub layout: Option<String>,
    /// Bytes read (and turned into events).
    pub read_bytes: u64,
    /// Its size when last looked at.
    pub size_bytes: u64,
}

struct FileState {
    layout: Option<String>,
    name: String,
    offset: u64,
    size: u64,
    line_no: usize,
    partial: Vec<u8>,
    /// Inside a line longer than [`MAX_LINE_BYTES`], until its end.
    skipping: bool,
}

/// Reads trace files as they grow.
pub struct Follower {
    sources: Vec<Source>,
    files: BTreeMap<PathBuf, FileState>,
}

impl Follower {
    /// Follows `sources` (files, or directories whose `*.jsonl` files are followed).
    pub fn new(sources: Vec<Source>) -> Self {
        Self {
            sources,
            files: BTreeMap::new(),
        }
    }

    /// Refuses sources that cannot be followed: a path that does not exist or cannot be
    /// read, and a file whose first line is not a trace record. Files that appear later in a
    /// directory are checked line by line as they are read instead.
    pub fn check_start(&self) -> Result<(), Error> {
        for source in &self.sources {
            let meta = std::fs::metadata(&source.path).map_err(|e| Error::OpenSource {
                path: source.path.clone(),
                source: e,
            })?;
            let files = if meta.is_dir() {
                list_jsonl(&source.path).map_err(|e| Error::OpenSource {
                    path: source.path.clone(),
                    source: e,
                })?
            } else {
                vec![source.path.clone()]
            };
            for path in files {
                check_first_line(&path)?;
            }
        }
        Ok(())
    }

    /// What has been read of each file.
    pub fn progress(&self) -> Vec<FileProgress> {
        self.files
            .iter()
            .map(|(path, f)| FileProgress {
                path: path.clone(),
                layout: f.layout.clone(),
                read_bytes: f.offset,
                size_bytes: f.size,
            })
            .collect()
    }

    /// Reads what was added since the last poll (at most [`CHUNK_BYTES`] a file) into
    /// `store`. Returns whether a file has more to read right away.
    pub fn poll(&mut self, store: &Store) -> bool {
        self.discover(store);
        let mut more = false;
        for (path, state) in &mut self.files {
            more |= read_more(path, state, store);
        }
        more
    }

    fn discover(&mut self, store: &Store) {
        for source in &self.sources {
            let paths = match std::fs::metadata(&source.path) {
                Ok(m) if m.is_dir() => match list_jsonl(&source.path) {
                    Ok(p) => p,
                    Err(e) => {
                        store.error(
                            source.layout.as_deref(),
                            source.path.display().to_string(),
                            format!("cannot list the directory {}: {e}", source.path.display()),
                        );
                        continue;
                    }
                },
                // A file that vanished stays known with its offset; it is read again if it
                // comes back (and reported as shrunk).
                _ => vec![source.path.clone()],
            };
            for path in paths {
                self.files.entry(path.clone()).or_insert_with(|| FileState {
                    layout: source.layout.clone(),
                    name: path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    offset: 0,
                    size: 0,
                    line_no: 0,
                    partial: Vec::new(),
                    skipping: false,
                });
            }
        }
    }
}

fn list_jsonl(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn check_first_line(path: &Path) -> Result<(), Error> {
    let open_err = |e| Error::OpenSource {
        path: path.to_path_buf(),
        source: e,
    };
    let mut file = File::open(path).map_err(open_err)?;
    if !file.metadata().map_err(open_err)?.is_file() {
        return Err(Error::OpenSource {
            path: path.to_path_buf(),
            source: std::io::Error::other("not a regular file"),
        });
    }
    let mut buf = Vec::new();
    (&mut file)
        .take(MAX_LINE_BYTES as u64)
        .read_to_end(&mut buf)
        .map_err(open_err)?;
    let Some(end) = buf.iter().position(|b| *b == b'\n') else {
        // Empty, or a first line still being written (or longer than a line may be: that is
        // reported when it is read).
        return Ok(());
    };
    let line = String::from_utf8_lossy(&buf[..end]);
    if line.trim().is_empty() {
        return Ok(());
    }
    serde_json::from_str::<TraceRecord>(&line)
        .map(|_| ())
        .map_err(|e| Error::NotATrace {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// Reads the next chunk of one file; returns whether more is there.
fn read_more(path: &Path, state: &mut FileState, store: &Store) -> bool {
    let layout = state.layout.clone();
    let layout = layout.as_deref();
    let Ok(mut file) = File::open(path) else {
        // Not there (yet, or any more): nothing to read.
        return false;
    };
    let size = match file.metadata() {
        Ok(m) => m.len(),
        Err(_) => return false,
    };
    state.size = size;
    if size < state.offset {
        store.error(
            layout,
            state.name.clone(),
            format!(
                "{} shrank from {} to {size} bytes (truncated or written anew): reading it again from the start; calls shown before may repeat",
                path.display(),
                state.offset
            ),
        );
        state.offset = 0;
        state.line_no = 0;
        state.partial.clear();
        state.skipping = false;
    }
    if size == state.offset {
        return false;
    }
    if file.seek(SeekFrom::Start(state.offset)).is_err() {
        return false;
    }
    let mut chunk = Vec::with_capacity(
        CHUNK_BYTES.min(usize::try_from(size - state.offset).unwrap_or(CHUNK_BYTES)),
    );
    let read = match (&mut file).take(CHUNK_BYTES as u64).read_to_end(&mut chunk) {
        Ok(n) => n,
        Err(e) => {
            store.error(
                layout,
                state.name.clone(),
                format!("cannot read {}: {e}", path.display()),
            );
            return false;
        }
    };
    state.offset += read as u64;
    let mut rest = &chunk[..];
    while let Some(end) = rest.iter().position(|b| *b == b'\n') {
        let (piece, tail) = rest.split_at(end);
        rest = &tail[1..];
        state.line_no += 1;
        if state.skipping {
            state.skipping = false;
            state.partial.clear();
            continue;
        }
        let line = if state.partial.is_empty() {
            line_text(piece)
        } else {
            state.partial.extend_from_slice(piece);
            let whole = std::mem::take(&mut state.partial);
            line_text(&whole)
        };
        take_line(&line, state, store, layout);
    }
    if !rest.is_empty() && !state.skipping {
        state.partial.extend_from_slice(rest);
        if state.partial.len() > MAX_LINE_BYTES {
            store.error(
                layout,
                format!("{}:{}", state.name, state.line_no + 1),
                format!(
                    "line {} of {} is longer than {} KiB: skipped",
                    state.line_no + 1,
                    path.display(),
                    MAX_LINE_BYTES >> 10
                ),
            );
            state.partial = Vec::new();
            state.skipping = true;
        }
    }
    state.offset < size
}

fn line_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn take_line(line: &str, state: &FileState, store: &Store, layout: Option<&str>) {
    if line.trim().is_empty() {
        return;
    }
    match serde_json::from_str::<TraceRecord>(line) {
        Ok(record) => {
            let ts = record.ts_unix_ms;
            let service = cloud_service(&record.method);
            store.push(
                ts,
                layout,
                &Body::Call {
                    file: state.name.clone(),
                    service,
                    record,
                },
            );
        }
        Err(e) => store.error(
            layout,
            format!("{}:{}", state.name, state.line_no),
            format!(
                "line {} of {} is not a cloud-call trace record: {e}",
                state.line_no, state.name
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn record(ts: u64, method: &str) -> String {
        format!(
            r#"{{"ts_unix_ms":{ts},"component":"cloud-controller-manager","provider":"local","method":"{method}","args":{{"node":"node-1"}},"result":null,"error":null,"latency_ms":1.5}}"#
        )
    }

    fn events(store: &Store) -> Vec<Value> {
        store
            .after(0, usize::MAX)
            .events
            .iter()
            .map(|e| serde_json::from_str(e).expect("event JSON"))
            .collect()
    }

    fn follower(path: &Path) -> Follower {
        Follower::new(vec![Source {
            path: path.to_path_buf(),
            layout: None,
        }])
    }

    #[test]
    fn follows_a_file_as_it_grows_and_holds_a_line_until_its_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("trace-ccm.jsonl");
        let mut f = File::create(&path).expect("create");
        writeln!(f, "{}", record(1, "instance_metadata")).expect("write");
        let line = record(2, "ensure_load_balancer");
        write!(f, "{}", &line[..20]).expect("write");
        let store = Store::new(100);
        let mut follower = follower(dir.path());
        follower.check_start().expect("a trace");
        follower.poll(&store);
        let got = events(&store);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["type"], "call");
        assert_eq!(got[0]["method"], "instance_metadata");
        assert_eq!(got[0]["service"], "Instances");
        assert_eq!(got[0]["file"], "trace-ccm.jsonl");
        writeln!(f, "{}", &line[20..]).expect("write");
        follower.poll(&store);
        let got = events(&store);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1]["method"], "ensure_load_balancer");
        assert_eq!(got[1]["service"], "LoadBalancer");
        assert_eq!(got[1]["seq"], 2);
        // A file that appears later in the directory is followed too.
        std::fs::write(
            dir.path().join("trace-kcm.jsonl"),
            record(3, "get_zone") + "\n",
        )
        .expect("write");
        follower.poll(&store);
        assert_eq!(events(&store).len(), 3);
    }

    #[test]
    fn a_bad_line_a_shrunk_file_and_an_overlong_line_are_error_events() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        std::fs::write(
            &path,
            format!(
                "{}\nnot json\n{}\n",
                record(1, "get_zone"),
                record(2, "get_zone")
            ),
        )
        .expect("write");
        let store = Store::new(100);
        let mut follower = follower(&path);
        follower.poll(&store);
        let got = events(&store);
        let kinds: Vec<_> = got
            .iter()
            .map(|e| e["type"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(kinds, ["call", "error", "call"]);
        assert_eq!(got[1]["source"], "t.jsonl:2");
        assert!(
            got[1]["message"]
                .as_str()
                .is_some_and(|m| m.contains("line 2 of t.jsonl is not a cloud-call trace record")),
            "{}",
            got[1]
        );
        std::fs::write(&path, format!("{}\n", record(5, "get_zone"))).expect("rewrite");
        follower.poll(&store);
        let got = events(&store);
        assert_eq!(got[3]["type"], "error");
        assert!(
            got[3]["message"]
                .as_str()
                .is_some_and(|m| m.contains("shrank")),
            "{}",
            got[3]
        );
        assert_eq!(got[4]["ts_unix_ms"], 5);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(&vec![b'x'; MAX_LINE_BYTES + 10])
            .expect("write");
        follower.poll(&store);
        while follower.poll(&store) {}
        writeln!(f, "tail of the long line").expect("write");
        writeln!(f, "{}", record(6, "get_zone")).expect("write");
        while follower.poll(&store) {}
        let got = events(&store);
        let last: Vec<_> = got[5..]
            .iter()
            .map(|e| e["type"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(last, ["error", "call"], "{got:?}");
        assert!(got[5]["message"]
            .as_str()
            .is_some_and(|m| m.contains("longer than 1024 KiB")));
        assert_eq!(got[6]["ts_unix_ms"], 6);
    }

    #[test]
    fn a_file_that_is_not_a_trace_is_refused_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "{\"hello\": 1}\n").expect("write");
        let err = follower(dir.path()).check_start().expect_err("not a trace");
        assert!(
            err.to_string()
                .contains("x.jsonl:1: not a cloud-call trace record"),
            "{err}"
        );
        let err = follower(&dir.path().join("missing.jsonl"))
            .check_start()
            .expect_err("missing");
        assert!(err.to_string().starts_with("cannot follow "), "{err}");
    }

    #[test]
    fn the_store_keeps_the_newest_events_and_pages_them() {
        let store = Store::new(3);
        for i in 1..=5 {
            store.error(None, "s", format!("e{i}"));
        }
        let page = store.after(0, 2);
        assert_eq!(
            (page.first, page.latest, page.dropped, page.next),
            (3, 5, 2, 4)
        );
        assert_eq!(page.events.len(), 2);
        let page = store.after(page.next, 2);
        assert_eq!((page.events.len(), page.next), (1, 5));
        let page = store.after(5, 2);
        assert_eq!((page.events.len(), page.next), (0, 5));
        let body: Value = serde_json::from_str(&page.to_json()).expect("JSON");
        assert_eq!(body["latest"], 5);
        assert_eq!(body["events"], Value::Array(vec![]));
    }

    #[test]
    fn a_huge_file_is_read_in_chunks_into_bounded_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.jsonl");
        let mut f = std::io::BufWriter::new(File::create(&path).expect("create"));
        let n = 20_000;
        for i in 0..n {
            writeln!(f, "{}", record(i, "instance_exists_by_provider_id")).expect("write");
        }
        drop(f);
        let store = Store::new(1000);
        let mut follower = follower(&path);
        let mut polls = 1;
        while follower.poll(&store) {
            polls += 1;
        }
        assert!(polls > 1, "read in one chunk: {polls}");
        let page = store.after(0, usize::MAX);
        assert_eq!(page.events.len(), 1000);
        assert_eq!(page.dropped, n - 1000);
        assert_eq!(page.latest, n);
        let progress = follower.progress();
        assert_eq!(progress[0].read_bytes, progress[0].size_bytes);
    }
}
