//! Timestamps in the exact form each service's API reference shows: Neutron and Nova
//! `2018-08-23T20:05:21Z`, Cinder `2018-08-23T20:05:21.000000`, Octavia `2018-08-23T20:05:21`
//! (the Octavia form is checked on every Octavia kind in `loadbalancer.rs`). Clients that parse
//! strictly (Go's `time.Parse` with a fixed layout, gophercloud) fail on any other form.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::TestCloud;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Whether `t` is `YYYY-MM-DDTHH:MM:SS` followed by exactly `suffix`, where `suffix` may hold
/// `#` for any digit.
fn shaped(t: &str, suffix: &str) -> bool {
    let (head, tail) = t.split_at(t.len().min(19));
    let head_ok = head.len() == 19
        && head.bytes().enumerate().all(|(i, c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            _ => c.is_ascii_digit(),
        });
    head_ok
        && tail.len() == suffix.len()
        && tail.bytes().zip(suffix.bytes()).all(|(c, s)| {
            if s == b'#' {
                c.is_ascii_digit()
            } else {
                c == s
            }
        })
}

fn assert_times(v: &Value, keys: &[&str], suffix: &str, what: &str) {
    for k in keys {
        let t = v[*k]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no {k} in {v}"));
        assert!(
            shaped(t, suffix),
            "{what} {k} is {t:?}, want the form 2018-08-23T20:05:21{suffix}"
        );
    }
}

#[test]
fn the_shape_check_can_fail() {
    assert!(shaped("2018-08-23T20:05:21Z", "Z"));
    assert!(!shaped("2018-08-23T20:05:21", "Z"));
    assert!(!shaped("2018-08-23T20:05:21Z", ""));
    assert!(shaped("2018-08-23T20:05:21.000000", ".######"));
    assert!(!shaped("2018-08-23T20:05:21.000000Z", ".######"));
}

#[tokio::test]
async fn each_service_writes_its_own_timestamp_form() {
    let c = TestCloud::start().await;

    // Neutron: every resource kind of the seed, with a trailing Z.
    for kind in ["networks", "subnets", "ports", "routers"] {
        let r = c.get(&format!("/network/v2.0/{kind}")).await;
        let items = r.body[kind].as_array().unwrap();
        assert!(!items.is_empty(), "{kind}: {}", r.body);
        for item in items {
            assert_times(item, &["created_at", "updated_at"], "Z", kind);
        }
    }

    // Nova: `created`/`updated` with a trailing Z.
    let id = c.create_server("ts", json!({})).await;
    let r = c.get(&format!("/compute/v2.1/servers/{id}")).await;
    assert_times(&r.body["server"], &["created", "updated"], "Z", "server");

    // Cinder: microseconds, no zone.
    let r = c
        .post(&c.volumes(), json!({"volume": {"size": 1, "name": "ts"}}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_times(&r.body["volume"], &["created_at"], ".######", "volume");
    let vid = r.body["volume"]["id"].as_str().unwrap();
    let r = c.get(&format!("{}/{vid}", c.volumes())).await;
    assert_times(
        &r.body["volume"],
        &["created_at", "updated_at"],
        ".######",
        "volume",
    );
}
