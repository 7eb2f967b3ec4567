#!/usr/bin/env python3
"""Azure Resource Manager by hand, for hack/lib/cloud-azure.sh (standard library only).

    azure-arm.py identity                 prints AZURE_CLIENT_ID=... and AZURE_SUBSCRIPTION_ID=...
                                          (the cloud's user as an Entra client; its project as the
                                          subscription), from the local cloud's Keystone
    azure-arm.py put PATH JSON            PUT, following the long-running operation; the resource
    azure-arm.py get PATH                 GET
    azure-arm.py post PATH                POST (a VM action), following the operation
    azure-arm.py delete PATH              DELETE, following the operation
    azure-arm.py instances GROUP          the group's VMs as hack/lib/kubelet-power.py reads them:
                                          [{"name", "id": the VM's name, "status": its power state}]
    azure-arm.py disk DISK-ID OUT-JSON    a managed disk as hack/lib/volume-demo.sh compares it
                                          with its Node: {"status", "in_use", "attachments":
                                          [{"instance", "device_path"}]}, the device the LUN the
                                          VM holds it at gives (/dev/disk/azure/scsi1/lun<N>)

PATH is below the subscription (`resourceGroups/rg/providers/...`) or absolute (`/subscriptions/..`);
`api-version` is added. Environment: AZURE_ENDPOINT (https://127.0.0.1:PORT), AZURE_TENANT_ID,
AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_SUBSCRIPTION_ID (not for `identity`), and
REQUESTS_CA_BUNDLE (the cloud's CA). A token is asked for per run with the client-credentials
grant, as a service principal would. An error answer is printed and the exit status is 1.
"""
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

API_VERSIONS = {"Microsoft.Compute": "2024-07-01", "Microsoft.Network": "2024-05-01"}


def context():
    return ssl.create_default_context(cafile=os.environ["REQUESTS_CA_BUNDLE"])


def call(method, url, body=None, token=None, form=None):
    headers = {}
    data = None
    if token:
        headers["Authorization"] = "Bearer " + token
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, context=context(), timeout=30) as r:
            text = r.read().decode()
            return r.status, dict(r.headers), (json.loads(text) if text.strip() else None)
    except urllib.error.HTTPError as e:
        sys.exit(f"{method} {url}: HTTP {e.code}: {e.read().decode()[:2000]}")


def token():
    endpoint, tenant = os.environ["AZURE_ENDPOINT"], os.environ["AZURE_TENANT_ID"]
    _, _, answer = call("POST", f"{endpoint}/{tenant}/oauth2/v2.0/token", form={
        "grant_type": "client_credentials", "client_id": os.environ["AZURE_CLIENT_ID"],
        "client_secret": os.environ["AZURE_CLIENT_SECRET"],
        "scope": "https://management.azure.com/.default"})
    return answer["access_token"]


def url_of(path):
    endpoint = os.environ["AZURE_ENDPOINT"]
    if not path.startswith("/"):
        path = f"/subscriptions/{os.environ['AZURE_SUBSCRIPTION_ID']}/{path}"
    namespace = next((ns for ns in API_VERSIONS if f"/providers/{ns}/" in path), None)
    version = API_VERSIONS.get(namespace, "2024-03-01")
    sep = "&" if "?" in path else "?"
    return f"{endpoint}{path}{sep}api-version={version}"


def follow(headers, bearer):
    """Polls Azure-AsyncOperation until the operation ends; fails on Failed."""
    poll = headers.get("Azure-AsyncOperation") or headers.get("azure-asyncoperation")
    deadline = time.monotonic() + 300
    while poll and time.monotonic() < deadline:
        _, h, op = call("GET", poll, token=bearer)
        status = (op or {}).get("status", "")
        if status.lower() == "succeeded":
            return
        if status.lower() in ("failed", "canceled"):
            sys.exit(f"operation {poll}: {status}: {(op or {}).get('error')}")
        time.sleep(float(h.get("Retry-After", "1")))


def identity():
    endpoint = os.environ["AZURE_ENDPOINT"]
    _, _, t = call("POST", f"{endpoint}/identity/v3/auth/tokens", body={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": os.environ.get("OS_USERNAME", "admin"), "domain": {"name": "Default"},
            "password": os.environ["AZURE_CLIENT_SECRET"]}}},
        "scope": {"project": {"name": os.environ.get("OS_PROJECT_NAME", "demo"), "domain": {"id": "default"}}}}})
    guid = lambda h: f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    print(f"AZURE_CLIENT_ID={guid(t['token']['user']['id'])}")
    print(f"AZURE_SUBSCRIPTION_ID={guid(t['token']['project']['id'])}")


def instances(group):
    bearer = token()
    _, _, page = call("GET", url_of(f"resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines"), token=bearer)
    out = []
    for vm in page.get("value", []):
        _, _, view = call("GET", url_of(vm["id"] + "/instanceView"), token=bearer)
        power = next((s["code"].split("/", 1)[1] for s in view.get("statuses", [])
                      if s.get("code", "").startswith("PowerState/")), "unknown")
        out.append({"name": vm["name"], "id": vm["name"], "status": power})
    json.dump(sorted(out, key=lambda i: i["name"]), sys.stdout)
    print()


def disk(disk_id, out):
    bearer = token()
    _, _, d = call("GET", url_of(disk_id), token=bearer)
    p = d.get("properties", {})
    attachments = []
    vm_id = d.get("managedBy")
    if vm_id:
        _, _, vm = call("GET", url_of(vm_id), token=bearer)
        for dd in vm.get("properties", {}).get("storageProfile", {}).get("dataDisks", []):
            if dd.get("managedDisk", {}).get("id", "").lower() == disk_id.lower():
                attachments.append({"instance": vm["name"], "device_path": f"/dev/disk/azure/scsi1/lun{dd['lun']}"})
    print("  disk %s: %s GiB, %s, sku %s%s" % (d["name"], p.get("diskSizeGB"), p.get("diskState"),
          d.get("sku", {}).get("name"), ", managedBy " + vm_id.rsplit("/", 1)[-1] if vm_id else ""))
    for a in attachments:
        print("    attached to %s at %s" % (a["instance"], a["device_path"]))
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"status": p.get("diskState"), "in_use": bool(vm_id), "attachments": attachments}, f)


def main(argv):
    if not argv:
        sys.exit(__doc__)
    verb, args = argv[0], argv[1:]
    if verb == "identity" and not args:
        return identity()
    if verb == "instances" and len(args) == 1:
        return instances(args[0])
    if verb == "disk" and len(args) == 2:
        return disk(args[0], args[1])
    bearer = token()
    if verb == "put" and len(args) == 2:
        _, headers, _ = call("PUT", url_of(args[0]), body=json.loads(args[1]), token=bearer)
        follow(headers, bearer)
        _, _, answer = call("GET", url_of(args[0]), token=bearer)
    elif verb == "get" and len(args) == 1:
        _, _, answer = call("GET", url_of(args[0]), token=bearer)
    elif verb in ("post", "delete") and len(args) == 1:
        _, headers, answer = call(verb.upper(), url_of(args[0]), token=bearer)
        follow(headers, bearer)
    else:
        sys.exit(__doc__)
    if answer is not None:
        json.dump(answer, sys.stdout)
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
