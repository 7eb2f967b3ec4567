#!/usr/bin/env python3
"""The power switch of the simulated kubelets: a kubelet runs on a Node only while its
instance runs in the cloud.

    kubelet-power.py --kubeconfig FILE --label-value VALUE [--interval SECONDS] [--once]
                     -- INSTANCES-COMMAND...

kwok plays the kubelets of the Nodes that carry the label hypercloud.io/kubelet=VALUE
(kwok --manage-nodes-with-label-selector). This loop owns that label: every INTERVAL
(default 1 s) it runs INSTANCES-COMMAND, which prints the cloud's instances as JSON (a list,
or an object holding one, of objects with "name", "id" and "status"; the local cloud's
`local-cloud instance list -o json`), and for every Node whose name starts with one of
--node-prefix (default: every Node named like an instance) it

  - sets the label when the Node's instance is running (status ACTIVE or running), so kwok
    starts posting status and renewing the Node's Lease, as a booted kubelet would;
  - removes it when the instance is stopped or gone, so kwok lets go of the Node and its Lease
    expires, as when a machine powers off: after --node-monitor-grace-period the real
    kube-controller-manager marks the Node NotReady (Unknown) and taints it unreachable, and
    the cloud-node-lifecycle controller then asks the cloud (shutdown taint, or Node deleted).

A Node belongs to the instance its providerID names (<provider>:///<id> or .../<id>), or,
before the cloud has initialised it (external layout: no providerID yet), to the instance of
the same name. Nothing else on the Node is touched. Errors of one round are printed and the
loop goes on; bad arguments exit 2.
"""
import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

LABEL = "hypercloud.io/kubelet"
RUNNING = {"ACTIVE", "RUNNING", "running", "poweredOn"}


def load_kubeconfig(path):
    """(server, ssl context, headers) from the first cluster/user of an envtest kubeconfig."""
    server = ca = token = None
    with open(path) as f:
        for line in f:
            s = line.strip()
            if s.startswith("server:") and server is None:
                server = s.split(":", 1)[1].strip()
            elif s.startswith("certificate-authority-data:") and ca is None:
                ca = base64.b64decode(s.split(":", 1)[1].strip())
            elif s.startswith("token:") and token is None:
                token = s.split(":", 1)[1].strip()
    if not server or not token:
        raise ValueError(f"{path}: no server or token user (an envtest kubeconfig has both)")
    ctx = ssl.create_default_context()
    if ca:
        with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as f:
            f.write(ca)
        ctx.load_verify_locations(f.name)
        os.unlink(f.name)
    return server, ctx, {"Authorization": f"Bearer {token}"}


class Api:
    def __init__(self, kubeconfig):
        self.server, self.ctx, self.headers = load_kubeconfig(kubeconfig)

    def call(self, method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
            return json.load(r)


def instances(command):
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=30).stdout
    data = json.loads(out)
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), [])
    return {i["id"]: i for i in data}, {i["name"]: i for i in data}


def instance_of(node, by_id, by_name):
    pid = node["spec"].get("providerID", "")
    if pid:
        return by_id.get(pid.rstrip("/").rsplit("/", 1)[-1])
    return by_name.get(node["metadata"]["name"])


def one_round(api, command, value, prefixes):
    by_id, by_name = instances(command)
    changed = []
    for node in api.call("GET", "/api/v1/nodes")["items"]:
        name = node["metadata"]["name"]
        if prefixes and not name.startswith(tuple(prefixes)):
            continue
        if not prefixes and not node["spec"].get("providerID") and name not in by_name:
            continue
        inst = instance_of(node, by_id, by_name)
        running = inst is not None and inst.get("status") in RUNNING
        has = node["metadata"].get("labels", {}).get(LABEL) == value
        if running == has:
            continue
        patch = {"metadata": {"labels": {LABEL: value if running else None}}}
        api.call("PATCH", f"/api/v1/nodes/{name}", patch, "application/merge-patch+json")
        state = "gone" if inst is None else inst.get("status")
        changed.append(f"{name}: instance {state}, kubelet {'on' if running else 'off'}")
    return changed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--label-value", default="running")
    p.add_argument("--node-prefix", action="append", default=[])
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--once", action="store_true")
    p.add_argument("command", nargs="+")
    a = p.parse_args()
    if not 0.1 <= a.interval <= 60:
        p.error(f"--interval must be between 0.1 and 60 seconds, got {a.interval}")
    try:
        api = Api(a.kubeconfig)
    except (OSError, ValueError) as e:
        print(f"kubelet-power: --kubeconfig: {e}", file=sys.stderr)
        sys.exit(2)
    while True:
        try:
            for line in one_round(api, a.command, a.label_value, a.node_prefix):
                print(f"kubelet-power: {line}", flush=True)
        except (OSError, ValueError, KeyError, subprocess.SubprocessError, urllib.error.URLError) as e:
            print(f"kubelet-power: this round failed: {e}", file=sys.stderr, flush=True)
            if a.once:
                sys.exit(1)
        if a.once:
            return
        time.sleep(a.interval)


if __name__ == "__main__":
    main()
