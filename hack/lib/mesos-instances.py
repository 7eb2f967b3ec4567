#!/usr/bin/env python3
"""The agents of a Mesos master as the cloud's instances, for hack/lib/kubelet-power.py:

    mesos-instances.py http://HOST:PORT/state

prints a JSON list of {"name": agent hostname (the Node's name), "id": agent ID (the end of
the Node's providerID mesos://<agent id>), "status": "ACTIVE" or, for a disconnected agent
(active false), "SHUTOFF"}. A master that does not answer, or answers something else than a
state document, is an error (exit 1) naming the URL.
"""
import json
import sys
import urllib.request


def main():
    if len(sys.argv) != 2:
        print("usage: mesos-instances.py http://HOST:PORT/state", file=sys.stderr)
        return 2
    url = sys.argv[1]
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            state = json.load(r)
        agents = state["slaves"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("mesos-instances: %s: %s" % (url, e), file=sys.stderr)
        return 1
    print(json.dumps([{"name": a["hostname"], "id": a["id"],
                       "status": "ACTIVE" if a.get("active", True) else "SHUTOFF"}
                      for a in agents]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
