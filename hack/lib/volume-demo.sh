# shellcheck shell=bash
# hack/local-up.sh's volume step for the local cloud (sourced; its OpenStack Cinder and Nova):
#
#   volume_demo   in-tree: a StorageClass cinder (provisioner kubernetes.io/cinder,
#                 WaitForFirstConsumer), a claim default/cinder-data and a pod default/cinder-app
#                 using it, placed by the real kube-scheduler; hypercloud's controller-manager
#                 creates the Cinder volume in the chosen Node's zone and attaches it to that
#                 Node's instance (Nova os-volume_attachments), the Node's kubelet-helper (run
#                 without --once for that Node) reports the volume in use and the device it
#                 would mount. Shows the Node's status.volumesAttached beside
#                 `openstack volume show` (status, attachments: server and device), and checks
#                 they agree. External: says that this is a CSI driver's job and skips it.
#
# Uses local-up's step, fail, wait_for, kget, kcreate, free_port and its variables (mode, dir,
# bin, kubeconfig, pids).

volume_demo() {
  if [ "$mode" = external ]; then
    step "volumes: skipped in the external layout"
    echo "local-up: provisioning and attaching volumes is a CSI driver's job in the external layout (for OpenStack cinder-csi-plugin, cinder.csi.openstack.org, with external-provisioner and external-attacher), not the cloud-controller-manager's; hypercloud ships no CSI driver, so the volume step is skipped"
    return 0
  fi
  step "a claim of a kubernetes.io/cinder StorageClass and a pod using it: Cinder creates the volume, Nova attaches it to the pod's Node"
  kcreate /apis/storage.k8s.io/v1/storageclasses '{"metadata":{"name":"cinder"},"provisioner":"kubernetes.io/cinder","reclaimPolicy":"Delete","volumeBindingMode":"WaitForFirstConsumer","allowVolumeExpansion":true}' >/dev/null
  kcreate /api/v1/namespaces/default/persistentvolumeclaims '{"metadata":{"name":"cinder-data"},"spec":{"storageClassName":"cinder","accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}' >/dev/null
  kcreate /api/v1/namespaces/default/pods '{"metadata":{"name":"cinder-app"},"spec":{"containers":[{"name":"app","image":"registry.k8s.io/pause:3.10","volumeMounts":[{"name":"data","mountPath":"/data"}]}],"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"cinder-data"}}]}}' >/dev/null
  echo "storageclass/cinder (kubernetes.io/cinder, WaitForFirstConsumer), pvc default/cinder-data 1Gi, pod default/cinder-app"

  # WaitForFirstConsumer: the scheduler picks the Node first (selected-node), then the claim is
  # provisioned in that Node's zone, bound by the upstream binder, and the pod bound.
  pod_node() { kget /api/v1/namespaces/default/pods/cinder-app | python3 -c '
import json, sys
n = json.load(sys.stdin)["spec"].get("nodeName")
print(n) if n else sys.exit(1)'; }
  volume_diag() { kget /api/v1/namespaces/default/persistentvolumeclaims/cinder-data | python3 -c '
import json, sys
c = json.load(sys.stdin)
print("pvc default/cinder-data: phase %s, annotations %s" % (c.get("status", {}).get("phase"), c["metadata"].get("annotations", {})))'; }
  diagnose=volume_diag wait_for 90 "the scheduler to bind pod default/cinder-app once its claim is provisioned (see $dir/logs/kube-controller-manager.log, upstream-kube-scheduler.log)" pod_node
  local node pv volume_id i
  node=$(pod_node)
  pv=$(kget /api/v1/namespaces/default/persistentvolumeclaims/cinder-data | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["volumeName"])')
  kget "/api/v1/persistentvolumes/$pv" >"$dir/volume-pv.json"
  volume_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["cinder"]["volumeID"])' "$dir/volume-pv.json")
  python3 -c '
import json, sys
pv = json.load(open(sys.argv[1]))
labels = pv["metadata"].get("labels", {})
print("pv/%s: cinder volume %s, %s, %s, node %s chosen by the scheduler" % (pv["metadata"]["name"],
      pv["spec"]["cinder"]["volumeID"], pv["spec"]["capacity"]["storage"],
      ", ".join("%s=%s" % kv for kv in sorted(labels.items())), sys.argv[2]))' "$dir/volume-pv.json" "$node"

  # The kubelet's side: local-up registered the Nodes with `kubelet-helper --once`; the Node that
  # runs the pod gets a kubelet-helper that stays (its address sync slowed to once an hour, so the
  # traces hold the same calls in every run).
  i=${node#node-}
  "$bin/kubelet-helper" --cloud-provider=local "--cloud-config=$dir/cloud-node-$i.conf" --kubeconfig "$kubeconfig" \
    --hostname-override "$node" --node-status-update-frequency=1h \
    --trace-cloud-calls "$dir/trace-kubelet-helper.jsonl" --v=2 \
    >"$dir/logs/kubelet-helper-$node.log" 2>&1 &
  pids+=($!)
  local unique="kubernetes.io/cinder/$volume_id"
  attached_everywhere() {
    kget "/api/v1/nodes/$node" | python3 -c '
import json, sys
st = json.load(sys.stdin).get("status", {})
want = sys.argv[1]
ok = any(v["name"] == want for v in st.get("volumesAttached") or []) and want in (st.get("volumesInUse") or [])
sys.exit(0 if ok else 1)' "$unique" &&
      grep -q "^volume $unique .* is attached to this node's instance at" "$dir/logs/kubelet-helper-$node.log"
  }
  wait_for 90 "volume $volume_id to be attached to $node and seen by its kubelet-helper (see $dir/logs/kube-controller-manager.log, kubelet-helper-$node.log)" attached_everywhere
  kget "/api/v1/nodes/$node" >"$dir/volume-node.json"
  echo "\$ openstack volume show $volume_id -c status -c attachments"
  openstack_volume_show "$volume_id" >"$dir/volume-show.json"
  python3 - "$dir/volume-node.json" "$dir/volume-show.json" "$(cat "$dir/node-$i.id")" "$unique" <<'EOF'
import json, sys
node, vol, instance, unique = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
name = node["metadata"]["name"]
att = vol.get("attachments") or []
print("  status %s" % vol["status"])
for a in att:
    print("  attachment: server_id %s device %s" % (a.get("server_id"), a.get("device")))
print("node/%s (instance %s):" % (name, instance))
for v in node["status"].get("volumesAttached") or []:
    print("  volumesAttached %s devicePath %s" % (v["name"], v["devicePath"]))
print("  volumesInUse %s" % ", ".join(node["status"].get("volumesInUse") or []))
paths = [v["devicePath"] for v in node["status"].get("volumesAttached") or [] if v["name"] == unique]
problems = []
if vol["status"] != "in-use":
    problems.append("Cinder says %s, not in-use" % vol["status"])
if [a.get("server_id") for a in att] != [instance]:
    problems.append("Cinder shows it attached to %s, not to %s's instance %s" % ([a.get("server_id") for a in att], name, instance))
if [a.get("device") for a in att] != paths:
    problems.append("the Node records device %s, Cinder %s" % (paths, [a.get("device") for a in att]))
if problems:
    sys.exit("local-up: FAILED: " + "; ".join(problems))
EOF
  grep "^volume $unique " "$dir/logs/kubelet-helper-$node.log" | sed "s/^/  kubelet-helper on $node: /"
  echo "local-up: volume $volume_id attached to $node, the Node that runs pod default/cinder-app"
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
