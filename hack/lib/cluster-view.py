#!/usr/bin/env python3
"""What the cloud put into the cluster, normalised so two runs can be diffed.

    cluster-view.py NODES.json SERVICES.json PVS.json IDS PODS.json ENDPOINTSLICES.json PENDING

The JSON files are apiserver list responses (PODS: the demo Deployment's pods); IDS has "UUID NAME"
lines (the local cloud's instance and volume IDs; on aws also instance, volume and ELB names), so provider IDs and volume handles read <instance node-1> instead
of a UUID that differs between runs; PENDING has one line per pod that the scheduler left Pending
before the cloud initialised the Nodes (empty when none was). Prints Nodes (labels, taints,
addresses, providerID, condition statuses), Services (type, class, ingress, finalizers, the
cloud provider's loadbalancer.openstack.org/* annotations), PVs
(labels, node affinity; a dynamically provisioned one in one line, with where it is attached) and the scheduling results (pods per phase, EndpointSlice endpoints)
as sorted YAML-ish text, one fact a line, so `diff -u` shows exactly what differs. Facts that
differ between two runs of the same layout (pod names and IPs, which Node a pod landed on,
heartbeat times) are left out.
"""
import json
import re
import sys

# The in-tree volume sources and the key that holds the volume's ID (the unique volume name on
# a Node is <plugin>/<that ID>).
IN_TREE_SOURCES = (("cinder", "volumeID"), ("gcePersistentDisk", "pdName"),
                   ("awsElasticBlockStore", "volumeID"), ("vsphereVolume", "volumePath"),
                   ("azureDisk", "diskURI"))

# The local cloud's UUIDs; AWS instance, volume and (Service-UID derived) load balancer names.
UUID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|\bi-[0-9a-f]{8,17}\b|\bvol-[0-9a-f]{8,17}\b|\ba[0-9a-f]{31}\b"
)


def main(nodes_path, services_path, pvs_path, ids_path, pods_path, slices_path, pending_path):
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
        if not name.startswith(("node-", "ip-")):
            continue
        out.append(f"node/{name}:")
        out.append(f"  providerID: {norm(n['spec'].get('providerID', ''))}")
        for k, v in sorted(n["metadata"].get("labels", {}).items()):
            out.append(f"  label {k}={v}")
        for t in sorted(n["spec"].get("taints", []), key=lambda t: (t["key"], t["effect"], t.get("value", ""))):
            out.append(f"  taint {t['key']}={t.get('value', '')}:{t['effect']}")
        for a in n.get("status", {}).get("addresses", []):
            out.append(f"  address {a['type']} {a['address']}")
        for c in sorted(n.get("status", {}).get("conditions", []), key=lambda c: c["type"]):
            out.append(f"  condition {c['type']}={c['status']}")
    for s in sorted(load(services_path), key=lambda s: s["metadata"]["name"]):
        if s["spec"].get("type") != "LoadBalancer":
            continue
        out.append(f"service/{s['metadata']['namespace']}/{s['metadata']['name']}:")
        if s["spec"].get("loadBalancerClass"):
            out.append(f"  class {s['spec']['loadBalancerClass']}")
        for fin in sorted(s["metadata"].get("finalizers", [])):
            out.append(f"  finalizer {fin}")
        for k, v in sorted(s["metadata"].get("annotations", {}).items()):
            if k.startswith("loadbalancer.openstack.org/"):
                out.append(f"  annotation {k}={norm(v)}")
        for i in s.get("status", {}).get("loadBalancer", {}).get("ingress", []):
            out.append(f"  ingress {norm(i.get('ip') or i.get('hostname'))}")
    attached = {}  # <plugin>/<volume id> (kubernetes.io/cinder/<id>) -> device paths on the Nodes
    for n in load(nodes_path):
        for v in n.get("status", {}).get("volumesAttached") or []:
            attached.setdefault(v["name"], []).append(v["devicePath"])
    for p in sorted(load(pvs_path), key=lambda p: p["metadata"]["name"]):
        provisioner = p["metadata"].get("annotations", {}).get("pv.kubernetes.io/provisioned-by")
        if provisioner:
            # A dynamically provisioned PV (local-up's volume step): its name holds the claim's
            # UID, so one line says what it is.
            claim = p["spec"].get("claimRef", {})
            labels = p["metadata"].get("labels", {})
            volume_id = next((p["spec"][source][key] for source, key in IN_TREE_SOURCES
                              if source in p["spec"]), "")
            # In-tree the Node names it <plugin>/<volume id>; through a CSI driver (CSI
            # migration) kubernetes.io/csi/<driver>^<volume id>.
            devices = [d for name, paths in attached.items()
                       if name == f"{provisioner}/{volume_id}" or name.endswith(f"^{volume_id}")
                       for d in paths]
            out.append(
                f"pv/pvc-{{uid}} of claim {claim.get('namespace')}/{claim.get('name')}: provisioned by {provisioner}, "
                + " ".join(f"{k.split('/')[-1]}={v}" for k, v in sorted(labels.items()))
                + f", attached to {len(devices)} Node(s) at {','.join(devices) or '-'}"
            )
            continue
        out.append(f"pv/{p['metadata']['name']}:")
        for k, v in sorted(p["metadata"].get("labels", {}).items()):
            out.append(f"  label {k}={v}")
        terms = p["spec"].get("nodeAffinity", {}).get("required", {}).get("nodeSelectorTerms", [])
        for term in terms:
            for e in term.get("matchExpressions", []):
                out.append(f"  affinity {e['key']} {e['operator']} {','.join(sorted(e.get('values', [])))}")
    pods = load(pods_path)
    phases = {}
    for p in pods:
        phase = p.get("status", {}).get("phase", "")
        phases[phase] = phases.get(phase, 0) + 1
    out.append("pods app=hello:")
    for phase, count in sorted(phases.items()):
        out.append(f"  {count} {phase}")
    unscheduled = sum(1 for p in pods if not p["spec"].get("nodeName"))
    out.append(f"  {unscheduled} not scheduled")
    with open(pending_path) as f:
        pending = [line for line in f if line.strip()]
    if pending:
        out.append(f"  {len(pending)} were Pending before the cloud initialised the Nodes"
                   " (untolerated taint node.cloudprovider.kubernetes.io/uninitialized)")
    for s in sorted(load(slices_path), key=lambda s: s["metadata"]["name"]):
        service = s["metadata"].get("labels", {}).get("kubernetes.io/service-name", "")
        if service != "hello":
            continue
        out.append(f"endpointslice of {s['metadata']['namespace']}/{service}:")
        out.append(f"  {len(s.get('endpoints') or [])} endpoints")
        for port in sorted(s.get("ports") or [], key=lambda p: p.get("name", "")):
            out.append(f"  port {port.get('name', '')} {port.get('port')}/{port.get('protocol')}")
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    main(*sys.argv[1:])
