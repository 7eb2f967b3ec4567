//! The cloud-controller-manager's provider webhook server (upstream k8s.io/cloud-provider
//! `app/webhooks.go` and `webhook_metrics.go`): which of the provider's webhooks
//! `--webhooks` enables ([`enabled`]), and a router that hands each AdmissionReview v1 to
//! the provider's webhook registered at its path ([`router`]), counting requests in
//! `cloud_provider_webhook_request_total` and `cloud_provider_webhook_request_duration_seconds`
//! by status code and webhook.
//!
//! As upstream's handler: a body that is not `Content-Type: application/json`, is empty or is
//! not an AdmissionReview with a request is answered 400; a provider error 500; the answer
//! carries the request's UID.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use hypercloud_cloudprovider::{Chain, Interface, WebhookSpec};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

use crate::review;

/// `--webhooks` names a webhook the provider does not have.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("--webhooks: {given:?} is not in the list of known webhooks ({known})")]
pub struct UnknownWebhook {
    /// The name given (without a leading `-`).
    pub given: String,
    /// The provider's webhooks, comma-separated (`none` when it has none).
    pub known: String,
}

/// The webhooks of `all` that `flags` (`--webhooks`: `*`, `name`, `-name`) enables, in the
/// provider's order. As upstream (`IsControllerEnabled`): the first entry naming a webhook
/// decides; otherwise `*` enables those not disabled by default; an empty list enables none.
/// A name the provider does not have is an error, as upstream's `Validate`.
pub fn enabled(all: &[WebhookSpec], flags: &[String]) -> Result<Vec<WebhookSpec>, UnknownWebhook> {
    let flags: Vec<&str> = flags
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    for entry in &flags {
        let name = entry.strip_prefix('-').unwrap_or(entry);
        if *entry != "*" && !all.iter().any(|w| w.name == name) {
            let known: Vec<&str> = all.iter().map(|w| w.name).collect();
            return Err(UnknownWebhook {
                given: name.to_string(),
                known: if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                },
            });
        }
    }
    let star = flags.contains(&"*");
    Ok(all
        .iter()
        .filter(|w| {
            flags
                .iter()
                .find_map(|e| match e.strip_prefix('-') {
                    Some(n) if n == w.name => Some(false),
                    None if *e == w.name => Some(true),
                    _ => None,
                })
                .unwrap_or(star && !w.disabled_by_default)
        })
        .copied()
        .collect())
}

/// Upstream's webhook metrics.
#[derive(Clone)]
pub struct WebhookMetrics {
    total: IntCounterVec,
    latency: HistogramVec,
}

impl WebhookMetrics {
    /// Registers `cloud_provider_webhook_request_total` and
    /// `cloud_provider_webhook_request_duration_seconds` (labels `code`, `webhook`).
    pub fn register(registry: &prometheus::Registry) -> prometheus::Result<Self> {
        let total = IntCounterVec::new(
            Opts::new(
                "cloud_provider_webhook_request_total",
                "Number of HTTP requests partitioned by status code.",
            ),
            &["code", "webhook"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "cloud_provider_webhook_request_duration_seconds",
                "Request latency in seconds. Broken down by status code.",
            )
            .buckets(vec![0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0]),
            &["code", "webhook"],
        )?;
        registry.register(Box::new(total.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        Ok(WebhookMetrics { total, latency })
    }

    fn observe(&self, code: StatusCode, webhook: &str, started: Instant) {
        let code = code.as_u16().to_string();
        self.total.with_label_values(&[&code, webhook]).inc();
        self.latency
            .with_label_values(&[&code, webhook])
            .observe(started.elapsed().as_secs_f64());
    }
}

#[derive(Clone)]
struct Route {
    cloud: Arc<dyn Interface>,
    name: &'static str,
    metrics: Option<WebhookMetrics>,
}

/// The webhook server's routes: each of `webhooks` (from [`enabled`]) at its path.
pub fn router(
    cloud: Arc<dyn Interface>,
    webhooks: &[WebhookSpec],
    metrics: Option<WebhookMetrics>,
) -> Router {
    webhooks.iter().fold(Router::new(), |app, w| {
        app.route(
            w.path,
            post(handle).with_state(Route {
                cloud: cloud.clone(),
                name: w.name,
                metrics: metrics.clone(),
            }),
        )
    })
}

async fn handle(State(route): State<Route>, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let (code, response) = answer(&route, &headers, &body).await;
    if let Some(m) = &route.metrics {
        m.observe(code, route.name, started);
    }
    response
}

async fn answer(route: &Route, headers: &HeaderMap, body: &Bytes) -> (StatusCode, Response) {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type != "application/json" {
        let message = format!("Content-Type: {content_type:?} should be \"application/json\"");
        return (StatusCode::BAD_REQUEST, review::bad_request(message));
    }
    if body.is_empty() {
        let message = "admission request HTTP body is empty".to_string();
        return (StatusCode::BAD_REQUEST, review::bad_request(message));
    }
    let request = match review::decode(body) {
        Ok(r) => r,
        Err(message) => return (StatusCode::BAD_REQUEST, review::bad_request(message)),
    };
    let Some(webhooks) = route.cloud.webhooks() else {
        return server_error(route.name, "the provider has no webhooks".into());
    };
    match webhooks.admit(route.name, &request).await {
        Ok(mut response) => {
            response.uid = request.uid.clone();
            (StatusCode::OK, Json(response.into_review()).into_response())
        }
        Err(e) => server_error(route.name, Chain(&e).to_string()),
    }
}

fn server_error(webhook: &str, error: String) -> (StatusCode, Response) {
    let message = format!("error generating admission response: {error}");
    tracing::error!(webhook, %message, "webhook failed");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        (StatusCode::INTERNAL_SERVER_ERROR, message).into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use hypercloud_cloudprovider::Webhooks;
    use kube::core::admission::{AdmissionRequest, AdmissionResponse};
    use kube::core::DynamicObject;
    use tower::ServiceExt;

    const ON: WebhookSpec = WebhookSpec {
        name: "on",
        path: "/validate/on",
        disabled_by_default: false,
    };
    const OFF: WebhookSpec = WebhookSpec {
        name: "off",
        path: "/validate/off",
        disabled_by_default: true,
    };

    fn names(flags: &[&str]) -> Result<Vec<&'static str>, UnknownWebhook> {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        enabled(&[ON, OFF], &flags).map(|l| l.iter().map(|w| w.name).collect())
    }

    #[test]
    fn upstream_enabling_rules() {
        assert_eq!(names(&[]).expect("ok"), Vec::<&str>::new(), "default: none");
        assert_eq!(names(&["*"]).expect("ok"), ["on"]);
        assert_eq!(names(&["*", "off"]).expect("ok"), ["on", "off"]);
        assert_eq!(names(&["*", "-on"]).expect("ok"), Vec::<&str>::new());
        assert_eq!(names(&["off"]).expect("ok"), ["off"]);
        assert_eq!(
            names(&["on", "-on"]).expect("ok"),
            ["on"],
            "first entry wins"
        );
        assert_eq!(
            names(&["*", "bogus"]).expect_err("unknown").to_string(),
            "--webhooks: \"bogus\" is not in the list of known webhooks (on, off)"
        );
        assert_eq!(names(&["-bogus"]).expect_err("unknown").given, "bogus");
        let none = enabled(&[], &["x".to_string()]).expect_err("provider has none");
        assert_eq!(none.known, "none");
    }

    /// Allows everything but objects named `deny-me`; fails on `fail-me`.
    struct Cloud;
    #[async_trait]
    impl Webhooks for Cloud {
        fn webhooks(&self) -> Vec<WebhookSpec> {
            vec![ON, OFF]
        }
        async fn admit(
            &self,
            webhook: &str,
            request: &AdmissionRequest<DynamicObject>,
        ) -> hypercloud_cloudprovider::Result<AdmissionResponse> {
            match request.name.as_str() {
                "fail-me" => Err(hypercloud_cloudprovider::Error::Admission {
                    webhook: webhook.into(),
                    message: "boom".into(),
                }),
                "deny-me" => {
                    Ok(AdmissionResponse::from(request).deny(format!("{webhook} says no")))
                }
                _ => Ok(AdmissionResponse::from(request)),
            }
        }
    }
    impl Interface for Cloud {
        fn provider_name(&self) -> &str {
            "test"
        }
        fn webhooks(&self) -> Option<&dyn Webhooks> {
            Some(self)
        }
    }

    fn review(name: &str) -> String {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-7",
                "kind": {"group": "", "version": "v1", "kind": "Service"},
                "resource": {"group": "", "version": "v1", "resource": "services"},
                "name": name, "namespace": "ns", "operation": "CREATE",
                "userInfo": {"username": "alice"},
                "object": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}}
            }
        })
        .to_string()
    }

    async fn post(app: &Router, path: &str, content_type: &str, body: String) -> (u16, String) {
        let resp = app
            .clone()
            .oneshot(
                http::Request::post(path)
                    .header("content-type", content_type)
                    .body(axum::body::Body::from(body))
                    .expect("request"),
            )
            .await
            .expect("infallible");
        let status = resp.status().as_u16();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// Issue #29: a review larger than the request-body limit (axum's 2 MiB default for
    /// `Bytes`; the objects reviewed here, Nodes, PVs, PVCs and Services, are far smaller) is
    /// refused with 413, never buffered whole.
    #[tokio::test]
    async fn a_huge_review_is_refused_with_413() {
        let app = router(Arc::new(Cloud), &[ON], None);
        let mut huge = review("ok");
        huge.insert_str(1, &format!("\"pad\": \"{}\", ", "x".repeat(3 << 20)));
        let (code, _) = post(&app, "/validate/on", "application/json", huge).await;
        assert_eq!(code, 413);
    }

    #[tokio::test]
    async fn routes_by_path_and_answers_as_upstream() {
        let registry = prometheus::Registry::new();
        let metrics = WebhookMetrics::register(&registry).expect("metrics");
        let app = router(Arc::new(Cloud), &[ON], Some(metrics));
        let (code, body) = post(&app, "/validate/on", "application/json", review("deny-me")).await;
        assert_eq!(code, 200);
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["response"]["uid"], "u-7");
        assert_eq!(v["response"]["allowed"], false);
        assert_eq!(v["response"]["status"]["message"], "on says no");
        let (code, body) = post(&app, "/validate/on", "application/json", review("ok")).await;
        assert_eq!(
            (code, body.contains("\"allowed\":true")),
            (200, true),
            "{body}"
        );
        let (code, body) = post(&app, "/validate/on", "application/json", review("fail-me")).await;
        assert_eq!(code, 500);
        assert!(body.contains("webhook on: boom"), "{body}");
        let (code, body) = post(&app, "/validate/on", "text/plain", review("ok")).await;
        assert_eq!(code, 400);
        assert!(body.contains("should be \"application/json\""), "{body}");
        assert_eq!(
            post(&app, "/validate/on", "application/json", String::new())
                .await
                .0,
            400
        );
        assert_eq!(
            post(&app, "/validate/on", "application/json", "{oops".into())
                .await
                .0,
            400
        );
        assert_eq!(
            post(&app, "/validate/off", "application/json", review("ok"))
                .await
                .0,
            404,
            "a webhook not enabled is not served"
        );
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .expect("text");
        for line in [
            "cloud_provider_webhook_request_total{code=\"200\",webhook=\"on\"} 2",
            "cloud_provider_webhook_request_total{code=\"500\",webhook=\"on\"} 1",
            "cloud_provider_webhook_request_total{code=\"400\",webhook=\"on\"} 3",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
    }
}
