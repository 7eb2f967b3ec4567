#!/usr/bin/env python3
"""A persistent disk and the instances it is attached to, as hack/lib/volume-demo.sh shows them.

    gce-disk.py ENDPOINT PROJECT ZONE DISK OUT-JSON     (ENDPOINT: http://127.0.0.1:PORT)

Asks `disks.get` for the disk and `instances.get` for each of its users (the instance's
`disks[]` holds the attachment's deviceName), with Google's client (google-cloud-compute,
hack/python-tools.sh gce) when this Python has it, else with plain HTTP, and prints what they
say. Writes OUT-JSON as volume-demo.sh compares it with the Node: {"status", "in_use",
"attachments": [{"instance", "device_path"}]}, device paths as the in-tree gce-pd plugin names
them on the Node (/dev/disk/by-id/google-<deviceName>).
"""
import json
import sys
import urllib.request


def with_client(endpoint, project, zone, disk):
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    opts = dict(credentials=AnonymousCredentials(), transport="rest",
                client_options=ClientOptions(api_endpoint=endpoint))
    d = compute_v1.DisksClient(**opts).get(project=project, zone=zone, disk=disk)
    instances = compute_v1.InstancesClient(**opts)
    users = []
    for link in d.users:
        name = link.rsplit("/", 1)[-1]
        i = instances.get(project=project, zone=zone, instance=name)
        users.append((name, [(a.source, a.device_name) for a in i.disks]))
    return d.status, d.size_gb, list(d.users), users


def with_http(endpoint, project, zone, disk):
    base = "%s/compute/v1/projects/%s/zones/%s" % (endpoint.rstrip("/"), project, zone)

    def get(path):
        with urllib.request.urlopen("%s/%s" % (base, path), timeout=10) as r:
            return json.load(r)

    d = get("disks/" + disk)
    users = []
    for link in d.get("users", []):
        name = link.rsplit("/", 1)[-1]
        i = get("instances/" + name)
        users.append((name, [(a.get("source", ""), a.get("deviceName", "")) for a in i.get("disks", [])]))
    return d.get("status", ""), d.get("sizeGb", ""), d.get("users", []), users


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    endpoint, project, zone, disk, out = argv
    try:
        status, size, links, users = with_client(endpoint, project, zone, disk)
        how = "google-cloud-compute: DisksClient.get, InstancesClient.get"
    except ImportError:
        status, size, links, users = with_http(endpoint, project, zone, disk)
        how = "plain HTTP (google-cloud-compute is not installed: hack/python-tools.sh gce)"
    print("$ disks.get %s/%s/%s, instances.get of its users (%s)" % (project, zone, disk, how))
    print("  disk %s: status %s, %s GB, users %s" % (disk, status, size,
                                                     ", ".join(l.rsplit("/", 1)[-1] for l in links) or "-"))
    attachments = []
    for name, disks in users:
        for source, device in disks:
            if source.rsplit("/", 1)[-1] == disk:
                print("  instance %s: disks[] deviceName %s" % (name, device))
                attachments.append({"instance": name, "device_path": "/dev/disk/by-id/google-" + device})
    with open(out, "w") as f:
        json.dump({"status": status, "in_use": bool(attachments), "attachments": attachments}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
