//! The record tests of the GCE resources, one file each (as linkerd2's policy-controller
//! index tests), and what they share: a store of their own and fields read from GCE's JSON.

mod address;
mod backend_service;
mod firewall;
mod forwarding_rule;
mod http_health_check;
mod instance_group;
mod operation;
mod project_metadata;
mod route;
mod target_pool;

use super::{Object, Record, Spec};
use crate::store::Store;
use serde_json::Value;

/// A store in a new directory, removed with the guard.
pub fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, store)
}

/// A store holding `record`.
pub fn store_with(record: &impl Record) -> (tempfile::TempDir, Store) {
    let (dir, store) = store();
    store.write(|tx| record.put(tx)).unwrap();
    (dir, store)
}

/// A resource's fields, as an insert's JSON gives them.
pub fn spec<S: Spec>(fields: Value) -> S {
    serde_json::from_value(fields).unwrap()
}

/// A store holding the resource of project `p` called `name` in `scope` with `fields`.
pub fn stored<S: Spec>(
    p: &str,
    name: &str,
    scope: &str,
    fields: Value,
) -> (tempfile::TempDir, Store, Object<S>) {
    let o = Object::new(p, name.into(), scope.into(), spec(fields));
    let (dir, store) = store_with(&o);
    (dir, store, o)
}
