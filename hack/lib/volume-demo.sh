# shellcheck shell=bash
# hack/local-up.sh's in-tree volume step, the same for every cloud that has one (sourced):
#
#   volume_demo   in-tree: a StorageClass of the cloud's in-tree plugin (kubernetes.io/cinder on
#                 the local cloud, kubernetes.io/gce-pd on its GCE dialect, kubernetes.io/photon-pd
#                 on its Photon dialect; WaitForFirstConsumer),
#                 a claim default/<class>-data and a pod default/<class>-app using it, placed by
#                 the real kube-scheduler; hypercloud's controller-manager creates the volume in
#                 the chosen Node's zone and attaches it to that Node's instance, the Node's
#                 kubelet-helper (run without --once for that Node) reports the volume in use
#                 and the device it would mount. Shows the Node's status.volumesAttached beside
#                 the cloud's own view (`openstack volume show`, `instances.get` through Google's
#                 client) and checks they agree. External: says that this is a CSI driver's job
#                 and skips it.
#
# What a cloud provides, named after it (the local cloud's below, the others' in
# hack/lib/cloud-<cloud>.sh; a cloud without <cloud>_volume_class has no volume step):
#   <cloud>_volume_class      sets vol_plugin (the provisioner), vol_class (the StorageClass's
#                             name), vol_params (its parameters, a JSON object) and vol_zone (its
#                             allowedTopologies' one zone, so that every run draws the same
#                             calls; empty: any)
#   <cloud>_volume_show ID I  prints the cloud's view of volume ID with its official client and
#                             writes $dir/volume-cloud.json: {"status", "in_use", "attachments":
#                             [{"instance", "device_path"}]}, device paths as the Node records them
#   <cloud>_instance_id I     the instance of node I as the cloud's attachments name it
#   <cloud>_volume_pv         (optional: a plugin that attaches but cannot provision, as
#                             upstream's rackspace) creates a volume in the cloud as an operator
#                             would and prints the PersistentVolume's in-tree source, a JSON
#                             member such as "cinder":{"volumeID":"..."}: the step then makes no
#                             StorageClass (vol_params and vol_zone unused) but a PV
#                             <vol_class>-existing of that volume and a claim bound to it
#
# Uses local-up's step, fail, wait_for, kget, kcreate, cloud_node_flags and its variables (mode,
# dir, bin, kubeconfig, provider, nodes, node_name, pids).

volume_demo() {
  if ! declare -F "${cloud}_volume_class" >/dev/null; then
    step "volumes: the $cloud cloud's demo has no in-tree volume step"
    return 0
  fi
  local vol_zone=""
  "${cloud}_volume_class"
  local topology=""
  [ -z "$vol_zone" ] ||
    topology=",\"allowedTopologies\":[{\"matchLabelExpressions\":[{\"key\":\"topology.kubernetes.io/zone\",\"values\":[\"$vol_zone\"]}]}]"
  if [ "$mode" = external ]; then
    if ! declare -F "${cloud}_csi_node_flags" >/dev/null; then
      step "volumes: skipped in the external layout"
      echo "local-up: provisioning and attaching volumes is a CSI driver's job in the external layout (for $vol_plugin: the CSI driver CSI migration names for it, with external-provisioner and external-attacher), not the cloud-controller-manager's; this demo runs hypercloud's csi-driver only for the local cloud (hack/migrate.sh and the e2e test csi_sidecars run it too), so the volume step is skipped"
      return 0
    fi
    csi_start
  fi
  local claim="$vol_class-data" app="$vol_class-app" vol_source=""
  if declare -F "${cloud}_volume_pv" >/dev/null; then
    # No provisioning: an existing volume, its PV, and a claim bound to it by name.
    step "an existing $vol_plugin volume as a PersistentVolume, a claim bound to it and a pod using it: the cloud attaches it to the pod's Node"
    vol_source=$("${cloud}_volume_pv") || fail "the $cloud cloud's existing volume"
    kcreate /api/v1/persistentvolumes "{\"metadata\":{\"name\":\"$vol_class-existing\"},\"spec\":{\"capacity\":{\"storage\":\"1Gi\"},\"accessModes\":[\"ReadWriteOnce\"],\"persistentVolumeReclaimPolicy\":\"Retain\",\"storageClassName\":\"\",$vol_source}}" >/dev/null
    kcreate /api/v1/namespaces/default/persistentvolumeclaims "{\"metadata\":{\"name\":\"$claim\"},\"spec\":{\"storageClassName\":\"\",\"volumeName\":\"$vol_class-existing\",\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}" >/dev/null
  else
    step "a claim of a $vol_plugin StorageClass and a pod using it: the cloud creates the volume and attaches it to the pod's Node"
    kcreate /apis/storage.k8s.io/v1/storageclasses "{\"metadata\":{\"name\":\"$vol_class\"},\"provisioner\":\"$vol_plugin\",\"parameters\":$vol_params,\"reclaimPolicy\":\"Delete\",\"volumeBindingMode\":\"WaitForFirstConsumer\",\"allowVolumeExpansion\":true$topology}" >/dev/null
    kcreate /api/v1/namespaces/default/persistentvolumeclaims "{\"metadata\":{\"name\":\"$claim\"},\"spec\":{\"storageClassName\":\"$vol_class\",\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}" >/dev/null
  fi
  kcreate /api/v1/namespaces/default/pods "{\"metadata\":{\"name\":\"$app\"},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"registry.k8s.io/pause:3.10\",\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"}]}],\"volumes\":[{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"$claim\"}}]}}" >/dev/null
  if [ -n "$vol_source" ]; then
    echo "pv/$vol_class-existing ($vol_plugin, {$vol_source}, Retain), pvc default/$claim 1Gi bound to it by name, pod default/$app"
  else
    echo "storageclass/$vol_class ($vol_plugin $vol_params, WaitForFirstConsumer${vol_zone:+, allowed zone $vol_zone}), pvc default/$claim 1Gi, pod default/$app"
  fi

  # WaitForFirstConsumer: the scheduler picks the Node first (selected-node), then the claim is
  # provisioned in that Node's zone, bound by the upstream binder, and the pod bound.
  pod_node() { kget "/api/v1/namespaces/default/pods/$app" | python3 -c '
import json, sys
n = json.load(sys.stdin)["spec"].get("nodeName")
print(n) if n else sys.exit(1)'; }
  volume_diag() { kget "/api/v1/namespaces/default/persistentvolumeclaims/$claim" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print("pvc default/%s: phase %s, annotations %s" % (c["metadata"]["name"], c.get("status", {}).get("phase"), c["metadata"].get("annotations", {})))'; }
  diagnose=volume_diag wait_for 90 "the scheduler to bind pod default/$app once its claim is $([ -n "$vol_source" ] && echo bound || echo provisioned) (see $dir/logs/kube-controller-manager.log, upstream-kube-scheduler.log)" pod_node
  local node pv volume_id i
  node=$(pod_node)
  pv=$(kget "/api/v1/namespaces/default/persistentvolumeclaims/$claim" | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["volumeName"])')
  kget "/api/v1/persistentvolumes/$pv" >"$dir/volume-pv.json"
  # The volume's ID in the PV's in-tree source, whichever plugin made it.
  volume_id=$(python3 -c '
import json, sys
spec = json.load(open(sys.argv[1]))["spec"]
for source, key in (("cinder", "volumeID"), ("gcePersistentDisk", "pdName"),
                    ("awsElasticBlockStore", "volumeID"), ("vsphereVolume", "volumePath"),
                    ("azureDisk", "diskURI"), ("photonPersistentDisk", "pdID")):
    if source in spec:
        print(spec[source][key])
        break
else:
    sys.exit("local-up: FAILED: the PV has no in-tree volume source: %s" % sorted(spec))' "$dir/volume-pv.json")
  python3 -c '
import json, sys
pv = json.load(open(sys.argv[1]))
labels = pv["metadata"].get("labels", {})
print("pv/%s: volume %s, %s, %s, node %s chosen by the scheduler" % (pv["metadata"]["name"],
      sys.argv[3], pv["spec"]["capacity"]["storage"],
      ", ".join("%s=%s" % kv for kv in sorted(labels.items())) or "no labels", sys.argv[2]))' "$dir/volume-pv.json" "$node" "$volume_id"

  # The kubelet's side: local-up registered the Nodes with `kubelet-helper --once`; the Node that
  # runs the pod gets a kubelet-helper that stays (its address sync slowed to once an hour, so the
  # traces hold the same calls in every run).
  for i in $(seq 1 "$nodes"); do [ "$(node_name "$i")" = "$node" ] && break; done
  if [ "$mode" = external ]; then
    csi_attached "$node" "$volume_id" "$i"
    return 0
  fi
  cloud_node_flags "$i"
  "$bin/kubelet-helper" "--cloud-provider=$provider" "${node_flags[@]}" --kubeconfig "$kubeconfig" \
    --hostname-override "$node" --node-status-update-frequency=1h \
    --trace-cloud-calls "$dir/trace-kubelet-helper.jsonl" --v=2 \
    >"$dir/logs/kubelet-helper-$node.log" 2>&1 &
  pids+=($!)
  local unique="$vol_plugin/$volume_id"
  attached_everywhere() {
    kget "/api/v1/nodes/$node" | python3 -c '
import json, sys
st = json.load(sys.stdin).get("status", {})
want = sys.argv[1]
ok = any(v["name"] == want for v in st.get("volumesAttached") or []) and want in (st.get("volumesInUse") or [])
sys.exit(0 if ok else 1)' "$unique" &&
      grep -F "volume $unique " "$dir/logs/kubelet-helper-$node.log" | grep -q "is attached to this node's instance at"
  }
  wait_for 90 "volume $volume_id to be attached to $node and seen by its kubelet-helper (see $dir/logs/kube-controller-manager.log, kubelet-helper-$node.log)" attached_everywhere
  kget "/api/v1/nodes/$node" >"$dir/volume-node.json"
  "${cloud}_volume_show" "$volume_id" "$i"
  python3 hack/lib/volume-check.py "$dir/volume-node.json" "$dir/volume-cloud.json" "$("${cloud}_instance_id" "$i")" "$unique" ||
    fail "the Node and the cloud disagree about volume $volume_id (above)"
  grep -F "volume $unique " "$dir/logs/kubelet-helper-$node.log" | sed "s/^/  kubelet-helper on $node: /"
  echo "local-up: volume $volume_id attached to $node, the Node that runs pod default/$app"
}

# csi_start: the external layout's volume path (the local cloud): hypercloud's csi-driver (a
# controller, and a node plugin per Node: the local cloud gives this machine no disks, so the
# node plugins record what a real node would mount), the upstream external-provisioner and
# external-attacher, the CSIDriver object, and per Node a kubelet-helper that registers the
# driver (CSINode with the migrated-plugins annotation) and stages and publishes its volumes.
# The upstream kube-controller-manager's binder and attach/detach controller do CSI migration:
# the same kubernetes.io/cinder class as in-tree, served by the driver.
csi_start() {
  step "volumes, external: hypercloud's csi-driver with the upstream CSI sidecars (CSI migration of kubernetes.io/cinder)"
  local csi_bin i node
  csi_bin="$(hack/csi-tools.sh bin)" || fail "hack/csi-tools.sh"
  mkdir -p "$dir/csi"
  "$bin/csi-driver" "--cloud-provider=$provider" "--cloud-config=$dir/cloud.conf" \
    --endpoint "unix://$dir/csi/controller.sock" --provide-node-service=false \
    --trace-cloud-calls "$dir/trace-csi-driver.jsonl" --v=2 >"$dir/logs/csi-driver-controller.log" 2>&1 &
  pids+=($!)
  for i in $(seq 1 "$nodes"); do
    node=$(node_name "$i")
    "$bin/csi-driver" "--cloud-provider=$provider" "--cloud-config=$dir/cloud.conf" \
      --endpoint "unix://$dir/csi/$node.sock" --provide-controller-service=false --node-name "$node" \
      $("${cloud}_csi_node_flags" "$i") \
      --trace-cloud-calls "$dir/trace-csi-driver.jsonl" --v=2 >"$dir/logs/csi-driver-$node.log" 2>&1 &
    pids+=($!)
  done
  local sockets_up
  sockets_up() { local n; for n in controller $(for i in $(seq 1 "$nodes"); do node_name "$i"; done); do [ -S "$dir/csi/$n.sock" ] || return 1; done; }
  wait_for 30 "the csi-driver sockets in $dir/csi (see $dir/logs/csi-driver-*.log)" sockets_up
  "$csi_bin/csi-provisioner" "--csi-address=$dir/csi/controller.sock" "--kubeconfig=$kubeconfig" --extra-create-metadata --v=2 \
    >"$dir/logs/csi-provisioner.log" 2>&1 &
  pids+=($!)
  "$csi_bin/csi-attacher" "--csi-address=$dir/csi/controller.sock" "--kubeconfig=$kubeconfig" --v=2 \
    >"$dir/logs/csi-attacher.log" 2>&1 &
  pids+=($!)
  kcreate /apis/storage.k8s.io/v1/csidrivers '{"metadata":{"name":"cinder.csi.openstack.org"},"spec":{"attachRequired":true,"podInfoOnMount":false}}' >/dev/null
  for i in $(seq 1 "$nodes"); do
    node=$(node_name "$i")
    "$bin/kubelet-helper" --cloud-provider=external --kubeconfig "$kubeconfig" --hostname-override "$node" \
      "--csi-driver-endpoint=unix://$dir/csi/$node.sock" --root-dir "$dir/kubelet-$node" --v=2 \
      >"$dir/logs/kubelet-helper-$node.log" 2>&1 &
    pids+=($!)
  done
  csinodes_ready() {
    kget /apis/storage.k8s.io/v1/csinodes | python3 -c '
import json, sys
n = sum(1 for c in json.load(sys.stdin)["items"] if c["metadata"]["name"].startswith(sys.argv[2])
        and any(d["name"] == "cinder.csi.openstack.org" for d in c["spec"].get("drivers") or []))
sys.exit(0 if n >= int(sys.argv[1]) else 1)' "$nodes" "$node_prefix"
  }
  wait_for 60 "every Node's CSINode to list the driver (see $dir/logs/kubelet-helper-*.log)" csinodes_ready
  echo "csi-driver (controller + a node plugin per Node), csi-provisioner, csi-attacher; every Node's CSINode lists cinder.csi.openstack.org (migrated-plugins kubernetes.io/cinder)"
}

# csi_attached NODE VOLUME I: external, the volume attached to NODE through a VolumeAttachment
# and published by its kubelet-helper; the cloud's view beside it.
csi_attached() {
  local node="$1" volume_id="$2" i="$3"
  local unique="kubernetes.io/csi/cinder.csi.openstack.org^$volume_id"
  csi_published() {
    kget "/api/v1/nodes/$node" | python3 -c '
import json, sys
st = json.load(sys.stdin).get("status", {})
want = sys.argv[1]
ok = any(v["name"] == want for v in st.get("volumesAttached") or []) and want in (st.get("volumesInUse") or [])
sys.exit(0 if ok else 1)' "$unique" && grep -q "NodePublishVolume at" "$dir/logs/kubelet-helper-$node.log"
  }
  wait_for 90 "volume $volume_id to be attached to $node and published by its kubelet-helper (see $dir/logs/upstream-kube-controller-manager.log, csi-attacher.log, kubelet-helper-$node.log)" csi_published
  kget "/api/v1/nodes/$node" >"$dir/volume-node.json"
  kget /apis/storage.k8s.io/v1/volumeattachments >"$dir/volume-attachments.json"
  "${cloud}_volume_show" "$volume_id" "$i"
  python3 hack/lib/volume-check.py "$dir/volume-node.json" "$dir/volume-cloud.json" "$("${cloud}_instance_id" "$i")" "$unique" \
    "$dir/volume-attachments.json" || fail "the VolumeAttachment and the cloud disagree about volume $volume_id (above)"
  grep -E "volume $unique: |registered CSI driver" "$dir/logs/kubelet-helper-$node.log" | sed "s/^/  kubelet-helper on $node: /"
  echo "local-up: volume $volume_id attached to $node through the CSI driver, the Node that runs the pod"
}

# The local cloud's volume step: Cinder volumes attached by Nova.
local_volume_class() {
  vol_plugin=kubernetes.io/cinder vol_class=cinder vol_params='{}'
}
local_instance_id() { cat "$dir/node-$1.id"; }
# local_csi_node_flags I: the CSI node plugin of node-I looks for its disks where the local cloud
# links them (none without --volume-backing: the plugin then records what it would mount).
local_csi_node_flags() { echo "--device-dir=$dir/cloud/devices/$(local_instance_id "$1")"; }
local_volume_show() {
  echo "\$ openstack volume show $1 -c status -c attachments"
  openstack_volume_show "$1" >"$dir/volume-show.json"
  python3 - "$dir/volume-show.json" "$dir/volume-cloud.json" <<'EOF'
import json, sys
vol = json.load(open(sys.argv[1]))
att = vol.get("attachments") or []
print("  status %s" % vol["status"])
for a in att:
    print("  attachment: server_id %s device %s" % (a.get("server_id"), a.get("device")))
json.dump({"status": vol["status"], "in_use": vol["status"] == "in-use",
           "attachments": [{"instance": a.get("server_id"), "device_path": a.get("device")} for a in att]},
          open(sys.argv[2], "w"))
EOF
}

# openstack_volume_show ID: `openstack volume show ID -f json` against the local cloud, with the
# official client when hack/python-tools.sh has installed it, else local-cloud's own command.
openstack_volume_show() {
  local osc="$HYPERCLOUD_CACHE/venv/bin/openstack"
  if [ -x "$osc" ]; then
    # Only the local cloud's clouds.yaml: none of the caller's OS_* variables.
    # shellcheck disable=SC2046 # one -u NAME pair per OS_* variable
    env $(env | sed -n 's/^\(OS_[A-Za-z0-9_]*\)=.*/-u \1/p') OS_CLIENT_CONFIG_FILE="$dir/cloud/clouds.yaml" OS_CLOUD=local \
      "$osc" volume show "$1" -f json
  else
    echo "  (the openstack CLI is not installed: hack/python-tools.sh; local-cloud volume show instead)" >&2
    "$bin/local-cloud" --state-dir "$dir/cloud" volume show "$1" -o json
  fi
}
