#!/usr/bin/env python3
"""openstacksdk (pinned in hack/python-tools.sh) against a running local cloud.

Run by cmd/hypercloud/tests/it/local_cloud_openstacksdk.rs with OS_CLIENT_CONFIG_FILE and
OS_CLOUD pointing at the clouds.yaml `hypercloud local-cloud serve` writes. Every check is an
assert; the first failure exits non-zero with its message. Covers: Neutron ports, floating
IPs and security groups with their rules (create, read, update, delete, list with filters), Octavia load balancers, listeners, pools,
members and health monitors (the same, plus the single-call create of the whole tree), a
floating IP on a load balancer's VIP port carrying real TCP traffic, and the timestamp forms
strict parsers expect.
"""
import datetime
import socket
import sys
import threading
import time

import openstack

OCTAVIA_TIME = "%Y-%m-%dT%H:%M:%S"
NEUTRON_TIME = "%Y-%m-%dT%H:%M:%SZ"


def backend(name):
    """A TCP server on 127.0.0.1 answering every connection with `name`."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def serve():
        while True:
            conn, _ = srv.accept()
            conn.sendall(name.encode())
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ask(addr, port):
    with socket.create_connection((addr, port), timeout=5) as s:
        s.settimeout(5)
        out = b""
        while True:
            chunk = s.recv(1024)
            if not chunk:
                return out.decode()
            out += chunk


def eventually(what, check, timeout=10.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def strict_time(value, fmt, what):
    try:
        datetime.datetime.strptime(value, fmt)
    except (TypeError, ValueError) as e:
        raise AssertionError(f"{what}: {value!r} does not parse as {fmt}: {e}")


def main():
    conn = openstack.connect()
    lbapi = conn.load_balancer
    net = conn.network

    private = net.find_network("private", ignore_missing=False)
    public = net.find_network("public", ignore_missing=False)
    subnet = net.find_subnet("private-subnet", ignore_missing=False)
    assert public.is_router_external, public

    # ---- Neutron ports: CRUD and filtered lists ---------------------------------------------
    port = net.create_port(network_id=private.id, name="sdk-port")
    assert port.fixed_ips and port.fixed_ips[0]["subnet_id"] == subnet.id, port
    strict_time(port.created_at, NEUTRON_TIME, "port created_at")
    port = net.update_port(port, name="sdk-port-2")
    assert net.get_port(port.id).name == "sdk-port-2"
    assert [p.id for p in net.ports(name="sdk-port-2")] == [port.id]
    assert list(net.ports(name="no-such-port")) == []
    net.delete_port(port)
    assert net.find_port(port.id) is None

    # ---- Neutron security groups and rules: CRUD, filtered by name -----------------------------
    sg = net.create_security_group(name="sdk-sg", description="by openstacksdk")
    assert len(sg.security_group_rules) == 2, sg  # the default egress rules
    rule = net.create_security_group_rule(
        security_group_id=sg.id, direction="ingress", protocol="tcp",
        port_range_min=8080, port_range_max=8080, remote_ip_prefix="127.0.0.0/8")
    assert net.get_security_group_rule(rule.id).port_range_min == 8080
    assert [g.id for g in net.security_groups(name="sdk-sg")] == [sg.id]
    assert list(net.security_groups(name="no-such-group")) == []
    assert [r.id for r in net.security_group_rules(security_group_id=sg.id, direction="ingress")] == [rule.id]
    sg = net.update_security_group(sg, description="changed")
    assert net.get_security_group(sg.id).description == "changed"
    net.delete_security_group_rule(rule)
    assert net.find_security_group_rule(rule.id) is None
    net.delete_security_group(sg)
    assert net.find_security_group("sdk-sg") is None
    # The project's default group, which a port naming no group gets.
    default = net.find_security_group("default")
    assert default is not None and len(default.security_group_rules) == 4, default
    port = net.create_port(network_id=private.id, name="sdk-port-default")
    assert port.security_group_ids == [default.id], port
    net.delete_port(port)

    # ---- Octavia: single-call create of the whole tree ----------------------------------------
    alpha, bravo = backend("alpha"), backend("bravo")
    lport = free_port()
    member = lambda p: {"address": "127.0.0.1", "protocol_port": p}  # noqa: E731
    lb = lbapi.create_load_balancer(
        name="sdk-lb",
        vip_network_id=private.id,
        listeners=[{
            "name": "sdk-listener", "protocol": "TCP", "protocol_port": lport,
            "default_pool": {
                "name": "sdk-pool", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
                "members": [member(alpha), member(bravo)],
                "healthmonitor": {"type": "TCP", "delay": 1, "timeout": 1, "max_retries": 1},
            },
        }],
    )
    assert lb.provisioning_status == "PENDING_CREATE", lb
    assert len(lb.listeners) == 1 and len(lb.pools) == 1, lb
    lb = lbapi.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    assert lb.provisioning_status == "ACTIVE", lb
    strict_time(lb.created_at, OCTAVIA_TIME, "load balancer created_at")

    # Read and list with filters.
    assert [x.id for x in lbapi.load_balancers(name="sdk-lb")] == [lb.id]
    assert [x.id for x in lbapi.load_balancers(vip_port_id=lb.vip_port_id)] == [lb.id]
    assert list(lbapi.load_balancers(name="other")) == []
    listener = lbapi.find_listener("sdk-listener", ignore_missing=False)
    assert listener.protocol_port == lport and listener.load_balancers[0]["id"] == lb.id
    pool = lbapi.find_pool("sdk-pool", ignore_missing=False)
    assert listener.default_pool_id == pool.id
    members = list(lbapi.members(pool))
    assert sorted(m.protocol_port for m in members) == sorted([alpha, bravo]), members
    # Pages of one, followed through the members_links / ports_links the SDK reads: everything.
    assert sorted(m.id for m in lbapi.members(pool, limit=1)) == sorted(m.id for m in members)
    all_ports = sorted(p.id for p in net.ports())
    assert len(all_ports) > 2 and sorted(p.id for p in net.ports(limit=2)) == all_ports
    for m in members:
        strict_time(m.created_at, OCTAVIA_TIME, "member created_at")
        strict_time(m.updated_at, OCTAVIA_TIME, "member updated_at")
    assert [m.protocol_port for m in lbapi.members(pool, protocol_port=alpha)] == [alpha]
    monitors = list(lbapi.health_monitors())
    assert len(monitors) == 1 and monitors[0].pools[0]["id"] == pool.id, monitors
    strict_time(monitors[0].created_at, OCTAVIA_TIME, "health monitor created_at")
    strict_time(listener.created_at, OCTAVIA_TIME, "listener created_at")
    strict_time(pool.created_at, OCTAVIA_TIME, "pool created_at")

    # Update.
    lbapi.update_load_balancer(lb, description="updated by openstacksdk")
    lb = lbapi.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    assert lbapi.get_load_balancer(lb.id).description == "updated by openstacksdk"
    assert [x.id for x in lbapi.load_balancers(description="updated by openstacksdk")] == [lb.id]
    lbapi.update_listener(listener, connection_limit=100)
    lbapi.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    assert lbapi.get_listener(listener.id).connection_limit == 100

    # Members one at a time.
    charlie = backend("charlie")
    m = lbapi.create_member(pool, address="127.0.0.1", protocol_port=charlie, weight=2)
    lbapi.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    lbapi.update_member(m, pool, weight=3)
    lbapi.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    assert lbapi.get_member(m, pool).weight == 3
    lbapi.delete_member(m, pool)
    lbapi.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    assert len(list(lbapi.members(pool))) == 2

    # ---- The VIP port and a floating IP on it ----------------------------------------------------
    vip_port = net.get_port(lb.vip_port_id)
    assert vip_port.device_owner == "Octavia", vip_port
    assert vip_port.fixed_ips[0]["ip_address"] == lb.vip_address, vip_port
    fip = net.create_ip(floating_network_id=public.id, port_id=lb.vip_port_id)
    assert fip.fixed_ip_address == lb.vip_address, fip
    assert [f.id for f in net.ips(port_id=lb.vip_port_id)] == [fip.id]
    seen = set()

    def through_fip():
        seen.add(ask(fip.floating_ip_address, lport))
        return {"alpha", "bravo"} <= seen

    eventually("traffic to both members through the floating IP", through_fip)
    net.update_ip(fip, port_id=None)
    assert net.get_ip(fip.id).port_id is None

    def refused():
        try:
            ask(fip.floating_ip_address, lport)
            return False
        except OSError:
            return True

    eventually("the floating IP to stop forwarding", refused)
    net.update_ip(fip, port_id=lb.vip_port_id)
    eventually("traffic through the re-associated floating IP",
               lambda: ask(fip.floating_ip_address, lport) in ("alpha", "bravo"))

    # ---- Delete: cascade, the VIP port goes, the floating IP stays unassociated -----------------
    lbapi.delete_load_balancer(lb, cascade=True)
    lbapi.wait_for_delete(lb, interval=0.2, wait=30)
    assert net.find_port(lb.vip_port_id) is None
    assert net.get_ip(fip.id).port_id is None
    net.delete_ip(fip)
    assert list(lbapi.pools()) == [] and list(lbapi.listeners()) == []
    print("openstacksdk conformance: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"openstacksdk conformance: FAILED: {e}", file=sys.stderr)
        raise
