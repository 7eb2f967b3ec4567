//! Servers: the record (Nova's `Instance` in its not-found message), its ports and its flavor.

use std::collections::BTreeMap;

use super::{check_record, Fixture};
use crate::model::compute::{server_ports, Related, Server, ACTIVE};
use crate::model::{Meta, Record};

fn server(name: &str) -> Server {
    Server {
        meta: Meta::new("p"),
        name: name.into(),
        status: ACTIVE.into(),
        flavor_id: "1".into(),
        image_id: "cirros".into(),
        availability_zone: "nova".into(),
        user_id: "u".into(),
        metadata: BTreeMap::new(),
        key_name: None,
        description: None,
        index: 11,
        tags: vec![],
    }
}

#[test]
fn ports_of_a_server() {
    let fx = Fixture::new();
    let s = server("vm-1");
    let mut mine = super::port::port("net-1", "sub-1", "10.0.0.5");
    mine.device_id = s.meta.id.clone();
    let other = super::port::port("net-1", "sub-1", "10.0.0.6");
    fx.put(&[&s]);
    fx.put(&[&mine, &other]);
    fx.store.read(|r| {
        let ports = server_ports(r, &s.meta.id);
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].meta.id, mine.meta.id);
        let related = Related::load(r);
        assert_eq!(related.ports(&s.meta.id).len(), 1);
        assert!(related.ports("no-such-server").is_empty());
        assert!(Server::get(r, &s.meta.id).is_some());
    });
}

#[test]
fn server_record() {
    let s = server("vm-1");
    assert_eq!(s.ec2_id(), "i-0000000b");
    check_record(
        &Fixture::new(),
        &s,
        &[("name", "vm-1"), ("project_id", "p")],
    );
}
