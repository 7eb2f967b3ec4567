#!/usr/bin/env bash
# hypercloud on one machine, in a real cluster: a real kube-apiserver + etcd, the upstream
# kube-controller-manager (--cloud-provider=external) and kube-scheduler, kwok playing the
# kubelets, the local cloud, and every personality started through its symlink name against
# the same --cloud-provider=local.
#
#   hack/local-up.sh [--cloud local|aws|vsphere|gce|azure|cloudstack|mesos|ovirt|photon|rackspace] [--mode external|in-tree] [--creds file|secret] [--nodes N] [--vcenters N] [--smoke] [--ui] [--dir DIR] [--dump FILE]
#
#   --cloud local (default):   the local cloud (OpenStack APIs), --cloud-provider=local.
#   --cloud aws:               moto (AWS APIs) and one amazon-ec2-metadata-mock per instance
#                              instead of the local cloud, --cloud-provider=aws (steps in
#                              hack/lib/cloud-aws.sh). moto's ELBs carry no traffic by
#                              themselves: `local-cloud serve --follow-aws-elb` serves them and
#                              the demo curls the ELB's DNS name through it (curl --resolve).
#   --cloud vsphere:           vcsim, VMware's vCenter simulator, --cloud-provider=vsphere
#                              (steps in hack/lib/cloud-vsphere.sh); vSphere has no load
#                              balancers, so the load balancer step is skipped and says so.
#   --vcenters N:              (--cloud vsphere) N vcsims as N vCenters (default 1), the k-th
#                              on 127.0.0.k, vsphere.conf with one [VirtualCenter] section each
#                              and the Nodes spread over them (node-I in vCenter ((I-1) mod N)+1,
#                              zone-K on the k-th one's host); the provider finds each Node's VM
#                              in whichever vCenter has it.
#   --cloud gce:               the local cloud spoken to in its Compute Engine v1 dialect, with
#                              GCE's metadata server, --cloud-provider=gce (steps in
#                              hack/lib/cloud-gce.sh); the load balancer is a forwarding rule to
#                              a target pool, curled through as on the local cloud.
#   --cloud azure:             the local cloud spoken to in its Azure Resource Manager dialect
#                              over TLS (its own CA), signed in to through Entra,
#                              --cloud-provider=azure with upstream's azure.json (steps in
#                              hack/lib/cloud-azure.sh); the load balancer is a frontend of the
#                              Standard load balancer `kubernetes`, curled through.
#   --cloud cloudstack:        the local cloud spoken to in its Apache CloudStack dialect (the
#                              signed query API /client/api, the virtual router's metadata),
#                              --cloud-provider=cloudstack with [Global] api-url/api-key/
#                              secret-key read with `local-cloud cloudstack-keys` (steps in
#                              hack/lib/cloud-cloudstack.sh); in-tree, each kubelet-helper reads
#                              its VM's virtual-router metadata alone; the load balancer is a
#                              public IP with a load-balancer rule and a firewall rule, curled
#                              through; no volume step (upstream had no CloudStack volume plugin).
#   --cloud mesos:             (--mode in-tree only) the local cloud's Mesos dialect: its servers
#                              are the agents of a Mesos master (GET /state),
#                              --cloud-provider=mesos (steps in hack/lib/cloud-mesos.sh); Node
#                              names are the agents' hostnames; no load balancer or volume step.
#   --cloud ovirt:             (--mode in-tree only) the local cloud's oVirt dialect: its servers
#                              are the VMs of an oVirt engine (the v3 API's GET /api/vms?search=,
#                              basic authentication), --cloud-provider=ovirt with the legacy
#                              [connection]/[filters] config (steps in hack/lib/cloud-ovirt.sh);
#                              Node names are the FQDNs the VMs' guests report; no load balancer
#                              or volume step.
#   --cloud photon:            (--mode in-tree only) the local cloud's Photon Controller dialect:
#                              its servers are the VMs of a Photon project (REST API /v1, no
#                              tokens), --cloud-provider=photon with the legacy [Global]
#                              target/project config (steps in hack/lib/cloud-photon.sh); Node
#                              names are the VMs' names; the volume step provisions a
#                              kubernetes.io/photon-pd disk and attaches it through Photon tasks;
#                              no load balancer step.
#   --cloud rackspace:         (both layouts) the local cloud's Keystone v2.0 as Rackspace's
#                              identity (API keys, Rackspace's catalog) in front of its Nova and
#                              Cinder, --cloud-provider=rackspace with the legacy [Global]
#                              auth-url/username/api-key/region config, the admin's API key read
#                              as the control panel showed it (steps in hack/lib/cloud-rackspace.sh);
#                              Node names are the servers' names; the volume step attaches an
#                              existing Cinder volume (a PV of it: no provisioning, as upstream's);
#                              no load balancer step.
#   --mode external (default): kubelet-helpers register tainted Nodes with no cloud call; the
#                              scheduler leaves the demo's pods Pending until the
#                              cloud-controller-manager initialises the Nodes from the cloud
#                              (and labels volumes' PVs).
#   --mode in-tree:            kubelet-helpers ask the cloud themselves (the old layout),
#                              hypercloud's controller-manager runs the in-tree cloud controllers
#                              (the cloud part the upstream kube-controller-manager no longer
#                              has) and the apiserver-plugin webhook labels PVs and admits Nodes.
#   --creds file (default):    the provider's credentials are in its cloud config file.
#   --creds secret:            (--cloud local) the local cloud gets a random admin password that
#                              only the Secret kube-system/hypercloud-cloud-credentials holds;
#                              cloud.conf names it ([Global] secret-name, secret-namespace,
#                              kubeconfig-path for the components without a client) and every
#                              personality reads and follows it. Before the last step the demo
#                              rotates it to a new application credential: the components use it
#                              from their next cloud call, without a restart.
#   --smoke:                   check the result, stop everything and exit (CI); otherwise it
#                              keeps running until Ctrl-C, which stops everything it started.
#   --ui:                      serve the live trace view (`hypercloud trace serve`: the cloud
#                              calls as they happen, the Nodes, Services and PVs they change) on
#                              a loopback port printed at the start; open it in a browser. With
#                              --smoke, headless Chromium (hack/ui-tools.sh installs it) watches
#                              the page during the run and hack/lib/ui-check.mjs checks it at the
#                              end: every call in order, a Node's uninitialized taint gone once
#                              the cloud-node controller ran (external), no request outside
#                              loopback; its screenshot goes to $HYPERCLOUD_CACHE/ui-artifacts/.
#   HYPERCLOUD_BIN=PATH:       use this hypercloud binary instead of building one.
#   --dump FILE:               write what the cloud put into the cluster (Nodes with their
#                              conditions, Services, PVs, scheduling results; normalised, see
#                              hack/lib/cluster-view.py) to FILE, for hack/compare-modes.sh.
#
# kwok keeps a Node alive (Lease, Ready) only while its instance runs (hack/lib/kubelet-power.py).
# The demo runs a Deployment default/hello, creates a LoadBalancer Service for it (Endpoints
# from the upstream controller manager) with a tiny HTTP server on every Node's
# InternalIP:nodePort standing in for kube-proxy and the pods, curls through the load balancer,
# and finally stops one instance: its Node turns NotReady and gets the shutdown taint.
# With the local cloud, gce and photon, --mode in-tree also runs the in-tree volume path
# (hack/lib/volume-demo.sh): a claim of a kubernetes.io/cinder (gce: kubernetes.io/gce-pd,
# photon: kubernetes.io/photon-pd) StorageClass and a pod using it, the volume attached to the
# pod's Node, shown from the Node (volumesAttached) and from the cloud's client (`openstack
# volume show`, Google's client, Photon's GET /v1/disks/{id}); rackspace, which cannot
# provision, attaches an existing Cinder volume through a PV and a claim bound to it; --mode
# external says that this is a CSI driver's job and skips it.
#
# Everything it starts listens on loopback only (127.0.0.1, the Nodes' 127.1.0.x addresses,
# the load balancers' 127.0.100.x VIPs and 127.24.4.x floating IPs); state and logs live in DIR
# (default $HOME/.cache/hypercloud/local-up). The cloud-specific steps are the cloud_*
# functions below.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

mode=external nodes=3 smoke=false dump="" cloud=local ui=false creds=file vcenters=""
export HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HYPERCLOUD_CACHE/target}"
dir="$HYPERCLOUD_CACHE/local-up"
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode="${2:-}"; shift 2 ;;
    --mode=*) mode="${1#--mode=}"; shift ;;
    --nodes) nodes="${2:-}"; shift 2 ;;
    --nodes=*) nodes="${1#--nodes=}"; shift ;;
    --vcenters) vcenters="${2:-}"; shift 2 ;;
    --vcenters=*) vcenters="${1#--vcenters=}"; shift ;;
    --dir) dir="${2:-}"; shift 2 ;;
    --dir=*) dir="${1#--dir=}"; shift ;;
    --dump) dump="${2:-}"; shift 2 ;;
    --dump=*) dump="${1#--dump=}"; shift ;;
    --cloud) cloud="${2:-}"; shift 2 ;;
    --cloud=*) cloud="${1#--cloud=}"; shift ;;
    --creds) creds="${2:-}"; shift 2 ;;
    --creds=*) creds="${1#--creds=}"; shift ;;
    --smoke) smoke=true; shift ;;
    --ui) ui=true; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "local-up: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$mode" in external|in-tree) ;; *) echo "local-up: --mode must be external or in-tree, got '$mode'" >&2; exit 2 ;; esac
case "$cloud" in local|aws|vsphere|gce|azure|cloudstack|mesos|ovirt|photon|rackspace) ;; *) echo "local-up: --cloud must be local, aws, vsphere, gce, azure, cloudstack, mesos, ovirt, photon or rackspace, got '$cloud'" >&2; exit 2 ;; esac
case "$creds" in file|secret) ;; *) echo "local-up: --creds must be file or secret, got '$creds'" >&2; exit 2 ;; esac
if [ "$creds" = secret ] && [ "$cloud" != local ]; then
  echo "local-up: --creds secret is implemented for --cloud local only (the openstack provider's [Global] secret-name), not --cloud $cloud" >&2; exit 2
fi
# shellcheck source=hack/lib/cloud-modes.sh
source hack/lib/cloud-modes.sh
case " $(cloud_modes "$cloud") " in
  *" $mode "*) ;;
  *) echo "local-up: --cloud $cloud runs in the layouts: $(cloud_modes "$cloud") ($(cloud_modes_why "$cloud")), not --mode $mode" >&2; exit 2 ;;
esac
case "$nodes" in ''|*[!0-9]*) echo "local-up: --nodes must be a number, got '$nodes'" >&2; exit 2 ;; esac
[ "$nodes" -ge 1 ] && [ "$nodes" -le 50 ] || { echo "local-up: --nodes must be between 1 and 50" >&2; exit 2; }
if [ -n "$vcenters" ] && [ "$cloud" != vsphere ]; then
  echo "local-up: --vcenters is for --cloud vsphere only (several vCenters), not --cloud $cloud" >&2; exit 2
fi
vcenters="${vcenters:-1}"
case "$vcenters" in ''|*[!0-9]*) echo "local-up: --vcenters must be a number, got '$vcenters'" >&2; exit 2 ;; esac
[ "$vcenters" -ge 1 ] && [ "$vcenters" -le 4 ] || { echo "local-up: --vcenters must be between 1 and 4" >&2; exit 2; }

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
    if [ "$SECONDS" -ge "$deadline" ]; then
      [ -z "${diagnose:-}" ] || "$diagnose" >&2 || true
      fail "timed out waiting for $what"
    fi
    sleep 0.5
  done
}

rm -rf "$dir/logs" "$dir/cloud" "$dir/bin" "$dir"/*.jsonl "$dir/traces" "$dir/ui-done"
mkdir -p "$dir/logs" "$dir/bin"

if $ui && $smoke; then
  # Headless Chromium and playwright-core for the page's check (installed once, cached).
  eval "$(hack/ui-tools.sh env)"
  export HYPERCLOUD_CHROMIUM HYPERCLOUD_PLAYWRIGHT
fi

if [ -n "${HYPERCLOUD_BIN:-}" ]; then
  # hack/test.sh passes the binary its `cargo test --workspace` built: a `cargo build -p
  # hypercloud` resolves other dependency features and would compile the AWS SDK once more.
  step "use the hypercloud binary $HYPERCLOUD_BIN (HYPERCLOUD_BIN)"
  [ -x "$HYPERCLOUD_BIN" ] || fail "HYPERCLOUD_BIN=$HYPERCLOUD_BIN is not an executable"
else
  # A binary built from exactly these sources is reused: `hypercloud version` says the commit it
  # was built from and whether its sources differed from it (gitTreeState).
  reuse=""
  head=$(git rev-parse HEAD 2>/dev/null || true)
  if [ -n "$head" ] && [ -z "$(git status --porcelain -- cmd pkg Cargo.toml Cargo.lock 2>/dev/null)" ]; then
    for candidate in "$CARGO_TARGET_DIR/debug/hypercloud" "$CARGO_TARGET_DIR/release/hypercloud"; do
      [ -x "$candidate" ] || continue
      if "$candidate" version -o json 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)
sys.exit(0 if (v.get("gitCommit"), v.get("gitTreeState")) == (sys.argv[1], "clean") else 1)' "$head"; then
        reuse="$candidate"
        break
      fi
    done
  fi
  if [ -n "$reuse" ]; then
    step "reuse $reuse: built from commit ${head:0:12} with the same sources, nothing to build"
    HYPERCLOUD_BIN="$reuse"
  else
    if [ -x "$CARGO_TARGET_DIR/debug/hypercloud" ]; then
      step "build hypercloud (cargo build: only what changed; cached in $CARGO_TARGET_DIR)"
    else
      step "build hypercloud (cargo build): the first build compiles about 400 crates, 10-15 minutes on 2 cores; it is cached in $CARGO_TARGET_DIR afterwards (seconds)"
    fi
    # cargo's own progress (a bar on a terminal, `Compiling NAME` lines otherwise).
    cargo build -p hypercloud
    HYPERCLOUD_BIN="$CARGO_TARGET_DIR/debug/hypercloud"
  fi
fi
HYPERCLOUD_BIN="$HYPERCLOUD_BIN" hack/install-symlinks.sh "$dir/bin" >/dev/null
echo "symlinks: $(ls "$dir/bin" | tr '\n' ' ')"
bin="$dir/bin"

step "build the upstream kube-controller-manager, kube-scheduler and kwok (hack/cluster.sh; built once, cached)"
# shellcheck source=hack/lib/cluster.sh
source hack/lib/cluster.sh
cluster_bin

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

# ---------------------------------------------------------------- the cloud
# Everything that depends on which cloud plays the machines is in these cloud_* functions, so
# another cloud (a --cloud option) replaces them and the rest of the flow stays.

# cloud_start: start the cloud and write the provider's config; sets cloud_flags (every
# personality's), and may set plugin_flags (the apiserver-plugin's own) and controller_flags
# (the controller manager's that runs the cloud controllers, in either layout).
plugin_flags=() controller_flags=()
cloud_start() {
  step "start the local cloud (OpenStack APIs on 127.0.0.1)"
  api_port=$(free_port) md_port=$(free_port)
  if [ "$creds" = secret ]; then
    # A password only the Secret (and the local-cloud CLI, through its environment) knows.
    HYPERCLOUD_LOCAL_CLOUD_PASSWORD=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
    export HYPERCLOUD_LOCAL_CLOUD_PASSWORD
  fi
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --metadata-listen "127.0.0.1:$md_port" \
    >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  wait_for 30 "the local cloud" curl -fsS "http://127.0.0.1:$api_port/identity/v3"
  cat >"$dir/cloud.conf" <<EOF
[Global]
auth-url = http://127.0.0.1:$api_port/identity/v3
$(creds_conf)
[Metadata]
search-order = metadataService
metadata-url = http://127.0.0.1:$md_port
EOF
  echo "local cloud: http://127.0.0.1:$api_port (metadata service 127.0.0.1:$md_port), state in $dir/cloud"
  if [ "$creds" = secret ]; then
    step "put the cloud's credentials into the Secret kube-system/hypercloud-cloud-credentials (cloud.conf names it)"
    kcreate /api/v1/namespaces/kube-system/secrets "$(python3 -c '
import json, sys
print(json.dumps({"metadata": {"name": "hypercloud-cloud-credentials"},
                  "stringData": {"clouds.conf": "[Global]\npassword = \"%s\"\n" % sys.argv[1]}}))' "$HYPERCLOUD_LOCAL_CLOUD_PASSWORD")" >/dev/null
    echo "secret/hypercloud-cloud-credentials: key clouds.conf ([Global] password); cloud.conf:"
    sed -n '/^secret-name/,/^kubeconfig-path/p' "$dir/cloud.conf" | sed 's/^/  /'
  fi
  provider=local
  cloud_flags=(--cloud-provider=local "--cloud-config=$dir/cloud.conf")
}

# creds_conf: the [Global] lines naming the credentials Secret (--creds secret), else nothing.
creds_conf() {
  [ "$creds" = secret ] || return 0
  printf 'secret-name = hypercloud-cloud-credentials\nsecret-namespace = kube-system\nkubeconfig-path = %s\n' "$kubeconfig"
}

# creds_rotate: (--creds secret) a new application credential into the Secret; waits until the
# component that runs the cloud controllers says it uses it.
creds_rotate() {
  step "rotate the cloud credentials: a new application credential into the Secret (no restart)"
  local cred log
  cred=$(python3 - "http://127.0.0.1:$api_port/identity/v3" "$HYPERCLOUD_LOCAL_CLOUD_PASSWORD" <<'PY'
import json, sys, urllib.request
url, password = sys.argv[1], sys.argv[2]
def call(path, body, token=None):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    if token:
        req.add_header("X-Auth-Token", token)
    with urllib.request.urlopen(req) as r:
        return r.headers.get("X-Subject-Token"), json.load(r)
dom = {"name": "Default"}
token, body = call("/auth/tokens", {"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": dom, "password": password}}}, "scope": {"project": {"name": "demo", "domain": dom}}}})
_, c = call("/users/%s/application_credentials" % body["token"]["user"]["id"], {"application_credential": {"name": "hypercloud-rotated"}}, token)
c = c["application_credential"]
print(json.dumps({"stringData": {"clouds.conf": "[Global]\napplication-credential-id = %s\napplication-credential-secret = %s\n" % (c["id"], c["secret"])}}))
PY
)
  curl -fsS --cacert "$ca" -H "Authorization: Bearer $token" -H 'Content-Type: application/merge-patch+json' \
    -X PATCH --data "$cred" "$api_url/api/v1/namespaces/kube-system/secrets/hypercloud-cloud-credentials" >/dev/null
  if [ "$mode" = external ]; then log="$dir/logs/cloud-controller-manager.log"; else log="$dir/logs/kube-controller-manager.log"; fi
  wait_for 30 "the new credentials to be taken up (see $log)" grep -q "credentials from the Secret changed" "$log"
  echo "local-up: $(basename "$log" .log) follows the Secret: $(grep -c "credentials from the Secret changed" "$log") change(s) taken up; the next steps' cloud calls use the application credential"
}

# cloud_create_instances N: instances node-1..node-N; each one's id in $dir/node-I.id.
cloud_create_instances() {
  step "create $1 instances in the local cloud"
  local i
  for i in $(seq 1 "$1"); do
    "$bin/local-cloud" --state-dir "$dir/cloud" instance create "node-$i" --zone nova --flavor m1.small -o json \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d["server"]["id"])' >"$dir/node-$i.id"
    # What the node itself would find in its metadata: which instance it is. On one machine every
    # kubelet-helper calls from 127.0.0.1, so each gets a cloud.conf naming its instance.
    { cat "$dir/cloud.conf"; echo "instance-id = $(cat "$dir/node-$i.id")"; } >"$dir/cloud-node-$i.conf"
  done
  "$bin/local-cloud" --state-dir "$dir/cloud" instance list
}

# cloud_instances_command: the command (words on stdout, one a line) that prints the cloud's
# instances as JSON (name, id, status), for the kubelets' power switch.
cloud_instances_command() {
  printf '%s\n' "$bin/local-cloud" --state-dir "$dir/cloud" instance list -o json
}

# cloud_stop_instance I: power the instance of Node I off, as an operator would.
cloud_stop_instance() {
  "$bin/local-cloud" --state-dir "$dir/cloud" instance stop "node-$1"
}

# cloud_ids: "ID NAME" lines that let hack/lib/cluster-view.py name the cloud's IDs.
cloud_ids() {
  local f name
  for f in "$dir"/node-*.id "$dir"/volume-*.id; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .id)
    echo "$(cat "$f") ${name#volume-}"
  done
}

# node_name I: the name of Node I (as the cloud's provider names it; node-I here);
# node_prefix: what every demo Node's name starts with.
node_name() { echo "node-$1"; }
node_prefix=node-

# cloud_node_flags I: the in-tree kubelet-helper's flags for node-I (which instance it is).
cloud_node_flags() {
  node_flags=("--cloud-config=$dir/cloud-node-$1.conf")
}

# cloud_volume: a volume in the cloud and its PersistentVolume data-1, labelled by hypercloud.
cloud_volume() {
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

}

# cloud_load_balancer: a LoadBalancer Service default/hello for the pods, reached through the cloud.
cloud_load_balancer() {
step "create a LoadBalancer Service, with a tiny HTTP server on every Node's InternalIP:nodePort"
svc_json=$(kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"type":"LoadBalancer","selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}')
node_port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["spec"]["ports"][0]["nodePort"])' "$svc_json")
# kube-proxy would listen on every Node's nodePort and forward to a pod; on one machine every Node's
# InternalIP (127.1.0.x) is a local address, so one small server listens on all of them.
listeners=$(kget /api/v1/nodes | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    name = n["metadata"]["name"]
    ips = [a["address"] for a in n.get("status", {}).get("addresses", []) if a["type"] == "InternalIP"]
    if name.startswith(sys.argv[2]) and ips:
        print("%s:%s:%s" % (ips[0], sys.argv[1], name))' "$node_port" "$node_prefix")
# shellcheck disable=SC2086 # one ADDRESS:PORT:NAME word per Node
python3 hack/lib/hello-backend.py $listeners >"$dir/logs/hello-backend.log" 2>&1 &
pids+=($!)
echo "service default/hello: port 8080 -> nodePort $node_port on $(echo $listeners | wc -w) Nodes"
wait_for_ingress_ip
echo "load balancer ready: $vip:8080 (Octavia in the local cloud; members = the Nodes' InternalIP:$node_port)"
curl_through_lb
}

# wait_for_ingress_ip: waits for Service default/hello's ingress IP; sets vip.
wait_for_ingress_ip() {
  ingress() { kget /api/v1/namespaces/default/services/hello | python3 -c '
import json, sys
ing = json.load(sys.stdin).get("status", {}).get("loadBalancer", {}).get("ingress", [])
if not ing or not ing[0].get("ip"):
    sys.exit(1)
print(ing[0]["ip"])'; }
  wait_for 90 "the load balancer's ingress IP (see $dir/logs)" ingress
  vip=$(ingress)
}

# curl_through_lb: GET http://$vip:8080/ until it answers (60 s), the demo's proof that the
# load balancer carries traffic.
curl_through_lb() {
  local answer="" deadline=$((SECONDS + 60))
  through_lb() { answer=$(curl -fsS --max-time 2 "http://$vip:8080/"); }
  until through_lb; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no answer from http://$vip:8080/ (see $dir/logs/hello-backend.log and $dir/logs/local-cloud.log)"
    sleep 0.5
  done
  echo "$ curl http://$vip:8080/"
  echo "$answer"
  echo "local-up: curl through the load balancer succeeded"
}

# cloud_plugin_started: called in-tree once the apiserver-plugin serves (nothing to show here).
cloud_plugin_started() { :; }

# cloud_banner: what runs, and how to look at the cloud.
cloud_banner() {
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
}

# Another cloud: hack/lib/cloud-NAME.sh redefines the cloud_* functions above.
if [ "$cloud" != local ]; then
  # shellcheck source=/dev/null
  source "hack/lib/cloud-$cloud.sh"
fi

# ---------------------------------------------------------------- the cluster

ui_url="" ui_check_pid=""
if $ui; then
  step "serve the live trace view (hypercloud trace serve: $dir/*.jsonl as they grow, the cluster's Nodes, Services, PVs)"
  ui_port=$(free_port)
  "$HYPERCLOUD_BIN" trace serve --listen "127.0.0.1:$ui_port" --kubeconfig "$kubeconfig" \
    --title "hypercloud local-up: --cloud $cloud --mode $mode" "$dir" >"$dir/logs/trace-serve.log" 2>&1 &
  pids+=($!)
  ui_url="http://127.0.0.1:$ui_port/"
  wait_for 30 "the trace view (see $dir/logs/trace-serve.log)" curl -fsS "${ui_url}healthz"
  echo "trace view: $ui_url (open it in a browser: the calls appear as they happen)"
  if $smoke; then
    mkdir -p "$HYPERCLOUD_CACHE/ui-artifacts"
    ui_flags=(--url "$ui_url" --done-file "$dir/ui-done" --traces "$dir"
      --screenshot "$HYPERCLOUD_CACHE/ui-artifacts/local-up-$cloud-$mode.png")
    [ "$mode" = in-tree ] || ui_flags+=(--expect-taint-removed "$(node_name 1)")
    node hack/lib/ui-check.mjs "${ui_flags[@]}" >"$dir/logs/ui-check.log" 2>&1 &
    ui_check_pid=$!
    pids+=($!)
    echo "headless Chromium watches the page (hack/lib/ui-check.mjs; log $dir/logs/ui-check.log)"
  fi
fi

cloud_start
cloud_create_instances "$nodes"

step "start the upstream kube-controller-manager (--cloud-provider=external) and kube-scheduler, kwok as the kubelets"
# The real controller manager runs its non-cloud controllers in both layouts (node lifecycle
# and NotReady taints, endpoints, EndpointSlices, ReplicaSets, garbage collector, ...): upstream
# removed its cloud controllers; hypercloud's controller-manager (in-tree) or
# cloud-controller-manager (external) supplies them.
cluster_start_upstream
mapfile -t instances_cmd < <(cloud_instances_command)
cluster_start_kubelets running "${instances_cmd[@]}"
echo "kube-controller-manager, kube-scheduler $(sed -n 's/^KUBERNETES_VERSION=//p' hack/versions.env), kwok $(sed -n 's/^KWOK_VERSION=//p' hack/versions.env) (binaries in $cluster_bin)"
echo "kwok plays the kubelet of each Node whose instance runs (hack/lib/kubelet-power.py sets hypercloud.io/kubelet=running)"

if [ "$mode" = in-tree ]; then
  step "start the apiserver-plugin webhook (--cloud-provider=$provider) and register it with the apiserver"
  plugin_port=$(free_port)
  "$bin/apiserver-plugin" "${cloud_flags[@]}" "${plugin_flags[@]}" --kubeconfig "$kubeconfig" \
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
  cloud_plugin_started

  step "register $nodes Nodes with kubelet-helper --cloud-provider=$provider (facts from the cloud)"
  kubelet_flags=("--cloud-provider=$provider" --trace-cloud-calls "$dir/trace-kubelet-helper.jsonl")
else
  step "register $nodes Nodes with kubelet-helper --cloud-provider=external (no cloud calls; tainted)"
  kubelet_flags=(--cloud-provider=external)
fi
for i in $(seq 1 "$nodes"); do
  node_flags=()
  [ "$mode" = external ] || cloud_node_flags "$i"
  "$bin/kubelet-helper" "${kubelet_flags[@]}" "${node_flags[@]}" --kubeconfig "$kubeconfig" --hostname-override "$(node_name "$i")" --once \
    >>"$dir/logs/kubelet-helper.log" 2>&1 || fail "kubelet-helper for $(node_name "$i") (see $dir/logs/kubelet-helper.log)"
done
tail -n "$nodes" "$dir/logs/kubelet-helper.log" | grep 'node' || true

# nodes_where CONDITION: at least $nodes of our Nodes satisfy the Python expression CONDITION
# (n = the Node, ready = its Ready condition's status, taints = its taint keys).
nodes_where() {
  kget /api/v1/nodes | python3 -c '
import json, sys
want, cond = int(sys.argv[1]), sys.argv[2]
ok = 0
for n in json.load(sys.stdin)["items"]:
    if not n["metadata"]["name"].startswith(sys.argv[3]):
        continue
    ready = next((c["status"] for c in n.get("status", {}).get("conditions", []) if c["type"] == "Ready"), None)
    taints = [t["key"] for t in n["spec"].get("taints", [])]
    effects = [(t["key"], t["effect"]) for t in n["spec"].get("taints", [])]
    ok += bool(eval(cond))
sys.exit(0 if ok >= want else 1)' "$nodes" "$1" "$node_prefix"
}
step "wait until kwok reports every Node Ready (its instance runs)"
# Before the cloud controllers start, so their node-lifecycle passes find no NotReady Node and
# the traces hold the same calls in every run.
wait_for 60 "Nodes to be Ready (see $dir/logs/kwok.log and kubelet-power.log)" nodes_where 'ready == "True"'
grep 'kubelet on' "$dir/logs/kubelet-power.log" | sed 's/^/  /' || true

step "create Deployment default/hello ($nodes pods, app=hello)"
kcreate /apis/apps/v1/namespaces/default/deployments "$(printf '{"metadata":{"name":"hello"},"spec":{"replicas":%d,"selector":{"matchLabels":{"app":"hello"}},"template":{"metadata":{"labels":{"app":"hello"}},"spec":{"containers":[{"name":"hello","image":"registry.k8s.io/pause:3.10","ports":[{"containerPort":8080}]}]}}}}' "$nodes")" >/dev/null
# pods_summary: one line per pod of app=hello: name, phase, node, and why it is not scheduled.
pods_summary() {
  kget '/api/v1/namespaces/default/pods?labelSelector=app%3Dhello' | python3 -c '
import json, sys
for p in sorted(json.load(sys.stdin)["items"], key=lambda p: p["metadata"]["name"]):
    why = next((c.get("message", "") for c in p.get("status", {}).get("conditions", [])
                if c["type"] == "PodScheduled" and c["status"] == "False"), "")
    print("  %-28s %-8s %-8s %s" % (p["metadata"]["name"], p.get("status", {}).get("phase", ""),
                                   p["spec"].get("nodeName", "-"), why))'
}
# pods_where CONDITION: $nodes pods of app=hello satisfy CONDITION (p = the pod).
pods_where() {
  kget '/api/v1/namespaces/default/pods?labelSelector=app%3Dhello' | python3 -c '
import json, sys
want, cond = int(sys.argv[1]), sys.argv[2]
pods = json.load(sys.stdin)["items"]
def scheduled(p, status):
    return any(c["type"] == "PodScheduled" and c["status"] == status for c in p.get("status", {}).get("conditions", []))
sys.exit(0 if sum(bool(eval(cond)) for p in pods) >= want else 1)' "$nodes" "$1"
}

if [ "$mode" = external ]; then
  step "the scheduler keeps the pods off the Nodes while they carry the uninitialized taint"
  diagnose=pods_summary wait_for 60 "the scheduler to find the pods unschedulable (see $dir/logs/upstream-kube-scheduler.log)" \
    pods_where 'scheduled(p, "False") and "untolerated taint" in json.dumps(p["status"])'
  pods_summary | tee "$dir/pods-before-ccm.txt"
  # The scheduler's message names no taint (v1.34); the Nodes' only taint is the cloud's.
  nodes_where 'ready == "True" and taints == ["node.cloudprovider.kubernetes.io/uninitialized"]' ||
    fail "the Nodes carry other taints than node.cloudprovider.kubernetes.io/uninitialized"
  echo "local-up: pods Pending: every Node is Ready but still tainted node.cloudprovider.kubernetes.io/uninitialized"

  step "start the cloud-controller-manager (--cloud-provider=$provider)"
  # The default controllers plus the PV-label controller (pvl; off by default, as upstream);
  # a cloud's own list in $ccm_controllers (azure: without cloud-node, see cloud_node_managers).
  "$bin/cloud-controller-manager" "${cloud_flags[@]}" "${controller_flags[@]}" --kubeconfig "$kubeconfig" --controllers="${ccm_controllers:-*,pvl}" \
    --secure-port "$(free_port)" --bind-address 127.0.0.1 \
    --trace-cloud-calls "$dir/trace-cloud-controller-manager.jsonl" --v=2 \
    >"$dir/logs/cloud-controller-manager.log" 2>&1 &
  pids+=($!)
  # A cloud whose external layout initialises each Node from the node itself (azure).
  if declare -F cloud_node_managers >/dev/null; then cloud_node_managers "$nodes"; fi
else
  step "start hypercloud's controller-manager with the in-tree cloud controllers (--cloud-provider=$provider)"
  # The cloud part of the in-tree kube-controller-manager, beside the upstream one (which has
  # no cloud part left): a Lease of its own, since the upstream one holds kube-controller-manager.
  "$bin/kube-controller-manager" "${cloud_flags[@]}" "${controller_flags[@]}" --kubeconfig "$kubeconfig" \
    --leader-elect-resource-name=hypercloud-controller-manager \
    --secure-port "$(free_port)" --bind-address 127.0.0.1 \
    --trace-cloud-calls "$dir/trace-kube-controller-manager.jsonl" --v=2 \
    >"$dir/logs/kube-controller-manager.log" 2>&1 &
  pids+=($!)
fi

step "wait until every Node is initialised from the cloud"
wait_for 90 "Nodes to be initialised (see $dir/logs)" \
  nodes_where 'n["spec"].get("providerID") and "node.cloudprovider.kubernetes.io/uninitialized" not in taints'
kget /api/v1/nodes | python3 -c '
import json, sys
print("%-8s %-6s %-48s %-6s %-10s %s" % ("NODE", "READY", "PROVIDER-ID", "ZONE", "TYPE", "ADDRESSES"))
for n in json.load(sys.stdin)["items"]:
    l = n["metadata"].get("labels", {})
    if not n["metadata"]["name"].startswith(sys.argv[1]):
        continue
    ready = next((c["status"] for c in n.get("status", {}).get("conditions", []) if c["type"] == "Ready"), "")
    addrs = ",".join(a["address"] for a in n.get("status", {}).get("addresses", []))
    print("%-8s %-6s %-48s %-6s %-10s %s" % (n["metadata"]["name"], ready, n["spec"].get("providerID", ""),
          l.get("topology.kubernetes.io/zone", ""), l.get("node.kubernetes.io/instance-type", ""), addrs))' "$node_prefix"
echo "local-up: nodes initialised from the $cloud cloud ($mode mode)"

step "wait until the scheduler has placed every pod and kwok runs them"
diagnose=pods_summary wait_for 60 "the pods of default/hello to run (see $dir/logs/upstream-kube-scheduler.log, kwok.log)" \
  pods_where 'p.get("status", {}).get("phase") == "Running" and p["spec"].get("nodeName")'
pods_summary
echo "local-up: pods scheduled and Running"

cloud_volume

# The in-tree volume path (a claim, a pod, the volume attached to its Node; the clouds whose
# demo has one): hack/lib/volume-demo.sh.
# shellcheck source=hack/lib/volume-demo.sh
source hack/lib/volume-demo.sh
volume_demo

cloud_load_balancer

step "the Service's Endpoints and EndpointSlices (the upstream controller manager's, from the Running pods)"
endpoints_ready() { # every pod of app=hello is a ready endpoint in both APIs
  kget /api/v1/namespaces/default/endpoints/hello | python3 -c '
import json, sys
subsets = json.load(sys.stdin).get("subsets", [])
sys.exit(0 if sum(len(s.get("addresses", [])) for s in subsets) >= int(sys.argv[1]) else 1)' "$nodes" &&
  kget '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dhello' | python3 -c '
import json, sys
eps = [e for s in json.load(sys.stdin)["items"] for e in s.get("endpoints", []) if e.get("conditions", {}).get("ready")]
sys.exit(0 if len(eps) >= int(sys.argv[1]) else 1)' "$nodes"
}
wait_for 60 "Endpoints of default/hello (see $dir/logs/upstream-kube-controller-manager.log)" endpoints_ready
kget '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dhello' | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    for e in s.get("endpoints", []):
        print("  endpointslice/%s  %s  node %s  ready=%s" % (s["metadata"]["name"], ",".join(e["addresses"]),
              e.get("nodeName", "-"), e.get("conditions", {}).get("ready")))'
echo "local-up: the Service has an endpoint for every pod"

[ "$creds" = file ] || creds_rotate

last_node=$(node_name "$nodes")
step "stop the instance of $last_node in the cloud: its kubelet stops, the Node turns NotReady and gets the shutdown taint"
cloud_stop_instance "$nodes"
# Also until the upstream node-lifecycle controller's unreachable taints are both there: it
# adds NoSchedule at once but NoExecute through its rate-limited eviction queue (0.1 Node/s),
# and a cluster view taken in between differs between two runs of the same layout.
wait_for 90 "$last_node to be NotReady with the shutdown and both unreachable taints (see $dir/logs)" \
  nodes_where 'n["metadata"]["name"] != "'"$last_node"'" or (ready != "True" and "node.cloudprovider.kubernetes.io/shutdown" in taints and ("node.kubernetes.io/unreachable", "NoSchedule") in effects and ("node.kubernetes.io/unreachable", "NoExecute") in effects)'
kget "/api/v1/nodes/$last_node" | python3 -c '
import json, sys
n = json.load(sys.stdin)
for c in n["status"]["conditions"]:
    if c["type"] == "Ready":
        print("  %s Ready=%s (%s)" % (sys.argv[1], c["status"], c.get("reason", "")))
for t in n["spec"].get("taints", []):
    print("  taint %s:%s" % (t["key"], t["effect"]))' "$last_node"
echo "local-up: a stopped instance's Node is NotReady and tainted shutdown"

if [ -n "$dump" ]; then
  kget /api/v1/nodes >"$dir/nodes.json"
  kget /api/v1/services >"$dir/services.json"
  kget /api/v1/persistentvolumes >"$dir/pvs.json"
  kget '/api/v1/namespaces/default/pods?labelSelector=app%3Dhello' >"$dir/pods.json"
  kget /apis/discovery.k8s.io/v1/namespaces/default/endpointslices >"$dir/endpointslices.json"
  cloud_ids >"$dir/ids.txt"
  [ "$mode" = external ] && cp "$dir/pods-before-ccm.txt" "$dir/pods-pending.txt" || : >"$dir/pods-pending.txt"
  python3 hack/lib/cluster-view.py "$dir/nodes.json" "$dir/services.json" "$dir/pvs.json" "$dir/ids.txt" \
    "$dir/pods.json" "$dir/endpointslices.json" "$dir/pods-pending.txt" >"$dump"
  echo "local-up: cluster view written to $dump"
fi

if [ -n "$ui_check_pid" ]; then
  step "check the trace view in headless Chromium (hack/lib/ui-check.mjs)"
  touch "$dir/ui-done"
  if ! wait "$ui_check_pid"; then
    cat "$dir/logs/ui-check.log" >&2
    fail "the trace view check failed (above; screenshot in $HYPERCLOUD_CACHE/ui-artifacts)"
  fi
  cat "$dir/logs/ui-check.log"
  echo "local-up: the trace view showed the run"
fi

if $smoke; then
  echo "local-up: smoke run OK"
  exit 0
fi

cloud_banner
[ -z "$ui_url" ] || echo "The live trace view: $ui_url"
wait "${pids[@]}"
