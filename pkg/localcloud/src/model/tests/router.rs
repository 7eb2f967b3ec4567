//! Routers: the record, and its interfaces (ports whose device is the router).

use super::{check_record, Fixture};
use crate::model::network::{HostRoute, Port, Router_, OWNER_ROUTER_INTERFACE};
use crate::model::{Meta, Record};

fn router() -> Router_ {
    Router_ {
        meta: Meta::new("p"),
        name: "router1".into(),
        admin_state_up: true,
        gateway_network_id: Some("public".into()),
        routes: vec![HostRoute {
            destination: "10.1.0.0/24".into(),
            nexthop: "10.0.0.9".into(),
        }],
        description: String::new(),
    }
}

#[test]
fn interfaces_of_a_router() {
    let fx = Fixture::new();
    let r1 = router();
    let mut interface = super::port::port("net-1", "sub-1", "10.0.0.1");
    interface.device_id = r1.meta.id.clone();
    interface.device_owner = OWNER_ROUTER_INTERFACE.into();
    fx.put(&[&r1]);
    fx.put(&[&interface, &super::port::port("net-1", "sub-1", "10.0.0.7")]);
    fx.store.read(|r| {
        let ports = Port::list_where(r, "device_id", &r1.meta.id);
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].device_owner, OWNER_ROUTER_INTERFACE);
    });
}

#[test]
fn router_record() {
    check_record(
        &Fixture::new(),
        &router(),
        &[("name", "router1"), ("project_id", "p")],
    );
}
