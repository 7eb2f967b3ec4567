//! `--cloud-provider=gce` end to end: the real binary, the real apiserver (pkg/testenv) and the
//! local cloud's GCE dialect (Compute v1 REST and the metadata server), whose instances the
//! test creates, stops and deletes through the same REST API Google's clients use.
//!
//! - External layout: the cloud-controller-manager initialises a tainted Node from its
//!   instance, found in the second zone of the region (`multizone`): provider ID
//!   `gce://<project>/<zone>/<name>`, InternalIP from `networkIP`, ExternalIP from the access
//!   config's `natIP`, machine type, zone and region; its route controller makes a GCE route
//!   for the Node's pod CIDR to the instance and clears `NetworkUnavailable`; it taints the
//!   Node when the instance is stopped (`TERMINATED`), deletes it when the instance is
//!   deleted, and its route goes too. A LoadBalancer Service gets a forwarding rule, target
//!   pool, health check and firewall, and HTTP really flows through the rule's address to the
//!   node; deleting the Service removes them and the traffic stops. An internal one
//!   (`networking.gke.io/load-balancer-type: Internal`) gets an instance group, health check,
//!   backend service and internal forwarding rule in the annotated subnetwork, HTTP flows
//!   through its address; switched to external (`network-tier: Standard`) the internal parts
//!   go, and deleting leaves nothing. The PV-label controller
//!   labels a `gcePersistentDisk` PV with its disk's zone and region.
//! - In-tree layout: kubelet-helper learns who it is from the metadata server (the local cloud
//!   knows an instance by its address, as GCE's does: the provider sends metadata requests
//!   from the instance's address) and registers the Node with the same facts.
//! - SSH key distribution: `apiserver-plugin --ssh-user --ssh-keyfile` puts the public key in
//!   the project's `ssh-keys`, and the instance's metadata server shows it.
#![cfg(feature = "gce")]
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use hypercloud_testenv::localcloud::{http, Serve};
use hypercloud_testenv::nodes::{
    self, create_tainted, has_taint, internal_ip, provider_id, set_ready, TAINT_UNINITIALIZED,
};
use hypercloud_testenv::process::{free_port, personality, run, Proc, Stdout};
use hypercloud_testenv::wait::eventually;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

use crate::BIN;
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const REGION: &str = "us-central1";
const POD_CIDR: &str = "10.252.7.0/24";
/// The CCM test's instance address.
const NODE_IP: &str = "127.1.240.10";

fn label<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn address(n: &Node, kind: &str) -> Option<String> {
    n.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == kind)
        .map(|a| a.address.clone())
}

/// A local cloud with two zones of `us-central1`.
fn cloud(dir: &Path) -> Serve {
    Serve::start(
        BIN,
        &state_dir_in(dir),
        &[
            "--availability-zones",
            "us-central1-a,us-central1-b",
            "--region",
            REGION,
        ],
    )
}

fn state_dir_in(dir: &Path) -> PathBuf {
    dir.join("cloud")
}

/// Calls the GCE dialect; returns the status and JSON body.
fn gce(serve: &Serve, method: &str, rest: &str, body: Option<&str>) -> (u16, Value) {
    let url = format!("{}/compute/v1/projects/demo/{rest}", serve.api_url);
    let (status, _, text) = http(method, &url, &[], body);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Creates an instance with a fixed address and an external IP; returns its natIP.
fn instance(serve: &Serve, zone: &str, name: &str, ip: &str) -> String {
    let body = format!(
        r#"{{"name": "{name}", "machineType": "zones/{zone}/machineTypes/m1.small",
            "networkInterfaces": [{{"networkIP": "{ip}", "accessConfigs": [{{"type": "ONE_TO_ONE_NAT"}}]}}]}}"#
    );
    let (status, op) = gce(
        serve,
        "POST",
        &format!("zones/{zone}/instances"),
        Some(&body),
    );
    assert_eq!((status, op["status"].as_str()), (200, Some("DONE")), "{op}");
    let (_, inst) = gce(
        serve,
        "GET",
        &format!("zones/{zone}/instances/{name}"),
        None,
    );
    inst["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
        .as_str()
        .unwrap_or_else(|| panic!("no natIP: {inst}"))
        .to_owned()
}

/// A gce.conf in `dir` for the local cloud's Compute Engine dialect at `api_url` (the server's,
/// or a test proxy in front of it) and its metadata server at `metadata_url`: project `demo`,
/// local zone us-central1-a, network `private`, no token source; `multizone` adds
/// `multizone = true`, `hypercloud` more `[Hypercloud]` lines. Every gce test's config.
pub(crate) fn gce_conf(
    dir: &Path,
    api_url: &str,
    metadata_url: &str,
    multizone: bool,
    hypercloud: &str,
) -> PathBuf {
    let path = dir.join("gce.conf");
    let multizone = if multizone { "multizone = true\n" } else { "" };
    std::fs::write(
        &path,
        format!(
            "[global]\nproject-id = demo\nlocal-zone = us-central1-a\n{multizone}\
             network-name = private\napi-endpoint = {api_url}/compute/v1/\n\
             [Hypercloud]\nanonymous = true\nmetadata-endpoint = {metadata_url}\n{hypercloud}"
        ),
    )
    .unwrap();
    path
}

/// [`gce_conf`] for `serve` itself, multizone.
fn conf(dir: &Path, serve: &Serve, extra: &str) -> PathBuf {
    gce_conf(dir, &serve.api_url, &serve.metadata_url, true, extra)
}

/// One test, in steps: the CCM's node lifecycle controller deletes every NotReady Node whose
/// instance its cloud does not have, so a second test's Node (with its own local cloud) must
/// not exist while a CCM runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_provider_in_tree_and_external() {
    let _group = hypercloud_testenv::group("gce_provider").await;
    let env = hypercloud_testenv::TestEnv::new("gce")
        .await
        .expect("testenv");
    kubelet_helper_in_tree_knows_itself_from_the_metadata_server(&env).await;
    ccm_initialises_routes_taints_and_deletes_nodes(&env).await;
}

async fn ccm_initialises_routes_taints_and_deletes_nodes(env: &hypercloud_testenv::TestEnv) {
    let node = env.unique_name("gce-node");
    let dir = tempfile::tempdir().unwrap();
    let serve = cloud(dir.path());
    let nat = instance(&serve, "us-central1-b", &node, NODE_IP);
    let conf = conf(dir.path(), &serve, "");
    let nodes: Api<Node> = Api::all(env.client());
    create_tainted(&nodes, &node).await;
    // The pod CIDR node IPAM would give (not run here: it would hand CIDRs to every Node of
    // the shared apiserver).
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]}})),
        )
        .await
        .unwrap();
    set_ready(&nodes, &node, true).await;

    let mut cmd = personality(BIN, "cloud-controller-manager");
    cmd.arg("--cloud-provider=gce")
        .arg(format!("--cloud-config={}", conf.display()))
        .arg(format!(
            "--kubeconfig={}",
            env.control_plane().kubeconfig().display()
        ))
        .args([
            "--leader-elect=false",
            "--secure-port=0",
            "--node-monitor-period=1s",
            "--controllers=cloud-node,cloud-node-lifecycle,route,service,persistentvolume-label-controller",
            "--concurrent-service-syncs=1",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.252.0.0/16",
            "--configure-cloud-routes=true",
            "--route-reconciliation-period=1s",
            "--cluster-name=gcetest",
            "--v=2",
        ]);
    let ccm = Proc::spawn_with(
        "cloud-controller-manager",
        cmd,
        dir.path().join("ccm.log"),
        Stdout::File(dir.path().join("report.txt")),
    );

    let n = nodes::wait_for(
        &nodes,
        &node,
        "the Node to be initialised from GCE",
        Duration::from_secs(60),
        |n| {
            !has_taint(n, TAINT_UNINITIALIZED)
                && provider_id(n).is_some_and(|id| !id.is_empty())
                && internal_ip(n).is_some()
        },
    )
    .await;
    assert_eq!(
        provider_id(&n),
        Some(format!("gce://demo/us-central1-b/{node}").as_str())
    );
    assert_eq!(internal_ip(&n).as_deref(), Some(NODE_IP));
    assert_eq!(address(&n, "ExternalIP"), Some(nat));
    assert_eq!(
        label(&n, "topology.kubernetes.io/zone"),
        Some("us-central1-b")
    );
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some(REGION));
    assert_eq!(
        label(&n, "node.kubernetes.io/instance-type"),
        Some("m1.small")
    );

    // The route controller: a GCE route for the pod CIDR to the instance, then the Node's
    // network is available.
    let route = eventually("the Node's route", Duration::from_secs(60), || async {
        let (_, list) = gce(&serve, "GET", "global/routes", None);
        list["items"]
            .as_array()?
            .iter()
            .find(|r| r["destRange"] == POD_CIDR)
            .cloned()
    })
    .await;
    assert!(
        route["name"].as_str().unwrap().starts_with("gcetest-"),
        "{route}"
    );
    assert!(
        route["nextHopInstance"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/zones/us-central1-b/instances/{node}")),
        "{route}"
    );
    assert_eq!(route["description"], "k8s-node-route", "{route}");
    assert!(route["network"]
        .as_str()
        .unwrap()
        .ends_with("/global/networks/private"));
    nodes::wait_for(
        &nodes,
        &node,
        "NetworkUnavailable=False",
        Duration::from_secs(60),
        |n| network_unavailable(n).as_deref() == Some("False"),
    )
    .await;

    load_balancer(env, &serve, &node).await;
    internal_load_balancer(env, &serve, &node).await;
    shared_backend_service(env, &serve).await;
    pv_labels(env, &serve).await;

    // Stopped through the API: TERMINATED, and its kubelet stops posting Ready.
    let (status, op) = gce(
        &serve,
        "POST",
        &format!("zones/us-central1-b/instances/{node}/stop"),
        None,
    );
    assert_eq!(status, 200, "{op}");
    set_ready(&nodes, &node, false).await;
    nodes::wait_for(
        &nodes,
        &node,
        "the shutdown taint",
        Duration::from_secs(60),
        |n| has_taint(n, SHUTDOWN),
    )
    .await;

    // Deleted: the Node goes.
    let (status, op) = gce(
        &serve,
        "DELETE",
        &format!("zones/us-central1-b/instances/{node}"),
        None,
    );
    assert_eq!(status, 200, "{op}");
    eventually(
        "the Node of the deleted instance to be deleted",
        Duration::from_secs(60),
        || async { nodes.get_opt(&node).await.unwrap().is_none().then_some(()) },
    )
    .await;
    // And its route with it.
    eventually(
        "the deleted Node's route to go",
        Duration::from_secs(60),
        || async {
            let (_, list) = gce(&serve, "GET", "global/routes", None);
            let left = list["items"]
                .as_array()
                .is_some_and(|a| a.iter().any(|r| r["destRange"] == POD_CIDR));
            (!left).then_some(())
        },
    )
    .await;
    drop(ccm);
    let _ = nodes.delete(&node, &DeleteParams::default()).await;
}

/// An HTTP server on `ip:port` (0: any) answering every request with `body`; its port.
async fn http_server(ip: &str, port: u16, body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

async fn fetch(url: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(3))
        .build()
        .ok()?;
    client.get(url).send().await.ok()?.text().await.ok()
}

/// A LoadBalancer Service: forwarding rule, target pool, health check and firewall on the
/// local cloud, and real HTTP through the rule's address to the node (where kube-proxy would
/// catch the Service port); deleting the Service removes them and the traffic stops.
async fn load_balancer(env: &hypercloud_testenv::TestEnv, serve: &Serve, node: &str) {
    // kube-proxy's health endpoint and the Service port on the node's address.
    http_server(NODE_IP, 10256, "ok").await;
    let port = http_server(NODE_IP, 0, "hello from the gce node").await;
    let services: Api<Service> = Api::namespaced(env.client(), env.namespace());
    let name = env.unique_name("gce-lb");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "selector": {"app": "none"},
            "ports": [{"port": port, "targetPort": 8080}]}
    }))
    .unwrap();
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap().replace('-', "");
    let lb_name: String = format!("a{uid}").chars().take(32).collect();
    let ip = eventually(
        "the Service's ingress IP",
        Duration::from_secs(60),
        || async {
            let s = services.get(&name).await.ok()?;
            s.status?.load_balancer?.ingress?.first()?.ip.clone()
        },
    )
    .await;
    let (_, rule) = gce(
        serve,
        "GET",
        &format!("regions/{REGION}/forwardingRules/{lb_name}"),
        None,
    );
    assert_eq!(rule["IPAddress"], ip.as_str(), "{rule}");
    assert_eq!(rule["portRange"], format!("{port}-{port}"), "{rule}");
    let (_, pool) = gce(
        serve,
        "GET",
        &format!("regions/{REGION}/targetPools/{lb_name}"),
        None,
    );
    assert!(
        pool["instances"]
            .to_string()
            .contains(&format!("/instances/{node}")),
        "{pool}"
    );
    let (_, fw) = gce(
        serve,
        "GET",
        &format!("global/firewalls/k8s-fw-{lb_name}"),
        None,
    );
    assert_eq!(fw["allowed"][0]["ports"], json!([port.to_string()]), "{fw}");
    let (status, hc) = gce(
        serve,
        "GET",
        "global/httpHealthChecks/k8s-gcetest-node",
        None,
    );
    assert_eq!((status, hc["port"].as_u64()), (200, Some(10256)), "{hc}");
    let url = format!("http://{ip}:{port}/");
    let body = eventually(
        "traffic through the forwarding rule",
        Duration::from_secs(60),
        || fetch(&url),
    )
    .await;
    assert_eq!(body, "hello from the gce node");

    services
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // EnsureLoadBalancerDeleted removes the forwarding rule, then the target
    // pool, then the firewall: wait for the last of them, not the first.
    eventually(
        "the forwarding rule, target pool and firewall to go",
        Duration::from_secs(60),
        || async {
            let gone = [
                format!("regions/{REGION}/forwardingRules/{lb_name}"),
                format!("regions/{REGION}/targetPools/{lb_name}"),
                format!("global/firewalls/k8s-fw-{lb_name}"),
            ]
            .iter()
            .all(|path| gce(serve, "GET", path, None).0 == 404);
            gone.then_some(())
        },
    )
    .await;
    assert_eq!(
        fetch(&url).await,
        None,
        "traffic after the load balancer was deleted"
    );
}

/// An internal LoadBalancer Service (upstream's ILB): the node's zone's instance group holds
/// the node, the backend service sends to it with the shared node health check, the internal
/// forwarding rule (the Service's port, the annotated subnetwork, global access) carries real
/// HTTP to the node; switched to an external `Standard`-tier one, the internal parts go and
/// the traffic follows the new rule; deleted, nothing is left. kube-proxy's health endpoint
/// (port 10256) is [`load_balancer`]'s.
async fn internal_load_balancer(env: &hypercloud_testenv::TestEnv, serve: &Serve, node: &str) {
    let port = http_server(NODE_IP, 0, "hello from the internal gce node").await;
    let (_, net) = gce(serve, "GET", "global/networks/private", None);
    let subnet_link = net["subnetworks"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{net}"));
    let subnet = subnet_link.rsplit('/').next().unwrap().to_owned();
    let services: Api<Service> = Api::namespaced(env.client(), env.namespace());
    let name = env.unique_name("gce-ilb");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            "networking.gke.io/load-balancer-type": "Internal",
            "networking.gke.io/internal-load-balancer-subnet": subnet,
            "networking.gke.io/internal-load-balancer-allow-global-access": "true"}},
        "spec": {"type": "LoadBalancer", "selector": {"app": "none"},
            "ports": [{"port": port, "targetPort": 8080}]}
    }))
    .unwrap();
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap().replace('-', "");
    let lb_name: String = format!("a{uid}").chars().take(32).collect();
    let ingress = |want: Option<String>| {
        let services = services.clone();
        let name = name.clone();
        async move {
            let s = services.get(&name).await.ok()?;
            let ip = s.status?.load_balancer?.ingress?.first()?.ip.clone()?;
            (want.as_deref() != Some(ip.as_str())).then_some(ip)
        }
    };
    let ip = eventually(
        "the internal Service's ingress IP",
        Duration::from_secs(60),
        || ingress(None),
    )
    .await;
    let rule_path = format!("regions/{REGION}/forwardingRules/{lb_name}");
    let (_, rule) = gce(serve, "GET", &rule_path, None);
    assert_eq!(rule["IPAddress"], ip.as_str(), "{rule}");
    assert_eq!(rule["loadBalancingScheme"], "INTERNAL", "{rule}");
    assert_eq!(rule["ports"], json!([port.to_string()]), "{rule}");
    assert_eq!(rule["subnetwork"], subnet_link, "{rule}");
    assert_eq!(rule["allowGlobalAccess"], true, "{rule}");
    assert_eq!(rule["networkTier"], "PREMIUM", "{rule}");
    assert!(rule.get("target").is_none(), "{rule}");
    let bs_path = format!("regions/{REGION}/backendServices/{lb_name}");
    assert!(
        rule["backendService"].as_str().unwrap().ends_with(&bs_path),
        "{rule}"
    );
    let (_, bs) = gce(serve, "GET", &bs_path, None);
    assert_eq!(
        (&bs["loadBalancingScheme"], &bs["protocol"]),
        (&json!("INTERNAL"), &json!("TCP")),
        "{bs}"
    );
    let group_path = "zones/us-central1-b/instanceGroups/k8s-ig--gcetest";
    assert!(
        bs["backends"][0]["group"]
            .as_str()
            .unwrap()
            .ends_with(group_path),
        "{bs}"
    );
    assert!(
        bs["healthChecks"][0]
            .as_str()
            .unwrap()
            .ends_with("/global/healthChecks/k8s-gcetest-node"),
        "{bs}"
    );
    let (_, members) = gce(
        serve,
        "POST",
        &format!("{group_path}/listInstances"),
        Some("{}"),
    );
    assert!(
        members["items"][0]["instance"]
            .as_str()
            .unwrap_or_else(|| panic!("{members}"))
            .ends_with(&format!("/zones/us-central1-b/instances/{node}")),
        "{members}"
    );
    let (_, hc) = gce(serve, "GET", "global/healthChecks/k8s-gcetest-node", None);
    assert_eq!(
        (&hc["type"], &hc["httpHealthCheck"]["port"]),
        (&json!("HTTP"), &json!(10256)),
        "{hc}"
    );
    let url = format!("http://{ip}:{port}/");
    let body = eventually(
        "traffic through the internal forwarding rule",
        Duration::from_secs(60),
        || fetch(&url),
    )
    .await;
    assert_eq!(body, "hello from the internal gce node");

    // Switched to an external load balancer of the Standard tier.
    services
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "networking.gke.io/load-balancer-type": null,
                "networking.gke.io/internal-load-balancer-subnet": null,
                "networking.gke.io/internal-load-balancer-allow-global-access": null,
                "cloud.google.com/network-tier": "Standard"}}})),
        )
        .await
        .unwrap();
    let external_ip = eventually("the external ingress IP", Duration::from_secs(60), || {
        ingress(Some(ip.clone()))
    })
    .await;
    let (_, rule) = gce(serve, "GET", &rule_path, None);
    assert_eq!(
        (&rule["loadBalancingScheme"], &rule["networkTier"]),
        (&json!("EXTERNAL"), &json!("STANDARD")),
        "{rule}"
    );
    for gone in [bs_path.as_str(), group_path] {
        assert_eq!(
            gce(serve, "GET", gone, None).0,
            404,
            "{gone} after the switch"
        );
    }
    let url = format!("http://{external_ip}:{port}/");
    let body = eventually(
        "traffic through the external forwarding rule",
        Duration::from_secs(60),
        || fetch(&url),
    )
    .await;
    assert_eq!(body, "hello from the internal gce node");

    services
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "every part of the load balancer to go",
        Duration::from_secs(60),
        || async {
            let gone = [
                rule_path.clone(),
                format!("regions/{REGION}/targetPools/{lb_name}"),
                format!("global/firewalls/k8s-fw-{lb_name}"),
                bs_path.clone(),
                group_path.to_owned(),
                "global/healthChecks/k8s-gcetest-node".to_owned(),
                "global/httpHealthChecks/k8s-gcetest-node".to_owned(),
            ]
            .iter()
            .all(|path| gce(serve, "GET", path, None).0 == 404);
            gone.then_some(())
        },
    )
    .await;
}

/// Two internal Services with `load-balancer-backend-share: "true"` send to one backend
/// service named as upstream's (`k8s-<cluster>-internal-tcp-nmv1-<sha1("None")[:16]>`), each
/// through its own forwarding rule; it outlives the first Service's deletion and goes with the
/// second's.
async fn shared_backend_service(env: &hypercloud_testenv::TestEnv, serve: &Serve) {
    let services: Api<Service> = Api::namespaced(env.client(), env.namespace());
    let shared =
        format!("regions/{REGION}/backendServices/k8s-gcetest-internal-tcp-nmv1-6eef6648406c333a");
    let mut made = Vec::new();
    for (prefix, answer) in [
        ("gce-ilb-share-a", "first sharer"),
        ("gce-ilb-share-b", "second sharer"),
    ] {
        let port = http_server(NODE_IP, 0, answer).await;
        let name = env.unique_name(prefix);
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {
                "networking.gke.io/load-balancer-type": "Internal",
                "alpha.cloud.google.com/load-balancer-backend-share": "true"}},
            "spec": {"type": "LoadBalancer", "selector": {"app": "none"},
                "ports": [{"port": port, "targetPort": 8080}]}
        }))
        .unwrap();
        let created = services.create(&PostParams::default(), &svc).await.unwrap();
        let uid = created.metadata.uid.clone().unwrap().replace('-', "");
        let lb_name: String = format!("a{uid}").chars().take(32).collect();
        let ip = eventually("the sharer's ingress IP", Duration::from_secs(60), || {
            let services = services.clone();
            let name = name.clone();
            async move {
                let s = services.get(&name).await.ok()?;
                s.status?.load_balancer?.ingress?.first()?.ip.clone()
            }
        })
        .await;
        let (_, rule) = gce(
            serve,
            "GET",
            &format!("regions/{REGION}/forwardingRules/{lb_name}"),
            None,
        );
        assert!(
            rule["backendService"]
                .as_str()
                .unwrap_or_default()
                .ends_with(&shared),
            "{rule}"
        );
        assert_eq!(
            gce(
                serve,
                "GET",
                &format!("regions/{REGION}/backendServices/{lb_name}"),
                None
            )
            .0,
            404,
            "no backend service of its own"
        );
        let url = format!("http://{ip}:{port}/");
        let body = eventually(
            "traffic through the sharer's rule",
            Duration::from_secs(60),
            || fetch(&url),
        )
        .await;
        assert_eq!(body, answer);
        made.push((name, url, answer));
    }
    let (_, bs) = gce(serve, "GET", &shared, None);
    assert_eq!(
        bs["description"], "",
        "a shared backend service is no one Service's: {bs}"
    );
    let (second, second_url, second_answer) = made.pop().unwrap();
    let (first, _, _) = made.pop().unwrap();
    services
        .delete(&first, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the first sharer to go",
        Duration::from_secs(60),
        || async { services.get_opt(&first).await.ok()?.is_none().then_some(()) },
    )
    .await;
    assert_eq!(
        gce(serve, "GET", &shared, None).0,
        200,
        "still used by the second"
    );
    assert_eq!(fetch(&second_url).await.as_deref(), Some(second_answer));
    services
        .delete(&second, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the shared backend service to go with the last sharer",
        Duration::from_secs(60),
        || async { (gce(serve, "GET", &shared, None).0 == 404).then_some(()) },
    )
    .await;
}

/// The PV-label controller gives a `gcePersistentDisk` PV its disk's zone and region (the disk
/// in the region's second zone, found by looking in every managed zone).
async fn pv_labels(env: &hypercloud_testenv::TestEnv, serve: &Serve) {
    let disk = env.unique_name("gce-pd");
    let (status, op) = gce(
        serve,
        "POST",
        "zones/us-central1-b/disks",
        Some(&format!(r#"{{"name": "{disk}", "sizeGb": "5"}}"#)),
    );
    assert_eq!((status, op["status"].as_str()), (200, Some("DONE")), "{op}");
    let pvs: Api<PersistentVolume> = Api::all(env.client());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": disk},
        "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
            "gcePersistentDisk": {"pdName": disk, "fsType": "ext4"}}
    }))
    .unwrap();
    pvs.create(&PostParams::default(), &pv).await.unwrap();
    let labelled = eventually("the PV's zone labels", Duration::from_secs(60), || async {
        pvs.get(&disk).await.ok().filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("topology.kubernetes.io/zone"))
        })
    })
    .await;
    let labels = labelled.metadata.labels.unwrap();
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-central1-b");
    assert_eq!(labels["topology.kubernetes.io/region"], REGION);
    let _ = pvs.delete(&disk, &DeleteParams::default()).await;
}

fn network_unavailable(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "NetworkUnavailable")
        .map(|c| c.status.clone())
}

async fn kubelet_helper_in_tree_knows_itself_from_the_metadata_server(
    env: &hypercloud_testenv::TestEnv,
) {
    let node = env.unique_name("gce-kubelet");
    let dir = tempfile::tempdir().unwrap();
    let serve = cloud(dir.path());
    let nat = instance(&serve, "us-central1-a", &node, "127.1.240.20");
    // Metadata requests leave from the instance's address: that is who is asking.
    let conf = conf(
        dir.path(),
        &serve,
        "metadata-source-address = 127.1.240.20\n",
    );
    let kubeconfig = env.control_plane().kubeconfig().display().to_string();
    let (code, stdout, stderr) = run(
        BIN,
        &[
            "kubelet-helper",
            "--cloud-provider=gce",
            &format!("--cloud-config={}", conf.display()),
            &format!("--kubeconfig={kubeconfig}"),
            &format!("--hostname-override={node}"),
            "--once",
        ],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let nodes: Api<Node> = Api::all(env.client());
    let n = nodes.get(&node).await.expect("registered");
    assert_eq!(
        provider_id(&n),
        Some(format!("gce://demo/us-central1-a/{node}").as_str())
    );
    assert_eq!(internal_ip(&n).as_deref(), Some("127.1.240.20"));
    assert_eq!(address(&n, "ExternalIP"), Some(nat));
    assert_eq!(
        label(&n, "topology.kubernetes.io/zone"),
        Some("us-central1-a")
    );
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some(REGION));
    assert!(!has_taint(&n, TAINT_UNINITIALIZED));
    let _ = nodes.delete(&node, &DeleteParams::default()).await;

    // apiserver-plugin --ssh-user/--ssh-keyfile: the key reaches the project's ssh-keys, which
    // every instance's metadata server shows.
    let key = dir.path().join("tunnel");
    let public =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHlwZXJjbG91ZC1nY2UtdGVzdC1rZXktMDAwMDA= test";
    std::fs::write(dir.path().join("tunnel.pub"), format!("{public}\n")).unwrap();
    let mut cmd = personality(BIN, "apiserver-plugin");
    cmd.args([
        "--cloud-provider=gce",
        &format!("--cloud-config={}", conf.display()),
        &format!("--kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1",
        &format!("--secure-port={}", free_port()),
        "--ssh-user=kube",
        &format!("--ssh-keyfile={}", key.display()),
    ]);
    let _plugin = Proc::spawn("apiserver-plugin", cmd, dir.path().join("plugin.log"));
    let url = format!(
        "{}/computeMetadata/v1/project/attributes/ssh-keys",
        serve.metadata_url
    );
    let keys = eventually(
        "the SSH key in the instance's metadata",
        Duration::from_secs(60),
        || async {
            let (status, _, body) = http(
                "GET",
                &url,
                &[("Metadata-Flavor", "Google"), ("X-Instance-ID", &node)],
                None,
            );
            (status == 200).then_some(body)
        },
    )
    .await;
    assert_eq!(keys, format!("kube:{public} kube@kube"));
}
