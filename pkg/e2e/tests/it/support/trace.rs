//! Reading the `--trace-cloud-calls` files the personalities write.

use std::path::Path;

use serde_json::Value;

/// The cloud calls of a trace file, one JSON record a line; none when the file is absent
/// (a personality that made no call writes none).
pub fn traced(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The method of each record.
pub fn methods(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect()
}
