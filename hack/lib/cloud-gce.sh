# shellcheck shell=bash
# The gce cloud of `hack/local-up.sh --cloud gce` (sourced by it; redefines its cloud_*
# functions): the same local cloud, spoken to in its Compute Engine v1 dialect
# (docs/local-cloud.md#compute-engine-the-gce-dialect) and answering as GCE's metadata server
# on its metadata address. Project `demo`, region us-central1 with zones us-central1-a and -b;
# node-I is an instance made with `instances.insert` in one of the two zones (alternating),
# with an ephemeral external IP (access config) and the network tag local-up-node.
#
# - The provider's gce.conf points `api-endpoint` at the local cloud; the controllers' copy
#   names their zone (`local-zone`), the nodes' copies do not: an in-tree kubelet-helper learns
#   its project, zone, name, addresses and machine type from the metadata server, which knows
#   the instance by the address the request comes from (`metadata-source-address`, the
#   instance's networkIP), as GCE's knows the VM asking.
# - The controller managers also run node IPAM and the route controller (--allocate-node-cidrs,
#   --configure-cloud-routes): a gce in-tree kubelet starts its Node NetworkUnavailable until
#   its route exists, as upstream's did, so without routes no pod would be scheduled in-tree.
# - The LoadBalancer Service gets a forwarding rule to a target pool of the instances. GCE
#   keeps a packet's destination, so the instance gets it on the Service port (where kube-proxy
#   would catch it), not on the NodePort: the tiny HTTP server listens on every Node's
#   InternalIP:8080, and on :10256 for the target pool's health check (kube-proxy's /healthz).
# - In-tree, apiserver-plugin gets --ssh-user/--ssh-keyfile (the kube-apiserver's SSH tunnel
#   flags): the key reaches the project's `ssh-keys`, shown by every instance's metadata server.
#
# Uses from local-up.sh: $dir, $bin, $mode, $nodes, pids, step, fail, wait_for, free_port,
# kget, kcreate, wait_for_ingress_ip, curl_through_lb. Everything listens on 127.0.0.1 and the instances' 127.x addresses.

gce_project=demo
gce_region=us-central1
gce_zones=(us-central1-a us-central1-b)

# gce_zone I: the zone of node-I.
gce_zone() { echo "${gce_zones[$((($1 - 1) % ${#gce_zones[@]}))]}"; }

# gce_api METHOD PATH [BODY]: Compute v1 under the project; the answer's JSON on stdout,
# failing on an error answer (GCE's error body is printed).
gce_api() {
  if [ $# -ge 3 ]; then
    curl -sS --fail-with-body -X "$1" -H 'Content-Type: application/json' --data "$3" "$gce_url/$2"
  else
    curl -sS --fail-with-body -X "$1" "$gce_url/$2"
  fi
}

# gce_done: the Operation on stdin is DONE without an error (the local cloud's always are done
# when answered; a real caller would zoneOperations.wait).
gce_done() {
  python3 -c '
import json, sys
op = json.load(sys.stdin)
if op.get("status") != "DONE" or op.get("error"):
    sys.exit("operation %s: %s %s" % (op.get("name"), op.get("status"), op.get("error")))
print("  operation %s %s: %s" % (op.get("name"), op.get("operationType"), op.get("targetLink", "").split("/projects/")[-1]))'
}

# gce_conf [GLOBAL-LINES] [HYPERCLOUD-LINES]: upstream's gce.conf for the local cloud. The local
# cloud asks for no token (unless serve --gce-require-tokens): anonymous = true says so, rather
# than token-url = nil, which searches for Application Default Credentials as upstream.
gce_conf() {
  cat <<EOF
[global]
project-id = $gce_project
multizone = true
network-name = private
node-tags = local-up-node
node-instance-prefix = node-
api-endpoint = http://127.0.0.1:$api_port/compute/v1/
${1:-}
[Hypercloud]
anonymous = true
metadata-endpoint = http://127.0.0.1:$md_port
${2:-}
EOF
}

cloud_start() {
  step "start the local cloud speaking Compute Engine v1 (the GCE dialect; hack/lib/cloud-gce.sh) and GCE's metadata server, on 127.0.0.1"
  api_port=$(free_port) md_port=$(free_port)
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --metadata-listen "127.0.0.1:$md_port" \
    --region "$gce_region" --availability-zones "$(IFS=,; echo "${gce_zones[*]}")" \
    >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  gce_url="http://127.0.0.1:$api_port/compute/v1/projects/$gce_project"
  wait_for 30 "the local cloud's GCE dialect" curl -fsS "$gce_url"
  # The controllers run "on the master", in the first zone; the nodes' copies are made per node.
  gce_conf "local-zone = ${gce_zones[0]}" >"$dir/gce.conf"
  echo "Compute Engine v1: $gce_url (zones $(IFS=,; echo "${gce_zones[*]}") of $gce_region)"
  echo "metadata server:   http://127.0.0.1:$md_port/computeMetadata/v1/ (Metadata-Flavor: Google)"
  sed 's/^/  gce.conf: /' "$dir/gce.conf" | grep -v ': $'
  provider=gce
  cloud_flags=(--cloud-provider=gce "--cloud-config=$dir/gce.conf")
  # Node IPAM and routes: see the top of this file. The pod CIDRs are kwok's pod range.
  controller_flags=(--allocate-node-cidrs=true "--cluster-cidr=$CLUSTER_POD_CIDR" --configure-cloud-routes=true)
  if [ "$mode" = in-tree ]; then
    # The kube-apiserver's SSH tunnel flags; the private key is never used here.
    mkdir -p "$dir/ssh"
    rm -f "$dir/ssh/tunnel" "$dir/ssh/tunnel.pub"
    ssh-keygen -q -t ed25519 -N '' -C kube@local-up -f "$dir/ssh/tunnel" || fail "ssh-keygen"
    plugin_flags=(--ssh-user=kube "--ssh-keyfile=$dir/ssh/tunnel")
  fi
}

cloud_create_instances() {
  step "create $1 instances with Compute Engine's instances.insert (zones $(IFS=,; echo "${gce_zones[*]}"), external IPs, tag local-up-node)"
  local i zone ip
  for i in $(seq 1 "$1"); do
    zone=$(gce_zone "$i")
    gce_api POST "zones/$zone/instances" "$(printf '{"name":"node-%d","machineType":"zones/%s/machineTypes/m1.small","networkInterfaces":[{"network":"global/networks/private","accessConfigs":[{"type":"ONE_TO_ONE_NAT","name":"External NAT"}]}],"tags":{"items":["local-up-node"]}}' "$i" "$zone")" \
      | gce_done || fail "instances.insert node-$i"
    ip=$(gce_api GET "zones/$zone/instances/node-$i" | python3 -c 'import json,sys; print(json.load(sys.stdin)["networkInterfaces"][0]["networkIP"])')
    # What a VM's metadata server tells it is who asks; on one machine each kubelet-helper asks
    # from its instance's address, named in its own gce.conf (no local-zone: the metadata
    # server's zone).
    gce_conf "" "metadata-source-address = $ip" >"$dir/cloud-node-$i.conf"
  done
  gce_api GET aggregated/instances | python3 -c '
import json, sys
print("  %-8s %-14s %-10s %-11s %-12s %s" % ("NAME", "ZONE", "TYPE", "STATUS", "INTERNAL IP", "EXTERNAL IP"))
for scoped in json.load(sys.stdin).get("items", {}).values():
    for i in sorted(scoped.get("instances", []), key=lambda i: i["name"]):
        nic = i["networkInterfaces"][0]
        nat = ",".join(a.get("natIP", "") for a in nic.get("accessConfigs", []))
        print("  %-8s %-14s %-10s %-11s %-12s %s" % (i["name"], i["zone"].rsplit("/", 1)[-1],
              i["machineType"].rsplit("/", 1)[-1], i["status"], nic["networkIP"], nat))'
}

cloud_instances_command() {
  printf '%s\n' python3 hack/lib/gce-instances.py "$gce_url"
}

cloud_stop_instance() {
  local zone
  zone=$(gce_zone "$1")
  echo "POST $gce_url/zones/$zone/instances/node-$1/stop"
  gce_api POST "zones/$zone/instances/node-$1/stop" | gce_done || fail "instances.stop node-$1"
}

# Nothing to name: GCE's provider IDs carry names, not generated IDs.
cloud_ids() { :; }

# In-tree: the key of apiserver-plugin --ssh-user/--ssh-keyfile reaches the project's ssh-keys.
cloud_plugin_started() {
  ssh_key_shown() {
    curl -fsS -H 'Metadata-Flavor: Google' -H 'X-Instance-ID: node-1' \
      "http://127.0.0.1:$md_port/computeMetadata/v1/project/attributes/ssh-keys" | grep -qF "kube:$(cut -d' ' -f1-2 "$dir/ssh/tunnel.pub")"
  }
  wait_for 30 "the SSH key of --ssh-keyfile in the project's ssh-keys (see $dir/logs/apiserver-plugin.log)" ssh_key_shown
  echo "AddSSHKeyToAllInstances (--ssh-user=kube --ssh-keyfile=$dir/ssh/tunnel): node-1's metadata server shows it:"
  echo "  \$ curl -H 'Metadata-Flavor: Google' http://127.0.0.1:$md_port/computeMetadata/v1/project/attributes/ssh-keys"
  curl -fsS -H 'Metadata-Flavor: Google' -H 'X-Instance-ID: node-1' \
    "http://127.0.0.1:$md_port/computeMetadata/v1/project/attributes/ssh-keys" | cut -c1-60 | sed 's/^/  /; s/$/.../'
}

cloud_volume() {
  if [ "$mode" = external ]; then
    step "create a persistent disk with disks.insert in ${gce_zones[1]} and its gcePersistentDisk PV (the cloud-controller-manager's PV-label controller labels it)"
  else
    step "create a persistent disk with disks.insert in ${gce_zones[1]} and its gcePersistentDisk PV (the apiserver-plugin webhook labels it on creation)"
  fi
  gce_api POST "zones/${gce_zones[1]}/disks" '{"name":"data-1","sizeGb":"1"}' | gce_done || fail "disks.insert data-1"
  kcreate /api/v1/persistentvolumes '{"metadata":{"name":"data-1"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"persistentVolumeReclaimPolicy":"Retain","gcePersistentDisk":{"pdName":"data-1","fsType":"ext4"}}}' >/dev/null
  pv_labelled() { kget /api/v1/persistentvolumes/data-1 | grep -q '"topology.kubernetes.io/zone"'; }
  wait_for 60 "PersistentVolume data-1 to get zone labels (see $dir/logs)" pv_labelled
  kget /api/v1/persistentvolumes/data-1 | python3 -c '
import json, sys
pv = json.load(sys.stdin)
labels = pv["metadata"].get("labels", {})
print("pv/data-1 (disk %s): %s" % (pv["spec"]["gcePersistentDisk"]["pdName"],
      ", ".join("%s=%s" % kv for kv in sorted(labels.items()))))'
}

# The in-tree volume step (hack/lib/volume-demo.sh): kubernetes.io/gce-pd persistent disks,
# attached with instances.attachDisk, shown by Google's client when hack/python-tools.sh gce has
# installed it.
gce_volume_class() {
  vol_plugin=kubernetes.io/gce-pd vol_class=gce-pd vol_params='{"type":"pd-standard"}' vol_zone=${gce_zones[0]}
}
gce_instance_id() { node_name "$1"; }
gce_volume_show() {
  local python=python3
  [ -x "$HYPERCLOUD_CACHE/venv-gce/bin/python" ] && python="$HYPERCLOUD_CACHE/venv-gce/bin/python"
  "$python" hack/lib/gce-disk.py "http://127.0.0.1:$api_port" "$gce_project" "$(gce_zone "$2")" "$1" \
    "$dir/volume-cloud.json" || fail "disks.get $1"
}

cloud_load_balancer() {
  step "create a LoadBalancer Service (a forwarding rule to a target pool), with a tiny HTTP server on every Node's InternalIP:8080 and :10256"
  local svc_json listeners
  svc_json=$(kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"type":"LoadBalancer","selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}')
  gce_lb=$(python3 -c 'import json,sys; print(("a" + json.loads(sys.argv[1])["metadata"]["uid"].replace("-", ""))[:32])' "$svc_json")
  # A GCE forwarding rule keeps the packet's destination: the instance gets it on the Service
  # port, where kube-proxy would catch it; the target pool's health check asks kube-proxy's
  # :10256/healthz.
  listeners=$(kget /api/v1/nodes | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    name = n["metadata"]["name"]
    ips = [a["address"] for a in n.get("status", {}).get("addresses", []) if a["type"] == "InternalIP"]
    if name.startswith("node-") and ips:
        print("%s:8080:%s %s:10256:%s" % (ips[0], name, ips[0], name))')
  # shellcheck disable=SC2086 # one ADDRESS:PORT:NAME word per listener
  python3 hack/lib/hello-backend.py $listeners >"$dir/logs/hello-backend.log" 2>&1 &
  pids+=($!)
  wait_for_ingress_ip
  echo "load balancer ready: $vip:8080 (forwarding rule $gce_lb -> target pool $gce_lb)"
  python3 - "$(gce_api GET "regions/$gce_region/forwardingRules/$gce_lb")" "$(gce_api GET "regions/$gce_region/targetPools/$gce_lb")" \
    "$(gce_api GET "global/firewalls/k8s-fw-$gce_lb")" <<'EOF'
import json, sys
rule, pool, fw = (json.loads(a) for a in sys.argv[1:])
tail = lambda link: link.rsplit("/", 1)[-1]
print("  forwardingRule %s: %s %s:%s -> targetPool %s" % (rule["name"], rule["IPProtocol"], rule["IPAddress"], rule["portRange"], tail(rule["target"])))
print("  targetPool %s: instances %s, health check %s" % (pool["name"], " ".join(sorted(tail(i) for i in pool.get("instances", []))),
      " ".join(tail(h) for h in pool.get("healthChecks", []))))
print("  firewall %s: %s from %s to tags %s" % (fw["name"], ", ".join("%s:%s" % (a["IPProtocol"], ",".join(a.get("ports", []))) for a in fw["allowed"]),
      ",".join(fw.get("sourceRanges", [])), ",".join(fw.get("targetTags", []))))
EOF
  curl_through_lb
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  load balancer      http://$vip:8080/   (Service default/hello: forwarding rule $gce_lb)
  kube-apiserver     $api_url   export KUBECONFIG=$kubeconfig
  Compute Engine v1  $gce_url
  metadata server    http://127.0.0.1:$md_port/computeMetadata/v1/
  symlinks           $bin
Look with curl or Google's client (hack/python-tools.sh gce installs it into $HYPERCLOUD_CACHE/venv-gce):
  curl $gce_url/aggregated/instances
  curl $gce_url/regions/$gce_region/forwardingRules
  curl -H 'Metadata-Flavor: Google' -H 'X-Instance-ID: node-1' 'http://127.0.0.1:$md_port/computeMetadata/v1/instance/?recursive=true'
  $HYPERCLOUD_CACHE/venv-gce/bin/python -c 'from google.api_core.client_options import ClientOptions; from google.auth.credentials import AnonymousCredentials; from google.cloud import compute_v1; c = compute_v1.InstancesClient(credentials=AnonymousCredentials(), transport="rest", client_options=ClientOptions(api_endpoint="http://127.0.0.1:$api_port")); print([(i.name, i.status) for i in c.list(project="$gce_project", zone="${gce_zones[0]}")])'
  curl -X POST $gce_url/zones/${gce_zones[0]}/instances/node-1/stop     (and watch node-1)
Press Ctrl-C to stop everything.
BANNER
}
