//! The `rackspace` preset against a real local cloud: Keystone v2.0 with an API key (read from
//! the user's RAX-KSKEY credentials), servers by name and by IP with upstream's one address,
//! the region as the zone, Cinder attachments through Nova, no load balancer or routes, and a
//! wrong key refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use hypercloud_cloudprovider::{Chain, CloudConfig, Error, Interface, Layout};
use hypercloud_providers_openstack::rackspace::Rackspace;
use reqwest::Method;
use serde_json::json;
use support::Cloud;

/// The admin's API key, as Rackspace's control panel showed it.
async fn api_key(cloud: &Cloud) -> String {
    let v = cloud
        .ok(
            Method::GET,
            &format!(
                "/identity/v2.0/users/{}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials",
                cloud.user_id
            ),
            None,
        )
        .await;
    v["RAX-KSKEY:apiKeyCredentials"]["apiKey"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn rackspace(cloud: &Cloud, global: &str) -> Result<Rackspace, Error> {
    let text = format!(
        "[Global]\nauth-url = {}/identity/v2.0/\nusername = admin\nregion = RegionOne\n{global}",
        cloud.url
    );
    let cc = CloudConfig {
        origin: "test rackspace.conf".into(),
        bytes: text.into_bytes(),
    };
    Rackspace::from_cloud_config(Some(&cc), Layout::InTree)
}

#[tokio::test]
async fn api_key_sign_in_servers_by_name_and_ip_and_the_region_as_zone() {
    let cloud = Cloud::start().await;
    let key = api_key(&cloud).await;
    let a = cloud.create_server("rax-a", "1", None).await;
    let b = cloud.create_server("rax-b", "1", None).await;
    let rax = rackspace(&cloud, &format!("api-key = {key}\ntenant-name = demo\n")).unwrap();
    rax.initialize(None).await.unwrap();
    assert_eq!(rax.provider_name(), "rackspace");
    let i = rax.instances().unwrap();

    assert_eq!(i.instance_id("rax-a").await.unwrap(), a);
    let addrs = i.node_addresses("rax-a").await.unwrap();
    let types: Vec<&str> = addrs.iter().map(|a| a.type_.as_str()).collect();
    assert_eq!(types, ["InternalIP", "ExternalIP"]);
    assert_eq!(addrs[0].address, addrs[1].address);
    let ip = addrs[0].address.clone();
    let v = cloud
        .ok(Method::GET, &format!("/compute/v2.1/servers/{a}"), None)
        .await;
    assert_eq!(
        v["server"]["addresses"]["private"][0]["addr"],
        ip.as_str(),
        "the first private address, as upstream"
    );
    // A Node named by its IP, as with kubelet --hostname-override=<ip>.
    assert_eq!(i.instance_id(&ip).await.unwrap(), a);
    assert!(
        matches!(i.instance_id("rax-").await, Err(Error::InstanceNotFound)),
        "names are matched whole (^name$), not as a prefix"
    );
    assert!(matches!(
        i.node_addresses("nope").await,
        Err(Error::InstanceNotFound)
    ));

    // The lifecycle controllers' calls.
    let pid = format!("rackspace://{b}");
    assert!(i.instance_exists_by_provider_id(&pid).await.unwrap());
    cloud.server_action(&b, "os-stop").await;
    assert!(i.instance_shutdown_by_provider_id(&pid).await.unwrap());
    assert!(
        matches!(i.instance_id("rax-b").await, Err(Error::InstanceNotFound)),
        "only ACTIVE servers are Nodes' by name, as upstream"
    );
    cloud.delete_server(&b).await;
    assert!(!i.instance_exists_by_provider_id(&pid).await.unwrap());

    let zone = rax.zones().unwrap().get_zone().await.unwrap();
    assert_eq!(
        (zone.failure_domain.as_str(), zone.region.as_str()),
        ("", "RegionOne")
    );
    assert!(rax.load_balancer().is_none() && rax.routes().is_none());
    assert!(
        rax.volume_provisioner().is_none(),
        "upstream's CreateVolume was unimplemented"
    );
    assert!(rax.api_calls() > 0);
}

#[tokio::test]
async fn cinder_volumes_attach_through_nova_and_wrong_keys_are_named() {
    let cloud = Cloud::start().await;
    let server = cloud.create_server("rax-a", "1", None).await;
    let vol = cloud
        .ok(
            Method::POST,
            &format!("/volume/v3/{}/volumes", cloud.project),
            Some(json!({"volume": {"size": 1, "name": "data"}})),
        )
        .await["volume"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The password works too, as upstream's passwordCredentials.
    let rax = rackspace(&cloud, "password = hypercloud\n").unwrap();
    let att = rax.volume_attacher().unwrap();
    assert_eq!(att.plugin_name(), "kubernetes.io/cinder");
    att.attach_disk(&server, &vol).await.unwrap();
    assert!(att.disk_is_attached(&server, &vol).await.unwrap());
    assert!(att
        .get_attachment_disk_path(&server, &vol)
        .await
        .unwrap()
        .starts_with("/dev/vd"));
    att.detach_disk(&server, &vol).await.unwrap();
    assert!(!att.disk_is_attached(&server, &vol).await.unwrap());

    let wrong = rackspace(&cloud, "api-key = 0123456789abcdef0123456789abcdef\n").unwrap();
    let e = wrong.initialize(None).await.unwrap_err();
    let msg = Chain(&e).to_string();
    assert!(
        msg.contains("rejected the credentials") && msg.contains("by API key"),
        "{msg}"
    );
    assert!(msg.contains("api key is invalid"), "{msg}");
    assert!(!msg.contains("0123456789abcdef"), "the key leaked: {msg}");

    let refused = rackspace(&cloud, "api-key = k\nuser-id = u\n").unwrap_err();
    assert!(Chain(&refused)
        .to_string()
        .contains("user-id is not supported"));
}
