# shellcheck shell=bash
# The cloud_* steps of hack/local-up.sh for --cloud ovirt: the local cloud's oVirt dialect (its
# servers are the VMs of an oVirt engine, read through the engine's v3 REST API at /api with
# HTTP basic authentication; docs/local-cloud.md#the-ovirt-engine-the-ovirt-dialect) and the
# in-tree `ovirt` provider, as Kubernetes v1.1-v1.13 ran it on oVirt / Red Hat Virtualization.
#
# - The engine's admin@internal is the local cloud's admin, with a password made for this run:
#   the server and the local-cloud CLI read it from the environment, ovirt.conf holds it (the
#   legacy [connection] uri/username/password), and [filters] vms = name=node-* is the search
#   that selects the Nodes' VMs.
# - node-I is a Nova server whose guest reports the FQDN node-I.ovirt.internal (the server's
#   `ovirt-fqdn` metadata, set at creation through Nova's API: `local-cloud instance create`
#   sets no metadata) and its fixed IP (127.1.0.x). The provider knows a VM by that FQDN: it is
#   the Node's name, and the guest's first IP the Node's address; the demo reads both from the
#   engine's answer, as the provider does. Provider IDs are ovirt:///<vm id>.
# - The provider has instances only, as upstream: no zones, load balancers, routes or volumes.
#   Upstream's was removed for v1.14 (kubernetes/kubernetes#72178) with no external successor:
#   the demo runs in-tree only (hack/lib/cloud-modes.sh; hack/local-up.sh refuses
#   --mode external with it).
#
# Uses from local-up.sh: $dir, $bin, $mode, pids, step, fail, wait_for, free_port, kcreate.

ovirt_domain=ovirt.internal

cloud_start() {
  step "start the local cloud; its oVirt dialect is the engine's REST API (v3 at /api, HTTP basic authentication)"
  api_port=$(free_port)
  # admin@internal is the local cloud's user admin: a password only this run knows (the server
  # and the local-cloud CLI take it from the environment; ovirt.conf holds it).
  HYPERCLOUD_LOCAL_CLOUD_PASSWORD=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
  export HYPERCLOUD_LOCAL_CLOUD_PASSWORD
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --no-metadata \
    >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  ovirt_uri="http://127.0.0.1:$api_port/api"
  wait_for 30 "the local cloud's oVirt dialect" ovirt_get ""
  ovirt_get "" | python3 -c '
import sys, xml.etree.ElementTree as ET
v = ET.fromstring(sys.stdin.buffer.read()).find("product_info/version")
print("oVirt engine %s.%s.%s (the local cloud): GET /api as admin@internal" % (v.get("major"), v.get("minor"), v.get("build")))'
  (umask 077 && cat >"$dir/ovirt.conf" <<EOF
[connection]
uri = $ovirt_uri
username = admin@internal
password = $HYPERCLOUD_LOCAL_CLOUD_PASSWORD
[filters]
vms = name=node-*
EOF
  )
  echo "$dir/ovirt.conf:"
  sed 's/^/  /; s/^\(  password = \).*/\1<redacted>/' "$dir/ovirt.conf"
  provider=ovirt
  cloud_flags=(--cloud-provider=ovirt "--cloud-config=$dir/ovirt.conf")
}

# ovirt_get PATH: GET $ovirt_uri/PATH as admin@internal (the password through curl's config on
# stdin, not on a command line); the XML on stdout, failing on an error answer.
ovirt_get() {
  printf 'user = "admin@internal:%s"\n' "$HYPERCLOUD_LOCAL_CLOUD_PASSWORD" |
    curl -fsS -K - -H 'Accept: application/xml' "$ovirt_uri$1"
}

# ovirt_vms: the VMs of the provider's search, as JSON (hack/lib/ovirt-instances.py).
ovirt_vms() { python3 hack/lib/ovirt-instances.py "$dir/ovirt.conf"; }

cloud_create_instances() {
  step "create $1 servers in the local cloud (Nova's API, metadata ovirt-fqdn): each is a VM of the engine whose guest reports node-I.$ovirt_domain"
  python3 - "http://127.0.0.1:$api_port" "$1" "$ovirt_domain" >"$dir/servers.txt" <<'PY' || fail "create the servers (see $dir/logs/local-cloud.log)"
import json, os, sys, urllib.request
base, n, domain = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def call(path, body, token=None):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    if token:
        req.add_header("X-Auth-Token", token)
    with urllib.request.urlopen(req) as r:
        return r.headers.get("X-Subject-Token"), json.load(r)
dom = {"name": "Default"}
token, _ = call("/identity/v3/auth/tokens", {"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": dom, "password": os.environ["HYPERCLOUD_LOCAL_CLOUD_PASSWORD"]}}}, "scope": {"project": {"name": "demo", "domain": dom}}}})
for i in range(1, n + 1):
    _, s = call("/compute/v2.1/servers", {"server": {"name": "node-%d" % i, "flavorRef": "m1.small", "availability_zone": "nova", "networks": "auto", "metadata": {"ovirt-fqdn": "node-%d.%s" % (i, domain)}}}, token)
    print(i, s["server"]["id"])
PY
  local i id
  for i in $(seq 1 "$1"); do
    echo "  openstack server create --flavor m1.small --property ovirt-fqdn=node-$i.$ovirt_domain node-$i"
    awk -v i="$i" '$1 == i { print $2 }' "$dir/servers.txt" >"$dir/node-$i.id"
  done
  # The Node of server I is named by the FQDN its guest reports, as the engine answers it.
  ovirt_vms >"$dir/vms.json" || fail "the engine's search (see $dir/logs/local-cloud.log)"
  for i in $(seq 1 "$1"); do
    id=$(cat "$dir/node-$i.id")
    python3 -c '
import json, sys
vm = next((v for v in json.load(open(sys.argv[1])) if v["id"] == sys.argv[2]), None)
if vm and vm["name"]:
    print(vm["name"])' "$dir/vms.json" "$id" >"$dir/node-$i.name"
    [ -s "$dir/node-$i.name" ] || fail "no VM with a guest FQDN for server node-$i ($id) in the engine's search (see $dir/vms.json)"
  done
  echo "\$ curl -u admin@internal:... '$ovirt_uri/vms?search=name%3Dnode-*'   (what the provider asks)"
  python3 -c '
import json, sys
print("  %-8s %-36s %-6s %-22s %s" % ("VM", "ID", "STATE", "GUEST FQDN", "GUEST IP"))
for v in json.load(open(sys.argv[1])):
    state = {"ACTIVE": "up", "SHUTOFF": "down"}.get(v["status"], v["status"])
    print("  %-8s %-36s %-6s %-22s %s" % (v["vm"], v["id"], state, v["name"], v["address"]))' "$dir/vms.json"
}

# The kubelets run while their VM is up; a Node belongs to the VM its providerID
# (ovirt:///<vm id>) or its name (the guest's FQDN) names.
cloud_instances_command() {
  printf '%s\n' python3 hack/lib/ovirt-instances.py "$dir/ovirt.conf"
}

cloud_stop_instance() {
  "$bin/local-cloud" --state-dir "$dir/cloud" instance stop "node-$1"
  echo "local-cloud instance stop node-$1: the engine reports its VM down:"
  ovirt_vms | python3 -c '
import json, sys
for v in json.load(sys.stdin):
    if v["vm"] == sys.argv[1]:
        print("  %s (%s): status/state %s" % (v["vm"], v["name"], {"ACTIVE": "up", "SHUTOFF": "down"}.get(v["status"], v["status"])))' "node-$1"
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
  node_flags=("--cloud-config=$dir/ovirt.conf")
}

cloud_volume() {
  step "volumes: skipped: the ovirt provider has no volumes (upstream's had no PV labels or disks; instances only)"
}

cloud_load_balancer() {
  step "load balancer: skipped: the ovirt provider has no load balancers (as upstream; the service controller does not start)"
  kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}' >/dev/null
  echo "service default/hello: ClusterIP only (no LoadBalancer, Zones, Routes or Clusters in the ovirt provider)"
  echo "local-up: load balancer step skipped for ovirt"
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  kube-apiserver   $api_url            export KUBECONFIG=$kubeconfig
  oVirt engine     $ovirt_uri   (the local cloud; its servers are the VMs; admin@internal, password in $dir/ovirt.conf)
  local cloud      $bin/local-cloud --state-dir $dir/cloud instance list
  symlinks         $bin
The VMs, as the provider sees them: python3 hack/lib/ovirt-instances.py $dir/ovirt.conf
Stop a VM and watch its Node: $bin/local-cloud --state-dir $dir/cloud instance stop node-1
  (the local-cloud CLI needs the run's password: export HYPERCLOUD_LOCAL_CLOUD_PASSWORD=\$(sed -n 's/^password = //p' $dir/ovirt.conf))
Press Ctrl-C to stop everything.
BANNER
}
