#!/usr/bin/env python3
"""Microsoft's azure-mgmt-network (pinned in hack/python-tools.sh) makes an Azure load balancer
on a running local cloud's Azure dialect, and real traffic goes through it.

Same environment as azure_conformance.py. In a group "conformance-lb-rg" (deleted first if left
over, always deleted at the end): a virtual network on loopback addresses (the local cloud
forwards to addresses this machine has), a security group letting 127.0.0.0/8 reach port 8080,
a Standard public IP, a Standard load balancer (frontend on the public IP, a backend pool, a TCP
probe, a rule 80 -> 8080), a NIC with a static address in the pool. A TCP server this script
runs on the NIC's address answers through the public IP's port 80; the pool lists the NIC's IP
configuration and the public IP its frontend; a security rule that no longer admits 127.0.0.0/8
closes the way, and admitting it again opens it. Refused as ARM refuses them: a Basic public IP
on a Standard load balancer, a rule naming a probe the load balancer lacks, protocol All, the
public IP's deletion while the frontend holds it, and the pool's removal while the NIC names it.
"""
import faulthandler
import os
import socket
import socketserver
import sys
import threading
import time

from azure.identity import ClientSecretCredential
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource import ResourceManagementClient, SubscriptionClient

from azure_resources_conformance import LRO_TIMEOUT, done, refused, same_id

ENDPOINT = os.environ.get("AZURE_ENDPOINT", "")
TENANT = os.environ.get("AZURE_TENANT_ID", "")
CLIENT = os.environ.get("AZURE_CLIENT_ID", "")
SECRET = os.environ.get("AZURE_CLIENT_SECRET", "")
LOCATION = os.environ.get("AZURE_LOCATION", "")
RG = "conformance-lb-rg"
BACKEND_IP = "127.3.1.10"
BACKEND_PORT = 8080
GREETING = b"hello from the backend\n"


class Greeter(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(GREETING)


def serve_backend():
    server = socketserver.ThreadingTCPServer((BACKEND_IP, BACKEND_PORT), Greeter, bind_and_activate=False)
    server.allow_reuse_address = True
    server.daemon_threads = True
    server.server_bind()
    server.server_activate()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def greeting(address, port):
    """What a connection to address:port reads, or None when it gets nothing."""
    try:
        with socket.create_connection((address, port), timeout=2) as s:
            s.settimeout(2)
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(1024)
                if not chunk:
                    break
                data += chunk
            return data or None
    except OSError:
        return None


def wait_until(what, check, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout}s")


def main():
    cred = ClientSecretCredential(TENANT, CLIENT, SECRET, authority=ENDPOINT, disable_instance_discovery=True)
    sid = list(SubscriptionClient(cred, base_url=ENDPOINT).subscriptions.list())[0].subscription_id
    groups = ResourceManagementClient(cred, sid, base_url=ENDPOINT).resource_groups
    net = NetworkManagementClient(cred, sid, base_url=ENDPOINT)
    if groups.check_existence(RG):
        groups.begin_delete(RG).result(timeout=LRO_TIMEOUT)
    groups.create_or_update(RG, {"location": LOCATION})
    backend = serve_backend()
    try:
        check(net, sid)
    finally:
        backend.shutdown()
        groups.begin_delete(RG).result(timeout=LRO_TIMEOUT)
    assert groups.check_existence(RG) is False, f"{RG} still exists"
    print("azure lb conformance: ok")


def nsg_body(source):
    return {"location": LOCATION, "properties": {"securityRules": [{"name": "backend", "properties": {
        "protocol": "Tcp", "sourcePortRange": "*", "destinationPortRange": str(BACKEND_PORT),
        "sourceAddressPrefix": source, "destinationAddressPrefix": "*", "access": "Allow",
        "priority": 100, "direction": "Inbound"}}]}}


def check(net, sid):
    base = f"/subscriptions/{sid}/resourceGroups/{RG}/providers/Microsoft.Network"
    nsg = done(net.network_security_groups.begin_create_or_update(RG, "lb-nsg", nsg_body("127.0.0.0/8")))
    vnet = done(net.virtual_networks.begin_create_or_update(RG, "lb-vnet", {"location": LOCATION, "properties": {
        "addressSpace": {"addressPrefixes": ["127.3.0.0/16"]},
        "subnets": [{"name": "backends", "properties": {"addressPrefix": "127.3.1.0/24",
                                                       "networkSecurityGroup": {"id": nsg.id}}}]}}))
    pip = done(net.public_ip_addresses.begin_create_or_update(RG, "lb-pip", {
        "location": LOCATION, "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}}))
    basic = done(net.public_ip_addresses.begin_create_or_update(RG, "lb-basic-pip", {"location": LOCATION}))
    lb_id = f"{base}/loadBalancers/lb"

    def lb_body(pip_id, probe="tcp-8080", protocol="Tcp"):
        return {"location": LOCATION, "sku": {"name": "Standard"}, "properties": {
            "frontendIPConfigurations": [{"name": "fe", "properties": {"publicIPAddress": {"id": pip_id}}}],
            "backendAddressPools": [{"name": "be"}],
            "probes": [{"name": "tcp-8080", "properties": {"protocol": "Tcp", "port": BACKEND_PORT,
                                                         "intervalInSeconds": 5, "numberOfProbes": 1}}],
            "loadBalancingRules": [{"name": "http", "properties": {
                "frontendIPConfiguration": {"id": f"{lb_id}/frontendIPConfigurations/fe"},
                "backendAddressPool": {"id": f"{lb_id}/backendAddressPools/be"},
                "probe": {"id": f"{lb_id}/probes/{probe}"},
                "protocol": protocol, "frontendPort": 80, "backendPort": BACKEND_PORT}}]}}

    refused("a Basic public IP on a Standard load balancer", 400,
            lambda: net.load_balancers.begin_create_or_update(RG, "lb", lb_body(basic.id)),
            code="LoadBalancerReferencesPublicIPAddressWithDifferentSku")
    refused("a rule naming a missing probe", 400,
            lambda: net.load_balancers.begin_create_or_update(RG, "lb", lb_body(pip.id, probe="nope")),
            code="InvalidResourceReference")
    refused("protocol All", 400,
            lambda: net.load_balancers.begin_create_or_update(RG, "lb", lb_body(pip.id, protocol="All")))
    lb = done(net.load_balancers.begin_create_or_update(RG, "lb", lb_body(pip.id)))
    assert lb.provisioning_state == "Succeeded" and lb.sku.name == "Standard", lb
    assert same_id(lb.load_balancing_rules[0].probe.id, f"{lb_id}/probes/tcp-8080"), lb.load_balancing_rules
    assert same_id(net.public_ip_addresses.get(RG, "lb-pip").ip_configuration.id,
                   f"{lb_id}/frontendIPConfigurations/fe"), "the public IP does not name its frontend"
    refused("deleting the public IP the frontend holds", 400,
            lambda: net.public_ip_addresses.begin_delete(RG, "lb-pip"), code="PublicIPAddressInUse")

    nic = done(net.network_interfaces.begin_create_or_update(RG, "lb-nic", {"location": LOCATION, "properties": {
        "ipConfigurations": [{"name": "ipconfig1", "properties": {
            "subnet": {"id": vnet.subnets[0].id}, "privateIPAllocationMethod": "Static",
            "privateIPAddress": BACKEND_IP,
            "loadBalancerBackendAddressPools": [{"id": f"{lb_id}/backendAddressPools/be"}]}}]}}))
    assert nic.ip_configurations[0].private_ip_address == BACKEND_IP, nic.ip_configurations[0]
    pool = net.load_balancer_backend_address_pools.get(RG, "lb", "be")
    members = [c.id for c in pool.backend_ip_configurations or []]
    assert len(members) == 1 and same_id(members[0], nic.ip_configurations[0].id), members
    print("load balancer: ok")

    address = net.public_ip_addresses.get(RG, "lb-pip").ip_address
    assert greeting(BACKEND_IP, BACKEND_PORT) == GREETING, "the backend does not answer directly"
    wait_until(f"{address}:80 forwarding to the backend", lambda: greeting(address, 80) == GREETING)
    print("traffic: ok")

    done(net.network_security_groups.begin_create_or_update(RG, "lb-nsg", nsg_body("10.0.0.0/8")))
    wait_until("the security group closing the way", lambda: greeting(address, 80) is None)
    done(net.network_security_groups.begin_create_or_update(RG, "lb-nsg", nsg_body("127.0.0.0/8")))
    wait_until("the security group opening it again", lambda: greeting(address, 80) == GREETING)
    print("security group: ok")

    body = lb_body(pip.id)
    body["properties"]["backendAddressPools"] = []
    body["properties"]["loadBalancingRules"][0]["properties"].pop("backendAddressPool")
    refused("removing the pool the NIC names", 400,
            lambda: net.load_balancers.begin_create_or_update(RG, "lb", body),
            code="InUseBackendAddressPoolCannotBeDeleted")
    nic_body = net.network_interfaces.get(RG, "lb-nic")
    nic_body.ip_configurations[0].load_balancer_backend_address_pools = []
    done(net.network_interfaces.begin_create_or_update(RG, "lb-nic", nic_body))
    wait_until("the rule without members", lambda: greeting(address, 80) is None)
    done(net.load_balancers.begin_delete(RG, "lb"))
    assert net.public_ip_addresses.get(RG, "lb-pip").ip_configuration is None, "the frontend still holds the IP"
    done(net.public_ip_addresses.begin_delete(RG, "lb-pip"))
    print("teardown: ok")


if __name__ == "__main__":
    missing = [n for n in ("AZURE_ENDPOINT", "AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
                           "AZURE_LOCATION") if not os.environ.get(n)]
    if missing:
        print(f"azure lb conformance: FAILED: missing environment: {', '.join(missing)}", file=sys.stderr)
        sys.exit(2)
    faulthandler.dump_traceback_later(int(os.environ.get("AZURE_CONFORMANCE_TIMEOUT", "300")), exit=True)
    main()
