//! The vsphere provider against VMware's own simulator (vcsim), with govc changing the
//! inventory and cross-checking what the provider reports.

use std::collections::BTreeMap;

use hypercloud_cloudprovider::{Chain, CloudConfig, Error as CloudError, Interface};
use hypercloud_providers_vsphere::VSphere;
use hypercloud_testenv::nodes::node;
use hypercloud_testenv::vcsim::Vcsim;
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, PersistentVolume, PersistentVolumeSpec, VsphereVirtualDiskVolumeSource,
};

const VM: &str = "/DC0/vm/DC0_H0_VM0";
const HOST: &str = "/DC0/host/DC0_H0/DC0_H0";

fn provider(text: &str) -> VSphere {
    VSphere::from_cloud_config(Some(&CloudConfig {
        origin: "test.conf".into(),
        bytes: text.as_bytes().to_vec(),
    }))
    .expect("valid config")
}

async fn started(text: &str) -> VSphere {
    let p = provider(text);
    p.initialize(None).await.expect("initialize");
    p
}

fn addr(t: &str, a: &str) -> NodeAddress {
    NodeAddress {
        type_: t.into(),
        address: a.into(),
    }
}

/// vcsim with DC0_H0_VM0 as `node-a` (10.20.0.5), zone tag on its host and region tag on
/// the datacenter.
fn inventory() -> (Vcsim, String) {
    let sim = Vcsim::start(&[]);
    sim.set_guest(VM, "node-a", "10.20.0.5");
    sim.tag_zone(HOST, "zone-a", "/DC0", "region-1");
    let uuid = sim.vm_uuid(VM);
    (sim, uuid)
}

#[tokio::test]
async fn both_config_formats_initialise_nodes_from_vcsim() {
    let (sim, uuid) = inventory();
    for conf in [sim.ini_conf(""), sim.yaml_conf("")] {
        let cloud = started(&conf).await;
        let v2 = cloud.instances_v2().expect("instances v2");
        for name in ["node-a", "DC0_H0_VM0", "10.20.0.5"] {
            let md = v2
                .instance_metadata(&node(name, None))
                .await
                .unwrap_or_else(|e| panic!("metadata of {name}: {e}"));
            assert_eq!(md.provider_id, format!("vsphere://{uuid}"), "{name}");
            assert_eq!(
                md.node_addresses,
                vec![
                    addr("Hostname", "node-a"),
                    addr("InternalIP", "10.20.0.5"),
                    addr("ExternalIP", "10.20.0.5")
                ],
                "{name}"
            );
            // vcsim's VMs: 1 vCPU, 32 MiB, guest otherGuest.
            assert_eq!(md.instance_type, "vsphere-vm.cpu-1.mem-0gb.os-other");
            assert_eq!(
                (md.zone.as_str(), md.region.as_str()),
                ("zone-a", "region-1")
            );
        }
        // By provider ID, through Instances (v1) and Zones.
        let pid = format!("vsphere://{uuid}");
        let v1 = cloud.instances().expect("instances");
        assert!(v1
            .instance_exists_by_provider_id(&pid)
            .await
            .expect("exists"));
        assert!(!v1
            .instance_shutdown_by_provider_id(&pid)
            .await
            .expect("shutdown"));
        assert_eq!(v1.instance_id("node-a").await.expect("id"), uuid);
        let z = cloud
            .zones()
            .expect("zones")
            .get_zone_by_provider_id(&pid)
            .await
            .expect("zone");
        assert_eq!(z.failure_domain, "zone-a");
        // A VM on a host of the untagged cluster has no zone: an error naming the category.
        let err = v2
            .instance_metadata(&node("DC0_C0_RP0_VM0", None))
            .await
            .expect_err("no zone tag");
        let err = Chain(&err);
        assert!(err.to_string().contains("k8s-zone"), "{err}");
        assert!(matches!(
            v2.instance_metadata(&node("no-such-vm", None)).await,
            Err(CloudError::InstanceNotFound)
        ));
        assert!(!v2
            .instance_exists(&node("no-such-vm", None))
            .await
            .expect("exists"));
        cloud.logout().await.expect("logout");
    }
}

#[tokio::test]
async fn power_off_and_destroy_via_govc() {
    let (sim, uuid) = inventory();
    // No cache: every look-up asks vCenter, through SearchIndex.
    let cloud = started(&sim.ini_conf("[Hypercloud]\ncache-ttl = 0\n")).await;
    let pid = format!("vsphere://{uuid}");
    let n = node("node-a", Some(&pid));
    let v2 = cloud.instances_v2().expect("v2");
    assert!(!v2.instance_shutdown(&n).await.expect("running"));
    sim.govc(&["vm.power", "-off", "-force", VM]);
    assert!(v2.instance_shutdown(&n).await.expect("off"));
    assert!(v2.instance_exists(&n).await.expect("still exists"));
    sim.govc(&["vm.destroy", VM]);
    assert!(!v2.instance_exists(&n).await.expect("gone"));
    assert!(!cloud
        .instances()
        .expect("v1")
        .instance_exists_by_provider_id(&pid)
        .await
        .expect("gone"));

    // The batched provider sees the same after its listing expires.
    let batched = started(&sim.ini_conf("[Hypercloud]\ncache-ttl = 100ms\n")).await;
    let other = sim.vm_uuid("/DC0/vm/DC0_H0_VM1");
    let other_node = node("x", Some(&format!("vsphere://{other}")));
    let v2 = batched.instances_v2().expect("v2");
    assert!(v2.instance_exists(&other_node).await.expect("exists"));
    sim.govc(&["vm.destroy", "/DC0/vm/DC0_H0_VM1"]);
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert!(!v2.instance_exists(&other_node).await.expect("gone"));
}

#[tokio::test]
async fn expired_session_logs_in_again() {
    let (sim, uuid) = inventory();
    let cloud = started(&sim.ini_conf("[Hypercloud]\ncache-ttl = 0\n")).await;
    let n = node("node-a", Some(&format!("vsphere://{uuid}")));
    let v2 = cloud.instances_v2().expect("v2");
    assert!(v2.instance_exists(&n).await.expect("exists"));
    assert_eq!(cloud.logins(), 1);
    // An administrator (or vCenter's idle timeout) ends the provider's session.
    assert!(sim.end_sessions_of("hypercloud-vsphere") >= 1);
    assert!(v2.instance_exists(&n).await.expect("exists after re-login"));
    assert_eq!(cloud.logins(), 2, "exactly one new login");
    // Tags (vAPI) survive a lost vAPI session too.
    let md = v2.instance_metadata(&n).await.expect("metadata");
    assert_eq!(md.zone, "zone-a");
}

#[tokio::test]
async fn bad_credentials_and_unknown_datacenter_are_clear_errors() {
    let sim = Vcsim::start(&[]);
    let bad = sim
        .ini_conf("")
        .replace("password = \"pass\"", "password = \"wrong\"");
    let err = provider(&bad)
        .initialize(None)
        .await
        .expect_err("bad password");
    let msg = Chain(&err).to_string();
    assert!(
        msg.contains("user name or password is not valid") && msg.contains("\"user\""),
        "{msg}"
    );
    let unknown = sim
        .ini_conf("")
        .replace("datacenters = \"DC0\"", "datacenters = \"DC0,DC9\"");
    let err = provider(&unknown).initialize(None).await.expect_err("DC9");
    let msg = Chain(&err).to_string();
    assert!(
        msg.contains("\"DC9\"") && msg.contains("it has: DC0"),
        "{msg}"
    );
}

#[tokio::test]
async fn one_listing_serves_many_nodes() {
    let sim = Vcsim::start(&["-vm", "10"]);
    let paths: Vec<String> = sim
        .govc(&["find", "/DC0/vm", "-type", "m"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(paths.len() >= 20, "{paths:?}");
    let nodes: Vec<Node> = paths
        .iter()
        .map(|p| {
            let name = p.rsplit('/').next().expect("name");
            node(name, None)
        })
        .collect();
    let conf = sim.ini_conf("").replace(
        "[Labels]\nregion = \"k8s-region\"\nzone = \"k8s-zone\"\n",
        "",
    );
    let batched = started(&conf).await;
    let per_node = started(&format!("{conf}[Hypercloud]\ncache-ttl = 0\n")).await;
    let mut calls = BTreeMap::new();
    for (mode, cloud) in [("batched", &batched), ("per-node", &per_node)] {
        let before = cloud.api_calls();
        // vcsim's VMs report NICs without IPs, so no addresses (an error, as upstream):
        // existence and power state are what the lifecycle controller asks anyway.
        for n in &nodes {
            let v2 = cloud.instances_v2().expect("v2");
            assert!(v2.instance_exists(n).await.expect("exists"));
            assert!(!v2.instance_shutdown(n).await.expect("running"));
        }
        calls.insert(mode, cloud.api_calls() - before);
    }
    eprintln!("vCenter requests for {} nodes: {calls:?}", nodes.len());
    // One container view + one RetrievePropertiesEx, against several calls per node.
    assert!(calls["batched"] <= 3, "{calls:?}");
    assert!(calls["per-node"] >= 2 * nodes.len() as u64, "{calls:?}");
}

#[tokio::test]
async fn kubelet_finds_its_own_vm_by_smbios_uuid() {
    let (sim, uuid) = inventory();
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("product_uuid");
    // As Linux shows it: upper case.
    std::fs::write(&file, format!("{}\n", uuid.to_uppercase())).expect("write");
    let cloud = started(&sim.ini_conf(&format!(
        "[Hypercloud]\nproduct-uuid-file = {}\n",
        file.display()
    )))
    .await;
    let v1 = cloud.instances().expect("v1");
    // The kubelet's host name need not match anything in vCenter.
    let name = v1.current_node_name("worker-7").await.expect("name");
    assert_eq!(name, "worker-7");
    assert_eq!(v1.instance_id("worker-7").await.expect("id"), uuid);
    assert_eq!(
        v1.node_addresses("worker-7").await.expect("addresses")[1],
        addr("InternalIP", "10.20.0.5")
    );
    assert_eq!(
        cloud
            .zones()
            .expect("zones")
            .get_zone()
            .await
            .expect("zone")
            .region,
        "region-1"
    );
    // A file that is not a UUID is named.
    std::fs::write(&file, "not-a-uuid").expect("write");
    let err = v1.current_node_name("w").await.expect_err("bad uuid");
    let err = Chain(&err);
    assert!(err.to_string().contains("product_uuid"), "{err}");
}

#[tokio::test]
async fn vsphere_volumes_get_their_datastore_zone() {
    let (sim, _) = inventory();
    let cloud = started(&sim.ini_conf("")).await;
    let pv = |path: &str| PersistentVolume {
        spec: Some(PersistentVolumeSpec {
            vsphere_volume: Some(VsphereVirtualDiskVolumeSource {
                volume_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let labeler = cloud.pv_labeler().expect("pv labeler");
    // vcsim's LocalDS_0 is mounted by DC0_H0 (as `Datastore.host` says): its zone and region
    // come from that host's ancestry.
    let labels = labeler
        .get_labels_for_volume(&pv("[LocalDS_0] kubevols/a.vmdk"))
        .await
        .expect("labels from the mounting host");
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("zone-a")
    );
    // A tag on the datastore itself wins.
    sim.govc(&["tags.create", "-c", "k8s-zone", "zone-ds"]);
    sim.govc(&[
        "tags.attach",
        "-c",
        "k8s-zone",
        "zone-ds",
        "/DC0/datastore/LocalDS_0",
    ]);
    sim.govc(&[
        "tags.attach",
        "-c",
        "k8s-region",
        "region-1",
        "/DC0/datastore/LocalDS_0",
    ]);
    cloud.invalidate_cache().await;
    let labels = labeler
        .get_labels_for_volume(&pv("[LocalDS_0] kubevols/a.vmdk"))
        .await
        .expect("labels");
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("zone-ds")
    );
    assert_eq!(
        labels
            .get("topology.kubernetes.io/region")
            .map(String::as_str),
        Some("region-1")
    );
    assert!(matches!(
        labeler
            .get_labels_for_volume(&pv("[NoSuchDS] a.vmdk"))
            .await,
        Err(CloudError::DiskNotFound)
    ));
    assert!(labeler
        .get_labels_for_volume(&PersistentVolume::default())
        .await
        .expect("not ours")
        .is_empty());
}

/// `thumbprint` (govmomi's `SetThumbprint`): vcsim's self-signed certificate is trusted with
/// `insecure-flag = 0` when its fingerprint is pinned (as `govc about.cert -thumbprint` prints
/// it), refused without it, and a wrong one is an error naming the key and both
/// fingerprints.
#[tokio::test]
async fn a_pinned_thumbprint_is_trusted_and_no_other() {
    let sim = Vcsim::start(&[]);
    // `HOST THUMBPRINT` (the JSON form has a serial number too big for serde_json).
    let line = sim.govc(&["about.cert", "-k", "-thumbprint"]);
    let thumb = line
        .split_whitespace()
        .last()
        .expect("govc about.cert -thumbprint prints HOST THUMBPRINT")
        .to_owned();
    // govc 0.46 prints the SHA-256 fingerprint (older ones SHA-1; both are accepted).
    assert_eq!(thumb.len(), 95, "a SHA-256 thumbprint: {line}");
    let secure = |extra: &str| {
        sim.ini_conf("").replace(
            "insecure-flag = \"1\"",
            &format!("insecure-flag = \"0\"{extra}"),
        )
    };
    started(&secure(&format!("\nthumbprint = \"{thumb}\""))).await;
    // Lower case and without colons are the same fingerprint.
    let bare = thumb.replace(':', "").to_lowercase();
    started(&secure(&format!("\nthumbprint = \"{bare}\""))).await;

    let err = provider(&secure(""))
        .initialize(None)
        .await
        .expect_err("self-signed without a thumbprint");
    let msg = Chain(&err).to_string();
    assert!(msg.to_lowercase().contains("certificate"), "{msg}");

    let wrong = ["00", "11", "22", "33"].repeat(8).join(":");
    let err = provider(&secure(&format!("\nthumbprint = \"{wrong}\"")))
        .initialize(None)
        .await
        .expect_err("another thumbprint");
    let msg = Chain(&err).to_string();
    assert!(
        msg.contains("[VirtualCenter] thumbprint") && msg.contains(&wrong) && msg.contains(&thumb),
        "{msg}"
    );
}
