//! Integration tests of the mesos provider against the local cloud's Mesos dialect (its
//! `/state`), started in process on free ports: every duty the legacy provider had
//! (Instances by agent hostname, Clusters) and what the Node controllers ask of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use hypercloud_cloudprovider::{CloudConfig, Error, Interface};
use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use hypercloud_providers_mesos::Mesos;
use hypercloud_testenv::localcloud::Nova;
use serde_json::{json, Value};

struct Cloud {
    handle: ServerHandle,
    _dir: tempfile::TempDir,
    nova: Nova,
}

impl Cloud {
    async fn start(cluster: Option<&str>) -> Cloud {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServerConfig::ephemeral(dir.path());
        config.mesos_cluster = cluster.map(str::to_owned);
        let handle = Server::bind(config).await.unwrap();
        let nova = Nova::login(handle.api_url()).await;
        Cloud {
            handle,
            _dir: dir,
            nova,
        }
    }

    /// A server (an agent) with `metadata`: its ID.
    async fn server(&self, name: &str, metadata: Value) -> String {
        self.nova.server(name, metadata).await
    }

    /// The master's `host:port`.
    fn master(&self) -> String {
        self.handle
            .api_url()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned()
    }

    fn provider(&self, extra: &str) -> Mesos {
        let text = format!("[mesos-cloud]\nmesos-master = {}\n{extra}", self.master());
        let cc = CloudConfig {
            origin: "test mesos.conf".into(),
            bytes: text.into_bytes(),
        };
        Mesos::new(hypercloud_providers_mesos::Config::from_cloud_config(Some(&cc)).unwrap())
            .unwrap()
    }
}

#[tokio::test]
async fn agents_are_instances_by_hostname_and_follow_the_servers() {
    let cloud = Cloud::start(None).await;
    let a = cloud.server("agent-a", json!({})).await;
    let b = cloud
        .server("agent-b", json!({"mesos-hostname": "localhost"}))
        .await;
    let mesos = cloud.provider("state-cache-ttl = 0s\n");
    assert!(mesos.instances_v2().is_none() && mesos.load_balancer().is_none());
    assert!(mesos.zones().is_none() && mesos.routes().is_none());
    let instances = mesos.instances().expect("instances");
    let state = mesos.client().state().await.unwrap();
    let node_a = state
        .agents
        .values()
        .find(|x| x.id.starts_with(&a))
        .expect("agent of server a")
        .hostname
        .clone();
    assert!(node_a.parse::<std::net::Ipv4Addr>().is_ok(), "{node_a}");

    // What the kubelet-helper asks to register a Node, and the controllers after it.
    assert_eq!(instances.current_node_name(&node_a).await.unwrap(), node_a);
    let id_a = instances.instance_id(&node_a).await.unwrap();
    assert!(id_a.starts_with(&a) && id_a.contains("-S"), "{id_a}");
    let addresses = instances.node_addresses(&node_a).await.unwrap();
    assert_eq!(addresses[0].type_, "InternalIP");
    assert_eq!(addresses[0].address, node_a);
    let id_b = instances.instance_id("localhost").await.unwrap();
    assert!(id_b.starts_with(&b), "{id_b}");
    let by_id = instances
        .node_addresses_by_provider_id(&format!("mesos://{id_b}"))
        .await
        .unwrap();
    assert!(by_id[0]
        .address
        .parse::<std::net::IpAddr>()
        .unwrap()
        .is_loopback());
    assert_eq!(instances.instance_type(&node_a).await.unwrap(), "");
    let pid_a = format!("mesos://{id_a}");
    assert!(instances
        .instance_exists_by_provider_id(&pid_a)
        .await
        .unwrap());
    assert!(!instances
        .instance_shutdown_by_provider_id(&pid_a)
        .await
        .unwrap());

    // A stopped server is a disconnected agent: shut down, still there.
    cloud
        .nova
        .call(
            reqwest::Method::POST,
            &format!("/servers/{a}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert!(instances
        .instance_shutdown_by_provider_id(&pid_a)
        .await
        .unwrap());
    assert!(instances
        .instance_exists_by_provider_id(&pid_a)
        .await
        .unwrap());

    // A deleted one is gone: "does not exist", and not found by name.
    cloud
        .nova
        .call(reqwest::Method::DELETE, &format!("/servers/{a}"), None)
        .await;
    assert!(!instances
        .instance_exists_by_provider_id(&pid_a)
        .await
        .unwrap());
    assert!(matches!(
        instances.instance_id(&node_a).await,
        Err(Error::InstanceNotFound)
    ));
    // Another cloud's provider ID is an error, never "gone".
    let e = instances
        .instance_exists_by_provider_id("openstack:///x")
        .await
        .unwrap_err();
    let e = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(
        e.contains("parse provider ID") && e.contains("openstack:///x"),
        "{e}"
    );
}

#[tokio::test]
async fn clusters_name_this_cluster_and_its_leading_master() {
    let named = Cloud::start(Some("prod-east")).await;
    let mesos = named.provider("");
    let clusters = mesos.clusters().expect("clusters");
    assert_eq!(clusters.list_clusters().await.unwrap(), ["prod-east"]);
    assert_eq!(clusters.master("prod-east").await.unwrap(), "127.0.0.1");
    let e = clusters.master("other").await.unwrap_err();
    let e = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(e.contains("\"other\" does not exist"), "{e}");

    let unnamed = Cloud::start(None).await;
    let mesos = unnamed.provider("");
    let clusters = mesos.clusters().unwrap();
    assert_eq!(clusters.list_clusters().await.unwrap(), ["mesos"]);
    assert_eq!(clusters.master("mesos").await.unwrap(), "127.0.0.1");
}

#[tokio::test]
async fn the_state_is_cached_for_its_ttl() {
    let cloud = Cloud::start(None).await;
    cloud
        .server("early", json!({"mesos-hostname": "early.example"}))
        .await;
    let cached = cloud.provider("state-cache-ttl = 1h\n");
    let fresh = cloud.provider("state-cache-ttl = 0s\n");
    let instances = cached.instances().unwrap();
    assert!(instances.instance_id("early.example").await.is_ok());
    cloud
        .server("late", json!({"mesos-hostname": "late.example"}))
        .await;
    assert!(
        matches!(
            instances.instance_id("late.example").await,
            Err(Error::InstanceNotFound)
        ),
        "the state read an hour ago is still used"
    );
    assert!(fresh
        .instances()
        .unwrap()
        .instance_id("late.example")
        .await
        .is_ok());
}

#[tokio::test]
async fn an_unreachable_master_is_an_error_naming_it() {
    let cloud = Cloud::start(None).await;
    let master = cloud.master();
    cloud.handle.shutdown().await.unwrap();
    let cc = CloudConfig {
        origin: "test".into(),
        bytes: format!("[mesos-cloud]\nmesos-master = {master}\nhttp-client-timeout = 2s\n")
            .into_bytes(),
    };
    let mesos =
        Mesos::new(hypercloud_providers_mesos::Config::from_cloud_config(Some(&cc)).unwrap())
            .unwrap();
    let e = mesos.clusters().unwrap().list_clusters().await.unwrap_err();
    let text = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(
        text.contains("GET /state") && text.contains(&master),
        "{text}"
    );
}
