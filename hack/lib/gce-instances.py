#!/usr/bin/env python3
"""The instances of a GCE project as hack/lib/kubelet-power.py reads them.

    gce-instances.py PROJECT-URL      (http://127.0.0.1:PORT/compute/v1/projects/demo)

Asks Compute Engine v1 `instances.aggregatedList` (every zone, every page) and prints a JSON
list of {"name", "id", "status"}. "id" is the instance's name: a GCE provider ID,
gce://<project>/<zone>/<name>, ends with the name, and kubelet-power.py matches a Node to the
instance its provider ID ends with. Status is GCE's (RUNNING, STOPPING, TERMINATED, ...).
"""
import json
import sys
import urllib.parse
import urllib.request


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__)
    base = argv[0].rstrip("/")
    out, token = [], ""
    while True:
        url = base + "/aggregated/instances?maxResults=500"
        if token:
            url += "&pageToken=" + urllib.parse.quote(token)
        with urllib.request.urlopen(url, timeout=10) as r:
            page = json.load(r)
        for scoped in page.get("items", {}).values():
            for i in scoped.get("instances", []):
                out.append({"name": i["name"], "id": i["name"], "status": i.get("status", "")})
        token = page.get("nextPageToken", "")
        if not token:
            break
    json.dump(sorted(out, key=lambda i: i["name"]), sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
