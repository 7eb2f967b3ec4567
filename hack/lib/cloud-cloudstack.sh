# shellcheck shell=bash
# The cloud_* steps of hack/local-up.sh for --cloud cloudstack: the local cloud's CloudStack
# dialect (Apache CloudStack's signed query API at /client/api and the virtual router's metadata;
# pkg/localcloud/src/api/cloudstack.rs, docs/local-cloud.md "Apache CloudStack") and the
# `cloudstack` provider, in both layouts: in-tree as Kubernetes v1.4-v1.13 ran it, external as
# apache/cloudstack-kubernetes-provider runs it (docs/guide/cloudstack.md).
#
# - The local cloud's admin gets a password made for this run (HYPERCLOUD_LOCAL_CLOUD_PASSWORD:
#   the server and the local-cloud CLI read it from the environment; $dir/cloud-password, mode
#   600, keeps it for the banner's commands). The provider signs its requests with the admin's
#   API key and secret key, read with `local-cloud cloudstack-keys -o json` (CloudStack's
#   getUserKeys) straight into cloudstack.conf (mode 600: [Global] api-url, api-key,
#   secret-key), which is shown with both keys redacted; neither key nor the password is printed
#   or passed on a command line.
# - node-I is a Nova server (`local-cloud instance create`), so a VM of the admin's project. The
#   provider knows a Node by its VM's name: the demo reads the names and VM IDs from the dialect's
#   listVirtualMachines, signed as CloudStack's clients sign (hack/lib/cloudstack-instances.py,
#   also the kubelets' power switch: Running is ACTIVE, Stopped SHUTOFF). Provider IDs are
#   cloudstack://<vm id>; addresses the first NIC's IP (InternalIP) and the host name (Hostname);
#   zone and region the VM's zone (nova); instance type the service offering (m1.small).
# - In-tree, every kubelet-helper reads the same cloudstack.conf (the API keys), as the
#   controller-manager and the apiserver-plugin do (external: the cloud-controller-manager).
#   Upstream's kubelet could instead run on the virtual router's metadata alone (a config
#   without api-url), and the provider has that mode ([Hypercloud] metadata-url; the dialect
#   serves /cloudstack/<vm id>/latest/meta-data/...), but hypercloud's kubelet-helper asks
#   GetZoneByNodeName for its Node's zone, which the provider answers from the API only: with a
#   metadata-only config the registration fails ("asking the cloud for zone of node node-1:
#   unimplemented"). So the API config, which upstream's kubelets mostly had too (one
#   cloud-config for every component).
# - The LoadBalancer Service (loadBalancerSourceRanges 127.0.0.0/8) gets a public IP
#   (associateIpAddress, a floating IP 127.24.4.x), a load-balancer rule public port 8080 ->
#   node port with the Nodes' VMs assigned, and a firewall rule from its source ranges; the
#   dialect carries the rule as an Octavia load balancer served at the public IP, so the tiny
#   HTTP server listens on every Node's InternalIP:nodePort and the demo curls the public IP. The
#   rules are shown as listLoadBalancerRules (with listLoadBalancerRuleInstances and
#   listFirewallRules) answers them, and checked.
# - No volume step (upstream had no CloudStack volume plugin) and no routes.
#
# Uses from local-up.sh: $dir, $bin, $mode, $nodes, pids, step, fail, wait_for, free_port, kget,
# kcreate, wait_for_ingress_ip, curl_through_lb.

cloudstack_zone=nova

cloud_start() {
  step "start the local cloud speaking Apache CloudStack's query API (/client/api, signed with API keys; hack/lib/cloud-cloudstack.sh) and the virtual router's metadata, on 127.0.0.1"
  api_port=$(free_port) md_port=$(free_port)
  # The local cloud's admin: a password only this run knows; the provider signs with the
  # admin's API keys instead.
  HYPERCLOUD_LOCAL_CLOUD_PASSWORD=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
  export HYPERCLOUD_LOCAL_CLOUD_PASSWORD
  (umask 077 && echo "$HYPERCLOUD_LOCAL_CLOUD_PASSWORD" >"$dir/cloud-password")
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --metadata-listen "127.0.0.1:$md_port" \
    >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  cloudstack_api="http://127.0.0.1:$api_port/client/api"
  wait_for 30 "the local cloud" curl -fsS "http://127.0.0.1:$api_port/identity/v3"
  # An unsigned request is refused as CloudStack refuses it (401 with its errorcode).
  curl -sS "$cloudstack_api?command=listZones&response=json" | python3 -c '
import json, sys
body = next(iter(json.load(sys.stdin).values()))
print("CloudStack (the local cloud): %s; unsigned listZones: errorcode %s (%s)" % (sys.argv[1], body.get("errorcode"), body.get("errortext")))' "$cloudstack_api" ||
    fail "the local cloud's CloudStack dialect at $cloudstack_api (see $dir/logs/local-cloud.log)"
  echo "\$ hypercloud local-cloud cloudstack-keys --user admin -o json   (CloudStack's getUserKeys)"
  (umask 077 && "$bin/local-cloud" --state-dir "$dir/cloud" cloudstack-keys --user admin -o json |
    python3 -c '
import json, sys
k = json.load(sys.stdin)
with open(sys.argv[2], "w") as f:
    f.write("[Global]\napi-url = %s\napi-key = %s\nsecret-key = %s\n" % (sys.argv[1], k["api_key"], k["secret_key"]))
print("  user %s (%s): API key and secret key read (%d and %d characters, not shown)" % (k["user"], k["user_id"], len(k["api_key"]), len(k["secret_key"])))' \
    "$cloudstack_api" "$dir/cloudstack.conf") ||
    fail "the admin's CloudStack keys (see $dir/logs/local-cloud.log)"
  chmod 600 "$dir/cloudstack.conf"
  echo "$dir/cloudstack.conf (mode 600):"
  sed 's/^/  /; s/^\(  api-key = \).*/\1<redacted>/; s/^\(  secret-key = \).*/\1<redacted>/' "$dir/cloudstack.conf"
  cloudstack_api_call listZones | python3 -c '
import json, sys
print("signed listZones: %s" % ", ".join("%s (%s)" % (z["name"], z.get("networktype", "")) for z in json.load(sys.stdin)))' ||
    fail "a signed listZones (see $dir/logs/local-cloud.log)"
  provider=cloudstack
  cloud_flags=(--cloud-provider=cloudstack "--cloud-config=$dir/cloudstack.conf")
}

# cloudstack_api_call COMMAND: a signed list command's items as JSON (zones only; the rest
# goes through hack/lib/cloudstack-instances.py).
cloudstack_api_call() {
  python3 - "$dir/cloudstack.conf" "$1" <<'PY'
import importlib.util, json, sys
sys.dont_write_bytecode = True  # no __pycache__ in hack/lib
spec = importlib.util.spec_from_file_location("csi", "hack/lib/cloudstack-instances.py")
csi = importlib.util.module_from_spec(spec)
spec.loader.exec_module(csi)
g = csi.read_config(sys.argv[1])
print(json.dumps(csi.list_all(g, sys.argv[2], "zone")))
PY
}

# cloudstack_vms [lb-rules]: hack/lib/cloudstack-instances.py with the provider's config.
cloudstack_vms() { python3 hack/lib/cloudstack-instances.py "$dir/cloudstack.conf" "$@"; }

cloud_create_instances() {
  step "create $1 servers node-1..node-$1 in the local cloud (Nova): each is a VM of the admin's CloudStack project, named as its Node"
  local i id
  for i in $(seq 1 "$1"); do
    echo "  \$ local-cloud instance create node-$i --zone $cloudstack_zone --flavor m1.small"
    "$bin/local-cloud" --state-dir "$dir/cloud" instance create "node-$i" --zone "$cloudstack_zone" --flavor m1.small -o json \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d["server"]["id"])' >"$dir/server-$i.id" ||
      fail "create server node-$i (see $dir/logs/local-cloud.log)"
  done
  # Node I is the VM of server I, named as listVirtualMachines answers (the provider finds a
  # Node's VM by that name); its ID is the end of the Node's providerID.
  cloudstack_vms >"$dir/vms.json" || fail "listVirtualMachines (see $dir/logs/local-cloud.log)"
  for i in $(seq 1 "$1"); do
    id=$(cat "$dir/server-$i.id")
    python3 -c '
import json, sys
vm = next((v for v in json.load(open(sys.argv[1])) if v["id"] == sys.argv[2]), None)
if vm and vm["name"]:
    print(vm["name"])' "$dir/vms.json" "$id" >"$dir/node-$i.name"
    [ -s "$dir/node-$i.name" ] || fail "no VM for server node-$i ($id) in listVirtualMachines (see $dir/vms.json)"
    echo "$id" >"$dir/node-$i.id"
  done
  echo "\$ cs listVirtualMachines listall=true   (signed, what the provider asks)"
  python3 -c '
import json, sys
print("  %-8s %-36s %-8s %-6s %-9s %s" % ("VM", "ID", "STATE", "ZONE", "OFFERING", "IP (first NIC)"))
for v in json.load(open(sys.argv[1])):
    print("  %-8s %-36s %-8s %-6s %-9s %s" % (v["name"], v["id"], v["state"], v["zone"], v["offering"], v["address"] or "-"))' "$dir/vms.json"
}

# The kubelets run while their VM is Running; a Node belongs to the VM its providerID
# (cloudstack://<vm id>) or its name names.
cloud_instances_command() {
  printf '%s\n' python3 hack/lib/cloudstack-instances.py "$dir/cloudstack.conf"
}

cloud_stop_instance() {
  "$bin/local-cloud" --state-dir "$dir/cloud" instance stop "node-$1"
  echo "local-cloud instance stop node-$1: CloudStack reports its VM Stopped (listVirtualMachines):"
  cloudstack_vms | python3 -c '
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

# In-tree: every kubelet-helper reads cloudstack.conf (see the top: not the metadata alone).
cloud_node_flags() {
  node_flags=("--cloud-config=$dir/cloudstack.conf")
}

cloud_volume() {
  step "volumes: skipped: the cloudstack provider has no volumes (upstream had no CloudStack volume plugin, in-tree or out of tree; its Zones label no PVs)"
}

cloud_load_balancer() {
  step "create a LoadBalancer Service (loadBalancerSourceRanges 127.0.0.0/8: a public IP, a load-balancer rule 8080 -> nodePort, a firewall rule), with a tiny HTTP server on every Node's InternalIP:nodePort"
  local svc_json listeners node_port
  svc_json=$(kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"type":"LoadBalancer","selector":{"app":"hello"},"loadBalancerSourceRanges":["127.0.0.0/8"],"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}')
  node_port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["spec"]["ports"][0]["nodePort"])' "$svc_json")
  # The rule forwards the public port to the node port of the VMs' first NICs (the Nodes'
  # InternalIPs), where kube-proxy would listen.
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
  echo "service default/hello: port 8080 -> nodePort $node_port on $(echo "$listeners" | wc -w) Nodes"
  wait_for_ingress_ip
  echo "load balancer ready: public IP $vip:8080"
  echo "\$ cs listLoadBalancerRules; cs listLoadBalancerRuleInstances id=...; cs listFirewallRules ipaddressid=...   (signed)"
  cloudstack_vms lb-rules >"$dir/lb-rules.json" || fail "listLoadBalancerRules (see $dir/logs/local-cloud.log)"
  python3 - "$dir/lb-rules.json" "$vip" "$node_port" "$nodes" <<'PY' || fail "the load-balancer rule of default/hello in the cloud (above; $dir/lb-rules.json)"
import json, sys
rules, vip, node_port, nodes = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4])
for r in rules:
    print("  rule %s: %s %s:%s -> nodePort %s, %s, VMs %s" % (r["name"], r["protocol"], r["publicip"], r["publicport"],
          r["privateport"], r["algorithm"], " ".join(r["vms"])))
    for f in r["firewall"]:
        print("    firewall rule: %s %s from %s" % (f["protocol"], f["ports"], f["cidrlist"]))
ok = [r for r in rules if r["publicip"] == vip and str(r["publicport"]) == "8080" and str(r["privateport"]) == node_port
      and len(r["vms"]) == nodes and any(f["cidrlist"] == "127.0.0.0/8" for f in r["firewall"])]
if not ok:
    sys.exit("no rule %s:8080 -> %s with %d VMs and a firewall rule from 127.0.0.0/8" % (vip, node_port, nodes))
PY
  cs_check_provider_rules
  curl_through_lb
}

# cs_check_provider_rules: CloudStack's own client (PyPI cs, hack/python-tools.sh cloudstack)
# reads what the provider made: the Service's load-balancer rule on its public IP and that IP in
# the account (cs listLoadBalancerRules, cs listPublicIpAddresses); the keys go to cs through its
# environment (CLOUDSTACK_KEY/SECRET), from cloudstack.conf, never on a command line.
cs_check_provider_rules() {
  local cs="$HYPERCLOUD_CACHE/venv-cloudstack/bin/cs"
  if [ ! -x "$cs" ]; then
    echo "(cs not installed: hack/python-tools.sh cloudstack installs it; hack/test.sh does)"
    return 0
  fi
  echo "\$ cs listLoadBalancerRules; cs listPublicIpAddresses ipaddress=$vip   (CloudStack's own client)"
  (
    CLOUDSTACK_ENDPOINT="$cloudstack_api"
    CLOUDSTACK_KEY=$(sed -n 's/^api-key = //p' "$dir/cloudstack.conf")
    CLOUDSTACK_SECRET=$(sed -n 's/^secret-key = //p' "$dir/cloudstack.conf")
    export CLOUDSTACK_ENDPOINT CLOUDSTACK_KEY CLOUDSTACK_SECRET
    "$cs" --quiet listLoadBalancerRules >"$dir/cs-lb-rules.json" &&
      "$cs" --quiet listPublicIpAddresses "ipaddress=$vip" >"$dir/cs-public-ips.json"
  ) || fail "cs could not list the provider's rules (see $dir/logs/local-cloud.log)"
  python3 - "$dir/cs-lb-rules.json" "$dir/cs-public-ips.json" "$vip" <<'PY' || fail "cs does not see the provider's load balancer (above)"
import json, sys
rules = json.load(open(sys.argv[1])).get("loadbalancerrule", [])
ips = json.load(open(sys.argv[2])).get("publicipaddress", [])
vip = sys.argv[3]
mine = [r for r in rules if r.get("publicip") == vip and r.get("publicport") == "8080"]
for r in mine:
    print("  cs: rule %s %s:%s -> %s (%s, %s)" % (r["name"], r["publicip"], r["publicport"], r["privateport"], r["algorithm"], r["state"]))
for i in ips:
    print("  cs: public IP %s (%s, %s)" % (i["ipaddress"], i["id"], i.get("state", "")))
if not mine or not any(i["ipaddress"] == vip for i in ips):
    sys.exit("cs lists no rule on %s:8080 or not the IP %s" % (vip, vip))
PY
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  load balancer      http://$vip:8080/   (Service default/hello: a public IP, a load-balancer rule, a firewall rule)
  kube-apiserver     $api_url            export KUBECONFIG=$kubeconfig
  CloudStack API     $cloudstack_api   (signed with the keys in $dir/cloudstack.conf)
  virtual router     http://127.0.0.1:$md_port/cloudstack/<vm id>/latest/meta-data/
  symlinks           $bin
The VMs and the load-balancer rules, as the provider sees them:
  python3 hack/lib/cloudstack-instances.py $dir/cloudstack.conf
  python3 hack/lib/cloudstack-instances.py $dir/cloudstack.conf lb-rules
With Exoscale's cs (hack/python-tools.sh cloudstack installs it into $HYPERCLOUD_CACHE/venv-cloudstack):
  CLOUDSTACK_ENDPOINT=$cloudstack_api CLOUDSTACK_KEY=... CLOUDSTACK_SECRET=... $HYPERCLOUD_CACHE/venv-cloudstack/bin/cs listVirtualMachines
Stop a VM and watch its Node: $bin/local-cloud --state-dir $dir/cloud instance stop node-1
  (the local-cloud CLI needs the run's admin password: export HYPERCLOUD_LOCAL_CLOUD_PASSWORD=\$(cat $dir/cloud-password))
Press Ctrl-C to stop everything.
BANNER
}
