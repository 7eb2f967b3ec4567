//! Two vCenters in one `vsphere.conf`: two vcsim processes, on 127.0.0.1 and 127.0.0.2 (two
//! server names, as two vCenters have), each with a node VM of its own, zone tags of its own
//! and the same default inventory otherwise. The provider finds each node in the vCenter that
//! has it and asks that vCenter for its zone, power state and disks; a wrong password for one
//! vCenter stops start-up naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use hypercloud_cloudprovider::{Chain, CloudConfig, Error as CloudError, Interface, VolumeRequest};
use hypercloud_providers_vsphere::VSphere;
use hypercloud_testenv::nodes::node;
use hypercloud_testenv::vcsim::Vcsim;

const HOST: &str = "/DC0/host/DC0_H0/DC0_H0";

fn provider(text: &str) -> VSphere {
    VSphere::from_cloud_config(Some(&CloudConfig {
        origin: "two-vcenters.conf".into(),
        bytes: text.as_bytes().to_vec(),
    }))
    .expect("valid config")
}

/// `[Global]` credentials and datacenter, one `[VirtualCenter]` per simulator, `extra` last.
fn conf(sims: &[&Vcsim], extra: &str) -> String {
    let mut text = "[Global]\nuser = \"user\"\npassword = \"pass\"\ninsecure-flag = \"1\"\ndatacenters = \"DC0\"\n\n".to_owned();
    for sim in sims {
        text.push_str(&sim.ini_section());
    }
    text + "\n[Labels]\nregion = \"k8s-region\"\nzone = \"k8s-zone\"\n" + extra
}

/// vCenter A (127.0.0.1): DC0_H0_VM0 as `node-a`, zone-a/region-1. vCenter B (127.0.0.2): a new
/// VM `node-b` (vcsim derives a VM's UUID from its inventory path, so B's default VMs have
/// A's UUIDs; a VM of another name does not), zone-b/region-2.
fn two_vcenters() -> (Vcsim, Vcsim) {
    let a = Vcsim::start(&[]);
    let b = Vcsim::start_on("127.0.0.2", &[]);
    a.set_guest("/DC0/vm/DC0_H0_VM0", "node-a", "10.20.0.5");
    a.tag_zone(HOST, "zone-a", "/DC0", "region-1");
    b.govc(&[
        "vm.create",
        "-host",
        HOST,
        "-net",
        "VM Network",
        "-on=false",
        "node-b",
    ]);
    b.set_guest("/DC0/vm/node-b", "node-b", "10.30.0.5");
    b.tag_zone(HOST, "zone-b", "/DC0", "region-2");
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_zones_and_disks_come_from_the_vcenter_that_has_the_vm() {
    let (a, b) = two_vcenters();
    let (uuid_a, uuid_b) = (a.vm_uuid("/DC0/vm/DC0_H0_VM0"), b.vm_uuid("/DC0/vm/node-b"));
    assert_ne!(uuid_a, uuid_b);
    let text = conf(
        &[&a, &b],
        "[Workspace]\nserver = \"127.0.0.2\"\ndefault-datastore = \"LocalDS_0\"\n",
    );
    let cloud = provider(&text);
    cloud.initialize(None).await.expect("initialize");
    assert_eq!(cloud.logins(), 2, "one login per vCenter");

    let v2 = cloud.instances_v2().expect("instances v2");
    for (name, uuid, zone, region, ip) in [
        ("node-a", &uuid_a, "zone-a", "region-1", "10.20.0.5"),
        ("node-b", &uuid_b, "zone-b", "region-2", "10.30.0.5"),
    ] {
        let md = v2
            .instance_metadata(&node(name, None))
            .await
            .unwrap_or_else(|e| panic!("metadata of {name}: {}", Chain(&e)));
        assert_eq!(md.provider_id, format!("vsphere://{uuid}"), "{name}");
        assert_eq!(
            (md.zone.as_str(), md.region.as_str()),
            (zone, region),
            "{name}"
        );
        assert!(
            md.node_addresses.iter().any(|a| a.address == ip),
            "{name}: {:?}",
            md.node_addresses
        );
        // By provider ID alone (it does not name the vCenter), through v1 and Zones.
        let pid = format!("vsphere://{uuid}");
        let by_id = cloud
            .zones()
            .expect("zones")
            .get_zone_by_provider_id(&pid)
            .await
            .expect("zone by provider ID");
        assert_eq!(by_id.failure_domain, zone, "{name}");
        let v1 = cloud.instances().expect("instances");
        assert!(v1
            .instance_exists_by_provider_id(&pid)
            .await
            .expect("exists"));
        assert!(!v1
            .instance_shutdown_by_provider_id(&pid)
            .await
            .expect("shutdown"));
    }
    // Powered off in B: B says so.
    b.govc(&["vm.power", "-off", "-force", "/DC0/vm/node-b"]);
    cloud.invalidate_cache().await;
    let pid_b = format!("vsphere://{uuid_b}");
    assert!(cloud
        .instances()
        .expect("instances")
        .instance_shutdown_by_provider_id(&pid_b)
        .await
        .expect("shutdown"));
    b.govc(&["vm.power", "-on", "/DC0/vm/node-b"]);

    // In neither vCenter: not found (not an error), by name and by provider ID.
    assert!(matches!(
        v2.instance_metadata(&node("node-c", None)).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(!cloud
        .instances()
        .expect("instances")
        .instance_exists_by_provider_id("vsphere://00000000-0000-0000-0000-00000000000c")
        .await
        .expect("exists"));

    // Volumes: created on the [Workspace] server vCenter (B), attached to node-b in B.
    let volumes = cloud.volume_provisioner().expect("volume provisioner");
    let attacher = cloud.volume_attacher().expect("volume attacher");
    let created = volumes
        .create_volume(&VolumeRequest {
            name: "pvc-multi".into(),
            size_gib: 1,
            tags: BTreeMap::new(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("create: {}", Chain(&e)));
    assert_eq!(created.id, "[LocalDS_0] kubevols/pvc-multi.vmdk");
    assert!(
        b.govc(&["datastore.ls", "-ds", "LocalDS_0", "kubevols"])
            .contains("pvc-multi.vmdk"),
        "the disk is in vCenter B"
    );
    assert!(!a
        .govc_output(&["datastore.ls", "-ds", "LocalDS_0", "kubevols"])
        .stdout
        .windows(9)
        .any(|w| w == b"pvc-multi"));
    attacher
        .attach_disk(&uuid_b, &created.id)
        .await
        .unwrap_or_else(|e| panic!("attach: {}", Chain(&e)));
    assert!(b
        .govc(&["device.info", "-vm", "/DC0/vm/node-b", "disk-*"])
        .contains("pvc-multi.vmdk"));
    assert!(attacher
        .disk_is_attached(&uuid_b, &created.id)
        .await
        .expect("attached"));
    assert!(!attacher
        .disk_is_attached(&uuid_a, &created.id)
        .await
        .expect("not on node-a"));
    attacher
        .detach_disk(&uuid_b, &created.id)
        .await
        .unwrap_or_else(|e| panic!("detach: {}", Chain(&e)));
    assert!(!attacher
        .disk_is_attached(&uuid_b, &created.id)
        .await
        .expect("detached"));
    volumes
        .delete_volume(&created.id)
        .await
        .unwrap_or_else(|e| panic!("delete: {}", Chain(&e)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_for_one_vcenter_stops_start_up_naming_it() {
    let a = Vcsim::start(&[]);
    let b = Vcsim::start_on("127.0.0.2", &[]);
    let wrong = conf(&[&a, &b], "").replace(
        &b.ini_section(),
        &format!("{}password = \"not-pass\"\n", b.ini_section()),
    );
    let cloud = provider(&wrong);
    let msg = Chain(&cloud.initialize(None).await.expect_err("wrong password")).to_string();
    assert!(
        msg.contains(&format!("127.0.0.2:{}", b.port())) && msg.contains("not valid"),
        "{msg}"
    );
    assert!(!msg.contains("not-pass"), "the password leaked: {msg}");

    // A datacenter only one of them lacks: named with its vCenter.
    let dc = conf(&[&a, &b], "").replace(
        &b.ini_section(),
        &format!("{}datacenters = \"DC9\"\n", b.ini_section()),
    );
    let msg = Chain(&provider(&dc).initialize(None).await.expect_err("no DC9")).to_string();
    assert!(
        msg.contains("\"DC9\"") && msg.contains(&format!("127.0.0.2:{}", b.port())),
        "{msg}"
    );

    // [Workspace] server must be one of them.
    let err = VSphere::from_cloud_config(Some(&CloudConfig {
        origin: "x.conf".into(),
        bytes: conf(&[&a, &b], "[Workspace]\nserver = \"127.0.0.3\"\n").into_bytes(),
    }))
    .expect_err("unknown workspace server");
    let msg = Chain(&err).to_string();
    assert!(
        msg.contains("not one of the configured vCenters (127.0.0.1, 127.0.0.2)"),
        "{msg}"
    );
}
