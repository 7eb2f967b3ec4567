//! Resource Manager through [`Arm`] on the local cloud: a token from `azure.json` and an
//! AzureStackCloud environment file, then a resource group, a virtual network, NICs and a VM
//! made, read (with its instance view), listed page by page, deallocated and deleted through
//! long-running operations.

use hypercloud_providers_azure::client::{COMPUTE_API_VERSION, NETWORK_API_VERSION};
use hypercloud_providers_azure::models::{
    IpConfiguration, NetworkInterface, Reference, ResourceGroup, VirtualMachine, VirtualNetwork,
};
use hypercloud_providers_azure::{Arm, Error};
use serde_json::json;

use crate::support::{Cloud, LOCATION};

#[tokio::test]
async fn a_token_comes_from_azure_json_and_an_azure_stack_environment_file() {
    let cloud = Cloud::start().await;
    let (config, env) = cloud.config(&cloud.azure_json("hypercloud", ""));
    assert_eq!(env.active_directory_endpoint, format!("{}/", cloud.url));
    let arm = Arm::new(&config, &env, &cloud.options()).unwrap();
    arm.authenticate().await.unwrap();

    let (config, env) = cloud.config(&cloud.azure_json("wrong", ""));
    let e = Arm::new(&config, &env, &cloud.options())
        .unwrap()
        .authenticate()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Authenticate { .. }), "{e:?}");
    let chain = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(chain.contains("AADSTS7000215"), "Entra's reason: {chain}");

    // Without the cloud's certificate the TLS handshake fails, named as such.
    let e = Arm::new(&config, &env, &Default::default())
        .unwrap()
        .authenticate()
        .await
        .unwrap_err();
    let chain = hypercloud_cloudprovider::Chain(&e).to_string();
    assert!(chain.to_lowercase().contains("certificate"), "{chain}");
    cloud.shutdown().await;
}

fn nic_body(subnet: &str) -> NetworkInterface {
    let mut nic = NetworkInterface {
        location: Some(LOCATION.into()),
        ..Default::default()
    };
    let mut ipc = IpConfiguration {
        name: Some("ipconfig1".into()),
        ..Default::default()
    };
    ipc.properties.subnet = Some(Reference::to(subnet));
    ipc.properties.private_ip_allocation_method = Some("Dynamic".into());
    ipc.properties.primary = Some(true);
    nic.properties.ip_configurations.push(ipc);
    nic
}

#[tokio::test]
async fn a_vm_is_made_read_listed_deallocated_and_deleted() {
    let cloud = Cloud::start().await;
    let arm = cloud.arm("");
    let rg = arm.resource_group_id("hc-it");
    let group: ResourceGroup = arm.put(&rg, &json!({"location": LOCATION})).await.unwrap();
    assert_eq!(group.name.as_deref(), Some("hc-it"));

    let vnet_id = arm.resource_id("hc-it", "Microsoft.Network/virtualNetworks", "vnet");
    let vnet: VirtualNetwork = arm
        .put(
            &vnet_id,
            &json!({"location": LOCATION, "properties": {
                "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                "subnets": [{"name": "nodes", "properties": {"addressPrefix": "10.0.1.0/24"}}]}}),
        )
        .await
        .unwrap();
    let subnet = vnet.properties.subnets[0].id.clone().unwrap();

    let mut nic_ids = Vec::new();
    for name in ["nic-1", "nic-2"] {
        let id = arm.resource_id("hc-it", "Microsoft.Network/networkInterfaces", name);
        let nic: NetworkInterface = arm.put(&id, &nic_body(&subnet)).await.unwrap();
        let ip = nic.properties.ip_configurations[0]
            .properties
            .private_ip_address
            .clone()
            .unwrap();
        assert!(ip.starts_with("10.0.1."), "{ip}");
        nic_ids.push(nic.id.unwrap());
    }

    let vm_id = arm.resource_id("hc-it", "Microsoft.Compute/virtualMachines", "node-1");
    let vm: VirtualMachine = arm
        .put(
            &vm_id,
            &json!({"location": LOCATION, "properties": {
                "hardwareProfile": {"vmSize": "Standard_B1s"},
                "osProfile": {"computerName": "node-1", "adminUsername": "azureuser",
                              "adminPassword": "Integration-Pw-1!"},
                "storageProfile": {
                    "imageReference": {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy",
                                       "sku": "22_04-lts-gen2", "version": "latest"},
                    "osDisk": {"createOption": "FromImage"}},
                "networkProfile": {"networkInterfaces": [
                    {"id": nic_ids[0], "properties": {"primary": true}}]}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        vm.properties.provisioning_state.as_deref(),
        Some("Succeeded")
    );

    let vm: VirtualMachine = arm
        .get_with(&vm_id, &[("$expand", "instanceView")])
        .await
        .unwrap();
    assert_eq!(vm.power_state(), Some("running"));
    assert_eq!(
        vm.properties
            .os_profile
            .as_ref()
            .unwrap()
            .computer_name
            .as_deref(),
        Some("node-1")
    );
    assert_eq!(
        vm.primary_nic_id().map(str::to_lowercase),
        Some(nic_ids[0].to_lowercase())
    );
    assert_eq!(
        vm.properties.hardware_profile.unwrap().vm_size.as_deref(),
        Some("Standard_B1s")
    );

    // Two NICs, one a page: two requests, both NICs.
    let before = arm.requests();
    let nics: Vec<NetworkInterface> = arm
        .list_with(
            &arm.resource_id("hc-it", "Microsoft.Network/networkInterfaces", ""),
            &[("$top", "1")],
        )
        .await
        .unwrap();
    assert_eq!(arm.requests() - before, 2, "one page each");
    let mut names: Vec<_> = nics.iter().filter_map(|n| n.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["nic-1", "nic-2"]);
    let used = nics
        .iter()
        .find(|n| n.name.as_deref() == Some("nic-1"))
        .unwrap();
    assert!(used.properties.virtual_machine.is_some(), "{used:?}");

    arm.post_action(&vm_id, "deallocate").await.unwrap();
    let vm: VirtualMachine = arm
        .get_with(&vm_id, &[("$expand", "instanceView")])
        .await
        .unwrap();
    assert_eq!(vm.power_state(), Some("deallocated"));

    let missing = arm.resource_id("hc-it", "Microsoft.Compute/virtualMachines", "node-9");
    let e = arm.get::<VirtualMachine>(&missing).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert_eq!(e.code(), Some("ResourceNotFound"));

    // Long-running deletes, polled to their end.
    let before = arm.requests();
    arm.delete(&vm_id).await.unwrap();
    assert!(arm.requests() - before >= 2, "the delete was polled");
    let e = arm.get::<VirtualMachine>(&vm_id).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    for id in &nic_ids {
        arm.delete(id).await.unwrap();
    }
    arm.delete(&rg).await.unwrap();
    let e = arm.get::<ResourceGroup>(&rg).await.unwrap_err();
    assert_eq!(e.code(), Some("ResourceGroupNotFound"), "{e:?}");
    assert_eq!(
        (COMPUTE_API_VERSION, NETWORK_API_VERSION),
        ("2024-07-01", "2024-05-01")
    );
    cloud.shutdown().await;
}
