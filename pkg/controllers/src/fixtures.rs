//! Reconcile-level tests without an apiserver (kube-rs/controller-rs `fixtures.rs`): a
//! [`kube::Client`] over a tower-test mock, and an [`ApiServerVerifier`] that answers the
//! requests a reconcile sends one by one, checking each one's verb, URI and body. A request
//! the script does not expect, or one it expects that never comes, fails the test; each test
//! runs in milliseconds. What needs a real apiserver (watches, merge semantics, conflicts)
//! stays in `tests/`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hypercloud_cloudprovider::fake::{FakeCloud, FakeConfig};
use kube::client::Body;
use serde_json::Value;

use crate::{metrics, Context};

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// The apiserver's side of the mock: answers requests in the order the test script expects.
pub(crate) struct ApiServerVerifier(Handle);

/// One request as the mock apiserver received it.
#[derive(Debug)]
pub(crate) struct Received {
    /// `PATCH`, `POST`, ...
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// `Content-Type`.
    pub content_type: String,
    /// The JSON body (`Null` without one).
    pub body: Value,
}

impl ApiServerVerifier {
    /// Takes the next request, which must be `method` on `uri` (path and query), and answers
    /// it with `response` (status 200). Returns the request for the caller's body checks.
    pub async fn expect(&mut self, method: &str, uri: &str, response: Value) -> Received {
        let received = self.answer(response).await;
        assert_eq!(
            (received.method.as_str(), received.uri.as_str()),
            (method, uri),
            "unexpected request {received:?}"
        );
        received
    }

    /// Takes the next request, which must create an Event (events.k8s.io/v1) in `namespace`
    /// with `reason`; answers with the Event itself, as the apiserver does.
    pub async fn expect_event(&mut self, namespace: &str, reason: &str) -> Received {
        let (request, send) = self.next().await;
        let received = received(request).await;
        assert_eq!(
            (received.method.as_str(), received.uri.as_str()),
            (
                "POST",
                format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events?").as_str()
            ),
            "expected a {reason} event, got {received:?}"
        );
        assert_eq!(received.body["reason"], reason, "{received:?}");
        respond(send, &received.body);
        received
    }

    /// Takes the next request, whatever it is, and answers with its own body (what the
    /// apiserver returns for an Event it created or patched whole).
    pub async fn echo(&mut self) -> Received {
        let (request, send) = self.next().await;
        let received = received(request).await;
        respond(send, &received.body);
        received
    }

    async fn answer(&mut self, response: Value) -> Received {
        let (request, send) = self.next().await;
        let received = received(request).await;
        respond(send, &response);
        received
    }

    async fn next(
        &mut self,
    ) -> (
        Request<Body>,
        tower_test::mock::SendResponse<Response<Body>>,
    ) {
        tokio::time::timeout(Duration::from_secs(5), self.0.next_request())
            .await
            .expect("the reconcile sent no further request")
            .expect("the client went away before sending the expected request")
    }
}

async fn received(request: Request<Body>) -> Received {
    let method = request.method().to_string();
    let uri = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = request
        .into_body()
        .collect_bytes()
        .await
        .expect("request body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("JSON request body")
    };
    Received {
        method,
        uri,
        content_type,
        body,
    }
}

fn respond(send: tower_test::mock::SendResponse<Response<Body>>, body: &Value) {
    let bytes = serde_json::to_vec(body).expect("JSON response");
    send.send_response(
        Response::builder()
            .status(200)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(bytes))
            .expect("response"),
    );
}

/// Controller flags as parsed from `args`.
pub(crate) fn options(args: &[&str]) -> hypercloud_options::ControllerOptions {
    use clap::Parser;
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        c: hypercloud_options::ControllerOptions,
    }
    Flags::parse_from(std::iter::once("t").chain(args.iter().copied())).c
}

/// A [`Context`] whose client talks to the returned verifier, with `cloud` as the provider.
pub(crate) fn context(cloud: FakeCloud, args: &[&str]) -> (Arc<Context>, ApiServerVerifier) {
    context_with(Arc::new(cloud), args, "cloud-controller-manager")
}

/// [`context`] with any provider, reporting as `component`.
pub(crate) fn context_with(
    cloud: Arc<dyn hypercloud_cloudprovider::Interface>,
    args: &[&str],
    component: &str,
) -> (Arc<Context>, ApiServerVerifier) {
    let (client, api) = client();
    let metrics = metrics::Metrics::new(&prometheus::Registry::new()).expect("metrics");
    let ctx = Context::new(client, cloud, component, options(args), metrics);
    (Arc::new(ctx), api)
}

/// A client whose requests the returned verifier answers.
pub(crate) fn client() -> (kube::Client, ApiServerVerifier) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (
        kube::Client::new(service, "default"),
        ApiServerVerifier(handle),
    )
}

/// A fake cloud from its YAML configuration.
pub(crate) fn cloud(config: &str) -> FakeCloud {
    let config: FakeConfig = serde_yaml::from_str(config).expect("fake cloud config");
    FakeCloud::new(config)
}

/// Runs `work` (a reconcile) against `api` answered by `script`; fails if the script panics
/// (a wrong request) or either side waits for the other (a missing or extra request).
pub(crate) async fn exchange<T, S, F>(work: F, api: ApiServerVerifier, script: S) -> T
where
    F: Future<Output = T>,
    S: FnOnce(
        ApiServerVerifier,
    ) -> std::pin::Pin<Box<dyn Future<Output = ApiServerVerifier> + Send>>,
{
    let verifier = tokio::spawn(script(api));
    let out = tokio::time::timeout(Duration::from_secs(5), work)
        .await
        .expect("the reconcile waited for an answer the script never gave");
    let mut api = match verifier.await {
        Ok(api) => api,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    // Nothing more may come.
    let extra = tokio::time::timeout(Duration::from_millis(20), api.0.next_request()).await;
    if let Ok(Some((request, _))) = extra {
        panic!(
            "the reconcile sent a request the script did not expect: {} {}",
            request.method(),
            request.uri()
        );
    }
    out
}
