#!/usr/bin/env python3
"""Exoscale's CloudStack client (PyPI `cs`) against the local cloud's CloudStack dialect.

    cloudstack_conformance.py ENDPOINT API_KEY SECRET_KEY VM_ID

ENDPOINT is the dialect's /client/api; the keys are a user's (hypercloud local-cloud
cloudstack-keys); VM_ID a Running VM of the user's project. Checked, as cs signs, sends and
polls them: listZones and listVirtualMachines (the VM's NIC, offering and zone), by GET and by
POST; associateIpAddress, createLoadBalancerRule, assignToLoadBalancerRule and
createFirewallRule waited for with cs's fetch_result (queryAsyncJobResult polling), and one
job read with queryAsyncJobResult directly; listLoadBalancerRules and listPublicIpAddresses
through cs's paging (fetch_list); a wrong secret and an expired signature refused as cs's
CloudStackApiException with errorcode 401; an unknown command with 432. Prints `ok`.
"""
import sys

from cs import CloudStack, CloudStackApiException


def refused(call, code):
    try:
        call()
    except CloudStackApiException as e:
        assert e.error["errorcode"] == code, e.error
        assert e.response.status_code == code, e.response.status_code
        assert e.error["errortext"], e.error
        return e.error
    raise AssertionError("not refused")


def main():
    endpoint, key, secret, vm_id = sys.argv[1:5]
    cs = CloudStack(endpoint=endpoint, key=key, secret=secret, poll_interval=0.1, job_timeout=20)

    zones = cs.listZones()
    assert zones["count"] >= 1, zones
    zone = zones["zone"][0]
    print("listZones:", [z["name"] for z in zones["zone"]])
    posted = CloudStack(endpoint=endpoint, key=key, secret=secret, method="post").listZones()
    assert posted["zone"][0]["id"] == zone["id"], posted

    vms = cs.listVirtualMachines(id=vm_id)
    assert vms["count"] == 1, vms
    vm = vms["virtualmachine"][0]
    assert vm["state"] == "Running", vm
    assert vm["zoneid"] == zone["id"] and vm["zonename"] == zone["name"], vm
    assert vm["serviceofferingname"], vm
    nic = vm["nic"][0]
    assert nic["isdefault"] and nic["ipaddress"] and nic["networkid"] and nic["macaddress"], nic
    print("listVirtualMachines:", vm["name"], nic["ipaddress"], "on", nic["networkname"])
    by_name = cs.listVirtualMachines(name=vm["name"], fetch_list=True)
    assert [v["id"] for v in by_name] == [vm_id], by_name

    # A public IP, a load-balancer rule to the VM and a firewall rule, each waited for.
    ip = cs.associateIpAddress(networkid=nic["networkid"], fetch_result=True)["ipaddress"]
    assert ip["ipaddress"] and ip["id"], ip
    print("associateIpAddress:", ip["ipaddress"])
    rule = cs.createLoadBalancerRule(
        publicipid=ip["id"], name="conformance", algorithm="roundrobin", privateport=8080,
        publicport=80, protocol="tcp", networkid=nic["networkid"], openfirewall=False,
        fetch_result=True,
    )["loadbalancer"]
    assert rule["publicport"] == "80" and rule["privateport"] == "8080", rule
    assert rule["publicipid"] == ip["id"] and rule["publicip"] == ip["ipaddress"], rule
    done = cs.assignToLoadBalancerRule(id=rule["id"], virtualmachineids=[vm_id], fetch_result=True)
    assert done["success"] is True, done
    fw = cs.createFirewallRule(
        ipaddressid=ip["id"], protocol="tcp", startport=80, endport=80,
        cidrlist=["10.0.0.0/8", "127.0.0.0/8"], fetch_result=True,
    )["firewallrule"]
    assert fw["cidrlist"] == "10.0.0.0/8,127.0.0.0/8" and fw["startport"] == 80, fw
    print("createLoadBalancerRule, assignToLoadBalancerRule, createFirewallRule: done")

    # A job read directly.
    answer = cs.removeFromLoadBalancerRule(id=rule["id"], virtualmachineids=vm_id)
    job = cs.queryAsyncJobResult(jobid=answer["jobid"])
    while job["jobstatus"] == 0:
        job = cs.queryAsyncJobResult(jobid=answer["jobid"])
    assert job["jobstatus"] == 1 and job["jobresultcode"] == 0, job
    assert job["jobresult"]["success"] is True, job

    rules = cs.listLoadBalancerRules(publicipid=ip["id"], fetch_list=True)
    assert [r["id"] for r in rules] == [rule["id"]], rules
    assert rules[0]["name"] == "conformance", rules
    ips = cs.listPublicIpAddresses(id=ip["id"], fetch_list=True)
    assert [i["ipaddress"] for i in ips] == [ip["ipaddress"]], ips
    print("listLoadBalancerRules, listPublicIpAddresses:", len(rules), len(ips))

    # Refusals, as cs raises them.
    wrong = CloudStack(endpoint=endpoint, key=key, secret="not-the-secret")
    refused(wrong.listZones, 401)
    refused(lambda: cs.listZones(signatureVersion="3", expires="2020-01-01T00:00:00+0000"), 401)
    refused(cs.launchRocket, 432)
    print("wrong secret, expired signature, unknown command: refused")

    cs.disassociateIpAddress(id=ip["id"], fetch_result=True)
    assert cs.listPublicIpAddresses(id=ip["id"], fetch_list=True) == []
    print("ok")


if __name__ == "__main__":
    main()
