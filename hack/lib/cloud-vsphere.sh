# shellcheck shell=bash
# The vSphere steps of hack/local-up.sh --cloud vsphere: sourced by it, this file redefines its
# cloud_* functions (uses its $dir, $bin, pids, step, fail, wait_for, kcreate, kget).
# vcsim, VMware's vCenter simulator, plays the cloud: one VM per Node (node-1..N on host DC0_H0, guest host name = VM name, guest IP 10.20.0.1x),
# zone tag zone-a (category k8s-zone) on the host and region tag region-1 (k8s-region) on
# datacenter DC0, all set with govc, VMware's CLI.
# With --vcenters N (local-up's $vcenters): N vcsims, the k-th on 127.0.0.k (hack/vcsim.sh start
# --host), one [VirtualCenter] section each in vsphere.conf ([Workspace] server: the first, where
# volumes are provisioned); node-I is created in vCenter ((I-1) mod N)+1, and the k-th vCenter's
# host has the zone tag zone-a, zone-b, ... (region-1 on every DC0).

# vcsim_dir K: the state directory of the K-th vcsim (the first is the one-vCenter demo's).
vcsim_dir() { if [ "$1" -eq 1 ]; then echo "$dir/vcsim"; else echo "$dir/vcsim-$1"; fi; }
# vcenter_of I: which vCenter (1..$vcenters) has node-I's VM.
vcenter_of() { echo $((($1 - 1) % vcenters + 1)); }
# zone_of_vcenter K: the zone tag on the K-th vCenter's host.
zone_of_vcenter() { echo "zone-$(printf '%s' abcd | cut -c "$1")"; }
# vcsim_var K NAME: NAME (GOVC_URL, VCSIM_HOST, VCSIM_PORT) of the K-th vcsim, from its env.sh.
vcsim_var() { sed -n "s/^export $2=//p" "$(vcsim_dir "$1")/env.sh"; }
# govc_at K ARGS...: govc against the K-th vcsim.
govc_at() {
  local k=$1
  shift
  (
    # shellcheck disable=SC1091 # written by hack/vcsim.sh start
    source "$(vcsim_dir "$k")/env.sh"
    "$VCSIM_BIN/govc" "$@"
  )
}

cloud_start() {
  step "start vcsim, VMware's vCenter simulator (hack/vcsim.sh; govmomi built once, cached)"
  hack/vcsim.sh start "$dir/vcsim" >"$dir/vcsim.env"
  pids+=("$(cat "$dir/vcsim/vcsim.pid")")
  # shellcheck disable=SC1091 # written by hack/vcsim.sh start
  source "$dir/vcsim.env"
  govc() { "$VCSIM_BIN/govc" "$@"; }
  cp "$dir/vcsim/vsphere.conf" "$dir/vsphere.conf"
  echo "vcsim: $GOVC_URL (govc: $VCSIM_BIN/govc; GOVC_URL and GOVC_INSECURE=1 in $dir/vcsim.env)"
  if [ "$vcenters" -gt 1 ]; then
    local k
    for k in $(seq 2 "$vcenters"); do
      step "start vcsim $k of $vcenters on 127.0.0.$k: another vCenter, of another server name"
      hack/vcsim.sh start "$(vcsim_dir "$k")" --host "127.0.0.$k" >"$dir/vcsim-$k.env"
      pids+=("$(cat "$(vcsim_dir "$k")/vcsim.pid")")
      echo "vcsim $k: $(vcsim_var "$k" GOVC_URL)"
    done
    vsphere_multi_conf >"$dir/vsphere.conf"
    echo "$dir/vsphere.conf: $vcenters [VirtualCenter] sections (volumes on the first, [Workspace] server)"
    grep '^\[VirtualCenter\|^port' "$dir/vsphere.conf" | sed 's/^/  /'
  fi
  provider=vsphere
  cloud_flags=(--cloud-provider=vsphere "--cloud-config=$dir/vsphere.conf")
}

# vsphere_multi_conf: the legacy INI vsphere.conf of every vcsim: [Global] credentials and
# datacenter, one [VirtualCenter "127.0.0.K"] with its port each.
vsphere_multi_conf() {
  printf '[Global]\nuser = "user"\npassword = "pass"\ninsecure-flag = "1"\ndatacenters = "DC0"\n'
  local k
  for k in $(seq 1 "$vcenters"); do
    printf '\n[VirtualCenter "%s"]\nport = "%s"\n' "$(vcsim_var "$k" VCSIM_HOST)" "$(vcsim_var "$k" VCSIM_PORT)"
  done
  printf '\n[Workspace]\nserver = "127.0.0.1"\n\n[Labels]\nregion = "k8s-region"\nzone = "k8s-zone"\n'
}

# cloud_create_instances N: VMs node-1..node-N; each one's UUID in $dir/node-I.id.
cloud_create_instances() {
  step "create $1 VMs with govc, with guest host names and IPs, and zone/region tags"
  [ "$vcenters" -eq 1 ] || echo "spread over $vcenters vCenters: node-I in vCenter ((I-1) mod $vcenters)+1"
  local i k ip uuid
  for i in $(seq 1 "$1"); do
    k=$(vcenter_of "$i")
    # Not a loopback address: the provider, as upstream, never reports those. Nothing listens on
    # it (no load balancer step on vSphere); it is the guest's address as VMware Tools reports it.
    ip="10.20.0.$((10 + i))"
    govc_at "$k" vm.create -host /DC0/host/DC0_H0/DC0_H0 -net "VM Network" -on=false "node-$i" >/dev/null
    govc_at "$k" vm.customize -vm "node-$i" -name "node-$i" -ip "$ip" -netmask 255.255.255.0 >/dev/null
    govc_at "$k" vm.power -on "node-$i" >/dev/null
    uuid=$(govc_at "$k" object.collect -s "/DC0/vm/node-$i" config.uuid)
    echo "$uuid" >"$dir/node-$i.id"
    # What the node itself reads from /sys/class/dmi/id/product_uuid: which VM it is. On one
    # machine each kubelet-helper gets a file of its own, named in its vsphere.conf.
    echo "$uuid" | tr '[:lower:]' '[:upper:]' >"$dir/node-$i.product_uuid"
    { cat "$dir/vsphere.conf"; printf '\n[Hypercloud]\nproduct-uuid-file = %s\n' "$dir/node-$i.product_uuid"; } >"$dir/cloud-node-$i.conf"
  done
  local zone prefix=""
  for k in $(seq 1 "$vcenters"); do
    zone=$(zone_of_vcenter "$k")
    [ "$vcenters" -eq 1 ] || prefix="vCenter 127.0.0.$k: "
    govc_at "$k" tags.category.create k8s-zone >/dev/null
    govc_at "$k" tags.category.create k8s-region >/dev/null
    govc_at "$k" tags.create -c k8s-zone "$zone" >/dev/null
    govc_at "$k" tags.create -c k8s-region region-1 >/dev/null
    govc_at "$k" tags.attach -c k8s-zone "$zone" /DC0/host/DC0_H0/DC0_H0
    govc_at "$k" tags.attach -c k8s-region region-1 /DC0
    govc_at "$k" ls /DC0/vm | grep '/node-' | while read -r vm; do
      printf '%s%s  %s  %s\n' "$prefix" "$vm" "$(govc_at "$k" object.collect -s "$vm" guest.ipAddress)" "$(govc_at "$k" object.collect -s "$vm" config.uuid)"
    done
    echo "${prefix}tags: $(govc_at "$k" tags.attached.ls -r /DC0/host/DC0_H0/DC0_H0) on host DC0_H0, $(govc_at "$k" tags.attached.ls -r /DC0) on datacenter DC0"
  done
}

cloud_instances_command() {
  printf '%s\n' env "GOVC_URL=$GOVC_URL" GOVC_INSECURE=1 python3 hack/lib/vsphere-instances.py "$VCSIM_BIN/govc"
  # The other vCenters' VMs too (their GOVC_URLs as more arguments).
  local k
  for k in $(seq 2 "$vcenters"); do
    vcsim_var "$k" GOVC_URL
  done
}

cloud_stop_instance() {
  local k
  k=$(vcenter_of "$1")
  govc_at "$k" vm.power -off "node-$1" >/dev/null
  if [ "$vcenters" -eq 1 ]; then
    echo "govc vm.power -off node-$1"
  else
    echo "govc vm.power -off node-$1 (in vCenter 127.0.0.$k)"
  fi
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
  # With several vCenters the disk is made on the [Workspace] server vCenter (the first) and
  # can only be attached to its VMs: the class allows that vCenter's zone only, so the
  # scheduler puts the pod on one of its Nodes.
  if [ "$vcenters" -gt 1 ]; then vol_zone=$(zone_of_vcenter 1); fi
}
vsphere_instance_id() { echo "node-$1"; }
vsphere_volume_show() {
  echo "\$ govc datastore.ls -ds LocalDS_0 kubevols; govc device.info -vm node-$2 -json 'disk-*'"
  govc_at 1 datastore.ls -ds LocalDS_0 kubevols | sed 's/^/  /'
  govc_at "$(vcenter_of "$2")" device.info -vm "node-$2" -json 'disk-*' >"$dir/volume-show.json" || fail "govc device.info -vm node-$2"
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
  vcsim            $GOVC_URL$(for k in $(seq 2 "$vcenters"); do printf '\n  vcsim %s          %s' "$k" "$(vcsim_var "$k" GOVC_URL)"; done)
  symlinks         $bin
VMware's CLI against the simulator (power a VM off, destroy it, and watch its Node):
  source $dir/vcsim.env; \$VCSIM_BIN/govc ls /DC0/vm
  \$VCSIM_BIN/govc vm.power -off node-1; \$VCSIM_BIN/govc vm.destroy node-1
Press Ctrl-C to stop everything.
BANNER
}
