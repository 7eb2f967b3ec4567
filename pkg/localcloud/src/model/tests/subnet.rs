//! Subnets: the record, indexed by network and CIDR.

use super::{check_record, Fixture};
use crate::model::network::{Pool, Subnet};
use crate::model::Meta;

pub(super) fn subnet(network_id: &str, cidr: &str) -> Subnet {
    Subnet {
        meta: Meta::new("p"),
        name: "sub".into(),
        network_id: network_id.into(),
        cidr: cidr.into(),
        gateway_ip: Some("10.0.0.1".into()),
        allocation_pools: vec![Pool {
            start: "10.0.0.2".into(),
            end: "10.0.0.254".into(),
        }],
        enable_dhcp: true,
        dns_nameservers: vec![],
        host_routes: vec![],
        description: String::new(),
    }
}

#[test]
fn subnet_record() {
    let s = subnet("net-1", "10.0.0.0/24");
    let indexed = [
        ("network_id", "net-1"),
        ("cidr", "10.0.0.0/24"),
        ("name", "sub"),
    ];
    check_record(&Fixture::new(), &s, &indexed);
}
