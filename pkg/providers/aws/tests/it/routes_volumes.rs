//! Routes in the cluster's route table and EBS volume labels, against moto, checked with the
//! `aws` CLI.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeMap;

use hypercloud_cloudprovider::{Error, Interface, Route};
use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::json;
use support::{s, World};

#[tokio::test]
async fn routes_per_pod_cidr_with_instance_targets() {
    let _group = hypercloud_testenv::group("routes_volumes").await;
    let w = World::start(2, 0);
    let table = w
        .moto
        .cli(&["ec2", "create-route-table", "--vpc-id", &w.vpc]);
    let table = s(&table["RouteTable"], "RouteTableId").to_owned();
    w.moto.cli(&[
        "ec2",
        "create-tags",
        "--resources",
        &table,
        "--tags",
        "Key=kubernetes.io/cluster/demo,Value=owned",
    ]);
    let aws = support::provider(&w.conf("instance-cache-ttl = 0s"));
    let routes = aws.routes().expect("routes");
    let node0 = w.field(0, "PrivateDnsName").to_owned();
    let id0 = w.field(0, "InstanceId").to_owned();
    assert!(routes.list_routes("kubernetes").await.unwrap().is_empty());
    let route = Route {
        target_node: node0.clone(),
        destination_cidr: "10.244.0.0/24".into(),
        ..Default::default()
    };
    routes
        .create_route("kubernetes", "uid-0", &route)
        .await
        .unwrap();
    // What AWS says: the route to the instance, and its source/destination check off.
    let t = w
        .moto
        .cli(&["ec2", "describe-route-tables", "--route-table-ids", &table]);
    let r = t["RouteTables"][0]["Routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| s(r, "DestinationCidrBlock") == "10.244.0.0/24")
        .cloned()
        .expect("route");
    assert_eq!(s(&r, "InstanceId"), id0);
    let attr = w.moto.cli(&[
        "ec2",
        "describe-instance-attribute",
        "--instance-id",
        &id0,
        "--attribute",
        "sourceDestCheck",
    ]);
    assert_eq!(
        attr["SourceDestCheck"]["Value"].as_bool(),
        Some(false),
        "{attr}"
    );
    let listed = routes.list_routes("kubernetes").await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].target_node, node0);
    assert_eq!(listed[0].destination_cidr, "10.244.0.0/24");
    assert!(!listed[0].blackhole);
    assert_eq!(listed[0].name, "kubernetes-10.244.0.0/24");
    routes.delete_route("kubernetes", &listed[0]).await.unwrap();
    assert!(routes.list_routes("kubernetes").await.unwrap().is_empty());
    let t = w
        .moto
        .cli(&["ec2", "describe-route-tables", "--route-table-ids", &table]);
    assert!(!t.to_string().contains("10.244.0.0/24"), "{t}");
}

fn pv(source: serde_json::Value) -> PersistentVolume {
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]});
    for (k, v) in source.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": "pv"}, "spec": spec})).unwrap()
}

#[tokio::test]
async fn ebs_volumes_get_zone_and_region_labels() {
    let _group = hypercloud_testenv::group("routes_volumes").await;
    let w = World::start(1, 0);
    let vol = w.moto.cli(&[
        "ec2",
        "create-volume",
        "--availability-zone",
        "us-east-1a",
        "--size",
        "1",
    ]);
    let vol = s(&vol, "VolumeId").to_owned();
    let aws = support::provider(&w.conf(""));
    let labeler = aws.pv_labeler().expect("pv labeler");
    let want = BTreeMap::from([
        (
            "topology.kubernetes.io/zone".to_owned(),
            "us-east-1a".to_owned(),
        ),
        (
            "topology.kubernetes.io/region".to_owned(),
            "us-east-1".to_owned(),
        ),
    ]);
    let in_tree =
        pv(json!({"awsElasticBlockStore": {"volumeID": format!("aws://us-east-1a/{vol}")}}));
    assert_eq!(labeler.get_labels_for_volume(&in_tree).await.unwrap(), want);
    let csi = pv(json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": vol}}));
    assert_eq!(labeler.get_labels_for_volume(&csi).await.unwrap(), want);
    let other = pv(json!({"csi": {"driver": "other.example.com", "volumeHandle": "x"}}));
    assert!(labeler
        .get_labels_for_volume(&other)
        .await
        .unwrap()
        .is_empty());
    let missing = pv(json!({"awsElasticBlockStore": {"volumeID": "vol-0123456789abcdef0"}}));
    assert!(matches!(
        labeler.get_labels_for_volume(&missing).await,
        Err(Error::DiskNotFound)
    ));
}
