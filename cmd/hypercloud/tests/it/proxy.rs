//! A small HTTP proxy between a personality and a real `local-cloud serve`, for the tests of
//! clients against a misbehaving cloud (fault_proxy.rs, controller_manager_gce_attach.rs,
//! controller_manager_vsphere_volumes.rs). It
//! forwards every request, rewriting the local cloud's address in answers to its own (so that
//! catalog endpoints and self links lead back to it), and can misbehave in two ways:
//! - while `set_faulty(true)`: every request is answered from a cycle of faults (status and
//!   `Retry-After`) instead;
//! - rules ([`Proxy::fail_next`], [`Proxy::rewrite_next`]; [`Rule::retire`] ends one): the
//!   next requests whose path or body holds a text (`/attachDisk`; `Action=AttachVolume` of an
//!   EC2 query; `<ReconfigVM_Task` of a SOAP call) are answered with given faults, or forwarded
//!   with a text replaced in the answer (an Operation that stays `RUNNING`, a volume that stays
//!   `attaching`, a vSphere task that stays `running`).
//!
//! Faults are answered in the cloud's own error shape ([`ErrorBody`]), so that its clients
//! read them as they would the real cloud's. The upstream may be `https://` (vcsim): the proxy
//! itself speaks plain HTTP and does not check the upstream's certificate.
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

/// The shape of a fault's body: the error document of the cloud behind the proxy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ErrorBody {
    /// `{"message", "code"}` (the local cloud's OpenStack and Compute Engine dialects).
    #[default]
    Json,
    /// EC2's query-API error document: `RequestLimitExceeded` for 429 and 503 (how EC2
    /// throttles), `InternalError` otherwise.
    // The aws fault tests' (a build without them leaves it unused).
    #[cfg_attr(not(feature = "aws"), allow(dead_code))]
    Ec2,
    /// A SOAP 1.1 `Fault` (vSphere's web services): `ServerFaultCode`.
    // The vsphere fault tests' (a build without them leaves it unused).
    #[cfg_attr(not(all(feature = "vsphere", feature = "openstack")), allow(dead_code))]
    Soap,
}

/// What a rule does to the requests it matches.
enum Misbehaviour {
    /// Answer with these faults, in turn, one each.
    Fail(&'static [Fault]),
    /// Forward, replacing the first text with the second in the answer, this many times.
    Rewrite(&'static str, &'static str, usize),
}

/// The next requests of one method whose path or body contains a text, treated otherwise.
pub struct Rule {
    method: &'static str,
    needle: &'static str,
    misbehaviour: Misbehaviour,
    served: AtomicUsize,
    retired: AtomicBool,
}

impl Rule {
    /// Treats no more requests from now on (a rewrite of every task poll, say, once the
    /// operation it was meant for is over); what it served stays counted.
    #[cfg_attr(not(all(feature = "vsphere", feature = "openstack")), allow(dead_code))]
    pub fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

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
    fn claim(&self, method: &str, path: &str, body: &str) -> Option<usize> {
        if self.retired.load(Ordering::SeqCst)
            || method != self.method
            || !(path.contains(self.needle) || body.contains(self.needle))
        {
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
    error_body: Mutex<ErrorBody>,
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
    /// Starts on a free loopback port in front of `upstream` (`http://127.0.0.1:PORT` or
    /// `https://`); `cycle` is what it answers while faulty.
    pub async fn start(upstream: &str, cycle: &'static [Fault]) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let upstream = upstream.trim_end_matches('/').to_string();
        let upstream_host = upstream
            .strip_prefix("http://")
            .or_else(|| upstream.strip_prefix("https://"))
            .expect("an http or https upstream")
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let state = Arc::new(ProxyState {
            upstream,
            upstream_host,
            proxy_host: addr.to_string(),
            cycle,
            error_body: Mutex::new(ErrorBody::Json),
            faulty: AtomicBool::new(false),
            faults_served: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            rules: Mutex::new(Vec::new()),
            // The upstreams are local simulators with certificates of their own making.
            http: reqwest::Client::builder()
                .danger_accept_invalid_certs(true)
                .build()
                .unwrap(),
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

    /// Faults are answered in this shape from now on (JSON until told).
    #[cfg_attr(
        not(any(feature = "aws", all(feature = "vsphere", feature = "openstack"))),
        allow(dead_code)
    )]
    pub fn error_body(&self, shape: ErrorBody) {
        *self.state.error_body.lock().unwrap() = shape;
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

    /// The next `faults.len()` requests of `method` whose path or body contains `needle` get
    /// these faults, in turn; then they pass again.
    pub fn fail_next(
        &self,
        method: &'static str,
        needle: &'static str,
        faults: &'static [Fault],
    ) -> Arc<Rule> {
        self.add(method, needle, Misbehaviour::Fail(faults))
    }

    /// The answers to the next `times` requests of `method` whose path or body contains
    /// `needle` have `from` replaced with `to`.
    pub fn rewrite_next(
        &self,
        method: &'static str,
        needle: &'static str,
        times: usize,
        from: &'static str,
        to: &'static str,
    ) -> Arc<Rule> {
        self.add(method, needle, Misbehaviour::Rewrite(from, to, times))
    }

    fn add(
        &self,
        method: &'static str,
        needle: &'static str,
        misbehaviour: Misbehaviour,
    ) -> Arc<Rule> {
        let rule = Arc::new(Rule {
            method,
            needle,
            misbehaviour,
            served: AtomicUsize::new(0),
            retired: AtomicBool::new(false),
        });
        self.state.rules.lock().unwrap().push(rule.clone());
        rule
    }
}

fn fault_answer((status, retry_after): Fault, shape: ErrorBody) -> Response {
    let (content_type, body) = match shape {
        ErrorBody::Json => (
            "application/json",
            json!({"message": "fault proxy", "code": status}).to_string(),
        ),
        ErrorBody::Ec2 => {
            let code = match status {
                429 | 503 => "RequestLimitExceeded",
                _ => "InternalError",
            };
            (
                "text/xml",
                format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
                     <Code>{code}</Code><Message>fault proxy: {status}</Message></Error></Errors>\
                     <RequestID>fault-proxy-{status}</RequestID></Response>"
                ),
            )
        }
        ErrorBody::Soap => (
            "text/xml; charset=utf-8",
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<soapenv:Envelope \
                 xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\"><soapenv:Body>\
                 <soapenv:Fault><faultcode>ServerFaultCode</faultcode>\
                 <faultstring>fault proxy: {status}</faultstring></soapenv:Fault>\
                 </soapenv:Body></soapenv:Envelope>"
            ),
        ),
    };
    let mut resp = Response::builder()
        .status(status)
        .header("content-type", content_type);
    if let Some(v) = retry_after {
        resp = resp.header("retry-after", v);
    }
    resp.body(Body::from(body)).unwrap()
}

async fn forward(State(s): State<Arc<ProxyState>>, req: Request) -> Response {
    s.requests.fetch_add(1, Ordering::SeqCst);
    let shape = *s.error_body.lock().unwrap();
    if s.faulty.load(Ordering::SeqCst) {
        let n = s.faults_served.fetch_add(1, Ordering::SeqCst);
        return fault_answer(s.cycle[n % s.cycle.len()], shape);
    }
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let body = axum::body::to_bytes(body, 16 << 20).await.unwrap();
    let text = String::from_utf8_lossy(&body);
    let mut rewrite = None;
    let rules = s.rules.lock().unwrap().clone();
    for rule in &rules {
        if let Some(n) = rule.claim(parts.method.as_str(), &path, &text) {
            match rule.misbehaviour {
                Misbehaviour::Fail(faults) => return fault_answer(faults[n], shape),
                Misbehaviour::Rewrite(from, to, _) => {
                    rewrite = Some((from, to));
                    break;
                }
            }
        }
    }
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
