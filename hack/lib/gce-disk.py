#!/usr/bin/env python3
"""A persistent disk and the instances it is attached to, as Google's client sees them.

    gce-disk.py [--require-client] ENDPOINT PROJECT ZONE DISK OUT-JSON
        ENDPOINT: http://127.0.0.1:PORT; OUT-JSON: a file, or - for standard output

Asks `disks.get` for the disk and `instances.get` for each of its users (the instance's
`disks[]` holds the attachment's deviceName), with Google's client (google-cloud-compute,
hack/python-tools.sh gce) when this Python has it, else with plain HTTP, and prints what they
say (to standard error when OUT-JSON is -). `--require-client`: no plain-HTTP fallback, for the
integration tests, which check the cloud side with the official client only.

OUT-JSON: {"found", "status", "size_gb", "type", "description", "labels", "users",
"in_use", "attachments": [{"instance", "device_name", "device_path"}]}; {"found": false} when
the disk does not exist. hack/lib/volume-demo.sh compares `attachments` with the Node's
volumesAttached: device paths as the in-tree gce-pd plugin names them on the Node
(/dev/disk/by-id/google-<deviceName>).
"""
import json
import sys
import urllib.error
import urllib.request


class NotFound(Exception):
    pass


def with_client(endpoint, project, zone, disk):
    from google.api_core import exceptions
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    opts = dict(credentials=AnonymousCredentials(), transport="rest",
                client_options=ClientOptions(api_endpoint=endpoint))
    try:
        d = compute_v1.DisksClient(**opts).get(project=project, zone=zone, disk=disk)
    except exceptions.NotFound:
        raise NotFound(disk)
    instances = compute_v1.InstancesClient(**opts)
    users = []
    for link in d.users:
        name = link.rsplit("/", 1)[-1]
        i = instances.get(project=project, zone=zone, instance=name)
        users.append((name, [(a.source, a.device_name) for a in i.disks]))
    disk_view = dict(status=d.status, size_gb=str(d.size_gb), type=d.type_,
                     description=d.description, labels=dict(d.labels), users=list(d.users))
    return disk_view, users


def with_http(endpoint, project, zone, disk):
    base = "%s/compute/v1/projects/%s/zones/%s" % (endpoint.rstrip("/"), project, zone)

    def get(path):
        with urllib.request.urlopen("%s/%s" % (base, path), timeout=10) as r:
            return json.load(r)

    try:
        d = get("disks/" + disk)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise NotFound(disk)
        raise
    users = []
    for link in d.get("users", []):
        name = link.rsplit("/", 1)[-1]
        i = get("instances/" + name)
        users.append((name, [(a.get("source", ""), a.get("deviceName", "")) for a in i.get("disks", [])]))
    disk_view = dict(status=d.get("status", ""), size_gb=str(d.get("sizeGb", "")),
                     type=d.get("type", ""), description=d.get("description", ""),
                     labels=d.get("labels", {}), users=d.get("users", []))
    return disk_view, users


def main(argv):
    require_client = bool(argv) and argv[0] == "--require-client"
    if require_client:
        argv = argv[1:]
    if len(argv) != 5:
        sys.exit(__doc__)
    endpoint, project, zone, disk, out = argv
    say = sys.stderr if out == "-" else sys.stdout
    try:
        try:
            view, users = with_client(endpoint, project, zone, disk)
            how = "google-cloud-compute: DisksClient.get, InstancesClient.get"
        except ImportError:
            if require_client:
                sys.exit("gce-disk.py: google-cloud-compute is not installed in this Python "
                         "(hack/python-tools.sh gce)")
            view, users = with_http(endpoint, project, zone, disk)
            how = "plain HTTP (google-cloud-compute is not installed: hack/python-tools.sh gce)"
    except NotFound:
        print("$ disks.get %s/%s/%s: not found" % (project, zone, disk), file=say)
        result = {"found": False}
    else:
        print("$ disks.get %s/%s/%s, instances.get of its users (%s)" % (project, zone, disk, how),
              file=say)
        print("  disk %s: status %s, %s GB, users %s" % (
            disk, view["status"], view["size_gb"],
            ", ".join(l.rsplit("/", 1)[-1] for l in view["users"]) or "-"), file=say)
        attachments = []
        for name, disks in users:
            for source, device in disks:
                if source.rsplit("/", 1)[-1] == disk:
                    print("  instance %s: disks[] deviceName %s" % (name, device), file=say)
                    attachments.append({"instance": name, "device_name": device,
                                        "device_path": "/dev/disk/by-id/google-" + device})
        result = dict(view, found=True, users=[l.rsplit("/", 1)[-1] for l in view["users"]],
                      in_use=bool(attachments), attachments=attachments)
    if out == "-":
        json.dump(result, sys.stdout)
        print()
    else:
        with open(out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
