//! Integration tests of the ovirt provider against the local cloud's oVirt dialect (the v3 API
//! the legacy provider read), started in process on free ports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use hypercloud_cloudprovider::{Chain, CloudConfig, Error, Interface};
use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use hypercloud_providers_ovirt::{Config, Ovirt};
use hypercloud_testenv::localcloud::Nova;
use serde_json::json;

struct Cloud {
    handle: ServerHandle,
    _dir: tempfile::TempDir,
    nova: Nova,
}

impl Cloud {
    async fn start() -> Cloud {
        let dir = tempfile::tempdir().unwrap();
        let handle = Server::bind(ServerConfig::ephemeral(dir.path()))
            .await
            .unwrap();
        let nova = Nova::login(handle.api_url()).await;
        Cloud {
            handle,
            _dir: dir,
            nova,
        }
    }

    /// A VM (a server) whose guest reports `fqdn`: its ID.
    async fn vm(&self, name: &str, fqdn: &str) -> String {
        self.nova.server(name, json!({"ovirt-fqdn": fqdn})).await
    }

    async fn fixed_ip(&self, id: &str) -> String {
        let v = self
            .nova
            .call(reqwest::Method::GET, &format!("/servers/{id}/ips"), None)
            .await;
        let nets = v["addresses"].as_object().unwrap();
        nets.values().next().unwrap()[0]["addr"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn provider(&self, password: &str, search: &str) -> Ovirt {
        let text = format!(
            "[connection]\nuri = {}/api\nusername = admin@internal\npassword = {password}\n[filters]\nvms = {search}\n",
            self.handle.api_url()
        );
        let cc = CloudConfig {
            origin: "test ovirt.conf".into(),
            bytes: text.into_bytes(),
        };
        Ovirt::new(Config::from_cloud_config(Some(&cc)).unwrap()).unwrap()
    }
}

#[tokio::test]
async fn the_searched_vms_are_instances_named_by_their_fqdn() {
    let cloud = Cloud::start().await;
    let a = cloud.vm("k8s-a", "a.cluster.example").await;
    let b = cloud.vm("k8s-b", "b.cluster.example").await;
    cloud.vm("db-1", "db.example").await;
    let ovirt = cloud.provider("hypercloud", "name=k8s-*");
    assert!(ovirt.zones().is_none() && ovirt.load_balancer().is_none());
    let instances = ovirt.instances().expect("instances");

    assert_eq!(
        instances.instance_id("a.cluster.example").await.unwrap(),
        format!("/{a}")
    );
    let ip = cloud.fixed_ip(&a).await;
    let addresses = instances.node_addresses("a.cluster.example").await.unwrap();
    let pairs: Vec<(&str, &str)> = addresses
        .iter()
        .map(|x| (x.type_.as_str(), x.address.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [("InternalIP", ip.as_str()), ("ExternalIP", ip.as_str())]
    );
    assert!(
        matches!(
            instances.instance_id("db.example").await,
            Err(Error::InstanceNotFound)
        ),
        "the search leaves db-1 out"
    );
    assert_eq!(
        instances.instance_type("a.cluster.example").await.unwrap(),
        ""
    );

    // A VM powered off: not a Node's VM by name (upstream's rule), shut down by provider ID.
    let pid_b = format!("ovirt:///{b}");
    assert!(!instances
        .instance_shutdown_by_provider_id(&pid_b)
        .await
        .unwrap());
    cloud
        .nova
        .call(
            reqwest::Method::POST,
            &format!("/servers/{b}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert!(matches!(
        instances.instance_id("b.cluster.example").await,
        Err(Error::InstanceNotFound)
    ));
    assert!(instances
        .instance_exists_by_provider_id(&pid_b)
        .await
        .unwrap());
    assert!(instances
        .instance_shutdown_by_provider_id(&pid_b)
        .await
        .unwrap());
    // Deleted: gone.
    cloud
        .nova
        .call(reqwest::Method::DELETE, &format!("/servers/{b}"), None)
        .await;
    assert!(!instances
        .instance_exists_by_provider_id(&pid_b)
        .await
        .unwrap());
    let e = instances
        .instance_exists_by_provider_id("openstack:///x")
        .await
        .unwrap_err();
    assert!(Chain(&e).to_string().contains("parse provider ID"), "{e}");
}

#[tokio::test]
async fn a_wrong_password_and_a_bad_search_are_errors_naming_them() {
    let cloud = Cloud::start().await;
    cloud.vm("k8s-a", "a.example").await;
    let e = cloud.provider("Wr0ng-pass", "").vms().await.unwrap_err();
    let text = Chain(&e).to_string();
    assert!(
        text.contains("HTTP 401")
            && text.contains("admin@internal")
            && !text.contains("Wr0ng-pass"),
        "{text}"
    );
    let e = cloud
        .provider("hypercloud", "cluster=prod")
        .vms()
        .await
        .unwrap_err();
    let text = Chain(&e).to_string();
    assert!(
        text.contains("HTTP 400") && text.contains("cluster"),
        "{text}"
    );
}
