//! The store's secondary index (see [`super`]'s docs): which objects of a kind hold a value in
//! a field, kept in step with every write and rollback.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::Tables;

/// The secondary index: kind → field → value → IDs (see the module docs).
pub(super) type Index = HashMap<String, HashMap<String, HashMap<String, BTreeSet<String>>>>;

/// The (field, value) pairs object `value` is indexed under.
pub(super) fn index_keys(value: &Value) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let Value::Object(map) = value else {
        return out;
    };
    for (field, v) in map {
        match v {
            Value::String(s) => out.push((field.clone(), s.as_str())),
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::String(s) => out.push((field.clone(), s.as_str())),
                        Value::Object(o) => {
                            if let Some(Value::String(id)) = o.get("id") {
                                out.push((format!("{field}.id"), id.as_str()));
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

pub(super) fn index_add(index: &mut Index, kind: &str, id: &str, value: &Value) {
    let fields = index.entry(kind.to_owned()).or_default();
    for (field, v) in index_keys(value) {
        fields
            .entry(field)
            .or_default()
            .entry(v.to_owned())
            .or_default()
            .insert(id.to_owned());
    }
}

pub(super) fn index_remove(index: &mut Index, kind: &str, id: &str, value: &Value) {
    let Some(fields) = index.get_mut(kind) else {
        return;
    };
    for (field, v) in index_keys(value) {
        if let Some(values) = fields.get_mut(&field) {
            if let Some(ids) = values.get_mut(v) {
                ids.remove(id);
                if ids.is_empty() {
                    values.remove(v);
                }
            }
        }
    }
}

pub(super) fn build_index(tables: &Tables) -> Index {
    let mut index = Index::new();
    for (kind, table) in tables {
        for (id, value) in table {
            index_add(&mut index, kind, id, value);
        }
    }
    index
}

pub(super) fn ids_where(index: &Index, kind: &str, field: &str, value: &str) -> BTreeSet<String> {
    index
        .get(kind)
        .and_then(|f| f.get(field))
        .and_then(|v| v.get(value))
        .cloned()
        .unwrap_or_default()
}
