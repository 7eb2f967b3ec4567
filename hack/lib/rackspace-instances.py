#!/usr/bin/env python3
"""The Rackspace Cloud's servers (and Cinder volumes), as the rackspace provider reaches them,
for hack/lib/kubelet-power.py and hack/lib/cloud-rackspace.sh:

    rackspace-instances.py RACKSPACE.CONF                    the servers, as JSON
    rackspace-instances.py RACKSPACE.CONF create NAME...     a server per NAME (Nova's
                                                             POST /servers); "NAME ID" lines
    rackspace-instances.py RACKSPACE.CONF volume-create NAME a 1 GiB Cinder volume, once
                                                             available; its ID
    rackspace-instances.py RACKSPACE.CONF volume-show ID     the volume, as Cinder answers it

reads the rackspace provider's cloud config ([Global] auth-url: a Keystone v2.0 URL, username,
api-key or password, tenant-id or tenant-name (default: the user's), region), signs in as the
provider does (POST <auth-url>/tokens with RAX-KSKEY:apiKeyCredentials, else
passwordCredentials) and finds the region's endpoints in the catalog by Rackspace's names
(cloudServersOpenStack, cloudBlockStorage). The server list is what the provider asks,
GET /servers/detail: a JSON list of {"name": the server's name (the Node's name), "id": the
server ID (the end of the Node's providerID rackspace://<id>), "status": Nova's (ACTIVE,
SHUTOFF, ...), "address": the provider's one address (the first private IP, else public,
accessIPv4, accessIPv6)}. The key and password stay in the file, never on a command line or in
an error. An identity or endpoint that does not answer or answers an error is an error (exit 1)
naming the URL and the cloud's message.
"""
import configparser
import json
import sys
import time
import urllib.error
import urllib.request


def read_config(path):
    """The [Global] keys, lower-cased (a value may be double-quoted)."""
    c = configparser.ConfigParser(interpolation=None, strict=False)
    with open(path) as f:
        c.read_file(f)
    g = {}
    for s in c.sections():
        if s.lower() == "global":
            for k, v in c.items(s):
                v = v.strip()
                g[k.lower()] = v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
    auth = g.get("auth-url", "").rstrip("/")
    if not auth.endswith("/v2.0"):
        raise ValueError("%s: [Global] auth-url must be a Keystone v2.0 URL (.../v2.0)" % path)
    if not g.get("username") or not (g.get("api-key") or g.get("password")) or not g.get("region"):
        raise ValueError("%s: [Global] username, api-key (or password) and region are required" % path)
    return auth, g


def call(method, url, body=None, token=None):
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["X-Auth-Token"] = token
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=10) as r:
            text = r.read()
            return json.loads(text) if text else {}
    except urllib.error.HTTPError as e:
        detail = e.read(2000).decode("utf-8", "replace")
        try:
            # v2's {"unauthorized": {"code", "message"}}, Nova's and Cinder's {"itemNotFound": ...}
            detail = "; ".join(v.get("message", "") for v in json.loads(detail).values() if isinstance(v, dict)) or detail
        except ValueError:
            pass
        raise RuntimeError("%s %s: %s: %s" % (method, url, e, detail.strip()))
    except (OSError, ValueError) as e:
        raise RuntimeError("%s %s: %s" % (method, url, e))


def sign_in(auth, g):
    """(token, {catalog name: the region's publicURL}), as the provider signs in."""
    if g.get("api-key"):
        creds = {"RAX-KSKEY:apiKeyCredentials": {"username": g["username"], "apiKey": g["api-key"]}}
    else:
        creds = {"passwordCredentials": {"username": g["username"], "password": g["password"]}}
    if g.get("tenant-id"):
        creds["tenantId"] = g["tenant-id"]
    elif g.get("tenant-name"):
        creds["tenantName"] = g["tenant-name"]
    access = call("POST", auth + "/tokens", {"auth": creds})["access"]
    endpoints = {}
    for service in access.get("serviceCatalog") or []:
        for e in service.get("endpoints") or []:
            if e.get("region") == g["region"]:
                endpoints[service["name"]] = e["publicURL"].rstrip("/")
    return access["token"]["id"], endpoints


def endpoint(endpoints, name, region):
    if name not in endpoints:
        raise RuntimeError("no %s endpoint in region %s in the catalog" % (name, region))
    return endpoints[name]


def first(server, network):
    addrs = (server.get("addresses") or {}).get(network) or []
    return addrs[0].get("addr") if addrs and addrs[0].get("addr") else ""


def main():
    args = sys.argv[1:]
    if not args or (len(args) > 1 and args[1] not in ("create", "volume-create", "volume-show")) \
            or (len(args) > 1 and len(args) < 3) or (len(args) > 3 and args[1] != "create"):
        print("usage: rackspace-instances.py RACKSPACE.CONF [create NAME... | volume-create NAME | volume-show ID]",
              file=sys.stderr)
        return 2
    try:
        auth, g = read_config(args[0])
        token, endpoints = sign_in(auth, g)
        what = args[1] if len(args) > 1 else "list"
        if what == "list":
            nova = endpoint(endpoints, "cloudServersOpenStack", g["region"])
            out = []
            for s in call("GET", nova + "/servers/detail", token=token)["servers"]:
                address = first(s, "private") or first(s, "public") or s.get("accessIPv4") or s.get("accessIPv6") or ""
                out.append({"name": s["name"], "id": s["id"], "status": s.get("status", ""), "address": address})
            print(json.dumps(out))
        elif what == "create":
            nova = endpoint(endpoints, "cloudServersOpenStack", g["region"])
            for name in args[2:]:
                s = call("POST", nova + "/servers", {"server": {"name": name, "flavorRef": "m1.small",
                                                                "availability_zone": "nova", "networks": "auto"}}, token)
                print(name, s["server"]["id"])
        elif what == "volume-create":
            cinder = endpoint(endpoints, "cloudBlockStorage", g["region"])
            v = call("POST", cinder + "/volumes", {"volume": {"name": args[2], "size": 1, "availability_zone": "nova"}}, token)["volume"]
            deadline = time.time() + 30
            while v.get("status") != "available":
                if v.get("status") == "error" or time.time() > deadline:
                    raise RuntimeError("volume %s: status %s, not available" % (v["id"], v.get("status")))
                time.sleep(0.2)
                v = call("GET", cinder + "/volumes/" + v["id"], token=token)["volume"]
            print(v["id"])
        else:
            cinder = endpoint(endpoints, "cloudBlockStorage", g["region"])
            print(json.dumps(call("GET", cinder + "/volumes/" + args[2], token=token)["volume"]))
    except (OSError, ValueError, KeyError, RuntimeError, configparser.Error) as e:
        print("rackspace-instances: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
