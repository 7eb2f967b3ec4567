#!/usr/bin/env python3
"""Print vcsim's VMs as the instance list hack/lib/kubelet-power.py reads: a JSON list of
{"name", "id" (the VM's UUID, as in its vsphere:// providerID), "status" (its power state)}.

    vsphere-instances.py GOVC [GOVC_URL...]    (GOVC_URL and GOVC_INSECURE in the environment)

Each further GOVC_URL is another vCenter (local-up --vcenters N) whose VMs are listed too.
"""
import json
import os
import subprocess
import sys

vms = []
for url in [None] + sys.argv[2:]:
    env = dict(os.environ, GOVC_URL=url) if url else None
    out = subprocess.run([sys.argv[1], "vm.info", "-json", "/DC0/vm/*"], check=True,
                         capture_output=True, text=True, env=env).stdout
    vms += json.loads(out).get("virtualMachines") or []
json.dump([{"name": v["name"], "id": v["config"]["uuid"], "status": v["runtime"]["powerState"]}
           for v in vms], sys.stdout)
