//! Neutron security groups and rules: CRUD, the two default egress rules, filtering by name,
//! Neutron's 400/404/409 answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{assert_neutron_error, TestCloud};
use reqwest::StatusCode;
use serde_json::{json, Value};

const SG: &str = "/network/v2.0/security-groups";
const RULES: &str = "/network/v2.0/security-group-rules";

#[tokio::test]
async fn security_groups_and_rules_crud_and_filter_by_name() {
    let c = TestCloud::start().await;
    let r = c
        .neutron_create(
            "security_group",
            json!({"name": "web", "description": "front"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let sg = r.body["security_group"].clone();
    let id = r.id("security_group");
    assert_eq!(sg["stateful"], true);
    let defaults = sg["security_group_rules"].as_array().unwrap();
    assert_eq!(defaults.len(), 2, "{sg}");
    assert!(defaults.iter().all(|x| x["direction"] == "egress"));
    let r = c
        .neutron_create("security_group", json!({"name": "db"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let db = r.id("security_group");

    // Filter by name.
    let r = c.get(&format!("{SG}?name=web")).await;
    let found: Vec<&Value> = r.body["security_groups"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(found.len(), 1, "{}", r.body);
    assert_eq!(found[0]["id"], id.as_str());
    let r = c.get(&format!("{SG}?name=nothing")).await;
    assert_eq!(r.count("security_groups"), 0);

    // Rules: create, duplicate 409, show in the group, filter by group, delete.
    let rule = json!({"security_group_rule": {"security_group_id": id, "direction": "ingress",
        "protocol": "tcp", "port_range_min": 80, "port_range_max": 443,
        "remote_ip_prefix": "127.0.0.0/8"}});
    let r = c.post(RULES, rule.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let rule_id = r.id("security_group_rule");
    assert_eq!(r.body["security_group_rule"]["ethertype"], "IPv4");
    let r = c.post(RULES, rule).await;
    assert_neutron_error(&r, StatusCode::CONFLICT, "SecurityGroupRuleExists");
    let r = c
        .post(
            RULES,
            json!({"security_group_rule": {"security_group_id": id, "direction": "ingress",
            "remote_group_id": db}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = c.get(&format!("{SG}/{id}")).await;
    assert_eq!(
        r.body["security_group"]["security_group_rules"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let r = c
        .get(&format!("{RULES}?security_group_id={id}&direction=ingress"))
        .await;
    assert_eq!(r.count("security_group_rules"), 2, "{}", r.body);

    // Neutron's refusals.
    for (bad, why) in [
        (
            json!({"security_group_id": id, "direction": "sideways"}),
            "direction",
        ),
        (
            json!({"security_group_id": id, "direction": "ingress", "port_range_min": 80}),
            "ports without protocol",
        ),
        (
            json!({"security_group_id": id, "direction": "ingress", "protocol": "tcp",
                "port_range_min": 90, "port_range_max": 80}),
            "min > max",
        ),
        (
            json!({"security_group_id": id, "direction": "ingress", "protocol": "bogus"}),
            "protocol",
        ),
        (
            json!({"security_group_id": id, "direction": "ingress", "remote_ip_prefix": "10.0.0.0/33"}),
            "prefix",
        ),
        (
            json!({"security_group_id": id, "direction": "ingress", "remote_ip_prefix": "10.0.0.0/8",
                "remote_group_id": db}),
            "prefix and group",
        ),
        (
            json!({"security_group_id": id, "direction": "ingress", "colour": "red"}),
            "unknown attribute",
        ),
    ] {
        let r = c.post(RULES, json!({"security_group_rule": bad})).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{why}: {}", r.body);
    }
    let r = c
        .post(
            RULES,
            json!({"security_group_rule": {"security_group_id": "nope", "direction": "ingress"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Update, rule delete, a group in use by a port cannot go, then it can.
    let r = c
        .put(
            &format!("{SG}/{id}"),
            json!({"security_group": {"name": "web-2"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["security_group"]["name"], "web-2");
    assert_eq!(
        c.delete(&format!("{RULES}/{rule_id}")).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        c.get(&format!("{RULES}/{rule_id}")).await.status,
        StatusCode::NOT_FOUND
    );
    let net = c.network_id("private").await;
    let r = c
        .neutron_create(
            "port",
            json!({"network_id": net, "security_groups": ["no-such-group"]}),
        )
        .await;
    assert_neutron_error(&r, StatusCode::NOT_FOUND, "SecurityGroupNotFound");
    let r = c
        .neutron_create("port", json!({"network_id": net, "security_groups": [id]}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let port = r.id("port");
    let r = c.delete(&format!("{SG}/{id}")).await;
    assert_neutron_error(&r, StatusCode::CONFLICT, "SecurityGroupInUse");
    assert_eq!(
        c.delete(&format!("/network/v2.0/ports/{port}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        c.delete(&format!("{SG}/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        c.get(&format!("{SG}/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    let r = c.get(&format!("{RULES}?security_group_id={id}")).await;
    assert_eq!(r.count("security_group_rules"), 0, "{}", r.body);
}

/// Every project has its `default` group (egress anywhere, ingress from the group itself), which
/// new ports naming no group get (an instance's port too; a router's ports none); the name is
/// reserved and the group cannot be renamed, as in Neutron.
#[tokio::test]
async fn default_group_per_project_on_new_ports() {
    let c = TestCloud::start().await;
    let r = c.get(&format!("{SG}?name=default")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let groups = r.body["security_groups"].as_array().unwrap().clone();
    assert_eq!(
        groups.len(),
        1,
        "one default group for the project: {}",
        r.body
    );
    let default = groups[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(groups[0]["description"], "Default security group");
    let rules = groups[0]["security_group_rules"].as_array().unwrap();
    assert_eq!(rules.len(), 4, "{rules:?}");
    for ethertype in ["IPv4", "IPv6"] {
        assert!(rules.iter().any(|x| x["direction"] == "ingress"
            && x["ethertype"] == ethertype
            && x["remote_group_id"] == default.as_str()));
        assert!(rules.iter().any(|x| x["direction"] == "egress"
            && x["ethertype"] == ethertype
            && x["remote_group_id"].is_null()));
    }

    let net = c.network_id("private").await;
    let r = c.neutron_create("port", json!({"network_id": net})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["port"]["security_groups"], json!([default]));
    let r = c
        .neutron_create("port", json!({"network_id": net, "security_groups": []}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["port"]["security_groups"], json!([]));
    let server = c.create_server("sg-web", json!({})).await;
    let r = c
        .get(&format!("/network/v2.0/ports?device_id={server}"))
        .await;
    assert_eq!(
        r.body["ports"][0]["security_groups"],
        json!([default]),
        "{}",
        r.body
    );
    let r = c
        .get("/network/v2.0/ports?device_owner=network:router_interface")
        .await;
    let router_ports = r.body["ports"].as_array().unwrap();
    assert!(!router_ports.is_empty(), "{}", r.body);
    assert!(router_ports
        .iter()
        .all(|p| p["security_groups"] == json!([])));

    let r = c
        .neutron_create("security_group", json!({"name": "Default"}))
        .await;
    assert_neutron_error(
        &r,
        StatusCode::CONFLICT,
        "SecurityGroupDefaultAlreadyExists",
    );
    let update = async |fields: Value| {
        c.put(
            &format!("{SG}/{default}"),
            json!({ "security_group": fields }),
        )
        .await
    };
    let r = update(json!({"name": "mine"})).await;
    assert_neutron_error(&r, StatusCode::CONFLICT, "SecurityGroupCannotUpdateDefault");
    let r = update(json!({"description": "still default"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        c.get(&format!("{SG}?name=default"))
            .await
            .count("security_groups"),
        1
    );
}
