//! The router (a function, so tests can call it in process) and the HTTPS listener.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use hypercloud_cloudprovider::throttle::AcceptBackoff;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use rustls_pki_types::CertificateDer;

use crate::auth::{Authorizer, Credentials, Decision};
use crate::health::Checks;
use crate::tls::{server_config, TlsOptions, TlsSource};
use crate::{Error, Result};

#[derive(Clone)]
struct AppState {
    checks: Checks,
    registry: prometheus::Registry,
    configz: Option<Arc<Configz>>,
}

/// What `/configz` serves (upstream component-base `configz`): the component's configuration
/// under its name, `{"<name>": <config>}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Configz {
    /// The key, e.g. `cloudcontrollermanager.config.k8s.io`.
    pub name: String,
    /// The configuration as upstream's internal type marshals it.
    pub config: serde_json::Value,
}

/// The admin endpoints (`/configz` only when given). `auth: None` serves everything to
/// everyone (in-process tests only; the components always pass an [`Authorizer`]).
pub fn router(
    registry: prometheus::Registry,
    checks: Checks,
    auth: Option<Arc<Authorizer>>,
    configz: Option<Configz>,
) -> Router {
    let has_configz = configz.is_some();
    let state = AppState {
        checks,
        registry,
        configz: configz.map(Arc::new),
    };
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics));
    let app = if has_configz {
        app.route("/configz", get(configz_handler))
    } else {
        app
    };
    let app = app.with_state(state);
    match auth {
        Some(a) => app.layer(middleware::from_fn_with_state(a, authorize)),
        None => app,
    }
}

/// The client certificate chain of a request's connection (empty when none was presented),
/// put into each request's extensions by [`serve`].
#[derive(Clone, Debug, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

async fn authorize(State(auth): State<Arc<Authorizer>>, req: Request, next: Next) -> Response {
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .map(str::to_string);
    let peer = req
        .extensions()
        .get::<PeerCertificates>()
        .cloned()
        .unwrap_or_default();
    let credentials = Credentials {
        bearer: bearer.as_deref(),
        certificates: &peer.0,
        headers: Some(req.headers()),
    };
    match auth
        .check(req.method(), req.uri().path(), credentials)
        .await
    {
        Decision::Allow => next.run(req).await,
        Decision::Unauthenticated(why) => {
            tracing::debug!(path = req.uri().path(), why, "unauthenticated request");
            (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response()
        }
        Decision::Forbidden(why) => {
            (StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")).into_response()
        }
    }
}

fn health_response(ok: bool, report: String, verbose: bool, what: &str) -> Response {
    match (ok, verbose) {
        (true, false) => (StatusCode::OK, "ok").into_response(),
        (true, true) => (StatusCode::OK, format!("{report}{what} check passed\n")).into_response(),
        (false, _) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{report}{what} check failed\n"),
        )
            .into_response(),
    }
}

fn verbose(req: &Request) -> bool {
    req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    })
}

async fn healthz(State(s): State<AppState>, req: Request) -> Response {
    let (ok, report) = s.checks.run(false);
    let what = if req.uri().path() == "/livez" {
        "livez"
    } else {
        "healthz"
    };
    health_response(ok, report, verbose(&req), what)
}

async fn readyz(State(s): State<AppState>, req: Request) -> Response {
    let (ok, report) = s.checks.run(true);
    health_response(ok, report, verbose(&req), "readyz")
}

async fn metrics(State(s): State<AppState>) -> Response {
    match prometheus::TextEncoder::new().encode_to_string(&s.registry.gather()) {
        Ok(text) => ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn configz_handler(State(s): State<AppState>) -> Response {
    let Some(c) = &s.configz else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut body = serde_json::Map::new();
    body.insert(c.name.clone(), c.config.clone());
    axum::Json(serde_json::Value::Object(body)).into_response()
}

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// `--bind-address`:`--secure-port` (port 0 picks a free one).
    pub addr: SocketAddr,
    /// The certificate.
    pub tls: TlsSource,
    /// The handshake's other settings.
    pub options: TlsOptions,
    /// `--permit-port-sharing`: SO_REUSEPORT, so several processes may listen on the port.
    /// (SO_REUSEADDR is always set, as Go's and tokio's listeners do on Unix, which is what
    /// `--permit-address-sharing` asks for.)
    pub permit_port_sharing: bool,
}

/// How long a client may take to complete the TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take to send a request's headers, counted from the moment the
/// server waits for them: after the handshake and between keep-alive requests, so it is also
/// the idle timeout (Go's `ReadHeaderTimeout` of the apiserver's secure serving is 32 s).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// A running admin server.
pub struct AdminServer {
    /// The bound address (the real port when 0 was asked for).
    pub local_addr: SocketAddr,
    /// The accept loop; ends after `shutdown`.
    pub task: JoinHandle<()>,
}

fn listen(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Binds `config.addr` and serves `app` over HTTPS until `shutdown` completes.
pub async fn serve(
    config: ServeConfig,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<AdminServer> {
    let pair = config.tls.load()?;
    let acceptor =
        tokio_rustls::TlsAcceptor::from(server_config(&pair, &config.tls, &config.options)?);
    let listener =
        listen(config.addr, config.permit_port_sharing).map_err(|source| Error::Bind {
            addr: config.addr,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| Error::Bind {
        addr: config.addr,
        source,
    })?;
    tracing::info!(%local_addr, "serving securely");
    let task = tokio::spawn(async move {
        tokio::pin!(shutdown);
        let mut backoff = AcceptBackoff::new("HTTPS connection");
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => break,
                r = listener.accept() => match r {
                    Ok(c) => {
                        backoff.succeeded();
                        c
                    }
                    Err(e) => {
                        // At the open-files limit: wait (shutdown still ends the loop).
                        tokio::select! {
                            _ = &mut shutdown => break,
                            _ = backoff.failed(&e) => continue,
                        }
                    }
                },
            };
            let acceptor = acceptor.clone();
            let app = app.clone();
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                    .await
                {
                    Ok(Ok(t)) => t,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
                let peer_certificates = PeerCertificates(Arc::new(
                    tls.get_ref()
                        .1
                        .peer_certificates()
                        .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                        .unwrap_or_default(),
                ));
                let svc = TowerToHyperService::new(app.layer(axum::Extension(peer_certificates)));
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(TokioIo::new(tls), svc)
                    .await
                {
                    tracing::debug!(%peer, error = %e, "connection error");
                }
            });
        }
    });
    Ok(AdminServer { local_addr, task })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    async fn get_path(app: Router, uri: &str) -> (StatusCode, String) {
        let resp = app
            .oneshot(
                http::Request::builder()
                    .uri(uri)
                    .body(axum::body::Body::empty())
                    .expect("request"),
            )
            .await
            .expect("infallible");
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn endpoints_answer_in_process() {
        let reg = prometheus::Registry::new();
        let c = prometheus::IntCounter::new("hypercloud_test_total", "t").expect("counter");
        reg.register(Box::new(c.clone())).expect("register");
        c.inc();
        let checks = Checks::new();
        let started = checks.add_ready_flag("started");
        let configz = Configz {
            name: "test.config.k8s.io".into(),
            config: serde_json::json!({"Generic": {"Controllers": ["*"]}}),
        };
        let app = router(reg.clone(), checks.clone(), None, Some(configz));
        assert_eq!(
            get_path(app.clone(), "/healthz").await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(get_path(app.clone(), "/livez").await.0, StatusCode::OK);
        let (status, body) = get_path(app.clone(), "/readyz").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("[-]started failed"), "{body}");
        started.set(true);
        let (status, body) = get_path(app.clone(), "/readyz?verbose").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("[+]started ok"), "{body}");
        let (status, body) = get_path(app.clone(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("hypercloud_test_total 1"), "{body}");
        let (status, body) = get_path(app, "/configz").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).expect("json"),
            serde_json::json!({"test.config.k8s.io": {"Generic": {"Controllers": ["*"]}}})
        );
        let (status, _) = get_path(router(reg, checks, None, None), "/configz").await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "no configz given, none served"
        );
    }
}
