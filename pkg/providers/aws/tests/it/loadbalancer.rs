//! Load balancers against moto, checked with the official `aws` CLI: a classic ELB and an NLB
//! created for a Service, converged when the node set, ports and source ranges change, and
//! deleted with everything they made (security groups, rules, target groups). moto's load
//! balancers carry no traffic: what is checked is what AWS's API says exists.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeSet;

use hypercloud_cloudprovider::Interface;
use hypercloud_providers_aws::Aws;
use hypercloud_testenv::aws::FaultProxy;
use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::{json, Value};
use support::{s, World};

fn node(w: &World, i: usize) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": w.field(i, "PrivateDnsName")},
        "spec": {"providerID": format!("aws:///us-east-1a/{}", w.field(i, "InstanceId"))},
    }))
    .unwrap()
}

fn service(uid: &str, annotations: Value, ports: &[(i32, i32)], ranges: &[&str]) -> Service {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(p, np)| json!({"name": format!("p{p}"), "protocol": "TCP", "port": p, "nodePort": np}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": uid, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": ports, "loadBalancerSourceRanges": ranges},
    }))
    .unwrap()
}

fn lb_name(uid: &str) -> String {
    let mut n: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    n.truncate(32);
    n
}

fn ids(v: &Value, key: &str, field: &str) -> BTreeSet<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| s(x, field).to_owned())
        .collect()
}

/// Every ingress rule of a group as (protocol, from port, CIDR or group, description).
fn ingress(w: &World, group: &str) -> Vec<(String, i64, String, String)> {
    let g = w
        .moto
        .cli(&["ec2", "describe-security-groups", "--group-ids", group]);
    let mut out = Vec::new();
    for p in g["SecurityGroups"][0]["IpPermissions"].as_array().unwrap() {
        let proto = s(p, "IpProtocol").to_owned();
        let from = p["FromPort"].as_i64().unwrap_or(-1);
        for r in p["IpRanges"].as_array().into_iter().flatten() {
            out.push((
                proto.clone(),
                from,
                s(r, "CidrIp").to_owned(),
                s(r, "Description").to_owned(),
            ));
        }
        for r in p["UserIdGroupPairs"].as_array().into_iter().flatten() {
            out.push((
                proto.clone(),
                from,
                s(r, "GroupId").to_owned(),
                String::new(),
            ));
        }
    }
    out
}

fn node_group(w: &World) -> String {
    s(&w.instances[0]["SecurityGroups"][0], "GroupId").to_owned()
}

async fn start(w: &World) -> Aws {
    let aws = support::provider(&w.conf(""));
    aws.initialize(None).await.unwrap();
    aws
}

#[tokio::test]
async fn classic_elb_created_converged_and_deleted_without_leftovers() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(3, 0);
    let aws = start(&w).await;
    let lb = aws.load_balancer().unwrap();
    let uid = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
    let name = lb_name(uid);
    let svc = service(uid, json!({}), &[(80, 30080)], &[]);
    assert!(lb
        .get_load_balancer("kubernetes", &svc)
        .await
        .unwrap()
        .is_none());

    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &[node(&w, 0), node(&w, 1)])
        .await
        .unwrap();
    let host = status.ingress.unwrap()[0].hostname.clone().unwrap();
    let d = &classic_elb(&w, &name);
    assert_eq!(s(d, "DNSName"), host);
    assert_eq!(s(d, "Scheme"), "internet-facing");
    assert_eq!(
        ids(d, "Instances", "InstanceId"),
        BTreeSet::from([
            w.field(0, "InstanceId").to_owned(),
            w.field(1, "InstanceId").to_owned()
        ])
    );
    let l = &d["ListenerDescriptions"][0]["Listener"];
    assert_eq!(
        (
            l["LoadBalancerPort"].as_i64(),
            l["InstancePort"].as_i64(),
            s(l, "Protocol")
        ),
        (Some(80), Some(30080), "TCP")
    );
    assert_eq!(s(&d["HealthCheck"], "Target"), "TCP:30080");
    assert_eq!(d["Subnets"][0].as_str(), Some(w.subnet.as_str()));
    let sg = d["SecurityGroups"][0].as_str().unwrap().to_owned();
    let rules = ingress(&w, &sg);
    assert!(
        rules.contains(&("tcp".into(), 80, "0.0.0.0/0".into(), String::new())),
        "{rules:?}"
    );
    assert!(
        ingress(&w, &node_group(&w)).iter().any(|r| r.2 == sg),
        "nodes admit the ELB's group"
    );
    let tags = w
        .moto
        .cli(&["elb", "describe-tags", "--load-balancer-names", &name]);
    let tags = tags["TagDescriptions"][0]["Tags"].to_string();
    assert!(
        tags.contains("kubernetes.io/service-name") && tags.contains("shop/web"),
        "{tags}"
    );
    assert!(tags.contains("kubernetes.io/cluster/demo"), "{tags}");
    assert!(lb
        .get_load_balancer("kubernetes", &svc)
        .await
        .unwrap()
        .is_some());

    // Converge: another node set, a second port, source ranges.
    let svc2 = service(
        uid,
        json!({}),
        &[(80, 30080), (443, 30443)],
        &["10.0.0.0/8"],
    );
    lb.update_load_balancer("kubernetes", &svc2, &[node(&w, 1), node(&w, 2)])
        .await
        .unwrap();
    let d = &classic_elb(&w, &name);
    assert_eq!(
        ids(d, "Instances", "InstanceId"),
        BTreeSet::from([
            w.field(1, "InstanceId").to_owned(),
            w.field(2, "InstanceId").to_owned()
        ])
    );
    let ports: BTreeSet<i64> = d["ListenerDescriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["Listener"]["LoadBalancerPort"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, BTreeSet::from([80, 443]));
    let rules = ingress(&w, &sg);
    assert!(rules.iter().all(|r| r.2 == "10.0.0.0/8"), "{rules:?}");
    assert!(rules.iter().any(|r| r.1 == 443), "{rules:?}");

    // Delete: the ELB, its group and the nodes' rule are gone.
    lb.ensure_load_balancer_deleted("kubernetes", &svc2)
        .await
        .unwrap();
    let all = w.moto.cli(&["elb", "describe-load-balancers"]);
    assert_eq!(
        all["LoadBalancerDescriptions"].as_array().unwrap().len(),
        0,
        "{all}"
    );
    let groups = w.moto.cli(&["ec2", "describe-security-groups"]).to_string();
    assert!(!groups.contains(&sg), "{groups}");
    assert!(ingress(&w, &node_group(&w)).iter().all(|r| r.2 != sg));
    assert!(lb
        .get_load_balancer("kubernetes", &svc2)
        .await
        .unwrap()
        .is_none());
    lb.ensure_load_balancer_deleted("kubernetes", &svc2)
        .await
        .expect("deleting twice is fine");

    // Internal.
    let internal = service(
        uid,
        json!({"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}),
        &[(80, 30080)],
        &[],
    );
    lb.ensure_load_balancer("kubernetes", &internal, &[node(&w, 0)])
        .await
        .unwrap();
    let d = &classic_elb(&w, &name);
    assert_eq!(s(d, "Scheme"), "internal");
    lb.ensure_load_balancer_deleted("kubernetes", &internal)
        .await
        .unwrap();
}

/// `target-node-labels`: only the labelled Nodes' instances are registered, on the classic ELB
/// and the NLB (with `nlb-target-type: instance`), and relabelling follows on the next update.
#[tokio::test]
async fn target_node_labels_pick_the_registered_instances() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(2, 0);
    let aws = start(&w).await;
    let lb = aws.load_balancer().unwrap();
    let labelled = |i: usize, labels: Value| -> Node {
        let mut n = node(&w, i);
        n.metadata.labels = serde_json::from_value(labels).unwrap();
        n
    };
    let selector = json!({"service.beta.kubernetes.io/aws-load-balancer-target-node-labels": "role=web,zone-ok"});
    let uid = "7c6d5e4f-0003-4000-8000-000000000000";
    let name = lb_name(uid);
    let svc = service(uid, selector.clone(), &[(80, 30080)], &[]);
    let nodes = [
        labelled(0, json!({"role": "web", "zone-ok": ""})),
        labelled(1, json!({"role": "db", "zone-ok": "yes"})),
    ];
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(
        ids(&classic_elb(&w, &name), "Instances", "InstanceId"),
        BTreeSet::from([w.field(0, "InstanceId").to_owned()])
    );
    // Node 1 relabelled: both registered.
    let nodes = [
        labelled(0, json!({"role": "web", "zone-ok": ""})),
        labelled(1, json!({"role": "web", "zone-ok": "yes"})),
    ];
    lb.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(
        ids(&classic_elb(&w, &name), "Instances", "InstanceId"),
        BTreeSet::from([
            w.field(0, "InstanceId").to_owned(),
            w.field(1, "InstanceId").to_owned()
        ])
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();

    // The NLB: its target group holds the labelled Node's instance only.
    let uid = "7c6d5e4f-0004-4000-8000-000000000000";
    let mut asked = selector;
    asked["service.beta.kubernetes.io/aws-load-balancer-type"] = json!("nlb");
    asked["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] = json!("instance");
    let svc = service(uid, asked, &[(80, 30080)], &[]);
    let nodes = [
        labelled(0, json!({"role": "db", "zone-ok": ""})),
        labelled(1, json!({"role": "web", "zone-ok": "yes"})),
    ];
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let groups = w.moto.cli(&["elbv2", "describe-target-groups"]);
    // This test's moto holds one target group: the NLB's.
    let arn = s(&groups["TargetGroups"][0], "TargetGroupArn").to_owned();
    assert_eq!(
        s(&groups["TargetGroups"][0], "TargetType"),
        "instance",
        "{groups}"
    );
    let health = w.moto.cli(&[
        "elbv2",
        "describe-target-health",
        "--target-group-arn",
        &arn,
    ]);
    let targets: BTreeSet<String> = health["TargetHealthDescriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| s(&t["Target"], "Id").to_owned())
        .collect();
    assert_eq!(
        targets,
        BTreeSet::from([w.field(1, "InstanceId").to_owned()]),
        "{health}"
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
}

#[tokio::test]
async fn nlb_created_converged_and_deleted_without_leftovers() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(3, 0);
    let aws = start(&w).await;
    let lb = aws.load_balancer().unwrap();
    let uid = "9a8b7c6d-5e4f-3a2b-1c0d-efeeddccbbaa";
    let name = lb_name(uid);
    let nlb = json!({"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"});
    let svc = service(uid, nlb.clone(), &[(80, 30080)], &[]);
    let status = lb
        .ensure_load_balancer("kubernetes", &svc, &[node(&w, 0), node(&w, 1)])
        .await
        .unwrap();
    let host = status.ingress.unwrap()[0].hostname.clone().unwrap();
    let d = &w
        .moto
        .cli(&["elbv2", "describe-load-balancers", "--names", &name])["LoadBalancers"][0];
    assert_eq!(s(d, "Type"), "network");
    assert_eq!(s(d, "DNSName"), host);
    let arn = s(d, "LoadBalancerArn").to_owned();
    // What the load balancer forwards to: its listeners' target groups (moto does not list a
    // group under its load balancer once a listener was modified to point at it).
    let targets = |w: &World| -> Vec<(i64, BTreeSet<String>)> {
        let listeners = w
            .moto
            .cli(&["elbv2", "describe-listeners", "--load-balancer-arn", &arn]);
        let mut args = vec![
            "elbv2".to_owned(),
            "describe-target-groups".to_owned(),
            "--target-group-arns".to_owned(),
        ];
        for l in listeners["Listeners"].as_array().unwrap() {
            for a in l["DefaultActions"].as_array().unwrap() {
                args.push(s(a, "TargetGroupArn").to_owned());
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let tgs = w.moto.cli(&args);
        tgs["TargetGroups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let h = w.moto.cli(&[
                    "elbv2",
                    "describe-target-health",
                    "--target-group-arn",
                    s(g, "TargetGroupArn"),
                ]);
                let ids = h["TargetHealthDescriptions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| s(&t["Target"], "Id").to_owned())
                    .collect();
                (g["Port"].as_i64().unwrap(), ids)
            })
            .collect()
    };
    let id = |i| w.field(i, "InstanceId").to_owned();
    assert_eq!(targets(&w), vec![(30080, BTreeSet::from([id(0), id(1)]))]);
    let listeners = w
        .moto
        .cli(&["elbv2", "describe-listeners", "--load-balancer-arn", &arn]);
    assert_eq!(listeners["Listeners"][0]["Port"].as_i64(), Some(80));
    let client = format!("kubernetes.io/rule/nlb/client={name}");
    let rules = ingress(&w, &node_group(&w));
    assert!(
        rules.contains(&("tcp".into(), 30080, "0.0.0.0/0".into(), client.clone())),
        "{rules:?}"
    );

    // Converge: the NodePort moves (a new target group replaces the old), the node set changes.
    let moved = service(uid, nlb.clone(), &[(80, 30081)], &["192.168.0.0/16"]);
    lb.update_load_balancer("kubernetes", &moved, &[node(&w, 2)])
        .await
        .unwrap();
    assert_eq!(targets(&w), vec![(30081, BTreeSet::from([id(2)]))]);
    let rules = ingress(&w, &node_group(&w));
    let ours: Vec<_> = rules.iter().filter(|r| r.3 == client).collect();
    assert_eq!(
        ours,
        vec![&(
            "tcp".to_owned(),
            30081,
            "192.168.0.0/16".to_owned(),
            client.clone()
        )]
    );

    // Delete: no load balancer, no target group, no rule of ours.
    lb.ensure_load_balancer_deleted("kubernetes", &moved)
        .await
        .unwrap();
    let all = w.moto.cli(&["elbv2", "describe-load-balancers"]);
    assert_eq!(all["LoadBalancers"].as_array().unwrap().len(), 0, "{all}");
    let tgs = w.moto.cli(&["elbv2", "describe-target-groups"]);
    assert_eq!(tgs["TargetGroups"].as_array().unwrap().len(), 0, "{tgs}");
    let rules = ingress(&w, &node_group(&w));
    assert!(rules.iter().all(|r| !r.3.contains(&name)), "{rules:?}");
}

/// The actions the provider sent through `proxy` since `from` (an index into its record).
fn actions_since(proxy: &FaultProxy, from: usize) -> Vec<String> {
    proxy.actions()[from..].to_vec()
}

/// The instance ports whose backend policies include the PROXY protocol policy.
fn proxy_ports(w: &World, name: &str) -> Vec<i64> {
    let d = &classic_elb(w, name);
    d["BackendServerDescriptions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| {
            b["PolicyNames"]
                .as_array()
                .is_some_and(|p| p.iter().any(|n| n == "k8s-proxyprotocol-enabled"))
        })
        .filter_map(|b| b["InstancePort"].as_i64())
        .collect()
}

/// The classic ELB as `aws elb describe-load-balancers` shows it.
fn classic_elb(w: &World, name: &str) -> Value {
    w.moto.cli(&[
        "elb",
        "describe-load-balancers",
        "--load-balancer-names",
        name,
    ])["LoadBalancerDescriptions"][0]
        .clone()
}

fn elb_attributes(w: &World, name: &str) -> Value {
    w.moto.cli(&[
        "elb",
        "describe-load-balancer-attributes",
        "--load-balancer-name",
        name,
    ])["LoadBalancerAttributes"]
        .clone()
}

fn elb_tags(w: &World, name: &str) -> Value {
    let t = w
        .moto
        .cli(&["elb", "describe-tags", "--load-balancer-names", name]);
    let mut out = serde_json::Map::new();
    for tag in t["TagDescriptions"][0]["Tags"].as_array().unwrap() {
        out.insert(
            s(tag, "Key").to_owned(),
            tag.get("Value").cloned().unwrap_or(json!("")),
        );
    }
    Value::Object(out)
}

#[tokio::test]
async fn classic_elb_annotations_change_what_the_elb_holds() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(1, 0);
    // Through a recording proxy: the exact requests each ensure sends.
    let proxy = FaultProxy::start(w.moto.url()).await;
    let aws = support::provider(&support::cloud_conf(proxy.url(), w.mock.url(), ""));
    aws.initialize(None).await.unwrap();
    let lb = aws.load_balancer().unwrap();
    let nodes = [node(&w, 0)];
    let a = "service.beta.kubernetes.io/aws-load-balancer-";
    let requests = || proxy.actions().len();

    // A plain Service first: what an ensure costs without the annotations.
    let plain_uid = "1a2b3c4d-0001-4000-8000-000000000000";
    let plain = service(plain_uid, json!({}), &[(80, 30080)], &[]);
    let before = requests();
    lb.ensure_load_balancer("kubernetes", &plain, &nodes)
        .await
        .unwrap();
    let plain_create = actions_since(&proxy, before);
    let before = requests();
    lb.ensure_load_balancer("kubernetes", &plain, &nodes)
        .await
        .unwrap();
    let plain_again = actions_since(&proxy, before);
    let attrs = elb_attributes(&w, &lb_name(plain_uid));
    assert_eq!(attrs["ConnectionSettings"]["IdleTimeout"], json!(60));
    assert_eq!(attrs["CrossZoneLoadBalancing"]["Enabled"], json!(false));
    assert_eq!(attrs["ConnectionDraining"]["Enabled"], json!(false));

    let uid = "1a2b3c4d-0002-4000-8000-000000000000";
    let name = lb_name(uid);
    let asked = json!({
        format!("{a}additional-resource-tags"): "team=web, cost-center=42,bare",
        format!("{a}connection-idle-timeout"): "120",
        format!("{a}connection-draining-enabled"): "true",
        format!("{a}connection-draining-timeout"): "45",
        format!("{a}cross-zone-load-balancing-enabled"): "true",
        format!("{a}healthcheck-healthy-threshold"): "3",
        format!("{a}healthcheck-unhealthy-threshold"): "4",
        format!("{a}healthcheck-timeout"): "7",
        format!("{a}healthcheck-interval"): "20",
        format!("{a}proxy-protocol"): "*",
    });
    let svc = service(uid, asked.clone(), &[(80, 30080)], &[]);
    let before = requests();
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let create = actions_since(&proxy, before);
    let before = requests();
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let again = actions_since(&proxy, before);
    let tags = elb_tags(&w, &name);
    assert_eq!(tags["team"], json!("web"), "{tags}");
    assert_eq!(tags["cost-center"], json!("42"), "{tags}");
    assert_eq!(tags["bare"], json!(""), "{tags}");
    assert_eq!(
        tags["kubernetes.io/service-name"],
        json!("shop/web"),
        "{tags}"
    );
    let attrs = elb_attributes(&w, &name);
    assert_eq!(
        attrs["ConnectionSettings"]["IdleTimeout"],
        json!(120),
        "{attrs}"
    );
    assert_eq!(
        attrs["ConnectionDraining"]["Enabled"],
        json!(true),
        "{attrs}"
    );
    assert_eq!(attrs["ConnectionDraining"]["Timeout"], json!(45), "{attrs}");
    assert_eq!(
        attrs["CrossZoneLoadBalancing"]["Enabled"],
        json!(true),
        "{attrs}"
    );
    let d = &classic_elb(&w, &name)["HealthCheck"];
    assert_eq!(
        (
            s(d, "Target"),
            d["HealthyThreshold"].as_i64(),
            d["UnhealthyThreshold"].as_i64(),
            d["Timeout"].as_i64(),
            d["Interval"].as_i64()
        ),
        ("TCP:30080", Some(3), Some(4), Some(7), Some(20)),
        "{d}"
    );

    assert_eq!(proxy_ports(&w, &name), vec![30080]);
    let p = w.moto.cli(&[
        "elb",
        "describe-load-balancer-policies",
        "--load-balancer-name",
        &name,
        "--policy-names",
        "k8s-proxyprotocol-enabled",
    ]);
    let p = &p["PolicyDescriptions"][0];
    assert_eq!(s(p, "PolicyTypeName"), "ProxyProtocolPolicyType", "{p}");
    assert_eq!(
        (
            s(&p["PolicyAttributeDescriptions"][0], "AttributeName"),
            s(&p["PolicyAttributeDescriptions"][0], "AttributeValue")
        ),
        ("ProxyProtocol", "true"),
        "{p}"
    );

    // Update: changed values change the ELB; dropped attribute annotations go back to
    // upstream's defaults.
    let changed = json!({
        format!("{a}additional-resource-tags"): "team=shop",
        format!("{a}connection-idle-timeout"): "300",
        format!("{a}healthcheck-interval"): "30",
    });
    let svc = service(uid, changed, &[(80, 30080)], &[]);
    let before = requests();
    lb.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    let update = actions_since(&proxy, before);
    let tags = elb_tags(&w, &name);
    assert_eq!(tags["team"], json!("shop"), "{tags}");
    assert_eq!(
        proxy_ports(&w, &name),
        Vec::<i64>::new(),
        "proxy protocol off"
    );
    let attrs = elb_attributes(&w, &name);
    assert_eq!(
        attrs["ConnectionSettings"]["IdleTimeout"],
        json!(300),
        "{attrs}"
    );
    assert_eq!(
        attrs["ConnectionDraining"]["Enabled"],
        json!(false),
        "{attrs}"
    );
    assert_eq!(
        attrs["CrossZoneLoadBalancing"]["Enabled"],
        json!(false),
        "{attrs}"
    );
    let d = &classic_elb(&w, &name)["HealthCheck"];
    assert_eq!(
        (
            d["HealthyThreshold"].as_i64(),
            d["UnhealthyThreshold"].as_i64(),
            d["Timeout"].as_i64(),
            d["Interval"].as_i64()
        ),
        (Some(2), Some(6), Some(5), Some(30)),
        "{d}"
    );
    eprintln!(
        "requests:\n plain create {plain_create:?}\n plain re-ensure {plain_again:?}\n annotated create {create:?}\n annotated re-ensure {again:?}\n changing update {update:?}"
    );
    let n = |v: &[String], a: &str| v.iter().filter(|x| *x == a).count();
    // What the annotations cost: on create, the tags ride on CreateLoadBalancer and the
    // attributes take one ModifyLoadBalancerAttributes; every ensure reads the attributes
    // once, and the tags once when the annotation asks for some.
    assert_eq!(n(&create, "CreateLoadBalancer"), 1, "{create:?}");
    assert_eq!(n(&create, "AddTags"), 0, "{create:?}");
    assert_eq!(n(&create, "ModifyLoadBalancerAttributes"), 1, "{create:?}");
    assert_eq!(n(&create, "CreateLoadBalancerPolicy"), 1, "{create:?}");
    assert_eq!(
        n(&create, "SetLoadBalancerPoliciesForBackendServer"),
        1,
        "{create:?}"
    );
    assert_eq!(
        n(&plain_create, "ModifyLoadBalancerAttributes"),
        0,
        "{plain_create:?}"
    );
    assert_eq!(
        n(&plain_again, "DescribeLoadBalancerAttributes"),
        1,
        "{plain_again:?}"
    );
    assert_eq!(n(&plain_again, "DescribeTags"), 0, "{plain_again:?}");
    assert_eq!(
        again.len(),
        plain_again.len() + 1,
        "{again:?} vs {plain_again:?}"
    );
    assert_eq!(n(&again, "DescribeTags"), 1, "{again:?}");
    for write in [
        "AddTags",
        "ModifyLoadBalancerAttributes",
        "ConfigureHealthCheck",
    ] {
        assert_eq!(n(&again, write), 0, "{again:?}");
        assert_eq!(n(&update, write), 1, "{update:?}");
    }

    // The check's protocol, port and path (upstream's overrides), as `aws elb` shows them.
    for (asked, target) in [
        (
            json!({format!("{a}healthcheck-protocol"): "http", format!("{a}healthcheck-port"): "10256", format!("{a}healthcheck-path"): "/readyz"}),
            "HTTP:10256/readyz",
        ),
        (
            json!({format!("{a}healthcheck-protocol"): "HTTPS", format!("{a}healthcheck-port"): "traffic-port"}),
            "HTTPS:30080/",
        ),
        (
            json!({format!("{a}healthcheck-protocol"): "ssl"}),
            "SSL:30080",
        ),
        (json!({}), "TCP:30080"),
    ] {
        let svc = service(uid, asked.clone(), &[(80, 30080)], &[]);
        lb.update_load_balancer("kubernetes", &svc, &nodes)
            .await
            .unwrap();
        let d = &classic_elb(&w, &name)["HealthCheck"];
        assert_eq!(s(d, "Target"), target, "{asked}: {d}");
    }

    // A bad value is refused by name before any cloud call.
    let bad = service(
        uid,
        json!({format!("{a}connection-idle-timeout"): "0"}),
        &[(80, 30080)],
        &[],
    );
    let before = requests();
    let e = lb
        .ensure_load_balancer("kubernetes", &bad, &nodes)
        .await
        .unwrap_err();
    let m = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(m.contains(&format!("{a}connection-idle-timeout")), "{m}");
    assert_eq!(requests(), before, "no cloud call for a refused Service");

    for s in [&plain, &svc] {
        lb.ensure_load_balancer_deleted("kubernetes", s)
            .await
            .unwrap();
    }
}

/// Each listener as (port, protocol, certificate). Not the instance protocol: moto keeps none
/// and answers the listener's protocol for it (moto/elb/models.py `FakeListener`); the unit
/// test `listeners_as_upstream_build_listener` checks what is sent.
fn listeners(w: &World, name: &str) -> Vec<(i64, String, String)> {
    let d = &classic_elb(w, name);
    let mut out: Vec<_> = d["ListenerDescriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let l = &l["Listener"];
            (
                l["LoadBalancerPort"].as_i64().unwrap(),
                s(l, "Protocol").to_ascii_uppercase(),
                s(l, "SSLCertificateId").to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn classic_elb_tls_listeners_from_ssl_annotations() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(1, 0);
    let aws = start(&w).await;
    let lb = aws.load_balancer().unwrap();
    let nodes = [node(&w, 0)];
    let a = "service.beta.kubernetes.io/aws-load-balancer-";
    // Certificates moto's ACM holds.
    let cert = |domain: &str| {
        s(
            &w.moto
                .cli(&["acm", "request-certificate", "--domain-name", domain]),
            "CertificateArn",
        )
        .to_owned()
    };
    let (one, two) = (cert("web.example.com"), cert("shop.example.com"));
    let uid = "2b3c4d5e-0003-4000-8000-000000000000";
    let name = lb_name(uid);
    let ports = [(80, 30080), (443, 30443)];
    let svc = service(
        uid,
        json!({
            format!("{a}ssl-cert"): one,
            format!("{a}ssl-ports"): "p443",
            format!("{a}backend-protocol"): "http",
        }),
        &ports,
        &[],
    );
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(
        listeners(&w, &name),
        vec![
            (80, "HTTP".into(), String::new()),
            (443, "HTTPS".into(), one.clone()),
        ]
    );

    // Each update below replaces one listener: moto's DeleteLoadBalancerListeners removes
    // nothing when given several ports (moto/elb/models.py keeps every listener another port
    // of the request does not match), which AWS does in one request.
    // Another certificate: the HTTPS listener replaced.
    let tls = |cert: &str| {
        json!({
            format!("{a}ssl-cert"): cert,
            format!("{a}ssl-ports"): "p443",
            format!("{a}backend-protocol"): "http",
        })
    };
    let svc = service(uid, tls(&two), &ports, &[]);
    lb.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(
        listeners(&w, &name),
        vec![
            (80, "HTTP".into(), String::new()),
            (443, "HTTPS".into(), two.clone()),
        ]
    );

    // No certificate any more: HTTP on both.
    let svc = service(
        uid,
        json!({format!("{a}backend-protocol"): "http"}),
        &ports,
        &[],
    );
    lb.update_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(
        listeners(&w, &name),
        vec![
            (80, "HTTP".into(), String::new()),
            (443, "HTTP".into(), String::new()),
        ]
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();

    // ssl-cert alone: SSL listeners on every port.
    let uid = "2b3c4d5e-0004-4000-8000-000000000000";
    let svc = service(uid, json!({format!("{a}ssl-cert"): one}), &ports, &[]);
    lb.ensure_load_balancer("kubernetes", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(
        listeners(&w, &lb_name(uid)),
        vec![
            (80, "SSL".into(), one.clone()),
            (443, "SSL".into(), one.clone()),
        ]
    );
    lb.ensure_load_balancer_deleted("kubernetes", &svc)
        .await
        .unwrap();
}

const SUBNETS: &str = "service.beta.kubernetes.io/aws-load-balancer-subnets";

/// A second subnet of the world's VPC (`10.N.2.0/24` in `zone`) named `name`; (ID, CIDR).
fn second_subnet(w: &World, zone: &str, name: &str) -> (String, String) {
    let first = w
        .moto
        .cli(&["ec2", "describe-subnets", "--subnet-ids", &w.subnet]);
    let cidr = s(&first["Subnets"][0], "CidrBlock").replace(".1.0/24", ".2.0/24");
    let made = w.moto.cli(&[
        "ec2",
        "create-subnet",
        "--vpc-id",
        &w.vpc,
        "--cidr-block",
        &cidr,
        "--availability-zone",
        zone,
    ]);
    let id = s(&made["Subnet"], "SubnetId").to_owned();
    w.moto.cli(&[
        "ec2",
        "create-tags",
        "--resources",
        &id,
        "--tags",
        &format!("Key=Name,Value={name}"),
    ]);
    (id, cidr)
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_owned))
        .collect()
}

fn nlb_subnets(w: &World, name: &str) -> BTreeSet<String> {
    let d = w
        .moto
        .cli(&["elbv2", "describe-load-balancers", "--names", name]);
    d["LoadBalancers"][0]["AvailabilityZones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| s(z, "SubnetId").to_owned())
        .collect()
}

#[tokio::test]
async fn subnets_annotation_names_subnets_by_id_or_name_tag() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(1, 0);
    let (b, _) = second_subnet(&w, "us-east-1b", "lb-b");
    let aws = start(&w).await;
    let lb = aws.load_balancer().unwrap();
    let nodes = [node(&w, 0)];

    // Classic ELB: one subnet by ID, one by its Name tag; then only the named one.
    let uid = "5b0c0000-0001-4000-8000-000000000000";
    let name = lb_name(uid);
    let both = service(
        uid,
        json!({SUBNETS: format!("{}, lb-b", w.subnet)}),
        &[(80, 30080)],
        &[],
    );
    lb.ensure_load_balancer("kubernetes", &both, &nodes)
        .await
        .unwrap();
    assert_eq!(
        strings(&classic_elb(&w, &name)["Subnets"]),
        BTreeSet::from([w.subnet.clone(), b.clone()])
    );
    let only_b = service(uid, json!({SUBNETS: "lb-b"}), &[(80, 30080)], &[]);
    lb.update_load_balancer("kubernetes", &only_b, &nodes)
        .await
        .unwrap();
    assert_eq!(
        strings(&classic_elb(&w, &name)["Subnets"]),
        BTreeSet::from([b.clone()])
    );

    // A value that names no subnet is an error naming the annotation; nothing is made.
    for (value, why) in [
        ("no-such-subnet", "names no subnet"),
        ("subnet-0123456789abcdef0", "does not exist"),
    ] {
        let bad = service(
            "5b0c0000-0002-4000-8000-000000000000",
            json!({SUBNETS: value}),
            &[(80, 30080)],
            &[],
        );
        let e = lb
            .ensure_load_balancer("kubernetes", &bad, &nodes)
            .await
            .unwrap_err();
        let e = hypercloud_cloudprovider::Chain(&e).to_string();
        assert!(e.contains(SUBNETS) && e.contains(why), "{value}: {e}");
    }
    let all = w.moto.cli(&["elb", "describe-load-balancers"]);
    assert_eq!(
        all["LoadBalancerDescriptions"].as_array().unwrap().len(),
        1,
        "{all}"
    );

    // NLB: the named subnet only.
    let nlb_uid = "5b0c0000-0003-4000-8000-000000000000";
    let nlb = service(
        nlb_uid,
        json!({"service.beta.kubernetes.io/aws-load-balancer-type": "nlb", SUBNETS: "lb-b"}),
        &[(80, 30080)],
        &[],
    );
    lb.ensure_load_balancer("kubernetes", &nlb, &nodes)
        .await
        .unwrap();
    assert_eq!(
        nlb_subnets(&w, &lb_name(nlb_uid)),
        BTreeSet::from([b.clone()])
    );

    lb.ensure_load_balancer_deleted("kubernetes", &only_b)
        .await
        .unwrap();
    lb.ensure_load_balancer_deleted("kubernetes", &nlb)
        .await
        .unwrap();
    let all = w.moto.cli(&["elb", "describe-load-balancers"]);
    assert_eq!(
        all["LoadBalancerDescriptions"].as_array().unwrap().len(),
        0,
        "{all}"
    );
}

fn group_named(w: &World, name: &str) -> Vec<Value> {
    w.moto.cli(&[
        "ec2",
        "describe-security-groups",
        "--filters",
        &format!("Name=group-name,Values={name}"),
    ])["SecurityGroups"]
        .as_array()
        .unwrap()
        .clone()
}

fn new_group(w: &World, name: &str) -> String {
    let g = w.moto.cli(&[
        "ec2",
        "create-security-group",
        "--group-name",
        name,
        "--description",
        "the user's",
        "--vpc-id",
        &w.vpc,
    ]);
    s(&g, "GroupId").to_owned()
}

#[tokio::test]
async fn classic_elb_security_groups_replace_or_join_its_own() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(1, 0);
    let aws = start(&w).await;
    let lb = aws.load_balancer().unwrap();
    let nodes = [node(&w, 0)];
    let (g1, g2, x) = (
        new_group(&w, "byo-1"),
        new_group(&w, "byo-2"),
        new_group(&w, "extra-1"),
    );
    let sg = "service.beta.kubernetes.io/aws-load-balancer-security-groups";
    let extra = "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups";
    let uid = "5ec00000-0001-4000-8000-000000000000";
    let name = lb_name(uid);

    // Extra groups join the ELB's own group; the nodes admit the own group.
    let with_extra = service(uid, json!({extra: x}), &[(80, 30080)], &[]);
    lb.ensure_load_balancer("kubernetes", &with_extra, &nodes)
        .await
        .unwrap();
    let own = group_named(&w, &format!("k8s-elb-{name}"));
    let own = s(&own[0], "GroupId").to_owned();
    assert_eq!(
        strings(&classic_elb(&w, &name)["SecurityGroups"]),
        BTreeSet::from([own.clone(), x.clone()])
    );
    let admits = |g: &str| ingress(&w, &node_group(&w)).iter().any(|r| r.2 == g);
    assert!(admits(&own));
    assert!(
        ingress(&w, &x).is_empty(),
        "the extra group is given no rules"
    );

    // security-groups replace the own group, which goes (with the nodes' rule for it).
    let byo = service(
        uid,
        json!({sg: format!("{g1},{g2}"), extra: x}),
        &[(80, 30080)],
        &[],
    );
    lb.update_load_balancer("kubernetes", &byo, &nodes)
        .await
        .unwrap();
    assert_eq!(
        strings(&classic_elb(&w, &name)["SecurityGroups"]),
        BTreeSet::from([g1.clone(), g2.clone(), x.clone()])
    );
    assert!(group_named(&w, &format!("k8s-elb-{name}")).is_empty());
    assert!(admits(&g1) && !admits(&own) && !admits(&g2));
    assert!(ingress(&w, &g1).is_empty() && ingress(&w, &g2).is_empty());

    // Deleting keeps the user's groups and takes the nodes' rule for the first away.
    lb.ensure_load_balancer_deleted("kubernetes", &byo)
        .await
        .unwrap();
    for g in [&g1, &g2, &x] {
        let d = w
            .moto
            .cli(&["ec2", "describe-security-groups", "--group-ids", g]);
        assert_eq!(d["SecurityGroups"].as_array().unwrap().len(), 1, "{g}");
    }
    assert!(!admits(&g1));
    let all = w.moto.cli(&["elb", "describe-load-balancers"]);
    assert_eq!(
        all["LoadBalancerDescriptions"].as_array().unwrap().len(),
        0,
        "{all}"
    );
}

/// The form body of the first `action` request since `from`.
fn sent(proxy: &FaultProxy, from: usize, action: &str) -> String {
    proxy
        .actions()
        .iter()
        .zip(proxy.bodies())
        .skip(from)
        .find(|(a, _)| a.as_str() == action)
        .map(|(_, b)| b)
        .unwrap_or_else(|| panic!("no {action} sent"))
}

/// moto 5.2.5 neither keeps nor checks an NLB's SubnetMappings AllocationId or
/// PrivateIPv4Address (`describe-load-balancers` shows no `LoadBalancerAddresses`): what is
/// checked is the request the provider sent through a recording proxy, and the subnets moto
/// shows.
#[tokio::test]
async fn nlb_addresses_sent_as_subnet_mappings() {
    let _group = hypercloud_testenv::group("loadbalancer").await;
    let w = World::start(1, 0);
    let (b, b_cidr) = second_subnet(&w, "us-east-1b", "lb-b");
    let proxy = FaultProxy::start(w.moto.url()).await;
    let aws = support::provider(&support::cloud_conf(proxy.url(), w.mock.url(), ""));
    aws.initialize(None).await.unwrap();
    let lb = aws.load_balancer().unwrap();
    let nodes = [node(&w, 0)];
    let eip = || {
        let a = w.moto.cli(&["ec2", "allocate-address", "--domain", "vpc"]);
        s(&a, "AllocationId").to_owned()
    };
    let (e1, e2) = (eip(), eip());
    let t = "service.beta.kubernetes.io/aws-load-balancer-type";
    let eips = "service.beta.kubernetes.io/aws-load-balancer-eip-allocations";
    let ips = "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses";
    let internal = "service.beta.kubernetes.io/aws-load-balancer-internal";

    // Internet-facing: one allocation per subnet, in the annotation's order.
    let uid = "e1900000-0001-4000-8000-000000000000";
    let public = service(
        uid,
        json!({t: "nlb", SUBNETS: format!("lb-b,{}", w.subnet), eips: format!("{e1},{e2}")}),
        &[(80, 30080)],
        &[],
    );
    let from = proxy.actions().len();
    lb.ensure_load_balancer("kubernetes", &public, &nodes)
        .await
        .unwrap();
    let body = sent(&proxy, from, "CreateLoadBalancer");
    for want in [
        format!("SubnetMappings.member.1.SubnetId={b}"),
        format!("SubnetMappings.member.1.AllocationId={e1}"),
        format!("SubnetMappings.member.2.SubnetId={}", w.subnet),
        format!("SubnetMappings.member.2.AllocationId={e2}"),
    ] {
        assert!(body.split('&').any(|kv| kv == want), "{want}: {body}");
    }
    assert_eq!(
        nlb_subnets(&w, &lb_name(uid)),
        BTreeSet::from([b.clone(), w.subnet.clone()])
    );
    // Converging sends no new mappings when the subnets stay.
    let from = proxy.actions().len();
    lb.update_load_balancer("kubernetes", &public, &nodes)
        .await
        .unwrap();
    let again = actions_since(&proxy, from);
    assert!(
        !again
            .iter()
            .any(|a| a == "CreateLoadBalancer" || a == "SetSubnets"),
        "{again:?}"
    );

    // More allocations than the discovered subnets: an error naming the annotation, no NLB.
    let bad = service(
        "e1900000-0002-4000-8000-000000000000",
        json!({t: "nlb", eips: format!("{e1},{e2},{}", eip())}),
        &[(80, 30080)],
        &[],
    );
    let e = lb
        .ensure_load_balancer("kubernetes", &bad, &nodes)
        .await
        .unwrap_err();
    let e = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(e.contains(&format!("{eips} has 3 entries")), "{e}");

    // Internal: a private address inside its subnet.
    let inside = b_cidr.replace(".0/24", ".10");
    let private_uid = "e1900000-0003-4000-8000-000000000000";
    let private = service(
        private_uid,
        json!({t: "nlb", internal: "true", SUBNETS: "lb-b", ips: inside}),
        // Another node port: two Services never share one (the nodes' rules are per port).
        &[(80, 30081)],
        &[],
    );
    let from = proxy.actions().len();
    lb.ensure_load_balancer("kubernetes", &private, &nodes)
        .await
        .unwrap();
    let body = sent(&proxy, from, "CreateLoadBalancer");
    for want in [
        format!("SubnetMappings.member.1.SubnetId={b}"),
        format!("SubnetMappings.member.1.PrivateIPv4Address={inside}"),
        "Scheme=internal".to_owned(),
    ] {
        assert!(body.split('&').any(|kv| kv == want), "{want}: {body}");
    }
    assert_eq!(
        nlb_subnets(&w, &lb_name(private_uid)),
        BTreeSet::from([b.clone()])
    );
    // An address outside its subnet: refused naming the annotation.
    let outside = service(
        "e1900000-0004-4000-8000-000000000000",
        json!({t: "nlb", internal: "true", SUBNETS: w.subnet, ips: inside}),
        &[(80, 30080)],
        &[],
    );
    let e = lb
        .ensure_load_balancer("kubernetes", &outside, &nodes)
        .await
        .unwrap_err();
    let e = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(e.contains(ips) && e.contains("is not inside subnet"), "{e}");

    for svc in [&public, &private] {
        lb.ensure_load_balancer_deleted("kubernetes", svc)
            .await
            .unwrap();
    }
    let all = w.moto.cli(&["elbv2", "describe-load-balancers"]);
    assert_eq!(all["LoadBalancers"].as_array().unwrap().len(), 0, "{all}");
}
