//! Operations, stored and shown, against the store without HTTP.

use super::store_with;
use crate::model::gce::operation::*;

#[test]
fn stored_per_scope_and_shown_with_gce_names() {
    let t = "2026-11-22T13:30:00.000-08:00".to_owned();
    let spec = OperationSpec {
        operation_type: "insert".into(),
        target_link: "https://h/x".into(),
        target_id: "7".into(),
        status: "DONE".into(),
        user: "u@local-cloud".into(),
        progress: 100,
        insert_time: t.clone(),
        start_time: t.clone(),
        end_time: t,
    };
    let op = Operation::new("p", "operation-1".into(), "zones/z".into(), spec);
    let (_dir, store) = store_with(&op);
    store.read(|v| {
        assert!(Operation::get_in(v, "p", "global", "operation-1").is_none());
        let got = Operation::get_in(v, "p", "zones/z", "operation-1").unwrap();
        let f = got.fields();
        assert_eq!(f["operationType"], "insert");
        assert_eq!(f["targetId"], "7");
        assert_eq!(f["progress"], 100);
    });
}
