//! Routes, stored and shown, against the store without HTTP.

use super::{spec, store_with};
use crate::model::gce::route::*;
use crate::model::Record;

fn route(project: &str, name: &str) -> Route {
    let fields = serde_json::json!({
        "network": "https://h/compute/v1/projects/p/global/networks/default",
        "destRange": "10.0.1.0/24", "nextHopIp": "10.0.0.5", "priority": 1000,
        "routeType": "STATIC", "routeStatus": "ACTIVE",
    });
    Route::new(project, name.into(), "global".into(), spec(fields))
}

#[test]
fn stored_by_scope_and_name_per_project() {
    let r = route("p1", "r1");
    let (_dir, store) = store_with(&r);
    store.read(|v| {
        assert_eq!(Route::get_at(v, "global", "r1"), Some(r.clone()));
        assert_eq!(Route::get_in(v, "p2", "global", "r1"), None);
        assert_eq!(Route::list_in(v, "p1").len(), 1);
    });
    store
        .write(|tx| Ok::<_, crate::Error>(r.remove(tx)))
        .unwrap();
    store.read(|v| assert!(Route::list(v).is_empty()));
}

#[test]
fn fields_are_gce_names_without_absent_ones() {
    let r = route("p", "r");
    let f = r.fields();
    assert_eq!(f["destRange"], "10.0.1.0/24");
    assert_eq!(f["nextHopIp"], "10.0.0.5");
    assert!(!f.contains_key("nextHopInstance") && !f.contains_key("tags"));
}
