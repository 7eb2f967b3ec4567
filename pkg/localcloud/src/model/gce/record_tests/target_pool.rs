//! Target pools and their references, stored and shown, against the store without HTTP.

use super::stored;
use crate::model::gce::target_pool::*;
use crate::model::Record;

#[test]
fn references_name_a_regional_pool() {
    assert_eq!(
        target_pool_key("https://h/compute/v1/projects/p/regions/r/targetPools/tp"),
        Some(("regions/r".into(), "tp".into()))
    );
    assert_eq!(target_pool_key("global/targetPools/tp"), None);
    assert_eq!(target_pool_key("regions/r/targetPools/"), None);
}

#[test]
fn stored_with_instances_and_ratio_as_given() {
    let fields = serde_json::json!({
        "instances": ["https://h/zones/z/instances/a"], "sessionAffinity": "NONE",
        "failoverRatio": 1,
    });
    let (_dir, store, mut tp) = stored::<TargetPoolSpec>("p", "tp", "regions/r", fields);
    tp.spec.instances.clear();
    tp.meta.touch();
    store.write(|tx| tp.put(tx)).unwrap();
    let got = store
        .read(|v| TargetPool::get_at(v, "regions/r", "tp"))
        .unwrap();
    assert!(got.spec.instances.is_empty());
    assert_eq!(got.meta.revision_number, 2);
    assert_eq!(
        serde_json::to_string(&got.fields()["failoverRatio"]).unwrap(),
        "1"
    );
}
