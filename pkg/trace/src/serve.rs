//! `hypercloud trace serve`: a page on loopback that shows the cloud calls as they happen.
//!
//! The server follows the trace files ([`crate::live`]), watches the cluster objects the
//! calls change when given a client ([`crate::objects`]), and serves the page (static HTML,
//! JS and CSS compiled into the binary, no request leaves the origin: its
//! Content-Security-Policy says so) and two JSON endpoints: `/api/info` (what is shown) and
//! `/api/events?after=SEQ&limit=N` (the events after the page's last, paged). Only loopback
//! addresses are served.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::json;

use crate::compare::Difference;
use crate::live::{FileProgress, Follower, Source, Store};

/// Errors of serving the view.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--listen` is not a loopback address.
    #[error("--listen {0}: not a loopback address; the trace view serves only 127.0.0.0/8 or ::1")]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("--listen {addr}: cannot listen: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A source cannot be followed.
    #[error(transparent)]
    Source(#[from] crate::live::Error),
    /// The comparison's files cannot be read.
    #[error("--compare: {0}")]
    Compare(#[from] crate::compare::Error),
    /// Serving failed.
    #[error("serving the trace view failed: {0}")]
    Serve(std::io::Error),
    /// A background task ended (it must not).
    #[error("the trace view's {task} stopped unexpectedly: {message}")]
    TaskEnded {
        /// Which.
        task: &'static str,
        /// How (a panic's message).
        message: String,
    },
}

/// Two runs compared.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// The changed lines of `DIR/modes.diff`.
    pub differences: Vec<Difference>,
    /// Each layout's cluster view (`DIR/<layout>.view`).
    pub views: BTreeMap<String, String>,
}

impl Comparison {
    /// Reads `dir` as `hack/compare-modes.sh --dir` leaves it: the sources are `dir/in-tree`
    /// and `dir/external`; `modes.diff` and the views are read when present (a run without
    /// differences has no diff). `expected` explains the differences.
    pub fn read(
        dir: &std::path::Path,
        expected: Option<&std::path::Path>,
    ) -> Result<(Vec<Source>, Self), Error> {
        let mut sources = Vec::new();
        let mut views = BTreeMap::new();
        for layout in ["in-tree", "external"] {
            sources.push(Source {
                path: dir.join(layout),
                layout: Some(layout.to_string()),
            });
            let view = dir.join(format!("{layout}.view"));
            if view.exists() {
                views.insert(layout.to_string(), crate::compare::read(&view)?);
            }
        }
        let expected = match expected {
            Some(path) => crate::compare::parse_expected(&crate::compare::read(path)?, path)?,
            None => Vec::new(),
        };
        let diff = dir.join("modes.diff");
        let differences = if diff.exists() {
            crate::compare::differences(&crate::compare::read(&diff)?, &expected)
        } else {
            Vec::new()
        };
        Ok((sources, Self { differences, views }))
    }
}

/// What to serve.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where (loopback only; port 0 picks one).
    pub listen: SocketAddr,
    /// The trace files and directories.
    pub sources: Vec<Source>,
    /// Two runs compared, when given.
    pub comparison: Option<Comparison>,
    /// How many events the server keeps.
    pub max_events: usize,
    /// The page's title.
    pub title: String,
    /// How often the files are looked at.
    pub poll_interval: Duration,
}

const INDEX_HTML: &str = include_str!("../web/index.html");
const APP_JS: &str = include_str!("../web/app.js");
const APP_CSS: &str = include_str!("../web/app.css");

/// The page may talk to its own origin only.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The most events one `/api/events` answer carries.
pub const MAX_PAGE: usize = 5000;

struct Shared {
    store: Arc<Store>,
    info: serde_json::Value,
    progress: Mutex<Vec<FileProgress>>,
}

/// Serves until `shutdown` resolves; `ready` is told the address once it listens. Ends with an
/// error when a background task ends (a panic included), so a broken view never looks healthy.
pub async fn serve(
    config: Config,
    client: Option<kube::Client>,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    if !config.listen.ip().is_loopback() {
        return Err(Error::NotLoopback(config.listen));
    }
    let follower = Follower::new(config.sources.clone());
    follower.check_start()?;
    let store = Arc::new(Store::new(config.max_events));
    let comparison = config.comparison.clone().unwrap_or_default();
    let layouts: Vec<String> = if config.comparison.is_some() {
        vec!["in-tree".into(), "external".into()]
    } else {
        Vec::new()
    };
    let info = json!({
        "title": config.title,
        "layouts": layouts,
        "sources": config.sources,
        "objects": client.is_some(),
        "max_events": store.max_events(),
        "differences": comparison.differences,
        "views": comparison.views,
    });
    let shared = Arc::new(Shared {
        store: store.clone(),
        info,
        progress: Mutex::new(Vec::new()),
    });

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| Error::Bind {
        addr: config.listen,
        source,
    })?;

    let mut tasks = tokio::task::JoinSet::new();
    let follow_shared = shared.clone();
    let interval = config.poll_interval;
    tasks.spawn(async move {
        let mut follower = follower;
        loop {
            // Reading files blocks: a chunk at a time on the blocking pool.
            let s = follow_shared.clone();
            let read = tokio::task::spawn_blocking(move || {
                let more = follower.poll(&s.store);
                *s.progress.lock().unwrap_or_else(|e| e.into_inner()) = follower.progress();
                (follower, more)
            })
            .await;
            let more;
            (follower, more) = match read {
                Ok(v) => v,
                Err(e) => match e.try_into_panic() {
                    Ok(p) => std::panic::resume_unwind(p),
                    Err(_) => return "trace follower",
                },
            };
            if !more {
                tokio::time::sleep(interval).await;
            }
        }
    });
    if let Some(client) = client {
        let s = store.clone();
        tasks.spawn(async move {
            crate::objects::watch_all(client, s).await;
            "cluster watch"
        });
    }

    let app = Router::new()
        .route(
            "/",
            get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/app.js",
            get(|| async { page(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { page(APP_CSS, "text/css; charset=utf-8") }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/info", get(api_info))
        .route("/api/events", get(api_events))
        .with_state(shared);
    ready(addr);
    let server = axum::serve(listener, app).with_graceful_shutdown(shutdown);
    tokio::select! {
        r = server => r.map_err(Error::Serve),
        Some(ended) = tasks.join_next() => Err(match ended {
            Ok(task) => Error::TaskEnded { task, message: "it returned".into() },
            Err(e) => Error::TaskEnded {
                task: "background task",
                message: panic_message(e),
            },
        }),
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let p = e.into_panic();
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

fn json_response(body: String) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

async fn api_info(State(shared): State<Arc<Shared>>) -> Response {
    let mut info = shared.info.clone();
    let progress = shared
        .progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    info["files"] = json!(progress);
    json_response(info.to_string())
}

/// `after` and `limit` as the page sends them; anything else is a 400 naming the parameter.
fn parse_query(q: &HashMap<String, String>) -> Result<(u64, usize), String> {
    if let Some(k) = q.keys().find(|k| *k != "after" && *k != "limit") {
        return Err(format!(
            "unknown parameter {k:?}: /api/events takes after and limit"
        ));
    }
    let after = match q.get("after") {
        None => 0,
        Some(v) => v
            .parse::<u64>()
            .map_err(|_| format!("after={v:?}: not a sequence number (0 or more)"))?,
    };
    let limit = match q.get("limit") {
        None => 1000,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
            _ => return Err(format!("limit={v:?}: not a number from 1 to {MAX_PAGE}")),
        },
    };
    Ok((after, limit))
}

async fn api_events(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match parse_query(&q) {
        Ok((after, limit)) => json_response(shared.store.after(after, limit).to_json()),
        Err(message) => (StatusCode::BAD_REQUEST, message).into_response(),
    }
}

/// The sources a command line names: each `[LAYOUT=]PATH` (the layout form for runs that
/// are not in `hack/compare-modes.sh`'s layout).
pub fn parse_source(arg: &str) -> Source {
    match arg.split_once('=') {
        Some((layout, path)) if !layout.is_empty() && !layout.contains('/') => Source {
            path: PathBuf::from(path),
            layout: Some(layout.to_string()),
        },
        _ => Source {
            path: PathBuf::from(arg),
            layout: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_checked_by_name() {
        let q = |pairs: &[(&str, &str)]| {
            parse_query(
                &pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        assert_eq!(q(&[]), Ok((0, 1000)));
        assert_eq!(q(&[("after", "7"), ("limit", "5")]), Ok((7, 5)));
        assert!(q(&[("limit", "0")]).is_err_and(|e| e.contains("limit=\"0\"")));
        assert!(q(&[("limit", "99999")]).is_err());
        assert!(q(&[("after", "-1")]).is_err_and(|e| e.starts_with("after=")));
        assert!(q(&[("since", "1")]).is_err_and(|e| e.contains("unknown parameter \"since\"")));
    }

    #[test]
    fn a_source_may_name_its_layout() {
        assert_eq!(
            parse_source("in-tree=/d/t.jsonl").layout.as_deref(),
            Some("in-tree")
        );
        assert_eq!(parse_source("/d/a=b/t.jsonl").layout, None);
    }
}
