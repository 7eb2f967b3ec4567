#!/usr/bin/env python3
"""The table of hack/migrate.sh: each Service's load balancer before and after the hand-over.

    migrate-report.py DIR SERVICES

Reads what migrate.sh saved in DIR: {before,after}-services.json (the apiserver's Service list),
{before,after}-lbs.json and {before,after}-fips.json (`openstack loadbalancer list -f json`,
`openstack floating ip list -f json`) and probe/<service> (one line per request of the curl loop:
`ok` or `failed <time>`). Prints a Markdown table, one row per Service, and the problems found;
exits 1 when there is one:

- before, the Service's load balancer is not the one load balancer under its legacy in-tree name
  (`a` + UID without dashes, cut to 32), or its ingress IP is not a floating IP on that load
  balancer's VIP;
- after, the Service's `loadbalancer.openstack.org/load-balancer-id` (written by the
  cloud-controller-manager) is missing or names another load balancer, or the ingress IP changed
  or no longer is a floating IP on the same VIP;
- a request through the floating IP failed, or the loop made none;
- the cloud holds another number of load balancers or floating IPs than before, or one that no
  Service owns (orphaned).
"""
import json
import os
import sys

ANNOTATION_ID = "loadbalancer.openstack.org/load-balancer-id"


def load(dir, name):
    with open(os.path.join(dir, name)) as f:
        return json.load(f)


def legacy_name(uid):
    return ("a" + uid.replace("-", ""))[:32]


def ingress_ip(svc):
    ing = svc.get("status", {}).get("loadBalancer", {}).get("ingress", [])
    return ing[0].get("ip", "") if ing else ""


def fip_on(fips, address, vip):
    """The floating IP `address` if it is associated with the fixed IP `vip`."""
    return any(f.get("Floating IP Address") == address and f.get("Fixed IP Address") == vip for f in fips)


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: migrate-report.py DIR SERVICES")
    dir, want = argv[0], int(argv[1])
    phases = {}
    for phase in ("before", "after"):
        services = [s for s in load(dir, f"{phase}-services.json")["items"] if s["metadata"]["name"].startswith("web-")]
        phases[phase] = {
            "services": {s["metadata"]["name"]: s for s in services},
            "lbs": load(dir, f"{phase}-lbs.json"),
            "fips": load(dir, f"{phase}-fips.json"),
        }
    before, after = phases["before"], phases["after"]
    problems = []
    rows = []
    owned = set()
    for name in sorted(before["services"], key=lambda n: (len(n), n)):
        svc = before["services"][name]
        legacy = legacy_name(svc["metadata"]["uid"])
        b_lbs = [lb for lb in before["lbs"] if lb["name"] == legacy]
        b_lb = b_lbs[0] if len(b_lbs) == 1 else {}
        if len(b_lbs) != 1:
            problems.append(f"{name}: {len(b_lbs)} load balancers named {legacy} before the hand-over, want 1")
        b_ip = ingress_ip(svc)
        if b_lb and not fip_on(before["fips"], b_ip, b_lb["vip_address"]):
            problems.append(f"{name}: ingress {b_ip or '(none)'} is no floating IP on the VIP {b_lb['vip_address']}")

        a_svc = after["services"].get(name, {})
        a_id = a_svc.get("metadata", {}).get("annotations", {}).get(ANNOTATION_ID, "")
        a_lbs = [lb for lb in after["lbs"] if lb["id"] == a_id]
        a_lb = a_lbs[0] if a_lbs else {}
        a_ip = ingress_ip(a_svc) if a_svc else ""
        if not a_id:
            problems.append(f"{name}: no {ANNOTATION_ID} annotation after the hand-over (not adopted)")
        elif not a_lb:
            problems.append(f"{name}: {ANNOTATION_ID} {a_id} names no load balancer of the cloud")
        if b_lb and a_id and a_id != b_lb["id"]:
            problems.append(f"{name}: load balancer id changed from {b_lb['id']} to {a_id}")
        if a_ip != b_ip:
            problems.append(f"{name}: ingress IP changed from {b_ip} to {a_ip or '(none)'}")
        if a_lb and not fip_on(after["fips"], a_ip, a_lb["vip_address"]):
            problems.append(f"{name}: after the hand-over {a_ip or '(none)'} is no floating IP on the VIP {a_lb['vip_address']}")
        owned.update(x for x in (b_lb.get("id"), a_id) if x)

        try:
            with open(os.path.join(dir, "probe", name)) as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            lines = []
        requests = sum(1 for line in lines if line)
        failed = sum(1 for line in lines if line.startswith("failed"))
        if requests == 0:
            problems.append(f"{name}: the curl loop made no request")
        if failed:
            problems.append(f"{name}: {failed} of {requests} requests through {b_ip} failed")
        rows.append((name, b_lb.get("id", "-"), a_id or "-", b_lb.get("name", "-"), a_lb.get("name", "-"),
                     b_ip or "-", a_ip or "-", str(requests), str(failed)))

    if len(before["services"]) != want:
        problems.append(f"{len(before['services'])} Services before the hand-over, want {want}")
    for phase, p in phases.items():
        if len(p["lbs"]) != want:
            problems.append(f"{phase}: the cloud has {len(p['lbs'])} load balancers, want {want} (one per Service)")
        if len(p["fips"]) != want:
            problems.append(f"{phase}: the cloud has {len(p['fips'])} floating IPs, want {want} (one per Service)")
        for lb in p["lbs"]:
            if lb["id"] not in owned:
                problems.append(f"{phase}: load balancer {lb['id']} ({lb['name']}) belongs to no Service (orphaned)")

    head = ("Service", "LB id before", "LB id after", "name before", "name after", "IP before", "IP after",
            "requests", "failed")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nopenstack loadbalancer list: {len(before['lbs'])} before, {len(after['lbs'])} after; "
          f"openstack floating ip list: {len(before['fips'])} before, {len(after['fips'])} after")
    for p in problems:
        print("migrate: " + p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
