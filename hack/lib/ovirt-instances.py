#!/usr/bin/env python3
"""The VMs an oVirt engine's search returns, as the cloud's instances, for
hack/lib/kubelet-power.py and hack/lib/cloud-ovirt.sh:

    ovirt-instances.py OVIRT.CONF

reads the ovirt provider's cloud config ([connection] uri, username, password; [filters] vms),
asks what the provider asks, GET <uri>/vms?search=<[filters] vms> of the v3 API with HTTP basic
authentication (XML), and prints a JSON list of {"name": the FQDN the guest reports (the Node's
name), "id": the VM ID (the end of the Node's providerID ovirt:///<vm id>), "status": "ACTIVE"
for a VM that is up, "SHUTOFF" for one that is down (another state as the engine spells it),
"vm": the VM's name, "address": the first IP the guest reports}. The password stays in the
file, never on a command line. An engine that does not answer, refuses the credentials or
answers something else than a <vms> document is an error (exit 1) naming the URL.
"""
import base64
import configparser
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET


def read_config(path):
    """(uri, username, password, search) from the gcfg file (a value may be double-quoted)."""
    c = configparser.ConfigParser(interpolation=None, strict=False)
    with open(path) as f:
        c.read_file(f)

    def get(section, key, default=""):
        for s in c.sections():
            if s.lower() == section and c.has_option(s, key):
                v = c.get(s, key).strip()
                return v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
        return default

    uri = get("connection", "uri").rstrip("/")
    if not uri:
        raise ValueError("%s: no [connection] uri" % path)
    return uri, get("connection", "username", "admin@internal"), get("connection", "password"), get("filters", "vms")


def main():
    if len(sys.argv) != 2:
        print("usage: ovirt-instances.py OVIRT.CONF", file=sys.stderr)
        return 2
    try:
        uri, user, password, search = read_config(sys.argv[1])
    except (OSError, ValueError, configparser.Error) as e:
        print("ovirt-instances: %s" % e, file=sys.stderr)
        return 1
    url = "%s/vms?%s" % (uri, urllib.parse.urlencode({"search": search}))
    auth = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    req = urllib.request.Request(url, headers={"Authorization": "Basic " + auth, "Accept": "application/xml"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            root = ET.fromstring(r.read())
        if root.tag != "vms":
            raise ValueError("not an oVirt <vms> document (root <%s>)" % root.tag)
    except urllib.error.HTTPError as e:
        # The engine's <fault> says why (a refused search names the field).
        detail = e.read(2000).decode("utf-8", "replace")
        try:
            detail = ET.fromstring(detail).findtext("detail") or detail
        except ET.ParseError:
            pass
        print("ovirt-instances: %s: %s: %s" % (url, e, detail.strip()), file=sys.stderr)
        return 1
    except (OSError, ValueError, ET.ParseError) as e:
        print("ovirt-instances: %s: %s" % (url, e), file=sys.stderr)
        return 1
    out = []
    for vm in root.findall("vm"):
        state = (vm.findtext("status/state") or "").lower()
        ips = [ip.get("address") for ip in vm.findall("guest_info/ips/ip") if ip.get("address")]
        out.append({"name": vm.findtext("guest_info/fqdn") or "", "id": vm.get("id"),
                    "status": {"up": "ACTIVE", "down": "SHUTOFF"}.get(state, state),
                    "vm": vm.findtext("name") or "", "address": ips[0] if ips else ""})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
