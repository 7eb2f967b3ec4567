#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

#[test]
fn a_vm_as_arm_shows_it_is_read_and_written_back_whole() {
    let arm = json!({
        "id": "/subscriptions/s/resourceGroups/rg1/providers/Microsoft.Compute/virtualMachines/vm1",
        "name": "vm1", "type": "Microsoft.Compute/virtualMachines", "location": "westeurope",
        "zones": ["2"], "tags": null, "etag": "\"3\"",
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_B1s"},
            "osProfile": {"computerName": "node-1", "adminUsername": "azureuser"},
            "networkProfile": {"networkInterfaces": [
                {"id": "/x/networkInterfaces/nic-a"},
                {"id": "/x/networkInterfaces/nic-b", "properties": {"primary": true}}]},
            "storageProfile": {"osDisk": {"name": "os"}, "dataDisks": [
                {"lun": 0, "name": "d0", "createOption": "Attach", "diskSizeGB": 10,
                 "managedDisk": {"id": "/x/disks/d0", "storageAccountType": "Standard_LRS"}}]},
            "availabilitySet": {"id": "/x/availabilitySets/as1"},
            "vmId": "3f1c", "timeCreated": "2026-11-28T03:58:05+00:00",
            "provisioningState": "Succeeded",
            "instanceView": {"computerName": "node-1", "platformFaultDomain": 1, "statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info"},
                {"code": "PowerState/running", "displayStatus": "VM running"}]}
        },
        "resources": [{"id": "ext"}]
    });
    let vm: VirtualMachine = serde_json::from_value(arm).unwrap();
    assert_eq!(vm.zones, ["2"]);
    assert!(vm.tags.is_empty());
    assert_eq!(vm.power_state(), Some("running"));
    assert_eq!(vm.primary_nic_id(), Some("/x/networkInterfaces/nic-b"));
    let p = &vm.properties;
    assert_eq!(
        p.hardware_profile.as_ref().unwrap().vm_size.as_deref(),
        Some("Standard_B1s")
    );
    assert_eq!(
        p.os_profile.as_ref().unwrap().computer_name.as_deref(),
        Some("node-1")
    );
    let disk = &p.storage_profile.as_ref().unwrap().data_disks[0];
    assert_eq!((disk.lun, disk.disk_size_gb), (Some(0), Some(10)));
    assert_eq!(
        disk.managed_disk.as_ref().unwrap().id.as_deref(),
        Some("/x/disks/d0")
    );
    assert_eq!(
        name_of(p.availability_set.as_ref().unwrap().id.as_deref().unwrap()),
        "as1"
    );

    // Written back: unknown fields kept, the read-only instance view left out.
    let back = serde_json::to_value(&vm).unwrap();
    assert_eq!(back["resources"], json!([{"id": "ext"}]));
    assert_eq!(
        back["properties"]["timeCreated"],
        "2026-11-28T03:58:05+00:00"
    );
    assert_eq!(back["properties"]["storageProfile"]["osDisk"]["name"], "os");
    assert_eq!(
        back["properties"]["osProfile"]["adminUsername"],
        "azureuser"
    );
    assert!(back["properties"].get("instanceView").is_none(), "{back}");
    assert!(back.get("tags").is_none(), "{back}");
}

#[test]
fn emptied_lists_the_provider_edits_are_sent_as_empty() {
    let mut vm = VirtualMachine::default();
    vm.properties.storage_profile = Some(StorageProfile::default());
    let v = serde_json::to_value(&vm).unwrap();
    assert_eq!(v["properties"]["storageProfile"]["dataDisks"], json!([]));
    let nsg = NetworkSecurityGroup::default();
    let v = serde_json::to_value(&nsg).unwrap();
    assert_eq!(v["properties"]["securityRules"], json!([]));
    assert!(v["properties"].get("defaultSecurityRules").is_none(), "{v}");
    let v = serde_json::to_value(LoadBalancer::default()).unwrap();
    for list in [
        "frontendIPConfigurations",
        "backendAddressPools",
        "probes",
        "loadBalancingRules",
    ] {
        assert_eq!(v["properties"][list], json!([]), "{list}: {v}");
    }
}

#[test]
fn network_resources_read_with_azures_spelling() {
    let nic: NetworkInterface = serde_json::from_value(json!({
        "name": "nic-1", "properties": {
            "macAddress": "FA-16-3E-00-00-01", "primary": true,
            "virtualMachine": {"id": "/x/virtualMachines/vm1"},
            "ipConfigurations": [{"name": "ipconfig1", "properties": {
                "privateIPAddress": "10.0.1.4", "privateIPAllocationMethod": "Dynamic",
                "publicIPAddress": {"id": "/x/publicIPAddresses/pip"},
                "subnet": {"id": "/x/virtualNetworks/v/subnets/s"}, "primary": true,
                "loadBalancerBackendAddressPools": null}}]}
    }))
    .unwrap();
    let ip = &nic.properties.ip_configurations[0].properties;
    assert_eq!(ip.private_ip_address.as_deref(), Some("10.0.1.4"));
    assert_eq!(
        ip.public_ip_address.as_ref().unwrap().id.as_deref(),
        Some("/x/publicIPAddresses/pip")
    );
    assert!(ip.load_balancer_backend_address_pools.is_empty());
    let back = serde_json::to_value(&nic).unwrap();
    assert!(
        back["properties"].get("macAddress").is_none()
            && back["properties"].get("virtualMachine").is_none()
    );

    let pip: PublicIpAddress = serde_json::from_value(json!({"properties": {
        "ipAddress": "172.24.4.10", "publicIPAllocationMethod": "Static",
        "dnsSettings": {"domainNameLabel": "web", "fqdn": "web.westeurope.cloudapp.azure.com"}}}))
    .unwrap();
    assert_eq!(pip.properties.ip_address.as_deref(), Some("172.24.4.10"));
    assert_eq!(
        pip.properties.dns_settings.unwrap().fqdn.as_deref(),
        Some("web.westeurope.cloudapp.azure.com")
    );

    let disk: Disk = serde_json::from_value(json!({"managedBy": "/x/virtualMachines/vm1", "zones": ["1"],
        "properties": {"diskSizeGB": 20, "diskState": "Attached", "creationData": {"createOption": "Empty"}}}))
    .unwrap();
    assert_eq!(
        (
            disk.properties.disk_size_gb,
            disk.properties.disk_state.as_deref()
        ),
        (Some(20), Some("Attached"))
    );
    assert_eq!(disk.managed_by.as_deref(), Some("/x/virtualMachines/vm1"));

    let rt: RouteTable = serde_json::from_value(json!({"properties": {"routes": [{"name": "r",
        "properties": {"addressPrefix": "10.244.1.0/24", "nextHopType": "VirtualAppliance",
                       "nextHopIpAddress": "10.0.1.4"}}]}}))
    .unwrap();
    assert_eq!(
        rt.properties.routes[0]
            .properties
            .next_hop_ip_address
            .as_deref(),
        Some("10.0.1.4")
    );

    let lb: LoadBalancer = serde_json::from_value(json!({"properties": {
        "frontendIPConfigurations": [{"name": "fe", "properties": {"publicIPAddress": {"id": "/x/pip"}}}],
        "backendAddressPools": [{"name": "be", "properties": {"backendIPConfigurations": [{"id": "/x/ipc"}]}}],
        "probes": [{"name": "p", "properties": {"protocol": "Tcp", "port": 30080, "intervalInSeconds": 5}}],
        "loadBalancingRules": [{"name": "r", "properties": {"frontendIPConfiguration": {"id": "/x/fe"},
            "backendAddressPool": {"id": "/x/be"}, "probe": {"id": "/x/p"}, "protocol": "Tcp",
            "frontendPort": 80, "backendPort": 30080, "enableFloatingIP": false}}],
        "inboundNatRules": []}}))
    .unwrap();
    let rule = &lb.properties.load_balancing_rules[0].properties;
    assert_eq!(
        (
            rule.frontend_port,
            rule.backend_port,
            rule.enable_floating_ip
        ),
        (Some(80), Some(30080), Some(false))
    );
    assert_eq!(
        lb.properties.backend_address_pools[0]
            .properties
            .backend_ip_configurations
            .len(),
        1
    );
    assert_eq!(lb.properties.extra["inboundNatRules"], json!([]));

    let nsg: NetworkSecurityGroup = serde_json::from_value(json!({"properties": {"securityRules": [
        {"name": "allow-80", "properties": {"protocol": "Tcp", "access": "Allow", "direction": "Inbound",
         "priority": 500, "destinationPortRange": "80", "sourceAddressPrefixes": ["1.2.3.0/24"]}}],
        "defaultSecurityRules": [{"name": "AllowVnetInBound"}]}}))
    .unwrap();
    assert_eq!(
        nsg.properties.security_rules[0].properties.priority,
        Some(500)
    );
    assert_eq!(nsg.properties.default_security_rules.len(), 1);
}

#[test]
fn anything_may_be_missing_or_null() {
    let vm: VirtualMachine = serde_json::from_value(json!({})).unwrap();
    assert_eq!((vm.power_state(), vm.primary_nic_id()), (None, None));
    let vm: VirtualMachine =
        serde_json::from_value(json!({"properties": null, "zones": null, "sku": null})).unwrap();
    assert!(vm.properties.storage_profile.is_none());
    let lb: LoadBalancer = serde_json::from_value(json!({"properties": {"probes": null}})).unwrap();
    assert!(lb.properties.probes.is_empty());
}
