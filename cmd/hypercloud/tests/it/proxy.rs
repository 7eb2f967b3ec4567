//! A small HTTP proxy between a personality and a real `local-cloud serve`, for the tests of
//! clients against a misbehaving cloud (fault_proxy.rs, controller_manager_gce_attach.rs). It
//! forwards every request, rewriting the local cloud's address in answers to its own (so that
//! catalog endpoints and self links lead back to it), and can misbehave in two ways:
//! - while `set_faulty(true)`: every request is answered from a cycle of faults (status and
//!   `Retry-After`) instead;
//! - rules ([`Proxy::fail_next`], [`Proxy::rewrite_next`]): the next matching requests are
//!   answered with given faults, or forwarded with a text replaced in the answer (an Operation
//!   that stays `RUNNING`).
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::json;

/// A fault: the status and the `Retry-After` header, if any.
pub type Fault = (u16, Option<&'static str>);

/// What a rule does to the requests it matches.
enum Misbehaviour {
    /// Answer with these faults, in turn, one each.
    Fail(&'static [Fault]),
    /// Forward, replacing the first text with the second in the answer, this many times.
    Rewrite(&'static str, &'static str, usize),
}

/// The next requests of one method whose path contains a text, treated otherwise.
pub struct Rule {
    method: &'static str,
    path_contains: &'static str,
    misbehaviour: Misbehaviour,
    served: AtomicUsize,
}

impl Rule {
    /// How many requests it has treated.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    /// How many requests it will still treat.
    fn budget(&self) -> usize {
        match self.misbehaviour {
            Misbehaviour::Fail(faults) => faults.len(),
            Misbehaviour::Rewrite(_, _, n) => n,
        }
    }

    /// Claims the next turn of a request that matches, or `None`.
    fn claim(&self, method: &str, path: &str) -> Option<usize> {
        if method != self.method || !path.contains(self.path_contains) {
            return None;
        }
        let n = self.served.fetch_add(1, Ordering::SeqCst);
        if n < self.budget() {
            Some(n)
        } else {
            self.served.fetch_sub(1, Ordering::SeqCst);
            None
        }
    }
}

struct ProxyState {
    upstream: String,
    /// `host:port` of the upstream and of the proxy, swapped in bodies (the catalog).
    upstream_host: String,
    proxy_host: String,
    cycle: &'static [Fault],
    faulty: AtomicBool,
    faults_served: AtomicUsize,
    requests: AtomicUsize,
    rules: Mutex<Vec<Arc<Rule>>>,
    http: reqwest::Client,
}

/// The proxy; `url` is where to point a client instead of the local cloud.
pub struct Proxy {
    state: Arc<ProxyState>,
    pub url: String,
}

impl Proxy {
    /// Starts on a free loopback port in front of `upstream` (`http://127.0.0.1:PORT`);
    /// `cycle` is what it answers while faulty.
    pub async fn start(upstream: &str, cycle: &'static [Fault]) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let upstream = upstream.trim_end_matches('/').to_string();
        let upstream_host = upstream
            .strip_prefix("http://")
            .expect("an http upstream")
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let state = Arc::new(ProxyState {
            upstream,
            upstream_host,
            proxy_host: addr.to_string(),
            cycle,
            faulty: AtomicBool::new(false),
            faults_served: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            rules: Mutex::new(Vec::new()),
            http: reqwest::Client::new(),
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(state.clone());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Proxy {
            state,
            url: format!("http://{addr}"),
        }
    }

    /// Answers every request from the cycle of faults (true) or forwards again (false).
    pub fn set_faulty(&self, faulty: bool) {
        self.state.faulty.store(faulty, Ordering::SeqCst);
    }

    /// How many answers came from the cycle of faults.
    pub fn faults_served(&self) -> usize {
        self.state.faults_served.load(Ordering::SeqCst)
    }

    /// How many requests it has had (answered, faulted or forwarded): what a client cost.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// The next `faults.len()` requests of `method` whose path contains `path_contains` get
    /// these faults, in turn; then they pass again.
    pub fn fail_next(
        &self,
        method: &'static str,
        path_contains: &'static str,
        faults: &'static [Fault],
    ) -> Arc<Rule> {
        self.add(method, path_contains, Misbehaviour::Fail(faults))
    }

    /// The answers to the next `times` requests of `method` whose path contains
    /// `path_contains` have `from` replaced with `to`.
    pub fn rewrite_next(
        &self,
        method: &'static str,
        path_contains: &'static str,
        times: usize,
        from: &'static str,
        to: &'static str,
    ) -> Arc<Rule> {
        self.add(
            method,
            path_contains,
            Misbehaviour::Rewrite(from, to, times),
        )
    }

    fn add(
        &self,
        method: &'static str,
        path_contains: &'static str,
        misbehaviour: Misbehaviour,
    ) -> Arc<Rule> {
        let rule = Arc::new(Rule {
            method,
            path_contains,
            misbehaviour,
            served: AtomicUsize::new(0),
        });
        self.state.rules.lock().unwrap().push(rule.clone());
        rule
    }
}

fn fault_answer((status, retry_after): Fault) -> Response {
    let mut resp = Response::builder()
        .status(status)
        .header("content-type", "application/json");
    if let Some(v) = retry_after {
        resp = resp.header("retry-after", v);
    }
    resp.body(Body::from(
        json!({"message": "fault proxy", "code": status}).to_string(),
    ))
    .unwrap()
}

async fn forward(State(s): State<Arc<ProxyState>>, req: Request) -> Response {
    s.requests.fetch_add(1, Ordering::SeqCst);
    if s.faulty.load(Ordering::SeqCst) {
        let n = s.faults_served.fetch_add(1, Ordering::SeqCst);
        return fault_answer(s.cycle[n % s.cycle.len()]);
    }
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let mut rewrite = None;
    let rules = s.rules.lock().unwrap().clone();
    for rule in &rules {
        if let Some(n) = rule.claim(parts.method.as_str(), &path) {
            match rule.misbehaviour {
                Misbehaviour::Fail(faults) => return fault_answer(faults[n]),
                Misbehaviour::Rewrite(from, to, _) => {
                    rewrite = Some((from, to));
                    break;
                }
            }
        }
    }
    let body = axum::body::to_bytes(body, 16 << 20).await.unwrap();
    let mut out = s
        .http
        .request(parts.method.clone(), format!("{}{path}", s.upstream))
        .body(body);
    for (k, v) in &parts.headers {
        if k != "host" && k != "content-length" {
            out = out.header(k, v);
        }
    }
    let answer = match out.send().await {
        Ok(a) => a,
        Err(e) => {
            return Response::builder()
                .status(502)
                .body(Body::from(format!("proxy: {e}")))
                .unwrap()
        }
    };
    let mut resp = Response::builder().status(answer.status());
    for (k, v) in answer.headers() {
        if k != "content-length" && k != "transfer-encoding" && k != "connection" {
            resp = resp.header(k, v);
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    let mut text = String::from_utf8_lossy(&bytes).replace(&s.upstream_host, &s.proxy_host);
    if let Some((from, to)) = rewrite {
        text = text.replace(from, to);
    }
    resp.body(Body::from(text)).unwrap()
}
