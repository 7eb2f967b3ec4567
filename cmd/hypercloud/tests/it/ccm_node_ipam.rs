//! Node IPAM end to end: the real `cloud-controller-manager` binary with
//! `--allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 --configure-cloud-routes=true`, the
//! real apiserver (pkg/testenv) and a real `hypercloud local-cloud serve` process, on a cluster
//! where nothing else assigns pod CIDRs.
//!
//! - Nodes registered without `spec.podCIDRs` get a /24 each from the cluster CIDR, never the
//!   one a Node already had;
//! - the route controller then creates one extra route per Node CIDR on the local cloud's
//!   router (next hop: the Node's instance address) and sets `NetworkUnavailable=False`;
//! - a deleted Node's route goes.
//!
//! A test binary of its own: node IPAM and the route controller act on every Node of the
//! apiserver, so they must not run beside other tests' Nodes (the tests of one binary run
//! concurrently; binaries run one after the other).
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::localcloud::{cli_json, http, state_dir, token, Serve};
use hypercloud_testenv::nodes::{self, create_tainted, has_taint, set_ready, TAINT_UNINITIALIZED};
use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

use crate::BIN;
const CLUSTER_CIDR: &str = "10.244.0.0/16";
const LIMIT: Duration = Duration::from_secs(60);

/// The local cloud's router's extra routes: destination → next hop.
fn router_routes(serve: &Serve, router: &str) -> BTreeMap<String, String> {
    let (status, _, body) = http(
        "GET",
        &format!("{}/network/v2.0/routers/{router}", serve.api_url),
        &[("X-Auth-Token", &token(&serve.api_url))],
        None,
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["router"]["routes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["destination"].as_str().unwrap().to_owned(),
                r["nexthop"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn router_id(serve: &Serve) -> String {
    let (status, _, body) = http(
        "GET",
        &format!("{}/network/v2.0/routers?name=router1", serve.api_url),
        &[("X-Auth-Token", &token(&serve.api_url))],
        None,
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["routers"][0]["id"].as_str().unwrap().to_owned()
}

fn start_ccm(dir: &Path, kubeconfig: &Path, cloud_conf: &Path) -> Proc {
    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", cloud_conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--leader-elect=false")
        .arg("--secure-port=0")
        // Not the lifecycle controller: Nodes of earlier test binaries left on a shared
        // apiserver have no instance in this cloud and would be deleted.
        .arg("--controllers=cloud-node,nodeipam,route")
        .arg("--allocate-node-cidrs=true")
        .arg(format!("--cluster-cidr={CLUSTER_CIDR}"))
        .arg("--configure-cloud-routes=true")
        .arg("--route-reconciliation-period=1s")
        .arg("--v=2");
    Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.join("ccm.log"),
        Stdout::File(dir.join("ccm.stdout")),
    )
}

fn pod_cidrs(n: &Node) -> Vec<String> {
    n.spec
        .as_ref()
        .and_then(|s| s.pod_cidrs.clone())
        .unwrap_or_default()
}

fn network_unavailable(n: &Node) -> Option<(String, String)> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "NetworkUnavailable")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// The instance's address on the local cloud's private network (the routes' next hop).
fn instance_ip(instance: &Value) -> String {
    instance["addresses"]["private"][0]["addr"]
        .as_str()
        .unwrap_or_else(|| panic!("no private address: {instance}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_get_pod_cidrs_and_routes_in_the_local_cloud() {
    let _group = hypercloud_testenv::group("ccm_node_ipam").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-node-ipam")
        .await
        .expect("testenv");
    let pre = env.unique_name("ipam-pre");
    let fresh = [env.unique_name("ipam-a"), env.unique_name("ipam-b")];
    let tmp = tempfile::tempdir().unwrap();
    let state = state_dir(&tmp);
    let serve = Serve::start(BIN, &state, &[]);
    let mut ips = BTreeMap::new();
    for name in std::iter::once(&pre).chain(&fresh) {
        let instance = cli_json(BIN, &state, &["instance", "create", name, "-o", "json"]);
        ips.insert(name.clone(), instance_ip(&instance));
    }
    let router = router_id(&serve);
    let conf = tmp.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!("{}[Route]\nrouter-id = {router}\n", serve.cloud_conf()),
    )
    .unwrap();

    // One Node already has a CIDR (as if allocated before a restart); two have none.
    let nodes: Api<Node> = Api::all(env.client());
    let pre_cidr = "10.244.0.0/24";
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": pre},
        "spec": {"podCIDR": pre_cidr, "podCIDRs": [pre_cidr]},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    for name in &fresh {
        create_tainted(&nodes, name).await;
    }
    for name in std::iter::once(&pre).chain(&fresh) {
        set_ready(&nodes, name, true).await;
    }

    let mut ccm = start_ccm(tmp.path(), env.control_plane().kubeconfig(), &conf);
    let t0 = std::time::Instant::now();

    let mut given = BTreeMap::new();
    for name in &fresh {
        let n = nodes::wait_for(&nodes, name, "a pod CIDR", LIMIT, |n| {
            !pod_cidrs(n).is_empty()
        })
        .await;
        let cidrs = pod_cidrs(&n);
        assert_eq!(cidrs.len(), 1, "single-stack: {cidrs:?}");
        let spec = n.spec.as_ref().unwrap();
        assert_eq!(spec.pod_cidr.as_deref(), Some(cidrs[0].as_str()));
        let cidr = cidrs[0].clone();
        assert!(
            cidr.starts_with("10.244.") && cidr.ends_with(".0/24"),
            "{name}: {cidr}"
        );
        assert_ne!(cidr, pre_cidr, "the CIDR a Node had is taken");
        given.insert(name.clone(), cidr);
    }
    let distinct: std::collections::BTreeSet<&String> = given.values().collect();
    assert_eq!(distinct.len(), fresh.len(), "{given:?}");
    eprintln!("pod CIDRs after {:?}: {given:?}", t0.elapsed());
    given.insert(pre.clone(), pre_cidr.to_owned());

    // Routes for every Node CIDR, to the Node's instance, and the Nodes' network is up.
    for (name, cidr) in &given {
        let n = nodes::wait_for(&nodes, name, "NetworkUnavailable=False", LIMIT, |n| {
            network_unavailable(n).is_some_and(|(s, _)| s == "False")
        })
        .await;
        assert_eq!(
            network_unavailable(&n),
            Some(("False".into(), "RouteCreated".into())),
            "{name}"
        );
        let routes = router_routes(&serve, &router);
        assert_eq!(routes.get(cidr), Some(&ips[name]), "{name}: {routes:?}");
    }
    eprintln!("routes after {:?}", t0.elapsed());
    // cloud-node initialised the tainted ones meanwhile (the controllers share one cache).
    for name in &fresh {
        let n = nodes.get(name).await.unwrap();
        assert!(!has_taint(&n, TAINT_UNINITIALIZED), "{name}");
    }

    // A deleted Node's route goes.
    let gone = &fresh[1];
    nodes.delete(gone, &DeleteParams::default()).await.unwrap();
    let gone_cidr = given[gone].clone();
    eventually("the deleted Node's route to go", LIMIT, || {
        let routes = router_routes(&serve, &router);
        let cidr = gone_cidr.clone();
        async move { (!routes.contains_key(&cidr)).then_some(()) }
    })
    .await;
    assert!(ccm.running(), "{}", ccm.log());
    let report = ccm.stdout();
    assert!(
        report.contains("  node-ipam-controller             enabled\n"),
        "{report}"
    );

    for name in [&pre, &fresh[0]] {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
    env.cleanup().await.unwrap();
}
