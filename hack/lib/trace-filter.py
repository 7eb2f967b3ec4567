#!/usr/bin/env python3
"""Keeps the calls of one kind from cloud-call traces (JSON lines, --trace-cloud-calls).

    trace-filter.py KIND OUTDIR TRACE...

Writes OUTDIR/<basename of each TRACE> with only the records whose method is of KIND:
`volumes`: creating, growing, deleting, attaching and detaching cloud volumes, and the instance
and zone look-ups a CSI node plugin makes for NodeGetInfo. Left out: the CSI driver's
`find_volumes` (how often the sidecars retry an idempotent call, and so what a repeated look-up
finds, differs between runs). A missing TRACE (a component that made no cloud call writes none) is
skipped.
"""
import json
import os
import sys

KINDS = {
    "volumes": {"create_volume", "delete_volume", "expand_volume", "attach_disk",
                "detach_disk", "disk_is_attached", "disks_are_attached",
                "get_attachment_disk_path", "instance_id", "get_zone_by_node_name",
                "instance_exists_by_provider_id"},
}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in KINDS:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    methods, out = KINDS[sys.argv[1]], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for path in sys.argv[3:]:
        if not os.path.exists(path):
            continue
        with open(path) as f, open(os.path.join(out, os.path.basename(path)), "w") as o:
            for line in f:
                if line.strip() and json.loads(line).get("method") in methods:
                    o.write(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
