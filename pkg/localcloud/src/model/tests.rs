//! Record and relation tests against the model and the store, without HTTP: one module per
//! resource, on one fixture ([`Fixture`]: a store in a temporary directory) and one check of
//! what every kind of record must do ([`check_record`]). The wire format stays tested through
//! HTTP (`tests/it`). Upstream equivalent: linkerd2's policy-controller index tests.

use serde::Serialize;
use serde_json::Value;
use tempfile::TempDir;

use super::Record;
use crate::store::{Store, Tx};

mod floating_ip;
mod meta;
mod network;
mod octavia;
mod port;
mod project;
mod router;
mod security_group;
mod server;
mod subnet;
mod volume;

/// A store of its own in a temporary directory.
pub(super) struct Fixture {
    pub store: Store,
    _dir: TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open store");
        Fixture { store, _dir: dir }
    }

    /// Stores `records` in one transaction.
    pub fn put<R: Record>(&self, records: &[&R]) {
        self.write(|tx| records.iter().try_for_each(|r| r.put(tx)));
    }

    pub fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> crate::Result<T>) -> T {
        self.store.write(f).expect("write")
    }
}

fn json(v: &impl Serialize) -> Value {
    serde_json::to_value(v).expect("serialize")
}

/// What every kind of record does: stored, it reads back as written (`get`, `find`, `list`);
/// each of `indexed` (field, value) finds it and a different value does not; deleted, it is
/// gone and a lookup answers the kind's not-found error naming the key.
pub(super) fn check_record<R: Record>(fx: &Fixture, record: &R, indexed: &[(&str, &str)]) {
    fx.put(&[record]);
    let id = record.id().to_owned();
    fx.store.read(|r| {
        assert_eq!(R::get(r, &id).map(|g| json(&g)), Some(json(record)));
        assert_eq!(json(&R::find(r, &id).expect("find")), json(record));
        assert_eq!(R::list(r).len(), 1);
        for (field, value) in indexed {
            assert!(R::INDEXED.contains(field), "{field} is not indexed");
            let found: Vec<String> = R::list_where(r, field, value)
                .iter()
                .map(|x| x.id().to_owned())
                .collect();
            assert_eq!(found, std::slice::from_ref(&id), "{field}={value}");
            assert!(
                R::list_where(r, field, "no-such-value").is_empty(),
                "{field}"
            );
        }
    });
    assert!(fx.write(|tx| Ok(R::delete(tx, &id))), "delete {id}");
    assert!(!fx.write(|tx| Ok(R::delete(tx, &id))), "deleted twice");
    let err = fx.store.read(|r| R::find(r, &id)).err().expect("not found");
    assert_eq!(err.kind, R::NOT_FOUND);
    assert!(err.message.contains(&id), "{}", err.message);
    assert!(err.message.contains(R::NAMES.title), "{}", err.message);
}
