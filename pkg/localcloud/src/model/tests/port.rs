//! Ports: the record, indexed by device and security group (a list field: a port is found by
//! each group it holds).

use super::{check_record, Fixture};
use crate::model::network::{FixedIp, Port};
use crate::model::{Meta, Record};

pub(super) fn port(network_id: &str, subnet_id: &str, ip: &str) -> Port {
    Port {
        meta: Meta::new("p"),
        name: String::new(),
        network_id: network_id.into(),
        mac_address: "fa:16:3e:00:00:01".into(),
        fixed_ips: vec![FixedIp {
            subnet_id: subnet_id.into(),
            ip_address: ip.into(),
        }],
        device_id: "server-1".into(),
        device_owner: "compute:nova".into(),
        admin_state_up: true,
        description: String::new(),
        allowed_address_pairs: vec![],
        security_groups: vec!["sg-1".into(), "sg-2".into()],
    }
}

#[test]
fn a_changed_port_is_found_by_its_new_device_only() {
    let fx = Fixture::new();
    let mut p = port("net-1", "sub-1", "10.0.0.5");
    fx.put(&[&p]);
    p.device_id = "server-2".into();
    p.touch();
    fx.put(&[&p]);
    fx.store.read(|r| {
        assert!(Port::list_where(r, "device_id", "server-1").is_empty());
        let found = Port::list_where(r, "device_id", "server-2");
        assert_eq!(found[0].meta.revision_number, 2);
    });
}

#[test]
fn port_record() {
    let p = port("net-1", "sub-1", "10.0.0.5");
    let indexed = [
        ("network_id", "net-1"),
        ("device_id", "server-1"),
        ("device_owner", "compute:nova"),
        ("security_groups", "sg-2"),
    ];
    check_record(&Fixture::new(), &p, &indexed);
}
