//! The `kubernetes.io/azure-disk` volume capability against the local cloud's Azure dialect:
//! managed disks created (SKU, size, zone, tags), labelled, attached to VMs by the lowest
//! free LUN (by VM name or resource ID), refused to a second VM, past the VM size's data
//! disks, deletion and growth while attached, detached, grown and deleted; each step checked
//! from the cloud side through [`Arm`]. Then the requests one create-attach-detach-delete cycle
//! costs, and an attach that completes while half of the calls are throttled.

use std::collections::BTreeMap;

use hypercloud_cloudprovider::volume::round_up_to_gib;
use hypercloud_cloudprovider::{
    Chain, ClassParameters, Error as CloudError, Interface, VolumeFilter, VolumeRequest,
};
use hypercloud_localcloud::faults::{Faults, PerService, Rate};
use hypercloud_localcloud::Service;
use hypercloud_providers_azure::models::{Disk, VirtualMachine, VirtualNetwork};
use hypercloud_providers_azure::{Arm, Azure};
use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::json;

use crate::support::{Cloud, LOCATION};

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const RETRIES: &str = r#", "cloudProviderBackoff": true, "cloudProviderBackoffRetries": 12,
    "cloudProviderBackoffDuration": 1, "cloudProviderBackoffExponent": 1"#;

fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// What the PV controller asks for a claim of the class.
fn request(name: &str, size_gib: u64, zone: &str, class: &ClassParameters) -> VolumeRequest {
    VolumeRequest {
        name: name.into(),
        size_gib,
        zone: zone.into(),
        volume_type: class.volume_type.clone(),
        pool: String::new(),
        tags: params(&[
            ("kubernetes.io/created-for/pvc/namespace", "default"),
            ("kubernetes.io/created-for/pvc/name", "claim-1"),
            ("kubernetes.io/created-for/pv/name", "pv-1"),
        ]),
        options: class.options.clone(),
    }
}

/// The provider of the config's resource group `rg`, its endpoints given.
fn provider(cloud: &Cloud, extra: &str) -> Azure {
    let (config, env) = cloud.config(&cloud.azure_json("hypercloud", extra));
    Azure::with_environment(config, env, cloud.options())
}

/// The resource group `rg`, a virtual network, and a VM (Standard_B1s: two data disks) named
/// after each node with a NIC of its own: the VMs' resource IDs.
async fn vms(arm: &Arm, names: &[&str]) -> Vec<String> {
    let _: serde_json::Value = arm
        .put(&arm.resource_group_id("rg"), &json!({"location": LOCATION}))
        .await
        .unwrap();
    let vnet: VirtualNetwork = arm
        .put(
            &arm.resource_id("rg", "Microsoft.Network/virtualNetworks", "vnet"),
            &json!({"location": LOCATION, "properties": {
                "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                "subnets": [{"name": "nodes", "properties": {"addressPrefix": "10.0.1.0/24"}}]}}),
        )
        .await
        .unwrap();
    let subnet = vnet.properties.subnets[0].id.clone().unwrap();
    let mut ids = Vec::new();
    for name in names {
        let nic_id = arm.resource_id(
            "rg",
            "Microsoft.Network/networkInterfaces",
            &format!("{name}-nic"),
        );
        let _: serde_json::Value = arm
            .put(
                &nic_id,
                &json!({"location": LOCATION, "properties": {"ipConfigurations": [{
                    "name": "ipconfig1", "properties": {"subnet": {"id": subnet},
                    "privateIPAllocationMethod": "Dynamic", "primary": true}}]}}),
            )
            .await
            .unwrap();
        let vm_id = arm.resource_id("rg", "Microsoft.Compute/virtualMachines", name);
        let vm: VirtualMachine = arm
            .put(
                &vm_id,
                &json!({"location": LOCATION, "properties": {
                    "hardwareProfile": {"vmSize": "Standard_B1s"},
                    "osProfile": {"computerName": name, "adminUsername": "azureuser",
                                  "adminPassword": "Integration-Pw-1!"},
                    "storageProfile": {"osDisk": {"createOption": "FromImage"}},
                    "networkProfile": {"networkInterfaces": [{"id": nic_id}]}}}),
            )
            .await
            .unwrap();
        ids.push(vm.id.unwrap());
    }
    ids
}

/// `(lun, name, caching)` of a VM's data disks, as ARM shows them.
async fn data_disks(arm: &Arm, vm_id: &str) -> Vec<(i32, String, String)> {
    let vm: VirtualMachine = arm.get(vm_id).await.unwrap();
    vm.properties
        .storage_profile
        .unwrap()
        .data_disks
        .into_iter()
        .map(|d| (d.lun.unwrap(), d.name.unwrap(), d.caching.unwrap()))
        .collect()
}

fn pv(name: &str, spec: k8s_openapi::api::core::v1::PersistentVolumeSpec) -> PersistentVolume {
    PersistentVolume {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

fn chain(e: &CloudError) -> String {
    Chain(e).to_string()
}

#[tokio::test]
async fn a_disk_is_created_labelled_attached_grown_detached_and_deleted() {
    let cloud = Cloud::start().await;
    let arm = cloud.arm("");
    let vm_ids = vms(&arm, &["node-1", "node-2"]).await;
    let azure = provider(&cloud, "");
    let prov = azure.volume_provisioner().unwrap();
    let att = azure.volume_attacher().unwrap();
    let labeler = azure.pv_labeler().unwrap();
    assert_eq!(prov.plugin_name(), "kubernetes.io/azure-disk");
    assert_eq!(att.plugin_name(), "kubernetes.io/azure-disk");
    assert_eq!(prov.max_volume_name_len(), 75);

    // The class as the PV controller reads it; refusals name the parameter.
    let premium = prov
        .class_parameters(&params(&[
            ("skuName", "premium_lrs"),
            ("fsType", "ext4"),
            ("cachingMode", "ReadOnly"),
            ("kind", "Managed"),
        ]))
        .unwrap();
    assert_eq!(premium.volume_type, "Premium_LRS");
    let e = prov
        .class_parameters(&params(&[("kind", "Shared")]))
        .unwrap_err();
    assert!(
        e.contains("unmanaged (blob) disks are not implemented"),
        "{e}"
    );
    let not_zoned = prov
        .class_parameters(&params(&[("zoned", "false")]))
        .unwrap();
    let standard = prov.class_parameters(&BTreeMap::new()).unwrap();

    // Zoned: a claim of 1500Mi is a 2 GiB disk in zone 1, labelled with it and the region.
    let size = round_up_to_gib("1500Mi").unwrap();
    let v1 = prov
        .create_volume(&request(
            "kubernetes-dynamic-pv-1",
            size,
            "regionone-1",
            &premium,
        ))
        .await
        .unwrap();
    assert_eq!(
        v1.id,
        arm.resource_id("rg", "Microsoft.Compute/disks", "kubernetes-dynamic-pv-1")
    );
    assert_eq!(v1.size_gib, 2);
    assert_eq!(
        v1.labels,
        params(&[(ZONE, "regionone-1"), (REGION, "regionone")])
    );
    let d: Disk = arm.get(&v1.id).await.unwrap();
    assert_eq!(d.zones, ["1"]);
    assert_eq!(d.sku.unwrap().name.as_deref(), Some("Premium_LRS"));
    assert_eq!(d.properties.disk_size_gb, Some(2));
    assert_eq!(d.properties.disk_state.as_deref(), Some("Unattached"));
    assert_eq!(d.tags["created-by"], "kubernetes-azure-dd");
    assert_eq!(d.tags["kubernetes.io-created-for-pvc-name"], "claim-1");
    assert_eq!(d.tags["kubernetes.io-created-for-pv-name"], "pv-1");
    // A fault domain is no availability zone, and `zoned: false` ignores the zone: region only.
    let v2 = prov
        .create_volume(&request("kubernetes-dynamic-pv-2", 1, "0", &standard))
        .await
        .unwrap();
    let v3 = prov
        .create_volume(&request(
            "kubernetes-dynamic-pv-3",
            1,
            "regionone-1",
            &not_zoned,
        ))
        .await
        .unwrap();
    for v in [&v2, &v3] {
        assert_eq!(v.labels, params(&[(REGION, "regionone")]));
        let d: Disk = arm.get(&v.id).await.unwrap();
        assert!(d.zones.is_empty(), "{d:?}");
        assert_eq!(d.sku.unwrap().name.as_deref(), Some("StandardSSD_LRS"));
    }
    // A zone the cloud lacks is ARM's refusal.
    let e = prov
        .create_volume(&request(
            "kubernetes-dynamic-pv-9",
            1,
            "regionone-7",
            &standard,
        ))
        .await
        .unwrap_err();
    assert!(chain(&e).contains("zone '7'"), "{}", chain(&e));

    // The PV's source, and its labels from the disk.
    let source = prov.volume_source(&v1.id, Some("ext4"));
    let ad = source.azure_disk.clone().unwrap();
    assert_eq!(
        (
            ad.disk_name.as_str(),
            ad.kind.as_deref(),
            ad.caching_mode.as_deref(),
            ad.fs_type.as_deref()
        ),
        (
            "kubernetes-dynamic-pv-1",
            Some("Managed"),
            Some("ReadOnly"),
            Some("ext4")
        )
    );
    let pv1 = pv("pv-1", source.clone());
    assert_eq!(prov.volume_id(&pv1).as_deref(), Some(v1.id.as_str()));
    assert_eq!(att.pv_volume_id(&source).as_deref(), Some(v1.id.as_str()));
    assert_eq!(
        labeler.get_labels_for_volume(&pv1).await.unwrap(),
        v1.labels
    );
    let csi: k8s_openapi::api::core::v1::PersistentVolumeSpec = serde_json::from_value(
        json!({"csi": {"driver": "disk.csi.azure.com", "volumeHandle": v2.id}}),
    )
    .unwrap();
    assert_eq!(
        labeler
            .get_labels_for_volume(&pv("pv-2", csi))
            .await
            .unwrap(),
        v2.labels
    );
    let mut placeholder = prov.volume_source(&v1.id, None);
    placeholder.azure_disk.as_mut().unwrap().disk_name = "placeholder".into();
    assert!(labeler
        .get_labels_for_volume(&pv("pv-p", placeholder))
        .await
        .unwrap()
        .is_empty());
    assert!(labeler
        .get_labels_for_volume(&pv("pv-x", Default::default()))
        .await
        .unwrap()
        .is_empty());
    let gone = arm.resource_id("rg", "Microsoft.Compute/disks", "no-such-disk");
    let e = labeler
        .get_labels_for_volume(&pv("pv-g", prov.volume_source(&gone, None)))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::DiskNotFound), "{e:?}");

    // Attach: LUN 0 by VM name, LUN 1 by VM resource ID; again is nothing to do.
    att.attach_disk("node-1", &v1.id).await.unwrap();
    att.attach_disk(&vm_ids[0], &v2.id).await.unwrap();
    let before = azure.api_calls();
    att.attach_disk(&format!("azure://{}", vm_ids[0]), &v1.id)
        .await
        .unwrap();
    assert_eq!(azure.api_calls() - before, 1, "one read of the VM");
    assert_eq!(
        data_disks(&arm, &vm_ids[0]).await,
        [
            (0, "kubernetes-dynamic-pv-1".into(), "ReadOnly".into()),
            (1, "kubernetes-dynamic-pv-2".into(), "ReadOnly".into())
        ]
    );
    let d: Disk = arm.get(&v1.id).await.unwrap();
    assert_eq!(d.properties.disk_state.as_deref(), Some("Attached"));
    assert!(d.managed_by.unwrap().eq_ignore_ascii_case(&vm_ids[0]));
    assert_eq!(
        att.get_attachment_disk_path("node-1", &v1.id)
            .await
            .unwrap(),
        "/dev/disk/azure/scsi1/lun0"
    );
    assert_eq!(
        att.get_attachment_disk_path("node-1", &v2.id)
            .await
            .unwrap(),
        "/dev/disk/azure/scsi1/lun1"
    );
    assert!(att.disk_is_attached("node-1", &v1.id).await.unwrap());
    assert!(!att.disk_is_attached("node-2", &v1.id).await.unwrap());
    let ids = [v1.id.clone(), v2.id.clone(), v3.id.clone(), gone.clone()];
    let map = att.disks_are_attached("node-1", &ids).await.unwrap();
    assert_eq!(
        ids.iter().map(|i| map[i]).collect::<Vec<_>>(),
        [true, true, false, false]
    );
    assert!(!att.disks_are_attached("node-9", &ids[..1]).await.unwrap()[&v1.id]);

    // Refused: a third disk on a two-disk size (ARM's words), a disk another VM has, the
    // path of a disk not there, deleting or growing an attached disk.
    let e = att.attach_disk("node-1", &v3.id).await.unwrap_err();
    assert!(
        chain(&e).contains("maximum number of data disks"),
        "{}",
        chain(&e)
    );
    let e = att.attach_disk("node-2", &v1.id).await.unwrap_err();
    assert_eq!(
        chain(&e),
        "azure: attach disk kubernetes-dynamic-pv-1 to VM node-2 failed: disk kubernetes-dynamic-pv-1 is attached to VM node-1, not node-2; a disk is attached to one VM at a time"
    );
    let e = att
        .get_attachment_disk_path("node-2", &v1.id)
        .await
        .unwrap_err();
    assert!(
        chain(&e).contains("is not attached to VM node-2"),
        "{}",
        chain(&e)
    );
    let e = prov.delete_volume(&v1.id).await.unwrap_err();
    assert_eq!(
        chain(&e),
        "azure: delete disk kubernetes-dynamic-pv-1 failed: disk kubernetes-dynamic-pv-1 is attached to VM node-1; it can be deleted once detached"
    );
    let e = prov.expand_volume(&v1.id, 4).await.unwrap_err();
    assert!(
        chain(&e).contains("is Attached (VM \"node-1\"); only an Unattached disk can be resized"),
        "{}",
        chain(&e)
    );
    let e = att.attach_disk("node-1", "disk-1").await.unwrap_err();
    assert!(
        chain(&e).contains("is not a managed disk's resource ID"),
        "{}",
        chain(&e)
    );
    let e = att.attach_disk("node-9", &v3.id).await.unwrap_err();
    assert!(matches!(e, CloudError::InstanceNotFound), "{e:?}");

    // Detach: LUN 0 is free again and the next disk takes it.
    att.detach_disk("node-1", &v1.id).await.unwrap();
    assert!(!att.disk_is_attached("node-1", &v1.id).await.unwrap());
    att.detach_disk("node-1", &v1.id).await.unwrap();
    att.detach_disk("node-9", &v1.id).await.unwrap();
    att.attach_disk("node-1", &v3.id).await.unwrap();
    assert_eq!(
        att.get_attachment_disk_path("node-1", &v3.id)
            .await
            .unwrap(),
        "/dev/disk/azure/scsi1/lun0"
    );
    att.detach_disk("node-1", &v2.id).await.unwrap();
    att.detach_disk(&vm_ids[0], &v3.id).await.unwrap();
    assert!(data_disks(&arm, &vm_ids[0]).await.is_empty());
    let d: Disk = arm.get(&v1.id).await.unwrap();
    assert_eq!(d.properties.disk_state.as_deref(), Some("Unattached"));
    assert!(d.managed_by.is_none(), "{d:?}");

    // Grow: to 5 GiB; asking for less leaves it, and ARM itself refuses a shrink.
    assert_eq!(prov.expand_volume(&v1.id, 5).await.unwrap(), 5);
    assert_eq!(prov.expand_volume(&v1.id, 3).await.unwrap(), 5);
    let d: Disk = arm.get(&v1.id).await.unwrap();
    assert_eq!(d.properties.disk_size_gb, Some(5));
    let e = arm
        .patch::<_, Disk>(&v1.id, &json!({"properties": {"diskSizeGB": 2}}))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(400), "{e:?}");

    // Found by ID, by name, and all of the group.
    let found = prov.find_volumes(VolumeFilter::Id(&v1.id)).await.unwrap();
    assert_eq!(
        (
            found[0].size_gib,
            found[0].zone.as_str(),
            found[0].attached_to.len()
        ),
        (5, "regionone-1", 0)
    );
    let found = prov
        .find_volumes(VolumeFilter::Name("kubernetes-dynamic-pv-2"))
        .await
        .unwrap();
    assert_eq!(found[0].id, v2.id);
    assert_eq!(prov.find_volumes(VolumeFilter::All).await.unwrap().len(), 3);
    assert!(prov
        .find_volumes(VolumeFilter::Id("nonsense"))
        .await
        .unwrap()
        .is_empty());

    // Delete; a disk gone is deleted already.
    for v in [&v1, &v2, &v3] {
        prov.delete_volume(&v.id).await.unwrap();
        prov.delete_volume(&v.id).await.unwrap();
        let e = arm.get::<Disk>(&v.id).await.unwrap_err();
        assert!(e.is_not_found(), "{e:?}");
    }
    let e = labeler.get_labels_for_volume(&pv1).await.unwrap_err();
    assert!(matches!(e, CloudError::DiskNotFound), "{e:?}");
    cloud.shutdown().await;
}

fn rate(r: f64) -> Rate {
    Rate(PerService {
        global: None,
        services: BTreeMap::from([(Service::Azure, r)]),
    })
}

#[tokio::test]
async fn a_cycle_costs_few_requests_and_an_attach_completes_while_throttled() {
    let mut cloud = Cloud::start().await;
    let arm = cloud.arm("");
    vms(&arm, &["node-1"]).await;
    let azure = provider(&cloud, RETRIES);
    azure.initialize(None).await.unwrap();
    let prov = azure.volume_provisioner().unwrap();
    let att = azure.volume_attacher().unwrap();
    let class = prov.class_parameters(&BTreeMap::new()).unwrap();

    let before = azure.api_calls();
    let v = prov
        .create_volume(&request("kubernetes-dynamic-pv-c", 1, "", &class))
        .await
        .unwrap();
    let created = azure.api_calls();
    att.attach_disk("node-1", &v.id).await.unwrap();
    let attached = azure.api_calls();
    att.detach_disk("node-1", &v.id).await.unwrap();
    let detached = azure.api_calls();
    prov.delete_volume(&v.id).await.unwrap();
    let deleted = azure.api_calls();
    eprintln!(
        "ARM requests for create+attach+detach+delete: {} (create {}, attach {}, detach {}, delete {})",
        deleted - before,
        created - before,
        attached - created,
        detached - attached,
        deleted - detached
    );
    assert!(deleted - before <= 20, "{}", deleted - before);

    // Half of the calls throttled (429, Retry-After 1): the attach still completes.
    let v = prov
        .create_volume(&request("kubernetes-dynamic-pv-t", 1, "", &class))
        .await
        .unwrap();
    cloud
        .restart_with(Faults {
            throttle_rate: rate(0.5),
            ..Faults::default()
        })
        .await;
    let (before, started) = (azure.api_calls(), std::time::Instant::now());
    att.attach_disk("node-1", &v.id).await.unwrap();
    eprintln!(
        "attach with azure=0.5 throttling: {} ARM requests in {:?} ({} without faults)",
        azure.api_calls() - before,
        started.elapsed(),
        attached - created
    );
    cloud.restart_with(Faults::default()).await;
    assert!(att.disk_is_attached("node-1", &v.id).await.unwrap());
    assert_eq!(
        att.get_attachment_disk_path("node-1", &v.id).await.unwrap(),
        "/dev/disk/azure/scsi1/lun0"
    );
    att.detach_disk("node-1", &v.id).await.unwrap();
    prov.delete_volume(&v.id).await.unwrap();
    cloud.shutdown().await;
}
