//! Load balancers, listeners, pools, members and health monitors: the records (Octavia's
//! not-found wording), and their relations (a load balancer's listeners and pools, a pool's
//! members and monitor, the listeners using a pool).

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::{check_record, Fixture};
use crate::model::octavia::{
    self as m, Common, HealthMonitor, Listener, LoadBalancer, Member, Pool,
};
use crate::model::Record;

/// A record of `project` with [`Common::new`]'s attributes and `fields`.
fn record<R: DeserializeOwned>(fields: Value) -> R {
    let mut v = super::json(&Common::new("p"));
    v.as_object_mut()
        .expect("object")
        .extend(fields.as_object().expect("object").clone());
    serde_json::from_value(v).expect("record")
}

fn lb() -> LoadBalancer {
    record(
        json!({"name": "lb", "vip_address": "127.1.0.10", "vip_port_id": "vip-port",
        "vip_subnet_id": "sub-1", "vip_network_id": null, "vip_qos_policy_id": null,
        "provider": "amphora", "flavor_id": null, "availability_zone": null}),
    )
}

fn listener(lb_id: &str, pool_id: Option<&str>) -> Listener {
    record(
        json!({"loadbalancers": [{"id": lb_id}], "protocol": "TCP", "protocol_port": 80,
        "default_pool_id": pool_id, "connection_limit": -1, "timeout_client_data": 50000,
        "timeout_member_connect": 5000, "timeout_member_data": 50000,
        "timeout_tcp_inspect": 0, "insert_headers": {}, "allowed_cidrs": null,
        "default_tls_container_ref": null, "sni_container_refs": [], "l7policies": []}),
    )
}

fn pool(lb_id: &str) -> Pool {
    record(json!({"loadbalancers": [{"id": lb_id}], "protocol": "TCP",
        "lb_algorithm": "ROUND_ROBIN", "session_persistence": null, "tls_enabled": false,
        "tls_container_ref": null, "ca_tls_container_ref": null, "crl_container_ref": null}))
}

fn member(pool_id: &str, address: &str) -> Member {
    record(
        json!({"pool_id": pool_id, "address": address, "protocol_port": 8080,
        "weight": 1, "backup": false, "subnet_id": null, "monitor_address": null,
        "monitor_port": null}),
    )
}

fn monitor(pool_id: &str) -> HealthMonitor {
    record(
        json!({"pools": [{"id": pool_id}], "type": "TCP", "delay": 5, "timeout": 3,
        "max_retries": 3, "max_retries_down": 3, "http_method": null, "url_path": null,
        "expected_codes": null, "http_version": null, "domain_name": null}),
    )
}

#[test]
fn octavia_records() {
    let indexed = [
        ("vip_address", "127.1.0.10"),
        ("vip_port_id", "vip-port"),
        ("name", "lb"),
    ];
    check_record(&Fixture::new(), &lb(), &indexed);
    check_record(
        &Fixture::new(),
        &listener("lb-1", Some("pool-1")),
        &[("default_pool_id", "pool-1")],
    );
    check_record(&Fixture::new(), &pool("lb-1"), &[("project_id", "p")]);
    let indexed = [("pool_id", "pool-1"), ("address", "10.0.0.5")];
    check_record(&Fixture::new(), &member("pool-1", "10.0.0.5"), &indexed);
    check_record(&Fixture::new(), &monitor("pool-1"), &[("project_id", "p")]);
    let err = Fixture::new()
        .store
        .read(|r| Pool::find(r, "x"))
        .expect_err("not found");
    assert_eq!(err.message, "Pool x not found.");
}

#[test]
fn relations_of_a_load_balancer() {
    let fx = Fixture::new();
    let (a, b) = (lb(), lb());
    let p = pool(a.id());
    let l = listener(a.id(), Some(p.id()));
    fx.put(&[&a, &b]);
    fx.put(&[&p, &pool(b.id())]);
    fx.put(&[&l, &listener(b.id(), None)]);
    fx.put(&[
        &member(p.id(), "10.0.0.5"),
        &member(p.id(), "10.0.0.6"),
        &member("other", "10.0.0.7"),
    ]);
    fx.put(&[&monitor(p.id())]);
    fx.store.read(|r| {
        assert_eq!(
            m::refs(&m::listeners_of(r, a.id())),
            m::refs(std::slice::from_ref(&l))
        );
        assert_eq!(
            m::refs(&m::pools_of(r, a.id())),
            m::refs(std::slice::from_ref(&p))
        );
        assert_eq!(m::members_of(r, p.id()).len(), 2);
        assert_eq!(m::monitors_of(r, p.id()).len(), 1);
        assert_eq!(m::listeners_using(r, p.id()).len(), 1);
        assert!(m::listeners_using(r, "no-such-pool").is_empty());
    });
}
