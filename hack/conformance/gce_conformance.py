#!/usr/bin/env python3
"""Google's official Compute Engine client (google-cloud-compute, pinned in hack/python-tools.sh)
against a running local cloud's GCE dialect.

Run by cmd/hypercloud/tests/it/local_cloud_gce.rs with GCE_ENDPOINT (the API URL), GCE_PROJECT,
GCE_ZONE and GCE_REGION set, and GCE_METADATA (the metadata listener's URL). The client uses its
REST transport with the endpoint overridden and anonymous credentials. Every check is an
assert; the first failure exits non-zero with its message. Covers: the project and its
commonInstanceMetadata, zones and regions, instances (insert with a fixed networkIP and an
access config, get, list with a filter, aggregatedList, setMetadata with fingerprints, stop,
start, delete), operations (the insert's extended operation completes; get and wait),
firewalls, routes to an instance, addresses, target pools with addInstance/removeInstance,
forwarding rules carrying real HTTP traffic to a target pool's instance while a firewall allows
it (and none once the firewall or the instance is removed), internal load balancing (instance
groups with add/remove/listInstances, TCP health checks, INTERNAL regional backend services
updated in place under their fingerprint, INTERNAL forwarding rules carrying real HTTP to a
group's instance, network tiers), HTTP health checks (by hand: the library dropped that legacy collection), persistent disks
(insert, attachDisk/detachDisk, resize, delete refused while in use), GCE's error shape (404 notFound, 409 alreadyExists,
412 on a stale fingerprint), timestamps, and the metadata server an instance sees.
"""
import datetime
import json
import os
import sys
import urllib.error
import urllib.request

from google.api_core import exceptions
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

ENDPOINT = os.environ["GCE_ENDPOINT"]
PROJECT = os.environ["GCE_PROJECT"]
ZONE = os.environ["GCE_ZONE"]
REGION = os.environ["GCE_REGION"]
METADATA = os.environ["GCE_METADATA"]
SUFFIX = os.environ.get("GCE_SUFFIX", str(os.getpid()))


def client(cls):
    return cls(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options=ClientOptions(api_endpoint=ENDPOINT),
    )


def expect_error(kind, call):
    try:
        call()
    except kind as e:
        return e
    raise AssertionError(f"expected {kind.__name__}")


def check_timestamp(ts):
    # GCE's form: RFC 3339 with milliseconds and a numeric offset.
    parsed = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f%z")
    assert parsed.utcoffset() is not None, ts
    age = datetime.datetime.now(datetime.timezone.utc) - parsed
    assert abs(age.total_seconds()) < 3600, f"{ts} is not about now"


def metadata(path, instance, headers=None, query=""):
    req = urllib.request.Request(f"{METADATA}/computeMetadata/v1/{path}{query}")
    req.add_header("X-Instance-ID", instance)
    for k, v in (headers if headers is not None else {"Metadata-Flavor": "Google"}).items():
        req.add_header(k, v)
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Metadata-Flavor"] == "Google", resp.headers
        return resp.read().decode()


def http_backend(address, answer):
    """An HTTP server on address:<free port> answering every GET with `answer`."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = answer.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer((address, 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


def fetch(address, port):
    """GET / from address:port: the body, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/", timeout=3) as resp:
            return resp.read().decode()
    except (OSError, urllib.error.URLError):
        return None


def eventually(what, check, timeout=30.0):
    import time

    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.2)


def rest(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{ENDPOINT}/compute/v1/projects/{PROJECT}/{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read().decode())


def main():
    projects = client(compute_v1.ProjectsClient)
    zones = client(compute_v1.ZonesClient)
    regions = client(compute_v1.RegionsClient)
    instances = client(compute_v1.InstancesClient)
    zone_ops = client(compute_v1.ZoneOperationsClient)
    firewalls = client(compute_v1.FirewallsClient)
    routes = client(compute_v1.RoutesClient)
    addresses = client(compute_v1.AddressesClient)
    pools = client(compute_v1.TargetPoolsClient)
    rules = client(compute_v1.ForwardingRulesClient)

    # Project and zones.
    project = projects.get(project=PROJECT)
    assert project.name == PROJECT and int(project.id) > 0, project
    assert ZONE in [z.name for z in zones.list(project=PROJECT)]
    zone = zones.get(project=PROJECT, zone=ZONE)
    assert zone.status == "UP" and zone.region.endswith(f"/regions/{REGION}"), zone
    region = regions.get(project=PROJECT, region=REGION)
    assert any(z.endswith(f"/zones/{ZONE}") for z in region.zones), region
    e = expect_error(exceptions.NotFound, lambda: zones.get(project=PROJECT, zone="no-such-zone"))
    assert e.code == 404 and e.errors and e.errors[0]["reason"] == "notFound", e.errors

    # Project metadata, with its fingerprint.
    fp = projects.get(project=PROJECT).common_instance_metadata.fingerprint
    key = f"conformance-{SUFFIX}"
    op = projects.set_common_instance_metadata(
        project=PROJECT,
        metadata_resource=compute_v1.Metadata(
            fingerprint=fp, items=[compute_v1.Items(key=key, value="project-value")]
        ),
    )
    op.result(timeout=30)
    common = projects.get(project=PROJECT).common_instance_metadata
    assert {i.key: i.value for i in common.items}.get(key) == "project-value", common
    assert common.fingerprint != fp
    e = expect_error(
        exceptions.PreconditionFailed,
        lambda: projects.set_common_instance_metadata(
            project=PROJECT, metadata_resource=compute_v1.Metadata(fingerprint=fp, items=[])
        ),
    )
    assert e.code == 412, e

    # An instance with a fixed networkIP and an external IP.
    name = f"conf-{SUFFIX}"
    body = compute_v1.Instance(
        name=name,
        machine_type=f"zones/{ZONE}/machineTypes/m1.small",
        network_interfaces=[
            compute_v1.NetworkInterface(
                network="global/networks/default",
                network_i_p="127.1.250.7",
                access_configs=[compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")],
            )
        ],
        metadata=compute_v1.Metadata(items=[compute_v1.Items(key="role", value="node")]),
        tags=compute_v1.Tags(items=["k8s-node"]),
    )
    op = instances.insert(project=PROJECT, zone=ZONE, instance_resource=body)
    op.result(timeout=30)
    assert op.done(), op
    got = zone_ops.get(project=PROJECT, zone=ZONE, operation=op.name)
    assert got.status == compute_v1.Operation.Status.DONE and got.operation_type == "insert", got
    assert got.target_link.endswith(f"/zones/{ZONE}/instances/{name}"), got
    waited = zone_ops.wait(project=PROJECT, zone=ZONE, operation=op.name)
    assert waited.status == compute_v1.Operation.Status.DONE
    check_timestamp(got.insert_time)

    e = expect_error(
        exceptions.Conflict, lambda: instances.insert(project=PROJECT, zone=ZONE, instance_resource=body)
    )
    assert e.errors[0]["reason"] == "alreadyExists", e.errors

    inst = instances.get(project=PROJECT, zone=ZONE, instance=name)
    assert inst.status == "RUNNING", inst.status
    assert int(inst.id) > 0
    check_timestamp(inst.creation_timestamp)
    assert inst.machine_type.endswith("/machineTypes/m1.small"), inst.machine_type
    nic = inst.network_interfaces[0]
    assert nic.network_i_p == "127.1.250.7", nic
    nat_ip = nic.access_configs[0].nat_i_p
    assert nat_ip.startswith("127.24.4."), nic
    assert list(inst.tags.items) == ["k8s-node"], inst.tags
    assert {i.key: i.value for i in inst.metadata.items} == {"role": "node"}
    assert inst.self_link.endswith(f"/projects/{PROJECT}/zones/{ZONE}/instances/{name}")

    listed = list(
        instances.list(request=compute_v1.ListInstancesRequest(project=PROJECT, zone=ZONE, filter=f"name = {name}"))
    )
    assert [i.name for i in listed] == [name], listed
    agg = {scope: list(l.instances) for scope, l in instances.aggregated_list(project=PROJECT)}
    assert name in [i.name for i in agg.get(f"zones/{ZONE}", [])], agg.keys()

    # Instance metadata: fingerprints guard it.
    fp = inst.metadata.fingerprint
    instances.set_metadata(
        project=PROJECT,
        zone=ZONE,
        instance=name,
        metadata_resource=compute_v1.Metadata(
            fingerprint=fp, items=[compute_v1.Items(key="role", value="node"), compute_v1.Items(key="extra", value="x")]
        ),
    ).result(timeout=30)
    inst = instances.get(project=PROJECT, zone=ZONE, instance=name)
    assert {i.key: i.value for i in inst.metadata.items} == {"role": "node", "extra": "x"}
    e = expect_error(
        exceptions.PreconditionFailed,
        lambda: instances.set_metadata(
            project=PROJECT, zone=ZONE, instance=name, metadata_resource=compute_v1.Metadata(fingerprint=fp)
        ),
    )
    assert e.errors[0]["reason"] == "conditionNotMet", e.errors

    # The metadata server, as the instance sees it.
    err = expect_error(urllib.error.HTTPError, lambda: metadata("instance/id", name, headers={}))
    assert err.code == 403, err
    assert metadata("instance/id", name) == str(inst.id)
    assert metadata("instance/network-interfaces/0/ip", name) == "127.1.250.7"
    assert metadata("instance/network-interfaces/0/access-configs/0/external-ip", name) == nat_ip
    assert metadata("instance/zone", name).endswith(f"/zones/{ZONE}")
    assert metadata("project/project-id", name) == PROJECT
    assert metadata(f"project/attributes/{key}", name) == "project-value"
    assert "network-interfaces/" in metadata("instance/", name).split("\n")
    tree = json.loads(metadata("instance/", name, query="?recursive=true"))
    assert tree["networkInterfaces"][0]["accessConfigs"][0]["externalIp"] == nat_ip, tree
    assert tree["attributes"] == {"role": "node", "extra": "x"}, tree["attributes"]
    text = metadata("instance/", name, query="?recursive=true&alt=text")
    assert "network-interfaces/0/ip 127.1.250.7" in text.split("\n"), text

    # Firewalls and routes.
    fw = f"fw-{SUFFIX}"
    firewalls.insert(
        project=PROJECT,
        firewall_resource=compute_v1.Firewall(
            name=fw,
            network="global/networks/default",
            source_ranges=["0.0.0.0/0"],
            target_tags=["k8s-node"],
            allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=["80", "8000-8100"])],
        ),
    ).result(timeout=30)
    got = firewalls.get(project=PROJECT, firewall=fw)
    assert got.direction == "INGRESS" and got.priority == 1000, got
    assert got.allowed[0].ports == ["80", "8000-8100"] and got.network.endswith("/global/networks/default")
    route = f"route-{SUFFIX}"
    routes.insert(
        project=PROJECT,
        route_resource=compute_v1.Route(
            name=route,
            network="global/networks/default",
            dest_range="10.244.7.0/24",
            next_hop_instance=f"zones/{ZONE}/instances/{name}",
        ),
    ).result(timeout=30)
    got = routes.get(project=PROJECT, route=route)
    assert got.dest_range == "10.244.7.0/24" and got.next_hop_instance.endswith(f"/instances/{name}"), got
    assert got.priority == 1000 and got.route_type == "STATIC", got
    assert route in [r.name for r in routes.list(project=PROJECT)]
    e = expect_error(
        exceptions.BadRequest,
        lambda: routes.insert(
            project=PROJECT,
            route_resource=compute_v1.Route(name=f"bad-{SUFFIX}", network="global/networks/default", dest_range="nonsense", next_hop_ip="127.1.0.1"),
        ),
    )
    assert e.code == 400, e

    # Addresses, health checks, target pools and forwarding rules.
    addr = f"addr-{SUFFIX}"
    addresses.insert(project=PROJECT, region=REGION, address_resource=compute_v1.Address(name=addr)).result(timeout=30)
    ip = addresses.get(project=PROJECT, region=REGION, address=addr).address
    assert ip.startswith("127.24.4."), ip
    hc = f"hc-{SUFFIX}"
    # The client library no longer has the legacy httpHealthChecks collection (target pools
    # still take its health checks): the same REST call, by hand.
    # The instance's backend: HTTP on its networkIP, as a NodePort would answer.
    backend_port = http_backend("127.1.250.7", name)
    op = rest("POST", "global/httpHealthChecks", {"name": hc, "port": backend_port, "requestPath": "/healthz", "checkIntervalSec": 1})
    assert op["status"] == "DONE" and op["operationType"] == "insert", op
    assert rest("GET", f"global/httpHealthChecks/{hc}")["requestPath"] == "/healthz"
    pool = f"pool-{SUFFIX}"
    pools.insert(
        project=PROJECT,
        region=REGION,
        target_pool_resource=compute_v1.TargetPool(name=pool, health_checks=[f"global/httpHealthChecks/{hc}"]),
    ).result(timeout=30)
    ref = compute_v1.InstanceReference(instance=f"zones/{ZONE}/instances/{name}")
    pools.add_instance(
        project=PROJECT,
        region=REGION,
        target_pool=pool,
        target_pools_add_instance_request_resource=compute_v1.TargetPoolsAddInstanceRequest(instances=[ref]),
    ).result(timeout=30)
    got = pools.get(project=PROJECT, region=REGION, target_pool=pool)
    assert [i.split("/")[-1] for i in got.instances] == [name], got.instances
    rule = f"rule-{SUFFIX}"
    rules.insert(
        project=PROJECT,
        region=REGION,
        forwarding_rule_resource=compute_v1.ForwardingRule(
            name=rule, I_p_address=ip, I_p_protocol="TCP", port_range=f"{backend_port}-{backend_port}", target=got.self_link
        ),
    ).result(timeout=30)
    fr = rules.get(project=PROJECT, region=REGION, forwarding_rule=rule)
    assert fr.I_p_address == ip and fr.target == got.self_link, fr
    # Real traffic: the rule's address forwards to the pool's instance at the same port, once a
    # firewall lets it in (GCE denies ingress by default; the firewall above opens other ports).
    lb_fw = f"lb-fw-{SUFFIX}"
    firewalls.insert(
        project=PROJECT,
        firewall_resource=compute_v1.Firewall(
            name=lb_fw,
            network="global/networks/default",
            source_ranges=["127.0.0.0/8"],
            target_tags=["k8s-node"],
            allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=[str(backend_port)])],
        ),
    ).result(timeout=30)
    assert eventually("traffic through the forwarding rule", lambda: fetch(ip, backend_port)) == name
    firewalls.delete(project=PROJECT, firewall=lb_fw).result(timeout=30)
    eventually("the firewall's removal to stop the traffic", lambda: fetch(ip, backend_port) is None)
    firewalls.insert(
        project=PROJECT,
        firewall_resource=compute_v1.Firewall(
            name=lb_fw,
            network="global/networks/default",
            source_ranges=["127.0.0.0/8"],
            allowed=[compute_v1.Allowed(I_p_protocol="all")],
        ),
    ).result(timeout=30)
    assert eventually("traffic with an all-protocol firewall", lambda: fetch(ip, backend_port)) == name
    e = expect_error(exceptions.BadRequest, lambda: pools.delete(project=PROJECT, region=REGION, target_pool=pool))
    assert e.errors[0]["reason"] == "resourceInUseByAnotherResource", e.errors
    pools.remove_instance(
        project=PROJECT,
        region=REGION,
        target_pool=pool,
        target_pools_remove_instance_request_resource=compute_v1.TargetPoolsRemoveInstanceRequest(instances=[ref]),
    ).result(timeout=30)
    assert list(pools.get(project=PROJECT, region=REGION, target_pool=pool).instances) == []
    eventually("the removed instance to get no traffic", lambda: fetch(ip, backend_port) is None)
    rules.delete(project=PROJECT, region=REGION, forwarding_rule=rule).result(timeout=30)
    pools.delete(project=PROJECT, region=REGION, target_pool=pool).result(timeout=30)
    rest("DELETE", f"global/httpHealthChecks/{hc}")
    addresses.delete(project=PROJECT, region=REGION, address=addr).result(timeout=30)
    firewalls.delete(project=PROJECT, firewall=lb_fw).result(timeout=30)
    routes.delete(project=PROJECT, route=route).result(timeout=30)
    firewalls.delete(project=PROJECT, firewall=fw).result(timeout=30)
    expect_error(exceptions.NotFound, lambda: routes.get(project=PROJECT, route=route))

    # Internal load balancing: an instance group holding the instance, a TCP health check, an
    # INTERNAL regional backend service sending to the group, and an INTERNAL forwarding rule
    # (ports, allowGlobalAccess) carrying real HTTP to the instance while a firewall allows it.
    groups = client(compute_v1.InstanceGroupsClient)
    health = client(compute_v1.HealthChecksClient)
    services = client(compute_v1.RegionBackendServicesClient)
    ilb_port = http_backend("127.1.250.7", f"ilb-{name}")
    ig = f"ig-{SUFFIX}"
    groups.insert(
        project=PROJECT,
        zone=ZONE,
        instance_group_resource=compute_v1.InstanceGroup(name=ig, network="global/networks/default"),
    ).result(timeout=30)
    add = compute_v1.InstanceGroupsAddInstancesRequest(instances=[ref])
    groups.add_instances(
        project=PROJECT, zone=ZONE, instance_group=ig, instance_groups_add_instances_request_resource=add
    ).result(timeout=30)
    group = groups.get(project=PROJECT, zone=ZONE, instance_group=ig)
    assert group.size == 1 and group.zone.endswith(f"/zones/{ZONE}"), group
    members = groups.list_instances(
        project=PROJECT,
        zone=ZONE,
        instance_group=ig,
        instance_groups_list_instances_request_resource=compute_v1.InstanceGroupsListInstancesRequest(
            instance_state="ALL"
        ),
    )
    assert [m.instance.split("/")[-1] for m in members] == [name], members
    assert ig in [g.name for g in groups.list(project=PROJECT, zone=ZONE)]
    expect_error(
        exceptions.BadRequest,
        lambda: groups.add_instances(
            project=PROJECT, zone=ZONE, instance_group=ig, instance_groups_add_instances_request_resource=add
        ),
    )
    ihc = f"ihc-{SUFFIX}"
    health.insert(
        project=PROJECT,
        health_check_resource=compute_v1.HealthCheck(
            name=ihc,
            type_="TCP",
            tcp_health_check=compute_v1.TCPHealthCheck(port=ilb_port),
            check_interval_sec=1,
            timeout_sec=1,
        ),
    ).result(timeout=30)
    check = health.get(project=PROJECT, health_check=ihc)
    assert check.type_ == "TCP" and check.tcp_health_check.port == ilb_port, check
    assert check.healthy_threshold == 2 and check.unhealthy_threshold == 2, check
    expect_error(
        exceptions.BadRequest,
        lambda: health.insert(
            project=PROJECT,
            health_check_resource=compute_v1.HealthCheck(name=f"{ihc}-x", type_="GRPC"),
        ),
    )
    bs = f"bs-{SUFFIX}"
    services.insert(
        project=PROJECT,
        region=REGION,
        backend_service_resource=compute_v1.BackendService(
            name=bs,
            load_balancing_scheme="INTERNAL",
            protocol="TCP",
            health_checks=[check.self_link],
            backends=[compute_v1.Backend(group=group.self_link)],
        ),
    ).result(timeout=30)
    service = services.get(project=PROJECT, region=REGION, backend_service=bs)
    assert service.backends[0].balancing_mode == "CONNECTION" and service.session_affinity == "NONE", service
    assert service.backends[0].group == group.self_link and service.fingerprint, service
    irule = f"irule-{SUFFIX}"
    rules.insert(
        project=PROJECT,
        region=REGION,
        forwarding_rule_resource=compute_v1.ForwardingRule(
            name=irule,
            load_balancing_scheme="INTERNAL",
            I_p_protocol="TCP",
            ports=[str(ilb_port)],
            backend_service=service.self_link,
            allow_global_access=True,
        ),
    ).result(timeout=30)
    ifr = rules.get(project=PROJECT, region=REGION, forwarding_rule=irule)
    assert ifr.load_balancing_scheme == "INTERNAL" and ifr.allow_global_access, ifr
    assert ifr.network_tier == "PREMIUM" and ifr.backend_service == service.self_link, ifr
    assert list(ifr.ports) == [str(ilb_port)], ifr
    # An internal rule is Premium only; a Standard address stays Standard.
    expect_error(
        exceptions.BadRequest,
        lambda: rules.insert(
            project=PROJECT,
            region=REGION,
            forwarding_rule_resource=compute_v1.ForwardingRule(
                name=f"{irule}-x",
                load_balancing_scheme="INTERNAL",
                network_tier="STANDARD",
                ports=["80"],
                backend_service=service.self_link,
            ),
        ),
    )
    saddr = f"saddr-{SUFFIX}"
    addresses.insert(
        project=PROJECT, region=REGION, address_resource=compute_v1.Address(name=saddr, network_tier="STANDARD")
    ).result(timeout=30)
    assert addresses.get(project=PROJECT, region=REGION, address=saddr).network_tier == "STANDARD"
    addresses.delete(project=PROJECT, region=REGION, address=saddr).result(timeout=30)
    ilb_fw = f"ilb-fw-{SUFFIX}"
    firewalls.insert(
        project=PROJECT,
        firewall_resource=compute_v1.Firewall(
            name=ilb_fw,
            network="global/networks/default",
            source_ranges=["127.0.0.0/8"],
            allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=[str(ilb_port)])],
        ),
    ).result(timeout=30)
    assert eventually("traffic through the internal rule", lambda: fetch(ifr.I_p_address, ilb_port)) == f"ilb-{name}"
    # Updated in place, guarded by the fingerprint.
    service.session_affinity = "CLIENT_IP"
    services.update(
        project=PROJECT, region=REGION, backend_service=bs, backend_service_resource=service
    ).result(timeout=30)
    assert services.get(project=PROJECT, region=REGION, backend_service=bs).session_affinity == "CLIENT_IP"
    e = expect_error(
        exceptions.PreconditionFailed,
        lambda: services.update(project=PROJECT, region=REGION, backend_service=bs, backend_service_resource=service),
    )
    assert e.code == 412, e
    for call in (
        lambda: services.delete(project=PROJECT, region=REGION, backend_service=bs),
        lambda: groups.delete(project=PROJECT, zone=ZONE, instance_group=ig),
        lambda: health.delete(project=PROJECT, health_check=ihc),
    ):
        e = expect_error(exceptions.BadRequest, call)
        assert e.errors[0]["reason"] == "resourceInUseByAnotherResource", e.errors
    groups.remove_instances(
        project=PROJECT,
        zone=ZONE,
        instance_group=ig,
        instance_groups_remove_instances_request_resource=compute_v1.InstanceGroupsRemoveInstancesRequest(
            instances=[ref]
        ),
    ).result(timeout=30)
    assert groups.get(project=PROJECT, zone=ZONE, instance_group=ig).size == 0
    eventually("the removed member to get no traffic", lambda: fetch(ifr.I_p_address, ilb_port) is None)
    rules.delete(project=PROJECT, region=REGION, forwarding_rule=irule).result(timeout=30)
    services.delete(project=PROJECT, region=REGION, backend_service=bs).result(timeout=30)
    health.delete(project=PROJECT, health_check=ihc).result(timeout=30)
    groups.delete(project=PROJECT, zone=ZONE, instance_group=ig).result(timeout=30)
    firewalls.delete(project=PROJECT, firewall=ilb_fw).result(timeout=30)
    expect_error(exceptions.NotFound, lambda: groups.get(project=PROJECT, zone=ZONE, instance_group=ig))

    # Persistent disks: insert, attachDisk (the instance's disks[], the disk's users), resize,
    # delete refused while in use, detachDisk, delete.
    disks = client(compute_v1.DisksClient)
    disk = f"conf-disk-{SUFFIX}"
    disks.insert(
        project=PROJECT,
        zone=ZONE,
        disk_resource=compute_v1.Disk(
            name=disk, size_gb=2, type_=f"zones/{ZONE}/diskTypes/pd-ssd", labels={"suite": "conformance"}
        ),
    ).result(timeout=30)
    got = disks.get(project=PROJECT, zone=ZONE, disk=disk)
    assert got.type_.endswith(f"/zones/{ZONE}/diskTypes/pd-ssd"), f"disk type not kept: {got.type_}"
    assert dict(got.labels) == {"suite": "conformance"}, f"disk labels not kept: {dict(got.labels)}"
    expect_error(
        exceptions.NotFound,
        lambda: disks.insert(
            project=PROJECT,
            zone=ZONE,
            disk_resource=compute_v1.Disk(name=f"{disk}-x", size_gb=1, type_=f"zones/{ZONE}/diskTypes/pd-nope"),
        ),
    )
    source = got.self_link
    op = instances.attach_disk(
        project=PROJECT,
        zone=ZONE,
        instance=name,
        attached_disk_resource=compute_v1.AttachedDisk(source=source, device_name=disk, mode="READ_WRITE"),
    )
    op.result(timeout=30)
    attached = [d for d in instances.get(project=PROJECT, zone=ZONE, instance=name).disks if d.device_name == disk]
    assert len(attached) == 1 and attached[0].source == source and attached[0].mode == "READ_WRITE", attached
    got = disks.get(project=PROJECT, zone=ZONE, disk=disk)
    assert [u.rsplit("/", 1)[-1] for u in got.users] == [name], got.users
    disks.resize(
        project=PROJECT, zone=ZONE, disk=disk, disks_resize_request_resource=compute_v1.DisksResizeRequest(size_gb=4)
    ).result(timeout=30)
    assert disks.get(project=PROJECT, zone=ZONE, disk=disk).size_gb == 4
    e = expect_error(exceptions.BadRequest, lambda: disks.delete(project=PROJECT, zone=ZONE, disk=disk))
    assert e.errors[0]["reason"] == "resourceInUseByAnotherResource", e.errors
    instances.detach_disk(project=PROJECT, zone=ZONE, instance=name, device_name=disk).result(timeout=30)
    assert not [d for d in instances.get(project=PROJECT, zone=ZONE, instance=name).disks if d.device_name == disk]
    disks.delete(project=PROJECT, zone=ZONE, disk=disk).result(timeout=30)
    expect_error(exceptions.NotFound, lambda: disks.get(project=PROJECT, zone=ZONE, disk=disk))

    # Stop, start, delete.
    instances.stop(project=PROJECT, zone=ZONE, instance=name).result(timeout=30)
    assert instances.get(project=PROJECT, zone=ZONE, instance=name).status == "TERMINATED"
    instances.start(project=PROJECT, zone=ZONE, instance=name).result(timeout=30)
    assert instances.get(project=PROJECT, zone=ZONE, instance=name).status == "RUNNING"
    instances.delete(project=PROJECT, zone=ZONE, instance=name).result(timeout=30)
    e = expect_error(exceptions.NotFound, lambda: instances.get(project=PROJECT, zone=ZONE, instance=name))
    assert e.errors[0]["reason"] == "notFound", e.errors

    print("gce conformance: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"gce conformance failed: {e}", file=sys.stderr)
        raise
