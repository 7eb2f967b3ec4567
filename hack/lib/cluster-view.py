#!/usr/bin/env python3
"""What the cloud put into the cluster, normalised so two runs can be diffed.

    cluster-view.py NODES.json SERVICES.json PVS.json IDS

The JSON files are apiserver list responses; IDS has "UUID NAME" lines (the local cloud's
instance and volume IDs), so provider IDs and volume handles read <instance node-1> instead
of a UUID that differs between runs. Prints Nodes (labels, taints, addresses, providerID),
Services (type, class, ingress, finalizers) and PVs (labels, node affinity) as sorted YAML-ish
text, one fact a line, so `diff -u` shows exactly what differs.
"""
import json
import re
import sys

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def main(nodes_path, services_path, pvs_path, ids_path):
    names = {}
    with open(ids_path) as f:
        for line in f:
            if line.strip():
                uuid, name = line.split(None, 1)
                names[uuid] = name.strip()

    def norm(text):
        return UUID.sub(lambda m: f"<{names.get(m.group(0), 'unknown id')}>", str(text))

    def load(path):
        with open(path) as f:
            return json.load(f)["items"]

    out = []
    for n in sorted(load(nodes_path), key=lambda n: n["metadata"]["name"]):
        name = n["metadata"]["name"]
        if not name.startswith("node-"):
            continue
        out.append(f"node/{name}:")
        out.append(f"  providerID: {norm(n['spec'].get('providerID', ''))}")
        for k, v in sorted(n["metadata"].get("labels", {}).items()):
            out.append(f"  label {k}={v}")
        for t in sorted(n["spec"].get("taints", []), key=lambda t: t["key"]):
            out.append(f"  taint {t['key']}={t.get('value', '')}:{t['effect']}")
        for a in n.get("status", {}).get("addresses", []):
            out.append(f"  address {a['type']} {a['address']}")
    for s in sorted(load(services_path), key=lambda s: s["metadata"]["name"]):
        if s["spec"].get("type") != "LoadBalancer":
            continue
        out.append(f"service/{s['metadata']['namespace']}/{s['metadata']['name']}:")
        if s["spec"].get("loadBalancerClass"):
            out.append(f"  class {s['spec']['loadBalancerClass']}")
        for fin in sorted(s["metadata"].get("finalizers", [])):
            out.append(f"  finalizer {fin}")
        for i in s.get("status", {}).get("loadBalancer", {}).get("ingress", []):
            out.append(f"  ingress {i.get('ip') or i.get('hostname')}")
    for p in sorted(load(pvs_path), key=lambda p: p["metadata"]["name"]):
        out.append(f"pv/{p['metadata']['name']}:")
        for k, v in sorted(p["metadata"].get("labels", {}).items()):
            out.append(f"  label {k}={v}")
        terms = p["spec"].get("nodeAffinity", {}).get("required", {}).get("nodeSelectorTerms", [])
        for term in terms:
            for e in term.get("matchExpressions", []):
                out.append(f"  affinity {e['key']} {e['operator']} {','.join(sorted(e.get('values', [])))}")
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
