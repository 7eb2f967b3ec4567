# The aws cloud of `hack/local-up.sh --cloud aws` (sourced by it): moto in place of AWS, one
# amazon-ec2-metadata-mock per instance in place of each instance's IMDS, the official aws CLI
# to look. Everything listens on loopback. moto's load balancers carry no traffic by themselves:
# `local-cloud serve --follow-aws-elb` (docs/local-cloud.md) serves their listeners on loopback
# VIPs, named in $dir/cloud/aws-elb-hosts, with the instances' 10.0.x.y addresses reached at
# 127.10.x.y; the demo curls the ELB's DNS name through it (curl --resolve).
#
# Uses from local-up.sh: $dir, $bin, free_port, wait_for, fail, pids.
# Tools: hack/aws-tools.sh (moto and awscli pinned in hack/python-tools.sh, the metadata mock in
# hack/versions.env).

aws_region=us-east-1
aws_zone=us-east-1a
# moto checks no signature; every process gets these from its environment (the SDK's default
# credential chain, first step).
export AWS_ACCESS_KEY_ID=AKIDLOCALUP AWS_SECRET_ACCESS_KEY=local-up-secret
export AWS_CONFIG_FILE=/nonexistent AWS_SHARED_CREDENTIALS_FILE=/nonexistent
unset AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION

# aws ARGS...: the official CLI against moto, JSON out.
aws_cli() {
  "$HYPERCLOUD_AWS_CLI" --endpoint-url "$aws_url" --region "$aws_region" --output json "$@"
}

json_get() { # json_get EXPR < JSON: a python expression on `d`
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
}

# aws_start: moto, a VPC with a subnet and a route table tagged for the cluster, cloud.conf.
aws_start() {
  eval "$(hack/aws-tools.sh install)"
  local port
  port=$(free_port)
  aws_url="http://127.0.0.1:$port"
  mkdir -p "$dir/cloud"
  (cd "$dir/cloud" && exec "$HYPERCLOUD_MOTO_SERVER" -H 127.0.0.1 -p "$port") >"$dir/logs/moto.log" 2>&1 &
  pids+=($!)
  wait_for 60 "moto" curl -sS -o /dev/null "$aws_url/"
  aws_vpc=$(aws_cli ec2 create-vpc --cidr-block 10.0.0.0/16 | json_get 'd["Vpc"]["VpcId"]')
  aws_subnet=$(aws_cli ec2 create-subnet --vpc-id "$aws_vpc" --cidr-block 10.0.1.0/24 \
    --availability-zone "$aws_zone" | json_get 'd["Subnet"]["SubnetId"]')
  aws_rtb=$(aws_cli ec2 create-route-table --vpc-id "$aws_vpc" | json_get 'd["RouteTable"]["RouteTableId"]')
  aws_cli ec2 create-tags --resources "$aws_vpc" "$aws_subnet" "$aws_rtb" \
    --tags Key=kubernetes.io/cluster/local-up,Value=owned >/dev/null
  cat >"$dir/cloud.conf" <<EOF
[Global]
Zone = $aws_zone
KubernetesClusterID = local-up
[ServiceOverride "ec2"]
Service = ec2
Region = $aws_region
URL = $aws_url
[ServiceOverride "elb"]
Service = elasticloadbalancing
Region = $aws_region
URL = $aws_url
[Hypercloud]
; moto answers at once: a tenth of upstream's pauses while waiting for EBS volumes
volume-wait-scale = 0.1
EOF
  echo "moto: $aws_url (EC2, ELB, ELBv2), VPC $aws_vpc, subnet $aws_subnet ($aws_zone), route table $aws_rtb"
  # The data plane moto lacks: the local cloud follows its ELBs and NLBs.
  lc_port=$(free_port)
  "$bin/local-cloud" --state-dir "$dir/cloud/local-cloud" serve --listen "127.0.0.1:$lc_port" --no-metadata \
    --follow-aws-elb "$aws_url" --follow-aws-region "$aws_region" --follow-aws-address-map "$aws_address_map" \
    >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  wait_for 30 "the local cloud (ELB follower)" curl -fsS "http://127.0.0.1:$lc_port/identity/v3"
  echo "ELB data plane: local-cloud --follow-aws-elb $aws_url (instances' $aws_address_map)"
}

# Where the follower reaches the instances' VPC addresses (10.0.1.x -> 127.10.1.x).
aws_address_map=10.0.0.0/16=127.10.0.0/16

# aws_create_instances N: N instances tagged for the cluster; for each, node-I.id (instance ID),
# node-I.name (its private DNS name, the Node name as upstream) and a metadata mock playing it,
# named in cloud-node-I.conf for that node's kubelet-helper.
aws_create_instances() {
  local n=$1 i out id name ip mac port
  out=$(aws_cli ec2 run-instances --image-id ami-12c6146b --count "$n" --instance-type m5.large \
    --subnet-id "$aws_subnet" \
    --tag-specifications 'ResourceType=instance,Tags=[{Key=kubernetes.io/cluster/local-up,Value=owned}]')
  for i in $(seq 1 "$n"); do
    id=$(json_get "sorted(d['Instances'], key=lambda x: x['PrivateIpAddress'])[$i-1]['InstanceId']" <<<"$out")
    name=$(json_get "[x for x in d['Instances'] if x['InstanceId']=='$id'][0]['PrivateDnsName']" <<<"$out")
    ip=$(json_get "[x for x in d['Instances'] if x['InstanceId']=='$id'][0]['PrivateIpAddress']" <<<"$out")
    mac=$(json_get "[x for x in d['Instances'] if x['InstanceId']=='$id'][0]['NetworkInterfaces'][0]['MacAddress']" <<<"$out")
    echo "$id" >"$dir/node-$i.id"
    echo "$name" >"$dir/node-$i.name"
    port=$(free_port)
    python3 - "$dir/mock-$i.json" "$id" "$aws_zone" "$ip" "$name" "$mac" "$port" <<'EOF'
import json, sys
path, iid, zone, ip, name, mac, port = sys.argv[1:]
mp = lambda leaf: f"/latest/meta-data/network/interfaces/macs/{mac}/{leaf}"
json.dump({
    "imdsv2": False,
    "server": {"hostname": "127.0.0.1", "port": port},
    "metadata": {
        "paths": {"mac-mac": mp("mac"), "mac-local-ipv4s": mp("local-ipv4s"), "mac-local-hostname": mp("local-hostname")},
        "values": {"instance-id": iid, "placement-availability-zone": zone, "placement-region": zone[:-1],
                   "local-ipv4": ip, "local-hostname": name, "hostname": name, "mac": mac, "mac-mac": mac,
                   "mac-local-ipv4s": ip, "mac-local-hostname": name, "instance-type": "m5.large"},
    },
}, open(path, "w"))
EOF
    (cd "$dir/cloud" && HOME="$dir/cloud" exec "$HYPERCLOUD_EC2_METADATA_MOCK" --config-file "$dir/mock-$i.json" \
      --hostname 127.0.0.1 --port "$port") >"$dir/logs/metadata-mock-$i.log" 2>&1 &
    pids+=($!)
    wait_for 30 "the metadata mock of node $i" curl -fsS "http://127.0.0.1:$port/latest/meta-data/instance-id"
    { cat "$dir/cloud.conf"; printf '[Hypercloud]\nmetadata-endpoint = http://127.0.0.1:%s\n' "$port"; } >"$dir/cloud-node-$i.conf"
  done
  aws_cli ec2 describe-instances --query 'Reservations[].Instances[].[InstanceId,PrivateDnsName,PrivateIpAddress,InstanceType,Placement.AvailabilityZone,State.Name]' --output text
}

# aws_create_volume: an EBS volume in the zone; its ID in volume-data-1.id.
aws_create_volume() {
  aws_cli ec2 create-volume --availability-zone "$aws_zone" --size 1 | json_get 'd["VolumeId"]' >"$dir/volume-data-1.id"
}

# aws_check_load_balancer NAME HOSTNAME: the ELB exists in moto with the Nodes' instances.
aws_check_load_balancer() {
  local name=$1 host=$2 out
  out=$(aws_cli elb describe-load-balancers --load-balancer-names "$name") ||
    fail "aws elb describe-load-balancers --load-balancer-names $name"
  echo "$ aws elb describe-load-balancers --load-balancer-names $name"
  json_get '"\n".join("  %s: %s" % kv for kv in [("DNSName", d["LoadBalancerDescriptions"][0]["DNSName"]), ("Scheme", d["LoadBalancerDescriptions"][0]["Scheme"]), ("Listeners", ", ".join("%s %s -> %s" % (l["Listener"]["Protocol"], l["Listener"]["LoadBalancerPort"], l["Listener"]["InstancePort"]) for l in d["LoadBalancerDescriptions"][0]["ListenerDescriptions"])), ("Instances", " ".join(sorted(i["InstanceId"] for i in d["LoadBalancerDescriptions"][0]["Instances"]))), ("HealthCheck", d["LoadBalancerDescriptions"][0]["HealthCheck"]["Target"])])' <<<"$out"
  [ "$(json_get 'd["LoadBalancerDescriptions"][0]["DNSName"]' <<<"$out")" = "$host" ] ||
    fail "the Service's ingress hostname $host is not the ELB's DNS name"
  local want have
  want=$(cat "$dir"/node-*.id | sort | tr '\n' ' ')
  have=$(json_get '" ".join(sorted(i["InstanceId"] for i in d["LoadBalancerDescriptions"][0]["Instances"]))' <<<"$out")
  [ "$have " = "$want" ] || fail "ELB instances are '$have', want '$want'"
}

# ---------------------------------------------------------------- local-up's cloud_* functions
# (hack/local-up.sh sources this file with --cloud aws; these replace its local-cloud steps.)

# Nodes are named after their instance's private DNS name, as the in-tree provider names them.
node_name() { cat "$dir/node-$1.name"; }
node_prefix=ip-

cloud_start() {
  step "start moto (AWS APIs on 127.0.0.1; hack/lib/cloud-aws.sh)"
  aws_start
  provider=aws
  cloud_flags=(--cloud-provider=aws "--cloud-config=$dir/cloud.conf")
}

cloud_create_instances() {
  step "create $1 EC2 instances in moto, and a metadata mock for each"
  aws_create_instances "$1"
}

# The instances as hack/lib/kubelet-power.py reads them: name (private DNS), id, state.
cloud_instances_command() {
  printf '%s\n' "$HYPERCLOUD_AWS_CLI" --endpoint-url "$aws_url" --region "$aws_region" --output json \
    ec2 describe-instances --query 'Reservations[].Instances[].{name: PrivateDnsName, id: InstanceId, status: State.Name}'
}

cloud_stop_instance() {
  aws_cli ec2 stop-instances --instance-ids "$(cat "$dir/node-$1.id")" >/dev/null
  echo "aws ec2 stop-instances --instance-ids $(cat "$dir/node-$1.id")"
}

cloud_volume() {
  if [ "$mode" = external ]; then
    step "create an EBS volume in moto and its PersistentVolume (the cloud-controller-manager's PV-label controller labels it)"
  else
    step "create an EBS volume in moto and its PersistentVolume (the apiserver-plugin webhook labels it on creation)"
  fi
  aws_create_volume
  kcreate /api/v1/persistentvolumes "$(printf '{"metadata":{"name":"data-1"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"persistentVolumeReclaimPolicy":"Retain","csi":{"driver":"ebs.csi.aws.com","volumeHandle":"%s","fsType":"ext4"}}}' "$(cat "$dir/volume-data-1.id")")" >/dev/null
  pv_labelled() { kget /api/v1/persistentvolumes/data-1 | grep -q '"topology.kubernetes.io/zone"'; }
  wait_for 60 "PersistentVolume data-1 to get zone labels (see $dir/logs)" pv_labelled
  kget /api/v1/persistentvolumes/data-1 | python3 -c '
import json, sys
pv = json.load(sys.stdin)
labels = pv["metadata"].get("labels", {})
print("pv/data-1 (volume %s): %s" % (pv["spec"]["csi"]["volumeHandle"],
      ", ".join("%s=%s" % kv for kv in sorted(labels.items()))))'
}

# The in-tree volume step (hack/lib/volume-demo.sh): kubernetes.io/aws-ebs volumes, attached
# with AttachVolume at upstream's /dev/xvdb.. device names, shown by `aws ec2 describe-volumes`.
aws_volume_class() {
  vol_plugin=kubernetes.io/aws-ebs vol_class=aws-ebs vol_params='{"type":"gp2"}'
}
aws_instance_id() { cat "$dir/node-$1.id"; }
aws_volume_show() {
  local id=${1##*/} # aws://<zone>/vol-... -> vol-...
  echo "\$ aws ec2 describe-volumes --volume-ids $id"
  aws_cli ec2 describe-volumes --volume-ids "$id" >"$dir/volume-show.json" || fail "aws ec2 describe-volumes $id"
  python3 - "$dir/volume-show.json" "$dir/volume-cloud.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["Volumes"][0]
att = v.get("Attachments") or []
print("  %s: state %s, %s GiB %s in %s" % (v["VolumeId"], v["State"], v["Size"], v.get("VolumeType"), v["AvailabilityZone"]))
for a in att:
    print("  attachment: instance %s device %s state %s" % (a["InstanceId"], a["Device"], a["State"]))
json.dump({"status": v["State"], "in_use": v["State"] == "in-use",
           "attachments": [{"instance": a["InstanceId"], "device_path": a["Device"]}
                           for a in att if a["State"] == "attached"]}, open(sys.argv[2], "w"))
PY
}

cloud_load_balancer() {
  step "create a LoadBalancer Service (a classic ELB in moto, served by the local cloud's follower), with a tiny HTTP server on every Node's InternalIP:nodePort"
  local svc_json node_port listeners
  svc_json=$(kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"type":"LoadBalancer","selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}')
  node_port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["spec"]["ports"][0]["nodePort"])' "$svc_json")
  # kube-proxy's part: every Node's InternalIP (a 10.0.1.x moto address, reached here at
  # 127.10.1.x) answers on the nodePort, which is also the ELB's TCP health check.
  listeners=$(kget /api/v1/nodes | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    name = n["metadata"]["name"]
    ips = [a["address"] for a in n.get("status", {}).get("addresses", []) if a["type"] == "InternalIP"]
    if name.startswith(sys.argv[2]) and ips and ips[0].startswith("10.0."):
        print("%s:%s:%s" % ("127.10." + ips[0][len("10.0."):], sys.argv[1], name))' "$node_port" "$node_prefix")
  # shellcheck disable=SC2086 # one ADDRESS:PORT:NAME word per Node
  python3 hack/lib/hello-backend.py $listeners >"$dir/logs/hello-backend.log" 2>&1 &
  pids+=($!)
  echo "service default/hello: port 8080 -> nodePort $node_port on $(echo $listeners | wc -w) Nodes"
  hostname_ingress() { kget /api/v1/namespaces/default/services/hello | python3 -c '
import json, sys
ing = json.load(sys.stdin).get("status", {}).get("loadBalancer", {}).get("ingress", [])
if not ing or not ing[0].get("hostname"):
    sys.exit(1)
print(ing[0]["hostname"])'; }
  wait_for 90 "the load balancer's ingress hostname (see $dir/logs)" hostname_ingress
  lb_host=$(hostname_ingress)
  lb_name=$(python3 -c 'import json,sys; print(("a" + json.loads(sys.argv[1])["metadata"]["uid"].replace("-", ""))[:32])' "$svc_json")
  echo "service default/hello: ingress hostname $lb_host (classic ELB $lb_name in moto)"
  aws_check_load_balancer "$lb_name" "$lb_host"
  # The follower names the ELB's VIP in its hosts file; curl resolves the DNS name with it.
  elb_vip() { awk -v h="$lb_host" '$2 == h { print $1; found=1 } END { exit !found }' "$dir/cloud/local-cloud/aws-elb-hosts" 2>/dev/null; }
  wait_for 30 "the ELB's VIP in $dir/cloud/local-cloud/aws-elb-hosts (see $dir/logs/local-cloud.log)" elb_vip
  vip=$(elb_vip)
  local answer="" deadline=$((SECONDS + 60))
  through_elb() { answer=$(curl -fsS --max-time 2 --resolve "$lb_host:8080:$vip" "http://$lb_host:8080/"); }
  until through_elb; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no answer from http://$lb_host:8080/ (VIP $vip; see $dir/logs/hello-backend.log and $dir/logs/local-cloud.log)"
    sleep 0.5
  done
  echo "$ curl --resolve $lb_host:8080:$vip http://$lb_host:8080/"
  echo "$answer"
  echo "local-up: curl through the load balancer succeeded"
}

# Instance and volume IDs read as names; the ELB's name (from the Service UID) as <elb>.
cloud_ids() {
  local i
  for i in $(seq 1 "$nodes"); do echo "$(cat "$dir/node-$i.id") $(node_name "$i")"; done
  echo "$(cat "$dir/volume-data-1.id") data-1"
  echo "$lb_name elb"
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  kube-apiserver   $api_url   export KUBECONFIG=$kubeconfig
  moto             $aws_url   $HYPERCLOUD_AWS_CLI --endpoint-url $aws_url --region $aws_region ec2 describe-instances
  ELB              http://$lb_host:8080/   curl --resolve $lb_host:8080:$vip http://$lb_host:8080/
                   (served by local-cloud --follow-aws-elb; names in $dir/cloud/local-cloud/aws-elb-hosts)
Press Ctrl-C to stop everything.
BANNER
}
