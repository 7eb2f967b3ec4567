#!/usr/bin/env python3
"""The per-PV table of hack/migrate.sh's storage half (hack/lib/migrate-volumes.sh).

    migrate-volumes-report.py DIR

Reads DIR/before.json and DIR/after.json (one PV's facts before and after the switch to the
external layout), DIR/left.json (`openstack volume list -f json` at the end). Prints a Markdown
table, one row per fact, and the problems found; exits 1 when there is one:

- after the switch the PV or the cloud volume is another one (re-created, not migrated);
- the volume is attached to more than one instance, or not to node-2's;
- the token written before the switch was not read back after it, or after the resize;
- the volume did not grow to 2 GiB in the cloud, or its file system did not;
- a volume is left in the cloud after the claim was deleted (orphaned).
"""
import json
import os
import sys


def load(dir, name):
    with open(os.path.join(dir, name)) as f:
        return json.load(f)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    dir = sys.argv[1]
    try:
        before, after, left = load(dir, "before.json"), load(dir, "after.json"), load(dir, "left.json")
    except (OSError, ValueError) as e:
        print(f"migrate-volumes-report: cannot read the recorded facts: {e}", file=sys.stderr)
        return 1
    rows = [
        ("PV", "pv", "pv"),
        ("cloud volume", "volume", "volume"),
        ("PV source", "source", "source"),
        ("node", "node", "node"),
        ("attached to instance", "server", "server"),
        ("device (Nova's attachment)", "device", "device"),
        ("attachment recorded in", "attachment", "attachment"),
        ("data", "data", "data"),
        ("size in the cloud (GiB)", "size", "size"),
    ]
    print("| PV fact | before (in-tree) | after (external, CSI migration) |")
    print("|---|---|---|")
    for label, b, a in rows:
        print(f"| {label} | {before.get(b, '')} | {after.get(a, '')} |")
    print(f"| data after the resize | | {after.get('data_after_resize', '')} |")
    print(f"| file system size (GiB, df) | | {after.get('fs_gib', '')} |")
    problems = []
    if after.get("pv") != before.get("pv"):
        problems.append(f"the PV changed: {before.get('pv')} -> {after.get('pv')}")
    if after.get("volume") != before.get("volume"):
        problems.append(f"the cloud volume changed: {before.get('volume')} -> {after.get('volume')}")
    servers = [s for s in str(after.get("server", "")).split(",") if s]
    if len(servers) != 1:
        problems.append(f"attached to {len(servers)} instances after the switch: {servers}")
    if after.get("data") != "read back":
        problems.append("the token written before the switch was not read back after it")
    if after.get("data_after_resize") != "read back":
        problems.append("the token was not read back after the resize")
    if after.get("size") != 2:
        problems.append(f"the volume is {after.get('size')} GiB in the cloud, not 2")
    if int(after.get("fs_gib") or 0) < 2:
        problems.append(f"the file system is {after.get('fs_gib')} GiB, not grown to 2")
    if left:
        problems.append(f"{len(left)} volume(s) left in the cloud: {[v.get('ID') for v in left]}")
    for p in problems:
        print(f"migrate: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
