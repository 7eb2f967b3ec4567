#!/usr/bin/env python3
"""Microsoft's Azure SDK for Python (azure-mgmt-network 33.1.0, azure-mgmt-compute 39.0.0,
azure-mgmt-resource, azure-identity; pinned in hack/python-tools.sh) against a running local
cloud's Azure dialect: Resource Manager's Microsoft.Network and Microsoft.Compute resources.

Same environment as azure_conformance.py (AZURE_ENDPOINT, AZURE_TENANT_ID, AZURE_CLIENT_ID,
AZURE_CLIENT_SECRET, AZURE_LOCATION, REQUESTS_CA_BUNDLE). Every check is an assert; the first
failure exits non-zero. LROs go through the SDK's begin_* pollers; bodies are camelCase JSON.
In a group "conformance-res-rg" (deleted first if left over, always deleted at the end), covers:
vnets (inline and child subnets, lists, etag changing on PATCH/PUT, bad subnets refused), public
IPs (Standard Static with DNS label, Basic Dynamic), NSGs (rules inline and as children, default
rules, bad priority), route tables (routes inline and as children), NICs (dynamic/static IPs, MAC,
back references, in-use deletes refused), availability sets, disks (grow, shrink refused, attach
state), VMs (instance view, power actions, detach by PUT, sizes, bad size, delete leaving NIC and
disk), If-Match/If-None-Match (sent as headers: the network SDK's operations take no etag
argument) and ARM's 404/204 for missing resources.
"""
import faulthandler
import ipaddress
import os
import re
import sys

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.identity import ClientSecretCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource import ResourceManagementClient, SubscriptionClient

REQUIRED = ["AZURE_ENDPOINT", "AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_LOCATION"]
ENDPOINT = os.environ.get("AZURE_ENDPOINT", "")
TENANT = os.environ.get("AZURE_TENANT_ID", "")
CLIENT = os.environ.get("AZURE_CLIENT_ID", "")
SECRET = os.environ.get("AZURE_CLIENT_SECRET", "")
LOCATION = os.environ.get("AZURE_LOCATION", "")
RG = "conformance-res-rg"
VNET = "conf-vnet"
LRO_TIMEOUT = 120
MAC = re.compile(r"^([0-9A-F]{2}-){5}[0-9A-F]{2}$")


def same_id(a, b):
    # ARM resource ids are case-insensitive.
    return a is not None and b is not None and a.lower() == b.lower()


def done(poller):
    return poller.result(timeout=LRO_TIMEOUT)


def refused(what, status, call, code=None, text=None):
    """call() must raise HttpResponseError with this status (at the initial request, as ARM does)."""
    try:
        answer = call()
        if hasattr(answer, "result"):
            answer.result(timeout=LRO_TIMEOUT)
    except HttpResponseError as e:
        assert e.status_code == status, f"{what}: status {e.status_code}, want {status}: {e}"
        if code is not None:
            assert e.error is not None and e.error.code == code, f"{what}: error code {e.error and e.error.code}, want {code}"
        if text is not None:
            assert text in str(e), f"{what}: {text!r} not in the error: {e}"
        return e
    raise AssertionError(f"{what}: succeeded, want {status}")


def absent(what, call, code=None):
    e = refused(what, 404, call, code=code)
    assert isinstance(e, ResourceNotFoundError), f"{what}: {type(e).__name__}, want ResourceNotFoundError"


def power_state(comp, name):
    statuses = comp.virtual_machines.instance_view(RG, name).statuses or []
    return [s.code for s in statuses if s.code and s.code.startswith("PowerState/")]


def check_vnet(net):
    vnets, subnets = net.virtual_networks, net.subnets
    body = {"location": LOCATION, "properties": {
        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
        "subnets": [{"name": "subnet-1", "properties": {"addressPrefix": "10.0.1.0/24"}},
                    {"name": "subnet-2", "properties": {"addressPrefix": "10.0.2.0/24"}}]}}
    vnet = done(vnets.begin_create_or_update(RG, VNET, body))
    assert vnet.name == VNET and vnet.location == LOCATION, vnet
    assert vnet.type == "Microsoft.Network/virtualNetworks", vnet.type
    assert vnet.provisioning_state == "Succeeded", vnet.provisioning_state
    assert vnet.address_space.address_prefixes == ["10.0.0.0/16"], vnet.address_space
    assert sorted(s.name for s in vnet.subnets) == ["subnet-1", "subnet-2"], vnet.subnets
    assert vnet.resource_guid, "vnet resourceGuid"
    assert vnet.etag and vnet.etag.startswith('W/"'), f"vnet etag {vnet.etag!r}"
    got = vnets.get(RG, VNET.upper())
    assert got.name == VNET and got.id == vnet.id, got
    assert VNET in [v.name for v in vnets.list(RG)], "vnet not in list by group"
    assert VNET in [v.name for v in vnets.list_all()], "vnet not in list_all"
    tagged = vnets.update_tags(RG, VNET, {"tags": {"a": "1"}})
    assert tagged.tags == {"a": "1"}, tagged.tags
    assert tagged.etag and tagged.etag != vnet.etag, f"etag unchanged by PATCH: {tagged.etag}"
    stale = vnet.etag
    read = vnets.get(RG, VNET)
    read.tags = {"a": "1", "b": "2"}
    put = done(vnets.begin_create_or_update(RG, VNET, read))
    assert put.tags == {"a": "1", "b": "2"}, put.tags
    assert put.etag not in (stale, tagged.etag), f"etag unchanged by PUT: {put.etag}"
    assert len(put.subnets) == 2, put.subnets

    sub3 = done(subnets.begin_create_or_update(RG, VNET, "subnet-3", {"properties": {"addressPrefix": "10.0.3.0/24"}}))
    assert sub3.name == "subnet-3" and sub3.address_prefix == "10.0.3.0/24", sub3
    assert same_id(sub3.id, f"{vnet.id}/subnets/subnet-3"), sub3.id
    assert sub3.provisioning_state == "Succeeded", sub3.provisioning_state
    assert subnets.get(RG, VNET, "subnet-3").address_prefix == "10.0.3.0/24"
    names = sorted(s.name for s in subnets.list(RG, VNET))
    assert names == ["subnet-1", "subnet-2", "subnet-3"], names
    assert len(vnets.get(RG, VNET).subnets) == 3, "the child subnet is not in the vnet's view"
    refused("subnet outside the address space", 400, lambda: subnets.begin_create_or_update(
        RG, VNET, "conf-sub-outside", {"properties": {"addressPrefix": "192.168.0.0/24"}}), text="conf-sub-outside")
    refused("overlapping subnet", 400, lambda: subnets.begin_create_or_update(
        RG, VNET, "conf-sub-overlap", {"properties": {"addressPrefix": "10.0.1.128/25"}}), text="conf-sub-overlap")
    absent("a refused subnet", lambda: subnets.get(RG, VNET, "conf-sub-outside"))
    # The network SDK's operations take no etag argument; ARM's If-Match goes as a header.
    current = vnets.get(RG, VNET)
    refused("a PUT with a stale If-Match", 412, lambda: vnets.begin_create_or_update(
        RG, VNET, current, headers={"If-Match": stale}), code="PreconditionFailed")
    done(vnets.begin_create_or_update(RG, VNET, current, headers={"If-Match": current.etag}))
    refused("a PUT with If-None-Match: * of an existing vnet", 412, lambda: vnets.begin_create_or_update(
        RG, VNET, current, headers={"If-None-Match": "*"}), code="PreconditionFailed")
    print("vnet: ok")
    return vnets.get(RG, VNET)


def check_public_ips(net):
    pips = net.public_ip_addresses
    pip = done(pips.begin_create_or_update(RG, "conf-pip-1", {
        "location": LOCATION, "sku": {"name": "Standard"},
        "properties": {"publicIPAllocationMethod": "Static", "idleTimeoutInMinutes": 4,
                       "dnsSettings": {"domainNameLabel": "conf-pip-1"}}}))
    assert pip.sku.name == "Standard" and pip.public_ip_allocation_method == "Static", pip
    ipaddress.ip_address(pip.ip_address)  # raises if absent or malformed
    assert pip.dns_settings.fqdn == f"conf-pip-1.{LOCATION}.cloudapp.azure.com", pip.dns_settings.fqdn
    assert pip.dns_settings.fqdn.endswith(".cloudapp.azure.com"), pip.dns_settings.fqdn
    assert pip.etag and pip.provisioning_state == "Succeeded", pip
    assert pips.get(RG, "conf-pip-1").ip_address == pip.ip_address, "the address changed on GET"
    basic = done(pips.begin_create_or_update(RG, "conf-pip-2", {
        "location": LOCATION, "sku": {"name": "Basic"}, "properties": {"publicIPAllocationMethod": "Dynamic"}}))
    assert basic.sku.name == "Basic" and basic.public_ip_allocation_method == "Dynamic", basic
    assert basic.provisioning_state == "Succeeded", basic.provisioning_state
    refused("Standard with Dynamic allocation", 400, lambda: pips.begin_create_or_update(RG, "conf-pip-bad", {
        "location": LOCATION, "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Dynamic"}}))
    refused("a location not the cloud's", 400, lambda: pips.begin_create_or_update(RG, "conf-pip-bad", {
        "location": "nowhere" + LOCATION, "sku": {"name": "Basic"}, "properties": {"publicIPAllocationMethod": "Dynamic"}}))
    print("public ip: ok")
    return pip


def check_nsg(net):
    nsgs, rules = net.network_security_groups, net.security_rules
    rule = lambda prio, direction, port, access: {"properties": {
        "protocol": "Tcp", "sourcePortRange": "*", "destinationPortRange": port, "sourceAddressPrefix": "*",
        "destinationAddressPrefix": "*", "access": access, "priority": prio, "direction": direction}}
    nsg = done(nsgs.begin_create_or_update(RG, "conf-nsg", {"location": LOCATION, "properties": {"securityRules": [
        dict(name="allow-ssh", **rule(100, "Inbound", "22", "Allow")),
        dict(name="deny-smtp-out", **rule(200, "Outbound", "25", "Deny"))]}}))
    assert sorted(r.name for r in nsg.security_rules) == ["allow-ssh", "deny-smtp-out"], nsg.security_rules
    ssh = [r for r in nsg.security_rules if r.name == "allow-ssh"][0]
    assert (ssh.priority, ssh.direction, ssh.access, ssh.destination_port_range) == (100, "Inbound", "Allow", "22"), ssh
    assert len(nsg.default_security_rules) == 6, nsg.default_security_rules
    defaults = list(net.default_security_rules.list(RG, "conf-nsg"))
    assert len(defaults) == 6, [r.name for r in defaults]
    assert {"AllowVnetInBound", "DenyAllOutBound"} <= {r.name for r in defaults}, [r.name for r in defaults]
    assert sorted(r.priority for r in defaults) == [65000, 65000, 65001, 65001, 65500, 65500], [r.priority for r in defaults]
    https = done(rules.begin_create_or_update(RG, "conf-nsg", "allow-https", rule(110, "Inbound", "443", "Allow")))
    assert https.name == "allow-https" and https.priority == 110, https
    assert rules.get(RG, "conf-nsg", "allow-https").destination_port_range == "443"
    assert len(list(rules.list(RG, "conf-nsg"))) == 3, "3 rules after a child create"
    done(rules.begin_delete(RG, "conf-nsg", "allow-https"))
    assert sorted(r.name for r in rules.list(RG, "conf-nsg")) == ["allow-ssh", "deny-smtp-out"]
    refused("priority 50", 400, lambda: rules.begin_create_or_update(
        RG, "conf-nsg", "low", rule(50, "Inbound", "80", "Allow")), code="SecurityRuleInvalidPriority")
    refused("duplicate priority", 400, lambda: rules.begin_create_or_update(
        RG, "conf-nsg", "dup", rule(100, "Inbound", "80", "Allow")))
    print("nsg: ok")
    return nsgs.get(RG, "conf-nsg")


def check_route_table(net):
    tables, routes = net.route_tables, net.routes
    table = done(tables.begin_create_or_update(RG, "conf-rt", {"location": LOCATION, "properties": {
        "disableBgpRoutePropagation": True, "routes": [{"name": "to-nva", "properties": {
            "addressPrefix": "10.1.0.0/16", "nextHopType": "VirtualAppliance", "nextHopIpAddress": "10.0.1.10"}}]}}))
    assert table.disable_bgp_route_propagation is True, table
    assert len(table.routes) == 1, table.routes
    nva = table.routes[0]
    assert (nva.name, nva.address_prefix, nva.next_hop_type, nva.next_hop_ip_address) == (
        "to-nva", "10.1.0.0/16", "VirtualAppliance", "10.0.1.10"), nva
    web = done(routes.begin_create_or_update(RG, "conf-rt", "to-internet", {
        "properties": {"addressPrefix": "0.0.0.0/0", "nextHopType": "Internet"}}))
    assert web.name == "to-internet" and web.next_hop_type == "Internet", web
    assert routes.get(RG, "conf-rt", "to-internet").address_prefix == "0.0.0.0/0"
    assert sorted(r.name for r in routes.list(RG, "conf-rt")) == ["to-internet", "to-nva"]
    done(routes.begin_delete(RG, "conf-rt", "to-internet"))
    absent("a deleted route", lambda: routes.get(RG, "conf-rt", "to-internet"))
    refused("VirtualAppliance without nextHopIpAddress", 400, lambda: routes.begin_create_or_update(
        RG, "conf-rt", "no-hop", {"properties": {"addressPrefix": "10.2.0.0/16", "nextHopType": "VirtualAppliance"}}))
    print("route table: ok")


def check_nics(net, vnet, pip, nsg):
    nics = net.network_interfaces
    subnet1 = [s for s in vnet.subnets if s.name == "subnet-1"][0]
    nic = done(nics.begin_create_or_update(RG, "conf-nic-1", {"location": LOCATION, "properties": {
        "networkSecurityGroup": {"id": nsg.id},
        "ipConfigurations": [{"name": "ipconfig1", "properties": {
            "subnet": {"id": subnet1.id}, "privateIPAllocationMethod": "Dynamic",
            "publicIPAddress": {"id": pip.id}, "primary": True}}]}}))
    assert nic.provisioning_state == "Succeeded" and nic.etag, nic
    ipc = nic.ip_configurations[0]
    prefix = ipaddress.ip_network(subnet1.address_prefix)
    addr = ipaddress.ip_address(ipc.private_ip_address)
    assert addr in prefix, f"{addr} not in {prefix}"
    assert addr not in list(prefix)[:4] and addr != prefix.broadcast_address, f"{addr} is reserved in {prefix}"
    assert ipc.private_ip_address_version in (None, "IPv4"), ipc.private_ip_address_version
    assert MAC.match(nic.mac_address or ""), f"mac {nic.mac_address!r}"
    assert same_id(ipc.subnet.id, subnet1.id) and same_id(ipc.public_ip_address.id, pip.id), ipc
    assert same_id(nic.network_security_group.id, nsg.id), nic.network_security_group
    assert nic.virtual_machine is None, nic.virtual_machine
    used = net.public_ip_addresses.get(RG, "conf-pip-1")
    assert used.ip_configuration is not None and same_id(used.ip_configuration.id, ipc.id), used.ip_configuration
    on_subnet = [c.id for c in (net.subnets.get(RG, VNET, "subnet-1").ip_configurations or [])]
    assert any(same_id(i, ipc.id) for i in on_subnet), f"{ipc.id} not in {on_subnet}"
    static = done(nics.begin_create_or_update(RG, "conf-nic-2", {"location": LOCATION, "properties": {
        "ipConfigurations": [{"name": "ipconfig1", "properties": {
            "subnet": {"id": subnet1.id}, "privateIPAllocationMethod": "Static", "privateIPAddress": "10.0.1.20"}}]}}))
    assert static.ip_configurations[0].private_ip_address == "10.0.1.20", static.ip_configurations[0]
    assert static.ip_configurations[0].private_ip_allocation_method == "Static", static.ip_configurations[0]
    assert static.mac_address != nic.mac_address, "two NICs share a MAC"
    refused("deleting a subnet with NICs", 400, lambda: net.subnets.begin_delete(RG, VNET, "subnet-1"),
            code="InUseSubnetCannotBeDeleted")
    refused("deleting a public IP in use", 400, lambda: net.public_ip_addresses.begin_delete(RG, "conf-pip-1"),
            code="PublicIPAddressInUse")
    print("nic: ok")
    return nic


def check_availability_set(comp):
    sets = comp.availability_sets
    aset = sets.create_or_update(RG, "conf-avset", {"location": LOCATION, "sku": {"name": "Aligned"},
                                                     "properties": {"platformFaultDomainCount": 2,
                                                                    "platformUpdateDomainCount": 5}})
    assert aset.name == "conf-avset" and aset.sku.name == "Aligned", aset
    assert aset.platform_fault_domain_count == 2, aset.platform_fault_domain_count
    got = sets.get(RG, "conf-avset")
    assert got.id == aset.id and got.platform_update_domain_count == 5, got
    print("availability set: ok")
    return aset


def check_disks(comp):
    disks = comp.disks
    disk = done(disks.begin_create_or_update(RG, "conf-disk-1", {"location": LOCATION, "sku": {"name": "Standard_LRS"},
        "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 4}}))
    assert disk.disk_size_gb == 4 and disk.provisioning_state == "Succeeded", disk
    assert disk.disk_state == "Unattached" and disk.managed_by is None, (disk.disk_state, disk.managed_by)
    assert disk.unique_id and disk.time_created is not None, disk
    grown = done(disks.begin_update(RG, "conf-disk-1", {"properties": {"diskSizeGB": 8}}))
    assert grown.disk_size_gb == 8, grown.disk_size_gb
    assert disks.get(RG, "conf-disk-1").disk_size_bytes == 8 * 1024 ** 3, "diskSizeBytes after growing"
    refused("shrinking a disk", 400, lambda: disks.begin_update(RG, "conf-disk-1", {"properties": {"diskSizeGB": 2}}),
            text="diskSizeGB")
    refused("createOption Copy", 400, lambda: disks.begin_create_or_update(RG, "conf-disk-bad", {
        "location": LOCATION, "properties": {"creationData": {"createOption": "Copy"}, "diskSizeGB": 4}}))
    print("disk: ok")
    return grown


def vm_body(nic_id, aset_id, disk_id, size="Standard_B1s"):
    return {"location": LOCATION, "properties": {
        "hardwareProfile": {"vmSize": size},
        "availabilitySet": {"id": aset_id},
        "osProfile": {"computerName": "conf-vm-1", "adminUsername": "azureuser", "adminPassword": "Conformance-Pw-1!"},
        "storageProfile": {
            "imageReference": {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy",
                               "sku": "22_04-lts-gen2", "version": "latest"},
            "osDisk": {"createOption": "FromImage", "managedDisk": {"storageAccountType": "Standard_LRS"}},
            "dataDisks": [{"lun": 0, "createOption": "Attach", "managedDisk": {"id": disk_id}}] if disk_id else []},
        "networkProfile": {"networkInterfaces": [{"id": nic_id, "properties": {"primary": True}}]}}}


def check_vm(net, comp, nic, aset, disk):
    vms = comp.virtual_machines
    vm = done(vms.begin_create_or_update(RG, "conf-vm-1", vm_body(nic.id, aset.id, disk.id)))
    assert vm.provisioning_state == "Succeeded", vm.provisioning_state
    assert vm.vm_id, "vmId"
    assert vm.type == "Microsoft.Compute/virtualMachines" and vm.zones in (None, []), vm
    assert vm.hardware_profile.vm_size == "Standard_B1s", vm.hardware_profile
    assert vm.os_profile.computer_name == "conf-vm-1" and vm.os_profile.admin_password is None, vm.os_profile
    assert vm.storage_profile.os_disk.name, "osDisk.name"
    dd = vm.storage_profile.data_disks
    assert len(dd) == 1 and dd[0].lun == 0 and same_id(dd[0].managed_disk.id, disk.id), dd
    assert same_id(vm.availability_set.id, aset.id), vm.availability_set
    viewed = vms.get(RG, "conf-vm-1", expand="instanceView")
    codes = [s.code for s in viewed.instance_view.statuses]
    assert "PowerState/running" in codes and "ProvisioningState/succeeded" in codes, codes
    attached = comp.disks.get(RG, "conf-disk-1")
    assert attached.disk_state == "Attached" and same_id(attached.managed_by, vm.id), (attached.disk_state, attached.managed_by)
    assert same_id(net.network_interfaces.get(RG, "conf-nic-1").virtual_machine.id, vm.id), "NIC's virtualMachine"
    members = comp.availability_sets.get(RG, "conf-avset").virtual_machines or []
    assert any(same_id(m.id, vm.id) for m in members), members
    view = vms.instance_view(RG, "conf-vm-1")
    assert view.computer_name == "conf-vm-1", view.computer_name
    assert view.platform_fault_domain in (0, 1), view.platform_fault_domain
    assert power_state(comp, "conf-vm-1") == ["PowerState/running"]

    assert done(vms.begin_power_off(RG, "conf-vm-1")) is None
    assert power_state(comp, "conf-vm-1") == ["PowerState/stopped"], power_state(comp, "conf-vm-1")
    refused("restart of a stopped VM", 409, lambda: vms.begin_restart(RG, "conf-vm-1"), code="OperationNotAllowed")
    done(vms.begin_deallocate(RG, "conf-vm-1"))
    assert power_state(comp, "conf-vm-1") == ["PowerState/deallocated"], power_state(comp, "conf-vm-1")
    done(vms.begin_start(RG, "conf-vm-1"))
    assert power_state(comp, "conf-vm-1") == ["PowerState/running"], power_state(comp, "conf-vm-1")
    done(vms.begin_restart(RG, "conf-vm-1"))
    assert power_state(comp, "conf-vm-1") == ["PowerState/running"], power_state(comp, "conf-vm-1")

    refused("deleting a NIC in use", 400, lambda: net.network_interfaces.begin_delete(RG, "conf-nic-1"), code="NicInUse")
    refused("deleting an attached disk", 409, lambda: comp.disks.begin_delete(RG, "conf-disk-1"),
            code="OperationNotAllowed")
    refused("a NIC used by another VM", 400, lambda: vms.begin_create_or_update(
        RG, "conf-vm-2", vm_body(nic.id, aset.id, None)), code="NicInUse")

    read = vms.get(RG, "conf-vm-1")
    read.storage_profile.data_disks = []
    detached = done(vms.begin_create_or_update(RG, "conf-vm-1", read))
    assert not detached.storage_profile.data_disks, detached.storage_profile.data_disks
    free = comp.disks.get(RG, "conf-disk-1")
    assert free.disk_state == "Unattached" and free.managed_by is None, (free.disk_state, free.managed_by)

    sizes = {s.name: s for s in comp.virtual_machine_sizes.list(LOCATION)}
    assert "Standard_B1s" in sizes, sorted(sizes)
    assert sizes["Standard_B1s"].number_of_cores == 1, sizes["Standard_B1s"]
    assert sizes["Standard_B1s"].memory_in_mb and sizes["Standard_B1s"].max_data_disk_count, sizes["Standard_B1s"]
    nic2 = net.network_interfaces.get(RG, "conf-nic-2")
    refused("vmSize Standard_Nope", 400, lambda: vms.begin_create_or_update(
        RG, "conf-vm-bad", vm_body(nic2.id, aset.id, None, size="Standard_Nope")), code="InvalidParameter", text="vmSize")

    done(vms.begin_delete(RG, "conf-vm-1"))
    absent("a deleted VM", lambda: vms.get(RG, "conf-vm-1"))
    left = net.network_interfaces.get(RG, "conf-nic-1")
    assert left.virtual_machine is None, f"NIC still names {left.virtual_machine}"
    assert comp.disks.get(RG, "conf-disk-1").disk_state == "Unattached", "disk after VM delete"
    print("vm: ok")


def check_missing(net):
    absent("a missing NIC", lambda: net.network_interfaces.get(RG, "nope"), code="ResourceNotFound")
    assert done(net.network_interfaces.begin_delete(RG, "nope")) is None  # ARM: DELETE of a missing resource -> 204
    absent("a missing subnet", lambda: net.subnets.get(RG, VNET, "nope"), code="NotFound")
    print("missing: ok")


def cleanup(net, comp, strict):
    steps = [
        ("vm conf-vm-1", lambda: comp.virtual_machines.begin_delete(RG, "conf-vm-1")),
        ("vm conf-vm-2", lambda: comp.virtual_machines.begin_delete(RG, "conf-vm-2")),
        ("vm conf-vm-bad", lambda: comp.virtual_machines.begin_delete(RG, "conf-vm-bad")),
        ("nic conf-nic-1", lambda: net.network_interfaces.begin_delete(RG, "conf-nic-1")),
        ("nic conf-nic-2", lambda: net.network_interfaces.begin_delete(RG, "conf-nic-2")),
        ("public ip conf-pip-1", lambda: net.public_ip_addresses.begin_delete(RG, "conf-pip-1")),
        ("public ip conf-pip-2", lambda: net.public_ip_addresses.begin_delete(RG, "conf-pip-2")),
        ("disk conf-disk-1", lambda: comp.disks.begin_delete(RG, "conf-disk-1")),
        ("availability set conf-avset", lambda: comp.availability_sets.delete(RG, "conf-avset")),
        ("nsg conf-nsg", lambda: net.network_security_groups.begin_delete(RG, "conf-nsg")),
        ("route table conf-rt", lambda: net.route_tables.begin_delete(RG, "conf-rt")),
        ("vnet", lambda: net.virtual_networks.begin_delete(RG, VNET)),
    ]
    for what, call in steps:
        try:
            answer = call()
            if hasattr(answer, "result"):
                answer.result(timeout=LRO_TIMEOUT)
        except Exception as e:  # pylint: disable=broad-except
            if strict:
                raise AssertionError(f"cleanup: deleting {what} failed: {e}") from e
            print(f"cleanup: deleting {what} failed: {e}", file=sys.stderr)
    if strict:
        assert list(net.virtual_networks.list(RG)) == [], "vnets left after cleanup"
        assert list(comp.disks.list_by_resource_group(RG)) == [], "disks left after cleanup"


def main():
    assert ENDPOINT.startswith("https://"), ENDPOINT
    cred = ClientSecretCredential(TENANT, CLIENT, SECRET, authority=ENDPOINT, disable_instance_discovery=True)
    subs = list(SubscriptionClient(cred, base_url=ENDPOINT).subscriptions.list())
    assert len(subs) == 1, subs
    sid = subs[0].subscription_id
    groups = ResourceManagementClient(cred, sid, base_url=ENDPOINT).resource_groups
    net = NetworkManagementClient(cred, sid, base_url=ENDPOINT)
    comp = ComputeManagementClient(cred, sid, base_url=ENDPOINT)
    if groups.check_existence(RG):
        groups.begin_delete(RG).result(timeout=LRO_TIMEOUT)
    groups.create_or_update(RG, {"location": LOCATION})
    ok = False
    try:
        refused("a vnet in a missing group", 404, lambda: net.virtual_networks.begin_create_or_update(
            "no-such-rg", VNET, {"location": LOCATION, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}}),
            code="ResourceGroupNotFound")
        vnet = check_vnet(net)
        pip = check_public_ips(net)
        nsg = check_nsg(net)
        check_route_table(net)
        nic = check_nics(net, vnet, pip, nsg)
        aset = check_availability_set(comp)
        disk = check_disks(comp)
        check_vm(net, comp, nic, aset, disk)
        check_missing(net)
        cleanup(net, comp, strict=True)
        ok = True
    finally:
        if not ok:
            cleanup(net, comp, strict=False)
        try:
            groups.begin_delete(RG).result(timeout=LRO_TIMEOUT)
        except Exception as e:  # pylint: disable=broad-except
            if ok:
                raise AssertionError(f"deleting group {RG} failed: {e}") from e
            print(f"cleanup: deleting group {RG} failed: {e}", file=sys.stderr)
    assert groups.check_existence(RG) is False, f"{RG} still exists"
    print("cleanup: ok")
    print("azure resources conformance: ok")


if __name__ == "__main__":
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        print(f"azure resources conformance: FAILED: missing environment: {', '.join(missing)}", file=sys.stderr)
        sys.exit(2)
    # A hang (a poll that never ends) becomes a traceback and a failure, not a stuck test.
    faulthandler.dump_traceback_later(int(os.environ.get("AZURE_CONFORMANCE_TIMEOUT", "600")), exit=True)
    try:
        main()
    except AssertionError as e:
        print(f"azure resources conformance: FAILED: {e}", file=sys.stderr)
        raise
