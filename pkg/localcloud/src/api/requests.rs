//! Counts every request the API and metadata listeners answer, by service, HTTP method, route
//! template and status code, served as `localcloud_api_requests_total` on `/metrics`. It is how
//! a benchmark or a learner sees what a client (the `openstack` provider, the CLI) really asked
//! of the cloud, as opposed to what the client thinks it asked. Upstream equivalent: the
//! per-request counters an OpenStack deployment gets from its API gateway (oslo.middleware /
//! haproxy), not something Nova itself exports.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

use super::Service;

static SERVER_ERROR_WARNINGS: hypercloud_cloudprovider::throttle::WarnLimiter =
    hypercloud_cloudprovider::throttle::WarnLimiter::new(
        hypercloud_cloudprovider::throttle::WARN_INTERVAL,
    );

/// Label values of one series: service, method, route, code.
type Key = (&'static str, String, String, u16);

/// The request counter shared by the listeners of one server.
#[derive(Debug, Default)]
pub(crate) struct RequestCounter {
    counts: Mutex<BTreeMap<Key, u64>>,
}

impl RequestCounter {
    fn add(&self, key: Key) {
        // A panic while holding the lock cannot leave a count half-written: take it over.
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(key).or_insert(0) += 1;
    }

    /// The counter family in the Prometheus text format.
    pub(crate) fn render(&self) -> String {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::from(
            "# HELP localcloud_api_requests_total Requests answered by the local cloud, by service, method, route template and status code.\n\
             # TYPE localcloud_api_requests_total counter\n",
        );
        for ((service, method, route, code), n) in counts.iter() {
            let _ = writeln!(
                out,
                "localcloud_api_requests_total{{service=\"{service}\",method=\"{method}\",route=\"{}\",code=\"{code}\"}} {n}",
                escape(route)
            );
        }
        out
    }
}

/// Label value escaping of the text format (`\`, `"` and newlines).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The service a path belongs to, by DevStack's prefixes; `None` for the root and `/metrics`.
pub(crate) fn service_of(path: &str) -> Option<Service> {
    let mut segments = path.trim_start_matches('/').split('/');
    let prefix = segments.next()?;
    let second = segments.next();
    if prefix == "compute" && second == Some("v1") {
        return Some(Service::Gce);
    }
    Some(match prefix {
        "identity" => Service::Identity,
        "compute" => Service::Compute,
        "network" => Service::Network,
        "volume" => Service::Volume,
        "image" => Service::Image,
        "load-balancer" => Service::LoadBalancer,
        // Resource Manager and its cloud metadata; Entra's `/{tenant}/oauth2/...` and
        // `/{tenant}/v2.0/...` (a tenant is none of the prefixes above).
        "subscriptions" => Service::Azure,
        "state" | "state.json" | "master" => Service::Mesos,
        "api" | "ovirt-engine" => Service::Ovirt,
        "v1" | "openidconnect" => Service::Photon,
        "client" => Service::CloudStack,
        "metadata" if second == Some("endpoints") => Service::Azure,
        _ if matches!(second, Some("oauth2" | "v2.0")) => Service::Azure,
        _ => return None,
    })
}

/// Middleware of the API listener (outermost, after routing): counts the request under its
/// route template (`/compute/v2.1/servers/{id}`, so IDs do not multiply series) and logs it at
/// debug level (`-v 4`), warning on 5xx.
pub(crate) async fn observe(
    counter: &RequestCounter,
    service: Option<Service>,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let service = service
        .or_else(|| service_of(&path))
        .map_or("other", Service::name);
    let started = std::time::Instant::now();
    let response = next.run(req).await;
    let status = response.status().as_u16();
    counter.add((service, method.as_str().to_owned(), route, status));
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if status >= 500 {
        // Injected errors and floods repeat this: rate-limited.
        if let Some(suppressed) = SERVER_ERROR_WARNINGS.allow() {
            tracing::warn!(%method, %path, status, ms, suppressed, "local-cloud request");
        }
    } else {
        tracing::debug!(%method, %path, status, ms, "local-cloud request");
    }
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_services() {
        assert_eq!(
            service_of("/compute/v2.1/servers/detail"),
            Some(Service::Compute)
        );
        assert_eq!(
            service_of("/identity/v3/auth/tokens"),
            Some(Service::Identity)
        );
        assert_eq!(
            service_of("/load-balancer/v2/lbaas/loadbalancers"),
            Some(Service::LoadBalancer)
        );
        assert_eq!(
            service_of("/compute/v1/projects/demo/zones"),
            Some(Service::Gce)
        );
        assert_eq!(
            service_of("/subscriptions/x/resourcegroups/rg"),
            Some(Service::Azure)
        );
        assert_eq!(service_of("/t/oauth2/v2.0/token"), Some(Service::Azure));
        assert_eq!(service_of("/network/v2.0/ports/a"), Some(Service::Network));
        assert_eq!(service_of("/metrics"), None);
        assert_eq!(service_of("/"), None);
    }

    #[test]
    fn renders_one_series_per_label_set() {
        let c = RequestCounter::default();
        let key = |code| {
            (
                "compute",
                "GET".to_owned(),
                "/compute/v2.1/servers/{id}".to_owned(),
                code,
            )
        };
        c.add(key(200));
        c.add(key(200));
        c.add(key(404));
        let text = c.render();
        assert!(text.contains("# TYPE localcloud_api_requests_total counter\n"));
        assert!(text.contains(
            "localcloud_api_requests_total{service=\"compute\",method=\"GET\",route=\"/compute/v2.1/servers/{id}\",code=\"200\"} 2\n"
        ), "{text}");
        assert!(text.contains("code=\"404\"} 1\n"), "{text}");
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 2);
    }
}
