# shellcheck shell=bash
# The azure cloud of `hack/local-up.sh --cloud azure` (sourced by it; redefines its cloud_*
# functions): the same local cloud, spoken to in its Azure Resource Manager dialect over TLS
# with a CA of its own (--tls-self-signed; docs/local-cloud.md#azure-resource-manager-the-azure-dialect),
# signed in to as its user through Entra's token endpoint, --cloud-provider=azure.
#
# - azure.json is upstream's, `cloud: AzureStackCloud`: the endpoints come from the go-autorest
#   environment file named by AZURE_ENVIRONMENT_FILEPATH, the CA from REQUESTS_CA_BUNDLE, both
#   exported here for every personality, as a real AzureStackCloud cluster holds them.
# - Resource group hypercloud-demo: a virtual network on loopback addresses (127.7.0.0/16: the
#   local cloud forwards load-balancer traffic only to addresses this machine has; real Azure
#   would refuse 127.0.0.0/8), a security group on its subnet, an availability set, and per node
#   a NIC and a VM named node-I (upstream's node name = VM name), Standard_D2s_v3.
# - The controller managers also run node IPAM and the route controller (--allocate-node-cidrs,
#   --configure-cloud-routes): one route per node in the route table k8s-routes.
# - The LoadBalancer Service becomes a frontend of the Standard load balancer `kubernetes`
#   (floating IP, as upstream: the backend gets the Service port, where kube-proxy would catch
#   it; the data plane, a proxy, connects to the Node's address on that port), a rule and a TCP
#   probe on the NodePort, and a security rule for the frontend: the tiny HTTP server listens on
#   every Node's InternalIP:8080 and :nodePort.
#
# Uses from local-up.sh: $dir, $bin, $mode, $nodes, pids, step, fail, wait_for, free_port,
# kget, kcreate, wait_for_ingress_ip, curl_through_lb. Everything listens on 127.0.0.1 and the
# instances' 127.7.1.x addresses.

az_group=hypercloud-demo
az_location=regionone

# az_arm VERB PATH [BODY]: hack/lib/azure-arm.py against the cloud (see its usage).
az_arm() { python3 hack/lib/azure-arm.py "$@"; }

cloud_start() {
  step "start the local cloud speaking Azure Resource Manager (the Azure dialect, over TLS with its own CA; hack/lib/cloud-azure.sh), on 127.0.0.1"
  api_port=$(free_port) md_port=$(free_port)
  "$bin/local-cloud" --state-dir "$dir/cloud" serve --listen "127.0.0.1:$api_port" --metadata-listen "127.0.0.1:$md_port" \
    --tls-self-signed >"$dir/logs/local-cloud.log" 2>&1 &
  pids+=($!)
  export REQUESTS_CA_BUNDLE="$dir/cloud/tls/ca.pem"
  wait_for 30 "the local cloud's Azure dialect" test -s "$REQUESTS_CA_BUNDLE"
  wait_for 30 "the local cloud's Azure dialect" curl -fsS --cacert "$REQUESTS_CA_BUNDLE" "https://127.0.0.1:$api_port/metadata/endpoints?api-version=2022-09-01"
  export AZURE_ENDPOINT="https://127.0.0.1:$api_port" AZURE_TENANT_ID=6c6f6361-6c63-6c6f-7564-74656e616e74
  export AZURE_CLIENT_SECRET=hypercloud
  eval "$(az_arm identity)"
  export AZURE_CLIENT_ID AZURE_SUBSCRIPTION_ID
  cat >"$dir/azurestackcloud.json" <<EOF
{"name": "AzureStackCloud", "resourceManagerEndpoint": "$AZURE_ENDPOINT/",
 "activeDirectoryEndpoint": "$AZURE_ENDPOINT/", "serviceManagementEndpoint": "https://management.core.windows.net/"}
EOF
  export AZURE_ENVIRONMENT_FILEPATH="$dir/azurestackcloud.json"
  cat >"$dir/azure.json" <<EOF
{
  "cloud": "AzureStackCloud",
  "tenantId": "$AZURE_TENANT_ID",
  "subscriptionId": "$AZURE_SUBSCRIPTION_ID",
  "aadClientId": "$AZURE_CLIENT_ID",
  "aadClientSecret": "$AZURE_CLIENT_SECRET",
  "resourceGroup": "$az_group",
  "location": "$az_location",
  "vnetName": "nodes-vnet",
  "subnetName": "nodes",
  "securityGroupName": "nodes-nsg",
  "routeTableName": "k8s-routes",
  "primaryAvailabilitySetName": "nodes",
  "loadBalancerSku": "standard",
  "vmType": "standard"
}
EOF
  echo "Resource Manager: $AZURE_ENDPOINT (subscription $AZURE_SUBSCRIPTION_ID, location $az_location), CA $REQUESTS_CA_BUNDLE"
  echo "Entra:            $AZURE_ENDPOINT/$AZURE_TENANT_ID/oauth2/v2.0/token (client $AZURE_CLIENT_ID)"
  sed 's/^/  azure.json: /; s/\("aadClientSecret": \)"[^"]*"/\1"<redacted>"/' "$dir/azure.json"
  provider=azure
  cloud_flags=(--cloud-provider=azure "--cloud-config=$dir/azure.json")
  controller_flags=(--allocate-node-cidrs=true "--cluster-cidr=$CLUSTER_POD_CIDR" --configure-cloud-routes=true)
}

cloud_create_instances() {
  step "create $1 VMs with Resource Manager (group $az_group: vnet 127.7.0.0/16, security group, availability set, a NIC each)"
  local g="resourceGroups/$az_group" i nic
  az_arm put "$g" "{\"location\":\"$az_location\"}" >/dev/null || fail "resource group $az_group"
  az_arm put "$g/providers/Microsoft.Network/networkSecurityGroups/nodes-nsg" "{\"location\":\"$az_location\"}" >/dev/null || fail "security group"
  az_arm put "$g/providers/Microsoft.Network/virtualNetworks/nodes-vnet" "$(printf '{"location":"%s","properties":{"addressSpace":{"addressPrefixes":["127.7.0.0/16"]},"subnets":[{"name":"nodes","properties":{"addressPrefix":"127.7.1.0/24","networkSecurityGroup":{"id":"/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/networkSecurityGroups/nodes-nsg"}}}]}}' "$az_location" "$AZURE_SUBSCRIPTION_ID" "$az_group")" >/dev/null || fail "virtual network"
  az_arm put "$g/providers/Microsoft.Compute/availabilitySets/nodes" "{\"location\":\"$az_location\",\"sku\":{\"name\":\"Aligned\"},\"properties\":{\"platformFaultDomainCount\":2}}" >/dev/null || fail "availability set"
  for i in $(seq 1 "$1"); do
    read -r nic ip < <(az_arm put "$g/providers/Microsoft.Network/networkInterfaces/node-$i-nic" "$(printf '{"location":"%s","properties":{"ipConfigurations":[{"name":"ipconfig1","properties":{"primary":true,"subnet":{"id":"/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/nodes-vnet/subnets/nodes"}}}]}}' "$az_location" "$AZURE_SUBSCRIPTION_ID" "$az_group")" \
      | python3 -c 'import json,sys; n=json.load(sys.stdin); print(n["id"], n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"])') || fail "NIC node-$i-nic"
    # What a VM's instance metadata service tells it is who asks; on one machine each in-tree
    # kubelet-helper (external: cloud-node-manager) asks from its VM's address, named in its own azure.json.
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(useInstanceMetadata=True, hypercloudInstanceMetadataEndpoint=sys.argv[2], hypercloudInstanceMetadataSourceAddress=sys.argv[3]); json.dump(c, open(sys.argv[4], "w"), indent=2)' \
      "$dir/azure.json" "http://127.0.0.1:$md_port" "$ip" "$dir/azure-node-$i.json"
    az_arm put "$g/providers/Microsoft.Compute/virtualMachines/node-$i" "$(printf '{"location":"%s","properties":{"hardwareProfile":{"vmSize":"Standard_D2s_v3"},"osProfile":{"computerName":"node-%d","adminUsername":"azureuser"},"storageProfile":{"imageReference":{"publisher":"Canonical","offer":"ubuntu-24_04-lts","sku":"server","version":"latest"}},"networkProfile":{"networkInterfaces":[{"id":"%s","properties":{"primary":true}}]},"availabilitySet":{"id":"/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/availabilitySets/nodes"}}}' "$az_location" "$i" "$nic" "$AZURE_SUBSCRIPTION_ID" "$az_group")" >/dev/null || fail "VM node-$i"
  done
  az_arm get "$g/providers/Microsoft.Compute/virtualMachines" | python3 -c '
import json, sys
print("  %-8s %-16s %s" % ("NAME", "SIZE", "NIC"))
for vm in sorted(json.load(sys.stdin)["value"], key=lambda v: v["name"]):
    p = vm["properties"]
    print("  %-8s %-16s %s" % (vm["name"], p["hardwareProfile"]["vmSize"], p["networkProfile"]["networkInterfaces"][0]["id"].rsplit("/", 1)[-1]))'
}

cloud_instances_command() {
  printf '%s\n' python3 hack/lib/azure-arm.py instances "$az_group"
}

cloud_stop_instance() {
  echo "POST $AZURE_ENDPOINT/subscriptions/$AZURE_SUBSCRIPTION_ID/resourceGroups/$az_group/providers/Microsoft.Compute/virtualMachines/node-$1/powerOff"
  az_arm post "resourceGroups/$az_group/providers/Microsoft.Compute/virtualMachines/node-$1/powerOff" || fail "powerOff node-$1"
}

# Nothing to name: Azure's provider IDs carry names, not generated IDs.
cloud_ids() { :; }

# In-tree, each kubelet-helper learns what its VM is from the instance metadata service
# (useInstanceMetadata, as upstream's kubelet on Azure), asking from its VM's address;
# external, each cloud-node-manager does (cloud_node_managers).
cloud_node_flags() {
  node_flags=("--cloud-config=$dir/azure-node-$1.json")
}

# External, upstream's azure layout initialises each Node from the node itself: a
# cloud-node-manager DaemonSet asks the VM's instance metadata service, and the
# cloud-controller-manager runs without its cloud-node controller (cloud-provider-azure's
# --controllers=*,-cloud-node; plus pvl here, as for every cloud).
ccm_controllers='*,-cloud-node,pvl'

# cloud_node_managers N: one cloud-node-manager beside each Node's kubelet, with the node's own
# azure.json (which names its metadata service and the address it asks from).
cloud_node_managers() {
  step "start a cloud-node-manager beside each Node's kubelet (kubelet-helper cloud-node-manager: the VM's instance metadata service, no Resource Manager call)"
  local i
  for i in $(seq 1 "$1"); do
    "$bin/kubelet-helper" cloud-node-manager "--cloud-config=$dir/azure-node-$i.json" --node-name "node-$i" \
      --kubeconfig "$kubeconfig" --trace-cloud-calls "$dir/trace-cloud-node-manager-$i.jsonl" --v=2 \
      >"$dir/logs/cloud-node-manager-$i.log" 2>&1 &
    pids+=($!)
  done
}

cloud_volume() {
  if [ "$mode" = external ]; then
    step "create a managed disk with Resource Manager and its azureDisk PV (the cloud-controller-manager's PV-label controller labels it)"
  else
    step "create a managed disk with Resource Manager and its azureDisk PV (the apiserver-plugin webhook labels it on creation)"
  fi
  local disk_id
  disk_id=$(az_arm put "resourceGroups/$az_group/providers/Microsoft.Compute/disks/data-1" \
    "{\"location\":\"$az_location\",\"zones\":[\"1\"],\"sku\":{\"name\":\"StandardSSD_LRS\"},\"properties\":{\"creationData\":{\"createOption\":\"Empty\"},\"diskSizeGB\":1}}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') || fail "disk data-1"
  kcreate /api/v1/persistentvolumes "$(printf '{"metadata":{"name":"data-1"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"persistentVolumeReclaimPolicy":"Retain","azureDisk":{"diskName":"data-1","diskURI":"%s","kind":"Managed","cachingMode":"ReadOnly","fsType":"ext4"}}}' "$disk_id")" >/dev/null
  pv_labelled() { kget /api/v1/persistentvolumes/data-1 | grep -q '"topology.kubernetes.io/zone"'; }
  wait_for 60 "PersistentVolume data-1 to get zone labels (see $dir/logs)" pv_labelled
  kget /api/v1/persistentvolumes/data-1 | python3 -c '
import json, sys
pv = json.load(sys.stdin)
labels = pv["metadata"].get("labels", {})
print("pv/data-1 (disk %s): %s" % (pv["spec"]["azureDisk"]["diskName"],
      ", ".join("%s=%s" % kv for kv in sorted(labels.items()))))'
}

# The in-tree volume step (hack/lib/volume-demo.sh): kubernetes.io/azure-disk managed disks,
# attached by LUN with a PATCH of the VM's data disks. Not zoned: the VMs are in an
# availability set, whose Nodes' zones are fault domains; the class allows fault domain 0 only,
# so every run places the pod (and draws the same calls) alike.
azure_volume_class() {
  vol_plugin=kubernetes.io/azure-disk vol_class=azure-disk vol_params='{"skuname":"StandardSSD_LRS","kind":"Managed","zoned":"false"}' vol_zone=0
}
azure_instance_id() { node_name "$1"; }
azure_volume_show() {
  python3 hack/lib/azure-arm.py disk "$1" "$dir/volume-cloud.json" || fail "disk $1"
}

cloud_load_balancer() {
  step "create a LoadBalancer Service (a frontend of the Standard load balancer 'kubernetes'), with a tiny HTTP server on every Node's InternalIP:8080 and :nodePort"
  local svc_json listeners node_port
  svc_json=$(kcreate /api/v1/namespaces/default/services '{"metadata":{"name":"hello"},"spec":{"type":"LoadBalancer","selector":{"app":"hello"},"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}')
  az_frontend=$(python3 -c 'import json,sys; print(("a" + json.loads(sys.argv[1])["metadata"]["uid"].replace("-", ""))[:32])' "$svc_json")
  node_port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["spec"]["ports"][0]["nodePort"])' "$svc_json")
  # With floating IP the backend gets the Service port (kube-proxy's catch); the probe asks
  # the NodePort.
  listeners=$(kget /api/v1/nodes | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    name = n["metadata"]["name"]
    ips = [a["address"] for a in n.get("status", {}).get("addresses", []) if a["type"] == "InternalIP"]
    if name.startswith("node-") and ips:
        print("%s:8080:%s %s:%s:%s" % (ips[0], name, ips[0], sys.argv[1], name))' "$node_port")
  # shellcheck disable=SC2086 # one ADDRESS:PORT:NAME word per listener
  python3 hack/lib/hello-backend.py $listeners >"$dir/logs/hello-backend.log" 2>&1 &
  pids+=($!)
  wait_for_ingress_ip
  echo "load balancer ready: $vip:8080 (load balancer kubernetes, frontend $az_frontend)"
  az_arm get "resourceGroups/$az_group/providers/Microsoft.Network/loadBalancers/kubernetes" | python3 -c '
import json, sys
lb = json.load(sys.stdin)
p = lb["properties"]
tail = lambda i: i.rsplit("/", 1)[-1]
for r in p.get("loadBalancingRules", []):
    rp = r["properties"]
    print("  rule %s: %s %s -> %s, probe %s, floating IP %s" % (r["name"], rp["protocol"], rp["frontendPort"], rp["backendPort"],
          tail(rp.get("probe", {}).get("id", "-")), rp.get("enableFloatingIP")))
for b in p.get("backendAddressPools", []):
    print("  pool %s: %s" % (b["name"], " ".join(sorted(tail(c["id"].split("/ipConfigurations/")[0]) for c in b["properties"].get("backendIPConfigurations", [])))))'
  curl_through_lb
}

cloud_banner() {
  cat <<BANNER

Running (logs in $dir/logs, cloud call traces in $dir/*.jsonl):
  load balancer      http://$vip:8080/   (Service default/hello: load balancer kubernetes, frontend ${az_frontend:-})
  kube-apiserver     $api_url   export KUBECONFIG=$kubeconfig
  Resource Manager   $AZURE_ENDPOINT   (CA $REQUESTS_CA_BUNDLE)
  symlinks           $bin
Look with hack/lib/azure-arm.py or the az CLI (hack/python-tools.sh azure-cli installs it):
  export REQUESTS_CA_BUNDLE=$REQUESTS_CA_BUNDLE AZURE_ENDPOINT=$AZURE_ENDPOINT AZURE_TENANT_ID=$AZURE_TENANT_ID \\
    AZURE_CLIENT_ID=$AZURE_CLIENT_ID AZURE_CLIENT_SECRET=hypercloud AZURE_SUBSCRIPTION_ID=$AZURE_SUBSCRIPTION_ID
  python3 hack/lib/azure-arm.py get resourceGroups/$az_group/providers/Microsoft.Compute/virtualMachines
  python3 hack/lib/azure-arm.py post resourceGroups/$az_group/providers/Microsoft.Compute/virtualMachines/node-1/powerOff   (and watch node-1)
Press Ctrl-C to stop everything.
BANNER
}
