//! [`Meta`]: stamped when created, moved on every change.

use serde_json::json;

use crate::model::Meta;

#[test]
fn touch_moves_revision_and_time_only() {
    let mut m = Meta::new("p");
    m.updated_at = "2000-01-01T00:00:00Z".into();
    let before = m.clone();
    m.touch();
    assert_eq!(m.revision_number, 2);
    assert_ne!(m.updated_at, before.updated_at);
    assert_eq!((m.id, m.created_at), (before.id, before.created_at));
}

#[test]
fn old_records_without_revision_read_as_zero() {
    let m: Meta = serde_json::from_value(json!({"id": "a", "project_id": "p",
        "created_at": "t", "updated_at": "t"}))
    .expect("decode");
    assert_eq!(m.revision_number, 0);
}
