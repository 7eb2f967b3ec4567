# shellcheck shell=bash
# The rest of a real cluster around an envtest kube-apiserver, for hack/ scripts (sourced):
# the upstream kube-controller-manager (--cloud-provider=external: its non-cloud controllers),
# the upstream kube-scheduler, kwok playing the kubelets, and the kubelets' power switch
# (hack/lib/kubelet-power.py) that lets kwok run a Node's kubelet only while its instance runs.
# pkg/testenv (cluster.rs) starts the same processes with the same settings for the e2e tests.
#
# The caller defines: dir (state and logs in $dir/logs), kubeconfig, the array pids (every
# process started is appended, for the caller's clean-up), and the functions free_port and fail.
#
#   cluster_bin                       build (cached) and locate the binaries: sets $cluster_bin
#   cluster_start_upstream [FLAGS...] kube-controller-manager + kube-scheduler (extra KCM flags)
#   cluster_start_kubelets VALUE CMD... kwok for the Nodes labelled hypercloud.io/kubelet=VALUE,
#                                     and the power switch fed by CMD (prints the instances)

# How fast a stopped machine's Node turns NotReady. A kubelet renews its Lease every quarter of
# the lease duration (40 s) and the controller manager waits --node-monitor-grace-period (50 s);
# the same proportions, shortened so a demo or a test sees it within half a minute.
CLUSTER_NODE_LEASE_SECONDS=10
CLUSTER_NODE_MONITOR_GRACE=20s
# Pod IPs kwok hands out (data only: nothing connects to them; the Service CIDR is 10.0.0.0/24).
CLUSTER_POD_CIDR=10.244.0.0/16

cluster_bin() {
  cluster_bin="$(hack/cluster.sh bin)" || fail "hack/cluster.sh build"
}

cluster_start_upstream() {
  local pki="$HYPERCLOUD_ENVTEST_DIR/pki"
  "$cluster_bin/kube-controller-manager" --kubeconfig="$kubeconfig" \
    --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
    --cloud-provider=external --bind-address=127.0.0.1 --secure-port="$(free_port)" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --node-monitor-grace-period="$CLUSTER_NODE_MONITOR_GRACE" --v=1 "$@" \
    >"$dir/logs/upstream-kube-controller-manager.log" 2>&1 &
  pids+=($!)
  "$cluster_bin/kube-scheduler" --kubeconfig="$kubeconfig" \
    --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$(free_port)" --v=1 \
    >"$dir/logs/upstream-kube-scheduler.log" 2>&1 &
  pids+=($!)
}

cluster_start_kubelets() {
  local value="$1"
  shift
  "$cluster_bin/kwok" --kubeconfig="$kubeconfig" --config="$repo/hack/lib/kwok-stages.yaml" \
    --manage-nodes-with-label-selector="hypercloud.io/kubelet=$value" \
    --node-lease-duration-seconds="$CLUSTER_NODE_LEASE_SECONDS" --cidr="$CLUSTER_POD_CIDR" \
    >"$dir/logs/kwok.log" 2>&1 &
  pids+=($!)
  python3 "$repo/hack/lib/kubelet-power.py" --kubeconfig="$kubeconfig" --label-value="$value" -- "$@" \
    >"$dir/logs/kubelet-power.log" 2>&1 &
  pids+=($!)
}
