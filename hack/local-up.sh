#!/usr/bin/env bash
# hypercloud on one machine: a real kube-apiserver + etcd, the local cloud, and every
# personality started through its symlink name against the same --cloud-provider=local.
#
#   hack/local-up.sh [--mode external|in-tree] [--nodes N] [--smoke] [--dir DIR] [--dump FILE]
#
#   --mode external (default): kubelet-helpers register tainted Nodes with no cloud call and
#                              the cloud-controller-manager initialises them from the cloud and
#                              labels volumes' PVs.
#   --mode in-tree:            kubelet-helpers ask the cloud themselves (the old layout), the
#                              controller-manager runs the in-tree cloud controllers and the
#                              apiserver-plugin webhook labels PVs and admits Nodes.
#   --smoke:                   check the result, stop everything and exit (CI); otherwise it
#                              keeps running until Ctrl-C, which stops everything it started.
#   --dump FILE:               write what the cloud put into the cluster (Nodes, Services, PVs;
#                              normalised, see hack/lib/cluster-view.py) to FILE, for
#                              hack/compare-modes.sh.
#
# Then it creates a LoadBalancer Service backed by a tiny HTTP server on every Node's
# InternalIP:nodePort (standing in for kube-proxy and a pod) and curls through the load balancer.
#
# Everything it starts listens on loopback only (127.0.0.1, the Nodes' 127.1.0.x addresses and
# the load balancers' 127.0.100.x VIPs); state and logs live in DIR
# (default $HOME/.cache/hypercloud/local-up).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

mode=external nodes=3 smoke=false dump=""
export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"
dir="$HYPERCLOUD_CACHE/local-up"
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode="${2:-}"; shift 2 ;;
    --mode=*) mode="${1#--mode=}"; shift ;;
    --nodes) nodes="${2:-}"; shift 2 ;;
    --nodes=*) nodes="${1#--nodes=}"; shift ;;
    --dir) dir="${2:-}"; shift 2 ;;
    --dir=*) dir="${1#--dir=}"; shift ;;
    --dump) dump="${2:-}"; shift 2 ;;
    --dump=*) dump="${1#--dump=}"; shift ;;
    --smoke) smoke=true; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "local-up: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$mode" in external|in-tree) ;; *) echo "local-up: --mode must be external or in-tree, got '$mode'" >&2; exit 2 ;; esac
case "$nodes" in ''|*[!0-9]*) echo "local-up: --nodes must be a number, got '$nodes'" >&2; exit 2 ;; esac
[ "$nodes" -ge 1 ] && [ "$nodes" -le 50 ] || { echo "local-up: --nodes must be between 1 and 50" >&2; exit 2; }

n=0
step() { n=$((n + 1)); printf '\n[%d] %s\n' "$n" "$*"; }
fail() { echo "local-up: FAILED: $*" >&2; exit 1; }

pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ ${#pids[@]} -gt 0 ]; then
    echo; echo "local-up: stopping ${#pids[@]} processes"
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  HYPERCLOUD_ENVTEST_DIR="$dir/envtest" hack/envtest.sh stop >/dev/null 2>&1 || true
  [ "$rc" -eq 0 ] || echo "local-up: logs are in $dir/logs" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what="$2"; shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out waiting for $what"
    sleep 0.5
  done
}

rm -rf "$dir/logs" "$dir/cloud" "$dir/bin" "$dir"/*.jsonl
mkdir -p "$dir/logs" "$dir/bin"

step "build hypercloud (cargo build; cached in $CARGO_TARGET_DIR)"
cargo build -p hypercloud --quiet
HYPERCLOUD_BIN="$CARGO_TARGET_DIR/debug/hypercloud" hack/install-symlinks.sh "$dir/bin" >/dev/null
echo "symlinks: $(ls "$dir/bin" | tr '\n' ' ')"
bin="$dir/bin"

step "start a real kube-apiserver + etcd (hack/envtest.sh; built once, cached)"
hack/envtest.sh build
export HYPERCLOUD_ENVTEST_DIR="$dir/envtest"
eval "$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"
kubeconfig="$HYPERCLOUD_TEST_KUBECONFIG"
echo "kube-apiserver ready; KUBECONFIG=$kubeconfig"

# The apiserver answers with the envtest admin token; no kubectl needed.
api_url=$(sed -n 's/^ *server: //p' "$kubeconfig" | head -n1)
token=$(sed -n 's/^ *token: //p' "$kubeconfig" | head -n1)
ca="$dir/envtest/pki/ca.crt"
kget() { curl -fsS --cacert "$ca" -H "Authorization: Bearer $token" "$api_url$1"; }
kcreate() { # kcreate PATH JSON: POST, printing the apiserver's answer; fails on non-2xx
  curl -sS --fail-with-body --cacert "$ca" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -X POST --data "$2" "$api_url$1"
}

step "start the local cloud (OpenStack APIs on 127.0.0.1)"
api_port=$(free_port) md_port=$(free_port)
"$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --metadata-listen "127.0.0.1:$md_port" \
  >"$dir/logs/local-cloud.log" 2>&1 &
pids+=($!)
wait_for 30 "the local cloud" curl -fsS "http://127.0.0.1:$api_port/identity/v3"
cat >"$dir/cloud.conf" <<EOF
[Global]
auth-url = http://127.0.0.1:$api_port/identity/v3
[Metadata]
search-order = metadataService
metadata-url = http://127.0.0.1:$md_port
EOF
echo "local cloud: http://127.0.0.1:$api_port (metadata service 127.0.0.1:$md_port), state in $dir/cloud"

step "create $nodes instances in the local cloud"
for i in $(seq 1 "$nodes"); do
  "$bin/local-cloud" --state-dir "$dir/cloud" instance create "node-$i" --zone nova --flavor m1.small -o json \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d["server"]["id"])' >"$dir/node-$i.id"
  # What the node itself would find in its metadata: which instance it is. On one machine every
  # kubelet-helper calls from 127.0.0.1, so each gets a cloud.conf naming its instance.
  { cat "$dir/cloud.conf"; echo "instance-id = $(cat "$dir/node-$i.id")"; } >"$dir/cloud-node-$i.conf"
done
"$bin/local-cloud" --state-dir "$dir/cloud" instance list

cloud_flags=(--cloud-provider=local "--cloud-config=$dir/cloud.conf")
if [ "$mode" = external ]; then
  step "start the cloud-controller-manager (--cloud-provider=local)"
  # The default controllers plus the PV-label controller (pvl; off by default, as upstream).
  "$bin/cloud-controller-manager" "${cloud_flags[@]}" --kubeconfig "$kubeconfig" --controllers='*,pvl' \
    --secure-port "$(free_port)" --bind-address 127.0.0.1 \
    --trace-cloud-calls "$dir/trace-cloud-controller-manager.jsonl" --v=2 \
    >"$dir/logs/cloud-controller-manager.log" 2>&1 &
  pids+=($!)
  step "register $nodes Nodes with kubelet-helper --cloud-provider=external (no cloud calls; tainted)"
  kubelet_flags=(--cloud-provider=external)
else
  step "start the controller-manager with the in-tree cloud controllers (--cloud-provider=local)"
  "$bin/kube-controller-manager" "${cloud_flags[@]}" --kubeconfig "$kubeconfig" \
    --secure-port "$(free_port)" --bind-address 127.0.0.1 \
    --trace-cloud-calls "$dir/trace-kube-controller-manager.jsonl" --v=2 \
    >"$dir/logs/kube-controller-manager.log" 2>&1 &
  pids+=($!)
  step "start the apiserver-plugin webhook (--cloud-provider=local) and register it with the apiserver"
  plugin_port=$(free_port)
  "$bin/apiserver-plugin" "${cloud_flags[@]}" --kubeconfig "$kubeconfig" \
    --secure-port "$plugin_port" --bind-address 127.0.0.1 --cert-dir "$dir/apiserver-plugin" \
    --ca-bundle-file "$dir/apiserver-plugin-ca.crt" \
    --trace-cloud-calls "$dir/trace-apiserver-plugin.jsonl" --v=2 \
    >"$dir/logs/apiserver-plugin.log" 2>&1 &
  pids+=($!)
  wait_for 30 "the apiserver-plugin (see $dir/logs/apiserver-plugin.log)" \
    curl -fsS --cacert "$dir/apiserver-plugin-ca.crt" "https://127.0.0.1:$plugin_port/healthz"
  ca_bundle=$(base64 -w0 <"$dir/apiserver-plugin-ca.crt")
  webhook() { # webhook NAME PATH OPERATION RESOURCE FAILURE-POLICY
    printf '{"name":"%s","admissionReviewVersions":["v1"],"sideEffects":"None","failurePolicy":"%s","timeoutSeconds":10,"clientConfig":{"url":"https://127.0.0.1:%s%s","caBundle":"%s"},"rules":[{"operations":["%s"],"apiGroups":[""],"apiVersions":["v1"],"resources":["%s"]}]}' \
      "$1" "$5" "$plugin_port" "$2" "$ca_bundle" "$3" "$4"
  }
  # As deploy/apiserver-plugin/webhooks.yaml, with a URL instead of a Service.
  kcreate /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations \
    "{\"metadata\":{\"name\":\"hypercloud-apiserver-plugin\"},\"webhooks\":[$(webhook persistentvolumelabel.hypercloud.io /mutate/persistentvolumelabel CREATE persistentvolumes Fail)]}" >/dev/null
  kcreate /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations \
    "{\"metadata\":{\"name\":\"hypercloud-apiserver-plugin\"},\"webhooks\":[$(webhook cloudnode.hypercloud.io /validate/cloudnode CREATE nodes Ignore),$(webhook pvcresize.hypercloud.io /validate/pvcresize UPDATE persistentvolumeclaims Fail)]}" >/dev/null
  echo "apiserver-plugin: https://127.0.0.1:$plugin_port (PersistentVolumeLabel, cloud node admission, PVC resize)"
  # The apiserver calls the webhook from now on; wait until a Node for no instance is refused.
  ghost_refused() {
    local out
    if out=$(kcreate /api/v1/nodes '{"metadata":{"name":"ghost"}}' 2>/dev/null); then
      curl -fsS --cacert "$ca" -H "Authorization: Bearer $token" -X DELETE "$api_url/api/v1/nodes/ghost" >/dev/null
      return 1
    fi
    echo "$out" >"$dir/ghost-node.txt"
  }
  wait_for 30 "the apiserver to call the webhook" ghost_refused
  echo "the apiserver refuses a Node for an instance the cloud does not have:"
  python3 -c 'import json,sys; print("  " + json.load(open(sys.argv[1]))["message"])' "$dir/ghost-node.txt"

  step "register $nodes Nodes with kubelet-helper --cloud-provider=local (facts from the cloud)"
  kubelet_flags=(--cloud-provider=local --trace-cloud-calls "$dir/trace-kubelet-helper.jsonl")
fi
for i in $(seq 1 "$nodes"); do
  node_flags=()
  [ "$mode" = external ] || node_flags=("--cloud-config=$dir/cloud-node-$i.conf")
  "$bin/kubelet-helper" "${kubelet_flags[@]}" "${node_flags[@]}" --kubeconfig "$kubeconfig" --hostname-override "node-$i" --once \
    >>"$dir/logs/kubelet-helper.log" 2>&1 || fail "kubelet-helper for node-$i (see $dir/logs/kubelet-helper.log)"
done
tail -n "$nodes" "$dir/logs/kubelet-helper.log" | grep 'node' || true


nodes_ready() { # all our Nodes have a providerID and no uninitialized taint
  kget /api/v1/nodes | python3 -c '
import json, sys
want = int(sys.argv[1])
items = [n for n in json.load(sys.stdin)["items"] if n["metadata"]["name"].startswith("node-")]
ok = [n for n in items if n["spec"].get("providerID") and not any(
    t["key"] == "node.cloudprovider.kubernetes.io/uninitialized" for t in n["spec"].get("taints", []))]
sys.exit(0 if len(ok) >= want else 1)' "$nodes"
}

step "wait until every Node is initialised from the cloud"
wait_for 90 "Nodes to be initialised (see $dir/logs)" nodes_ready
# The node-lifecycle controller's first pass races with the checks above; wait for it so
# the traces (docs/diagrams, hack/update-diagrams.sh) hold the same calls in every run.
lifecycle_checked() { # the controller manager asked the cloud about every (never Ready) Node:
  # instance_exists, then instance_shutdown, the last call of its check
  python3 -c '
import json, sys
seen = set()
for path in sys.argv[2:]:
    for line in open(path):
        r = json.loads(line)
        if r["method"] in ("instance_shutdown", "instance_shutdown_by_provider_id"):
            seen.add(json.dumps(r["args"], sort_keys=True))
sys.exit(0 if len(seen) >= int(sys.argv[1]) else 1)' "$nodes" "$dir"/trace-*controller-manager.jsonl
}
wait_for 30 "the node-lifecycle controller to check every Node (see $dir/logs)" lifecycle_checked
kget /api/v1/nodes | python3 -c '
import json, sys
print("%-8s %-48s %-6s %-10s %s" % ("NODE", "PROVIDER-ID", "ZONE", "TYPE", "ADDRESSES"))
for n in json.load(sys.stdin)["items"]:
    l = n["metadata"].get("labels", {})
    if not n["metadata"]["name"].startswith("node-"):
        continue
    addrs = ",".join(a["address"] for a in n.get("status", {}).get("addresses", []))
    print("%-8s %-48s %-6s %-10s %s" % (n["metadata"]["name"], n["spec"].get("providerID", ""),
          l.get("topology.kubernetes.io/zone", ""), l.get("node.kubernetes.io/instance-type", ""), addrs))'
echo "local-up: nodes initialised from the local cloud ($mode mode)"

if [ "$mode" = external ]; then
  step "create a volume in the local cloud and its PersistentVolume (the cloud-controller-manager's PV-label controller labels it)"
else
  step "create a volume in the local cloud and its PersistentVolume (the apiserver-plugin webhook labels it on creation)"
fi
"$bin/local-cloud" --state-dir "$dir/cloud" volume create data-1 --size 1 --zone nova -o json \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d["volume"]["id"])' >"$dir/volume-data-1.id"
kcreate /api/v1/persistentvolumes "$(printf '{"metadata":{"name":"data-1"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"persistentVolumeReclaimPolicy":"Retain","csi":{"driver":"cinder.csi.openstack.org","volumeHandle":"%s","fsType":"ext4"}}}' "$(cat "$dir/volume-data-1.id")")" >/dev/null
pv_labelled() { kget /api/v1/persistentvolumes/data-1 | grep -q '"topology.kubernetes.io/zone"'; }
wait_for 60 "PersistentVolume data-1 to get zone labels (see $dir/logs)" pv_labelled
kget /api/v1/persistentvolumes/data-1 | python3 -c '
import json, sys
pv = json.load(sys.stdin)
labels = pv["metadata"].get("labels", {})
print("pv/data-1 (volume %s): %s" % (pv["spec"]["csi"]["volumeHandle"],
      ", ".join("%s=%s" % kv for kv in sorted(labels.items()))))'

step "create a LoadBalancer Service, with a tiny HTTP server on every Node's InternalIP:nodePort"
svc_json=$(kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"type":"LoadBalancer","ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}')
node_port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["spec"]["ports"][0]["nodePort"])' "$svc_json")
# kube-proxy would listen on every Node's nodePort and forward to a pod; on one machine every Node's
# InternalIP (127.1.0.x) is a local address, so one small server listens on all of them.
listeners=$(kget /api/v1/nodes | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    name = n["metadata"]["name"]
    ips = [a["address"] for a in n.get("status", {}).get("addresses", []) if a["type"] == "InternalIP"]
    if name.startswith("node-") and ips:
        print("%s:%s:%s" % (ips[0], sys.argv[1], name))' "$node_port")
# shellcheck disable=SC2086 # one ADDRESS:PORT:NAME word per Node
python3 hack/lib/hello-backend.py $listeners >"$dir/logs/hello-backend.log" 2>&1 &
pids+=($!)
echo "service default/hello: port 8080 -> nodePort $node_port on $(echo $listeners | wc -w) Nodes"
ingress() { kget /api/v1/namespaces/default/services/hello | python3 -c '
import json, sys
ing = json.load(sys.stdin).get("status", {}).get("loadBalancer", {}).get("ingress", [])
if not ing or not ing[0].get("ip"):
    sys.exit(1)
print(ing[0]["ip"])'; }
wait_for 90 "the load balancer's ingress IP (see $dir/logs)" ingress
vip=$(ingress)
echo "load balancer ready: $vip:8080 (Octavia in the local cloud; members = the Nodes' InternalIP:$node_port)"
answer=""
through_lb() { answer=$(curl -fsS --max-time 2 "http://$vip:8080/"); }
deadline=$((SECONDS + 60))
until through_lb; do
  [ "$SECONDS" -lt "$deadline" ] || fail "no answer from http://$vip:8080/ (see $dir/logs/hello-backend.log and $dir/logs/local-cloud.log)"
  sleep 0.5
done
echo "$ curl http://$vip:8080/"
echo "$answer"
echo "local-up: curl through the load balancer succeeded"

if [ -n "$dump" ]; then
  kget /api/v1/nodes >"$dir/nodes.json"
  kget /api/v1/services >"$dir/services.json"
  kget /api/v1/persistentvolumes >"$dir/pvs.json"
  for f in "$dir"/node-*.id "$dir"/volume-*.id; do
    name=$(basename "$f" .id)
    echo "$(cat "$f") ${name#volume-}"
  done >"$dir/ids.txt"
  python3 hack/lib/cluster-view.py "$dir/nodes.json" "$dir/services.json" "$dir/pvs.json" "$dir/ids.txt" >"$dump"
  echo "local-up: cluster view written to $dump"
fi

if $smoke; then
  echo "local-up: smoke run OK"
  exit 0
fi

cat <<EOF

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  load balancer    http://$vip:8080/   curl http://$vip:8080/   (Service default/hello)
  kube-apiserver   $api_url            export KUBECONFIG=$kubeconfig
  local cloud      http://127.0.0.1:$api_port   $bin/local-cloud --state-dir $dir/cloud instance list
  symlinks         $bin
The official OpenStack CLI (hack/python-tools.sh installs it into $HYPERCLOUD_CACHE/venv):
  OS_AUTH_URL=http://127.0.0.1:$api_port/identity/v3 OS_USERNAME=admin OS_PASSWORD=hypercloud \\
  OS_PROJECT_NAME=demo OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default \\
  $HYPERCLOUD_CACHE/venv/bin/openstack server list
Press Ctrl-C to stop everything.
EOF
wait "${pids[@]}"
