#!/usr/bin/env bash
# The in-tree → external load-balancer migration, rehearsed on one running cluster (KEP-2436
# leader migration with the project's own deploy/components/leader-migration files):
#
#   1. hypercloud's controller-manager (--cloud-provider=local, the in-tree layout, with
#      --enable-leader-migration and kube-controller-manager.conf) holds the migration Lease and
#      creates the load balancers of N LoadBalancer Services: legacy names (a<uid>), a floating
#      IP from the local cloud's public network each;
#   2. a curl loop per Service runs through its floating IP from here to the end of the hand-over;
#   3. the cloud-controller-manager (cloud-controller-manager.conf) starts and must wait: no
#      load-balancer call while the controller-manager holds the migration Lease;
#   4. the controller-manager is stopped (SIGTERM releases the Lease, as an upgrade does); the
#      cloud-controller-manager takes the Lease and adopts every load balancer: same Octavia id,
#      same floating IP, its load-balancer-id annotation written;
#   5. the loops stop; the official `openstack` CLI counts load balancers and floating IPs
#      before and after (nothing created, nothing orphaned); then the Services are deleted and
#      the cloud-controller-manager must delete every adopted load balancer and floating IP.
#   6. the storage half (hack/lib/migrate-volumes.sh): before the switch the controller-manager
#      provisions a kubernetes.io/cinder volume for a pod on node-1, which formats it and writes
#      a token (on a loop device: the local cloud backs volumes by files); after it the upstream
#      kube-controller-manager (CSI migration), hypercloud's csi-driver and the upstream CSI
#      sidecars attach the same volume to node-2, the kubelet-helper mounts it, the token is read
#      back, the claim grows to 2Gi through the external-resizer and the token is read again;
#      a per-PV table before/after, and nothing orphaned or attached twice. Needs root (loop
#      devices, mkfs, mount); --no-volumes skips it. The volume calls of the run are drawn
#      (hypercloud trace render) and must match docs/diagrams/volumes-migration.mmd;
#      --update-diagram writes it (and the SVG) instead.
#
#   hack/migrate.sh [--services N] [--nodes N] [--dir DIR] [--no-volumes] [--update-diagram]
#
# Prints a table per Service (before/after load balancer id, name, IP; requests and failures
# through the floating IP during the hand-over) and exits 1 when a load balancer changed id or
# IP, a load balancer or floating IP was created, left behind or not adopted, or a request
# failed. HYPERCLOUD_BIN=PATH uses that binary (hack/test.sh passes the one it built).
# Everything listens on loopback; state and logs in DIR (default $HOME/.cache/hypercloud/migrate).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"
dir="$HYPERCLOUD_CACHE/migrate" services=3 nodes=2 volumes=true update_diagram=false
while [ $# -gt 0 ]; do
  case "$1" in
    --services) services="${2:-}"; shift 2 ;;
    --services=*) services="${1#--services=}"; shift ;;
    --nodes) nodes="${2:-}"; shift 2 ;;
    --nodes=*) nodes="${1#--nodes=}"; shift ;;
    --dir) dir="${2:-}"; shift 2 ;;
    --dir=*) dir="${1#--dir=}"; shift ;;
    --no-volumes) volumes=false; shift ;;
    --update-diagram) update_diagram=true; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "migrate: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in services nodes; do
  case "${!v}" in ''|*[!0-9]*) echo "migrate: --$v must be a number, got '${!v}'" >&2; exit 2 ;; esac
done
[ "$services" -ge 1 ] && [ "$services" -le 20 ] || { echo "migrate: --services must be between 1 and 20" >&2; exit 2; }
[ "$nodes" -ge 1 ] && [ "$nodes" -le 10 ] || { echo "migrate: --nodes must be between 1 and 10" >&2; exit 2; }
if $volumes; then
  [ "$nodes" -ge 2 ] || { echo "migrate: the storage half moves a volume from node-1 to node-2: --nodes must be at least 2 (or --no-volumes)" >&2; exit 2; }
  [ "$(id -u)" = 0 ] || { echo "migrate: the storage half needs root (loop devices, mkfs, mount); run as root or with --no-volumes" >&2; exit 2; }
fi
# shellcheck source=hack/lib/migrate-volumes.sh
. "$(dirname "$0")/lib/migrate-volumes.sh"

n=0
step() { n=$((n + 1)); printf '\n[%d] %s\n' "$n" "$*"; }
fail() { echo "migrate: FAILED: $*" >&2; exit 1; }

pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  touch "$dir/probe.stop" 2>/dev/null || true
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  HYPERCLOUD_ENVTEST_DIR="$dir/envtest" hack/envtest.sh stop >/dev/null 2>&1 || true
  # Mounts the kubelet-helper or this script left (a failed run): unmount, so the local cloud's
  # loop devices (autoclear) are freed.
  awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  [ "$rc" -eq 0 ] || echo "migrate: logs are in $dir/logs" >&2
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

# A previous run killed mid-way may have left mounts under $dir: unmount them first.
if [ -d "$dir" ]; then
  awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
fi
rm -rf "$dir/logs" "$dir/cloud" "$dir/bin" "$dir/probe" "$dir"/*.json "$dir"/*.jsonl "$dir/probe.stop" \
  "$dir/volumes" "$dir/csi" "$dir"/kubelet-node-*
mkdir -p "$dir/logs" "$dir/bin" "$dir/probe"
started=$SECONDS

if [ -n "${HYPERCLOUD_BIN:-}" ]; then
  step "use the hypercloud binary $HYPERCLOUD_BIN (HYPERCLOUD_BIN)"
  [ -x "$HYPERCLOUD_BIN" ] || fail "HYPERCLOUD_BIN=$HYPERCLOUD_BIN is not an executable"
else
  step "build hypercloud (cargo build; cached in $CARGO_TARGET_DIR)"
  cargo build -p hypercloud --quiet
  HYPERCLOUD_BIN="$CARGO_TARGET_DIR/debug/hypercloud"
fi
HYPERCLOUD_BIN="$HYPERCLOUD_BIN" hack/install-symlinks.sh "$dir/bin" >/dev/null
bin="$dir/bin"
hack/python-tools.sh >/dev/null
openstack_cli="$HYPERCLOUD_CACHE/venv/bin/openstack"

step "start a real kube-apiserver + etcd (hack/envtest.sh; built once, cached)"
hack/envtest.sh build >/dev/null
export HYPERCLOUD_ENVTEST_DIR="$dir/envtest"
eval "$(HYPERCLOUD_ENVTEST_OWNER_PID=$$ hack/envtest.sh start)"
kubeconfig="$HYPERCLOUD_TEST_KUBECONFIG"
api_url=$(sed -n 's/^ *server: //p' "$kubeconfig" | head -n1)
token=$(sed -n 's/^ *token: //p' "$kubeconfig" | head -n1)
ca="$dir/envtest/pki/ca.crt"
kcurl() { curl -sS --fail-with-body --cacert "$ca" -H "Authorization: Bearer $token" "$@"; }
kget() { kcurl "$api_url$1"; }
kcreate() { kcurl -H 'Content-Type: application/json' -X POST --data "$2" "$api_url$1"; }

step "start the local cloud; the provider's cloud.conf names its public network for floating IPs"
api_port=$(free_port) md_port=$(free_port)
backing=none
$volumes && backing=sparse-file
"$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --metadata-listen "127.0.0.1:$md_port" \
  --volume-backing "$backing" \
  >"$dir/logs/local-cloud.log" 2>&1 &
pids+=($!)
wait_for 30 "the local cloud (see $dir/logs/local-cloud.log)" curl -fsS "http://127.0.0.1:$api_port/identity/v3"
export OS_CLIENT_CONFIG_FILE="$dir/cloud/clouds.yaml" OS_CLOUD=local
devices_dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("devicesDir", ""))' "$dir/cloud/server.json")
os() { "$openstack_cli" "$@"; }
public_net=$(os network show public -f value -c id)
cat >"$dir/cloud.conf" <<EOF
[Global]
auth-url = http://127.0.0.1:$api_port/identity/v3
[LoadBalancer]
floating-network-id = $public_net
[Metadata]
search-order = metadataService
metadata-url = http://127.0.0.1:$md_port
EOF
echo "local cloud http://127.0.0.1:$api_port; floating IPs from network public ($public_net)"

step "create $nodes instances and register their Nodes in-tree (kubelet-helper --cloud-provider=local)"
for i in $(seq 1 "$nodes"); do
  id=$("$bin/local-cloud" --state-dir "$dir/cloud" instance create "node-$i" --zone nova --flavor m1.small -o json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d["server"]["id"])')
  # [Metadata] comes last: the node's own file adds which instance it is.
  { cat "$dir/cloud.conf"; echo "instance-id = $id"; } >"$dir/cloud-node-$i.conf"
  "$bin/kubelet-helper" --cloud-provider=local "--cloud-config=$dir/cloud-node-$i.conf" --kubeconfig "$kubeconfig" \
    --hostname-override "node-$i" --once >>"$dir/logs/kubelet-helper.log" 2>&1 ||
    fail "kubelet-helper for node-$i (see $dir/logs/kubelet-helper.log)"
done
echo "Nodes: $(kget /api/v1/nodes | python3 -c 'import json,sys; print(" ".join(n["metadata"]["name"] for n in json.load(sys.stdin)["items"]))')"

# Both sides run with leader migration exactly as deploy/ ships it; short Lease timings only
# make the hand-over quicker (the same proportions as upstream's 15s/10s/2s).
cm_flags() { # cm_flags NAME: the flags both controller managers share
  printf '%s\n' --cloud-provider=local "--cloud-config=$dir/cloud.conf" --kubeconfig "$kubeconfig" \
    --secure-port "$(free_port)" --bind-address 127.0.0.1 \
    --leader-elect-lease-duration=6s --leader-elect-renew-deadline=4s --leader-elect-retry-period=1s \
    --enable-leader-migration "--leader-migration-config=$repo/deploy/components/leader-migration/$1.conf" \
    --trace-cloud-calls "$dir/trace-$1.jsonl" --v=2
}
migration_holder() {
  kget /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-provider-extraction-migration |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"].get("holderIdentity") or "")'
}
# lb_calls COMPONENT: how many load-balancer calls COMPONENT's trace holds so far.
lb_calls() { grep -c '"method":"[a-z_]*load_balancer' "$dir/trace-$1.jsonl" 2>/dev/null || true; }

step "start hypercloud's controller-manager in-tree, with leader migration (kube-controller-manager.conf)"
mapfile -t flags < <(cm_flags kube-controller-manager)
"$bin/kube-controller-manager" "${flags[@]}" >"$dir/logs/kube-controller-manager.log" 2>&1 &
kcm_pid=$!
pids+=("$kcm_pid")
migration_held() { [ -n "$(migration_holder)" ]; }
wait_for 60 "the controller-manager to hold the migration Lease (see $dir/logs/kube-controller-manager.log)" migration_held
kcm_identity=$(migration_holder)
echo "migration Lease kube-system/cloud-provider-extraction-migration held by $kcm_identity"

if $volumes; then volumes_in_tree; fi

step "create $services LoadBalancer Services; a tiny HTTP server on every Node's InternalIP:nodePort"
listeners=()
for s in $(seq 1 "$services"); do
  svc=$(kcreate /api/v1/namespaces/default/services "{\"metadata\":{\"name\":\"web-$s\"},\"spec\":{\"type\":\"LoadBalancer\",\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":8080}]}}")
  node_port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["spec"]["ports"][0]["nodePort"])' "$svc")
  mapfile -t -O "${#listeners[@]}" listeners < <(kget /api/v1/nodes | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    ips = [a["address"] for a in n.get("status", {}).get("addresses", []) if a["type"] == "InternalIP"]
    if ips:
        print("%s:%s:%s/%s" % (ips[0], sys.argv[1], sys.argv[2], n["metadata"]["name"]))' "$node_port" "web-$s")
done
python3 hack/lib/hello-backend.py "${listeners[@]}" >"$dir/logs/hello-backend.log" 2>&1 &
pids+=($!)
# ingresses: "NAME IP" for every Service that has an ingress IP; fails until all have one.
ingresses() {
  kget /api/v1/namespaces/default/services | python3 -c '
import json, sys
want, out = int(sys.argv[1]), []
for s in json.load(sys.stdin)["items"]:
    ing = s.get("status", {}).get("loadBalancer", {}).get("ingress", [])
    if s["metadata"]["name"].startswith("web-") and ing and ing[0].get("ip"):
        out.append("%s %s" % (s["metadata"]["name"], ing[0]["ip"]))
print("\n".join(sorted(out)))
sys.exit(0 if len(out) >= want else 1)' "$services"
}
wait_for 120 "every Service's ingress IP from the controller-manager (see $dir/logs/kube-controller-manager.log)" ingresses
ingresses | sed 's/^/  /'
snapshot() { # snapshot PHASE: the Services and the cloud's load balancers and floating IPs, as clients see them
  kget /api/v1/namespaces/default/services >"$dir/$1-services.json"
  os loadbalancer list -f json >"$dir/$1-lbs.json"
  os floating ip list -f json >"$dir/$1-fips.json"
}
snapshot before
echo "openstack loadbalancer list: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$dir/before-lbs.json") load balancers;" \
  "openstack floating ip list: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$dir/before-fips.json") floating IPs"

step "a curl loop per Service through its floating IP, until the hand-over is over"
probe() { # probe NAME URL: one curl every 0.1s until probe.stop; a line per request in probe/NAME
  local out="$dir/probe/$1"
  while [ ! -e "$dir/probe.stop" ]; do
    if curl -fsS --max-time 2 -o /dev/null "$2" 2>>"$dir/logs/probe-$1.log"; then
      echo "ok" >>"$out"
    else
      echo "failed $(date +%T.%N)" >>"$out"
    fi
    sleep 0.1
  done
}
probe_pids=()
while read -r name ip; do
  probe "$name" "http://$ip:8080/" &
  probe_pids+=($!)
  pids+=($!)
done < <(ingresses)
requests_seen() { # every loop has answered at least once
  local f
  for f in "$dir"/probe/web-*; do grep -q '^ok' "$f" || return 1; done
  [ "$(ls "$dir/probe" | wc -l)" -ge "$services" ]
}
wait_for 30 "an answer through every floating IP (see $dir/logs/probe-*.log)" requests_seen
echo "every Service answers through its floating IP"

step "start the cloud-controller-manager with leader migration (cloud-controller-manager.conf): it must wait"
mapfile -t flags < <(cm_flags cloud-controller-manager)
"$bin/cloud-controller-manager" "${flags[@]}" >"$dir/logs/cloud-controller-manager.log" 2>&1 &
pids+=($!)
ccm_leads_own() {
  kget /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager |
    python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["spec"].get("holderIdentity") else 1)'
}
wait_for 60 "the cloud-controller-manager to lead its own Lease (see $dir/logs/cloud-controller-manager.log)" ccm_leads_own
sleep 3 # a few retry periods in which it contends for the migration Lease
[ "$(migration_holder)" = "$kcm_identity" ] || fail "the migration Lease moved while the controller-manager ran"
[ "$(lb_calls cloud-controller-manager)" = 0 ] ||
  fail "the cloud-controller-manager made load-balancer calls while the controller-manager held the migration Lease"
echo "the cloud-controller-manager leads its own Lease, waits for the migration Lease, and made no load-balancer call"

step "hand-over: stop the controller-manager (SIGTERM releases the migration Lease, as a rolling upgrade does)"
handover_start=$SECONDS
kill -TERM "$kcm_pid"
wait "$kcm_pid" || fail "the controller-manager exited non-zero on SIGTERM (see $dir/logs/kube-controller-manager.log)"
ccm_holds_migration() { local h; h=$(migration_holder) && [ -n "$h" ] && [ "$h" != "$kcm_identity" ]; }
wait_for 30 "the cloud-controller-manager to take the migration Lease" ccm_holds_migration
# adopted: every Service carries the load-balancer-id the cloud-controller-manager writes.
adopted() {
  kget /api/v1/namespaces/default/services | python3 -c '
import json, sys
n = sum(1 for s in json.load(sys.stdin)["items"] if s["metadata"]["name"].startswith("web-")
        and s["metadata"].get("annotations", {}).get("loadbalancer.openstack.org/load-balancer-id"))
sys.exit(0 if n >= int(sys.argv[1]) else 1)' "$services"
}
wait_for 60 "the cloud-controller-manager to adopt every load balancer (see $dir/logs/cloud-controller-manager.log)" adopted
handover_seconds=$((SECONDS - handover_start))
echo "migration Lease held by $(migration_holder); every Service adopted ${handover_seconds}s after SIGTERM"
sleep 3 # traffic keeps flowing after the adoption
touch "$dir/probe.stop"
wait "${probe_pids[@]}" 2>/dev/null || true
snapshot after

step "result (load balancers and floating IPs listed with the openstack CLI before and after)"
report_ok=true
python3 hack/lib/migrate-report.py "$dir" "$services" || report_ok=false

step "delete the Services: the cloud-controller-manager deletes the adopted load balancers and floating IPs"
for s in $(seq 1 "$services"); do
  kcurl -X DELETE "$api_url/api/v1/namespaces/default/services/web-$s" >/dev/null
done
services_gone() { ! kget /api/v1/namespaces/default/services | grep -q '"name": *"web-'; }
wait_for 90 "the Services' load-balancer finalizers to be removed (see $dir/logs/cloud-controller-manager.log)" services_gone
lbs_left=$(os loadbalancer list -f value -c id | wc -l)
fips_left=$(os floating ip list -f value -c ID | wc -l)
echo "openstack loadbalancer list: $lbs_left left; openstack floating ip list: $fips_left left"
[ "$lbs_left" = 0 ] || { echo "migrate: $lbs_left load balancers orphaned" >&2; report_ok=false; }
[ "$fips_left" = 0 ] || { echo "migrate: $fips_left floating IPs orphaned" >&2; report_ok=false; }

volumes_note=""
if $volumes; then
  volumes_external
  step "result of the storage half (the PV before and after the switch; the cloud side with the openstack CLI)"
  volumes_report || report_ok=false
  volumes_diagram "$update_diagram" || report_ok=false
  volumes_note="; the cinder volume migrated to the CSI driver with its data, grown, and deleted (external half ${vol_external_seconds}s)"
fi

$report_ok || fail "the migration changed, lost or orphaned something (table above; logs in $dir/logs)"
echo "migrate: every load balancer adopted with its id and floating IP, no request lost, nothing orphaned${volumes_note} ($((SECONDS - started))s)"
