#!/usr/bin/env python3
"""local-up's volume step: the Node's view of an attached volume beside the cloud's.

    volume-check.py NODE_JSON CLOUD_JSON INSTANCE UNIQUE [VOLUMEATTACHMENTS_JSON]

NODE_JSON is the Node as the apiserver has it, CLOUD_JSON what <cloud>_volume_show wrote
({"status", "in_use", "attachments": [{"instance", "device_path"}]}), INSTANCE the Node's instance
as the cloud's attachments name it, UNIQUE the volume's name in volumesAttached. In-tree the Node
records the device (volumesAttached devicePath); through a CSI driver the VolumeAttachment does
(attachmentMetadata DevicePath): pass the VolumeAttachment list to compare that one. Prints the
Node's volumes and exits 1 naming each disagreement with the cloud.
"""
import json
import sys


def main():
    if len(sys.argv) not in (5, 6):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    node, vol = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
    instance, unique = sys.argv[3], sys.argv[4]
    name = node["metadata"]["name"]
    status = node.get("status", {})
    att = vol.get("attachments") or []
    print("node/%s (instance %s):" % (name, instance))
    for v in status.get("volumesAttached") or []:
        print("  volumesAttached %s devicePath %s" % (v["name"], v.get("devicePath") or "-"))
    print("  volumesInUse %s" % ", ".join(status.get("volumesInUse") or []))
    if len(sys.argv) == 6:
        vas = [a for a in json.load(open(sys.argv[5]))["items"] if a["spec"]["nodeName"] == name]
        for a in vas:
            print("  volumeattachment attacher %s pv %s attached %s DevicePath %s" % (
                a["spec"]["attacher"], a["spec"]["source"].get("persistentVolumeName"),
                (a.get("status") or {}).get("attached"), device_of(a)))
        paths, recorder = [device_of(a) for a in vas], "the VolumeAttachment"
    else:
        paths = [v["devicePath"] for v in status.get("volumesAttached") or [] if v["name"] == unique]
        recorder = "the Node"
    problems = []
    if not vol.get("in_use"):
        problems.append("the cloud says %s, not in use" % vol.get("status"))
    if [a.get("instance") for a in att] != [instance]:
        problems.append("the cloud shows it attached to %s, not to %s's instance %s"
                        % ([a.get("instance") for a in att], name, instance))
    if [a.get("device_path") for a in att] != paths:
        problems.append("%s records device %s, the cloud %s"
                        % (recorder, paths, [a.get("device_path") for a in att]))
    if problems:
        print("local-up: FAILED: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


def device_of(attachment):
    return ((attachment.get("status") or {}).get("attachmentMetadata") or {}).get("DevicePath")


if __name__ == "__main__":
    sys.exit(main())
