//! `/healthmonitors`: one per pool; its timing fields are range-checked here, so the data
//! plane's probe loop only ever sees Octavia's ranges.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Extension;

use super::body::{invalid, Body, MAX_INT};
use super::{conflict, find, lock_lb, one, put, ApiResult, Release};
use crate::api::{ApiError, Caller, Ctx};
use crate::model::octavia::{self as m, Common, HealthMonitor, Operating, Pool, Ref};
use crate::store::Tx;

pub(super) const FIELDS: &[&str] = &[
    "name",
    "admin_state_up",
    "tags",
    "pool_id",
    "type",
    "delay",
    "timeout",
    "max_retries",
    "max_retries_down",
    "http_method",
    "url_path",
    "expected_codes",
    "http_version",
    "domain_name",
    "project_id",
    "tenant_id",
];

const TYPES: &[&str] = &[
    "TCP",
    "HTTP",
    "HTTPS",
    "PING",
    "UDP-CONNECT",
    "TLS-HELLO",
    "SCTP",
];

const HTTP_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "OPTIONS", "PATCH", "CONNECT",
];

fn to_u32(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn to_u8(n: i64) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// Octavia's form of `expected_codes`: `200`, `200,202` or `200-204`, three-digit codes
/// 100..=599, a range low before high.
fn valid_expected_codes(c: &str) -> bool {
    let code = |s: &str| {
        let s = s.trim();
        (s.len() == 3)
            .then(|| s.parse::<u16>().ok())
            .flatten()
            .filter(|n| (100..=599).contains(n))
    };
    match c.split_once('-') {
        Some((a, b)) => matches!((code(a), code(b)), (Some(a), Some(b)) if a <= b),
        None => c.split(',').all(|p| code(p).is_some()),
    }
}

/// Copies the probe settings of a create or update body, with Octavia's ranges: `delay` and
/// `timeout` 0..=2147483647 seconds, `max_retries`/`max_retries_down` 1..=10.
fn apply_settings(b: &Body, hm: &mut HealthMonitor) -> Result<(), ApiError> {
    // Octavia's InvalidOption: the HTTP settings belong to HTTP(S) monitors only.
    if !hm.kind.starts_with("HTTP") {
        for k in ["http_method", "url_path", "expected_codes"] {
            if b.raw(k).is_some_and(|v| !v.is_null()) {
                return Err(invalid(format!(
                    "{k} is not a valid option for health monitors of type {}",
                    hm.kind
                )));
            }
        }
    }
    if let Some(n) = b.opt_int("delay", 0, MAX_INT)? {
        hm.delay = to_u32(n);
    }
    if let Some(n) = b.opt_int("timeout", 0, MAX_INT)? {
        hm.timeout = to_u32(n);
    }
    if let Some(n) = b.opt_int("max_retries", 1, 10)? {
        hm.max_retries = to_u8(n);
    }
    if let Some(n) = b.opt_int("max_retries_down", 1, 10)? {
        hm.max_retries_down = to_u8(n);
    }
    if let Some(c) = b.opt_str("expected_codes")? {
        if !valid_expected_codes(&c) {
            return Err(invalid(format!(
                "expected_codes. Value: '{c}'. Value should be status codes"
            )));
        }
        hm.expected_codes = Some(c);
    }
    if let Some(u) = b.opt_str("url_path")? {
        if !u.starts_with('/') {
            return Err(invalid(format!(
                "url_path. Value: '{u}'. Value should start with /"
            )));
        }
        hm.url_path = Some(u);
    }
    if b.has("http_method") {
        hm.http_method = b.opt_one_of("http_method", HTTP_METHODS)?;
    }
    if let Some(v) = b.raw("http_version") {
        hm.http_version = match v.as_f64() {
            None if v.is_null() => None,
            Some(x) if x == 1.0 || x == 1.1 => Some(x),
            _ => {
                return Err(invalid(format!(
                    "http_version. Value: '{v}'. Value should be one of [1.0, 1.1]"
                )))
            }
        };
    }
    if b.has("domain_name") {
        hm.domain_name = b.opt_str("domain_name")?;
    }
    b.apply_common(&mut hm.common)
}

/// A new health monitor of `pool_id` from a create body (validated, not stored).
pub(super) fn build(b: &Body, caller: &Caller, pool_id: &str) -> Result<HealthMonitor, ApiError> {
    let kind = b.req_one_of("type", TYPES)?;
    b.req_int("delay", 0, MAX_INT)?;
    b.req_int("timeout", 0, MAX_INT)?;
    b.req_int("max_retries", 1, 10)?;
    let http = kind.starts_with("HTTP");
    let mut hm = HealthMonitor {
        common: Common::new(&caller.project_id),
        pools: Ref::to(pool_id),
        kind,
        delay: 0,
        timeout: 0,
        max_retries: 0,
        max_retries_down: 3,
        http_method: http.then(|| "GET".to_owned()),
        url_path: http.then(|| "/".to_owned()),
        expected_codes: http.then(|| "200".to_owned()),
        http_version: http.then_some(1.0),
        domain_name: None,
    };
    apply_settings(b, &mut hm)?;
    Ok(hm)
}

pub(super) async fn create(
    State(cloud): Ctx,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult {
    let b = Body::parse(&body, "healthmonitor", FIELDS)?;
    let pool_id = b.req_str("pool_id")?;
    let hm = build(&b, &caller, &pool_id)?;
    cloud
        .write(move |tx| {
            let p: Pool = find(tx, &pool_id)?;
            if !m::monitors_of(tx, &pool_id).is_empty() {
                return Err(conflict(format!(
                    "Pool {pool_id} already has a health monitor"
                )));
            }
            lock_lb(tx, p.lb_id())?;
            put(tx, &hm)?;
            Ok(one(tx, StatusCode::CREATED, &hm))
        })
        .await
}

pub(super) async fn update(State(cloud): Ctx, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let b = Body::parse(&body, "healthmonitor", FIELDS)?;
    cloud
        .write(move |tx| {
            let mut hm: HealthMonitor = find(tx, &id)?;
            b.immutable(&hm, &["type"])?;
            if let Some(p) = b.raw("pool_id") {
                if p.as_str() != Some(hm.pool_id()) {
                    return Err(conflict(
                        "Attribute pool_id is immutable and cannot be changed.",
                    ));
                }
            }
            let pool: Pool = find(tx, hm.pool_id())?;
            lock_lb(tx, pool.lb_id())?;
            apply_settings(&b, &mut hm)?;
            hm.common.touch();
            put(tx, &hm)?;
            Ok(one(tx, StatusCode::OK, &hm))
        })
        .await
}

impl Release for HealthMonitor {
    fn release(&self, tx: &mut Tx<'_>) -> Result<(), ApiError> {
        if let Ok(pool) = find::<Pool>(tx, self.pool_id()) {
            lock_lb(tx, pool.lb_id())?;
        }
        for mut member in m::members_of(tx, self.pool_id()) {
            member.common.operating_status = Operating::NoMonitor;
            put(tx, &member)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_codes_take_octavias_forms() {
        for ok in ["200", "200,202", "200-204", "599"] {
            assert!(valid_expected_codes(ok), "{ok}");
        }
        for bad in [
            "", "20", "2000", "600", "204-200", "200-", "a", "200,", "99",
        ] {
            assert!(!valid_expected_codes(bad), "{bad}");
        }
    }
}
