# shellcheck shell=bash
# hack/migrate.sh's storage half (sourced): a kubernetes.io/cinder volume across the switch from
# the in-tree layout to the external one with CSI migration (KEP-625).
#
#   volumes_in_tree   before the switch: a StorageClass of kubernetes.io/cinder, a claim, and a
#                     pod "writer" on node-1. hypercloud's in-tree controller-manager provisions
#                     the volume (a PV with a cinder source) and attaches it to node-1's instance
#                     (the local cloud backs it by a loop device, linked as the guest's
#                     /dev/disk/by-id/virtio-<id>). The in-tree kubelet-helper does not mount:
#                     this script does what its next_steps line says a real kubelet would
#                     (mkfs.ext4, mount at the plugin's global mount path) and writes a token.
#                     The pod is deleted; the controller-manager detaches the volume.
#   volumes_external  after the switch: the upstream kube-controller-manager (volume controllers
#                     only, --cloud-provider=external: CSI migration translates the cinder PV),
#                     hypercloud's csi-driver (a controller, and a node plugin per Node), the
#                     upstream external-attacher, -resizer and -provisioner, and the kubelet-helper
#                     (external) of node-2 registering the driver. A pod "reader" on node-2: the
#                     controller-manager creates a VolumeAttachment for cinder.csi.openstack.org,
#                     the attacher attaches the same volume to node-2's instance, the kubelet
#                     stages and publishes it, the token is read back. The pod goes, the claim
#                     grows to 2Gi through the resizer (offline), a second pod reads the token on
#                     the grown file system; then the pod and the claim go and the volume with them.
#   volumes_report    the per-PV table (hack/lib/migrate-volumes-report.py); false when a row
#                     differs where it must not.
#
# Uses migrate.sh's step, fail, wait_for, kget, kcreate, kcurl, os, free_port, and its variables
# (dir, bin, kubeconfig, api_url, pids, repo).

vol_dir() { echo "$dir/volumes"; }

# vol_json NAME JSON: records one fact for the report.
vol_json() { python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])))' "$2" >"$(vol_dir)/$1.json"; }

volume_show() { os volume show "$1" -f json; }
server_id_of() { os server show "$1" -f value -c id; }

# pod_json NAME NODE: a pod on NODE mounting the claim "data".
pod_json() {
  echo "{\"metadata\":{\"name\":\"$1\"},\"spec\":{\"nodeName\":\"$2\",\"containers\":[{\"name\":\"c\",\"image\":\"registry.k8s.io/pause:3.10\",\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"}]}],\"volumes\":[{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"data\"}}]}}"
}
delete_pod() { kcurl -X DELETE "$api_url/api/v1/namespaces/default/pods/$1?gracePeriodSeconds=0" >/dev/null; }
pod_gone() { ! kget "/api/v1/namespaces/default/pods/$1" >/dev/null 2>&1; }
volume_status_is() { [ "$(volume_show "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')" = "$2" ]; }

# upstream_kcm CONTROLLERS: (re)starts the upstream kube-controller-manager with CONTROLLERS, as
# a cluster's own kube-controller-manager runs beside hypercloud's cloud parts.
upstream_kcm() {
  if [ -n "${upstream_kcm_pid:-}" ]; then
    kill "$upstream_kcm_pid" 2>/dev/null || true
    wait "$upstream_kcm_pid" 2>/dev/null || true
  fi
  local pki="$HYPERCLOUD_ENVTEST_DIR/pki"
  "$cluster_bin/kube-controller-manager" --kubeconfig="$kubeconfig" \
    --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
    --cloud-provider=external --bind-address=127.0.0.1 --secure-port="$(free_port)" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" --leader-elect=false \
    "--controllers=$1" --v=2 >>"$dir/logs/upstream-kube-controller-manager.log" 2>&1 &
  upstream_kcm_pid=$!
  pids+=("$upstream_kcm_pid")
}

volumes_in_tree() {
  mkdir -p "$(vol_dir)"
  step "volumes, in-tree: hypercloud's controller-manager provisions a kubernetes.io/cinder volume and attaches it to node-1"
  # The cluster's own kube-controller-manager binds claims (its binder has no in-tree Cinder
  # plugin left since v1.26: it annotates the claim for the migrated CSI driver and waits);
  # hypercloud's in-tree controller-manager provisions and attaches.
  cluster_bin="$(hack/cluster.sh bin)" || fail "hack/cluster.sh"
  upstream_kcm persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller
  kcreate /api/v1/namespaces/default/serviceaccounts '{"metadata":{"name":"default"}}' >/dev/null 2>&1 || true
  kcreate /apis/storage.k8s.io/v1/storageclasses '{"metadata":{"name":"cinder"},"provisioner":"kubernetes.io/cinder","reclaimPolicy":"Delete","volumeBindingMode":"Immediate","allowVolumeExpansion":true}' >/dev/null
  kcreate /api/v1/namespaces/default/persistentvolumeclaims '{"metadata":{"name":"data"},"spec":{"storageClassName":"cinder","accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}' >/dev/null
  claim_bound() { kget /api/v1/namespaces/default/persistentvolumeclaims/data | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin).get("spec",{}).get("volumeName") else 1)'; }
  wait_for 60 "the claim to be provisioned (see $dir/logs/kube-controller-manager.log)" claim_bound
  vol_pv=$(kget /api/v1/namespaces/default/persistentvolumeclaims/data | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["volumeName"])')
  vol_id=$(kget "/api/v1/persistentvolumes/$vol_pv" | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["cinder"]["volumeID"])')
  echo "pv/$vol_pv: spec.cinder.volumeID $vol_id ($(volume_show "$vol_id" | python3 -c 'import json,sys; v=json.load(sys.stdin); print("%s GiB, %s" % (v["size"], v["status"]))'))"

  kcreate /api/v1/namespaces/default/pods "$(pod_json writer node-1)" >/dev/null
  local server1
  server1=$(server_id_of node-1)
  wait_for 60 "the volume to be attached to node-1 (see $dir/logs/kube-controller-manager.log)" volume_status_is "$vol_id" in-use
  local link device
  link="$devices_dir/$server1/virtio-${vol_id:0:20}"
  wait_for 10 "the guest's device link $link" test -e "$link"
  device=$(readlink -f "$link")
  local api_device
  api_device=$(volume_show "$vol_id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["attachments"][0]["device"])')
  # The in-tree kubelet's Cinder plugin: format when blank, mount at the global mount path.
  local mnt="$dir/kubelet-node-1/plugins/kubernetes.io/cinder/mounts/$vol_id"
  mkdir -p "$mnt"
  mkfs.ext4 -q "$device"
  mount "$device" "$mnt"
  vol_token="written in-tree on node-1 at $(date -u +%FT%TZ) ($RANDOM$RANDOM)"
  echo "$vol_token" >"$mnt/token"
  sync
  umount "$mnt"
  echo "attached to node-1 ($server1) at $api_device (on this machine $device); formatted ext4, mounted, token written"
  vol_json before "{\"pv\":\"$vol_pv\",\"volume\":\"$vol_id\",\"source\":\"cinder (in-tree)\",\"server\":\"$server1\",\"node\":\"node-1\",\"device\":\"$api_device\",\"data\":\"written\",\"attachment\":\"node.status.volumesAttached (in-tree attach/detach controller)\",\"size\":1}"
  printf '%s\n' "$vol_token" >"$(vol_dir)/token"

  delete_pod writer
  wait_for 60 "the writer pod to go" pod_gone writer
  wait_for 60 "hypercloud's controller-manager to detach the volume" volume_status_is "$vol_id" available
  echo "pod writer deleted; the volume detached (openstack volume show: available)"
}

# csi_node_plugin NODE: the driver's node service for NODE (as its DaemonSet pod would be).
csi_node_plugin() {
  local server
  server=$(server_id_of "$1")
  "$bin/csi-driver" --cloud-provider=local "--cloud-config=$dir/cloud.conf" \
    --endpoint "unix://$dir/csi/$1.sock" --provide-controller-service=false \
    --node-name "$1" --device-dir "$devices_dir/$server" --trace-cloud-calls "$dir/trace-csi-driver-$1.jsonl" \
    --v=2 >"$dir/logs/csi-driver-$1.log" 2>&1 &
  pids+=($!)
}

volumes_external() {
  step "volumes, external: the upstream kube-controller-manager with CSI migration, hypercloud's csi-driver, the upstream CSI sidecars"
  local csi_bin
  csi_bin="$(hack/csi-tools.sh bin)" || fail "hack/csi-tools.sh"
  mkdir -p "$dir/csi"
  local t0=$SECONDS
  "$bin/csi-driver" --cloud-provider=local "--cloud-config=$dir/cloud.conf" \
    --endpoint "unix://$dir/csi/controller.sock" --provide-node-service=false \
    --trace-cloud-calls "$dir/trace-csi-driver-controller.jsonl" --v=2 \
    >"$dir/logs/csi-driver-controller.log" 2>&1 &
  pids+=($!)
  csi_node_plugin node-2
  wait_for 30 "the csi-driver sockets" test -S "$dir/csi/controller.sock" -a -S "$dir/csi/node-2.sock"
  for s in provisioner attacher resizer; do
    local extra=()
    [ "$s" = provisioner ] && extra=(--extra-create-metadata)
    "$csi_bin/csi-$s" "--csi-address=$dir/csi/controller.sock" "--kubeconfig=$kubeconfig" --v=3 "${extra[@]}" \
      >"$dir/logs/csi-$s.log" 2>&1 &
    pids+=($!)
  done
  # The upgraded kube-controller-manager: its attach/detach and expander controllers now serve
  # the cinder PV through CSI migration.
  upstream_kcm persistentvolume-binder-controller,persistentvolume-attach-detach-controller,persistentvolume-expander-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller
  kcreate /apis/storage.k8s.io/v1/csidrivers '{"metadata":{"name":"cinder.csi.openstack.org"},"spec":{"attachRequired":true,"podInfoOnMount":false}}' >/dev/null
  local server2
  server2=$(server_id_of node-2)
  "$bin/kubelet-helper" --cloud-provider=external --kubeconfig "$kubeconfig" --hostname-override node-2 \
    "--provider-id=openstack:///$server2" "--csi-driver-endpoint=unix://$dir/csi/node-2.sock" \
    --root-dir "$dir/kubelet-node-2" --v=2 >"$dir/logs/kubelet-helper-node-2.log" 2>&1 &
  pids+=($!)
  csinode_ready() { kget /apis/storage.k8s.io/v1/csinodes/node-2 | grep -q '"storage.alpha.kubernetes.io/migrated-plugins": *"kubernetes.io/cinder"'; }
  wait_for 60 "node-2's CSINode with the driver (see $dir/logs/kubelet-helper-node-2.log)" csinode_ready
  echo "CSINode node-2: driver cinder.csi.openstack.org, node ID $server2, migrated-plugins kubernetes.io/cinder"

  step "volumes, external: a pod on node-2 uses the same claim; the CSI driver attaches it there, the kubelet mounts it"
  kcreate /api/v1/namespaces/default/pods "$(pod_json reader node-2)" >/dev/null
  va_attached() {
    kget /apis/storage.k8s.io/v1/volumeattachments | python3 -c '
import json, sys
for a in json.load(sys.stdin)["items"]:
    if a["spec"]["source"].get("persistentVolumeName") == sys.argv[1] and a.get("status", {}).get("attached"):
        print(a["metadata"]["name"], a["spec"]["attacher"], a["spec"]["nodeName"]); sys.exit(0)
sys.exit(1)' "$vol_pv"
  }
  wait_for 90 "a VolumeAttachment of pv/$vol_pv attached (see $dir/logs/upstream-kube-controller-manager.log, csi-attacher.log)" va_attached
  local va
  va=$(va_attached)
  local api_device
  api_device=$(volume_show "$vol_id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["attachments"][0]["device"])')
  local reader_uid target
  reader_uid=$(kget /api/v1/namespaces/default/pods/reader | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])')
  target="$dir/kubelet-node-2/pods/$reader_uid/volumes/kubernetes.io~csi/$vol_pv/mount"
  wait_for 60 "the kubelet-helper to publish the volume at $target" test -e "$target/token"
  local read_back data="differs"
  read_back=$(cat "$target/token")
  [ "$read_back" = "$(cat "$(vol_dir)/token")" ] && data="read back"
  echo "VolumeAttachment $va; attached to node-2 ($server2) at $api_device; token $data"
  local attach_seconds=$((SECONDS - t0))

  step "volumes, external: the claim grows to 2Gi through the external-resizer (offline: the pod goes first)"
  delete_pod reader
  wait_for 60 "the reader pod to go" pod_gone reader
  wait_for 90 "the CSI driver to detach the volume" volume_status_is "$vol_id" available
  kcurl -X PATCH -H 'Content-Type: application/merge-patch+json' --data '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}' \
    "$api_url/api/v1/namespaces/default/persistentvolumeclaims/data" >/dev/null
  grown() { [ "$(volume_show "$vol_id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')" = 2 ]; }
  wait_for 90 "the volume to grow to 2 GiB (see $dir/logs/csi-resizer.log)" grown
  kcreate /api/v1/namespaces/default/pods "$(pod_json reader-2 node-2)" >/dev/null
  reader_uid=$(kget /api/v1/namespaces/default/pods/reader-2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])')
  target="$dir/kubelet-node-2/pods/$reader_uid/volumes/kubernetes.io~csi/$vol_pv/mount"
  wait_for 90 "the grown volume published at $target" test -e "$target/token"
  local fs_gib resized="2 GiB in the cloud, file system $(df -BG --output=size "$target" | tail -1 | tr -d ' ')"
  fs_gib=$(df -BG --output=size "$target" | tail -1 | tr -dc '0-9')
  local data2="differs"
  [ "$(cat "$target/token")" = "$(cat "$(vol_dir)/token")" ] && data2="read back"
  echo "resized: $resized; token $data2"
  local attached_to
  attached_to=$(volume_show "$vol_id" | python3 -c 'import json,sys; print(",".join(a["server_id"] for a in json.load(sys.stdin)["attachments"]))')
  vol_json after "{\"pv\":\"$vol_pv\",\"volume\":\"$vol_id\",\"source\":\"cinder, translated to cinder.csi.openstack.org\",\"server\":\"$attached_to\",\"node\":\"node-2\",\"device\":\"$api_device\",\"data\":\"$data\",\"data_after_resize\":\"$data2\",\"attachment\":\"VolumeAttachment $va\",\"size\":2,\"fs_gib\":${fs_gib:-0},\"attach_seconds\":$attach_seconds}"

  step "volumes, external: the pod and the claim go; the driver detaches and deletes the volume"
  delete_pod reader-2
  wait_for 60 "the second reader pod to go" pod_gone reader-2
  wait_for 90 "the volume detached" volume_status_is "$vol_id" available
  kcurl -X DELETE "$api_url/api/v1/namespaces/default/persistentvolumeclaims/data" >/dev/null
  vol_gone() { ! os volume list -f value -c ID | grep -qx "$vol_id"; }
  wait_for 90 "the volume deleted in the cloud (see $dir/logs/csi-provisioner.log)" vol_gone
  os volume list -f json >"$(vol_dir)/left.json"
  echo "claim deleted; openstack volume list: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$(vol_dir)/left.json") volumes left"
  vol_external_seconds=$((SECONDS - t0))
}

volumes_report() {
  python3 "$repo/hack/lib/migrate-volumes-report.py" "$(vol_dir)"
}

# volumes_diagram UPDATE: the volume calls of the run (hypercloud's in-tree controller-manager,
# then the CSI driver's controller and node plugin) drawn by `hypercloud trace render`, compared
# with docs/diagrams/volumes-migration.mmd (false when it differs), or written there (and the
# SVG beside it) when UPDATE is true.
volumes_diagram() {
  local out
  out="$(vol_dir)/traces"
  mkdir -p "$out"
  python3 "$repo/hack/lib/trace-filter.py" volumes "$out" "$dir/trace-kube-controller-manager.jsonl" "$dir"/trace-csi-driver-*.jsonl
  local title="volumes across the migration: hack/migrate.sh (in-tree controller-manager, then the csi-driver with CSI migration)"
  "$HYPERCLOUD_BIN" trace render --format mermaid --participant kubelet-helper --title "$title" \
    -o "$(vol_dir)/volumes-migration.mmd" "$out"/trace-*.jsonl
  if [ "$1" = true ]; then
    cp "$(vol_dir)/volumes-migration.mmd" "$repo/docs/diagrams/volumes-migration.mmd"
    "$HYPERCLOUD_BIN" trace render --format svg --participant kubelet-helper --title "$title" \
      -o "$repo/docs/diagrams/volumes-migration.svg" "$out"/trace-*.jsonl
    echo "wrote docs/diagrams/volumes-migration.mmd and .svg"
  elif ! diff -u "$repo/docs/diagrams/volumes-migration.mmd" "$(vol_dir)/volumes-migration.mmd"; then
    echo "migrate: the volume calls differ from docs/diagrams/volumes-migration.mmd (diff above: committed -> this run); if the change is meant, run hack/migrate.sh --update-diagram and commit it" >&2
    return 1
  else
    echo "the volume calls match docs/diagrams/volumes-migration.mmd"
  fi
}
