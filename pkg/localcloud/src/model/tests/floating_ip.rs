//! Floating IPs: the record, indexed by port and address; disassociated, it leaves the port's
//! index.

use super::{check_record, Fixture};
use crate::model::network::FloatingIp;
use crate::model::{Meta, Record};

fn floating_ip(port_id: Option<&str>) -> FloatingIp {
    FloatingIp {
        meta: Meta::new("p"),
        floating_ip_address: "172.24.4.10".into(),
        floating_network_id: "public".into(),
        port_id: port_id.map(Into::into),
        fixed_ip_address: port_id.map(|_| "10.0.0.5".into()),
        router_id: None,
        description: String::new(),
    }
}

#[test]
fn a_disassociated_floating_ip_leaves_the_port() {
    let fx = Fixture::new();
    let mut f = floating_ip(Some("port-1"));
    fx.put(&[&f]);
    f.port_id = None;
    fx.put(&[&f]);
    fx.store.read(|r| {
        assert!(FloatingIp::list_where(r, "port_id", "port-1").is_empty());
        assert_eq!(FloatingIp::list(r).len(), 1);
    });
}

#[test]
fn floating_ip_record() {
    let f = floating_ip(Some("port-1"));
    let indexed = [
        ("port_id", "port-1"),
        ("floating_ip_address", "172.24.4.10"),
        ("floating_network_id", "public"),
    ];
    check_record(&Fixture::new(), &f, &indexed);
}
