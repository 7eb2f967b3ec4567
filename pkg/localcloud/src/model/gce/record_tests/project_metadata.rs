//! Projects' common instance metadata, stored and shown, against the store without HTTP.

use std::collections::BTreeMap;

use super::store;
use crate::model::gce::project_metadata::*;
use crate::model::Record;

#[test]
fn per_project_and_empty_until_set() {
    let (_dir, store) = store();
    assert!(store.read(|v| common_metadata(v, "p")).is_empty());
    let items = BTreeMap::from([("ssh-keys".to_owned(), "u:k".to_owned())]);
    store
        .write(|tx| ProjectMetadata::set(tx, "p", items.clone()).put(tx))
        .unwrap();
    store
        .write(|tx| ProjectMetadata::set(tx, "p", items).put(tx))
        .unwrap();
    store.read(|v| {
        assert_eq!(common_metadata(v, "p")["ssh-keys"], "u:k");
        assert!(common_metadata(v, "q").is_empty());
        assert_eq!(
            ProjectMetadata::get(v, "p").unwrap().meta.revision_number,
            2
        );
    });
}
