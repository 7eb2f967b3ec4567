//! The cloud-controller-manager end to end with the `local` provider: the real binary, the real
//! apiserver (pkg/testenv) and a real `hypercloud local-cloud serve` process.
//!
//! - A tainted Node whose instance exists is initialised from the cloud: provider ID, the
//!   instance's address on the loopback `private` subnet, zone, region and instance-type labels,
//!   taint gone.
//! - A LoadBalancer Service gets an ingress VIP with the cleanup finalizer, and a TCP
//!   connection to VIP:port reaches a backend listening on the Node's InternalIP:nodePort (the
//!   stand-in for kube-proxy) through the local cloud's data plane. Deleting the Service deletes
//!   the load balancer in the cloud and the finalizer. A Service with another
//!   `loadBalancerClass` is left alone.
//! - A stopped instance's NotReady Node gets the shutdown taint; a deleted instance's Node is
//!   deleted.
#![cfg(feature = "openstack")]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use hypercloud_testenv::localcloud::{cli, cli_json, state_dir, Serve};
use hypercloud_testenv::net::{request, Backend};
use hypercloud_testenv::nodes::{
    self, create_tainted, has_taint, internal_ip, provider_id, set_ready, TAINT_UNINITIALIZED,
};
use hypercloud_testenv::process::{personality, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use serde_json::json;

use crate::BIN;
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Starts a cloud-controller-manager process (killed when dropped, its log printed when the
/// test fails).
fn start_ccm(dir: &Path, kubeconfig: &Path, cloud_conf: &Path, controllers: &str) -> Proc {
    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=local")
        .arg(format!("--cloud-config={}", cloud_conf.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--leader-elect=false")
        .arg("--secure-port=0")
        .arg(format!("--controllers={controllers}"))
        .arg("--node-monitor-period=1s")
        .arg(format!(
            "--trace-cloud-calls={}",
            dir.join("trace.jsonl").display()
        ))
        .arg("--v=2");
    Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.join("ccm.log"),
        Stdout::Null,
    )
}

/// A local cloud with one instance per name, and a cloud.conf for the `local` provider.
struct Cloud {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    serve: Serve,
    conf: std::path::PathBuf,
}

impl Cloud {
    fn start(vip_pool: &str, instances: &[&str]) -> Cloud {
        let tmp = tempfile::tempdir().unwrap();
        let state = state_dir(&tmp);
        let serve = Serve::start(BIN, &state, &["--lb-vip-pool", vip_pool]);
        for name in instances {
            cli_json(
                BIN,
                &state,
                &[
                    "instance", "create", name, "--zone", "nova", "--flavor", "m1.small", "-o",
                    "json",
                ],
            );
        }
        let conf = tmp.path().join("cloud.conf");
        std::fs::write(&conf, serve.cloud_conf()).unwrap();
        Cloud {
            dir: tmp.path().to_path_buf(),
            _tmp: tmp,
            serve,
            conf,
        }
    }

    /// The state directory the `local-cloud` CLI works on.
    fn state(&self) -> std::path::PathBuf {
        self.dir.join("state")
    }
}

/// Runs `hypercloud local-cloud ARGS` on the cloud's state directory, asserting success.
fn local_cloud(cloud: &Cloud, args: &[&str]) {
    let out = cli(BIN, &cloud.state(), args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn lb_service(name: &str, class: Option<&str>) -> Service {
    let mut spec = json!({
        "type": "LoadBalancer",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080, "targetPort": 8080}]
    });
    if let Some(c) = class {
        spec["loadBalancerClass"] = json!(c);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_initialised_and_load_balancer_forwards_through_the_local_cloud() {
    let _group = hypercloud_testenv::group("ccm_local_cloud").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-local-lb")
        .await
        .expect("testenv");
    let node = env.unique_name("lb-node");
    let cloud = Cloud::start("127.0.120.0/24", &[&node]);
    let nodes: Api<Node> = Api::all(env.client());
    create_tainted(&nodes, &node).await;
    // Ready, as its kubelet would report it (no node-lifecycle runs here anyway).
    set_ready(&nodes, &node, true).await;

    let _ccm = start_ccm(
        &cloud.dir,
        env.control_plane().kubeconfig(),
        &cloud.conf,
        "cloud-node,service",
    );

    // The Node is initialised from the cloud.
    let initialised = nodes::wait_for(
        &nodes,
        &node,
        "the Node to be initialised",
        Duration::from_secs(60),
        // As upstream, the taint goes (with labels and provider ID) before the status patch
        // with the cloud's addresses: wait for both.
        |n| {
            !has_taint(n, TAINT_UNINITIALIZED)
                && provider_id(n).is_some_and(|id| !id.is_empty())
                && internal_ip(n).is_some()
        },
    )
    .await;
    let labels = initialised.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("nova")
    );
    assert_eq!(
        labels
            .get("topology.kubernetes.io/region")
            .map(String::as_str),
        Some("RegionOne")
    );
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("m1.small")
    );
    let provider_id = initialised
        .spec
        .as_ref()
        .unwrap()
        .provider_id
        .clone()
        .unwrap();
    assert!(provider_id.starts_with("local:///"), "{provider_id}");
    let node_ip = internal_ip(&initialised).expect("an InternalIP from the cloud");
    assert!(node_ip.starts_with("127.1."), "{node_ip}");

    // A Service of another class first: by the time ours is done, the controller has seen it.
    let services: Api<Service> = Api::namespaced(env.client(), env.namespace());
    services
        .create(
            &PostParams::default(),
            &lb_service("foreign", Some("example.com/other-lb")),
        )
        .await
        .unwrap();
    let web = services
        .create(&PostParams::default(), &lb_service("web", None))
        .await
        .unwrap();
    let node_port = web.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .expect("a nodePort");
    let reply = format!("HTTP/1.0 200 OK\r\n\r\nhello from {node}\n");
    let _backend = Backend::start(
        format!("{node_ip}:{node_port}").parse().unwrap(),
        reply.clone(),
    )
    .await;

    // The Service gets an ingress VIP and the cleanup finalizer.
    let vip = eventually("an ingress IP", Duration::from_secs(60), || {
        let services = services.clone();
        async move {
            let s = services.get("web").await.ok()?;
            let ip = s.status?.load_balancer?.ingress?.first()?.ip.clone()?;
            Some(ip)
        }
    })
    .await;
    let web = services.get("web").await.unwrap();
    assert!(
        web.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == FINALIZER),
        "the cleanup finalizer is set"
    );
    assert!(vip.starts_with("127.0.120."), "{vip}");
    let suffix = format!("_{}_web", env.namespace());
    let ours = cloud.serve.load_balancers(&suffix);
    assert_eq!(ours.len(), 1);
    // As OCCM, the cloud-controller-manager writes the Octavia id and the address to the
    // Service (its provider got the process's Kubernetes client in initialize).
    let annotated = eventually(
        "the load-balancer-id annotation",
        Duration::from_secs(30),
        || {
            let services = services.clone();
            async move {
                let a = services.get("web").await.ok()?.metadata.annotations?;
                Some((
                    a.get("loadbalancer.openstack.org/load-balancer-id")?
                        .clone(),
                    a.get("loadbalancer.openstack.org/load-balancer-address")?
                        .clone(),
                ))
            }
        },
    )
    .await;
    assert_eq!(
        annotated,
        (ours[0]["id"].as_str().unwrap().to_owned(), vip.clone())
    );

    // Traffic to the VIP reaches the backend on the Node's address through the data plane.
    let vip_addr: std::net::SocketAddr = format!("{vip}:8080").parse().unwrap();
    let answer = eventually(
        "an answer through the load balancer",
        Duration::from_secs(30),
        || async move { request(vip_addr).await.filter(|a| a.contains("hello from")) },
    )
    .await;
    assert!(answer.contains(&format!("hello from {node}")), "{answer}");

    // Events as upstream (sent from a queue, as upstream's broadcaster: wait for them).
    let events: Api<Event> = Api::namespaced(env.client(), env.namespace());
    let wanted = ["EnsuringLoadBalancer", "EnsuredLoadBalancer"];
    let reasons: Vec<String> = eventually(
        "the service controller's events",
        Duration::from_secs(30),
        || {
            let events = events.clone();
            async move {
                let reasons: Vec<String> = events
                    .list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .filter(|e| e.involved_object.name.as_deref() == Some("web"))
                    .filter_map(|e| e.reason)
                    .collect();
                wanted
                    .iter()
                    .all(|w| reasons.iter().any(|r| r == w))
                    .then_some(reasons)
            }
        },
    )
    .await;
    for want in wanted {
        assert!(
            reasons.iter().any(|r| r == want),
            "{want} not in {reasons:?}"
        );
    }

    // The foreign-class Service is left alone: no finalizer, no ingress, no load balancer.
    let foreign = services.get("foreign").await.unwrap();
    assert!(foreign.metadata.finalizers.unwrap_or_default().is_empty());
    assert!(foreign
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|l| l.ingress)
        .unwrap_or_default()
        .is_empty());
    assert!(cloud
        .serve
        .load_balancers(&format!("_{}_foreign", env.namespace()))
        .is_empty());

    // Deleting the Service deletes the load balancer, then the finalizer lets it go.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Service to be gone", Duration::from_secs(60), || {
        let services = services.clone();
        async move { services.get_opt("web").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(cloud.serve.load_balancers(&suffix).is_empty());
    assert_eq!(request(vip_addr).await, None, "the VIP no longer answers");

    nodes.delete(&node, &DeleteParams::default()).await.unwrap();
    env.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_instance_is_tainted_and_deleted_instance_loses_its_node() {
    let _group = hypercloud_testenv::group("ccm_local_cloud").await;
    let env = hypercloud_testenv::TestEnv::new("ccm-local-lifecycle")
        .await
        .expect("testenv");
    let stopped = env.unique_name("stopped");
    let gone = env.unique_name("gone");
    let cloud = Cloud::start("127.0.121.0/24", &[&stopped, &gone]);
    let nodes: Api<Node> = Api::all(env.client());
    for n in [&stopped, &gone] {
        create_tainted(&nodes, n).await;
        set_ready(&nodes, n, true).await;
    }
    let _ccm = start_ccm(
        &cloud.dir,
        env.control_plane().kubeconfig(),
        &cloud.conf,
        "cloud-node,cloud-node-lifecycle",
    );
    for n in [&stopped, &gone] {
        nodes::wait_for(&nodes, n, "initialisation", Duration::from_secs(60), |n| {
            !has_taint(n, TAINT_UNINITIALIZED)
        })
        .await;
    }

    // The instance stops; its kubelet stops posting Ready.
    local_cloud(&cloud, &["instance", "stop", &stopped]);
    set_ready(&nodes, &stopped, false).await;
    nodes::wait_for(
        &nodes,
        &stopped,
        "the shutdown taint",
        Duration::from_secs(30),
        |n| has_taint(n, SHUTDOWN),
    )
    .await;
    // Ready again: the taint comes off.
    local_cloud(&cloud, &["instance", "start", &stopped]);
    set_ready(&nodes, &stopped, true).await;
    nodes::wait_for(
        &nodes,
        &stopped,
        "the shutdown taint removed",
        Duration::from_secs(30),
        |n| !has_taint(n, SHUTDOWN),
    )
    .await;

    // The instance is deleted; its Node goes NotReady and is deleted.
    local_cloud(&cloud, &["instance", "delete", &gone]);
    set_ready(&nodes, &gone, false).await;
    eventually(
        "the Node of the deleted instance to be deleted",
        Duration::from_secs(30),
        || {
            let nodes = nodes.clone();
            let n = gone.clone();
            async move { nodes.get_opt(&n).await.ok()?.is_none().then_some(()) }
        },
    )
    .await;
    // The stopped-then-started one stays.
    assert!(nodes.get_opt(&stopped).await.unwrap().is_some());

    nodes
        .delete(&stopped, &DeleteParams::default())
        .await
        .unwrap();
    env.cleanup().await.unwrap();
}
