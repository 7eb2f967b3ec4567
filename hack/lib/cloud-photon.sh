# shellcheck shell=bash
# The cloud_* steps of hack/local-up.sh for --cloud photon: the local cloud's Photon Controller
# dialect (its servers are the VMs of a Photon Controller project, read through the REST API at
# /v1; pkg/localcloud/src/api/photon.rs) and the in-tree `photon` provider, as Kubernetes
# v1.6-v1.13 ran it on VMware Photon Controller.
#
# - Tokens are off, the dialect's default (a Photon Controller deployed without Lightwave; the
#   provider's [Global] authentication = false): photon.conf is the legacy [Global] target and
#   project (the ID of the tenant Default's project demo, as GET
#   /v1/tenants/default/projects?name=demo answers it). The local cloud's admin gets a password
#   made for this run (HYPERCLOUD_LOCAL_CLOUD_PASSWORD: the server and the local-cloud CLI read
#   it from the environment; $dir/cloud-password, mode 600, keeps it for the banner's commands);
#   only the demo's own Nova calls use it.
# - node-I is a Nova server of project demo, so a VM of the project named node-I: the provider
#   knows a Node by its VM's name, and its addresses are the IPs of the VM's network connections
#   (GET /v1/vms/{id}/subnets; OpenStack MACs, so InternalIP). The demo reads the names and VM
#   IDs from the dialect's answer (GET /v1/projects/{id}/vms, hack/lib/photon-instances.py, also
#   the kubelets' power switch). Provider IDs are photon://<vm id>; each kubelet-helper's
#   config also names its own VM ([Global] vmID, the legacy key for the VM the process runs on).
# - The in-tree volume step (hack/lib/volume-demo.sh): a kubernetes.io/photon-pd class with a
#   disk flavor, the persistent disk created in the project and attached to the pod's VM through
#   Photon tasks; the cloud's view is GET /v1/disks/{id}. Photon Controller has no zones (the
#   class allows any Node), load balancers or routes. No binder of this cluster names a
#   provisioner on photon-pd claims: hypercloud's takes them unannotated (see photon_volume_class).
# - Upstream's provider was removed for v1.14 (kubernetes/kubernetes#72178) after VMware
#   discontinued Photon Controller, with no external successor: the demo runs in-tree only
#   (hack/lib/cloud-modes.sh; hack/local-up.sh refuses --mode external with it).
#
# Uses from local-up.sh: $dir, $bin, $mode, $nodes, pids, step, fail, wait_for, free_port, kcreate.

photon_flavor=pd-standard

cloud_start() {
  step "start the local cloud; its Photon Controller dialect is the REST API at /v1 (no tokens, as without Lightwave)"
  api_port=$(free_port)
  # The local cloud's admin: a password only this run knows (for the demo's Nova calls; the
  # Photon dialect asks for no token).
  HYPERCLOUD_LOCAL_CLOUD_PASSWORD=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
  export HYPERCLOUD_LOCAL_CLOUD_PASSWORD
  (umask 077 && echo "$HYPERCLOUD_LOCAL_CLOUD_PASSWORD" >"$dir/cloud-password")
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --no-metadata \
    >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  photon_target="http://127.0.0.1:$api_port"
  wait_for 30 "the local cloud's Photon dialect" photon_get /v1/status
  photon_get /v1/auth | python3 -c '
import json, sys
print("Photon Controller (the local cloud) at %s: GET /v1/status %s; GET /v1/auth: tokens %s" % (
    sys.argv[1], sys.argv[2], "required" if json.load(sys.stdin).get("enabled") else "off"))' \
    "$photon_target" "$(photon_get /v1/status | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')"
  echo "\$ curl '$photon_target/v1/tenants/default/projects?name=demo'"
  photon_project=$(photon_get '/v1/tenants/default/projects?name=demo' | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(items[0]["id"]) if items else sys.exit("no project demo in tenant Default")') ||
    fail "the project demo of tenant Default (see $dir/logs/local-cloud.log)"
  echo "  project demo: $photon_project"
  cat >"$dir/photon.conf" <<EOF
[Global]
target = $photon_target
project = $photon_project
EOF
  echo "$dir/photon.conf:"
  sed 's/^/  /' "$dir/photon.conf"
  provider=photon
  cloud_flags=(--cloud-provider=photon "--cloud-config=$dir/photon.conf")
}

# photon_get PATH: GET $photon_target/PATH (no token); the JSON on stdout, failing on an error.
photon_get() { curl -fsS -H 'Accept: application/json' "$photon_target$1"; }

# photon_vms [--networks]: the project's VMs as the provider sees them, as JSON
# (hack/lib/photon-instances.py).
photon_vms() { python3 hack/lib/photon-instances.py "$@" "$dir/photon.conf"; }

cloud_create_instances() {
  step "create $1 servers node-1..node-$1 in the local cloud's project demo (Nova's API): each is a VM of the Photon project, named as its Node"
  python3 - "$photon_target" "$1" >"$dir/servers.txt" <<'PY' || fail "create the servers (see $dir/logs/local-cloud.log)"
import json, os, sys, urllib.request
base, n = sys.argv[1], int(sys.argv[2])
def call(path, body, token=None):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    if token:
        req.add_header("X-Auth-Token", token)
    with urllib.request.urlopen(req) as r:
        return r.headers.get("X-Subject-Token"), json.load(r)
dom = {"name": "Default"}
token, _ = call("/identity/v3/auth/tokens", {"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": dom, "password": os.environ["HYPERCLOUD_LOCAL_CLOUD_PASSWORD"]}}}, "scope": {"project": {"name": "demo", "domain": dom}}}})
for i in range(1, n + 1):
    _, s = call("/compute/v2.1/servers", {"server": {"name": "node-%d" % i, "flavorRef": "m1.small", "availability_zone": "nova", "networks": "auto"}}, token)
    print(i, s["server"]["id"])
PY
  local i id
  for i in $(seq 1 "$1"); do
    echo "  openstack server create --flavor m1.small node-$i"
  done
  # Node I is the VM of server I, named as the project's VM list answers (the provider finds a
  # Node's VM by that name); its ID is the end of the Node's providerID.
  photon_vms --networks >"$dir/vms.json" || fail "the project's VMs (see $dir/logs/local-cloud.log)"
  for i in $(seq 1 "$1"); do
    id=$(awk -v i="$i" '$1 == i { print $2 }' "$dir/servers.txt")
    python3 -c '
import json, sys
vm = next((v for v in json.load(open(sys.argv[1])) if v["id"] == sys.argv[2]), None)
if vm and vm["name"]:
    print(vm["name"])' "$dir/vms.json" "$id" >"$dir/node-$i.name"
    [ -s "$dir/node-$i.name" ] || fail "no VM for server node-$i ($id) in the project's VMs (see $dir/vms.json)"
    echo "$id" >"$dir/node-$i.id"
    # The kubelet of node-I knows its own VM ([Global] vmID: its Node's instance ID with no call).
    { cat "$dir/photon.conf"; echo "vmID = $id"; } >"$dir/photon-node-$i.conf"
  done
  echo "\$ curl $photon_target/v1/projects/$photon_project/vms; curl $photon_target/v1/vms/{id}/subnets   (what the provider asks)"
  python3 -c '
import json, sys
print("  %-8s %-36s %-8s %s" % ("VM", "ID", "STATE", "IP (networkConnections)"))
for v in json.load(open(sys.argv[1])):
    print("  %-8s %-36s %-8s %s" % (v["name"], v["id"], v["state"], ",".join(v["addresses"]) or "-"))' "$dir/vms.json"
}

# The kubelets run while their VM is STARTED; a Node belongs to the VM its providerID
# (photon://<vm id>) or its name (the VM's name) names.
cloud_instances_command() {
  printf '%s\n' python3 hack/lib/photon-instances.py "$dir/photon.conf"
}

cloud_stop_instance() {
  "$bin/local-cloud" --state-dir "$dir/cloud" instance stop "node-$1"
  echo "local-cloud instance stop node-$1: Photon reports its VM STOPPED (GET /v1/projects/$photon_project/vms):"
  photon_vms | python3 -c '
import json, sys
for v in json.load(sys.stdin):
    if v["name"] == sys.argv[1]:
        print("  %s (%s): state %s" % (v["name"], v["id"], v["state"]))' "$(node_name "$1")"
}

cloud_ids() {
  local f
  for f in "$dir"/node-*.id; do
    [ -e "$f" ] || continue
    echo "$(cat "$f") $(cat "${f%.id}.name")"
  done
}

node_name() { cat "$dir/node-$1.name"; }
node_prefix=node-

cloud_node_flags() {
  node_flags=("--cloud-config=$dir/photon-node-$1.conf")
}

cloud_volume() {
  step "volumes: no PersistentVolume to label (Photon Controller has no zones: the provider's are empty, as upstream's); the in-tree volume step follows"
  echo "local-up: the upstream v1.34 binder has no photon-pd plugin (\"no volume plugin matched name: kubernetes.io/photon-pd\") and no CSI driver to migrate it to, so it names no provisioner on the claim; hypercloud's controller-manager provisions it, as the in-tree binder that knew the plugin did"
}

# The in-tree volume step (hack/lib/volume-demo.sh): kubernetes.io/photon-pd persistent disks
# of the project (the flavor the class names: the dialect refuses a disk without one), attached
# to a VM through attach_disk tasks. Photon has no zones: the class allows any Node (vol_zone
# empty).
# kube-controller-manager v1.34's binder finds no plugin for kubernetes.io/photon-pd (removed
# with the provider) and, unlike cinder or gce-pd, no CSI driver it was migrated to: it logs
# "Error finding provisioning plugin for claim" and names no provisioner on the claim, so
# hypercloud's provisioner takes the unannotated claims of its plugin's class
# (pkg/controllers/src/pv_provisioner.rs, should_provision).
photon_volume_class() {
  vol_plugin=kubernetes.io/photon-pd vol_class=photon-pd vol_params="{\"flavor\":\"$photon_flavor\",\"fsType\":\"ext4\"}"
}
photon_instance_id() { cat "$dir/node-$1.id"; }
# photon_volume_show ID I: the disk as Photon answers it (GET /v1/disks/{id}: state, vms). The API
# names no device: a VM's guest found the disk at /dev/disk/by-id/wwn-0x<disk id without dashes>
# (the provider's attachment path, as upstream's attacher), which is what the Node records.
photon_volume_show() {
  echo "\$ curl $photon_target/v1/disks/$1"
  photon_get "/v1/disks/$1" >"$dir/volume-show.json" || fail "GET /v1/disks/$1"
  python3 - "$dir/volume-show.json" "$dir/volume-cloud.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("  %s %s: kind %s, flavor %s, %s GB, state %s, vms %s" % (d["name"], d["id"], d["kind"], d["flavor"],
      d["capacityGb"], d["state"], ",".join(d.get("vms") or []) or "-"))
device = "/dev/disk/by-id/wwn-0x" + d["id"].replace("-", "")
json.dump({"status": d["state"], "in_use": d["state"] == "ATTACHED",
           "attachments": [{"instance": vm, "device_path": device} for vm in d.get("vms") or []]},
          open(sys.argv[2], "w"))
PY
}

cloud_load_balancer() {
  step "load balancer: skipped: Photon Controller has no load balancers (as upstream's photon provider; the service controller does not start)"
  kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}' >/dev/null
  echo "service default/hello: ClusterIP only (no LoadBalancer, Zones, Routes or Clusters in the photon provider)"
  echo "local-up: load balancer step skipped for photon"
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  kube-apiserver     $api_url            export KUBECONFIG=$kubeconfig
  Photon Controller  $photon_target/v1   (the local cloud; project demo $photon_project; no tokens)
  local cloud        $bin/local-cloud --state-dir $dir/cloud instance list
  symlinks           $bin
The VMs, as the provider sees them: python3 hack/lib/photon-instances.py --networks $dir/photon.conf
The disks: curl $photon_target/v1/projects/$photon_project/disks
Stop a VM and watch its Node: $bin/local-cloud --state-dir $dir/cloud instance stop node-1
  (the local-cloud CLI needs the run's admin password: export HYPERCLOUD_LOCAL_CLOUD_PASSWORD=\$(cat $dir/cloud-password))
Press Ctrl-C to stop everything.
BANNER
}
