# shellcheck shell=bash
# The vSphere steps of hack/local-up.sh --cloud vsphere: sourced by it, this file redefines its
# cloud_* functions (uses its $dir, $bin, pids, step, fail, wait_for, kcreate, kget).
# vcsim, VMware's vCenter simulator, plays the cloud: one VM per Node (node-1..N on host DC0_H0, guest host name = VM name, guest IP 10.20.0.1x),
# zone tag zone-a (category k8s-zone) on the host and region tag region-1 (k8s-region) on
# datacenter DC0, all set with govc, VMware's CLI.

cloud_start() {
  step "start vcsim, VMware's vCenter simulator (hack/vcsim.sh; govmomi built once, cached)"
  hack/vcsim.sh start "$dir/vcsim" >"$dir/vcsim.env"
  pids+=("$(cat "$dir/vcsim/vcsim.pid")")
  # shellcheck disable=SC1091 # written by hack/vcsim.sh start
  source "$dir/vcsim.env"
  govc() { "$VCSIM_BIN/govc" "$@"; }
  cp "$dir/vcsim/vsphere.conf" "$dir/vsphere.conf"
  echo "vcsim: $GOVC_URL (govc: $VCSIM_BIN/govc; GOVC_URL and GOVC_INSECURE=1 in $dir/vcsim.env)"
  provider=vsphere
  cloud_flags=(--cloud-provider=vsphere "--cloud-config=$dir/vsphere.conf")
}

# cloud_create_instances N: VMs node-1..node-N; each one's UUID in $dir/node-I.id.
cloud_create_instances() {
  step "create $1 VMs with govc, with guest host names and IPs, and zone/region tags"
  local i ip uuid
  for i in $(seq 1 "$1"); do
    # Not a loopback address: the provider, as upstream, never reports those. Nothing listens on
    # it (no load balancer step on vSphere); it is the guest's address as VMware Tools reports it.
    ip="10.20.0.$((10 + i))"
    govc vm.create -host /DC0/host/DC0_H0/DC0_H0 -net "VM Network" -on=false "node-$i" >/dev/null
    govc vm.customize -vm "node-$i" -name "node-$i" -ip "$ip" -netmask 255.255.255.0 >/dev/null
    govc vm.power -on "node-$i" >/dev/null
    uuid=$(govc object.collect -s "/DC0/vm/node-$i" config.uuid)
    echo "$uuid" >"$dir/node-$i.id"
    # What the node itself reads from /sys/class/dmi/id/product_uuid: which VM it is. On one
    # machine each kubelet-helper gets a file of its own, named in its vsphere.conf.
    echo "$uuid" | tr '[:lower:]' '[:upper:]' >"$dir/node-$i.product_uuid"
    { cat "$dir/vsphere.conf"; printf '\n[Hypercloud]\nproduct-uuid-file = %s\n' "$dir/node-$i.product_uuid"; } >"$dir/cloud-node-$i.conf"
  done
  govc tags.category.create k8s-zone >/dev/null
  govc tags.category.create k8s-region >/dev/null
  govc tags.create -c k8s-zone zone-a >/dev/null
  govc tags.create -c k8s-region region-1 >/dev/null
  govc tags.attach -c k8s-zone zone-a /DC0/host/DC0_H0/DC0_H0
  govc tags.attach -c k8s-region region-1 /DC0
  govc ls /DC0/vm | grep '/node-' | while read -r vm; do
    printf '%s  %s  %s\n' "$vm" "$(govc object.collect -s "$vm" guest.ipAddress)" "$(govc object.collect -s "$vm" config.uuid)"
  done
  echo "tags: $(govc tags.attached.ls -r /DC0/host/DC0_H0/DC0_H0) on host DC0_H0, $(govc tags.attached.ls -r /DC0) on datacenter DC0"
}

cloud_instances_command() {
  printf '%s\n' env "GOVC_URL=$GOVC_URL" GOVC_INSECURE=1 python3 hack/lib/vsphere-instances.py "$VCSIM_BIN/govc"
}

cloud_stop_instance() {
  govc vm.power -off "node-$1" >/dev/null
  echo "govc vm.power -off node-$1"
}

cloud_volume() {
  step "create a PersistentVolume of a vSphere disk on datastore LocalDS_0 (its zone comes from the tags of the host that mounts it)"
  kcreate /api/v1/persistentvolumes '{"metadata":{"name":"data-1"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"persistentVolumeReclaimPolicy":"Retain","vsphereVolume":{"volumePath":"[LocalDS_0] kubevols/data-1.vmdk","fsType":"ext4"}}}' >/dev/null
  pv_labelled() { kget /api/v1/persistentvolumes/data-1 | grep -q '"topology.kubernetes.io/zone"'; }
  wait_for 60 "PersistentVolume data-1 to get zone labels (see $dir/logs)" pv_labelled
  kget /api/v1/persistentvolumes/data-1 | python3 -c '
import json, sys
pv = json.load(sys.stdin)
labels = pv["metadata"].get("labels", {})
print("pv/data-1 (%s): %s" % (pv["spec"]["vsphereVolume"]["volumePath"],
      ", ".join("%s=%s" % kv for kv in sorted(labels.items()))))'
}

# The in-tree volume step (hack/lib/volume-demo.sh): kubernetes.io/vsphere-volume VMDKs under
# kubevols/ on LocalDS_0, added to the Node's VM with ReconfigVM_Task, shown by govc.
vsphere_volume_class() {
  vol_plugin=kubernetes.io/vsphere-volume vol_class=vsphere-volume vol_params='{"diskformat":"thin","datastore":"LocalDS_0"}'
}
vsphere_instance_id() { echo "node-$1"; }
vsphere_volume_show() {
  echo "\$ govc datastore.ls -ds LocalDS_0 kubevols; govc device.info -vm node-$2 -json 'disk-*'"
  govc datastore.ls -ds LocalDS_0 kubevols | sed 's/^/  /'
  govc device.info -vm "node-$2" -json 'disk-*' >"$dir/volume-show.json" || fail "govc device.info -vm node-$2"
  python3 - "$dir/volume-show.json" "$dir/volume-cloud.json" "$1" "node-$2" <<'PY'
import json, sys

def field(obj, name):  # govc's JSON names fields as Go or as the vSphere API does
    for k, v in (obj or {}).items():
        if k.lower() == name.lower():
            return v
    return None

devices = field(json.load(open(sys.argv[1])), "devices") or []
path, vm = sys.argv[3], sys.argv[4]
att = []
for d in devices:
    backing = field(d, "backing") or {}
    print("  %s %s: %s" % (vm, field(d, "name") or field(field(d, "deviceInfo"), "label"), field(backing, "fileName")))
    if field(backing, "fileName") == path:
        uuid = (field(backing, "uuid") or "").replace("-", "").lower()
        att.append({"instance": vm, "device_path": "/dev/disk/by-id/wwn-0x" + uuid})
json.dump({"status": "attached" if att else "detached", "in_use": bool(att), "attachments": att},
          open(sys.argv[2], "w"))
PY
}

cloud_load_balancer() {
  step "load balancer: skipped: vSphere has no load balancers (as upstream; the service controller does not start)"
  # A ClusterIP Service for the pods instead, so the Endpoints step still has one to show.
  kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}' >/dev/null
  echo "local-up: load balancer step skipped for vsphere"
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  kube-apiserver   $api_url            export KUBECONFIG=$kubeconfig
  vcsim            $GOVC_URL
  symlinks         $bin
VMware's CLI against the simulator (power a VM off, destroy it, and watch its Node):
  source $dir/vcsim.env; \$VCSIM_BIN/govc ls /DC0/vm
  \$VCSIM_BIN/govc vm.power -off node-1; \$VCSIM_BIN/govc vm.destroy node-1
Press Ctrl-C to stop everything.
BANNER
}
