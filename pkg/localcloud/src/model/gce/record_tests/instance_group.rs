//! Instance groups, stored and shown, against the store without HTTP.

use super::stored;
use crate::model::gce::instance_group::*;

#[test]
fn references_name_a_zonal_group() {
    assert_eq!(
        instance_group_key("https://h/compute/v1/projects/p/zones/z/instanceGroups/g"),
        Some(("zones/z".into(), "g".into()))
    );
    assert_eq!(instance_group_key("regions/r/instanceGroups/g"), None);
    assert_eq!(instance_group_key("zones/z/instanceGroups/"), None);
}

#[test]
fn members_are_stored_and_shown_as_a_size() {
    let fields = serde_json::json!({"instances": ["https://h/zones/z/instances/a"]});
    let (_dir, store, ig) = stored::<InstanceGroupSpec>("p", "g", "zones/z", fields);
    let got = store
        .read(|v| InstanceGroup::get_at(v, "zones/z", "g"))
        .unwrap();
    assert_eq!(got.spec.instances, ig.spec.instances);
    let mut shown = got.fields();
    InstanceGroupSpec::shown(&mut shown);
    assert_eq!(shown["size"], 1);
    assert!(shown.get("instances").is_none());
    assert!(shown["fingerprint"].as_str().is_some_and(|f| !f.is_empty()));
}
