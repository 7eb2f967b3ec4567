//! Networks: the record, and the subnets and ports that belong to one.

use super::{check_record, Fixture};
use crate::model::network::{Network, Port, Subnet};
use crate::model::{Meta, Record};

pub(super) fn network(name: &str, project_id: &str) -> Network {
    Network {
        meta: Meta::new(project_id),
        name: name.into(),
        admin_state_up: true,
        shared: false,
        external: false,
        mtu: 1450,
        description: String::new(),
    }
}

#[test]
fn subnets_and_ports_of_a_network() {
    let fx = Fixture::new();
    let (a, b) = (network("a", "p"), network("b", "p"));
    fx.put(&[&a, &b]);
    let s = super::subnet::subnet(&a.meta.id, "10.0.0.0/24");
    let port = super::port::port(&a.meta.id, &s.meta.id, "10.0.0.5");
    fx.put(&[&s]);
    fx.put(&[&port]);
    fx.store.read(|r| {
        let subnets = Subnet::list_where(r, "network_id", &a.meta.id);
        assert_eq!(subnets.len(), 1);
        assert!(Subnet::list_where(r, "network_id", &b.meta.id).is_empty());
        let ports = Port::list_where(r, "network_id", &a.meta.id);
        assert_eq!(ports[0].fixed_ips[0].subnet_id, s.meta.id);
    });
}

#[test]
fn network_record() {
    let n = network("private", "p1");
    check_record(
        &Fixture::new(),
        &n,
        &[("name", "private"), ("project_id", "p1")],
    );
}
