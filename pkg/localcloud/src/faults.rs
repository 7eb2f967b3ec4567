//! Fault injection, for testing clients against a misbehaving cloud: added latency, server
//! errors (500 in the service's error format), throttling (429 with `Retry-After`) and failed
//! long-running operations (the Azure dialect's), each globally or per service. Upstream has no single equivalent; it plays the role of the
//! `fault injection` middleware people put in front of DevStack (toxiproxy and friends).
//!
//! Flag syntax: a global value, per-service values, or both, comma-separated:
//! `--inject-error-rate 0.1`, `--inject-error-rate compute=0.5,network=0.2`,
//! `--inject-latency 50ms,volume=2s`. Services: identity, compute, network, volume, image, load-balancer, metadata, gce, azure.
//! A per-service value wins over the global one. Faults are decided before the request is
//! handled, so a faulted request never changes state.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::{ApiError, Service};
use crate::Error;

/// How many seconds `Retry-After` asks throttled clients to wait.
pub const RETRY_AFTER_SECS: u64 = 1;

/// A value given globally and/or per service.
#[derive(Debug, Clone, PartialEq)]
pub struct PerService<T> {
    pub global: Option<T>,
    pub services: BTreeMap<Service, T>,
}

impl<T> Default for PerService<T> {
    fn default() -> Self {
        PerService {
            global: None,
            services: BTreeMap::new(),
        }
    }
}

impl<T: Copy> PerService<T> {
    /// The value for `service`: its own, else the global one.
    pub fn for_service(&self, service: Service) -> Option<T> {
        self.services.get(&service).copied().or(self.global)
    }
}

fn parse_per_service<T>(
    flag: &'static str,
    value: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<PerService<T>, Error> {
    let err = |reason: String| Error::ParseFlag {
        flag,
        value: value.to_owned(),
        reason,
    };
    let mut out = PerService::default();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((name, v)) => {
                let service = Service::ALL
                    .into_iter()
                    .find(|s| s.name() == name.trim())
                    .ok_or_else(|| {
                        let names: Vec<&str> = Service::ALL.iter().map(|s| s.name()).collect();
                        err(format!(
                            "unknown service {name:?} (one of {})",
                            names.join(", ")
                        ))
                    })?;
                out.services.insert(service, parse(v.trim()).map_err(&err)?);
            }
            None => out.global = Some(parse(part).map_err(&err)?),
        }
    }
    Ok(out)
}

/// The largest injected latency: 10 minutes.
pub const MAX_LATENCY: Duration = Duration::from_secs(600);

fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=1.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{s:?} is outside the allowed range 0 to 1"))
    }
}

/// `250ms`, `2s`, `1.5s`, `1m30s` (Go's grammar, the kit's
/// [`hypercloud_cloudprovider::duration::go_seconds`]); a bare number is milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("{s:?} is not a duration like 250ms or 2s");
    let secs = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        t.parse::<f64>().map_err(|_| bad())? * 0.001
    } else {
        hypercloud_cloudprovider::duration::go_seconds(t).ok_or_else(bad)?
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is too long a duration"))
}

/// A latency: a duration of at most [`MAX_LATENCY`].
fn parse_latency(s: &str) -> Result<Duration, String> {
    match parse_duration(s) {
        Ok(d) if d <= MAX_LATENCY => Ok(d),
        _ => Err(format!(
            "{s:?} is not a duration in the allowed range 0 to {}s",
            MAX_LATENCY.as_secs()
        )),
    }
}

/// Per-service latency, e.g. `50ms,compute=2s`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency(pub PerService<Duration>);
impl FromStr for Latency {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        parse_per_service("--inject-latency", s, parse_latency).map(Latency)
    }
}

/// Per-service probability in [0, 1], e.g. `0.1,network=1`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rate(pub PerService<f64>);
impl FromStr for Rate {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        parse_per_service("rate", s, parse_rate).map(Rate)
    }
}

/// The faults a server injects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    pub latency: Latency,
    pub error_rate: Rate,
    pub throttle_rate: Rate,
    /// Share of long-running operations that fail: the change is not made and the operation
    /// reports `Failed` (the Azure dialect's; given globally or as `azure=RATE`).
    pub operation_failure_rate: Rate,
}

impl Faults {
    /// Whether any fault is configured.
    pub fn is_empty(&self) -> bool {
        *self == Faults::default()
    }

    /// Middleware body: delays, throttles or fails the request for `service`, or passes it on.
    pub(crate) async fn apply(&self, service: Service, req: Request, next: Next) -> Response {
        if let Some(delay) = self.latency.0.for_service(service) {
            tokio::time::sleep(delay).await;
        }
        if roll(self.throttle_rate.0.for_service(service)) {
            let mut response = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "OverQuota",
                "Rate limit exceeded (injected by --inject-throttle-rate); retry later.",
            )
            .into_response();
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from(RETRY_AFTER_SECS));
            return response;
        }
        if roll(self.error_rate.0.for_service(service)) {
            return ApiError::internal("Unexpected API Error (injected by --inject-error-rate).")
                .into_response();
        }
        next.run(req).await
    }
}

impl Faults {
    /// Whether this long-running operation of `service` is to fail.
    pub(crate) fn fails_operation(&self, service: Service) -> bool {
        roll(self.operation_failure_rate.0.for_service(service))
    }
}

fn roll(rate: Option<f64>) -> bool {
    match rate {
        Some(r) if r >= 1.0 => true,
        Some(r) if r > 0.0 => fastrand::f64() < r,
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_global_and_per_service_values() {
        let rate: Rate = "0.1,compute=0.5".parse().unwrap();
        assert_eq!(rate.0.for_service(Service::Compute), Some(0.5));
        assert_eq!(rate.0.for_service(Service::Network), Some(0.1));
        let latency: Latency = "volume=2s".parse().unwrap();
        assert_eq!(
            latency.0.for_service(Service::Volume),
            Some(Duration::from_secs(2))
        );
        assert_eq!(latency.0.for_service(Service::Identity), None);
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("40"), Ok(Duration::from_millis(40)));
    }

    #[test]
    fn rejects_bad_values() {
        assert!("1.5".parse::<Rate>().is_err());
        assert!("dns=0.1".parse::<Rate>().is_err());
        assert!("fast".parse::<Latency>().is_err());
        assert!("-1s".parse::<Latency>().is_err());
        for absurd in ["1e300s", "1e20", "11m", "inf", "NaN", "1e19m"] {
            assert!(absurd.parse::<Latency>().is_err(), "{absurd}");
        }
        for absurd in ["NaN", "inf", "-0.1", "1e300", "-inf"] {
            assert!(absurd.parse::<Rate>().is_err(), "{absurd}");
        }
        assert!(parse_duration("1e300s").is_err());
    }
}
