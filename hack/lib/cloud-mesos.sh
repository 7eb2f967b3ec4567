# shellcheck shell=bash
# The cloud_* steps of hack/local-up.sh for --cloud mesos: the local cloud's Mesos dialect (its
# servers are the agents of a Mesos master at the local cloud's address, GET /state) and the
# in-tree `mesos` provider, as Kubernetes on Mesos ran it (v1.0-v1.7). Mesos has no load
# balancers, zones, routes or volumes, and upstream never had an external mesos provider: the
# demo runs in-tree only. Node names are the agents' hostnames (their fixed IPs), and a Node's
# address is that name resolved, as the legacy provider did. hack/local-up.sh refuses
# --mode external with it.

cloud_start() {
  step "start the local cloud; its Mesos dialect is the master of cluster 'local-up' (GET /state)"
  api_port=$(free_port) md_port=$(free_port)
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --metadata-listen "127.0.0.1:$md_port" \
    --mesos-cluster local-up >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  wait_for 30 "the local cloud" curl -fsS "http://127.0.0.1:$api_port/state"
  printf '[mesos-cloud]\nmesos-master = 127.0.0.1:%s\nhttp-client-timeout = 5s\nstate-cache-ttl = 1s\n' "$api_port" >"$dir/mesos.conf"
  echo "Mesos master: http://127.0.0.1:$api_port/state; $dir/mesos.conf:"
  sed 's/^/  /' "$dir/mesos.conf"
  provider=mesos
  cloud_flags=(--cloud-provider=mesos "--cloud-config=$dir/mesos.conf")
}

# mesos_agents: "HOSTNAME AGENT-ID ACTIVE" lines from the master's /state.
mesos_agents() {
  curl -fsS "http://127.0.0.1:$api_port/state" | python3 -c '
import json, sys
for a in json.load(sys.stdin)["slaves"]:
    print(a["hostname"], a["id"], "true" if a["active"] else "false")'
}

cloud_create_instances() {
  step "create $1 servers in the local cloud: each is an agent of the Mesos master"
  local i id
  for i in $(seq 1 "$1"); do
    id=$("$bin/local-cloud" --state-dir "$dir/cloud" instance create "agent-$i" --zone nova --flavor m1.small -o json \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d["server"]["id"])')
    echo "$id" >"$dir/server-$i.id"
  done
  # The Node of server I is named by its agent's hostname (the server's fixed IP here).
  mesos_agents >"$dir/agents.txt"
  for i in $(seq 1 "$1"); do
    awk -v id="$(cat "$dir/server-$i.id")" 'index($2, id) == 1 { print $1 }' "$dir/agents.txt" >"$dir/node-$i.name"
    awk -v id="$(cat "$dir/server-$i.id")" 'index($2, id) == 1 { print $2 }' "$dir/agents.txt" >"$dir/node-$i.id"
    [ -s "$dir/node-$i.name" ] || fail "no Mesos agent for server agent-$i (see $dir/agents.txt)"
  done
  echo "\$ curl http://127.0.0.1:$api_port/state | jq '.slaves[] | .hostname, .id, .active'"
  sed 's/^/  /' "$dir/agents.txt"
}

# The kubelets run while their agent is active; a Node belongs to the agent its providerID
# (mesos://<agent id>) or its name (the agent's hostname) names.
cloud_instances_command() {
  printf '%s\n' python3 hack/lib/mesos-instances.py "http://127.0.0.1:$api_port/state"
}

cloud_stop_instance() {
  "$bin/local-cloud" --state-dir "$dir/cloud" instance stop "agent-$1"
  echo "local-cloud instance stop agent-$1: the agent disconnects (/state: active false)"
}

cloud_ids() {
  local f
  for f in "$dir"/node-*.id; do
    [ -e "$f" ] || continue
    echo "$(cat "$f") $(cat "${f%.id}.name")"
  done
}

node_name() { cat "$dir/node-$1.name"; }
node_prefix=127.

cloud_node_flags() {
  node_flags=("--cloud-config=$dir/mesos.conf")
}

cloud_volume() {
  step "volumes: skipped: Mesos has no volumes (the legacy provider had no PV labels or disks)"
}

cloud_load_balancer() {
  step "load balancer: skipped: Mesos has no load balancers (as upstream; the service controller does not start)"
  kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}' >/dev/null
  echo "\$ hypercloud's Clusters capability, as the provider answers it:"
  curl -fsS "http://127.0.0.1:$api_port/state" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("  ListClusters: [%s]   Master(%s): %s" % (s.get("cluster", "mesos"), s.get("cluster", "mesos"), s["leader"].split("@", 1)[1].rsplit(":", 1)[0]))'
  echo "local-up: load balancer step skipped for mesos"
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  kube-apiserver   $api_url            export KUBECONFIG=$kubeconfig
  Mesos master     http://127.0.0.1:$api_port/state   (the local cloud; its servers are the agents)
  local cloud      $bin/local-cloud --state-dir $dir/cloud instance list
  symlinks         $bin
Stop an agent's machine and watch its Node: $bin/local-cloud --state-dir $dir/cloud instance stop agent-1
Press Ctrl-C to stop everything.
BANNER
}
