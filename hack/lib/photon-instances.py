#!/usr/bin/env python3
"""The VMs of a Photon Controller project, as the cloud's instances, for
hack/lib/kubelet-power.py and hack/lib/cloud-photon.sh:

    photon-instances.py [--networks] PHOTON.CONF

reads the photon provider's cloud config ([Global] target, project: the project's ID, or its
name when [Global] tenant names the tenant), asks what the provider asks,
GET <target>/v1/projects/<project id>/vms (following nextPageLink), and prints a JSON list of
{"name": the VM's name (the Node's name), "id": the VM ID (the end of the Node's providerID
photon://<vm id>), "status": "ACTIVE" for a STARTED VM, "SHUTOFF" for a STOPPED one (another
state as Photon spells it), "state": Photon's state}. With --networks each also has
"addresses": the IPs of the VM's network connections (GET /v1/vms/<id>/subnets, the task's
resourceProperties.networkConnections; "-" is no address), as the provider reads NodeAddresses.
Without tokens only ([Global] authentication = false, the local cloud's default). An endpoint
that does not answer or answers an error is an error (exit 1) naming the URL and Photon's
{"code", "message"}.
"""
import configparser
import json
import sys
import urllib.error
import urllib.parse
import urllib.request


def read_config(path):
    """(target, tenant, project) from the gcfg file (a value may be double-quoted)."""
    c = configparser.ConfigParser(interpolation=None, strict=False)
    with open(path) as f:
        c.read_file(f)

    def get(key):
        for s in c.sections():
            if s.lower() == "global":
                for k, v in c.items(s):
                    if k.lower() == key:
                        v = v.strip()
                        return v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
        return ""

    target, project = get("target").rstrip("/"), get("project")
    if not target or not project:
        raise ValueError("%s: [Global] target and project are required" % path)
    if get("authentication").lower() == "true":
        raise ValueError("%s: [Global] authentication = true: this helper asks without tokens" % path)
    return target, get("tenant"), project


def call(target, path):
    url = path if path.startswith("http") else target + path
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        detail = e.read(2000).decode("utf-8", "replace")
        try:
            d = json.loads(detail)
            detail = "%s: %s" % (d.get("code"), d.get("message"))
        except ValueError:
            pass
        raise RuntimeError("%s: %s: %s" % (url, e, detail.strip()))
    except (OSError, ValueError) as e:
        raise RuntimeError("%s: %s" % (url, e))


def listing(target, path):
    """Every item of a paged list."""
    items = []
    while path:
        page = call(target, path)
        if not isinstance(page, dict) or "items" not in page:
            raise RuntimeError("%s%s: not a Photon list (no items)" % (target, path))
        items += page["items"]
        path = page.get("nextPageLink")
    return items


def project_id(target, tenant, project):
    """The project's ID: [Global] project, or the project of that name in the tenant."""
    if not tenant:
        return project
    q = urllib.parse.urlencode({"name": tenant})
    tenants = [t for t in listing(target, "/v1/tenants?" + q) if t["name"] == tenant]
    if not tenants:
        raise RuntimeError("%s: no tenant %r" % (target, tenant))
    q = urllib.parse.urlencode({"name": project})
    projects = [p for p in listing(target, "/v1/tenants/%s/projects?%s" % (tenants[0]["id"], q)) if p["name"] == project]
    if not projects:
        raise RuntimeError("%s: no project %r in tenant %r" % (target, project, tenant))
    return projects[0]["id"]


def main():
    args = sys.argv[1:]
    networks = "--networks" in args
    args = [a for a in args if a != "--networks"]
    if len(args) != 1:
        print("usage: photon-instances.py [--networks] PHOTON.CONF", file=sys.stderr)
        return 2
    try:
        target, tenant, project = read_config(args[0])
        vms = listing(target, "/v1/projects/%s/vms" % project_id(target, tenant, project))
        out = []
        for vm in vms:
            state = vm.get("state", "")
            v = {"name": vm["name"], "id": vm["id"],
                 "status": {"STARTED": "ACTIVE", "STOPPED": "SHUTOFF"}.get(state, state), "state": state}
            if networks:
                task = call(target, "/v1/vms/%s/subnets" % vm["id"])
                conns = (task.get("resourceProperties") or {}).get("networkConnections") or []
                v["addresses"] = [c["ipAddress"] for c in conns if c.get("ipAddress") not in (None, "", "-")]
            out.append(v)
    except (OSError, ValueError, KeyError, RuntimeError, configparser.Error) as e:
        print("photon-instances: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
