//! Integration tests of the photon provider against the local cloud's Photon Controller dialect
//! (`/v1`), started in process on free ports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use hypercloud_cloudprovider::{Chain, CloudConfig, Error, Interface, VolumeFilter, VolumeRequest};
use hypercloud_localcloud::{Server, ServerConfig, ServerHandle};
use hypercloud_providers_photon::{Config, Photon};
use hypercloud_testenv::localcloud::Nova;
use serde_json::json;

struct Cloud {
    handle: ServerHandle,
    dir: tempfile::TempDir,
    nova: Nova,
}

impl Cloud {
    async fn start(require_tokens: bool) -> Cloud {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServerConfig::ephemeral(dir.path());
        config.photon_require_tokens = require_tokens;
        let handle = Server::bind(config).await.unwrap();
        let nova = Nova::login(handle.api_url()).await;
        Cloud { handle, dir, nova }
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

    fn provider(&self, global: &str) -> Photon {
        let text = format!("[Global]\ntarget = {}\n{global}", self.handle.api_url());
        Photon::new(config(&text)).unwrap()
    }

    /// The provider of the local cloud's project `demo`, found by name and then by ID.
    async fn demo(&self) -> Photon {
        let named = self.provider("tenant = Default\nproject = demo\n");
        let id = named.project_id().await.unwrap().to_owned();
        self.provider(&format!("project = {id}\n"))
    }
}

fn config(text: &str) -> Config {
    let cc = CloudConfig {
        origin: "test photon.conf".into(),
        bytes: text.as_bytes().to_vec(),
    };
    Config::from_cloud_config(Some(&cc)).unwrap()
}

#[tokio::test]
async fn the_project_s_vms_are_instances_by_name_ip_and_provider_id() {
    let c = Cloud::start(false).await;
    let a = c.nova.server("k8s-a", json!({})).await;
    let b = c.nova.server("k8s-b", json!({})).await;
    let ip_a = c.fixed_ip(&a).await;
    let p = c.demo().await;
    assert_eq!(p.provider_name(), "photon");
    let instances = p.instances().unwrap();

    assert_eq!(instances.instance_id("k8s-a").await.unwrap(), a);
    let addrs = instances.node_addresses("k8s-a").await.unwrap();
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    assert_eq!(
        (addrs[0].type_.as_str(), addrs[0].address.as_str()),
        ("InternalIP", ip_a.as_str())
    );
    let by_id = instances
        .node_addresses_by_provider_id(&format!("photon://{b}"))
        .await
        .unwrap();
    assert_eq!(by_id[0].address, c.fixed_ip(&b).await);
    assert!(matches!(
        instances.node_addresses("k8s-c").await,
        Err(Error::InstanceNotFound)
    ));
    assert_eq!(instances.instance_type("k8s-a").await.unwrap(), "");

    // overrideIP: the Node's name is its VM's IP.
    let by_ip = c.provider(&format!(
        "project = {}\noverrideIP = true\n",
        p.project_id().await.unwrap()
    ));
    assert_eq!(
        by_ip.instances().unwrap().instance_id(&ip_a).await.unwrap(),
        a
    );
    assert!(matches!(
        by_ip.instances().unwrap().instance_id("k8s-a").await,
        Err(Error::InstanceNotFound)
    ));

    // vmID answers for the kubelet's own Node, as upstream.
    let local = c.provider(&format!(
        "project = {}\nvmID = {b}\n",
        p.project_id().await.unwrap()
    ));
    let li = local.instances().unwrap();
    assert_eq!(li.current_node_name("me").await.unwrap(), "me");
    assert_eq!(li.instance_id("me").await.unwrap(), b);

    // The lifecycle controllers' calls: a stopped VM is shut down, a deleted one gone.
    let pid = format!("photon://{a}");
    assert!(instances
        .instance_exists_by_provider_id(&pid)
        .await
        .unwrap());
    assert!(!instances
        .instance_shutdown_by_provider_id(&pid)
        .await
        .unwrap());
    c.nova
        .call(
            reqwest::Method::POST,
            &format!("/servers/{a}/action"),
            Some(json!({"os-stop": null})),
        )
        .await;
    assert!(instances
        .instance_shutdown_by_provider_id(&pid)
        .await
        .unwrap());
    assert!(
        instances.node_addresses("k8s-a").await.unwrap().is_empty(),
        "a stopped VM's guest reports no address"
    );
    c.nova
        .call(reqwest::Method::DELETE, &format!("/servers/{b}"), None)
        .await;
    assert!(!instances
        .instance_exists_by_provider_id(&format!("photon://{b}"))
        .await
        .unwrap());
    let other = Chain(
        &instances
            .instance_exists_by_provider_id("ovirt:///x")
            .await
            .unwrap_err(),
    )
    .to_string();
    assert!(
        other.contains("is not a photon://<vm id> provider ID"),
        "{other}"
    );

    // Photon has no zones; no load balancer, routes or clusters.
    assert_eq!(
        p.zones().unwrap().get_zone().await.unwrap(),
        Default::default()
    );
    assert!(p.load_balancer().is_none() && p.routes().is_none() && p.clusters().is_none());
    let wrong = c.provider("tenant = Default\nproject = nope\n");
    let e = Chain(&wrong.project_id().await.unwrap_err()).to_string();
    assert!(e.contains("Default/nope"), "{e}");
}

#[tokio::test]
async fn persistent_disks_through_tasks() {
    let c = Cloud::start(false).await;
    let a = c.nova.server("k8s-a", json!({})).await;
    let b = c.nova.server("k8s-b", json!({})).await;
    let p = c.demo().await;
    let prov = p.volume_provisioner().unwrap();
    let att = p.volume_attacher().unwrap();
    assert_eq!(prov.plugin_name(), "kubernetes.io/photon-pd");

    let request = VolumeRequest {
        name: "kubernetes-dynamic-pvc-1".into(),
        size_gib: 3,
        volume_type: "pd-gold".into(),
        tags: [(
            "kubernetes.io/created-for/pvc/name".to_owned(),
            "data".to_owned(),
        )]
        .into(),
        ..Default::default()
    };
    let made = prov.create_volume(&request).await.unwrap();
    assert_eq!(made.size_gib, 3);
    let found = prov
        .find_volumes(VolumeFilter::Name("kubernetes-dynamic-pvc-1"))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].id.as_str(), found[0].size_gib),
        (made.id.as_str(), 3)
    );
    let spec = prov.volume_source(&made.id, None);
    assert_eq!(att.pv_volume_id(&spec).as_deref(), Some(made.id.as_str()));

    att.attach_disk(&a, &made.id).await.unwrap();
    att.attach_disk(&a, &made.id).await.unwrap(); // already there: nothing to do
    assert!(att.disk_is_attached(&a, &made.id).await.unwrap());
    let elsewhere = Chain(&att.attach_disk(&b, &made.id).await.unwrap_err()).to_string();
    assert!(
        elsewhere.contains(&format!("is attached to VM {a}")),
        "{elsewhere}"
    );
    let map = att
        .disks_are_attached(&a, &[made.id.clone(), "gone".into()])
        .await
        .unwrap();
    assert!(map[&made.id]);
    assert!(!map["gone"]);
    let path = att.get_attachment_disk_path(&a, &made.id).await.unwrap();
    assert_eq!(
        path,
        format!("/dev/disk/by-id/wwn-0x{}", made.id.replace('-', ""))
    );
    let busy = Chain(&prov.delete_volume(&made.id).await.unwrap_err()).to_string();
    assert!(
        busy.contains("StateError") && busy.contains("attached"),
        "{busy}"
    );

    att.detach_disk(&a, &made.id).await.unwrap();
    att.detach_disk(&a, &made.id).await.unwrap(); // not attached: nothing to do
    assert!(!att.disk_is_attached(&a, &made.id).await.unwrap());
    assert!(att.get_attachment_disk_path(&a, &made.id).await.is_err());
    assert!(matches!(
        prov.expand_volume(&made.id, 10).await,
        Err(Error::NotImplemented)
    ));
    prov.delete_volume(&made.id).await.unwrap();
    prov.delete_volume(&made.id).await.unwrap(); // gone already
    assert!(prov
        .find_volumes(VolumeFilter::All)
        .await
        .unwrap()
        .is_empty());

    // The cloud refuses a disk without a flavor (a class without `flavor`), and says so.
    let e = Chain(
        &prov
            .create_volume(&VolumeRequest {
                name: "no-flavor".into(),
                size_gib: 1,
                ..Default::default()
            })
            .await
            .unwrap_err(),
    )
    .to_string();
    assert!(e.contains("InvalidEntity") && e.contains("flavor"), "{e}");
}

#[tokio::test]
async fn with_authentication_the_provider_logs_in_to_lightwave() {
    let c = Cloud::start(true).await;
    c.nova.server("k8s-a", json!({})).await;

    // Without authentication, the 401 says which key to set.
    let anonymous = c.provider("tenant = Default\nproject = demo\n");
    let e = Chain(&anonymous.project_id().await.unwrap_err()).to_string();
    assert!(e.contains("set [Global] authentication = true"), "{e}");

    let info = c.dir.path().join("pc_login_info");
    std::fs::write(&info, "admin@photon.local\nhypercloud\n").unwrap();
    let global = format!(
        "tenant = Default\nproject = demo\nauthentication = true\n[Hypercloud]\nlogin-info-file = {}\n",
        info.display()
    );
    let p = c.provider(&global);
    assert!(p.instances().unwrap().instance_id("k8s-a").await.is_ok());

    std::fs::write(&info, "admin@photon.local\nwrong\n").unwrap();
    let refused = c.provider(&global);
    let e = Chain(&refused.project_id().await.unwrap_err()).to_string();
    assert!(
        e.contains("password grant") && e.contains("admin@photon.local"),
        "{e}"
    );
    assert!(!e.contains("wrong"), "the password is not shown: {e}");

    std::fs::remove_file(&info).unwrap();
    let text = format!("[Global]\ntarget = {}\n{global}", c.handle.api_url());
    let e = Chain(&Photon::new(config(&text)).unwrap_err()).to_string();
    assert!(e.contains("found no username/password"), "{e}");
}
