# shellcheck shell=bash
# The cloud_* steps of hack/local-up.sh for --cloud rackspace: the local cloud's Keystone v2.0
# as Rackspace's identity spoke it (API-key sign-in, RAX-KSKEY; a catalog with Rackspace's names;
# pkg/localcloud/src/api/identity/v2.rs) in front of its Nova and Cinder, and the in-tree
# `rackspace` provider, as Kubernetes v0.x-v1.7 ran it on the Rackspace Cloud
# (docs/guide/rackspace.md).
#
# - The local cloud's admin gets a password made for this run (HYPERCLOUD_LOCAL_CLOUD_PASSWORD:
#   the server and the local-cloud CLI read it from the environment; $dir/cloud-password,
#   mode 600, keeps it for the banner's commands). The demo reads the admin's API key as
#   Rackspace's control panel showed it: a password token (POST /identity/v2.0/tokens), then
#   GET /identity/v2.0/users/{id}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials with it.
#   rackspace.conf (mode 600) is the legacy [Global] auth-url/username/api-key/region; it is
#   shown with the key redacted, and neither the key nor the password is printed.
# - node-I is a Nova server created through the catalog's cloudServersOpenStack endpoint with
#   the API key's token (hack/lib/rackspace-instances.py, also the kubelets' power switch). The
#   provider knows a Node by its ACTIVE server's name (the demo reads the names from Nova's
#   answer), its one address is the server's first private IP (InternalIP and ExternalIP), its
#   provider ID rackspace://<server id>; Zones are the region only (no zone label).
# - Volumes: upstream's provider could not provision (CreateVolume/DeleteVolume unimplemented)
#   but attached existing Cinder volumes through Nova for the kubernetes.io/cinder plugin. So the
#   volume step (hack/lib/volume-demo.sh) makes a volume as an operator would (Cinder through
#   the catalog's cloudBlockStorage), a PersistentVolume of it (rackspace_volume_pv) and a claim
#   bound to it: hypercloud's controller-manager attaches it to the pod's Node's server.
# - No load balancer (upstream's LoadBalancer() answered false, kubernetes/kubernetes#4478) and
#   no routes. Upstream's provider was in-tree only, removed in 2017 (kubernetes/kubernetes#52855)
#   before any cloud-controller-manager; hypercloud's cloud-controller-manager runs it too
#   (deploy/overlays/rackspace), so the demo runs in both layouts (external: no volume step, a
#   CSI driver's job there) and hack/compare-modes.sh --cloud rackspace compares them.
#
# Uses from local-up.sh: $dir, $bin, $mode, pids, step, fail, wait_for, free_port, kcreate.

rackspace_region=RegionOne

cloud_start() {
  step "start the local cloud; Rackspace's identity is its Keystone v2.0 (/identity/v2.0: API keys, Rackspace's catalog)"
  api_port=$(free_port)
  # The local cloud's admin: a password only this run knows (the server and the local-cloud CLI
  # take it from the environment); the provider signs in with the admin's API key instead.
  HYPERCLOUD_LOCAL_CLOUD_PASSWORD=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
  export HYPERCLOUD_LOCAL_CLOUD_PASSWORD
  (umask 077 && echo "$HYPERCLOUD_LOCAL_CLOUD_PASSWORD" >"$dir/cloud-password")
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --no-metadata \
    >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  rackspace_auth="http://127.0.0.1:$api_port/identity/v2.0"
  wait_for 30 "the local cloud's Keystone v2.0" curl -fsS "$rackspace_auth/"
  curl -fsS "$rackspace_auth/" | python3 -c '
import json, sys
v = json.load(sys.stdin)["version"]
print("Rackspace identity (the local cloud): GET %s/ answers Keystone %s (%s)" % (sys.argv[1], v["id"], v["status"]))' "$rackspace_auth"
  # The API key, as the control panel showed it: the user's own password token reads it.
  echo "\$ curl -X POST $rackspace_auth/tokens -d '{\"auth\":{\"passwordCredentials\":{\"username\":\"admin\",\"password\":...}}}'"
  echo "\$ curl -H 'X-Auth-Token: ...' $rackspace_auth/users/<admin's id>/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials"
  (umask 077 && python3 - "$rackspace_auth" "$rackspace_region" "$dir/rackspace.conf" <<'PY') ||
import json, os, sys, urllib.request
auth, region, conf = sys.argv[1:4]
def call(url, body=None, token=None):
    req = urllib.request.Request(url, json.dumps(body).encode() if body else None, {"Content-Type": "application/json", "Accept": "application/json"})
    if token:
        req.add_header("X-Auth-Token", token)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)
access = call(auth + "/tokens", {"auth": {"passwordCredentials": {"username": "admin", "password": os.environ["HYPERCLOUD_LOCAL_CLOUD_PASSWORD"]}}})["access"]
user = access["user"]["id"]
cred = call("%s/users/%s/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials" % (auth, user), token=access["token"]["id"])["RAX-KSKEY:apiKeyCredentials"]
with open(conf, "w") as f:
    f.write("[Global]\nauth-url = %s/\nusername = %s\napi-key = %s\nregion = %s\n" % (auth, cred["username"], cred["apiKey"], region))
print("  user %s (%s), tenant %s; API key read (%d characters, not shown)" % (access["user"]["name"], user, access["token"]["tenant"]["name"], len(cred["apiKey"])))
PY
    fail "the admin's API key from the local cloud's Keystone v2.0 (see $dir/logs/local-cloud.log)"
  chmod 600 "$dir/rackspace.conf"
  echo "$dir/rackspace.conf (mode 600):"
  sed 's/^/  /; s/^\(  api-key = \).*/\1<redacted>/' "$dir/rackspace.conf"
  provider=rackspace
  cloud_flags=(--cloud-provider=rackspace "--cloud-config=$dir/rackspace.conf")
}

# rackspace_api [ARGS]: hack/lib/rackspace-instances.py with the provider's config (signs in with
# the API key; the catalog's cloudServersOpenStack and cloudBlockStorage endpoints).
rackspace_api() { python3 hack/lib/rackspace-instances.py "$dir/rackspace.conf" "$@"; }

cloud_create_instances() {
  step "create $1 servers node-1..node-$1 through Nova (the catalog's cloudServersOpenStack, the API key's token): each is a Node named by its server"
  # shellcheck disable=SC2046 # one word per name
  rackspace_api create $(seq -f 'node-%g' 1 "$1") >"$dir/servers.txt" ||
    fail "create the servers (see $dir/logs/local-cloud.log)"
  local i id
  for i in $(seq 1 "$1"); do
    echo "  nova boot --flavor m1.small node-$i"
    awk -v n="node-$i" '$1 == n { print $2 }' "$dir/servers.txt" >"$dir/node-$i.id"
  done
  # Node I is named as Nova names server I (the provider finds a Node's ACTIVE server by name);
  # its ID is the end of the Node's providerID.
  rackspace_api >"$dir/servers.json" || fail "Nova's server list (see $dir/logs/local-cloud.log)"
  for i in $(seq 1 "$1"); do
    id=$(cat "$dir/node-$i.id")
    python3 -c '
import json, sys
s = next((s for s in json.load(open(sys.argv[1])) if s["id"] == sys.argv[2]), None)
if s and s["name"]:
    print(s["name"])' "$dir/servers.json" "$id" >"$dir/node-$i.name"
    [ -s "$dir/node-$i.name" ] || fail "no server node-$i ($id) in Nova's list (see $dir/servers.json)"
  done
  echo "\$ nova list   (GET /servers/detail, what the provider asks)"
  python3 -c '
import json, sys
print("  %-8s %-36s %-8s %s" % ("SERVER", "ID", "STATUS", "ADDRESS (first private IP)"))
for s in sorted(json.load(open(sys.argv[1])), key=lambda s: (len(s["name"]), s["name"])):
    print("  %-8s %-36s %-8s %s" % (s["name"], s["id"], s["status"], s["address"] or "-"))' "$dir/servers.json"
}

# The kubelets run while their server is ACTIVE; a Node belongs to the server its providerID
# (rackspace://<server id>) or its name names.
cloud_instances_command() {
  printf '%s\n' python3 hack/lib/rackspace-instances.py "$dir/rackspace.conf"
}

cloud_stop_instance() {
  "$bin/local-cloud" --state-dir "$dir/cloud" instance stop "node-$1"
  echo "local-cloud instance stop node-$1: Nova reports its server SHUTOFF (GET /servers/detail):"
  rackspace_api | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s["name"] == sys.argv[1]:
        print("  %s (%s): status %s" % (s["name"], s["id"], s["status"]))' "$(node_name "$1")"
}

cloud_ids() {
  local f name
  for f in "$dir"/node-*.id "$dir"/volume-*.id; do
    [ -e "$f" ] || continue
    case "$f" in
      */node-*) name=$(cat "${f%.id}.name") ;;
      *) name=$(basename "$f" .id); name=${name#volume-} ;;
    esac
    echo "$(cat "$f") $name"
  done
}

node_name() { cat "$dir/node-$1.name"; }
node_prefix=node-

# Every kubelet-helper has the same config: the provider finds its server by the Node's name
# (the legacy config drive's meta_data.json is not there on this machine).
cloud_node_flags() {
  node_flags=("--cloud-config=$dir/rackspace.conf")
}

cloud_volume() {
  step "volumes: no PersistentVolume labels (the rackspace provider's Zones are the region only and it labels no PVs, as upstream's); the in-tree volume step follows"
}

# The in-tree volume step (hack/lib/volume-demo.sh): the kubernetes.io/cinder plugin without
# provisioning (upstream's CreateVolume was unimplemented), so no StorageClass: an existing
# volume (rackspace_volume_pv) as a PersistentVolume and a claim bound to it. vol_class names
# the claim and the pod only.
rackspace_volume_class() {
  vol_plugin=kubernetes.io/cinder vol_class=cinder vol_params='{}'
}
# rackspace_volume_pv: a 1 GiB Cinder volume data-1, made as an operator made one (Cinder through
# the catalog's cloudBlockStorage); prints the PV's in-tree source.
rackspace_volume_pv() {
  echo "\$ cinder create --display-name data-1 1   (the catalog's cloudBlockStorage)" >&2
  rackspace_api volume-create data-1 >"$dir/volume-data-1.id" || fail "create the Cinder volume data-1 (see $dir/logs/local-cloud.log)"
  echo "  volume data-1: $(cat "$dir/volume-data-1.id"), available" >&2
  printf '"cinder":{"volumeID":"%s","fsType":"ext4"}' "$(cat "$dir/volume-data-1.id")"
}
rackspace_instance_id() { cat "$dir/node-$1.id"; }
# rackspace_volume_show ID I: the volume as Cinder answers it (status, attachments: Nova's
# server and device).
rackspace_volume_show() {
  echo "\$ cinder show $1   (the catalog's cloudBlockStorage)"
  rackspace_api volume-show "$1" >"$dir/volume-show.json" || fail "GET /volumes/$1"
  python3 - "$dir/volume-show.json" "$dir/volume-cloud.json" <<'PY'
import json, sys
vol = json.load(open(sys.argv[1]))
att = vol.get("attachments") or []
print("  %s %s: %s GB, status %s" % (vol.get("name"), vol["id"], vol.get("size"), vol["status"]))
for a in att:
    print("  attachment: server_id %s device %s" % (a.get("server_id"), a.get("device")))
json.dump({"status": vol["status"], "in_use": vol["status"] == "in-use",
           "attachments": [{"instance": a.get("server_id"), "device_path": a.get("device")} for a in att]},
          open(sys.argv[2], "w"))
PY
}

cloud_load_balancer() {
  step "load balancer: skipped: the rackspace provider has no load balancers (upstream's LoadBalancer() answered false, kubernetes/kubernetes#4478; the service controller does not start)"
  kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}' >/dev/null
  echo "service default/hello: ClusterIP only (no LoadBalancer, Routes or Clusters in the rackspace provider)"
  echo "local-up: load balancer step skipped for rackspace"
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  kube-apiserver     $api_url            export KUBECONFIG=$kubeconfig
  Rackspace identity $rackspace_auth/   (the local cloud's Keystone v2.0; API key in $dir/rackspace.conf)
  local cloud        $bin/local-cloud --state-dir $dir/cloud instance list
  symlinks           $bin
The servers, as the provider sees them: python3 hack/lib/rackspace-instances.py $dir/rackspace.conf
Stop a server and watch its Node: $bin/local-cloud --state-dir $dir/cloud instance stop node-1
  (the local-cloud CLI needs the run's admin password: export HYPERCLOUD_LOCAL_CLOUD_PASSWORD=\$(cat $dir/cloud-password))
Press Ctrl-C to stop everything.
BANNER
}
