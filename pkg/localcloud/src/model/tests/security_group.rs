//! Security groups and their rules: the records, and the rules of one group.

use super::{check_record, Fixture};
use crate::model::network::{SecurityGroup, SecurityGroupRule};
use crate::model::{Meta, Record};

fn group(name: &str) -> SecurityGroup {
    SecurityGroup {
        meta: Meta::new("p"),
        name: name.into(),
        description: "web".into(),
        stateful: true,
    }
}

fn rule(group_id: &str, port: u16) -> SecurityGroupRule {
    SecurityGroupRule {
        meta: Meta::new("p"),
        security_group_id: group_id.into(),
        direction: "ingress".into(),
        ethertype: "IPv4".into(),
        protocol: Some("tcp".into()),
        port_range_min: Some(port),
        port_range_max: Some(port),
        remote_ip_prefix: Some("0.0.0.0/0".into()),
        remote_group_id: None,
        description: String::new(),
    }
}

#[test]
fn rules_of_a_group() {
    let fx = Fixture::new();
    let (a, b) = (group("a"), group("b"));
    fx.put(&[&a, &b]);
    fx.put(&[
        &rule(&a.meta.id, 80),
        &rule(&a.meta.id, 443),
        &rule(&b.meta.id, 22),
    ]);
    fx.store.read(|r| {
        let mut ports: Vec<Option<u16>> =
            SecurityGroupRule::list_where(r, "security_group_id", &a.meta.id)
                .iter()
                .map(|x| x.port_range_min)
                .collect();
        ports.sort();
        assert_eq!(ports, [Some(80), Some(443)]);
    });
}

#[test]
fn security_group_record() {
    let g = group("web");
    check_record(
        &Fixture::new(),
        &g,
        &[("name", "web"), ("description", "web")],
    );
}

#[test]
fn security_group_rule_record() {
    let r = rule("sg-1", 80);
    let indexed = [("security_group_id", "sg-1"), ("direction", "ingress")];
    check_record(&Fixture::new(), &r, &indexed);
}
