#!/usr/bin/env python3
"""Microsoft's az CLI (azure-cli, pinned in hack/python-tools.sh azure-cli) against a running local
cloud's Azure dialect, as an operator would use it: `az cloud register` with the cloud's endpoints
(read from its /metadata/endpoints), `az login --service-principal`, then network commands that
make what a cluster's load balancer needs (vnet and subnet, security group and rule, public IP,
load balancer with probe and rule, NIC in the pool), a VM through `az rest` (`az vm create` deploys
a template, which the local cloud does not serve), and the reading commands the issue names:
`az vm show -d`, `az vm get-instance-view`, `az vm deallocate`/`start`, `az network lb show`,
`az network nsg rule list`, `az network public-ip show`, `az network nic show`.

Environment as azure_conformance.py, plus AZ (the az executable). Each az call gets its own
AZURE_CONFIG_DIR under a temporary directory, seeded so az makes no call outside (no version
check, no telemetry, no instance discovery: docs/azure-clients.md). Every check is an assert; the
first failure exits non-zero with the command and what it printed.
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

AZ = os.environ.get("AZ", "az")
ENDPOINT = os.environ.get("AZURE_ENDPOINT", "").rstrip("/")
TENANT = os.environ.get("AZURE_TENANT_ID", "")
CLIENT = os.environ.get("AZURE_CLIENT_ID", "")
SECRET = os.environ.get("AZURE_CLIENT_SECRET", "")
LOCATION = os.environ.get("AZURE_LOCATION", "")
RG = "conformance-cli-rg"


def environment(config_dir):
    env = dict(os.environ)
    env.update({
        "AZURE_CONFIG_DIR": config_dir,
        "AZURE_CORE_INSTANCE_DISCOVERY": "false",
        "AZURE_CORE_COLLECT_TELEMETRY": "false",
        "AZURE_CORE_NO_COLOR": "true",
        "AZURE_CORE_ONLY_SHOW_ERRORS": "true",
    })
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    with open(os.path.join(config_dir, "versionCheck.json"), "w", encoding="utf-8") as f:
        json.dump({"versions": {"azure-cli": {"local": "2.91.0"}, "core": {"local": "2.91.0"},
                                "telemetry": {"local": "1.1.0"}}, "update_time": now}, f)
    return env


ENV = None


def az(*args, expect_ok=True):
    """Runs az; its JSON output (or None), or with expect_ok=False the failed run's stderr."""
    run = subprocess.run([AZ, *args, "--output", "json"], env=ENV, capture_output=True, text=True, timeout=120,
                         check=False)
    if expect_ok:
        assert run.returncode == 0, f"az {' '.join(args)} failed ({run.returncode}): {run.stderr}{run.stdout}"
        return json.loads(run.stdout) if run.stdout.strip() else None
    assert run.returncode != 0, f"az {' '.join(args)} succeeded, want a failure: {run.stdout}"
    return run.stderr


def main():
    global ENV  # pylint: disable=global-statement
    with tempfile.TemporaryDirectory() as config_dir:
        ENV = environment(config_dir)
        az("cloud", "register", "-n", "HypercloudLocal", "--endpoint-resource-manager", f"{ENDPOINT}/")
        az("cloud", "set", "-n", "HypercloudLocal")
        shown = az("cloud", "show", "-n", "HypercloudLocal")
        assert shown["endpoints"]["activeDirectory"].rstrip("/") == ENDPOINT, shown["endpoints"]
        wrong = az("login", "--service-principal", "-u", CLIENT, "-p", "wrong", "--tenant", TENANT,
                   expect_ok=False)
        assert "AADSTS7000215" in wrong, wrong
        accounts = az("login", "--service-principal", "-u", CLIENT, "-p", SECRET, "--tenant", TENANT)
        assert len(accounts) == 1 and accounts[0]["tenantId"] == TENANT, accounts
        sid = accounts[0]["id"]
        print("login: ok")
        az("group", "create", "-n", RG, "-l", LOCATION)
        try:
            check(sid)
        finally:
            az("group", "delete", "-n", RG, "--yes")
        assert az("group", "exists", "-n", RG) is False, f"{RG} still exists"
    print("azure cli conformance: ok")


def check(sid):
    g = ["-g", RG]
    az("network", "nsg", "create", *g, "-n", "cli-nsg")
    az("network", "nsg", "rule", "create", *g, "--nsg-name", "cli-nsg", "-n", "http", "--priority", "100",
       "--access", "Allow", "--protocol", "Tcp", "--direction", "Inbound", "--destination-port-ranges", "8080",
       "--source-address-prefixes", "127.0.0.0/8")
    rules = az("network", "nsg", "rule", "list", *g, "--nsg-name", "cli-nsg")
    assert [r["name"] for r in rules] == ["http"] and rules[0]["priority"] == 100, rules
    bad = az("network", "nsg", "rule", "create", *g, "--nsg-name", "cli-nsg", "-n", "low", "--priority", "50",
             "--access", "Allow", "--protocol", "Tcp", expect_ok=False)
    assert "SecurityRuleInvalidPriority" in bad, bad
    az("network", "vnet", "create", *g, "-n", "cli-vnet", "--address-prefixes", "127.4.0.0/16",
       "--subnet-name", "nodes", "--subnet-prefixes", "127.4.1.0/24", "--network-security-group", "cli-nsg")
    subnet = az("network", "vnet", "subnet", "show", *g, "--vnet-name", "cli-vnet", "-n", "nodes")
    assert subnet["addressPrefix"] == "127.4.1.0/24", subnet
    assert subnet["networkSecurityGroup"]["id"].lower().endswith("/networksecuritygroups/cli-nsg"), subnet
    pip = az("network", "public-ip", "create", *g, "-n", "cli-pip", "--sku", "Standard",
             "--allocation-method", "Static", "--dns-name", "cli-app")
    pip = pip.get("publicIp", pip)
    assert pip["ipAddress"] and pip["dnsSettings"]["fqdn"] == f"cli-app.{LOCATION}.cloudapp.azure.com", pip
    # `az network lb create` deploys a template (Microsoft.Resources/deployments), which the local
    # cloud does not serve: the load balancer is put with `az rest`, then shaped by az's own
    # frontend, pool, probe and rule commands.
    lb_url = (f"{ENDPOINT}/subscriptions/{sid}/resourceGroups/{RG}/providers/Microsoft.Network/loadBalancers/"
              f"cli-lb?api-version=2024-05-01")
    az("rest", "--method", "put", "--url", lb_url, "--body", json.dumps(
        {"location": LOCATION, "sku": {"name": "Standard"}, "properties": {}}))
    az("network", "lb", "frontend-ip", "create", *g, "--lb-name", "cli-lb", "-n", "fe",
       "--public-ip-address", pip["id"])
    az("network", "lb", "address-pool", "create", *g, "--lb-name", "cli-lb", "-n", "be")
    az("network", "lb", "probe", "create", *g, "--lb-name", "cli-lb", "-n", "tcp", "--protocol", "Tcp",
       "--port", "8080")
    az("network", "lb", "rule", "create", *g, "--lb-name", "cli-lb", "-n", "http", "--protocol", "Tcp",
       "--frontend-port", "80", "--backend-port", "8080", "--frontend-ip-name", "fe",
       "--backend-pool-name", "be", "--probe-name", "tcp")
    az("network", "nic", "create", *g, "-n", "cli-nic", "--vnet-name", "cli-vnet", "--subnet", "nodes",
       "--lb-name", "cli-lb", "--lb-address-pools", "be")
    lb = az("network", "lb", "show", *g, "-n", "cli-lb")
    assert lb["sku"]["name"] == "Standard", lb["sku"]
    assert [r["name"] for r in lb["loadBalancingRules"]] == ["http"], lb["loadBalancingRules"]
    assert lb["loadBalancingRules"][0]["backendPort"] == 8080, lb["loadBalancingRules"]
    members = lb["backendAddressPools"][0].get("backendIPConfigurations", [])
    assert len(members) == 1 and "/networkinterfaces/cli-nic/" in members[0]["id"].lower(), members
    shown = az("network", "public-ip", "show", *g, "-n", "cli-pip")
    assert shown["ipConfiguration"]["id"].lower().endswith("/loadbalancers/cli-lb/frontendipconfigurations/fe"), shown
    print("network: ok")

    nic = az("network", "nic", "show", *g, "-n", "cli-nic")
    vm_url = (f"{ENDPOINT}/subscriptions/{sid}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines/"
              f"cli-vm?api-version=2024-07-01")
    body = {"location": LOCATION, "properties": {
        "hardwareProfile": {"vmSize": "Standard_B2s"},
        "osProfile": {"computerName": "cli-node-1", "adminUsername": "azureuser", "adminPassword": "Passw0rd!local"},
        "storageProfile": {"imageReference": {"publisher": "Canonical", "offer": "ubuntu-24_04-lts",
                                              "sku": "server", "version": "latest"}},
        "networkProfile": {"networkInterfaces": [{"id": nic["id"], "properties": {"primary": True}}]}}}
    az("rest", "--method", "put", "--url", vm_url, "--body", json.dumps(body))
    vm = az("vm", "show", *g, "-n", "cli-vm", "-d")
    assert vm["powerState"] == "VM running", vm.get("powerState")
    assert vm["privateIps"] == nic["ipConfigurations"][0]["privateIPAddress"], (vm["privateIps"], nic)
    assert vm["hardwareProfile"]["vmSize"] == "Standard_B2s", vm["hardwareProfile"]
    assert "adminPassword" not in vm["osProfile"], "the password is shown"
    az("vm", "deallocate", *g, "-n", "cli-vm")
    view = az("vm", "get-instance-view", *g, "-n", "cli-vm")
    codes = [s["code"] for s in view["instanceView"]["statuses"]]
    assert "PowerState/deallocated" in codes, codes
    az("vm", "start", *g, "-n", "cli-vm")
    assert az("vm", "show", *g, "-n", "cli-vm", "-d")["powerState"] == "VM running"
    listed = az("vm", "list", *g)
    assert [v["name"] for v in listed] == ["cli-vm"], listed
    print("vm: ok")
    az("vm", "delete", *g, "-n", "cli-vm", "--yes")
    assert az("vm", "list", *g) == [], "the VM is still listed"


if __name__ == "__main__":
    missing = [n for n in ("AZURE_ENDPOINT", "AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
                           "AZURE_LOCATION") if not os.environ.get(n)]
    if missing:
        print(f"azure cli conformance: FAILED: missing environment: {', '.join(missing)}", file=sys.stderr)
        sys.exit(2)
    main()
