#!/usr/bin/env python3
"""oVirt's own Python SDK (ovirt-engine-sdk-python 4) against the local cloud's oVirt dialect.

    ovirt_sdk_conformance.py API_URL PASSWORD K8S_FQDN K8S_ID

API_URL is the v4 entry (http://127.0.0.1:PORT/ovirt-engine/api); the cloud holds the VMs
k8s-a (its guest reporting K8S_FQDN, ID K8S_ID) and db-1. Checked, as the SDK sees them:
SSO sign-in, the entry point's product info, listing and searching VMs, one VM's status,
FQDN, memory and creation time, its reported devices' IPs, a search the engine refuses as a
typed error, and a wrong password as the SDK's AuthError. Prints `ok` at the end.
"""
import sys

import ovirtsdk4 as sdk
import ovirtsdk4.types as types


def main():
    url, password, fqdn, vm_id = sys.argv[1:5]
    conn = sdk.Connection(url=url, username="admin@internal", password=password)
    try:
        system = conn.system_service()
        api = system.get()
        assert api.product_info.name == "oVirt Engine", api.product_info.name
        assert api.product_info.version.major == 4, api.product_info.version.major
        print("entry point:", api.product_info.name, api.product_info.version.full_version)

        vms = system.vms_service()
        names = sorted(vm.name for vm in vms.list())
        assert names == ["db-1", "k8s-a"], names
        found = vms.list(search="name=k8s-*")
        assert [vm.name for vm in found] == ["k8s-a"], [vm.name for vm in found]
        assert vms.list(search="status=down") == [], "no VM is down"
        assert len(vms.list(max=1)) == 1
        print("list and search:", names, "-> k8s-* is", [vm.id for vm in found])

        vm = vms.vm_service(vm_id).get()
        assert vm.id == vm_id and vm.name == "k8s-a"
        assert vm.status == types.VmStatus.UP, vm.status
        assert vm.fqdn == fqdn, vm.fqdn
        assert vm.memory > 0 and vm.creation_time is not None
        devices = vms.vm_service(vm_id).reported_devices_service().list()
        ips = [ip.address for d in devices for ip in (d.ips or [])]
        assert ips and all(ip.count(".") == 3 for ips_ in [ips] for ip in ips_), ips
        assert devices[0].ips[0].version == types.IpVersion.V4
        print("vm:", vm.name, vm.status, vm.fqdn, "reported IPs", ips)

        try:
            vms.list(search="cluster=prod")
            raise AssertionError("an unknown search field was accepted")
        except sdk.Error as e:
            assert e.code == 400 and "cluster" in str(e), (e.code, str(e))
            print("refused search:", str(e)[:120])

        try:
            vms.vm_service("00000000-0000-0000-0000-000000000000").get()
            raise AssertionError("a missing VM was found")
        except sdk.NotFoundError as e:
            print("missing VM:", e.code)
    finally:
        conn.close()

    bad = sdk.Connection(url=url, username="admin@internal", password=password + "-wrong")
    try:
        bad.system_service().get()
        raise AssertionError("a wrong password was accepted")
    except sdk.AuthError as e:
        assert "Cannot authenticate user" in str(e), str(e)
        print("wrong password:", str(e)[:100])
    finally:
        bad.close(logout=False)
    print("ok")


if __name__ == "__main__":
    main()
