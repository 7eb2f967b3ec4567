//! Property tests of every write of every dialect (OpenStack's services and Compute Engine):
//! a valid body, then one structure-preserving mutation (a field set to a huge, tiny,
//! negative, fractional or NaN-like number, a wrong type, a long string; a field removed; an
//! unknown field added) or a body replaced by arbitrary JSON (`null`, a number, a string, a
//! list...), sent in process to the API router (`tower::ServiceExt::oneshot`, no sockets); and
//! every write route with a hostile path segment (unknown IDs, control characters, `..`).
//! Properties: no panic, no 5xx, a 400 names the field that was made bad, and every 4xx leaves
//! the store exactly as it was (no write committed: the store announces every commit). Load balancers
//! are settled to `ACTIVE` after each call, as the data plane would, so the Octavia calls get
//! past the 409 of a pending load balancer.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};
use tower::ServiceExt as _;

use super::Cloud;
use crate::ServerConfig;

/// Cases per body target (48 targets) and per path target.
mod gce;
mod openstack;
mod paths;

use gce::{gce_scope, gce_targets};
use openstack::targets;
use paths::{hostile_segment, path_targets};

const CASES: u32 = 128;

struct Harness {
    rt: tokio::runtime::Runtime,
    /// The store's announcements of committed writes.
    changes: std::cell::RefCell<tokio::sync::broadcast::Receiver<crate::store::Change>>,
    cloud: Arc<Cloud>,
    router: Router,
    token: String,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new() -> Harness {
        // tmpfs when there is one: every write is fsynced.
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("tempdir");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut config = ServerConfig::ephemeral(dir.path());
        config.metadata_listen = None;
        let cloud = rt.block_on(async {
            let store = Arc::new(crate::store::Store::open(dir.path()).expect("store"));
            let cloud = Arc::new(Cloud {
                dataplane: crate::dataplane::DataPlane::new(store.clone(), false),
                store,
                faults: Default::default(),
                requests: Default::default(),
                config,
                base_url: BASE_URL.into(),
                backing: Arc::new(crate::backing::Backing::new(
                    crate::VolumeBacking::None,
                    dir.path(),
                )),
            });
            crate::server::seed(&cloud).await.expect("seed");
            cloud
        });
        let router = super::router(cloud.clone());
        let changes = std::cell::RefCell::new(cloud.store.subscribe());
        let mut h = Harness {
            rt,
            changes,
            cloud,
            router,
            token: String::new(),
            _dir: dir,
        };
        let auth = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": crate::defaults::PASSWORD}}},
            "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}});
        let (status, _, headers) = h.send(Method::POST, "/identity/v3/auth/tokens", &auth);
        assert_eq!(status, StatusCode::CREATED);
        h.token = headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .expect("token")
            .to_owned();
        h
    }

    fn send(
        &self,
        method: Method,
        path: &str,
        body: &Value,
    ) -> (StatusCode, Value, axum::http::HeaderMap) {
        self.send_bytes(method, path, body.to_string().into_bytes())
    }

    fn send_bytes(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> (StatusCode, Value, axum::http::HeaderMap) {
        let (status, body, headers, _) = self.exchange(method, path, body);
        (status, body, headers)
    }

    /// Sends a request; also says which tables it changed (before the data plane's settling).
    fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> (StatusCode, Value, axum::http::HeaderMap, Vec<String>) {
        // Commits of earlier calls (and of the settling after them) are not this call's.
        let mut changes = self.changes.borrow_mut();
        while changes.try_recv().is_ok() {}
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("x-auth-token", &self.token)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("request");
        let (status, headers, bytes) = self.rt.block_on(async {
            let resp = self.router.clone().oneshot(req).await.expect("infallible");
            let status = resp.status();
            let headers = resp.headers().clone();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap_or_default();
            (status, headers, bytes)
        });
        // Every committed write is announced; a refused call must have committed none.
        let mut changed: Vec<String> = Vec::new();
        loop {
            match changes.try_recv() {
                Ok(c) => changed.push(format!("{}/{}", c.kind, c.id)),
                Err(tokio::sync::broadcast::error::TryRecvError::Lagged(n)) => {
                    changed.push(format!("{n} more"));
                }
                Err(_) => break,
            }
        }
        drop(changes);
        // What the data plane does after each change (without opening sockets).
        let _ = self
            .cloud
            .store
            .write(|tx| crate::dataplane::settle(tx, &[], None));
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, body, headers, changed)
    }

    /// Creates through the API (must succeed) and returns `body[key]["id"]`.
    fn create(&self, path: &str, body: Value, key: &str) -> String {
        let (status, reply, _) = self.send(Method::POST, path, &body);
        assert!(status.is_success(), "{path}: {status} {reply}");
        reply[key]["id"].as_str().expect("id").to_owned()
    }

    /// Deletes what a successful create made, so every case starts from the same state.
    fn clean_up(&self, target: &Target, status: StatusCode, reply: &Value) {
        if target.name == "volume extend" {
            // Back to 1 GiB, so the next extend to 2 is valid again.
            let _ = self.cloud.store.write(|tx| -> Result<(), super::ApiError> {
                use crate::store::Read as _;
                for mut v in tx.list::<super::volume::Volume>(super::volume::VOLUMES) {
                    v.size = 1;
                    tx.put(super::volume::VOLUMES, &v.meta.id.clone(), &v)?;
                }
                Ok(())
            });
        }
        if !status.is_success() {
            return;
        }
        if target.name.starts_with("gce set") {
            self.restore_gce(target);
            return;
        }
        if target.name.starts_with("gce insert") {
            // The answer is the insert's Operation; its target is what was made.
            let link = reply["targetLink"].as_str().unwrap_or_default();
            let path = link.strip_prefix(BASE_URL).unwrap_or(link).to_owned();
            let (status, reply, _) = self.send(Method::DELETE, &path, &Value::Null);
            assert!(status.is_success(), "cleaning up {path}: {status} {reply}");
            return;
        }
        if target.method != Method::POST || target.path.ends_with("/action") || !target.wrapped {
            return;
        }
        let id = reply
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(|v| v["id"].as_str());
        if let Some(id) = id {
            let path = format!("{}/{id}", target.path);
            let (status, reply, _) = self.send(Method::DELETE, &path, &Value::Null);
            assert!(status.is_success(), "cleaning up {path}: {status} {reply}");
        }
    }

    fn get(&self, path: &str) -> Value {
        self.send(Method::GET, path, &Value::Null).1
    }

    /// Puts back what a `gce set*` target's valid body sets, with the current fingerprint, so
    /// the next case's fingerprint is current again.
    fn restore_gce(&self, target: &Target) {
        let resource = target.path.rsplit_once('/').map_or("", |(r, _)| r);
        let shown = self.get(resource);
        let current = match target.path.rsplit('/').next() {
            Some("setTags") => &shown["tags"]["fingerprint"],
            Some("setMetadata") => &shown["metadata"]["fingerprint"],
            _ => &shown["commonInstanceMetadata"]["fingerprint"],
        };
        let mut body = target.body.clone();
        body["fingerprint"] = current.clone();
        let (status, reply, _) = self.send(Method::POST, &target.path, &body);
        assert!(
            status.is_success(),
            "restoring {}: {status} {reply}",
            target.path
        );
    }

    /// The fingerprint `resource` shows at `pointer`.
    fn fingerprint(&self, resource: &str, pointer: &str) -> Value {
        self.get(resource)
            .pointer(pointer)
            .cloned()
            .unwrap_or(Value::Null)
    }
}

/// Where the in-process cloud says it is.
const BASE_URL: &str = "http://127.0.0.1:1";

/// One create or update call and a valid body for it.
struct Target {
    name: &'static str,
    method: Method,
    path: String,
    body: Value,
    /// OpenStack wraps a body in the resource's name (`{"server": {...}}`); GCE does not.
    wrapped: bool,
}

/// Hostile values: numbers that do not fit, NaN-like strings, wrong types, long strings.
fn hostile() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            json!(null),
            json!(true),
            json!([]),
            json!({}),
            json!([[]]),
            json!({"a": {"b": 1}}),
            json!(i64::MIN),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(-1),
            json!(0),
            json!(1e308),
            json!(-1e308),
            json!(1e-300),
            json!(0.5),
            json!(-0.0),
            json!(2_147_483_648_i64),
            json!(31_536_000_001_i64),
            json!("NaN"),
            json!("inf"),
            json!("-Infinity"),
            json!("1e309"),
            json!("-1"),
            json!(""),
            json!("0.0.0.0"),
            json!("::"),
            json!("10.0.0.0/33"),
            json!("\u{0}"),
            json!("x".repeat(70_000)),
        ]),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,24}".prop_map(|s| json!(s)),
        prop::collection::vec(any::<i16>(), 0..3).prop_map(|v| json!(v)),
    ]
}

/// Arbitrary JSON, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Set the field at this pointer to a hostile value.
    Set(prop::sample::Index, Value),
    Remove(prop::sample::Index),
    AddUnknown(prop::sample::Index, Value),
    /// The whole body is arbitrary JSON.
    Body(Value),
    /// The body is not JSON at all.
    Bytes(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<prop::sample::Index>(), hostile()).prop_map(|(i, v)| Mutation::Set(i, v)),
        2 => any::<prop::sample::Index>().prop_map(Mutation::Remove),
        1 => (any::<prop::sample::Index>(), hostile()).prop_map(|(i, v)| Mutation::AddUnknown(i, v)),
        1 => any_json().prop_map(Mutation::Body),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Mutation::Bytes),
    ]
}

/// JSON pointers of every object member in `v` (`/server/name`, `/members/0/weight`).
fn pointers(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                pointers(child, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                pointers(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The parent object of `pointer` and its last key.
fn split(pointer: &str) -> (&str, &str) {
    pointer.rsplit_once('/').unwrap_or(("", pointer))
}

/// The names a 400 about the field at `pointer` may use: the field or an enclosing one
/// (`fixed_ips` for `/port/fixed_ips/0/subnet_id`), not the body's wrapper key. None for the
/// wrapper itself (`/server`), whose error is about the body.
fn names_for(pointer: &str, wrapped: bool) -> Option<Vec<String>> {
    let segments: Vec<&str> = pointer
        .split('/')
        .filter(|s| !s.is_empty() && s.parse::<usize>().is_err())
        .collect();
    let skip = usize::from(wrapped);
    (segments.len() > skip).then(|| segments[skip..].iter().map(|s| (*s).to_owned()).collect())
}

/// Applies `m` to `base`: the bytes to send and the names a 400 must use (one of them).
fn apply(base: &Value, m: &Mutation, wrapped: bool) -> (Vec<u8>, Option<Vec<String>>) {
    let mut body = base.clone();
    let mut ptrs = Vec::new();
    pointers(base, "", &mut ptrs);
    match m {
        Mutation::Set(i, v) => {
            let p = &ptrs[i.index(ptrs.len())];
            if let Some(slot) = body.pointer_mut(p) {
                *slot = v.clone();
            }
            (body.to_string().into_bytes(), names_for(p, wrapped))
        }
        Mutation::Remove(i) => {
            let p = &ptrs[i.index(ptrs.len())];
            let (parent, key) = split(p);
            if let Some(Value::Object(o)) = body.pointer_mut(parent) {
                o.remove(key);
            }
            (body.to_string().into_bytes(), names_for(p, wrapped))
        }
        Mutation::AddUnknown(i, v) => {
            let p = &ptrs[i.index(ptrs.len())];
            let (parent, _) = split(p);
            if let Some(Value::Object(o)) = body.pointer_mut(parent) {
                o.insert("zz_unknown_field".into(), v.clone());
            }
            let mut names = names_for(&format!("{parent}/zz_unknown_field"), wrapped)
                .unwrap_or_else(|| vec!["zz_unknown_field".into()]);
            names.push("zz_unknown_field".into());
            (body.to_string().into_bytes(), Some(names))
        }
        Mutation::Body(v) => (v.to_string().into_bytes(), None),
        Mutation::Bytes(b) => (b.clone(), None),
    }
}

/// The error text of a reply in any service's format.
fn message(body: &Value) -> String {
    let found = [
        &body["faultstring"],
        &body["NeutronError"]["message"],
        &body["error"]["message"],
        &body["badRequest"]["message"],
    ]
    .into_iter()
    .find_map(|v| v.as_str());
    found.map_or_else(|| body.to_string(), str::to_owned)
}

/// Whether `message` names `field` (`new_size` also as "new size", a list field also in the
/// singular as Neutron says it, "The allocation pool ... spans beyond ..."; any case).
fn names(message: &str, field: &str) -> bool {
    let m = message.to_lowercase();
    let f = field.to_lowercase();
    let singular = f.strip_suffix('s').unwrap_or(&f);
    [f.as_str(), singular]
        .iter()
        .any(|f| m.contains(f) || m.contains(&f.replace('_', " ")))
}

/// The runner of one target: `CASES` cases from a seed fixed per target, so that a CI run
/// is repeatable; `PROPTEST_CASES` and `PROPTEST_RNG_SEED` (proptest's own variables)
/// override both to explore further (`PROPTEST_RNG_SEED=random` for a new seed each run).
fn runner(target: &str) -> TestRunner {
    use proptest::test_runner::RngSeed;
    let from_env = Config::default();
    let cases = std::env::var_os("PROPTEST_CASES").map_or(CASES, |_| from_env.cases);
    let rng_seed = match std::env::var("PROPTEST_RNG_SEED").as_deref() {
        Ok("random") => RngSeed::Random,
        Ok(_) => from_env.rng_seed,
        Err(_) => RngSeed::Fixed(target.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })),
    };
    TestRunner::new(Config {
        cases,
        rng_seed,
        failure_persistence: None,
        ..Config::default()
    })
}

/// The service group a target belongs to, for the case counts printed at the end.
fn group(path: &str) -> &'static str {
    let groups = [
        ("/compute/v1/", "gce"),
        ("/identity/", "keystone"),
        ("/compute/v2.1/", "nova"),
        ("/network/", "neutron"),
        ("/volume/", "cinder"),
        ("/load-balancer/", "octavia"),
    ];
    groups
        .iter()
        .find(|(prefix, _)| path.starts_with(prefix))
        .map_or("other", |(_, g)| g)
}

/// Checks one answer: no 5xx, and a 4xx changed nothing.
fn check_answer(
    what: &str,
    status: StatusCode,
    reply: &Value,
    changed: &[String],
) -> Result<(), TestCaseError> {
    prop_assert!(status.as_u16() < 500, "{what} got {status} {reply}");
    prop_assert!(
        !status.is_client_error() || changed.is_empty(),
        "{what} got {status} but committed writes to {changed:?}: {reply}"
    );
    Ok(())
}

#[test]
fn every_service_survives_hostile_bodies_and_names_the_bad_field() {
    let h = Harness::new();
    let started = std::time::Instant::now();
    let mut counts: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
    let mut failures = Vec::new();
    for target in targets(&h) {
        // The valid body is accepted (the generator starts from a real call).
        let (status, reply, _) = h.send(target.method.clone(), &target.path, &target.body);
        assert!(
            status.as_u16() < 400 || status == StatusCode::CONFLICT,
            "{}: the valid body got {status} {reply}",
            target.name
        );
        h.clean_up(&target, status, &reply);
        let mut runner = runner(target.name);
        let result = runner.run(&mutation(), |m| {
            let (bytes, field) = apply(&target.body, &m, target.wrapped);
            let (status, reply, _, changed) =
                h.exchange(target.method.clone(), &target.path, bytes);
            check_answer(&format!("{}: {m:?}", target.name), status, &reply, &changed)?;
            if status == StatusCode::BAD_REQUEST {
                if let Some(fields) = field {
                    let text = message(&reply);
                    prop_assert!(
                        fields.iter().any(|f| names(&text, f)),
                        "{}: {m:?} got 400 without naming any of {fields:?}: {text}",
                        target.name
                    );
                }
            }
            h.clean_up(&target, status, &reply);
            Ok(())
        });
        if let Err(e) = result {
            failures.push(format!("{}: {e}", target.name));
        }
        let entry = counts.entry(group(&target.path)).or_default();
        entry.0 += 1;
        entry.1 += runner.config().cases;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let total: u32 = counts.values().map(|c| c.1).sum();
    for (group, (targets, cases)) in &counts {
        eprintln!("{group}: {targets} targets, {cases} generated bodies");
    }
    eprintln!(
        "{total} generated requests in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn every_write_route_refuses_hostile_paths_without_changing_anything() {
    let h = Harness::new();
    // The fixtures the routes name (`fx`, `fxpool`), made as the body test makes them.
    let _ = targets(&h);
    let started = std::time::Instant::now();
    let routes = path_targets(&h);
    let mut failures = Vec::new();
    let mut total = 0u32;
    for (method, template) in &routes {
        let base = runner(template);
        let cases = (base.config().cases / 4).max(1);
        let mut runner = TestRunner::new(Config {
            cases,
            ..base.config().clone()
        });
        let result = runner.run(&(hostile_segment(), any_json()), |(segment, body)| {
            let path = template.replace("{}", &segment);
            let (status, reply, _, changed) =
                h.exchange(method.clone(), &path, body.to_string().into_bytes());
            check_answer(&format!("{method} {path}"), status, &reply, &changed)?;
            prop_assert!(
                status.is_client_error(),
                "{method} {path} names nothing but got {status} {reply}"
            );
            if crate::api::has_control_characters(&path) {
                prop_assert_eq!(
                    status,
                    StatusCode::BAD_REQUEST,
                    "{} {}: {}",
                    method,
                    path,
                    reply
                );
            }
            Ok(())
        });
        if let Err(e) = result {
            failures.push(format!("{method} {template}: {e}"));
        }
        total += cases;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "{} write routes, {total} hostile paths in {:.1}s",
        routes.len(),
        started.elapsed().as_secs_f64()
    );
}
