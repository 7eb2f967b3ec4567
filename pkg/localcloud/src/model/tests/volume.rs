//! Volumes and their attachments: the record, and the volumes attached to a server.

use std::collections::BTreeMap;

use super::{check_record, Fixture};
use crate::model::volume::{attached_to, Attachment, Volume};
use crate::model::{Meta, Record};

fn volume(name: &str, attachments: Vec<Attachment>) -> Volume {
    Volume {
        meta: Meta::new("p"),
        name: Some(name.into()),
        description: None,
        size: 1,
        status: if attachments.is_empty() {
            "available"
        } else {
            "in-use"
        }
        .into(),
        availability_zone: "nova".into(),
        volume_type: "lvmdriver-1".into(),
        user_id: "u".into(),
        metadata: BTreeMap::new(),
        attachments,
        multiattach: false,
    }
}

fn attachment(server_id: &str, device: &str) -> Attachment {
    Attachment {
        id: format!("att-{device}"),
        server_id: server_id.into(),
        device: device.into(),
        attached_at: "2024-01-01T00:00:00Z".into(),
        tag: None,
        delete_on_termination: false,
        detaching: false,
        device_name: None,
        read_only: false,
    }
}

#[test]
fn volumes_attached_to_a_server_by_device() {
    let fx = Fixture::new();
    let c = volume("c", vec![attachment("vm-1", "/dev/vdc")]);
    let b = volume("b", vec![attachment("vm-1", "/dev/vdb")]);
    let elsewhere = volume("x", vec![attachment("vm-2", "/dev/vdb")]);
    fx.put(&[&c, &b, &elsewhere, &volume("free", vec![])]);
    fx.store.read(|r| {
        let names: Vec<Option<String>> =
            attached_to(r, "vm-1").into_iter().map(|v| v.name).collect();
        assert_eq!(names, [Some("b".into()), Some("c".into())]);
        assert_eq!(Volume::list(r).len(), 4);
    });
}

#[test]
fn volume_record() {
    check_record(
        &Fixture::new(),
        &volume("data", vec![]),
        &[("name", "data")],
    );
}

#[test]
fn gce_attachment_fields_are_stored_and_default_for_older_records() {
    let fx = Fixture::new();
    let mut a = attachment("vm-1", "/dev/vdb");
    a.device_name = Some("data".into());
    a.read_only = true;
    fx.put(&[&volume("d", vec![a])]);
    fx.store.read(|r| {
        let v = attached_to(r, "vm-1");
        assert_eq!(v[0].attachments[0].device_name.as_deref(), Some("data"));
        assert!(v[0].attachments[0].read_only);
    });
    let older: Attachment = serde_json::from_value(serde_json::json!({
        "id": "a", "server_id": "vm-1", "device": "/dev/vdb", "attached_at": "2024-01-01T00:00:00Z",
    }))
    .expect("an attachment written before the GCE fields");
    assert_eq!(older.device_name, None);
    assert!(!older.read_only);
}
