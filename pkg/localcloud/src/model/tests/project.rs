//! Keystone projects: stored by ID, read back by the metadata servers.

use super::Fixture;
use crate::model::identity::{Project, PROJECTS};
use crate::store::Read;

#[test]
fn projects_are_stored_by_id() {
    let fx = Fixture::new();
    let p = Project {
        id: "p1".into(),
        name: "demo".into(),
        domain_id: "default".into(),
    };
    fx.write(|tx| tx.put(PROJECTS, &p.id, &p));
    fx.store.read(|r| {
        let got: Project = r.get(PROJECTS, "p1").expect("project");
        assert_eq!(
            (got.name.as_str(), got.domain_id.as_str()),
            ("demo", "default")
        );
        assert!(r.get::<Project>(PROJECTS, "p2").is_none());
        assert_eq!(r.list::<Project>(PROJECTS).len(), 1);
    });
}
